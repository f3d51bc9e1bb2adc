"""The one exception type that the command line turns into a one-line message."""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import groupby

# Hugging Face access tokens ("hf_" and at least 8 letters or digits), whatever their source.
_HF_TOKEN = re.compile(r"hf_[A-Za-z0-9]{8,}")


class QAFinetuneError(Exception):
    """A problem the user can fix: the message names the problem and the fix, on one line."""


class Interrupted(KeyboardInterrupt):
    """Ctrl+C that undid something on the way out: the message says what, for the line the
    command line prints in place of its usual one ("files on disk are intact")."""


class InferenceError(QAFinetuneError):
    """A question, context, input file or model output cannot be answered as given."""


# Pieces of a secret this long are masked too: a server may echo part of a token back.
SECRET_PIECE = 8


def _mask_pieces(text: str, secret: str) -> str:
    """``text`` with each run of characters covered by a ``SECRET_PIECE``-long piece of
    ``secret`` replaced by ``***`` (a secret shorter than that is masked whole)."""
    if len(secret) < SECRET_PIECE:
        return text.replace(secret, "***")
    pieces = {secret[i : i + SECRET_PIECE] for i in range(len(secret) - SECRET_PIECE + 1)}
    hidden = [False] * len(text)
    for i in range(len(text) - SECRET_PIECE + 1):
        if text[i : i + SECRET_PIECE] in pieces:
            hidden[i : i + SECRET_PIECE] = [True] * SECRET_PIECE
    runs = groupby(zip(text, hidden, strict=True), key=lambda pair: pair[1])
    return "".join("***" if masked else "".join(c for c, _ in run) for masked, run in runs)


def scrub_secrets(text: str, *secrets: str | None) -> str:
    """``text`` on one line, with any Hub token, each of ``secrets`` and any piece of them
    ``SECRET_PIECE`` characters long or more masked as ``***``."""
    for secret in secrets:
        if secret and secret.strip():
            text = _mask_pieces(text, secret.strip())
    return " ".join(_HF_TOKEN.sub("***", text).split())


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` that a misspelt ``name`` most likely meant; None when none is
    close (what a "did you mean ...?" names)."""
    import difflib  # only on the way to an error message

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return close[0] if close else None
