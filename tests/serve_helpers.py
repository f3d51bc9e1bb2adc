"""Start `qa-finetune serve` as a real process and talk to it (shared by the serve tests)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import qa_finetune


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def post(url: str, payload: Any) -> tuple[int, Any]:
    request = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, json.loads(response.read())


def start_server(model: Path, port: int, *options: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(qa_finetune.__file__).parents[1])}
    command = [
        sys.executable,
        "-m",
        "qa_finetune.cli.app",
        "serve",
        str(model),
        "--port",
        str(port),
    ]
    return subprocess.Popen(
        [*command, "--no-access-log", *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_ready(base: str, process: subprocess.Popen[str], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0]
        try:
            if get(f"{base}/readyz")[0] == 200:
                return
        except OSError:
            pass  # not listening yet
        time.sleep(0.2)
    raise AssertionError("the server did not become ready")
