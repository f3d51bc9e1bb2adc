"""Save a file-backed ``datasets.Dataset`` as ``save_to_disk`` does, reading its Arrow files
as a stream.

``save_to_disk`` reads the rows through the dataset's memory maps, and every page read stays
in the process's resident memory until the map is closed: saving features this way makes peak
RSS grow with their size. Here the same files are read a record batch at a time (plain reads,
freed after each batch) and written with the same writer, in the same 1000-row slices and
shards, with the same ``state.json`` and ``dataset_info.json``: the saved folder is the one
``save_to_disk`` writes, byte for byte.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qa_finetune.libraries.compat import dataset_info, dataset_state, has_indices_mapping


def save_dataset(dataset: Any, target: Path) -> None:
    """``dataset.save_to_disk(target)`` in memory that does not grow with the dataset.

    Falls back to ``save_to_disk`` for what is not whole Arrow files read in order (an
    in-memory table, an indices mapping, a slice of a file).
    """
    files = [Path(f["filename"]) for f in dataset.cache_files]
    if not files or has_indices_mapping(dataset):
        dataset.save_to_disk(str(target))
        return
    try:
        _save_streamed(dataset, files, target)
    except _NotWholeFiles:  # a sliced table: its files hold other rows too
        shutil.rmtree(target, ignore_errors=True)
        dataset.save_to_disk(str(target))


class _NotWholeFiles(Exception):
    """The dataset's rows are not exactly those of its files."""


def stream_rows(dataset: Any, columns: list[str]) -> Iterator[Any]:
    """``columns`` of ``dataset`` as record batches read from its files (plain reads, freed
    after each batch, no memory map left holding pages).

    For a dataset that is the first ``len(dataset)`` rows of its files, in order (what
    ``load_data`` and ``map`` make); anything else is read through ``datasets`` itself.
    """
    files = [Path(f["filename"]) for f in dataset.cache_files]
    if not files or has_indices_mapping(dataset):
        for table in dataset.select_columns(columns).with_format("arrow").iter(1000):
            yield from table.to_batches()
        return
    left = len(dataset)
    for batch in _batches(files, columns):
        if left <= 0:
            break
        yield batch.slice(0, min(left, batch.num_rows))
        left -= batch.num_rows


def _batches(files: list[Path], columns: list[str]) -> Iterator[Any]:
    import pyarrow as pa

    for path in files:
        with pa.OSFile(str(path)) as stream:
            for batch in pa.ipc.open_stream(stream):
                yield batch.select(columns)


def _slices(batches: Iterator[Any], bounds: list[tuple[int, int]], schema: Any) -> Iterator[Any]:
    """Tables of the rows ``[start, end)`` for each of ``bounds`` (consecutive, from 0)."""
    import pyarrow as pa

    current, current_start = None, 0
    for start, end in bounds:
        pieces, position = [], start
        while position < end:
            while current is None or position >= current_start + current.num_rows:
                if current is not None:
                    current_start += current.num_rows
                current = next(batches, None)
                if current is None:
                    raise _NotWholeFiles("the files hold fewer rows than the dataset")
            take = min(end, current_start + current.num_rows) - position
            pieces.append(current.slice(position - current_start, take))
            position += take
        yield pa.Table.from_batches(pieces, schema=schema)
    if next(batches, None) is not None:
        raise _NotWholeFiles("the files hold more rows than the dataset")


def _save_streamed(dataset: Any, files: list[Path], target: Path) -> None:
    """Write ``target`` as ``Dataset.save_to_disk`` would."""
    from datasets import config
    from datasets.arrow_writer import ArrowWriter
    from datasets.utils.py_utils import convert_file_size_to_int

    rows = len(dataset)
    max_shard_size = convert_file_size_to_int(config.MAX_SHARD_SIZE)
    num_shards = int(dataset._estimate_nbytes() / max_shard_size) + 1
    num_shards = min(rows, num_shards)
    target.mkdir(parents=True, exist_ok=True)
    batch_size = config.DEFAULT_MAX_BATCH_SIZE
    shards: list[list[tuple[int, int]]] = []
    div, mod = divmod(rows, max(num_shards, 1))
    start = 0
    for index in range(num_shards):  # Dataset.shard(contiguous=True)'s ranges, 1000-row slices
        end = start + div + (1 if index < mod else 0)
        shards.append([(o, min(o + batch_size, end)) for o in range(start, end, batch_size)])
        start = end
    bounds = [bound for shard in shards for bound in shard]
    slices = _slices(_batches(files, dataset.column_names), bounds, dataset.data.schema)
    for index, shard in enumerate(shards):
        writer = ArrowWriter(
            features=dataset.features,
            path=str(target / f"data-{index:05d}-of-{num_shards:05d}.arrow"),
            embed_local_files=True,
        )
        try:
            for _ in shard:
                writer.write_table(next(slices))
            writer.finalize()
        finally:
            writer.close()
    next(slices, None)  # raises when the files hold rows past the dataset's (a sliced table)
    _write_state(dataset, target, num_shards)


def _write_state(dataset: Any, target: Path, num_shards: int) -> None:
    """``state.json`` and ``dataset_info.json`` exactly as ``save_to_disk`` writes them."""
    state = dataset_state(dataset)
    state["_split"] = str(dataset.split) if dataset.split is not None else dataset.split
    state["_data_files"] = [
        {"filename": f"data-{index:05d}-of-{num_shards:05d}.arrow"} for index in range(num_shards)
    ]
    with open(target / "state.json", "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2, sort_keys=True)
    from datasets.utils.py_utils import asdict  # datasets' own: leaves out unset fields

    info = asdict(dataset_info(dataset))
    with open(target / "dataset_info.json", "w", encoding="utf-8") as handle:
        json.dump({key: info[key] for key in sorted(info)}, handle, indent=2)
