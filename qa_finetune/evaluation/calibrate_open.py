"""``calibrate --open``: fit the confidence of a run's answers found by search
(``calibration.open_search``) on held-out questions, and save it in the run's
``calibration.json`` beside the calibration it builds on.

Every distinct context of the held-out file becomes one passage of an index in memory (as
``evaluate --open`` builds it); each question with an answer is searched there with the
retriever asked for and answered as ``ask --index`` answers it, and the calibration learns,
from the answers' features, which of them were right. The run keeps its no-answer rule and its
calibration for answers read with their own passage; with ``output`` only a copy of the run
changes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qa_finetune.calibration.answers import FoundConfidence
from qa_finetune.calibration.confidence import Calibration
from qa_finetune.calibration.open_search import OpenCalibration
from qa_finetune.decoding.across_passages import DEFAULT_TOP_PASSAGES
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.staged_folders import has_no_write_bits, staged_folder
from qa_finetune.modeling.named_model import NamedModel
from qa_finetune.runs.calibration_file import read_calibration, write_calibration

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CalibratedOpen:
    """Where the open calibration went, and the calibration now saved there."""

    run_dir: Path
    calibration: Calibration


def calibrate_open(
    model_ref: str | NamedModel,
    data: str,
    retriever: str = "hybrid",
    output: Path | None = None,
    overwrite: bool = False,
    max_samples: int | None = None,
    top_passages: int = DEFAULT_TOP_PASSAGES,
    batch_size: int | None = None,
) -> CalibratedOpen:
    """Fit the open calibration of the run ``model_ref`` for ``retriever`` on ``data`` and
    save it in the run (or in its copy ``output``); every check runs before the reading."""
    from qa_finetune.evaluation.calibrate import check_new_output, copy_run, run_of
    from qa_finetune.evaluation.open_retrievers import retrievers_to_run

    retrievers_to_run(retriever)  # an unknown name: one line, before anything is read
    named = NamedModel.of(model_ref)
    source = run_of(named.model_dir, named.given)
    calibration = read_calibration(source)
    if calibration is None:
        raise QAFinetuneError(
            f"{source} has no calibration, and the open one builds on it: run `qa-finetune "
            "calibrate --model RUN --data HELD_OUT.json` first"
        )
    if output is None:
        _check_in_place(source, calibration, overwrite)
    else:
        check_new_output(Path(output), source)
    fitted = open_calibration_of(named, data, retriever, max_samples, top_passages, batch_size)
    updated = dataclasses.replace(calibration, open=fitted)
    target = source if output is None else Path(output)
    if output is None:
        write_calibration(source, updated)
    else:
        with staged_folder(target) as staging:
            copy_run(source, staging)
            write_calibration(staging, updated)
    log.info("open confidence: %s (%s)", fitted.describe(), target)
    for warning in fitted.logistic.warnings:
        log.warning("warning: %s", warning)
    return CalibratedOpen(target, updated)


def open_calibration_of(
    run: str | NamedModel,
    data: str,
    retriever: str,
    max_samples: int | None,
    top_passages: int,
    batch_size: int | None = None,
) -> OpenCalibration:
    """The ``OpenCalibration`` of ``run`` fitted on ``data`` searched with ``retriever``."""
    from qa_finetune.calibration.open_search import fit_open_calibration
    from qa_finetune.evaluation.evaluate import load_examples
    from qa_finetune.evaluation.open_evaluation import collection_of, read_passages, spread_sample
    from qa_finetune.evaluation.open_retrievers import add_embeddings
    from qa_finetune.metrics import v2_question_scores
    from qa_finetune.modeling.for_answering import load_for_answering
    from qa_finetune.modeling.scoring import references
    from qa_finetune.runs.lookup import trained_with_no_answer
    from qa_finetune.runs.training_data_file import seen_by_model

    everything = load_examples(data, None, "validation", allow_no_answer=True)
    # A question without an answer in its own paragraph may still be answered by another
    # context of the collection, so whether an answer to it is right is unknown: left out.
    answerable = [r for r in everything.records if any(t.strip() for t in r["answers"]["text"])]
    questions = spread_sample(answerable, max_samples)
    loaded = load_for_answering(run, batch_size=batch_size, tune_batch=batch_size is None)
    # Every answer is fitted on, whatever minimum the run answers with.
    loaded.settings = dataclasses.replace(loaded.settings, min_confidence=None)
    index, _ = collection_of(everything.records)
    add_embeddings(index, (retriever,))
    index.use(retriever, index.encoder)
    found = [index.search(q["question"], top_passages) for q in questions]
    confidences: dict[str, FoundConfidence] = {}
    # Passages take part as ``ask --index`` lets them by default: by the run's rule when it
    # was trained with questions that have no answer.
    use_rule = trained_with_no_answer(loaded.model_dir)
    read_passages(loaded, questions, found, top_passages, use_rule, confidences=confidences)
    gold = references(questions)
    ids = list(confidences)
    correct = np.array([v2_question_scores(confidences[i].text, gold[i])[0] == 1.0 for i in ids])
    fitted = fit_open_calibration(
        [confidences[i].features for i in ids], correct, retriever, everything.source
    )
    provenance = {
        **fitted.logistic.fitted_on,
        "data": everything.public,
        "sha256": everything.sha256,
        "questions": len(questions),
        "passages": len(index),
        "top_passages": top_passages,
        "training_data": seen_by_model(loaded.model_dir, questions).to_dict(),
    }
    logistic = dataclasses.replace(fitted.logistic, fitted_on=provenance)
    return dataclasses.replace(fitted, logistic=logistic)


def _check_in_place(source: Path, calibration: Calibration, overwrite: bool) -> None:
    """Refuse to replace an open calibration without ``overwrite``, and a read-only run."""
    if calibration.open is not None and not overwrite:
        raise QAFinetuneError(
            f"{source} already has an open calibration ({calibration.open.retriever}): pass "
            "--overwrite to replace it, or --output NEW_RUN to calibrate a copy"
        )
    if not os.access(source, os.W_OK) or has_no_write_bits(source):
        raise QAFinetuneError(
            f"{source} is read-only: pass --output NEW_RUN to calibrate a copy of the run"
        )
