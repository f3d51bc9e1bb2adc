"""Publish a run directory to the Hugging Face Hub as a model repository.

The upload folder is staged first (model files at the repository root, the model card as
README.md, evaluation outputs under ``eval/``, the training record under ``training/``), so a
dry run shows exactly what a real push would send, and the real push is one commit of that
folder. The run directory itself is only read.

The token is a secret: it is passed to the client and nowhere else. It never goes into the
staged files, the result, log messages or error text (any message is scrubbed of it).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import yaml

from qa_finetune.config.hub_ids import MAX_NAME_LENGTH, is_hub_id
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.provenance import public_path, public_values
from qa_finetune.modeling.families import LOADABLE_WEIGHTS, TOKENIZER_ANCHORS
from qa_finetune.modeling.formats import SERVING
from qa_finetune.modeling.formats.qa_config import QA_CONFIG
from qa_finetune.publish.hub_access import explain_failure, hub_endpoint, resolve_token
from qa_finetune.publish.model_card import build_model_card
from qa_finetune.runs.ownership import MARKERS, STAGING_MARKER, check_replaceable, write_marker
from qa_finetune.runs.paths import (
    CONFIG_FILE,
    CURVES_FILE,
    EVAL_DIR,
    HISTORY_FILE,
    METRICS_FILE,
    RunPaths,
)
from qa_finetune.runs.training_data_file import copy_training_data

# The training record that goes under training/ (checkpoints/ and features/ never do).
TRAINING_FILES = (CONFIG_FILE, METRICS_FILE, HISTORY_FILE, CURVES_FILE)


@dataclass
class PushResult:
    """What was (or, in a dry run, would be) pushed."""

    url: str | None  # repository page; None in a dry run
    files: list[str]  # paths in the repository, sorted
    staging_dir: Path  # the staged folder; removed after a real push into a temporary one
    card: str  # the README.md text
    commit_url: str | None = None


def check_run_dir(run_dir: Path) -> Path:
    """The ``model/`` folder of ``run_dir``, after checking it holds a loadable model."""
    model_dir = RunPaths(run_dir).model
    hint = "train one with `qa-finetune train` first"
    if run_dir.exists() and not run_dir.is_dir():
        raise QAFinetuneError(
            f"{run_dir} is a file, not a run directory: pass the folder that "
            "`qa-finetune train` wrote"
        )
    if not run_dir.is_dir():
        raise QAFinetuneError(f"run directory {run_dir} does not exist: {hint}")
    if not (model_dir / "config.json").is_file():
        raise QAFinetuneError(f"run directory {run_dir} has no model (model/config.json): {hint}")
    if not any(p.is_file() for pattern in LOADABLE_WEIGHTS for p in model_dir.glob(pattern)):
        raise QAFinetuneError(
            f"run directory {run_dir} has no model weights (model/tf_model.h5 or "
            f"model/*.safetensors): {hint}"
        )
    # At least one of these must sit next to the weights for the repo to be usable.
    if not any((model_dir / name).is_file() for name in TOKENIZER_ANCHORS):
        raise QAFinetuneError(
            f"run directory {run_dir} has no tokenizer files in model/ "
            f"(tokenizer.json, tokenizer_config.json, vocab.txt, ...): {hint}"
        )
    return model_dir


def check_repo_id(repo_id: str) -> str:
    """``repo_id`` if it has the ``namespace/name`` form the Hub accepts."""
    if not is_hub_id(repo_id, namespace_required=True):
        raise QAFinetuneError(
            f"invalid repo id {repo_id!r}: use namespace/name, e.g. your-username/minilm-squad "
            f"(letters, digits, '-', '_', '.'; at most {MAX_NAME_LENGTH} characters each)"
        )
    return repo_id


def _copy_files(source: Path, target: Path) -> None:
    """Copy every file under ``source`` into ``target``, keeping relative paths."""
    for path in sorted(source.rglob("*")):
        if path.is_file() and path.name not in MARKERS:
            destination = target / path.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)


def _make_public(path: Path) -> None:
    """Rewrite a staged JSON or YAML record with local paths reduced to file names."""
    if not path.is_file():
        return
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            values = public_values(json.loads(text))
            text = json.dumps(values, indent=2, ensure_ascii=False) + "\n"
        else:
            text = yaml.safe_dump(public_values(yaml.safe_load(text)), sort_keys=False)
    except (ValueError, yaml.YAMLError):
        text = public_path(text)  # not parsable: still no local path goes out
    path.write_text(text, encoding="utf-8")


def stage(run_dir: Path, repo_id: str, staging_dir: Path) -> tuple[list[str], str]:
    """Fill ``staging_dir`` with the upload folder; return its files and the card.

    A folder staged by an earlier push (it has the staging marker) is replaced; any other
    non-empty folder is an error.
    """
    model_dir = check_run_dir(run_dir)
    check_replaceable(staging_dir, STAGING_MARKER, "qa-finetune push", "--staging-dir")
    if staging_dir.is_dir() and any(staging_dir.iterdir()):
        shutil.rmtree(staging_dir)
    staging_dir.mkdir(parents=True, exist_ok=True)
    write_marker(staging_dir, STAGING_MARKER, "qa-finetune push")
    _copy_files(model_dir, staging_dir)
    # Beside the weights, where a downloaded copy of the model finds it.
    copy_training_data(model_dir, staging_dir)
    if RunPaths(run_dir).eval_dir.is_dir():
        _copy_files(RunPaths(run_dir).eval_dir, staging_dir / EVAL_DIR)
    for name in TRAINING_FILES:
        if (run_dir / name).is_file():
            (staging_dir / "training").mkdir(exist_ok=True)
            shutil.copy2(run_dir / name, staging_dir / "training" / name)
    # `qa-finetune export --model RUN --format NAME` serving folders, uploaded as they are when
    # present.
    exports = [f.name for f in SERVING if (run_dir / f.name / QA_CONFIG).is_file()]
    for name in exports:
        # Complete exports only: qa_config.json is written last, inside the swapped-in folder.
        _copy_files(run_dir / name, staging_dir / name)
    records = ["training/config.yaml", "training/metrics.json", "eval/metrics.json"]
    for record in records + [f"{name}/{QA_CONFIG}" for name in exports]:
        _make_public(staging_dir / record)
    card = build_model_card(run_dir, repo_id)
    # Written last so that it replaces any README.md that came with the model files.
    (staging_dir / "README.md").write_text(card, encoding="utf-8")
    files = sorted(
        p.relative_to(staging_dir).as_posix()
        for p in staging_dir.rglob("*")
        if p.is_file() and p.name not in MARKERS
    )
    return files, card


def _upload(
    staging_dir: Path,
    repo_id: str,
    *,
    token: str,
    endpoint: str,
    private: bool,
    revision: str | None,
    commit_message: str,
) -> tuple[str, str | None]:
    """Create the repo (and branch), commit the staged folder; return (repo URL, commit URL)."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token)
    repo_url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    if revision and revision != "main":
        api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
    commit = api.upload_folder(
        folder_path=staging_dir,
        repo_id=repo_id,
        repo_type="model",
        revision=revision,
        commit_message=commit_message,
        ignore_patterns=list(MARKERS),
    )
    url = str(repo_url).rstrip("/")
    if revision and revision != "main":
        url = f"{url}/tree/{quote(revision, safe='')}"
    return url, commit.commit_url


def push_run(
    run_dir: Path,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
    dry_run: bool = False,
    staging_dir: Path | None = None,
) -> PushResult:
    """Stage ``run_dir`` as a model repo and, unless ``dry_run``, push it as one commit.

    Without ``staging_dir`` the folder is staged in a temporary directory, which a dry run
    keeps (its path is in the result) and a real push removes afterwards. ``private`` only
    applies when the repo is created; an existing repo keeps its visibility.
    """
    run_dir = Path(run_dir)
    check_run_dir(run_dir)
    check_repo_id(repo_id)
    temporary = staging_dir is None
    folder = Path(tempfile.mkdtemp(prefix="qa-finetune-push-")) if temporary else Path(staging_dir)
    keep = False
    try:
        files, card = stage(run_dir, repo_id, folder)
        if dry_run:
            keep = True
            return PushResult(url=None, files=files, staging_dir=folder, card=card)
        secret = resolve_token(token)
        endpoint = hub_endpoint()
        message = commit_message or f"Upload {run_dir.name} with qa-finetune"
        try:
            url, commit_url = _upload(
                folder,
                repo_id,
                token=secret,
                endpoint=endpoint,
                private=private,
                revision=revision,
                commit_message=message,
            )
        except Exception as exc:
            # `from None`: the original traceback may hold the token in a frame's locals.
            raise explain_failure(exc, repo_id, endpoint, secret) from None
        return PushResult(
            url=url, files=files, staging_dir=folder, card=card, commit_url=commit_url
        )
    finally:
        if temporary and not keep:
            shutil.rmtree(folder, ignore_errors=True)
