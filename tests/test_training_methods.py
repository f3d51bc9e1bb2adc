"""Training methods chosen by config (``train.method``) and the run plan decided once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tiny_runs import tiny_run_config

from qa_finetune.config import Config, ConfigError
from qa_finetune.config.methods import TRAINING_METHODS
from qa_finetune.errors import QAFinetuneError


def test_the_registry_and_the_config_name_the_same_methods() -> None:
    from qa_finetune.training.methods import REGISTRY

    assert tuple(REGISTRY) == TRAINING_METHODS
    assert all(method.name == name for name, method in REGISTRY.items())


def test_an_unknown_method_is_one_line_listing_the_known_ones() -> None:
    from qa_finetune.training.methods import method_class

    with pytest.raises(ConfigError) as raised:
        Config.from_dict({"train": {"method": "prune"}})
    assert str(raised.value) == (
        "config key 'train.method': must be standard, distill or shared_norm, got 'prune'"
    )
    with pytest.raises(QAFinetuneError, match="choose one of standard, distill, shared_norm"):
        method_class("prune")


@pytest.mark.parametrize(
    ("train", "key", "words"),
    [
        ({"method": "distill"}, "train.teacher", "is not set"),
        ({"teacher": "t"}, "train.teacher", "set train.method=distill"),
        ({"student_layers": 2}, "train.student_layers", "set train.method=distill"),
        ({"method": "distill", "teacher": "t", "distill_alpha": 1.5}, "train.distill_alpha", ""),
        ({"method": "distill", "teacher": "t", "distill_temperature": 0}, "train.distill_", ""),
        ({"method": "distill", "teacher": "t", "student_layers": 0}, "train.student_layers", ""),
        ({"method": "distill", "teacher": "t", "student_layers": []}, "train.student_", "empty"),
        ({"method": "distill", "teacher": "t", "student_layers": [2, 1]}, "train.", "increasing"),
        ({"method": "distill", "teacher": "t", "student_layers": [1, 1]}, "train.", "once"),
        ({"method": "distill", "teacher": "t", "student_layers": [-1]}, "train.", "negative"),
        ({"method": "distill", "teacher": "t", "student_layers": "all"}, "train.", "expected"),
    ],
)
def test_distillation_settings_are_checked_with_the_config(
    train: dict, key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        Config.from_dict({"train": train})
    message = str(raised.value)
    assert f"config key '{key}" in message and words in message and "\n" not in message


def test_the_distillation_keys_round_trip_through_yaml_and_set() -> None:
    from qa_finetune.config import resolve_config

    config = resolve_config(
        None,
        assignments=[
            "train.method=distill",
            "train.teacher=big",
            "train.student_layers=[0, 2, 4]",
            "train.distill_alpha=0.7",
        ],
    )
    assert config.train.student_layers == [0, 2, 4] and config.train.distill_alpha == 0.7
    assert config.train.distill_temperature == 2.0
    assert Config.from_dict(config.to_dict()) == config
    assert Config().train.method == "standard"


def test_a_plan_is_decided_once_and_frozen(tiny_model_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.training.methods.standard import Standard
    from qa_finetune.training.run_plan import plan_run

    config = tiny_run_config(tiny_model_dir, tmp_path)
    run_dir = tmp_path / "tiny"
    plan = plan_run(config, run_dir)
    assert (plan.start, plan.resume, plan.parent) == ("fresh", False, None)
    assert isinstance(plan.method, Standard) and plan.config == config
    assert plan.checked.model_dir == tiny_model_dir
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.start = "resume"  # type: ignore[misc]
    assert plan_run(config, run_dir, overwrite=True).start == "overwrite"
    with pytest.raises(QAFinetuneError, match="choose one"):
        plan_run(config, run_dir, resume=True, overwrite=True)
    assert not run_dir.exists()


def test_crossval_folds_keep_the_method_and_find_a_teacher_named_under_the_root(
    tmp_path: Path,
) -> None:
    from qa_finetune.crossval.fold_files import FoldFiles
    from qa_finetune.crossval.runner import fold_config

    (tmp_path / "outputs" / "big").mkdir(parents=True)
    values = {"method": "distill", "teacher": "big", "output_dir": str(tmp_path / "outputs")}
    config = Config.from_dict({"train": {**values, "student_layers": 2}})
    files = FoldFiles(tmp_path / "train.json", tmp_path / "test.json", None)
    fold = fold_config(config, tmp_path / "outputs" / "cv", 0, files)
    assert (fold.train.method, fold.train.student_layers) == ("distill", 2)
    assert fold.train.teacher == str((tmp_path / "outputs" / "big").resolve())
    assert fold.train.output_dir == str(tmp_path / "outputs" / "cv")
    # A teacher given as a path stays as it is.
    given = dataclasses.replace(config.train, teacher=str(tmp_path / "outputs" / "big"))
    config = dataclasses.replace(config, train=given)
    assert fold_config(config, tmp_path / "cv", 0, files).train.teacher == given.teacher
