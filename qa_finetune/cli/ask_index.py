"""``ask --index``: answer from a folder of documents indexed by ``qa-finetune index``.

The index opens before the model loads, so a missing or damaged index fails in a second,
not after the model's load. The answer names its document and its character offsets in that
document's text, and shows the passage around it with the answer between « and ».
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from qa_finetune.cli.answer_lines import answer_line, percent
from qa_finetune.cli.ask_batch import answer_batch, read_batch
from qa_finetune.cli.terminal import one_line, visible
from qa_finetune.decoding.across_passages import DEFAULT_TOP_PASSAGES
from qa_finetune.errors import QAFinetuneError

if TYPE_CHECKING:
    from qa_finetune.inference.answerer import QuestionAnswerer

# About this many characters of the passage are shown around an answer.
EXCERPT_CHARS = 200

IndexOption = Annotated[
    Path | None,
    typer.Option(
        "--index",
        help="Answer from the documents of this index (`qa-finetune index`) instead of a "
        "context; with --batch, lines may leave out their context.",
    ),
]
TopPassagesOption = Annotated[
    int | None,
    typer.Option(
        "--top-passages",
        min=1,
        max=100,
        help=f"With --index: passages read per question at most (the best first, the others "
        f"when it is not sure of it) [default: {DEFAULT_TOP_PASSAGES}].",
    ),
]
RetrieverOption = Annotated[
    str | None,
    typer.Option(
        "--retriever",
        help="With --index: how passages are found: bm25 (shared words), dense (meaning: "
        "the passages' embeddings) or hybrid (both, fused) [default: hybrid when the index "
        "holds embeddings, else bm25].",
    ),
]
RETRIEVERS = ("bm25", "dense", "hybrid")


def check_retriever(retriever: str | None, index: Any = True, needs: str = "--index") -> None:
    """One line for a retriever name that is not one of ours, or one given without the
    option it applies to (``index`` None: ``--index`` is missing)."""
    if retriever is not None and retriever not in RETRIEVERS:
        raise QAFinetuneError(
            f"--retriever {retriever!r} is not a retriever: use bm25, dense or hybrid"
        )
    if retriever is not None and not index:
        add = "--index INDEX" if needs == "--index" else needs
        raise QAFinetuneError(
            f"--retriever {retriever} sets how {needs} searches: add {add}, or drop --retriever"
        )


@dataclass(frozen=True)
class IndexAsk:
    """What ``ask --index`` was asked, besides the question or batch file."""

    index: Path
    top_passages: int
    top_k: int
    allow_no_answer: bool
    as_json: bool
    retriever: str | None = None  # None: hybrid when the index holds embeddings, else bm25
    max_context_chars: int | None = None  # the longest context of a --batch line (None: default)


def check_index_options(
    index: Path | None,
    top_passages: int | None,
    context: str | None,
    context_file: Path | None,
    retriever: str | None = None,
) -> None:
    """Refuse what ``--index`` would ignore: a context given as well, ``--top-passages`` or
    ``--retriever`` without an index."""
    check_retriever(retriever)
    if index is None and top_passages is None:
        raise QAFinetuneError(
            f"--retriever {retriever} sets how passages of --index are found: add --index "
            "INDEX, or drop --retriever"
        )
    if index is None:
        raise QAFinetuneError(
            f"--top-passages {top_passages} sets how many passages of --index are read: add "
            "--index INDEX, or drop --top-passages"
        )
    options = (("--context", context), ("--context-file", context_file))
    given = [name for name, value in options if value is not None]
    if given:
        raise QAFinetuneError(
            f"{given[0]} does not apply to --index: the answer comes from the indexed "
            f"documents (drop {given[0]}, or drop --index to answer from your text)"
        )


def ask_from_index(
    question: str | None,
    asked: IndexAsk,
    load: Callable[..., QuestionAnswerer],
    batch: Path | None = None,
    output: Path | None = None,
    overwrite: bool = False,
    skip_errors: bool = False,
) -> None:
    """Answer ``question`` (or each line of ``batch``) from the index; ``load(tune_batch)``
    loads the model, called once the index is open."""
    from qa_finetune.inference.inputs import checked_text
    from qa_finetune.inference.open_answers import CollectionSearch, answer_from_collection
    from qa_finetune.modeling.index_search import open_for_search
    from qa_finetune.runs.lookup import trained_with_no_answer

    parsed = None
    if batch is not None:
        limit = asked.max_context_chars
        parsed = read_batch(batch, skip_errors, output, overwrite, True, limit)
    elif question is None:
        raise QAFinetuneError('no question: qa-finetune ask "QUESTION" --index INDEX')
    else:
        checked_text(question, "question", "")
    index, note = open_for_search(asked.index, asked.retriever)
    if note:
        typer.echo(f"note: {note}", err=True)
    answerer = load(tune_batch=batch is not None)
    # A run trained with questions that have no answer answers with its rule: a passage it
    # says holds no answer is left out. Elsewhere only --allow-no-answer turns the rule on.
    use_rule = asked.allow_no_answer or trained_with_no_answer(answerer.model_dir)
    if batch is not None:
        collection = CollectionSearch(index, asked.top_passages, use_rule)
        answer_batch(
            answerer,
            batch,
            output,
            parsed,
            skip_errors,
            top_k=asked.top_k,
            allow_no_answer=asked.allow_no_answer,
            collection=collection,
        )
        return
    assert question is not None  # checked above
    answers = answer_from_collection(
        answerer, index, [question], asked.top_passages, asked.top_k, use_rule
    )[0]
    print_index_answers(answers, asked.top_k, asked.as_json)


def print_index_answers(answers: list[dict[str, Any]], top_k: int, as_json: bool) -> None:
    """One JSON document (one record with ``--top-k 1``, else a list: see
    ``open_answers.as_records``), or each answer with its source and passage."""
    if as_json:
        from qa_finetune.inference.open_answers import as_records

        records = as_records(answers)
        typer.echo(json.dumps(records[0] if top_k == 1 else records, ensure_ascii=False))
        return
    if not answers:
        from qa_finetune.inference.open_answers import NO_ANSWER_MESSAGE

        typer.echo(NO_ANSWER_MESSAGE)
        return
    for rank, item in enumerate(answers, 1):
        prefix = f"{rank}. " if top_k > 1 else ""
        indent = " " * (len(prefix) + 2)
        if item.get("not_sure"):
            typer.echo(prefix + answer_line(item) + f" from {visible(item['document'])}")
            continue
        sure = f"confidence {percent(item['confidence'])}, " if "confidence" in item else ""
        scores = (
            f"{sure}score {item['score']:.3f}, reader {item['reader_score']:.2f}, "
            f"retrieval {item['retrieval_score']:.2f}, passage rank {item['retrieval_rank']}"
        )
        # Documents are the user's data: escape sequences in them are shown, not obeyed; an
        # answer across a line end is shown on one line, a paragraph break as ¶ (--json keeps
        # it exact).
        typer.echo(f"{prefix}{visible(_fold(item['answer']))}  ({scores})")
        typer.echo(f"{indent}from {visible(item['document'])}, chars {item['start']}-{item['end']}")
        offset = item["passage_start"]
        shown = excerpt(item["passage_text"], item["start"] - offset, item["end"] - offset)
        typer.echo(indent + visible(shown))


def excerpt(text: str, start: int, end: int, width: int = EXCERPT_CHARS) -> str:
    """About ``width`` characters of ``text`` around ``[start, end)``, the span between « and
    », cut between words with … where the text goes on; runs of white space (line ends
    included) are shown as one space and a paragraph break as ¶, so the excerpt is one line."""
    room = max(0, width - (end - start)) // 2
    left, right = max(0, start - room), min(len(text), end + room)
    if left > 0 and not text[left - 1].isspace():
        first = _SPACE.search(text, left, start)  # the word cut in two is left out
        left = first.end() if first else left
    if right < len(text) and not text[right].isspace():
        spaces = [m.start() for m in _SPACE.finditer(text, end, right)]
        right = spaces[-1] if spaces else right
    shown = f"{_fold(text[left:start])}«{_fold(text[start:end])}»{_fold(text[end:right])}"
    return f"{'…' if left > 0 else ''}{shown.strip()}{'…' if right < len(text) else ''}"


_SPACE = re.compile(r"\s")


def _fold(text: str) -> str:
    return one_line(text)
