"""Score no-answer rules on a saved SQuAD v2 evaluation, without running the model again.

``qa-finetune evaluate --allow-no-answer`` writes each question's n-best list and no-answer
signals (``nbest_predictions.json``, ``no_answer_signals.json``). The model's spans and signals
do not depend on the rule, so every rule can be scored from them: the null-score gap at a given
threshold, and the rule and threshold saved in a run (``no_answer_rule.json``, from training or
``calibrate`` on held-out questions). Each row: official v2 F1 (HasAns, NoAns), the F1 of the
best threshold on these very questions (an upper bound, not a score), and the AUC: over all
unanswerable questions, and apart for each kind made by ``data.swap_negatives`` (ids ending
``#swap``) and ``data.question_negatives`` (``#negative``) when the file holds them (a held-out
split written by ``bench/studies/heldout_split.py``).

    python bench/studies/no_answer_rules.py --eval-dir R/v2-shipped \\
        --data ../shared/data/squad-v2.0-dev.json --gap 0 \\
        --run outputs/minilm-31k-calibrated --out bench/studies/results/no_answer_rules.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.calibration.metrics import rank_auc
from qa_finetune.calibration.no_answer_rule import NoAnswerRule, tune_no_answer_threshold
from qa_finetune.data.question_negatives import SUFFIX as PARAGRAPH_SUFFIX
from qa_finetune.data.swap_negatives import SUFFIX as SWAP_SUFFIX
from qa_finetune.decoding.spans import Predictions
from qa_finetune.metrics import normalize_answer, squad_v2

try:
    from bench._machine import machine_line
except ModuleNotFoundError:  # run as a script: the repository root is two folders up
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench._machine import machine_line


def load_evaluation(eval_dir: Path, data: Path) -> tuple[Predictions, dict[str, list[str]]]:
    """The saved n-best lists and signals, and the gold answers of ``data``."""
    from qa_finetune.config import DataConfig
    from qa_finetune.data.records import read_records
    from qa_finetune.data.validation import SplitReport, validate_records

    nbest = json.loads((eval_dir / "nbest_predictions.json").read_text(encoding="utf-8"))
    signals = json.loads((eval_dir / "no_answer_signals.json").read_text(encoding="utf-8"))
    records = validate_records(
        read_records(data, DataConfig(allow_no_answer=True)), True, SplitReport()
    )
    gold = {r["id"]: list(r["answers"]["text"]) for r in records}
    predictions = Predictions(nbest=nbest, signals=signals)
    return predictions, gold


# Made negatives are told apart by the id ending their maker gives; the rest were written.
KINDS = {SWAP_SUFFIX: "swap", PARAGRAPH_SUFFIX: "other paragraph"}


def auc_by_kind(ids: list[str], scores: np.ndarray, unanswerable: np.ndarray) -> dict[str, float]:
    """The AUC of each kind of unanswerable question against all answerable ones."""
    kinds = np.array(
        [next((k for end, k in KINDS.items() if q.endswith(end)), "written") for q in ids]
    )
    return {
        kind: rank_auc(scores[unanswerable & (kinds == kind)], scores[~unanswerable])
        for kind in sorted(set(kinds[unanswerable].tolist()))
    }


def score_rule(
    predictions: Predictions, gold: dict[str, list[str]], rule: NoAnswerRule, threshold: float
) -> dict[str, Any]:
    """Official v2 scores of ``rule`` at ``threshold``, the best threshold here, and the AUC."""
    from qa_finetune.decoding.no_answer_signals import SIGNALS

    ids = list(gold)
    columns = {
        name: np.array([predictions.signals.get(q, {}).get(name, np.nan) for q in ids])
        for name in SIGNALS
    }
    scores = rule.score(columns)
    answers = {}
    for qid, score in zip(ids, scores.tolist(), strict=True):
        nbest = predictions.nbest.get(qid) or []
        answers[qid] = "" if not nbest or score > threshold else nbest[0]["text"]
    by_id = dict(zip(ids, scores.tolist(), strict=True))
    official = squad_v2(answers, gold)
    predictions.no_answer_score = by_id
    best_threshold, best_f1 = tune_no_answer_threshold(predictions, gold)
    unanswerable = np.array([not any(normalize_answer(a) for a in gold[q]) for q in ids])
    return {
        "rule": rule.kind,
        "threshold": threshold,
        "f1": official["f1"],
        "exact": official["exact"],
        "HasAns_f1": official.get("HasAns_f1"),
        "NoAns_f1": official.get("NoAns_f1"),
        "abstained": sum(a == "" for a in answers.values()),
        "best_f1_here": best_f1,
        "best_threshold_here": best_threshold,
        "auc": rank_auc(scores[unanswerable], scores[~unanswerable]),
        "auc_by_kind": auc_by_kind(ids, scores, unanswerable),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval-dir", type=Path, required=True, help="evaluate's report folder")
    parser.add_argument("--data", type=Path, required=True, help="the evaluated data file")
    parser.add_argument("--gap", type=float, action="append", default=[], help="gap thresholds")
    parser.add_argument("--run", type=Path, action="append", default=[], help="runs with rules")
    parser.add_argument("--out", type=Path, help="append the rows to this JSON file")
    args = parser.parse_args()
    from qa_finetune.runs.no_answer_rule_file import read_rule

    predictions, gold = load_evaluation(args.eval_dir, args.data)
    rows = []
    for threshold in args.gap:
        rows.append(
            {"source": "null_gap", **score_rule(predictions, gold, NoAnswerRule(), threshold)}
        )
    for run in args.run:
        saved = read_rule(run)
        if saved is None:
            raise SystemExit(f"{run} has no no_answer_rule.json: calibrate it first")
        row = score_rule(predictions, gold, saved.rule, saved.threshold)
        rows.append({"source": str(run), "chosen_on": saved.chosen_on, **row})
    print(machine_line())
    print(f"{args.eval_dir} on {args.data}: {len(gold)} questions")
    header = (
        "source | rule | threshold | F1 | HasAns F1 | NoAns F1 | abstained | best F1 here | AUC"
    )
    print(header)
    for row in rows:
        print(
            f"{row['source']} | {row['rule']} | {row['threshold']:.3f} | {row['f1']:.2f} | "
            f"{row['HasAns_f1']:.2f} | {row['NoAns_f1']:.2f} | {row['abstained']} | "
            f"{row['best_f1_here']:.2f} | {row['auc']:.3f}"
        )
        if len(row["auc_by_kind"]) > 1:
            kinds = ", ".join(f"{k} {v:.3f}" for k, v in row["auc_by_kind"].items())
            print(f"    AUC by kind of unanswerable question: {kinds}")
    if args.out:
        existing = json.loads(args.out.read_text()) if args.out.is_file() else []
        entry = {"eval_dir": str(args.eval_dir), "data": str(args.data), "rows": rows}
        args.out.write_text(json.dumps([*existing, entry], indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
