"""What the commands share: option types, the error printer and config resolution.

Typer reads each command's annotations in the command's own module, so a command module
imports the option types it uses from here at run time.
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from qa_finetune.cli.terminal import visible
from qa_finetune.errors import SECRET_PIECE, Interrupted, QAFinetuneError, scrub_secrets
from qa_finetune.modeling.formats import BACKENDS, choices
from qa_finetune.modeling.formats.onnx import INT8_FILE, ONNX_FILE

if TYPE_CHECKING:
    from qa_finetune.modeling.named_model import NamedModel

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
# Commands that once took the model as an argument take --model like every other command;
# the argument stays as an alias, so earlier scripts keep working.
ModelArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="MODEL", help="The model, as --model names it (an alias).", show_default=False
    ),
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
MaxLengthOption = Annotated[int | None, typer.Option(help="Tokens per window.")]
StrideOption = Annotated[int | None, typer.Option(help="Tokens shared by windows.")]
NoAnswerThresholdOption = Annotated[
    float | None,
    typer.Option(
        "--no-answer-threshold",
        help="With --allow-no-answer: abstain when the no-answer score beats the best span by "
        "more than this (default: the run's inference.no_answer_threshold).",
    ),
]
MinConfidenceOption = Annotated[
    float | None,
    typer.Option(
        "--min-confidence",
        help='A calibrated run answers "not sure" below this confidence (0 to 1; default: '
        "the run's inference.min_confidence, else always answer).",
    ),
]
BackendOption = Annotated[
    str,
    typer.Option(
        "--backend",
        help=f"auto (ONNX when the model folder has {ONNX_FILE}, else TensorFlow; with "
        f"both, the one measured faster here), {choices(BACKENDS[1:])}.",
    ),
]
QuantizedOption = Annotated[
    bool,
    typer.Option(
        "--quantized",
        help=f"Run the int8 ONNX model ({INT8_FILE}, `export --format onnx --quantize int8`).",
    ),
]


def check_min_confidence(value: float | None) -> None:
    """Refuse a ``--min-confidence`` outside [0, 1] (NaN included): it is a probability."""
    if value is not None and not 0.0 <= value <= 1.0:
        raise QAFinetuneError(
            f"--min-confidence must be a probability from 0 to 1, got {value}: e.g. 0.5 "
            "answers only when the answer is right at least half the time"
        )


def check_threshold(value: float | None) -> None:
    """Refuse a ``--no-answer-threshold`` of NaN or infinity: NaN compares false with every
    score (no question would ever be abstained on) and neither is a margin between scores."""
    if value is not None and not math.isfinite(value):
        raise QAFinetuneError(
            f"--no-answer-threshold must be a finite number, got {value}: give a margin such "
            "as 0 or 2.5"
        )


def one_model(argument: str | None, option: str | None, command: str) -> str:
    """The model a command was given, as ``--model`` or as its positional alias (once)."""
    if argument is not None and option is not None and argument != option:
        raise QAFinetuneError(
            f"two models given ({argument} and --model {option}): name it once, "
            f"qa-finetune {command} --model MODEL"
        )
    model = option if option is not None else argument
    if model is None:
        raise QAFinetuneError(f"no model: qa-finetune {command} --model RUN_OR_MODEL_FOLDER")
    return model


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: MESSAGE`` on stderr and exit with ``code``."""
    # Every message is scrubbed here, whatever raised it: a server may echo a token back.
    # It may also quote the user's data (a file name, an id): control characters are shown.
    text = visible(scrub_secrets(message, _env_token()))
    typer.secho(f"error: {text}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def _env_token() -> str | None:
    """``HF_TOKEN``, to be masked in messages; a value too short to be a token is not (it
    would mask every occurrence of a common word)."""
    token = os.environ.get("HF_TOKEN", "").strip()
    return token if len(token) >= SECRET_PIECE else None


def friendly_errors(command: F) -> F:
    """Turn known failures into one line on stderr and a non-zero exit, without a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except QAFinetuneError as exc:
            fail(str(exc))
        except KeyboardInterrupt as exc:
            # An Interrupted says what was undone; a bare Ctrl+C undid nothing.
            said = str(exc) if isinstance(exc, Interrupted) else ""
            fail(said or "interrupted; completed checkpoints and files on disk are intact", 130)
        except MemoryError:
            fail("out of memory: lower --batch-size or --max-length")
        except OSError as exc:
            # Unwritable or impossible output paths (read-only, a file where a folder should be).
            where = f" {exc.filename}" if exc.filename else ""
            reason = exc.strerror or str(exc) or type(exc).__name__
            if exc.errno == errno.ENOSPC:  # the writers name the file (files.name_in_error)
                what = where or " the output"
                fail(f"cannot write{what}: {reason} (free space on that disk, or write elsewhere)")
            fail(f"cannot use{where}: {reason} (check the path and its permissions)")

    return wrapper  # type: ignore[return-value]


def resolve(
    config_path: Path | None, assignments: list[str] | None, **flags: dict[str, Any]
) -> Any:
    """The validated config: defaults < YAML file < ``--set`` assignments < explicit flags."""
    from qa_finetune.config import resolve_config

    return resolve_config(config_path, flags, assignments)


def model_on_backend(
    model: str | None, backend: str, output_dir: str | None = None, quantized: bool = False
) -> NamedModel:
    """The model to use (default: the latest run under ``output_dir``), named once: what is
    below the command line takes this object and never resolves the reference again.
    TensorFlow is imported only when the chosen backend is TensorFlow: the ONNX path never
    pays for that import. ``quantized``: the int8 ONNX model (a folder without one is an
    error here)."""
    from qa_finetune.cli.native_logs import import_tensorflow_quietly
    from qa_finetune.modeling.formats import choose_backend
    from qa_finetune.modeling.named_model import NamedModel
    from qa_finetune.runs.lookup import latest_run

    named = NamedModel.of(model or str(latest_run(Path(output_dir or "outputs"))))
    if choose_backend(named.model_dir, backend, quantized) == "tf":
        import_tensorflow_quietly()
    return named


QuestionNegativesOption = Annotated[
    float,
    typer.Option(
        "--question-negatives",
        min=0.0,
        max=1.0,
        help="Also ask this fraction of the answerable questions of another paragraph of "
        "their document that does not answer them (SQuAD v2 style, needs titles).",
    ),
]


PassesOption = Annotated[
    int | None,
    typer.Option(
        "--passes",
        help="Forward passes at once, the CPU cores shared out among them (default: 2 where "
        "there are 2 cores or more, else 1; 1: one pass on all the cores).",
    ),
]


def check_passes(passes: int | None) -> None:
    """Refuse a ``--passes`` outside 1 to ``MAX_PASSES`` (serve's range) in one line."""
    from qa_finetune.modeling.cpu_threads import MAX_PASSES

    if passes is not None and not 1 <= passes <= MAX_PASSES:
        raise QAFinetuneError(f"--passes must be 1 to {MAX_PASSES}, got {passes}")


def share_cores_among(passes: int | None) -> tuple[int, int]:
    """Share the usable cores among ``passes`` forward passes (None: the machine's default,
    ``cpu_threads.default_passes``), as ``serve`` does: before the model loads, since
    TensorFlow fixes its threads when it starts. Returns (passes, threads each)."""
    from qa_finetune.modeling.cpu_threads import default_passes, share_cores

    check_passes(passes)
    passes = default_passes() if passes is None else passes
    return passes, share_cores(passes)


ReadAllOption = Annotated[
    bool,
    typer.Option(
        "--read-all",
        help="Read every window of a long context (default: one of over 1,000 words is read "
        "as its 3 passages that best match the question, by BM25).",
    ),
]
