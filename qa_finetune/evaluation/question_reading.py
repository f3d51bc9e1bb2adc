"""What ``evaluate`` reads of each question's context, and its scores from that reading.

A context of a paragraph or a page is read whole. A long one (a whole article) is read as
``ask`` reads it (``retrieval.long_contexts``): only its passages that best match the
question, unless ``read_all``, each as an example of its own; its answer is then chosen
across them (``decoding.long_context_choice``) and put in the predictions under the
question's id, at offsets in the whole context, and the official scores are made from those,
so an answer is scored exactly as ``ask`` would give it.
"""

from __future__ import annotations

from typing import Any

from qa_finetune.calibration.held_out import held_out_choices
from qa_finetune.decoding.long_context_choice import answers_across_passages
from qa_finetune.modeling.scoring import evaluate_loaded, references, score
from qa_finetune.retrieval.long_contexts import LongContexts, Narrowed

# Joins a question's id and a passage's place into the id of one (question, passage) pair
# (a control character: no id of a data file holds it).
PAIR_SEPARATOR = "\x1f"


def evaluation_features(examples: Any, tokenizer: Any, spec: Any) -> Any:
    """Evaluation windows (offsets, example ids, labels) of an examples Dataset."""
    from qa_finetune.features.labels import prepare_eval_features

    return examples.map(
        prepare_eval_features,
        batched=True,
        batch_size=1000,
        fn_kwargs={"tokenizer": tokenizer, "spec": spec},
        remove_columns=examples.column_names,
        desc="Evaluation windows",
    )


def predict_and_score(
    loaded: Any,
    records: list[dict[str, Any]],
    allow_no_answer: bool,
    read_all: bool = False,
    **scoring: Any,
) -> tuple[dict[str, Any], int]:
    """Scores (with ``predictions``) of a loaded model on ``records``, and the windows read;
    ``scoring``: ``rule_mode``, ``passes`` and ``source`` of ``evaluate_loaded``."""
    from qa_finetune.data.loading import to_dataset

    read, narrowed = records_read(records, LongContexts(read_all=read_all))
    example_set = to_dataset(read)
    # A question too long for the windows fails here, named by its id (the windows' rule).
    features = evaluation_features(example_set, loaded.tokenizer, loaded.spec)
    result = evaluate_loaded(
        loaded.model,
        loaded.tokenizer,
        example_set,
        features,
        loaded.settings,
        allow_no_answer,
        rule=loaded.rule,
        watch=loaded.watch,
        **scoring,
    )
    if narrowed:
        predictions = result["predictions"]
        settings = loaded.settings
        for question_id, found in narrowed.items():
            chosen_for(
                predictions, question_id, found, settings.no_answer_threshold, allow_no_answer
            )
        gold = references(records)
        null = predictions.no_answer_score if allow_no_answer else None
        result.update(score(predictions.answers, gold, allow_no_answer, null))
        if allow_no_answer:
            rule_mode, source = scoring.get("rule_mode", "auto"), scoring.get("source", "")
            documents = len({r.get("title") for r in records})
            result.update(held_out_choices(predictions, gold, rule_mode, source, documents))
        result["long_contexts_narrowed"] = len(narrowed)
    return result, len(features)


def records_read(
    records: list[dict[str, Any]], long_contexts: LongContexts
) -> tuple[list[dict[str, Any]], dict[str, Narrowed]]:
    """The records as read: a long context's record becomes one record per passage read
    (the gold answers that lie in it moved there, none otherwise); and the narrowed ones."""
    read, narrowed = [], {}
    for record in records:
        found = long_contexts.narrow(record["question"], record["context"])
        if found is None:
            read.append(record)
            continue
        narrowed[record["id"]] = found
        gold = list(zip(record["answers"]["text"], record["answers"]["answer_start"], strict=True))
        pieces = zip(found.original_starts, found.lengths, found.passage_texts(), strict=True)
        for place, (first, length, passage) in enumerate(pieces):
            inside = [
                (t, a - first) for t, a in gold if first <= a and a + len(t) <= first + length
            ]
            answers = {"text": [t for t, _ in inside], "answer_start": [a for _, a in inside]}
            pair_id = f"{record['id']}{PAIR_SEPARATOR}{place}"
            read.append({**record, "id": pair_id, "context": passage, "answers": answers})
    return read, narrowed


def chosen_for(
    predictions: Any, question_id: str, found: Narrowed, threshold: float, allow_no_answer: bool
) -> None:
    """The question's answer chosen across its passages' predictions, put in ``predictions``
    (``decoding.spans.Predictions``) under its id in place of theirs."""
    keys = [f"{question_id}{PAIR_SEPARATOR}{place}" for place in range(found.passages_read)]
    ranked, chosen = answers_across_passages(
        predictions,
        keys,
        found,
        threshold,
        allow_no_answer,
        top_k=len(keys),
    )
    first = keys[chosen[0][0].passage] if chosen else keys[0]
    predictions.answers[question_id] = ranked[0]["answer"]
    predictions.nbest[question_id] = [
        {**_span(answer), "score": reading.span_score, "probability": probability}
        for answer, (reading, probability) in zip(ranked, chosen, strict=False)
    ]
    for table in (predictions.null_score_diff, predictions.no_answer_score, predictions.signals):
        if first in table:
            table[question_id] = table[first]
    for key in keys:
        for table in (
            predictions.answers,
            predictions.nbest,
            predictions.null_score_diff,
            predictions.no_answer_score,
            predictions.signals,
        ):
            table.pop(key, None)


def _span(answer: dict[str, Any]) -> dict[str, Any]:
    return {"text": answer["answer"], "start": answer["start"], "end": answer["end"]}
