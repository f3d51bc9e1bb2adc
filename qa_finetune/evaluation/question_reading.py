"""What ``evaluate`` reads of each question's context, and its scores from that reading.

A context of a paragraph or a page is read whole. A long one (a whole article) is read as
``ask`` reads it (``retrieval.long_contexts``): only its passages that best match the
question, unless ``read_all``. The predictions, their n-best lists and offsets, are then
moved back to the whole context, and the official scores are made from those, so an answer
is scored exactly as ``ask`` would give it.
"""

from __future__ import annotations

from typing import Any

from qa_finetune.modeling.scoring import evaluate_loaded, references, score
from qa_finetune.retrieval.long_contexts import LongContexts, Narrowed


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
    ``scoring``: ``rule_mode`` and ``passes`` of ``evaluate_loaded``."""
    from qa_finetune.data.loading import to_dataset

    read, narrowed = narrowed_records(records, LongContexts(read_all=read_all))
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
        into_original(predictions, narrowed)
        null = predictions.null_score_diff if allow_no_answer else None
        result.update(score(predictions.answers, references(records), allow_no_answer, null))
        result["long_contexts_narrowed"] = len(narrowed)
    return result, len(features)


def narrowed_records(
    records: list[dict[str, Any]], long_contexts: LongContexts
) -> tuple[list[dict[str, Any]], dict[str, Narrowed]]:
    """The records as read (a long context replaced by its passages read, the gold answers
    that lie in them moved there, the others left out) and the narrowed ones by id."""
    read, narrowed = [], {}
    for record in records:
        found = long_contexts.narrow(record["question"], record["context"])
        if found is None:
            read.append(record)
            continue
        narrowed[record["id"]] = found
        texts, starts = [], []
        for text, start in zip(
            record["answers"]["text"], record["answers"]["answer_start"], strict=True
        ):
            span = found.to_read(start, start + len(text))
            if span is not None:
                texts.append(text)
                starts.append(span[0])
        answers = {"text": texts, "answer_start": starts}
        read.append({**record, "context": found.text, "answers": answers})
    return read, narrowed


def into_original(predictions: Any, narrowed: dict[str, Narrowed]) -> None:
    """Move the answers and n-best lists of ``predictions`` (``decoding.spans.Predictions``)
    read from passages back to their whole contexts, in place."""
    for example_id, found in narrowed.items():
        nbest = predictions.nbest.get(example_id, [])
        moved = []
        for candidate in nbest:
            if candidate.get("text"):
                start, end = found.to_original(candidate["start"], candidate["end"])
                text = found.original[start:end]
                candidate = {**candidate, "text": text, "start": start, "end": end}
            moved.append(candidate)
        predictions.nbest[example_id] = moved
        answer = predictions.answers.get(example_id)
        chosen = [i for i, candidate in enumerate(nbest) if answer and candidate["text"] == answer]
        if chosen:
            predictions.answers[example_id] = moved[chosen[0]]["text"]
