"""The cost of one save on the labeling page: the journal line (fsync'd) and the SQuAD file
rewritten whole (fsync'd, renamed), as the output grows.

    .venv/bin/python bench/studies/label_journal.py --saves 200 --existing 0 1000 10000

Each row starts from an output already holding ``existing`` questions (about 50 documents of
about 2,000 characters) and times ``saves`` new questions through ``LabelStore.create``, the
call behind ``POST /api/questions``; the journal append alone is timed too. Prints a markdown
table and the machine line.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run as a script from the repository root: make `bench` and `qa_finetune` importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from qa_finetune.labeling.command import open_store
from qa_finetune.labeling.documents import Document
from qa_finetune.labeling.journal import Journal
from qa_finetune.labeling.squad_writer import squad_payload, write_squad

SENTENCE = "The keeper of the Verrin light was Ann Loe, who wrote its log for {n} years. "


def make_documents(folder: Path, count: int) -> None:
    folder.mkdir()
    for number in range(count):
        text = "".join(SENTENCE.format(n=number + k) for k in range(26))
        (folder / f"doc-{number:03d}.txt").write_text(text, encoding="utf-8")


def time_saves(existing: int, saves: int, work: Path) -> tuple[list[float], int]:
    """Seconds per save after ``existing`` questions, and the output's size in bytes."""
    docs = work / "docs"
    make_documents(docs, 50)
    output = work / "out.json"
    answer = {"text": "Ann Loe", "answer_start": SENTENCE.index("Ann Loe")}
    # The questions already saved: an output from an earlier session, continued.
    documents = [
        Document(p.name, p.name, p.read_text(encoding="utf-8")) for p in sorted(docs.iterdir())
    ]
    earlier = [
        {
            "id": f"q{n}",
            "key": documents[n % 50].key,
            "question": f"Who kept it? ({n})",
            "answers": [answer],
            "is_impossible": False,
        }
        for n in range(existing)
    ]
    write_squad(output, squad_payload(documents, earlier))
    store = open_store([docs], output)
    took = []
    for number in range(saves):
        began = time.perf_counter()
        store.create(number % 50, f"Who kept the light? ({number})", answer)
        took.append(time.perf_counter() - began)
    store.close()
    return took, output.stat().st_size


def time_appends(saves: int, work: Path) -> list[float]:
    journal = Journal(work / "bare.journal")
    journal.open()
    record = {"op": "put", "id": "0" * 16, "rev": 1, "question": "Who kept the light?"}
    took = []
    for _ in range(saves):
        began = time.perf_counter()
        journal.append(record)
        took.append(time.perf_counter() - began)
    journal.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--saves", type=int, default=200)
    parser.add_argument("--existing", type=int, nargs="+", default=[0, 1000, 10000])
    args = parser.parse_args()
    print("| questions already saved | output size | median ms / save | p95 ms / save |")
    print("|---:|---:|---:|---:|")
    for existing in args.existing:
        with tempfile.TemporaryDirectory(dir=".") as work:
            took, size = time_saves(existing, args.saves, Path(work))
        took.sort()
        p95 = took[int(0.95 * (len(took) - 1))]
        print(
            f"| {existing} | {size / 1e6:.2f} MB | {statistics.median(took) * 1000:.2f} | "
            f"{p95 * 1000:.2f} |"
        )
    with tempfile.TemporaryDirectory(dir=".") as work:
        appends = sorted(time_appends(args.saves, Path(work)))
    print(f"\njournal append + fsync alone: median {statistics.median(appends) * 1000:.2f} ms")
    print(machine_line())


if __name__ == "__main__":
    main()
