"""Documents named as a client of a server may see them: by their path within the folder
that was indexed, never by that folder's place on this machine.

An index names a document as ``index`` found it (``documents/walking.py``): a folder's file
as "<folder as given>/<path inside>", a named file by its path as given, a SQuAD context as
"<file as given>#<title>". Given as absolute paths, those names hold the indexing machine's
folders; ``ask`` shows them to the user who indexed, ``serve`` answers strangers with the
part below the folder named (``guide/setup.md``; a named file by its own name,
``notes.txt``, ``squad.json#Title``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from qa_finetune.files import name_as_text


def names_within_sources(names: Iterable[str], sources: Sequence[str]) -> dict[str, str]:
    """Each of ``names`` (an index's document names) as its path within the source it was
    found under: ``sources`` are the paths the index was built from, in the order given, as
    its manifest keeps them."""
    shown_sources = [name_as_text(str(source)) for source in sources]
    return {name: _within(name, shown_sources) for name in names}


def _within(name: str, sources: Sequence[str]) -> str:
    """``name`` below the first source it was found under (walked in that order, a file is
    named under the first folder that holds it); its last part when none is known."""
    for source in sources:
        if name == source or name.startswith(source + "#"):  # a named file, a SQuAD context
            return _last_part(source) + name[len(source) :]
        folder = "" if source == "." else source.rstrip("/") + "/"
        if name.startswith(folder) and len(name) > len(folder):
            return name[len(folder) :]
    return _last_part(name)


def _last_part(path: str) -> str:
    """The last part of a path: the file's own name."""
    return path.rstrip("/").rsplit("/", 1)[-1]
