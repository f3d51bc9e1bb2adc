"""The shipped general reader, calibrated on its general held-out part (the rule and calibration
``qa-finetune calibrate`` wrote for a copy of it, then ``calibrate --open``, kept in
``tests/fixtures/minilm-31k-general``; bench/reports/18-confidence.md), on questions its
documents do not answer: each gets "no answer" or a confidence below one half, where its
uncalibrated score read as sure as a right answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app

pytestmark = pytest.mark.slow
FIXTURE = Path(__file__).parent / "fixtures" / "minilm-31k-general"
TRAILS = {
    "slate-run.txt": "The Slate Run is a 21 km trail race over Fernhollow Moor, held every "
    "October since 2015. It is organised by the Friends of Fernhollow, a volunteer group that "
    "also keeps the moor paths clear. Registration opens in June; the entry fee is 25 pounds "
    "and includes a hot meal at the finish.",
    "millbrook.txt": "Millbrook is the starting point of the moor walk. The car park has room "
    "for forty cars and the bus from Harrowgate stops by the bridge. There is no water on the "
    "moor section, so carry at least a litre. The path is waymarked with yellow arrows.",
}
REVIEW = (
    "I bought these headphones for my commute. The sound is warm with strong bass, and the "
    "noise cancelling works well on the train. The battery lasts about two days."
)
TOWN = (
    "Harbourton is a fishing town on the east coast. Its harbour wall was rebuilt in 1998, and "
    "the summer regatta draws about 4,300 visitors every year."
)


@pytest.fixture(scope="module")
def shipped(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped run with the calibration fitted on its general held-out part."""
    source = shared_data.parent / "models" / "minilm-31k"
    if not (source / "model").is_dir():
        pytest.skip(f"the shipped run is not at {source}")
    run_dir = tmp_path_factory.mktemp("shipped") / "minilm-31k-calibrated"
    shutil.copytree(source / "model", run_dir / "model")
    shutil.copy(source / "config.yaml", run_dir / "config.yaml")
    for name in ("calibration.json", "no_answer_rule.json"):
        shutil.copy(FIXTURE / name, run_dir / name)
    metrics = {"no_answer_rule": "classifier", "calibration_method": "logistic"}
    (run_dir / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    return run_dir


def _sure_of_nothing(item: dict) -> bool:
    return item.get("no_answer") is True or item["answer"] == "" or item["confidence"] < 0.5


@pytest.mark.parametrize(
    "question", ["Who won the Slate Run in 2023?", "Is there a toilet at Millbrook?"]
)
def test_questions_the_trail_documents_do_not_answer(
    shipped: Path, tmp_path: Path, question: str
) -> None:
    docs = tmp_path / "trails"
    docs.mkdir()
    for name, text in TRAILS.items():
        (docs / name).write_text(text, encoding="utf-8")
    # As a user indexes: with the embedded encoder, so search is hybrid and the answers get the
    # open calibration the fixture holds (fitted for hybrid search).
    built = CliRunner().invoke(app, ["index", str(docs), "-o", str(tmp_path / "trail-index")])
    assert built.exit_code == 0, built.output
    result = CliRunner().invoke(
        app,
        [
            "ask",
            question,
            "--index",
            str(tmp_path / "trail-index"),
            "--model",
            str(shipped),
            "--allow-no-answer",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert _sure_of_nothing(json.loads(result.stdout)), result.stdout


@pytest.mark.parametrize(
    ("question", "context"),
    [
        ("What colour are the headphones?", REVIEW),
        pytest.param(
            "What is the population of Harbourton?",
            TOWN,
            # Measured: "4,300", confidence 89% (bench/reports/18-confidence.md). A number where a
            # number is asked for looks right to every feature the calibrator has: nothing in
            # the reader's outputs says "visitors" is not "population".
            marks=pytest.mark.xfail(strict=True, reason="not met: 4,300 at confidence 0.89"),
        ),
    ],
)
def test_questions_the_text_does_not_answer(shipped: Path, question: str, context: str) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    answer = QuestionAnswerer.load(str(shipped)).answer(question, context, allow_no_answer=True)
    assert _sure_of_nothing(answer[0]), answer[0]
