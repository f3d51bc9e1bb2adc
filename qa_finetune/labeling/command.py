"""Run the labeling page: documents loaded, the journal replayed, uvicorn on loopback.

Every change is on disk before the page hears it was saved, so SIGTERM, Ctrl-C or a kill
loses nothing; starting again on the same ``--output`` continues from the journal.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.labeling.documents import DocumentError, load_documents
from qa_finetune.labeling.store import LabelStore
from qa_finetune.runs.targets import refuse_link
from qa_finetune.serving.listen_address import check_host, reachable_note

log = logging.getLogger("qa_finetune.labeling.command")


def check_output(output: Path) -> None:
    """The output must be a JSON file path in an existing folder, not a symbolic link."""
    refuse_link(output, "--output")
    if output.suffix.lower() != ".json":
        raise DocumentError(f"--output {output}: name a .json file (SQuAD JSON is written)")
    if output.is_dir():
        raise DocumentError(f"--output {output} is a folder: name a .json file inside it")
    if not output.parent.is_dir():
        raise DocumentError(f"--output {output}: folder {output.parent} does not exist: make it")


def open_store(paths: list[Path], output: Path) -> LabelStore:
    """The store over the documents (and the output's own, when it exists), opened."""
    check_output(output)
    sources = [*paths]
    if output.exists() and output.resolve() not in {p.resolve() for p in paths}:
        sources.append(output)  # continue it: its questions and documents are kept
    store = LabelStore(load_documents(sources), output)
    store.open()
    return store


def check_label_host(host: str, allow_remote: bool) -> str | None:
    """Refuse an empty ``--host``, and one beyond loopback unless ``allow_remote``: the page
    asks no password, shows the documents and writes the output. Returns the line to show
    when the page will be reachable from the network."""
    check_host(host)
    note = reachable_note(host, "labeling page")
    if note and not allow_remote:
        raise QAFinetuneError(
            f"--host {host} is not loopback: the labeling page asks no password, shows your "
            "documents and writes --output, for anyone who can reach this machine; keep the "
            "default 127.0.0.1, or add --allow-remote"
        )
    return note


def proposer_for(model: str, backend: str) -> Any:
    """``(question, context, top_k) -> answers`` from a run, model folder or package."""
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(model, backend=backend)
    return lambda question, context, top_k: answerer.answer(question, context, top_k=top_k)


def run_label(
    paths: list[Path],
    output: Path,
    model: str | None = None,
    backend: str = "auto",
    host: str = "127.0.0.1",
    port: int = 8001,
    allow_remote: bool = False,
) -> None:
    """Serve the labeling page until SIGTERM or Ctrl-C (on a ``host`` beyond loopback only
    with ``allow_remote``)."""
    check_label_host(host, allow_remote)
    from qa_finetune.serving.command import _check_port, require_serve_extra

    require_serve_extra()
    import uvicorn

    from qa_finetune.labeling.app import create_label_app
    from qa_finetune.serving.uvicorn_config import run_until_sigterm

    # A port in use fails before the output, its journal or its lock is made (serve's check).
    _check_port(host, port)
    store = open_store(paths, output)  # bad documents fail before a (slow) model load
    try:
        proposer = proposer_for(model, backend) if model else None
        counts = store.counts()
        log.info(
            "%d documents, %d questions; saving to %s; open http://%s:%d/",
            counts["documents"],
            counts["questions"],
            output,
            host,
            port,
        )
        config = uvicorn.Config(create_label_app(store, proposer), host=host, port=port)
        server = uvicorn.Server(config)
        run_until_sigterm(server)  # SIGTERM: a graceful stop and exit 0
        if not server.started:
            raise QAFinetuneError(f"the page did not start on {host}:{port}: pick another --port")
    finally:
        store.close()
