"""The prepare report: counts of examples and windows, and how well labels match the answers."""

from __future__ import annotations

from typing import Any

import numpy as np

from qa_finetune import __version__
from qa_finetune.data.dataset_save import stream_rows
from qa_finetune.data.loading import LoadedData
from qa_finetune.features.windows import WindowSpec
from qa_finetune.metrics import normalize_answer


def _percentiles(values: np.ndarray) -> dict[str, int]:
    if not len(values):
        return {}
    points = np.percentile(values, [50, 90, 99]).round().astype(int)
    return {
        "p50": int(points[0]),
        "p90": int(points[1]),
        "p99": int(points[2]),
        "max": int(values.max()),
    }


def _label_counts(train: Any) -> tuple[int, int, int, np.ndarray]:
    """(windows labelled, labels matching a gold answer, examples with an answer found, window
    lengths) of the training windows, read in batches from the files, never whole columns as
    Python lists nor through memory maps (their pages stay resident): memory stays flat."""
    import pyarrow.compute as pc

    labelled = matches = found = 0
    # An example's windows are consecutive and ids are unique, so counting the changes of id
    # among labelled windows counts the examples with an answer found, holding no id set.
    last_found = None
    lengths = []
    columns = ["label_text", "gold_texts", "example_id", "input_ids"]
    for batch in stream_rows(train, columns):
        # Window lengths from Arrow's list offsets: no token ids become Python objects.
        lengths.append(pc.list_value_length(batch.column("input_ids")).to_numpy())
        labels = batch.select(columns[:3]).to_pydict()
        for text, golds, example_id in zip(
            labels["label_text"], labels["gold_texts"], labels["example_id"], strict=True
        ):
            if text:
                labelled += 1
                found += example_id != last_found
                last_found = example_id
                matches += normalize_answer(text) in {normalize_answer(g) for g in golds}
    train_lengths = (
        np.concatenate(lengths).astype(np.int64) if lengths else np.zeros(0, dtype=np.int64)
    )
    return labelled, matches, found, train_lengths


def summarise(
    loaded: LoadedData, train: Any, validation: Any, spec: WindowSpec, fingerprint: str
) -> dict[str, Any]:
    """Counts for the prepare report, including how well labels match the gold answers."""
    return {
        "fingerprint": fingerprint,
        "qa_finetune_version": __version__,
        "sources": loaded.sources,
        "max_length": spec.max_length,
        "stride": spec.stride,
        "train": _train_counts(loaded, train) if train is not None else dict(_NO_TRAIN),
        "validation": {
            "examples": len(loaded.splits["validation"]) if "validation" in loaded.splits else 0,
            "features": len(validation) if validation is not None else 0,
            **(
                loaded.reports["validation"].to_dict()
                if "validation" in loaded.reports
                else {"note": loaded.sources.get("validation", "none")}
            ),
        },
    }


# A monitor file's features: evaluation windows alone.
_NO_TRAIN = {"examples": 0, "features": 0}


def _train_counts(loaded: LoadedData, train: Any) -> dict[str, Any]:
    """The training split's counts and label matches."""
    labelled, matches, found, train_lengths = _label_counts(train)
    answerable = _answerable(loaded.splits["train"])
    n_train = len(loaded.splits["train"])
    return {
        "examples": n_train,
        "features": len(train),
        "windows_per_example": round(len(train) / max(n_train, 1), 3),
        "answerable_examples": answerable,
        "answers_found": found,
        "answers_lost_to_truncation": answerable - found,
        "windows_with_answer": labelled,
        "label_text_matches": matches,
        "label_match_rate": round(matches / max(labelled, 1), 6),
        "window_tokens": _percentiles(train_lengths),
        **{k: v for k, v in loaded.reports["train"].to_dict().items() if k != "examples_kept"},
    }


def _answerable(examples: Any) -> int:
    """Examples with at least one gold answer, read from the Arrow file in batches."""
    import pyarrow.compute as pc

    answerable = 0
    for batch in stream_rows(examples, ["answers"]):
        texts = pc.struct_field(batch.column("answers"), "text")
        answerable += pc.sum(pc.greater(pc.list_value_length(texts), 0)).as_py() or 0
    return answerable
