"""The one exception type that the command line turns into a one-line message."""

from __future__ import annotations

import re

# Hugging Face access tokens ("hf_" and at least 8 letters or digits), whatever their source.
_HF_TOKEN = re.compile(r"hf_[A-Za-z0-9]{8,}")


class QAFinetuneError(Exception):
    """A problem the user can fix: the message names the problem and the fix, on one line."""


class InferenceError(QAFinetuneError):
    """A question, context, input file or model output cannot be answered as given."""


def scrub_secrets(text: str, *secrets: str | None) -> str:
    """``text`` on one line, with any Hub token (and each of ``secrets``) masked as ``***``."""
    for secret in secrets:
        if secret and secret.strip():
            text = text.replace(secret.strip(), "***")
    return " ".join(_HF_TOKEN.sub("***", text).split())
