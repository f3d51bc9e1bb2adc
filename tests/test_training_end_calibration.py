"""``train.calibrate=on``: a run whose validation data has no question without an answer (the
general recipe's TyDi QA monitor) still ends calibrated, on its validation questions and the
question-level negatives built from them as ``calibrate --question-negatives`` builds them;
the provenance says so. Bad values are one line each, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sample_files import sample_data_path
from tiny_runs import tiny_run_config
from typer.testing import CliRunner

from qa_finetune.cli.app import app

VALIDATION = sample_data_path("validation")  # 136 answerable questions, 8 documents
# The first 20 validation questions: 17 in the three paragraphs of "Velmora" can be asked
# of another paragraph, 3 in the one paragraph of "Corrin Telegraph Company" so far cannot;
# half of 17 rounds (to even) to 8.
NEGATIVES = {"fraction": 0.5, "eligible": 17, "chosen": 8, "made": 8}


@pytest.fixture(scope="module")
def calibrated_run(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    from qa_finetune.training.trainer import train

    output = tmp_path_factory.mktemp("end-calibration")
    config = tiny_run_config(
        tiny_model_dir, output, max_steps=2, calibrate="on", calibration_negatives=0.5
    ).to_dict()
    config["data"]["max_eval_samples"] = 20
    from calibrating import keeping_any_calibration

    from qa_finetune.config import Config

    with keeping_any_calibration():
        return train(Config.from_dict(config))


def _first(questions: int) -> list[dict]:
    from qa_finetune.config import DataConfig
    from qa_finetune.data.records import read_records

    return read_records(VALIDATION, DataConfig())[:questions]


def _documents(questions: int) -> int:
    """How many documents (titles) the first ``questions`` validation questions come from."""
    return len({r["title"] for r in _first(questions)})


def test_a_run_without_unanswerable_validation_questions_ends_calibrated(
    calibrated_run: Path,
) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.runs.calibration_file import read_calibration

    calibration = read_calibration(calibrated_run)
    assert calibration is not None
    long = 3  # 0.2 of the 17 questions whose document has a second paragraph
    data = f"{VALIDATION.name} (+8 question-level negatives) (+{long} whole-document questions)"
    assert calibration.fitted_on == {
        "data": data,
        "questions": 28 + long,
        "unanswerable": 8,
        "unanswerable_share": round(8 / (28 + long), 4),
        "correct_share": calibration.fitted_on["correct_share"],
        "documents": _documents(20),
        "question_negatives": NEGATIVES,
        "long_contexts": {"fraction": 0.2, "eligible": 17, "made": long},
    }
    metrics = json.loads((calibrated_run / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["calibration_method"] == calibration.method
    assert metrics["no_answer_rule"] in ("null_gap", "classifier")
    rule = json.loads((calibrated_run / "no_answer_rule.json").read_text(encoding="utf-8"))
    assert rule["chosen_on"] == f"{data} ({28 + long} questions)"
    # The validation scores in history.csv stay those of the questions as given (20).
    assert metrics["eval_examples"] == 20
    answer = QuestionAnswerer.load(str(calibrated_run)).answer("Who?", "Alma Stroud wrote it.")
    assert 0 < answer[0]["confidence"] < 1


def test_calibrate_records_the_same_negatives_on_the_same_questions(
    calibrated_run: Path, tmp_path: Path
) -> None:
    from qa_finetune.evaluation.calibrate import calibrate

    done = calibrate(
        str(calibrated_run),
        str(VALIDATION),
        output=tmp_path / "copy",
        max_samples=20,
        question_negatives=0.5,
    )
    assert done.calibration is not None
    assert done.calibration.fitted_on["question_negatives"] == NEGATIVES
    saved = json.loads((tmp_path / "copy" / "calibration.json").read_text(encoding="utf-8"))
    assert saved["fitted_on"]["question_negatives"] == NEGATIVES
    assert saved["fitted_on"]["questions"] == 28


def _train(tmp_path: Path, config: dict, *sets: str) -> tuple[int, list[str]]:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    args = ["train", "--config", str(path)]
    for value in sets:
        args += ["--set", value]
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output.strip().splitlines()


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ("train.calibrate=sometimes", "must be auto, on or off, got 'sometimes'"),
        ("train.calibration_negatives=1.5", "must be in [0, 1], got 1.5"),
        ("train.calibration_negatives=-0.1", "must be in [0, 1], got -0.1"),
    ],
)
def test_a_bad_calibration_setting_is_one_line_and_writes_nothing(
    setting: str, line: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "outputs"
    config = tiny_run_config(tiny_model_dir, output, max_steps=1).to_dict()
    code, lines = _train(tmp_path, config, setting)
    assert code != 0
    assert lines[-1] == f"error: config key '{setting.split('=')[0]}': {line}"
    assert not output.exists()


def test_calibrate_on_without_validation_data_is_one_line(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "outputs"
    config = tiny_run_config(tiny_model_dir, output, max_steps=1, calibrate="on").to_dict()
    config["data"].update(validation_file=None, validation_fraction=0.0)
    code, lines = _train(tmp_path, config)
    assert code != 0
    assert lines[-1] == (
        "error: train.calibrate=on fits the confidence on validation data: set "
        "data.validation_fraction (e.g. 0.05, held out from the training data) or "
        "data.validation_file, or set train.calibrate to auto"
    )
    assert not output.exists()


def test_no_negatives_and_no_unanswerable_question_fail_before_training(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "outputs"
    config = tiny_run_config(tiny_model_dir, output, max_steps=1, calibrate="on").to_dict()
    config["train"]["calibration_negatives"] = 0.0
    code, lines = _train(tmp_path, config)
    assert code != 0
    assert lines[-1] == (
        f"error: {VALIDATION}: none of its 8 questions is without an answer, so with "
        "train.calibration_negatives=0 no calibration can learn when 'no answer' is right: "
        "set train.calibration_negatives (e.g. 0.3) to add some"
    )
    assert not (output / "tiny").exists()


def test_negatives_without_a_second_paragraph_fail_before_training(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    # Every document one paragraph (TyDi QA's shape with distinct titles): no negative can be
    # made, which the run says before training rather than after.
    one_each = {
        "data": [
            {
                "title": f"doc-{i}",
                "paragraphs": [
                    {
                        "context": f"Alma Stroud wrote book {i}.",
                        "qas": [
                            {
                                "id": f"q{i}",
                                "question": "Who wrote it?",
                                "answers": [{"text": "Alma Stroud", "answer_start": 0}],
                            }
                        ],
                    }
                ],
            }
            for i in range(4)
        ]
    }
    data = tmp_path / "one-paragraph.json"
    data.write_text(json.dumps(one_each), encoding="utf-8")
    output = tmp_path / "outputs"
    config = tiny_run_config(tiny_model_dir, output, max_steps=1, calibrate="on").to_dict()
    config["data"]["validation_file"] = str(data)
    code, lines = _train(tmp_path, config)
    assert code != 0
    assert lines[-1] == (
        f"error: {data}: train.calibration_negatives pairs a question with another paragraph "
        "of its own document, but no document (title) here has an answerable question and a "
        "second paragraph: give each document's paragraphs one title, or set "
        "train.calibration_negatives to 0"
    )
    assert not (output / "tiny").exists()


def test_calibrate_off_keeps_the_rule_and_fits_no_calibration(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from tiny_runs import tiny_no_answer_config

    from qa_finetune.config import Config
    from qa_finetune.training.trainer import train

    values = tiny_no_answer_config(tiny_model_dir, tmp_path, 1e-3, calibrate="off", max_steps=1)
    run_dir = train(Config.from_dict(values))
    assert (run_dir / "no_answer_rule.json").is_file()
    assert not (run_dir / "calibration.json").exists()
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert "calibration_method" not in metrics


def test_the_general_recipe_ends_calibrated() -> None:
    from qa_finetune.config import load_config

    recipe = Path(__file__).parents[1] / "configs" / "minilm-31k.yaml"
    train = load_config(recipe).train
    # YAML reads a bare `on` as true: the key takes it as the mode it names.
    assert (train.calibrate, train.calibration_negatives) == ("on", 0.3)
    assert train.calibration_long_contexts == 0.2
    # Calibrated on its own held-out documents, never trained on.
    data = load_config(recipe).data
    assert (data.validation_fraction, data.validation_group_by) == (0.03, "title")
    assert data.validation_file is None
