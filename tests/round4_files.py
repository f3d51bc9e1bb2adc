"""What the round-four bad-input tests share: a snapshot of a whole tree (every file's bytes,
every folder) and small SQuAD files to feed the commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONTEXT = "Alma Stroud designed the bridge in 1931."


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder (None) under ``root``, by relative name."""
    return {
        path.relative_to(root).as_posix(): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


def articles(count: int, shared_context: bool = False, questions: int = 1) -> list[Any]:
    """``count`` SQuAD articles titled t0, t1, ...; each paragraph's context is its own unless
    ``shared_context``, and holds ``questions`` answerable questions (ids q<article>-<n>)."""
    made = []
    for number in range(count):
        context = CONTEXT if shared_context else f"{CONTEXT} Doc {number}."
        qas = [
            {
                "id": f"q{number}-{k}",
                "question": f"Who designed bridge {number} {k}?",
                "answers": [{"text": "Alma Stroud", "answer_start": 0}],
            }
            for k in range(questions)
        ]
        made.append({"title": f"t{number}", "paragraphs": [{"context": context, "qas": qas}]})
    return made


def squad_file(path: Path, count: int = 6, **kwargs: Any) -> Path:
    """A SQuAD file of ``articles(count, ...)`` at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"data": articles(count, **kwargs)}), encoding="utf-8")
    return path
