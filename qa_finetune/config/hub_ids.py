"""What the Hugging Face Hub accepts as a repository id: one rule for models, datasets and
pushes, so a name that passes here is not refused later by the Hub (or the other way round)."""

from __future__ import annotations

import re

# One part of an id: letters, digits, "-", "_", "."; starts and ends with a letter or digit
# ("_" may end it); no "--" or ".." anywhere (the Hub reserves them).
_PART = r"[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9_])?"
_ID = re.compile(rf"^(?:{_PART}/)?{_PART}$")
# The Hub's limit on a repository's name (huggingface_hub checks it too); the user or
# organization part is held to it as well, so a 200-character id fails here, not at upload.
MAX_NAME_LENGTH = 96


def is_hub_id(text: str, namespace_required: bool = False) -> bool:
    """True for ``name`` or ``namespace/name`` as the Hub spells them (``namespace/name`` only
    with ``namespace_required``, as a push target must be)."""
    if not _ID.match(text) or ".." in text or "--" in text:
        return False
    namespace, slash, name = text.rpartition("/")
    if namespace_required and not slash:
        return False
    # huggingface_hub refuses a name ending in .git (it would address the git remote).
    return max(len(namespace), len(name)) <= MAX_NAME_LENGTH and not name.endswith(".git")
