"""Config precedence, validation and every shipped recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from qa_finetune.config import Config, ConfigError, load_config, parse_set_option, resolve_config

# Every recipe, those in sub-folders (configs/levers/) included.
CONFIGS = sorted((Path(__file__).parents[1] / "configs").rglob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_shipped_config_loads(path: Path) -> None:
    config = load_config(path)
    assert config.preprocess.stride < config.preprocess.max_length
    assert Config.from_dict(config.to_dict()) == config


def test_there_are_configs() -> None:
    assert {"default.yaml", "squad-distilroberta.yaml"} <= {p.name for p in CONFIGS}


def test_original_recipe_matches_the_notebook() -> None:
    config = load_config(Path(__file__).parents[1] / "configs" / "squad-distilroberta.yaml")
    assert config.model.name_or_path == "distilroberta-base"
    assert config.data.dataset == "squad"
    assert (config.preprocess.max_length, config.preprocess.stride) == (400, 100)
    assert (config.train.batch_size, config.train.learning_rate, config.train.epochs) == (
        32,
        3e-5,
        1,
    )


def test_precedence_defaults_yaml_set_flags(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  epochs: 3\n  batch_size: 8\npreprocess:\n  stride: 64\n")
    config = resolve_config(
        path,
        flags={"train": {"batch_size": 4, "epochs": None}},
        assignments=["train.epochs=5", "train.batch_size=6", "inference.n_best=7"],
    )
    assert config.train.epochs == 5  # --set beats YAML; the unset flag (None) does not apply
    assert config.train.batch_size == 4  # explicit flag beats --set
    assert config.preprocess.stride == 64  # YAML beats default
    assert config.inference.n_best == 7
    assert config.train.learning_rate == Config().train.learning_rate


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"train": {"epochz": 1}}, "train.epochz"),
        ({"trainer": {"epochs": 1}}, "trainer"),
        ({"train": {"batch_size": "big"}}, "train.batch_size"),
        ({"train": {"batch_size": 0}}, "train.batch_size"),
        ({"train": {"batch_size": True}}, "train.batch_size"),
        ({"preprocess": {"max_length": 128, "stride": 128}}, "preprocess.stride"),
        ({"train": {"strategy": "horovod"}}, "train.strategy"),
        ({"train": {"mixed_precision": "yes"}}, "train.mixed_precision"),
        ({"data": {"validation_fraction": 1.5}}, "data.validation_fraction"),
    ],
)
def test_bad_values_name_their_key(values: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        Config.from_dict(values)


def test_ints_are_accepted_for_floats_and_null_for_optional() -> None:
    config = Config.from_dict({"train": {"epochs": 2, "max_grad_norm": None}})
    assert isinstance(config.train.epochs, float) and config.train.epochs == 2.0
    assert config.train.max_grad_norm is None


def test_set_option_parsing() -> None:
    assert parse_set_option("train.epochs=2.5") == {"train": {"epochs": 2.5}}
    assert parse_set_option("data.dataset=squad") == {"data": {"dataset": "squad"}}
    assert parse_set_option("data.train_file=null") == {"data": {"train_file": None}}
    with pytest.raises(ConfigError, match=r"section\.key=value"):
        parse_set_option("epochs=2")


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(scalar)


@pytest.mark.parametrize(
    "order",
    [
        ["preprocess.max_length=128", "preprocess.stride=32"],
        ["preprocess.stride=32", "preprocess.max_length=128"],
    ],
)
def test_set_overrides_are_checked_together(order: list[str]) -> None:
    config = resolve_config(None, None, order)
    assert (config.preprocess.max_length, config.preprocess.stride) == (128, 32)


def test_yaml_and_flags_are_checked_together(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("preprocess:\n  stride: 100\n")
    config = resolve_config(path, {"preprocess": {"max_length": 128, "stride": None}})
    assert (config.preprocess.max_length, config.preprocess.stride) == (128, 100)


@pytest.mark.parametrize("text", ["1e-4", "1E-4", "+1e-4", "1.0e-4", ".0001"])
def test_exponent_floats_are_accepted(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"train:\n  learning_rate: {text}\n")
    assert load_config(path).train.learning_rate == pytest.approx(1e-4)
    config = resolve_config(None, None, [f"train.learning_rate={text}"])
    assert config.train.learning_rate == pytest.approx(1e-4)


def test_text_is_still_not_a_float() -> None:
    with pytest.raises(ConfigError, match=r"train\.learning_rate': expected float"):
        resolve_config(None, None, ["train.learning_rate=fast"])


def test_dataset_and_files_together_is_an_error_naming_both() -> None:
    with pytest.raises(ConfigError, match=r"data\.dataset.*data\.train_file"):
        Config.from_dict({"data": {"dataset": "squad", "train_file": "train.json"}})
    # A file on the command line replaces the config's dataset instead.
    config = resolve_config(
        Path("configs/squad-distilroberta.yaml"), {"data": {"train_file": "train.json"}}
    )
    assert config.data.dataset is None and config.data.train_file == "train.json"


OLD_KEYS = "data:\n  version_2_with_negative: true\ninference:\n  null_score_diff_threshold: 1.5\n"


def test_renamed_keys_of_earlier_releases_still_load(tmp_path: Path) -> None:
    # A run's config.yaml written by an earlier release: read without a word.
    path = tmp_path / "config.yaml"
    path.write_text(OLD_KEYS)
    config = load_config(path)
    assert config.data.allow_no_answer is True
    assert config.inference.no_answer_threshold == 1.5
    assert Config.from_dict({"data": {"version_2_with_negative": True}}).data.allow_no_answer
    set_old = resolve_config(None, assignments=["data.version_2_with_negative=true"])
    assert set_old.data.allow_no_answer is True


def test_a_users_config_with_old_keys_gets_a_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(OLD_KEYS)
    config = resolve_config(path, assignments=["inference.no_answer_threshold=2.0"])
    assert (config.data.allow_no_answer, config.inference.no_answer_threshold) == (True, 2.0)
    assert [r.getMessage() for r in caplog.records] == [
        f"note: config file {path}: 'data.version_2_with_negative' is now 'data.allow_no_answer'",
        f"note: config file {path}: 'inference.null_score_diff_threshold' is now "
        "'inference.no_answer_threshold'",
    ]


def test_old_and_new_name_together_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text("data:\n  version_2_with_negative: true\n  allow_no_answer: false\n")
    with pytest.raises(ConfigError, match=r"'data\.version_2_with_negative' and 'data\.allow"):
        resolve_config(path)


def test_the_notice_is_one_line_on_stderr_from_the_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from qa_finetune.cli.app import app

    path = tmp_path / "mine.yaml"
    path.write_text("data:\n  version_2_with_negative: true\n")
    args = ["prepare", "--config", str(path), "--train-file", str(tmp_path / "none.json")]
    result = CliRunner().invoke(app, [*args, "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 1
    notice, error = result.stderr.splitlines()
    assert notice == (
        f"note: config file {path}: 'data.version_2_with_negative' is now 'data.allow_no_answer'"
    )
    assert error.startswith("error: ")


@pytest.mark.parametrize(
    ("values", "start"),
    [
        ({"train": {"epoch": 1}}, "unknown config key 'train.epoch' (did you mean train.epochs? "),
        ({"trian": {"epochs": 1}}, "unknown config section 'trian' (did you mean train? known: "),
        ({"train": {"zzz": 1}}, "unknown config key 'train.zzz' (known in train: epochs, "),
    ],
)
def test_a_misspelt_key_or_section_names_the_one_meant(values: dict, start: str) -> None:
    from qa_finetune.config import apply_overrides

    with pytest.raises(ConfigError) as caught:
        apply_overrides(Config(), values)
    assert str(caught.value).startswith(start)
