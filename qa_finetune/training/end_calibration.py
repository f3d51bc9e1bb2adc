"""Calibrating a run at the end of training (``train.calibrate=on``) on validation data that may
have no question without an answer, such as the general recipe's TyDi QA monitor.

The kept weights (``model/``) read the validation questions once more, together with their
question-level negatives (``data/question_negatives``: a share of the answerable questions asked
again of another paragraph of their document, labelled "no answer"), exactly as ``qa-finetune
calibrate --question-negatives`` builds them; the no-answer rule, its threshold and the
confidence calibration are chosen on those answers and saved with the run. The calibration's
provenance says the negatives were built, and how many.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from qa_finetune.config import Config
from qa_finetune.data.question_negatives import negatives_record, with_question_negatives
from qa_finetune.data.whole_documents import (
    eligible_questions,
    long_contexts_record,
    whole_document_questions,
)
from qa_finetune.features.labels import prepare_eval_features
from qa_finetune.features.windows import window_spec
from qa_finetune.files.provenance import public_path
from qa_finetune.modeling.loading import load_qa_model
from qa_finetune.modeling.scoring import evaluate_loaded
from qa_finetune.runs.paths import RunPaths
from qa_finetune.training.prepare import PreparedData

log = logging.getLogger(__name__)
KEY = "train.calibration_negatives"


def calibrate_at_end(run_dir: Path, config: Config, prepared: PreparedData) -> dict[str, Any]:
    """Choose the run's no-answer rule and fit its calibration on the validation questions
    (with negatives), read by the kept weights in ``run_dir``; the scores of that reading
    (``modeling.scoring.evaluate_loaded``, ``no_answer_rule_choice`` and
    ``calibration_choice`` included, the negatives' record in the calibration's provenance)."""
    train = config.train
    records = [_record(row) for row in prepared.validation_examples]
    source = validation_name(prepared)
    originals = records
    negatives = long_contexts = None
    if train.calibration_negatives > 0:
        records, source, report = with_question_negatives(
            records, train.calibration_negatives, train.seed, source, KEY
        )
        negatives = negatives_record(report, train.calibration_negatives)
    if train.calibration_long_contexts > 0:
        asked = whole_document_questions(originals, train.calibration_long_contexts, train.seed)
        records = [*records, *asked]
        source = f"{source} (+{len(asked)} whole-document questions)"
        eligible = len(eligible_questions(originals))
        long_contexts = long_contexts_record(train.calibration_long_contexts, eligible, len(asked))
    log.info("calibration: %s", source)
    from datasets import Dataset

    examples = Dataset.from_list(records)
    spec = window_spec(prepared.tokenizer, config.preprocess.max_length, config.preprocess.stride)
    features = examples.map(
        prepare_eval_features,
        batched=True,
        batch_size=1000,
        fn_kwargs={"tokenizer": prepared.tokenizer, "spec": spec},
        remove_columns=examples.column_names,
        desc="Calibration windows",
    )
    # The weights the run keeps (model/ is written before this): what users will answer with.
    model = load_qa_model(RunPaths(run_dir).model)
    scores = evaluate_loaded(
        model,
        prepared.tokenizer,
        examples,
        features,
        config.inference,
        allow_no_answer=True,
        rule_mode=train.no_answer_rule,
        passes=1,
        source=source,
    )
    scores.pop("predictions")
    fitted = scores.get("calibration_choice") or {}
    if "calibration" in fitted:
        for key, record in (("question_negatives", negatives), ("long_contexts", long_contexts)):
            if record is not None:
                fitted["calibration"]["fitted_on"][key] = record
    scores["chosen_on"] = f"{source} ({len(records)} questions)"
    return scores


def validation_source(prepared: PreparedData) -> str:
    """What the run's validation data is called (its file, or how it was held out)."""
    return str(prepared.report.get("sources", {}).get("validation") or "the validation data")


def validation_name(prepared: PreparedData) -> str:
    """``validation_source`` as provenance names it: a file by its base name, never its
    folder (a calibration's provenance reaches model cards and ``GET /v1/model``)."""
    return public_path(validation_source(prepared))


def _record(row: dict[str, Any]) -> dict[str, Any]:
    """A validation example as a plain record (answers as lists)."""
    answers = row["answers"]
    return {
        "id": row["id"],
        "title": row["title"],
        "context": row["context"],
        "question": row["question"],
        "answers": {"text": list(answers["text"]), "answer_start": list(answers["answer_start"])},
    }
