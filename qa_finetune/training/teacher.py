"""The teacher of a distilled run (``train.teacher``): found as ``--init-from`` finds a parent
(a run directory, or a run name under ``train.output_dir``) or as a model folder, checked
against the student before any work, and named by the content of its weights.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.families import WEIGHT_FILES
from qa_finetune.modeling.formats.qa_config import read_qa_config
from qa_finetune.modeling.loading import has_trained_qa_head
from qa_finetune.modeling.reference import check_qa_head, load_tokenizer
from qa_finetune.runs.lookup import load_run_config, run_dir_of
from qa_finetune.runs.paths import MODEL_DIR, RunPaths
from qa_finetune.training.token_bridge import NoBridge, TokenBridge, find_bridge

_KEY = "train.teacher"


@dataclass(frozen=True)
class Teacher:
    """Where a teacher's model is, and the windows it was trained on (when known)."""

    reference: str  # train.teacher as given
    model_dir: Path  # the model folder loaded (a run's model/)
    run_dir: Path | None  # the run it belongs to, if any
    windows: tuple[int, int] | None  # (max_length, stride) of its training, when recorded

    @property
    def name(self) -> str:
        """The run's name, or the model folder's."""
        return (self.run_dir or self.model_dir).name


def _locate(reference: str, output_dir: str) -> Path:
    given = Path(reference).expanduser()
    for path in (given, Path(output_dir) / reference):
        if path.is_dir():
            return path.resolve()
    raise QAFinetuneError(
        f"unknown teacher '{reference}' ({_KEY}): no run directory or model folder at {given} "
        f"or {Path(output_dir) / reference}; train the teacher first, or fix the path"
    )


def _windows(model_dir: Path, run_dir: Path | None) -> tuple[int, int] | None:
    """The teacher's (max_length, stride): its run's config, else its export's settings."""
    if run_dir is not None:
        windows = load_run_config(run_dir).preprocess
        return windows.max_length, windows.stride
    exported = read_qa_config(model_dir)
    if isinstance(exported.get("max_length"), int) and isinstance(exported.get("stride"), int):
        return exported["max_length"], exported["stride"]
    return None


def find_teacher(reference: str, output_dir: str, run_dir: Path) -> Teacher:
    """The teacher ``reference`` names: a run (its ``model/``) or a model folder, not the run
    being written."""
    path = _locate(reference, output_dir)
    if path == Path(run_dir).resolve():
        raise QAFinetuneError(
            f"{_KEY} {reference} names the run being written ({run_dir}): a student learns "
            "from another run; choose another --run-name for it"
        )
    if RunPaths(path).config.is_file():
        model_dir, run = RunPaths(path).model, path
        if not (model_dir / "config.json").is_file():
            raise QAFinetuneError(
                f"teacher run {path} has no trained model ({MODEL_DIR}/ is missing: it did not "
                "finish); let it finish, or name another teacher"
            )
    elif (path / "config.json").is_file():
        model_dir, run = path, run_dir_of(path)
    else:
        raise QAFinetuneError(
            f"teacher {path} holds no model (no config.json) and is no run: name a run "
            f"trained with `qa-finetune train` or a model folder ({_KEY})"
        )
    return Teacher(reference, model_dir, run, _windows(model_dir, run))


def check_teacher(teacher: Teacher, config: Config, tokenizer: Any) -> TokenBridge | None:
    """Refuse a teacher without a trained QA head, with a tokenizer that cannot read the
    student's (``tokenizer``) windows, or trained on other windows than the run's. Returns
    the bridge to the teacher's ids where its tokenizer is another one with the same word
    pieces (``token_bridge``), else None."""
    check_qa_head(teacher.model_dir)
    if not has_trained_qa_head(teacher.model_dir):
        raise QAFinetuneError(
            f"teacher {teacher.reference} has no trained question-answering head (a base "
            "encoder: its answers would be random); distill from a run trained with "
            "`qa-finetune train` or from a QA model folder"
        )
    ours = (config.preprocess.max_length, config.preprocess.stride)
    bridge = _bridge(teacher, tokenizer, ours[0])
    if teacher.windows is not None and teacher.windows != ours:
        length, stride = teacher.windows
        raise QAFinetuneError(
            f"teacher {teacher.reference} was trained on windows of max_length {length} and "
            f"stride {stride}, this run's are {ours[0]} and {ours[1]}: set --max-length "
            f"{length} --stride {stride} (preprocess.max_length, preprocess.stride)"
        )
    return bridge


def _bridge(teacher: Teacher, tokenizer: Any, max_length: int) -> TokenBridge | None:
    """None for the student's own tokenizer; the bridge for the same word pieces under other
    ids; a one-line refusal otherwise."""
    theirs = load_tokenizer(teacher.model_dir)
    if type(theirs).__name__ == type(tokenizer).__name__ and (
        theirs.get_vocab() == tokenizer.get_vocab()
    ):
        return None
    try:
        return find_bridge(theirs, tokenizer, max_length)
    except NoBridge as why:
        raise QAFinetuneError(
            f"teacher {teacher.reference} has another tokenizer ({type(theirs).__name__}, "
            f"{len(theirs)} tokens) than the student ({type(tokenizer).__name__}, "
            f"{len(tokenizer)} tokens) and cannot read the student's windows: {why}; "
            "distill into a model with the teacher's tokenizer, or set train.student_layers"
        ) from None


def teacher_digest(teacher: Teacher) -> str:
    """sha256 of the teacher's config.json and weight files: a retrained or replaced teacher
    gets another digest, and so its logits are computed again."""
    digest = hashlib.sha256()
    for name in ("config.json", *WEIGHT_FILES):
        path = teacher.model_dir / name
        if path.is_file():
            digest.update(name.encode())
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()
