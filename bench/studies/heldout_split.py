"""Write the validation split a training config builds (held-out paragraphs, question-level
negatives included) to a JSON Lines file, so other models can be scored or calibrated on
exactly the questions a run chose its no-answer rule on.

    python bench/studies/heldout_split.py --config configs/minilm-31k-negatives.yaml \\
        --out outputs/general-heldout.jsonl
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from qa_finetune.config import load_config
from qa_finetune.data.loading import load_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    config = load_config(args.config)
    with tempfile.TemporaryDirectory() as work:
        loaded = load_data(config.data, seed=config.train.seed, work_dir=Path(work))
        validation = loaded.splits["validation"]
        lines = [
            json.dumps({**row, "answers": dict(row["answers"])}, ensure_ascii=False)
            for row in validation
        ]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    unanswerable = sum(1 for line in lines if '"text": []' in line)
    print(f"{args.out}: {len(lines)} questions ({unanswerable} without an answer)")


if __name__ == "__main__":
    main()
