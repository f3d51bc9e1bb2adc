"""uvicorn's side of ``serve``: its options (address, logging, connection bounds), the
``qa_finetune`` loggers in its format, and the "Ready" line once it listens."""

from __future__ import annotations

import logging
import signal
from functools import partial
from typing import Any

KEEP_ALIVE_SECONDS = 5  # an idle keep-alive connection is closed after this
log = logging.getLogger("qa_finetune.serving.command")


def run_until_sigterm(server: Any) -> None:
    """Run a ``uvicorn.Server`` until SIGTERM or Ctrl-C, then return normally.

    uvicorn shuts down gracefully on SIGTERM and then raises the signal again for the default
    action (death by signal, exit status 143). A handler that does nothing turns that second
    delivery into a normal exit 0: the service stopped as it was asked to."""
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        server.run()
    finally:
        signal.signal(signal.SIGTERM, previous)


def ready_line(url: str, info: dict[str, Any]) -> str:
    """The line that tells a deployer the server answers, and what."""
    index = info.get("index")
    searched = f", index {index['name']}: {index['documents']} documents" if index else ""
    return f"Ready: {url} (model {info['model']}, backend {info['backend']}{searched})"


def server_url(host: str, port: int) -> str:
    """The URL a client uses to reach ``host:port`` (an IPv6 address in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def uvicorn_options(
    host: str, port: int, read_timeout: float, max_connections: int
) -> dict[str, Any]:
    """uvicorn's settings: the address, logging, and the bounds on connections."""
    from qa_finetune.serving.protocol import HeaderTimeoutH11Protocol

    return {
        "host": host,
        "port": port,
        # The app logs each request itself (serving/access_log.py), with its request id.
        "access_log": False,
        "log_config": _log_config(),
        "log_level": "info",
        "lifespan": "on",
        # A partial of a module-level class: picklable for the --workers processes.
        "http": partial(HeaderTimeoutH11Protocol, header_timeout=read_timeout),
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
        # A request that arrives while more connections (its own counted) or requests are
        # open is answered 503 by uvicorn.
        "limit_concurrency": max_connections + 1,
    }


def _log_config() -> dict[str, Any]:
    """uvicorn's logging, plus the ``qa_finetune`` loggers in its format: the access lines on
    stdout (where uvicorn's own went), the rest on stderr beside uvicorn's lines."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["qa_access"] = {
        "formatter": "default",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stdout",
    }
    config["loggers"]["qa_finetune"] = {"handlers": ["default"], "level": "INFO"}
    config["loggers"]["qa_finetune"]["propagate"] = False
    config["loggers"]["qa_finetune.serving.access"] = {
        "handlers": ["qa_access"],
        "level": "INFO",
        "propagate": False,
    }
    return config


def ready_server(line: str) -> Any:
    """A ``uvicorn.Server`` class that logs ``line`` once it listens."""
    import uvicorn

    class ReadyServer(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                log.info(line)

    return ReadyServer
