"""``ask --batch``: JSON Lines of {question, context[, id]} in, one answer per line out.

With a document index (``ask --batch FILE --index INDEX``) a line may leave ``context`` out
(or null): its question is answered from the indexed documents, its record shaped as
``open_answers.as_records`` makes them.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.errors import InferenceError, QAFinetuneError
from qa_finetune.files import staged_file, surrogate_problem
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.inference.inputs import (
    DEFAULT_MAX_CONTEXT_CHARS,
    check_context_length,
    checked_text,
)
from qa_finetune.inference.open_answers import CollectionSearch, answer_from_collection, as_records

log = logging.getLogger(__name__)

# Pairs answered per model pass when reading a batch file: bounds memory, keeps batches full.
FILE_CHUNK = 256


@dataclass
class _Line:
    number: int
    id: str
    question: str
    context: str | None  # None: answered from the index


def _parse_line(
    raw: str,
    number: int,
    context_optional: bool = False,
    max_context_chars: int = DEFAULT_MAX_CONTEXT_CHARS,
) -> _Line:
    from qa_finetune.files.nesting import load_json

    record = load_json(
        raw,
        "line",
        lambda exc: f"not valid JSON ({exc.msg})",
        InferenceError,
        first_line=None,
        keys_once=True,
    )
    if not isinstance(record, Mapping):
        raise InferenceError("each line must be a JSON object {question, context[, id]}")
    for key in ("question", "context"):
        if key == "context" and context_optional and record.get(key) is None:
            continue
        if key not in record:
            raise InferenceError(f"missing '{key}'")
        checked_text(record[key], key, "")
    if record.get("context") is not None:
        check_context_length(record["context"], max_context_chars)
    raw_id = record.get("id")
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int))):
        # str() of an object or a list is no id anyone gave ("{'x': 1}").
        kinds = {dict: "an object", list: "a list", float: "a decimal number", bool: "a boolean"}
        raise InferenceError(
            f"'id' is {kinds.get(type(raw_id), type(raw_id).__name__)}, not a string or an "
            "integer: give each line's id as text"
        )
    example_id = str(number) if raw_id in (None, "") else str(raw_id)
    problem = surrogate_problem(example_id)
    if problem:
        raise InferenceError(f"the id {problem}: give it as UTF-8 text")
    return _Line(number, example_id, record["question"], record.get("context"))


def read_batch_file(
    path: Path,
    skip_errors: bool,
    context_optional: bool = False,
    max_context_chars: int = DEFAULT_MAX_CONTEXT_CHARS,
) -> tuple[list[_Line], int]:
    """Parse every line first, so a bad line fails before any answer is written.

    Lines are split on ``\\n`` and decoded one by one: a line that is not UTF-8 is one bad
    line (skipped with ``skip_errors``), and contexts keep their bytes (``\\r\\n`` included).
    ``context_optional``: a line without a context is kept (answered from an index); a
    context over ``max_context_chars`` characters is a bad line.
    """
    from qa_finetune.files import BOM, check_file, decode_utf8

    check_file(path, "batch file", "--batch")
    lines, failed = [], 0
    for number, data in enumerate(Path(path).read_bytes().split(b"\n"), 1):
        if not data.strip():
            continue
        try:
            raw = decode_utf8(data, "line")
            line = _parse_line(raw.removeprefix(BOM), number, context_optional, max_context_chars)
            lines.append(line)
        except QAFinetuneError as exc:
            reason = str(exc).removeprefix("line: ")
            if not skip_errors:
                raise InferenceError(
                    f"{path}:{number}: {reason}; fix the line or pass --skip-errors"
                ) from None
            log.warning(f"{path}:{number}: {reason} (skipped)")
            failed += 1
    return lines, failed


def answer_batch_file(
    answerer: QuestionAnswerer,
    path: Path,
    output: Path | None,
    top_k: int = 1,
    allow_no_answer: bool = False,
    skip_errors: bool = False,
    parsed: tuple[list[_Line], int] | None = None,
    collection: CollectionSearch | None = None,
) -> tuple[int, int]:
    """Answer a JSON Lines file of ``{question, context[, id]}``; returns (written, failed).

    Each output line holds ``id, question, answer, score, start, end`` (and ``answers``, the
    ranked list, when ``top_k > 1``). Output goes to ``output`` or stdout. ``parsed`` is what
    ``read_batch_file`` returned, when the caller read the file before loading the model.
    ``collection``: lines without a context are answered from it (their records also name
    the document and passage, as ``as_records`` shapes them).
    """
    lines, failed = parsed if parsed is not None else read_batch_file(Path(path), skip_errors)
    # A question too long for the windows is a per-line problem too.
    good = []
    for line in lines:
        try:
            answerer.check_questions([line.question], labels=[f"{path}:{line.number}: "])
        except InferenceError as exc:
            if not skip_errors:
                raise InferenceError(f"{exc}; fix the line or pass --skip-errors") from exc
            log.warning(f"{exc} (skipped)")
            failed += 1
            continue
        good.append(line)
    settings = {"top_k": top_k, "allow_no_answer": allow_no_answer, "collection": collection}
    if output is None:
        written = _write_answers(answerer, good, sys.stdout.write, **settings)
        sys.stdout.flush()
        return written, failed
    # Written beside --output and renamed at the end: a failure leaves the old file whole.
    with staged_file(Path(output)) as handle:
        written = _write_answers(
            answerer, good, lambda text: handle.write(text.encode()), **settings
        )
    return written, failed


def _write_answers(
    answerer: QuestionAnswerer,
    lines: list[_Line],
    write: Callable[[str], Any],
    top_k: int,
    allow_no_answer: bool,
    collection: CollectionSearch | None,
) -> int:
    """Answer ``lines`` a chunk at a time, one JSON line each through ``write``."""
    written = 0
    for begin in range(0, len(lines), FILE_CHUNK):
        chunk = lines[begin : begin + FILE_CHUNK]
        results = _answer_chunk(answerer, chunk, top_k, allow_no_answer, collection)
        for line, answers in zip(chunk, results, strict=True):
            record: dict[str, Any] = {"id": line.id, "question": line.question, **answers[0]}
            if top_k > 1:
                record["answers"] = answers
            write(json.dumps(record, ensure_ascii=False) + "\n")
            written += 1
    return written


def _answer_chunk(
    answerer: QuestionAnswerer,
    chunk: list[_Line],
    top_k: int,
    allow_no_answer: bool,
    collection: CollectionSearch | None,
) -> list[list[dict[str, Any]]]:
    """Each line's ranked answers: from its context, or, without one, from the collection."""
    pairs = [(line.question, line.context) for line in chunk if line.context is not None]
    from_context = iter(answerer.answer_batch(pairs, top_k, allow_no_answer))
    searched = [line.question for line in chunk if line.context is None]
    from_index: Any = iter([])
    if searched:
        assert collection is not None  # read_batch_file keeps such lines only with an index
        found = answer_from_collection(
            answerer,
            collection.retriever,
            searched,
            collection.top_passages,
            top_k,
            collection.use_rule,
        )
        from_index = iter(as_records(answers) for answers in found)
    return [next(from_context if line.context is not None else from_index) for line in chunk]
