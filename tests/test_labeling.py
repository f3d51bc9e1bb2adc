"""A labeled file is training data as it is: ``train --init-from`` continues a tiny run on
it and ``evaluate`` scores the child on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_runs import tiny_run_config

from qa_finetune.config import Config
from qa_finetune.labeling.command import open_store

DOCUMENTS = {
    "bridge.txt": "The Verrin Bay Bridge was designed by Alma Stroud.\r\nIt opened in 1931.",
    "tower.md": "东京塔建于1958年。The tower's 🗼 architect was Tachū Naitō.",
}
QUESTIONS = [
    ("bridge.txt", "Who designed the bridge?", "Alma Stroud"),
    ("bridge.txt", "When did it open?", "1931"),
    ("bridge.txt", "Who paid for it?", None),
    ("tower.md", "Who was the architect?", "Tachū Naitō"),
    ("tower.md", "When was the tower built?", "1958"),
    ("tower.md", "How tall is it?", None),
]


def label_tiny_set(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS.items():
        (docs / name).write_bytes(text.encode())
    output = tmp_path / "mine.json"
    store = open_store([docs], output)
    names = [d.key for d in store.documents]
    for name, question, answer in QUESTIONS:
        text = DOCUMENTS[name]
        span = None if answer is None else {"text": answer, "answer_start": text.index(answer)}
        store.create(names.index(name), question, span)
    store.close()
    return output


@pytest.mark.slow
def test_a_labeled_file_trains_with_init_from_and_evaluates(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.evaluation.evaluate import evaluate_model
    from qa_finetune.training.trainer import train

    data = label_tiny_set(tmp_path)
    payload = json.loads(data.read_bytes())
    assert payload["version"] == "v2.0"
    assert [a["title"] for a in payload["data"]] == ["bridge.txt", "tower.md"]
    parent = train(tiny_run_config(tiny_model_dir, tmp_path / "runs", run_name="parent"))
    child_config = Config.from_dict(
        {
            "model": {"init_from": str(parent)},
            "data": {
                "train_file": str(data),
                "validation_file": str(data),
                "allow_no_answer": True,
            },
            "train": {
                "output_dir": str(tmp_path / "runs"),
                "run_name": "child",
                "batch_size": 8,
                "tensorboard": False,
            },
        }
    )
    child = train(child_config)
    metrics = json.loads((child / "metrics.json").read_text())
    assert (metrics["parent"]["run"], metrics["parent"]["path"]) == ("parent", str(parent))
    scored = evaluate_model(str(child), data=str(data), dataset=None, allow_no_answer=True)
    assert scored["total"] == len(QUESTIONS)
    assert scored["HasAns_total"] == 4 and scored["NoAns_total"] == 2
