"""Read question-answering records from local files one at a time, in memory that does not
grow with the file.

The same records, in the same order, with the same errors as ``data/records.read_records``
(which reads a file whole): nested SQuAD JSON is parsed incrementally with ``ijson``, JSON
Lines line by line, CSV and Parquet in chunks. Whenever the incremental parse fails before a
record came out (a syntax error, NaN, a file that is JSON Lines under a ``.json`` name), the
file is read whole by ``read_records``, so its error messages (line:column, non-UTF-8 byte)
stay exactly those of the whole-file reader.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import IO, Any

from qa_finetune.config import DataConfig
from qa_finetune.data.records import (
    FLAT_SUFFIXES,
    DataError,
    _rename_columns,
    flatten_articles,
    json_line,
    looks_like_articles,
    read_records,
)
from qa_finetune.files import check_file, read_text
from qa_finetune.files.nesting import JsonDepth, given_twice, parse_json

# Rows per chunk of CSV and Parquet files; JSON is read in ijson's own buffer.
CHUNK_ROWS = 10_000
READ_BYTES = 1 << 20
BOM_BYTES = b"\xef\xbb\xbf"
# How many leading articles decide whether a JSON file is nested SQuAD (as read_records).
SQUAD_PROBE = 5


def stream_records(path: Path, config: DataConfig) -> Iterator[dict[str, Any]]:
    """Flat records of one local file, one at a time, with the standard column names."""
    check_file(path, "data file", "--train-file or --validation-file", DataError)
    suffix = path.suffix.lower()
    if suffix not in FLAT_SUFFIXES:
        raise DataError(f"unsupported data file {path}: use SQuAD .json, .jsonl, .csv or .parquet")
    if suffix in (".json", ".jsonl"):
        # A JSON Lines file's depth is checked line by line, as each is parsed.
        _check_utf8(path, JsonDepth(str(path), DataError) if suffix == ".json" else None)
    if suffix == ".json":
        yield from _stream_json(path, config)
    elif suffix == ".jsonl":
        yield from rename_stream(_json_lines(path), config, path)
    else:
        yield from rename_stream(_table_rows(path), config, path)


def _check_utf8(path: Path, depth: JsonDepth | None = None) -> None:
    """A pass over the bytes (constant memory): a file that is not UTF-8 fails before any
    record is read, with the whole-file reader's message (line and byte); so does one nested
    deeper than ijson can follow (it keeps the path of every open level)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(READ_BYTES), b""):
                decoder.decode(block)
                if depth is not None:
                    depth.feed(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        read_text(path, "data file", error=DataError)  # raises with the line and the byte
        raise  # not reached: read_text decodes the same bytes
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None


def _open_without_bom(path: Path) -> IO[bytes]:
    handle = open(path, "rb")  # noqa: SIM115 (closed by the caller)
    if handle.read(len(BOM_BYTES)) != BOM_BYTES:
        handle.seek(0)
    return handle


def _first_byte(handle: IO[bytes]) -> bytes:
    """The first byte that is not JSON whitespace; the handle is left where it was."""
    start = handle.tell()
    while block := handle.read(4096):
        stripped = block.lstrip(b" \t\r\n")
        if stripped:
            handle.seek(start)
            return stripped[:1]
    handle.seek(start)
    return b""


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSON Lines file, line by line (``read_records``' checks and messages)."""
    with _open_without_bom(path) as handle:
        for line_number, raw in enumerate(handle, 1):
            line = raw.decode("utf-8").removesuffix("\n")
            if line.strip():
                yield json_line(path, line_number, line)


def _first_line_is_object(path: Path) -> bool:
    """A .json file that holds JSON Lines: its first non-blank line alone is a JSON object,
    and another line follows. A file of one line is one document (a SQuAD file written
    without line breaks), which the whole-file reader reads as such, NaN and all."""
    with _open_without_bom(path) as handle:
        lines = (raw for raw in handle if raw.strip())
        first = next(lines, b"")
        try:
            is_object = isinstance(parse_json(first, "line", DataError), Mapping)
        except (json.JSONDecodeError, DataError):
            return False
        return is_object and next(lines, None) is not None


def _stream_json(path: Path, config: DataConfig) -> Iterator[dict[str, Any]]:
    """Records of a ``.json`` file: nested SQuAD, a list of examples, or ``{"data": [...]}``."""
    import ijson

    produced = False
    try:
        for record in _json_document(path, config):
            produced = True
            yield record
        return
    except (ijson.JSONError, DataError) as exc:
        if produced:
            # Records already went on: read the file whole for the exact error it gives.
            list(read_records(path, config))
            raise
        if isinstance(exc, ijson.JSONError) and _first_line_is_object(path):
            # Not one JSON document but its first line is one: JSON Lines, as read_records.
            yield from rename_stream(_json_lines(path), config, path)
            return
    # The whole-file reader gives the error (line:column) or, for what only it accepts
    # (NaN, for one), the records.
    yield from read_records(path, config)


def _json_document(path: Path, config: DataConfig) -> Iterator[dict[str, Any]]:
    import ijson

    with _open_without_bom(path) as handle:
        first = _first_byte(handle)
        if first == b"[":
            rows = ijson.items(_keys_once(ijson.parse(handle, use_float=True), path), "item")
            yield from rename_stream(_objects(rows, path), config, path)
            return
        if first != b"{":
            raise DataError(f"{path}: not a JSON object or list")  # replaced by read_records'
        # ijson builds the items in C; only "data"'s own items come out, one at a time.
        events = _keys_once(ijson.parse(handle, use_float=True), path)
        items = ijson.items(events, "data.item")
        probe = list(islice(items, SQUAD_PROBE))
        if not probe and not _data_is_list(path):  # the whole file was parsed: it is JSON
            raise DataError(
                f"{path}: JSON is neither SQuAD ('data' -> 'paragraphs') nor a list of examples"
            )
        rest = _chain(probe, items)
        if looks_like_articles(probe):
            yield from flatten_articles(rest, path)
        else:
            yield from rename_stream(_objects(rest, path), config, path)


def _keys_once(events: Iterable[tuple[str, str, Any]], path: Path) -> Iterator[Any]:
    """ijson's events, passed on; a key given twice in one object (ijson, as ``json``, would
    keep the last in silence) is a ``DataError``."""
    open_objects: list[set[str]] = []
    for prefix, event, value in events:
        if event == "map_key":
            if value in open_objects[-1]:
                raise DataError(given_twice(str(path), value))
            open_objects[-1].add(value)
        elif event == "start_map":
            open_objects.append(set())
        elif event == "end_map":
            open_objects.pop()
        yield prefix, event, value


def _data_is_list(path: Path) -> bool:
    """Whether the top-level object's "data" is a list (an empty one gives no items)."""
    import ijson

    with _open_without_bom(path) as handle:
        for prefix, event, _ in ijson.parse(handle):
            if prefix == "data":
                return bool(event == "start_array")
    return False


def _chain(first: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    """The buffered items, then the rest; the buffer is released as it is consumed."""
    while first:
        yield first.pop(0)
    yield from rest


def _objects(rows: Iterable[Any], path: Path) -> Iterator[dict[str, Any]]:
    for number, row in enumerate(rows, 1):
        if not isinstance(row, Mapping):
            raise DataError(f"{path}: example {number} is {type(row).__name__}, not an object")
        yield dict(row)


def _table_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a CSV or Parquet file, a chunk at a time."""
    import pandas as pd

    try:
        if path.suffix.lower() == ".csv":
            chunks: Iterable[Any] = pd.read_csv(path, chunksize=CHUNK_ROWS)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            batches = pq.ParquetFile(path).iter_batches(batch_size=CHUNK_ROWS)
            chunks = (pa.Table.from_batches([b]).to_pandas() for b in batches)
        for chunk in chunks:
            yield from chunk.to_dict(orient="records")
    except Exception as exc:  # pandas and pyarrow raise many types for unreadable files
        raise DataError(f"cannot read {path}: {exc}".splitlines()[0]) from exc


def rename_stream(
    rows: Iterable[dict[str, Any]], config: DataConfig, path: Path
) -> Iterator[dict[str, Any]]:
    """``records._rename_all`` one row at a time. A required column absent from every row is
    an error (a naming problem), raised once the last row has been seen; absent from some
    rows, those records carry a ``problem`` that validation counts."""
    required = {name: getattr(config, f"{name}_column") for name in ("context", "question")}
    found = dict.fromkeys(required, False)
    first_keys: list[str] | None = None
    number = 0
    for number, row in enumerate(rows, 1):
        if first_keys is None:
            first_keys = list(map(str, row))
        for name, column in required.items():
            found[name] = found[name] or column in row
        yield _rename_columns(row, config, path, number)
    if not number:
        return
    for name, column in required.items():
        if not found[name]:
            raise DataError(
                f"{path}: missing column '{column}' "
                f"(found: {', '.join(first_keys or [])}); "
                f"rename it or set --set data.{name}_column=NAME"
            )
