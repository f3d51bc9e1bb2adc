"""Validated examples on disk: written to Arrow files a batch at a time and read back
memory-mapped, so loading data takes memory that does not grow with the number of examples."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Examples per record batch written; also what the writer holds in memory at once.
WRITE_BATCH = 1000


def example_features() -> Any:
    """The columns and types of validated examples (a ``datasets.Features``)."""
    from datasets import Features, Sequence, Value

    return Features(
        {
            "id": Value("string"),
            "title": Value("string"),
            "context": Value("string"),
            "question": Value("string"),
            "answers": {
                "text": Sequence(Value("string")),
                "answer_start": Sequence(Value("int32")),
            },
        }
    )


def write_examples(records: Iterable[dict[str, Any]], path: Path) -> int:
    """Write ``records`` to the Arrow file ``path`` in batches; return how many there were."""
    from datasets.arrow_writer import ArrowWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = ArrowWriter(features=example_features(), path=str(path), writer_batch_size=WRITE_BATCH)
    try:
        for record in records:
            writer.write(record)
        count, _ = writer.finalize()
    finally:
        writer.close()
    return count


def open_examples(path: Path) -> Any:
    """The examples of an Arrow file as a memory-mapped ``datasets.Dataset``.

    Its fingerprint is the file's content hash, not ``datasets``' default (which hashes the
    file's path, here a per-process folder), so the same data gives the same saved state.
    """
    from datasets import Dataset
    from datasets.table import MemoryMappedTable

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    table = MemoryMappedTable.from_file(str(path))
    return Dataset(table, fingerprint=digest.hexdigest()[:16])


def split_by_context(
    source: Path, fraction: float, seed: int, train_path: Path, validation_path: Path
) -> None:
    """Hold out whole paragraphs, so no validation context was seen in training.

    The held-out paragraphs are those of the list of distinct contexts, sorted and shuffled
    with ``seed`` (the same as sorting Python strings: UTF-8 bytes sort in code-point order);
    only the distinct contexts are held (in Arrow), and the examples are copied batch by batch.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    with pa.OSFile(str(source)) as stream:
        reader = pa.ipc.open_stream(stream)
        schema = reader.schema
        contexts = pa.array([], type=pa.string())
        for batch in reader:  # read, not mapped: only the distinct contexts stay in memory
            contexts = pa.concat_arrays([contexts, batch.column("context").unique()]).unique()
    contexts = contexts.take(pc.sort_indices(contexts))
    order = list(range(len(contexts)))
    random.Random(seed).shuffle(order)  # the permutation shuffle() gives any list this long
    held_out = contexts.take(
        pa.array(order[: max(1, round(len(contexts) * fraction))], type=pa.int64())
    )
    del contexts, order
    _write_split(source, schema, "context", held_out, train_path, validation_path)


def split_by_document(
    source: Path, fraction: float, seed: int, train_path: Path, validation_path: Path
) -> None:
    """Hold out whole documents (titles), so no paragraph of a validation document was seen
    in training: a question asked of its whole document is as new to the reader as its own
    paragraph.

    Documents are taken in a seeded order while the held-out questions stay within
    ``fraction`` of all of them; a document larger than what is left is passed over, so one
    huge document (a forum of thousands of posts under one title) never takes a third of the
    training data with it. At least one document is held out.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    sizes: dict[str, int] = {}
    with pa.OSFile(str(source)) as stream:
        reader = pa.ipc.open_stream(stream)
        schema = reader.schema
        for batch in reader:  # only the titles' counts stay in memory
            counts = pc.value_counts(batch.column("title"))
            for value, count in zip(counts.field("values"), counts.field("counts"), strict=True):
                sizes[value.as_py()] = sizes.get(value.as_py(), 0) + count.as_py()
    titles = sorted(sizes)
    random.Random(seed).shuffle(titles)
    target = max(1, round(fraction * sum(sizes.values())))
    held: list[str] = []
    total = 0
    for title in titles:
        if total + sizes[title] <= target:
            held.append(title)
            total += sizes[title]
    held = held or titles[:1]
    held_out = pa.array(held, type=pa.string())
    _write_split(source, schema, "title", held_out, train_path, validation_path)


def _write_split(
    source: Path, schema: Any, column: str, held_out: Any, train_path: Path, held_path: Path
) -> None:
    """Copy ``source``'s examples batch by batch: those whose ``column`` is in ``held_out``
    to ``held_path``, the others to ``train_path``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    with (
        pa.OSFile(str(source)) as stream,
        pa.ipc.new_stream(str(train_path), schema) as train,
        pa.ipc.new_stream(str(held_path), schema) as held,
    ):
        for batch in pa.ipc.open_stream(stream):
            mask = pc.is_in(batch.column(column), value_set=held_out)
            train.write_batch(batch.filter(pc.invert(mask)))
            held.write_batch(batch.filter(mask))
