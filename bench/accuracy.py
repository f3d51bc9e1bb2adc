"""EM/F1 of one model under three decodings of the same questions: only post-processing differs.

    .venv/bin/python bench/accuracy.py --model outputs/RUN \\
        --data ../shared/data/squad-v1.1-dev.json [--limit N]

One TensorFlow QA model and its tokenizer answer the same validated questions three ways:

- ours: ``qa_finetune``'s evaluation (``evaluate_loaded``): strided windows over the whole
  context, n-best starts x ends searched across all windows, answers at most
  ``--max-answer-length`` tokens, sliced from the context by character offsets;
- notebook: the original course notebook's ``get_answer``: one tokenizer call on
  (question, context) truncated to ``--max-length`` (no windows), ``argmax`` of the start and
  of the end logits taken independently, the answer decoded from the tokens between them
  (empty when the end comes before the start);
- pipeline: ``transformers.pipeline("question-answering", framework="tf")`` with the same
  window length, stride and longest answer, ``allow_no_answer=False``.

All three are scored by ``qa_finetune.metrics.squad_v1`` against every gold answer. The
notebook's decoding runs batched through the same forward as ours (each question's argmax is
taken over its own tokens only, so padding cannot change it); the first ``--check`` questions
are also answered one at a time exactly as the notebook does, to show the answers agree. The
TensorFlow pipeline runs one window at a time (transformers batches only PyTorch pipelines).
Seconds exclude a one-time warm-up (graph tracing, the pipeline's first call).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

# Run as a script from the repository root: make `bench` and `qa_finetune` importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import machine_line
from qa_finetune.config import InferenceConfig
from qa_finetune.errors import QAFinetuneError
from qa_finetune.evaluation.evaluate import load_examples
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.metrics import squad_v1
from qa_finetune.modeling.scoring import references

T = TypeVar("T")
Records = list[dict[str, Any]]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        required=True,
        help="run directory (its model/ is used), model directory or installed model package",
    )
    parser.add_argument("--data", required=True, help="SQuAD v1.1 JSON file (e.g. dev)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N questions")
    parser.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="tokens per window (default: the run's setting, else 384)",
    )
    parser.add_argument(
        "--stride", type=int, default=None, help="window overlap (default: the run's, else 128)"
    )
    parser.add_argument("--batch-size", type=int, default=64, help="windows per forward pass")
    parser.add_argument("--max-answer-length", type=int, default=30, help="in tokens")
    parser.add_argument(
        "--check",
        type=int,
        default=20,
        help="questions also answered one at a time by the literal notebook function (0: none)",
    )
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.check < 0:
        parser.error("--check must be 0 or more")
    return args


def timed(call: Callable[[], T]) -> tuple[float, T]:
    """Wall seconds of ``call()`` and its result."""
    began = time.perf_counter()
    result = call()
    return time.perf_counter() - began, result


# --------------------------------------------------------------------------------------------
# (a) ours
# --------------------------------------------------------------------------------------------


def decode_ours(answerer: QuestionAnswerer, records: Records) -> dict[str, str]:
    """Answers from ``evaluate_loaded``, with the evaluation features built as ``evaluate`` does."""
    from qa_finetune.data.loading import to_dataset
    from qa_finetune.evaluation.question_reading import evaluation_features
    from qa_finetune.modeling.scoring import evaluate_loaded

    examples = to_dataset(records)
    features = evaluation_features(examples, answerer.tokenizer, answerer.spec)
    config = InferenceConfig(
        n_best=answerer.settings.n_best,
        max_answer_length=answerer.settings.max_answer_length,
        batch_size=answerer.settings.batch_size,
    )
    result = evaluate_loaded(
        answerer.model, answerer.tokenizer, examples, features, config, allow_no_answer=False
    )
    return dict(result["predictions"].answers)


# --------------------------------------------------------------------------------------------
# (b) the course notebook
# --------------------------------------------------------------------------------------------


def notebook_get_answer(
    tokenizer: Any, model: Any, question: str, context: str, max_length: int = 384
) -> str:
    """The notebook's ``get_answer``, verbatim in behaviour: one truncated call, two argmaxes."""
    import tensorflow as tf

    inputs = tokenizer(
        question, context, truncation="only_second", max_length=max_length, return_tensors="tf"
    )
    outputs = model(dict(inputs), training=False)
    start = int(tf.argmax(outputs.start_logits, axis=1)[0])
    end = int(tf.argmax(outputs.end_logits, axis=1)[0])
    if end < start:
        return ""
    return tokenizer.decode(inputs["input_ids"][0][start : end + 1])


def notebook_encoding(answerer: QuestionAnswerer, records: Records) -> Any:
    """The notebook's single truncated tokenizer call for every question, unpadded."""
    return answerer.tokenizer(
        [r["question"] for r in records],
        [r["context"] for r in records],
        truncation="only_second",
        max_length=answerer.spec.max_length,
        return_offsets_mapping=True,
    )


def decode_notebook(answerer: QuestionAnswerer, records: Records) -> dict[str, str]:
    """The notebook's answers, computed batched through the same forward as ours.

    ``predict_features`` fills positions past each question's last token with a very low
    logit, so each argmax sees exactly the tokens the notebook's one-question call sees.
    """
    from qa_finetune.modeling.predict import predict_features

    tokenizer = answerer.tokenizer
    encoding = notebook_encoding(answerer, records)
    start_logits, end_logits = predict_features(
        answerer.model, encoding, answerer.settings.batch_size, pad_token_id=tokenizer.pad_token_id
    )
    starts = start_logits.argmax(axis=1)
    ends = end_logits.argmax(axis=1)
    answers = {}
    for i, record in enumerate(records):
        start, end = int(starts[i]), int(ends[i])
        ids = encoding["input_ids"][i]
        answers[record["id"]] = "" if end < start else tokenizer.decode(ids[start : end + 1])
    return answers


def outside_single_window(answerer: QuestionAnswerer, records: Records) -> int:
    """Questions none of whose gold answers ends inside the notebook's truncated context."""
    encoding = notebook_encoding(answerer, records)
    context_id = 1  # the notebook always passes (question, context)
    lost = 0
    for i, record in enumerate(records):
        offsets = encoding["offset_mapping"][i]
        sequence = encoding.sequence_ids(i)
        kept = max(
            (o[1] for o, s in zip(offsets, sequence, strict=True) if s == context_id), default=0
        )
        answers = record["answers"]
        ends = [s + len(t) for s, t in zip(answers["answer_start"], answers["text"], strict=True)]
        lost += all(end > kept for end in ends)
    return lost


def check_notebook(
    answerer: QuestionAnswerer, records: Records, batched: dict[str, str]
) -> tuple[int, int]:
    """How many of ``records`` the literal notebook function answers as the batched run did."""
    same = 0
    for record in records:
        answer = notebook_get_answer(
            answerer.tokenizer,
            answerer.model,
            record["question"],
            record["context"],
            max_length=answerer.spec.max_length,
        )
        same += answer == batched[record["id"]]
    return same, len(records)


# --------------------------------------------------------------------------------------------
# (c) the transformers pipeline
# --------------------------------------------------------------------------------------------


def make_pipeline(answerer: QuestionAnswerer) -> Any:
    """The question-answering pipeline on the already loaded TF model and tokenizer."""
    from transformers import pipeline

    # Without torch installed, dtype=None avoids the pipeline's NameError on torch.
    return pipeline(
        "question-answering",
        model=answerer.model,
        tokenizer=answerer.tokenizer,
        framework="tf",
        dtype=None,
    )


def decode_pipeline(answerer: QuestionAnswerer, pipe: Any, records: Records) -> dict[str, str]:
    """The pipeline's best answer for every question, all questions passed in one call."""
    results = pipe(
        question=[r["question"] for r in records],
        context=[r["context"] for r in records],
        max_seq_len=answerer.spec.max_length,
        doc_stride=answerer.spec.stride,
        max_answer_len=answerer.settings.max_answer_length,
        allow_no_answer=False,
        # transformers 4.57 batches PyTorch pipelines only; a TF one ignores this.
        batch_size=answerer.settings.batch_size,
    )
    if isinstance(results, dict):  # a single question comes back unwrapped
        results = [results]
    return {r["id"]: result["answer"] for r, result in zip(records, results, strict=True)}


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def warm_up(answerer: QuestionAnswerer, pipe: Any, records: Records) -> None:
    """Trace the compiled forward and make the pipeline's first call before any timing."""
    from qa_finetune.modeling.predict import predict_features

    encoding = notebook_encoding(answerer, records[:2])
    # compile=True traces the graph that later calls (ours and the notebook's) reuse.
    predict_features(
        answerer.model,
        encoding,
        answerer.settings.batch_size,
        pad_token_id=answerer.tokenizer.pad_token_id,
        compile=True,
    )
    pipe(question=records[0]["question"], context=records[0]["context"])


def print_results(
    args: argparse.Namespace,
    answerer: QuestionAnswerer,
    model_dir: Path,
    rows: list[tuple[str, dict[str, Any], float]],
    lost: int,
    check: tuple[int, int],
) -> None:
    """The markdown table and what it was measured on."""
    questions = rows[0][1]["total"]
    print(
        f"\n# Decoding accuracy: {questions} questions, max_length {answerer.spec.max_length}, "
        f"stride {answerer.spec.stride}, "
        f"longest answer {answerer.settings.max_answer_length} tokens\n"
    )
    print("| decoding | EM | F1 | questions | seconds |")
    print("|---|---:|---:|---:|---:|")
    for name, scores, seconds in rows:
        print(
            f"| {name} | {scores['exact_match']:.2f} | {scores['f1']:.2f} | "
            f"{scores['total']} | {seconds:.1f} |"
        )
    print(
        f"\n{lost} of {questions} questions have no gold answer inside the notebook's single "
        f"truncated window of {answerer.spec.max_length} tokens."
    )
    if check[1]:
        verdict = "" if check[0] == check[1] else " (float noise can flip a near-tie argmax)"
        print(
            f"The literal one-question notebook function gave the batched notebook answer for "
            f"{check[0]}/{check[1]} of the first questions{verdict}."
        )
    print(f"\n{machine_line()}")
    print(f"model: {args.model} ({model_dir})")
    print(f"data: {args.data}")
    print(f"Command: python bench/accuracy.py {shlex.join(sys.argv[1:])}")


def run(args: argparse.Namespace) -> None:
    from qa_finetune.modeling.reference import resolve_model_dir

    # Data problems show before the (slow) model load.
    records = load_examples(args.data, None, max_samples=args.limit).records
    model_dir = resolve_model_dir(args.model)
    answerer = QuestionAnswerer.load(
        args.model,
        max_length=args.max_length,
        stride=args.stride,
        max_answer_length=args.max_answer_length,
        batch_size=args.batch_size,
    )
    answerer.check_questions(
        [r["question"] for r in records], labels=[f"question {r['id']}: " for r in records]
    )
    pipe = make_pipeline(answerer)
    warm_up(answerer, pipe, records)

    gold = references(records)
    decoders: list[tuple[str, Callable[[], dict[str, str]]]] = [
        ("ours: windows, n-best across windows, offsets", lambda: decode_ours(answerer, records)),
        (
            "notebook `get_answer`: truncated, argmax start/end, decoded tokens",
            lambda: decode_notebook(answerer, records),
        ),
        (
            "`pipeline('question-answering', framework='tf')`",
            lambda: decode_pipeline(answerer, pipe, records),
        ),
    ]
    rows = []
    answers: dict[str, dict[str, str]] = {}
    for name, decode in decoders:
        print(f"decoding: {name} ...", flush=True)
        seconds, predictions = timed(decode)
        answers[name] = predictions
        rows.append((name, squad_v1(predictions, gold), seconds))
    notebook = answers[decoders[1][0]]
    check = check_notebook(answerer, records[: args.check], notebook)
    lost = outside_single_window(answerer, records)
    print_results(args, answerer, model_dir, rows, lost, check)


def main() -> None:
    args = parse_args()
    try:
        run(args)
    except QAFinetuneError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
