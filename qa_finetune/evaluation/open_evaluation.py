"""``evaluate --open``: SQuAD-format questions answered without their gold paragraphs.

Every distinct context of the file becomes one passage of an index in memory; each question
is searched there and the reader reads its ``top_passages`` best passages (the same choice
across passages as ``ask --index``). Reported beside each other, for the same questions and
model: retrieval recall@1/5/20 of the gold paragraph, end-to-end EM/F1, and EM/F1 when the
gold paragraph is given (the ordinary evaluation), with how trustworthy the confidence of
the answers found is (``open_confidence_figures``) and the table ``evaluate --open`` prints.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.calibration.answers import FoundConfidence
from qa_finetune.decoding.across_passages import (
    CONFIDENT_MARGIN,
    DEFAULT_TOP_PASSAGES,
    choose_across_passages,
    reads_more,
)
from qa_finetune.evaluation.passage_readings import passage_readings
from qa_finetune.evaluation.question_reading import predict_and_score
from qa_finetune.modeling.named_model import NamedModel
from qa_finetune.modeling.scoring import references, score
from qa_finetune.retrieval.passage_index import PassageIndex
from qa_finetune.retrieval.retriever import Hit

RECALL_AT = (1, 5, 20)


def spread_sample(records: list[dict[str, Any]], count: int | None) -> list[dict[str, Any]]:
    """``count`` questions spread evenly over the file (all without ``count``): the first N
    would come from a few articles, while the collection is the whole file."""
    if count is None or count >= len(records):
        return records
    picks = np.linspace(0, len(records) - 1, count).round().astype(int)
    return [records[i] for i in sorted(set(picks.tolist()))]


def collection_of(records: Sequence[dict[str, Any]]) -> tuple[PassageIndex, dict[str, int]]:
    """An index with one passage per distinct context, and each context's passage number."""
    numbers: dict[str, int] = {}
    named = []
    for record in records:
        if record["context"] not in numbers:
            numbers[record["context"]] = len(named)
            named.append(
                (f"{record.get('title') or 'context'}#{len(named) + 1}", record["context"])
            )
    return PassageIndex.from_texts(named), numbers


def retrieval_recall(
    index: PassageIndex, questions: Sequence[dict[str, Any]], gold: dict[str, int], depth: int
) -> tuple[dict[str, float], list[list[Hit]]]:
    """Recall@k of the gold paragraph, and each question's hits (best first)."""
    found = [index.search(q["question"], depth) for q in questions]
    recall = {}
    for k in RECALL_AT:
        hits = sum(
            gold[q["context"]] in [h.passage.number for h in hits[:k]]
            for q, hits in zip(questions, found, strict=True)
        )
        recall[f"recall@{k}"] = 100.0 * hits / max(len(questions), 1)
    return recall, found


def read_passages(
    loaded: Any,
    questions: Sequence[dict[str, Any]],
    found: Sequence[Sequence[Hit]],
    top_passages: int,
    use_rule: bool,
    confident_margin: float | None = CONFIDENT_MARGIN,
    not_sure: set[str] | None = None,
    confidences: dict[str, FoundConfidence] | None = None,
    retriever: str | None = None,
) -> dict[str, str]:
    """The end-to-end answer of each question from up to ``top_passages`` passages, read as
    ``ask --index`` reads them: the best first, the others when it is not confident. A
    calibrated model's answers get their confidence as ``ask --index`` gives it
    (``calibration.open_search``, ``retriever`` naming the search), kept in ``confidences``
    with the features it came from; with the model's ``min_confidence``, an answer below it
    is "not sure": answered "" (abstaining), its question's id added to ``not_sure``."""
    threshold = loaded.settings.no_answer_threshold
    if confident_margin is None:
        readings = passage_readings(loaded, questions, [h[:top_passages] for h in found], 0)
    else:
        readings = passage_readings(loaded, questions, [h[:1] for h in found], 0)
        unsure = [
            i
            for i, q in enumerate(questions)
            if reads_more(
                readings[q["id"]],
                [hit.score for hit in found[i][:top_passages]],
                threshold,
                use_rule,
                confident_margin,
            )
        ]
        more = passage_readings(
            loaded, [questions[i] for i in unsure], [found[i][1:top_passages] for i in unsure], 1
        )
        for question_id, extra in more.items():
            readings[question_id] = readings[question_id] + extra
    retrieval = {
        q["id"]: [hit.score for hit in hits[:top_passages]]
        for q, hits in zip(questions, found, strict=True)
    }
    answers = {}
    for question_id, question_readings in readings.items():
        chosen = choose_across_passages(question_readings, threshold, use_rule)
        answers[question_id] = chosen[0][0].text if chosen else ""
        if not chosen or loaded.calibration is None:
            continue
        given = FoundConfidence.of(loaded.calibration, chosen, retrieval[question_id], retriever)
        if confidences is not None:
            confidences[question_id] = given
        minimum = loaded.settings.min_confidence
        if minimum is not None and given.confidence < minimum:
            answers[question_id] = ""
            if not_sure is not None:
                not_sure.add(question_id)
    return answers


def open_scores(
    loaded: Any,
    collection: list[dict[str, Any]],
    questions: list[dict[str, Any]],
    top_passages: int,
    allow_no_answer: bool,
    prepared: tuple[PassageIndex, dict[str, int]] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Retrieval recall and end-to-end scores of ``questions`` against ``collection``'s
    contexts (or the ``prepared`` index of them); returns the figures and the answers."""
    began = time.perf_counter()
    index, numbers = prepared or collection_of(collection)
    indexed = time.perf_counter()
    depth = max(max(RECALL_AT), top_passages)
    recall, found = retrieval_recall(index, questions, numbers, depth)
    searched = time.perf_counter()
    not_sure: set[str] = set()
    confidences: dict[str, FoundConfidence] = {}
    answers = read_passages(
        loaded,
        questions,
        found,
        top_passages,
        allow_no_answer,
        not_sure=not_sure,
        confidences=confidences,
        retriever=index.retriever,
    )
    done = time.perf_counter()
    gold = references(questions)
    scores = score(answers, gold, allow_no_answer)
    sure = {} if loaded.settings.min_confidence is None else {"open_not_sure": len(not_sure)}
    trust = open_confidence_figures(loaded.calibration, confidences, gold, index.retriever)
    return {
        **sure,
        **trust,
        "passages": len(index),
        "top_passages": top_passages,
        **recall,
        "open_exact_match": scores["exact_match"],
        "open_f1": scores["f1"],
        "index_seconds": round(indexed - began, 3),
        "retrieval_ms_per_question": round(1000 * (searched - indexed) / len(questions), 3),
        "open_seconds": round(done - searched, 3),
    }, answers


def evaluate_open(
    model_ref: str | NamedModel | None,
    data: str,
    report_dir: Any = None,
    allow_no_answer: bool = False,
    max_samples: int | None = None,
    top_passages: int = DEFAULT_TOP_PASSAGES,
    retriever: str | None = None,
    encoder: str | None = None,
    **loading: Any,
) -> dict[str, Any]:
    """Score a model with and without the gold paragraphs on the same questions; writes the
    ordinary report plus ``open_predictions.json`` and the open figures in ``metrics.json``,
    for each retriever (or ``retriever``; dense search with ``encoder``, None: the default)
    side by side, the headline one's at the top level. ``loading``: ``load_for_answering``'s."""
    from qa_finetune.evaluation import evaluate as plain
    from qa_finetune.evaluation import open_retrievers as side
    from qa_finetune.evaluation.results import finish, write_predictions
    from qa_finetune.files import write_json
    from qa_finetune.modeling.for_answering import load_for_answering
    from qa_finetune.runs.lookup import latest_run, run_dir_of

    if report_dir is not None:
        plain.check_report_dir(Path(report_dir), [Path(data)])
    reference = model_ref or str(latest_run(plain.RUNS_ROOT))
    everything = plain.load_examples(data, None, "validation", allow_no_answer)
    questions = spread_sample(everything.records, max_samples)
    loaded = load_for_answering(reference, tune_batch=True, **loading)
    began = time.perf_counter()
    result, windows = predict_and_score(loaded, questions, allow_no_answer)
    gold_seconds = time.perf_counter() - began
    predictions = result.pop("predictions")
    figures, open_answers = side.side_by_side(
        collection_of(everything.records),
        side.retrievers_to_run(retriever),
        lambda prepared: open_scores(
            loaded, everything.records, questions, top_passages, allow_no_answer, prepared
        ),
        encoder,
    )
    report_dir = Path(report_dir or plain._default_report_dir(run_dir_of(loaded.model_dir)))
    plain.check_report_dir(report_dir, [Path(data)])
    plain.report_confidence(loaded, predictions, questions, allow_no_answer, report_dir, result)
    write_predictions(report_dir, predictions, allow_no_answer)
    write_json(report_dir / "open_predictions.json", open_answers)
    gold_f1 = result["f1"]
    metrics = {
        **result,
        **figures,
        "open_f1_of_gold": round(100.0 * figures["open_f1"] / gold_f1, 2) if gold_f1 else None,
        "data": everything.source,
        "questions": len(questions),
        "model": str(reference),
        "version_2": allow_no_answer,
        "features": windows,
        **plain._answering_settings(loaded, loading.get("quantized", False)),
        "seconds": round(gold_seconds, 3),
    }
    examples = dataclasses.replace(everything, records=questions, negatives=None)
    return finish(metrics, examples, predictions.answers, report_dir, allow_no_answer)


def open_confidence_figures(
    calibration: Any,
    confidences: dict[str, FoundConfidence],
    gold: dict[str, list[str]],
    retriever: str | None,
) -> dict[str, Any]:
    """How trustworthy the confidence of the answers found by search is (ECE, AUROC, the
    risk-coverage area; ``calibration.metrics``), beside the passage confidence
    alone, on every question answered (before any "not sure"); {} for an uncalibrated model."""
    from qa_finetune.calibration.metrics import summary
    from qa_finetune.metrics import v2_question_scores

    if calibration is None or not confidences:
        return {}
    ids = list(confidences)
    judged = [v2_question_scores(confidences[i].text, gold[i]) for i in ids]
    correct = np.array([exact == 1.0 for exact, _ in judged])
    f1 = np.array([overlap for _, overlap in judged], dtype=np.float64)
    used = np.array([confidences[i].confidence for i in ids])
    passage = np.array([confidences[i].passage for i in ids])
    opened = calibration.open is not None and calibration.open.applies_to(retriever)

    def kept(values: np.ndarray) -> dict[str, Any]:
        figures = summary(values, correct, f1)
        keys = ("ece", "auroc", "risk_coverage_area", "mean_confidence", "accuracy")
        return {key: figures[key] for key in keys}

    return {
        "open_confidence": {
            "answered": len(ids),
            "from": "open calibration" if opened else "passage calibration",
            **kept(used),
            "passage_confidence": kept(passage),
        }
    }


def open_table(metrics: dict[str, Any]) -> str:
    """The open evaluation beside the gold-paragraph one, as a small table."""
    rows = [
        (
            "retrieval recall@1 / @5 / @20",
            " / ".join(f"{metrics[f'recall@{k}']:.2f}" for k in RECALL_AT),
        ),
        ("gold paragraph: EM / F1", f"{metrics['exact_match']:.2f} / {metrics['f1']:.2f}"),
        (
            f"open, top {metrics['top_passages']} of {metrics['passages']} passages: EM / F1",
            f"{metrics['open_exact_match']:.2f} / {metrics['open_f1']:.2f}",
        ),
        ("open F1 as % of gold F1", f"{metrics['open_f1_of_gold']}"),
    ]
    if "open_not_sure" in metrics:
        shown = f"{metrics.get('not_sure', 0)} / {metrics['open_not_sure']}"
        rows.append((f"not sure (below {metrics['min_confidence']}): gold / open", shown))
    trust = metrics.get("open_confidence")
    if trust:
        passage = trust["passage_confidence"]
        rows.append(
            (
                f"open confidence ({trust['from']}): ECE / AUROC",
                f"{trust['ece']:.3f} / {_auroc(trust)} (passage alone {passage['ece']:.3f} / "
                f"{_auroc(passage)}, {trust['answered']} answers)",
            )
        )
    if len(metrics.get("retrievers", {})) > 1:
        from qa_finetune.evaluation.open_retrievers import retriever_rows

        rows[0] = (f"{metrics['retriever']}: " + rows[0][0], rows[0][1])
        rows += retriever_rows(metrics)
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def _auroc(figures: dict[str, Any]) -> str:
    # None when every answer was right, or every one wrong: nothing to rank.
    return "-" if figures["auroc"] is None else f"{figures['auroc']:.3f}"
