"""The ``qa-finetune`` command line: one thin command per workflow.

Heavy modules (datasets, transformers, TensorFlow) are imported inside each command so that
``qa-finetune --help`` answers at once.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from qa_finetune.cli.native_logs import import_tensorflow_quietly
from qa_finetune.errors import QAFinetuneError, scrub_secrets

# Locals are never shown in tracebacks: they can hold a Hub token.
app = typer.Typer(
    help="Fine-tune, run, score and publish extractive question-answering models.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)

F = TypeVar("F", bound=Callable[..., Any])

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (see configs/).")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override any config key: section.key=value (repeatable)."),
]
ModelOption = Annotated[
    str | None, typer.Option("--model", "-m", help="Model: local dir, run dir, package or Hub id.")
]
TrainFileOption = Annotated[
    str | None, typer.Option("--train-file", help="Training data: SQuAD JSON, JSONL, CSV, Parquet.")
]
ValidationFileOption = Annotated[
    str | None, typer.Option("--validation-file", help="Validation data file (same formats).")
]
DatasetOption = Annotated[
    str | None, typer.Option("--dataset", help="Hugging Face Hub dataset name, e.g. squad.")
]
AllowUntrainedOption = Annotated[
    bool,
    typer.Option(
        "--allow-untrained-head",
        help="Do not warn when the model has no trained QA head (a base encoder).",
    ),
]
OutputDirOption = Annotated[
    str | None, typer.Option("--output-dir", help="Root folder for runs and feature caches.")
]


def _fail(message: str, code: int = 1) -> None:
    # Every message is scrubbed here, whatever raised it: a server may echo a token back.
    typer.secho(f"error: {scrub_secrets(message)}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def friendly_errors(command: F) -> F:
    """Turn known failures into one line on stderr and a non-zero exit, without a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except QAFinetuneError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted; completed checkpoints and files on disk are intact", 130)
        except MemoryError:
            _fail("out of memory: lower --batch-size or --max-length")
        except OSError as exc:
            # Unwritable or impossible output paths (read-only, a file where a folder should be).
            where = f" {exc.filename}" if exc.filename else ""
            reason = exc.strerror or str(exc) or type(exc).__name__
            _fail(f"cannot use{where}: {reason} (check the path and its permissions)")

    return wrapper  # type: ignore[return-value]


def _resolve(
    config_path: Path | None, assignments: list[str] | None, **flags: dict[str, Any]
) -> Any:
    from qa_finetune.config import resolve_config

    return resolve_config(config_path, flags, assignments)


@app.command()
@friendly_errors
def prepare(
    config: ConfigOption = None,
    train_file: TrainFileOption = None,
    validation_file: ValidationFileOption = None,
    dataset: DatasetOption = None,
    model: ModelOption = None,
    max_length: Annotated[int | None, typer.Option(help="Tokens per window.")] = None,
    stride: Annotated[
        int | None, typer.Option(help="Tokens shared by consecutive windows.")
    ] = None,
    output_dir: OutputDirOption = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail on any repaired or dropped example.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when cached.")] = False,
    set_: SetOption = None,
) -> None:
    """Load and validate data, build the windowed features and cache them."""
    from qa_finetune.core.summary import print_prepare_report
    from qa_finetune.training.prepare import prepare as run_prepare

    resolved = _resolve(
        config,
        set_,
        model={"name_or_path": model},
        data={
            "train_file": train_file,
            "validation_file": validation_file,
            "dataset": dataset,
            "strict": strict or None,
        },
        preprocess={"max_length": max_length, "stride": stride},
        train={"output_dir": output_dir},
    )
    prepared = run_prepare(resolved, force=force)
    print_prepare_report(prepared.report, prepared.cache_dir, prepared.reused)


@app.command()
@friendly_errors
def train(
    config: ConfigOption = None,
    model: ModelOption = None,
    train_file: TrainFileOption = None,
    validation_file: ValidationFileOption = None,
    dataset: DatasetOption = None,
    epochs: Annotated[float | None, typer.Option(help="Epochs (fractions allowed).")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Global batch size.")] = None,
    learning_rate: Annotated[float | None, typer.Option(help="Peak learning rate.")] = None,
    max_length: Annotated[int | None, typer.Option(help="Tokens per window.")] = None,
    stride: Annotated[int | None, typer.Option(help="Tokens shared by windows.")] = None,
    run_name: Annotated[str | None, typer.Option(help="Run directory name.")] = None,
    output_dir: OutputDirOption = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted run.")] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing run directory.")
    ] = False,
    push_to_hub: Annotated[
        bool, typer.Option("--push-to-hub", help="Publish the run when training ends.")
    ] = False,
    repo_id: Annotated[str | None, typer.Option(help="Hub repo for --push-to-hub.")] = None,
    set_: SetOption = None,
) -> None:
    """Fine-tune a QA model, evaluating each epoch; writes a self-describing run directory."""
    if push_to_hub and not repo_id:
        _fail("--push-to-hub needs --repo-id USER/NAME")
    if resume and overwrite:
        _fail("--resume continues a run and --overwrite replaces it: choose one")
    from qa_finetune.config import Config, apply_overrides, requested_values

    # Resolved before TensorFlow loads, so a config mistake fails at once.
    requested = requested_values(
        config,
        {
            "model": {"name_or_path": model},
            "data": {
                "train_file": train_file,
                "validation_file": validation_file,
                "dataset": dataset,
            },
            "preprocess": {"max_length": max_length, "stride": stride},
            "train": {
                "epochs": epochs,
                "batch_size": batch_size,
                "learning_rate": learning_rate,
                "run_name": run_name,
                "output_dir": output_dir,
            },
        },
        set_,
    )
    resolved = apply_overrides(Config(), requested)
    import_tensorflow_quietly()
    from qa_finetune.training.train import train as run_train

    run_dir = run_train(resolved, resume=resume, overwrite=overwrite, requested=requested)
    if push_to_hub and repo_id:
        from qa_finetune.publish.hub import push_run

        result = push_run(run_dir, repo_id)
        typer.echo(f"Pushed to {result.url}")


def _stdin_bytes(wait: bool) -> bytes | None:
    """What is piped on stdin; None for a terminal, or (``wait`` False) when nothing is ready.

    Without ``wait`` an open but silent pipe is not read: it would block forever.
    """
    stream = sys.stdin
    if stream is None or stream.isatty():
        return None
    if not wait:
        try:
            import select

            ready, _, _ = select.select([stream.fileno()], [], [], 0)
            if not ready:
                return None
        except (OSError, ValueError, io.UnsupportedOperation):
            pass  # no file descriptor (an in-memory stream): reading cannot block
    buffer = getattr(stream, "buffer", None)
    return buffer.read() if buffer is not None else stream.read().encode("utf-8")


def _read_context(context: str | None, context_file: Path | None) -> str:
    """The context exactly as given: files and stdin are decoded, never newline-translated,
    so answer offsets count the characters of the file."""
    from qa_finetune.core.textio import decode_utf8, read_text

    given = [name for name, v in (("--context", context), ("--context-file", context_file)) if v]
    if len(given) > 1:
        raise QAFinetuneError("give the context once: --context or --context-file, not both")
    if given:
        piped = _stdin_bytes(wait=False)
        if piped and piped.strip():
            raise QAFinetuneError(
                f"give the context once: {given[0]} or stdin, not both "
                "(drop the option or the pipe)"
            )
    if context_file is not None:
        return read_text(context_file, "context file", "--context-file")
    if context is not None:
        return context
    piped = _stdin_bytes(wait=True)
    if piped is not None:
        return decode_utf8(piped, "stdin")
    raise QAFinetuneError(
        "no context: pass --context TEXT, --context-file PATH or pipe it on stdin"
    )


@app.command()
@friendly_errors
def ask(
    question: Annotated[str | None, typer.Argument(help="The question.")] = None,
    context: Annotated[str | None, typer.Option("--context", help="Context text.")] = None,
    context_file: Annotated[
        Path | None, typer.Option("--context-file", help="Read the context from a file.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Run dir, model dir or Hub id (default: latest run)."),
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="Number of answers.")] = 1,
    max_answer_length: Annotated[
        int | None,
        typer.Option(min=1, help="Longest answer, tokens (default: the run's setting, else 30)."),
    ] = None,
    max_length: Annotated[int | None, typer.Option(help="Tokens per window.")] = None,
    stride: Annotated[int | None, typer.Option(help="Tokens shared by windows.")] = None,
    allow_no_answer: Annotated[
        bool,
        typer.Option(
            "--allow-no-answer",
            help="Return '' when the question looks unanswerable (SQuAD v2), by the same rule "
            "and inference.null_score_diff_threshold as evaluate.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    batch: Annotated[
        Path | None,
        typer.Option("--batch", help="JSON Lines of {question, context[, id]}: answer them all."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Where --batch writes answers (JSONL).")
    ] = None,
    skip_errors: Annotated[
        bool, typer.Option("--skip-errors", help="In --batch, report bad lines and go on.")
    ] = False,
    output_dir: OutputDirOption = None,
    allow_untrained_head: AllowUntrainedOption = False,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="auto (ONNX when the model folder has model.onnx, else TensorFlow), tf or onnx.",
        ),
    ] = "auto",
) -> None:
    """Answer a question from a context of any length."""
    from qa_finetune.inference.batch_files import read_batch_file
    from qa_finetune.inference.inputs import check_pair
    from qa_finetune.runs.lookup import latest_run

    text = ""
    parsed = None
    if batch is not None:
        # Every line is read and checked before the model loads, so a mistake fails at once.
        parsed = read_batch_file(batch, skip_errors)
        if parsed[1] and not parsed[0]:
            raise QAFinetuneError(
                f"all {parsed[1]} lines of {batch} were skipped: fix them (see above)"
            )
    else:
        # The input is checked before the model loads, so a mistake fails at once.
        if question is None:
            raise QAFinetuneError('no question: qa-finetune ask "QUESTION" --context TEXT')
        text = _read_context(context, context_file)
        check_pair(question, text)
    reference = model or str(latest_run(Path(output_dir or "outputs")))
    from qa_finetune.modeling.onnx_backend import choose_backend
    from qa_finetune.modeling.reference import resolve_model_dir

    # The ONNX path never imports TensorFlow: that import alone costs seconds.
    if choose_backend(resolve_model_dir(reference), backend) == "tf":
        import_tensorflow_quietly()
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.inference.batch_files import answer_batch_file

    answerer = QuestionAnswerer.load(
        reference,
        max_length=max_length,
        stride=stride,
        max_answer_length=max_answer_length,
        warn_untrained_head=not allow_untrained_head,
        backend=backend,
    )
    if batch is not None:
        written, failed = answer_batch_file(
            answerer,
            batch,
            output,
            top_k=top_k,
            handle_impossible_answer=allow_no_answer,
            skip_errors=skip_errors,
            parsed=parsed,
        )
        skipped = f", {failed} lines skipped" if failed else ""
        typer.echo(f"answered {written} questions{skipped}", err=output is None)
        if failed and not written:
            raise QAFinetuneError(
                f"all {failed} lines of {batch} were skipped: fix them (see above)"
            )
        return
    assert question is not None  # checked above
    answers = answerer.answer(question, text, top_k=top_k, handle_impossible_answer=allow_no_answer)
    if as_json:
        typer.echo(json.dumps(answers[0] if top_k == 1 else answers, ensure_ascii=False))
        return
    for rank, item in enumerate(answers, 1):
        prefix = f"{rank}. " if top_k > 1 else ""
        shown = item["answer"] or "(no answer)"
        span = f"chars {item['start']}-{item['end']}"
        typer.echo(f"{prefix}{shown}  (score {item['score']:.3f}, {span})")


@app.command()
@friendly_errors
def evaluate(
    model: ModelOption = None,
    data: Annotated[
        str | None, typer.Option("--data", help="Evaluation file (SQuAD JSON, ...).")
    ] = None,
    dataset: DatasetOption = None,
    split: Annotated[str, typer.Option(help="Split of --dataset.")] = "validation",
    predictions: Annotated[
        Path | None, typer.Option("--predictions", help="Score this predictions.json alone.")
    ] = None,
    output_dir: Annotated[
        Path | None, typer.Option("--output-dir", help="Where eval files go (default: RUN/eval).")
    ] = None,
    version_2: Annotated[
        bool, typer.Option("--version-2", help="SQuAD v2 scoring with no-answer predictions.")
    ] = False,
    max_samples: Annotated[
        int | None, typer.Option(min=1, help="Score the first N questions.")
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            min=1, help="Windows per forward pass (default: the run's inference.batch_size)."
        ),
    ] = None,
    max_length: Annotated[int | None, typer.Option(help="Tokens per window.")] = None,
    stride: Annotated[int | None, typer.Option(help="Tokens shared by windows.")] = None,
    allow_untrained_head: AllowUntrainedOption = False,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="auto (ONNX when the model folder has model.onnx, else TensorFlow), tf or onnx.",
        ),
    ] = "auto",
) -> None:
    """Official SQuAD EM/F1 of a model (or of a predictions file) and a readable report."""
    if data is None and dataset is None:
        raise QAFinetuneError("no evaluation data: pass --data FILE or --dataset NAME")
    if predictions is None:
        from qa_finetune.modeling.onnx_backend import choose_backend
        from qa_finetune.modeling.reference import resolve_model_dir
        from qa_finetune.runs.lookup import latest_run

        model = model or str(latest_run(Path("outputs")))
        # Scoring an ONNX export never imports TensorFlow.
        if choose_backend(resolve_model_dir(model), backend) == "tf":
            import_tensorflow_quietly()
    from qa_finetune.evaluation.evaluate import evaluate_model, evaluate_predictions

    if predictions is not None:
        evaluate_predictions(
            predictions,
            data=data,
            dataset=dataset,
            split=split,
            output_dir=output_dir,
            version_2=version_2,
        )
        return
    evaluate_model(
        model,
        data=data,
        dataset=dataset,
        split=split,
        output_dir=output_dir,
        version_2=version_2,
        max_samples=max_samples,
        batch_size=batch_size,
        max_length=max_length,
        stride=stride,
        warn_untrained_head=not allow_untrained_head,
        backend=backend,
    )


@app.command()
@friendly_errors
def export(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (or a model folder).")],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="hf (model folder + PyTorch safetensors), savedmodel (TF Serving) or onnx.",
        ),
    ] = "hf",
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="latest (training checkpoint) or best (RUN/model). Default: latest for hf, "
            "best otherwise.",
        ),
    ] = None,
    quantize: Annotated[
        str | None, typer.Option("--quantize", help="int8: also write model.int8.onnx.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="Folder to write (default: RUN/model-step-N, RUN/model, RUN/onnx, ...).",
        ),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing output folder.")
    ] = False,
) -> None:
    """Export a run: a model folder with PyTorch weights, a SavedModel or an ONNX model."""
    from qa_finetune.publish.export import export_run

    import_tensorflow_quietly()
    target = export_run(run_dir, format, checkpoint, output, quantize, overwrite=overwrite)
    typer.echo(f"Saved {target}")


@app.command()
@friendly_errors
def serve(
    model: Annotated[str, typer.Argument(help="Run dir, model folder, package or Hub id.")],
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    backend: Annotated[str, typer.Option(help="Model runtime: auto, tf or onnx.")] = "auto",
    max_batch: Annotated[int, typer.Option(help="Most windows in one forward pass.")] = 32,
    max_wait_ms: Annotated[
        float, typer.Option(help="Longest wait for more requests to batch, ms.")
    ] = 5.0,
    max_context_chars: Annotated[
        int, typer.Option(help="Longest context accepted (longer: HTTP 413).")
    ] = 100_000,
    workers: Annotated[int, typer.Option(help="Processes, each with its own model.")] = 1,
    access_log: Annotated[
        bool, typer.Option("--access-log/--no-access-log", help="Log every request.")
    ] = True,
) -> None:
    """Serve a model over HTTP: JSON API, micro-batching, metrics and a web page."""
    from qa_finetune.serving.command import require_serve_extra

    require_serve_extra()
    import_tensorflow_quietly()
    from qa_finetune.serving.command import serve as run_serve

    run_serve(
        model,
        host=host,
        port=port,
        backend=backend,
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        max_context_chars=max_context_chars,
        workers=workers,
        access_log=access_log,
    )


@app.command()
@friendly_errors
def push(
    run_dir: Annotated[Path, typer.Argument(help="Run directory to publish.")],
    repo_id: Annotated[str, typer.Option("--repo-id", help="Hub repository USER/NAME.")],
    private: Annotated[bool, typer.Option("--private", help="Create the repo as private.")] = False,
    revision: Annotated[str | None, typer.Option(help="Branch to push to.")] = None,
    commit_message: Annotated[str | None, typer.Option(help="Commit message.")] = None,
    token: Annotated[
        str | None, typer.Option(help="Hub token (default: HF_TOKEN or the cached login).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write the upload folder and card; no network.")
    ] = False,
    staging_dir: Annotated[
        Path | None,
        typer.Option(help="Where --dry-run writes the upload folder (default: a temporary one)."),
    ] = None,
) -> None:
    """Publish a run (model, tokenizer, model card, evaluation files) to the Hub."""
    from qa_finetune.publish.hub import push_run

    # Without --staging-dir a dry run stages in a temporary folder (a model-sized copy does
    # not belong beside the run) and says where it is.
    result = push_run(
        run_dir,
        repo_id,
        private=private,
        revision=revision,
        commit_message=commit_message,
        token=token,
        dry_run=dry_run,
        staging_dir=staging_dir,
    )
    if dry_run:
        typer.echo(f"Dry run: would upload {len(result.files)} files from {result.staging_dir}:")
        for name in result.files:
            typer.echo(f"  {name}")
        typer.echo("\n" + result.card)
    else:
        typer.echo(f"Pushed {len(result.files)} files to {result.url}")


if __name__ == "__main__":
    app()
