"""Does the reader's own representation know more about answerability than its logits say?

Before building an answerability head trained with the spans, this measures what such a head
could find: a logistic regression on the reader's final hidden states (frozen), fitted on the
questions a run was trained on and scored on questions it never saw, against the null-score
gap of the same forward passes. Per question the features are the CLS vector and the mean of
the context tokens' vectors (each averaged over the question's windows), standardised; the L2
penalty is chosen by 5-fold cross-validation on the training questions alone.

    python bench/studies/answerability_probe.py --run outputs/subjqa-from-answerability \\
        --train outputs/subjqa-split/train.json --heldout outputs/subjqa-split/heldout.json \\
        --test ../shared/data/subjqa-dev.json --out bench/studies/results/answerability_probe.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.calibration.logistic import fit_logistic
from qa_finetune.calibration.metrics import rank_auc

try:
    from bench._machine import machine_line
except ModuleNotFoundError:  # run as a script: the repository root is two folders up
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench._machine import machine_line

PENALTIES = (1.0, 10.0, 100.0, 1000.0, 10000.0)
BATCH = 32


def read_questions(path: Path) -> list[dict[str, Any]]:
    """The questions of a SQuAD v2 style file, validated as training data is."""
    from qa_finetune.config import DataConfig
    from qa_finetune.data.records import read_records
    from qa_finetune.data.validation import SplitReport, validate_records

    records = read_records(path, DataConfig(allow_no_answer=True))
    return validate_records(records, True, SplitReport())


def _window_outputs(model: Any, encoded: Any, max_answer: int) -> tuple[np.ndarray, ...]:
    """Per window: CLS vector, mean context vector, null score, best span score."""
    inputs = {k: np.asarray(encoded[k]) for k in ("input_ids", "attention_mask", "token_type_ids")}
    out = model(**inputs, output_hidden_states=True, training=False)
    hidden = out.hidden_states[-1].numpy()
    start, end = out.start_logits.numpy(), out.end_logits.numpy()
    rows = len(hidden)
    context = np.array([[s == 1 for s in encoded.sequence_ids(i)] for i in range(rows)], dtype=bool)
    pooled = (hidden * context[..., None]).sum(1) / np.maximum(context.sum(1), 1)[:, None]
    null = start[:, 0] + end[:, 0]
    return hidden[:, 0], pooled, null, best_span_scores(start, end, context, max_answer)


def best_span_scores(
    start: np.ndarray, end: np.ndarray, context: np.ndarray, max_answer: int
) -> np.ndarray:
    """Per window, the best start + end logit with start <= end < start + ``max_answer``, both
    on context tokens (-inf where the window has none)."""
    best = np.full(len(start), -np.inf)
    masked_start = np.where(context, start, -np.inf)
    masked_end = np.where(context, end, -np.inf)
    for offset in range(min(max_answer, start.shape[1])):
        pair = masked_start[:, : start.shape[1] - offset] + masked_end[:, offset:]
        best = np.maximum(best, pair.max(axis=1))
    return best


def load_reader(run: Path) -> tuple[Any, Any, dict[str, Any]]:
    """The run's tokenizer, model and recorded config, loaded once for every split."""
    import yaml
    from transformers import AutoTokenizer

    from qa_finetune.modeling.loading import load_qa_model

    config = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    return AutoTokenizer.from_pretrained(str(run / "model")), load_qa_model(run / "model"), config


def question_features(
    reader: tuple[Any, Any, dict[str, Any]], questions: list[dict[str, Any]]
) -> dict[str, np.ndarray]:
    """The frozen features and the null-score gap of every question."""
    tokenizer, model, config = reader
    features = config["preprocess"]
    cls, pooled, gap = [], [], []
    for first in range(0, len(questions), BATCH):
        batch = questions[first : first + BATCH]
        encoded = tokenizer(
            [q["question"] for q in batch],
            [q["context"] for q in batch],
            truncation="only_second",
            max_length=features["max_length"],
            stride=features["stride"],
            return_overflowing_tokens=True,
            padding="longest",
        )
        owner = np.asarray(encoded["overflow_to_sample_mapping"])
        outputs = _window_outputs(model, encoded, config["inference"]["max_answer_length"])
        for index in range(len(batch)):
            rows = owner == index
            cls.append(outputs[0][rows].mean(0))
            pooled.append(outputs[1][rows].mean(0))
            gap.append(outputs[2][rows].min() - outputs[3][rows].max())
    return {"cls": np.array(cls), "pooled": np.array(pooled), "null_gap": np.array(gap)}


def _standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    mean, scale = train.mean(0), train.std(0) + 1e-6
    return [(x - mean) / scale for x in (train, *others)]


def _scores(train: np.ndarray, labels: np.ndarray, others: list[np.ndarray], l2: float) -> list:
    weights = fit_logistic(train, labels, l2)
    return [x @ weights[:-1] + weights[-1] for x in others]


def _auc(scores: np.ndarray, unanswerable: np.ndarray) -> float:
    return rank_auc(scores[unanswerable], scores[~unanswerable])


def choose_penalty(features: np.ndarray, unanswerable: np.ndarray, seed: int = 0) -> dict:
    """Out-of-fold AUC on the training questions for each L2 penalty (5 folds)."""
    folds = np.random.default_rng(seed).permutation(len(features)) % 5
    result = {}
    for l2 in PENALTIES:
        oof = np.zeros(len(features))
        for fold in range(5):
            inside = folds != fold
            fit, held = _standardise(features[inside], features[~inside])
            oof[~inside] = _scores(fit, unanswerable[inside].astype(float), [held], l2)[0]
        result[l2] = _auc(oof, unanswerable)
    return result


def _feature_sets(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    gap = data["null_gap"][:, None]
    return {
        "CLS": data["cls"],
        "CLS + context mean": np.hstack([data["cls"], data["pooled"]]),
        "CLS + context mean + gap": np.hstack([data["cls"], data["pooled"], gap]),
    }


def main() -> None:
    """Fit the probe on ``--train``, choose by cross-validation there, score elsewhere."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--heldout", type=Path, required=True)
    parser.add_argument("--test", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    splits = {"train": args.train, "heldout": args.heldout}
    if args.test:
        splits["test"] = args.test
    data, labels = {}, {}
    reader = load_reader(args.run)
    for name, path in splits.items():
        began = time.perf_counter()
        questions = read_questions(path)
        labels[name] = np.array([not q["answers"]["text"] for q in questions])
        data[name] = question_features(reader, questions)
        print(f"{name}: {len(questions)} questions, {time.perf_counter() - began:.0f} s")
    report: dict[str, Any] = {"machine": machine_line(), "run": str(args.run), "rows": {}}
    report["rows"]["null_gap"] = {n: _auc(data[n]["null_gap"], labels[n]) for n in splits}
    sets = {n: _feature_sets(data[n]) for n in splits}
    for name in sets["train"]:
        penalties = choose_penalty(sets["train"][name], labels["train"])
        l2 = max(penalties, key=penalties.get)
        scored = [n for n in splits if n != "train"]
        fit, *rest = _standardise(sets["train"][name], *[sets[n][name] for n in scored])
        scores = _scores(fit, labels["train"].astype(float), rest, l2)
        row = {"l2": l2, "train (out-of-fold)": penalties[l2]}
        row.update({n: _auc(s, labels[n]) for n, s in zip(scored, scores, strict=True)})
        report["rows"][name] = row
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
