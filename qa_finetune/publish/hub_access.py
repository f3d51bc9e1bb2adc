"""Reaching the Hub: the token (where it comes from, its shape), the endpoint, and what a
failed Hub call means, in one line that never holds the token or a piece of it."""

from __future__ import annotations

import os

from qa_finetune.errors import QAFinetuneError, scrub_secrets

DEFAULT_ENDPOINT = "https://huggingface.co"


def _scrub(text: str, token: str | None) -> str:
    """``text`` with the token (and anything shaped like a Hub token) masked, on one line."""
    return scrub_secrets(text, token)


def resolve_token(token: str | None) -> str:
    """``--token``, then ``HF_TOKEN``, then the cached ``huggingface-cli login``.

    Whitespace around a pasted token is not part of it; inside it, it is an error.
    """
    for source, value in (("--token", token), ("HF_TOKEN", os.environ.get("HF_TOKEN"))):
        if value and value.strip():
            return _checked_token(value.strip(), source)
    import huggingface_hub

    cached = (huggingface_hub.get_token() or "").strip()
    if cached:
        return _checked_token(cached, "the cached login")
    raise QAFinetuneError("no Hugging Face token: run `huggingface-cli login` or set HF_TOKEN")


def _checked_token(token: str, source: str) -> str:
    """``token`` if it can be one: printable ASCII without spaces. A line break pasted into
    it would otherwise fail in the HTTP header, far from its cause."""
    if all(c.isascii() and c.isprintable() and not c.isspace() for c in token):
        return token
    # The message names where the token came from, never the token itself.
    raise QAFinetuneError(
        f"the Hub token from {source} holds a space, line break or control character: "
        "paste it again as one line (letters, digits and punctuation only)"
    )


def hub_endpoint() -> str:
    """The Hub URL: ``HF_ENDPOINT`` (a mirror or a local stand-in) or huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def explain_failure(exc: BaseException, repo_id: str, endpoint: str, token: str) -> QAFinetuneError:
    """A one-line, token-free error for a failed Hub call."""
    import requests
    from huggingface_hub.errors import OfflineModeIsEnabled

    # The client wraps some failures (LFS uploads) in RuntimeError: look down the chain.
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    for error in chain:
        if isinstance(error, OfflineModeIsEnabled):
            return QAFinetuneError("HF_HUB_OFFLINE is set: unset it to push, or use --dry-run")
        # HTTPError is an OSError too: an answer from the server is checked first.
        if isinstance(error, requests.HTTPError) and error.response is not None:
            status = error.response.status_code
            if status == 401:
                return QAFinetuneError(
                    f"the Hub at {endpoint} rejected the token (401 unauthorised): it is invalid "
                    "or expired; create a write token at https://huggingface.co/settings/tokens "
                    "and run `huggingface-cli login` or set HF_TOKEN"
                )
            if status == 403:
                return QAFinetuneError(
                    f"no write access to {repo_id} (403 forbidden): the repo belongs to someone "
                    "else or the token is read-only; push to your own namespace "
                    "(your-username/name) or use a token with write access"
                )
            server = getattr(error, "server_message", None) or str(error).partition("\n")[0]
            return QAFinetuneError(
                _scrub(f"the Hub refused the push to {repo_id} (HTTP {status}): {server}", token)
            )
        if isinstance(error, (requests.ConnectionError, requests.Timeout, OSError)):
            return QAFinetuneError(
                f"cannot reach the Hub at {endpoint}: check the network or use --dry-run"
            )
    return QAFinetuneError(_scrub(f"push to {repo_id} failed: {type(exc).__name__}: {exc}", token))
