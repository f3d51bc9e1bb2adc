"""``train --init-from RUN``: the parent's trained weights, head and tokenizer loaded, its
windows the defaults, its lineage in config.yaml, metrics.json and the card; bad input refused
before anything is written."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from tiny_runs import tiny_run_config
from typer.testing import CliRunner

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError

QUESTION = "Which team won Super Bowl 50?"
CONTEXT = "The Denver Broncos defeated the Carolina Panthers 24-10 to win Super Bowl 50."


@pytest.fixture(scope="module")
def parent_run(
    family_model_dir: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Path]:
    """``get(family)``: a finished tiny run of that family (a high rate moves its head)."""
    from qa_finetune.training.trainer import train

    root = tmp_path_factory.mktemp("parents")
    built: dict[str, Path] = {}

    def get(family: str) -> Path:
        if family not in built:
            config = tiny_run_config(
                family_model_dir(family), root, run_name=f"parent-{family}", learning_rate=1e-2
            )
            built[family] = train(config)
        return built[family]

    return get


def _child(parent: Path, requested: dict[str, Any] | None = None, **train: Any) -> tuple:
    """The child's config and the values asked for: ``--init-from`` and a run name."""
    asked: dict[str, Any] = {
        "model": {"init_from": str(parent)},
        "data": tiny_run_config(Path("x"), parent.parent).to_dict()["data"],
        "train": {
            "output_dir": str(parent.parent),
            "run_name": "child",
            "batch_size": 8,
            "tensorboard": False,
            **train,
        },
    }
    for section, values in (requested or {}).items():
        asked.setdefault(section, {}).update(values)
    return Config.from_dict(asked), asked


def _logits(model: Any, tokenizer: Any) -> np.ndarray:
    encoded = tokenizer(QUESTION, CONTEXT, return_tensors="tf")
    output = model(dict(encoded))
    return np.concatenate([output.start_logits.numpy(), output.end_logits.numpy()])


@pytest.mark.parametrize("family", ["bert", "roberta"])
@pytest.mark.parametrize("which", ["model", "best", "latest"])
def test_the_parent_head_and_tokenizer_are_loaded(
    family: str, which: str, parent_run: Callable[[str], Path], family_model_dir: Any
) -> None:
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.training.trainer import Trainer

    parent = parent_run(family)
    config, asked = _child(parent, {"model": {"init_checkpoint": which}})
    trainer = Trainer(config, requested=asked)
    trainer.check()
    trainer.prepare_data()
    child = trainer.load_model()
    tokenizer = trainer.prepared.tokenizer
    assert trainer.prepared.model_dir == parent / "model"
    trained = _logits(load_qa_model(parent / "model"), tokenizer)
    np.testing.assert_allclose(_logits(child, tokenizer), trained, atol=1e-5)
    # The head is the trained one, not the base model's.
    base = _logits(load_qa_model(family_model_dir(family)), tokenizer)
    assert np.abs(base - trained).max() > 1e-3
    assert not (parent.parent / "child").exists()


def test_lineage_windows_and_resume(
    parent_run: Callable[[str], Path],
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from qa_finetune.publish.model_card import build_model_card
    from qa_finetune.training.trainer import Trainer, train

    parent = parent_run("bert")
    config, asked = _child(
        parent, {"preprocess": {"stride": 16}}, epochs=1, checkpoint_every_steps=1, run_name="kid"
    )
    original = Trainer.validate

    def killed(*args: Any) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "validate", killed)
    with caplog.at_level(logging.INFO, logger="qa_finetune"), pytest.raises(KeyboardInterrupt):
        train(config, requested=asked)
    assert "stride 16 differs from the parent's 32" in caplog.text
    monkeypatch.setattr(Trainer, "validate", original)
    # --resume of a run started from another run finds its parent again.
    resume_config = Config.from_dict({"train": asked["train"]})
    run_dir = train(resume_config, resume=True, requested={"train": asked["train"]})

    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())
    parent_config = (parent / "config.yaml").read_bytes()
    parent_metrics = json.loads((parent / "metrics.json").read_text())
    assert recorded["model"]["init_from"] == str(parent)
    assert recorded["model"]["name_or_path"] == str(tiny_model_dir)  # the parent's base
    assert recorded["preprocess"]["max_length"] == 128  # the parent's window
    assert recorded["preprocess"]["stride"] == 16  # asked explicitly
    expected = {
        "run": "parent-bert",
        "path": str(parent),
        "checkpoint": "best",
        "config_sha256": hashlib.sha256(parent_config).hexdigest(),
        "base_model": str(tiny_model_dir),
        "exact_match": parent_metrics["exact_match"],
        "f1": parent_metrics["f1"],
    }
    assert recorded["parent"] == expected
    assert json.loads((run_dir / "metrics.json").read_text())["parent"] == expected
    # As docs/confidence.md says: starting from a run does not calibrate; a run that tunes
    # its no-answer rule (train.tune_no_answer_threshold) does, or `calibrate` afterwards.
    assert recorded["train"]["tune_no_answer_threshold"] is False
    assert not (run_dir / "calibration.json").exists()
    assert not (run_dir / "no_answer_rule.json").exists()
    card = build_model_card(run_dir, "user/kid")
    assert "Fine-tuned from the run `parent-bert`" in card
    assert f"F1 {parent_metrics['f1']:.2f}" in card
    assert str(parent) not in card  # local paths stay off the public card


def _bare_run(root: Path, parent: Path) -> Path:
    """A run folder with a config.yaml but no model and no checkpoint."""
    run = root / "empty"
    run.mkdir(parents=True)
    shutil.copyfile(parent / "config.yaml", run / "config.yaml")
    return run


def _keep_last(root: Path, parent: Path) -> Path:
    run = root / "kept-last"
    shutil.copytree(parent, run)
    values = yaml.safe_load((run / "config.yaml").read_text())
    values["train"]["keep_model"] = "last"
    (run / "config.yaml").write_text(yaml.safe_dump(values))
    return run


BAD = {
    "unknown run": (lambda root, parent, model: {"init_from": "no-such-run"}, "unknown run"),
    "hub model name": (
        lambda root, parent, model: {"init_from": "bert-base-uncased"},
        "use --model for a pretrained encoder",
    ),
    "bare encoder": (
        lambda root, parent, model: {"init_from": str(model)},
        "is a model folder, not a run",
    ),
    "no model": (
        lambda root, parent, model: {"init_from": str(_bare_run(root, parent))},
        "has no trained model",
    ),
    "no checkpoint": (
        lambda root, parent, model: {
            "init_from": str(_bare_run(root, parent)),
            "init_checkpoint": "latest",
        },
        "has no checkpoint",
    ),
    "best asked, last kept": (
        lambda root, parent, model: {
            "init_from": str(_keep_last(root, parent)),
            "init_checkpoint": "best",
        },
        "--init-checkpoint latest",
    ),
    "itself": (lambda root, parent, model: {"init_from": "child"}, "names the run being written"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_init_from(
    name: str, parent_run: Callable[[str], Path], tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.training.trainer import train

    parent = parent_run("bert")
    model_values, message = BAD[name]
    output = tmp_path / "runs"
    output.mkdir()
    if name == "itself":
        shutil.copytree(parent, output / "child")
    asked_model = model_values(tmp_path / "others", parent, tiny_model_dir)
    config, asked = _child(parent, {"model": asked_model}, output_dir=str(output))
    before = sorted(p.name for p in output.iterdir())
    with pytest.raises(QAFinetuneError, match=re.escape(message)) as caught:
        train(config, requested=asked)
    assert "\n" not in str(caught.value)
    assert sorted(p.name for p in output.iterdir()) == before


def test_a_model_of_another_family_than_the_parent_is_refused(
    parent_run: Callable[[str], Path], family_model_dir: Any
) -> None:
    from qa_finetune.training.trainer import train

    parent = parent_run("bert")
    other = str(family_model_dir("roberta"))
    config, asked = _child(parent, {"model": {"name_or_path": other}}, run_name="mixed")
    with pytest.raises(QAFinetuneError, match="is not the model run parent-bert was trained"):
        train(config, requested=asked)
    assert not (parent.parent / "mixed").exists()


def test_init_from_with_resume_is_one_line(tmp_path: Path) -> None:
    from qa_finetune.cli.app import app

    result = CliRunner().invoke(
        app, ["train", "--init-from", "some-run", "--resume", "--output-dir", str(tmp_path)]
    )
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--resume continues THIS run; --init-from starts" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_a_parent_record_set_by_hand_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.training.trainer import train

    values = tiny_run_config(tiny_model_dir, tmp_path).to_dict()
    values["parent"]["run"] = "someone"
    with pytest.raises(QAFinetuneError, match="parent section is recorded by `train --init-from`"):
        train(Config.from_dict(values))
    assert list(tmp_path.iterdir()) == []


def test_the_command_line_refuses_an_encoder_folder(tiny_model_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.cli.app import app

    args = ["train", "--init-from", str(tiny_model_dir), "--output-dir", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--init-checkpoint", "latest"])
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert "is a model folder, not a run" in line and "use --model" in line
    assert list(tmp_path.iterdir()) == []


def test_by_default_a_run_that_kept_its_last_weights_starts_its_child_from_them(
    parent_run: Callable[[str], Path], tmp_path: Path
) -> None:
    from qa_finetune.training.trainer import Trainer

    parent = _keep_last(tmp_path, parent_run("bert"))
    config, asked = _child(parent)
    assert config.model.init_checkpoint == "model"
    trainer = Trainer(config, requested=asked)
    trainer.check()
    assert trainer.plan.parent.model_dir == parent / "model"
    assert trainer.plan.parent.checkpoint is None
