"""Loading and preparing stream: records come out of a file one at a time, examples and
windows go to Arrow files in batches, and the features are those of the whole-file path."""

from __future__ import annotations

import json
import os
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sample_files import sample_data_path

from qa_finetune.config import Config, DataConfig
from qa_finetune.data.example_files import WRITE_BATCH, write_examples
from qa_finetune.data.loading import load_data, to_dataset
from qa_finetune.data.record_stream import stream_records
from qa_finetune.data.records import DataError, read_records
from qa_finetune.data.validation import SplitReport, iter_validated, validate_records


def _squad(questions: int, per_paragraph: int = 4) -> dict[str, Any]:
    """A nested SQuAD document of ``questions`` questions over distinct paragraphs."""
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
    ]
    rng = random.Random(0)
    articles = []
    for a in range(0, questions, per_paragraph * 5):
        paragraphs = []
        for p in range(a, min(a + per_paragraph * 5, questions), per_paragraph):
            answer = f"answer{p}"
            context = " ".join(rng.choices(words, k=60)) + f" {answer} " + " ".join(words)
            qas = [
                {
                    "id": f"q{q}",
                    "question": f"What is {q}?",
                    "answers": [{"text": answer, "answer_start": context.index(answer)}],
                }
                for q in range(p, min(p + per_paragraph, questions))
            ]
            paragraphs.append({"context": context, "qas": qas})
        articles.append({"title": f"article {a}", "paragraphs": paragraphs})
    return {"version": "1.1", "data": articles}


def test_records_stream_before_the_file_is_parsed(tmp_path: Path) -> None:
    # A file cut off at the end: the whole-file reader fails before giving anything, the
    # stream gives every complete question first, so it never parsed the file whole.
    text = json.dumps(_squad(3 * WRITE_BATCH))
    path = tmp_path / "cut.json"
    path.write_text(text[: text.rindex('{"id"')], encoding="utf-8")
    with pytest.raises(DataError, match=r"cut\.json:1:\d+: not valid JSON"):
        read_records(path, DataConfig())
    records = stream_records(path, DataConfig())
    assert isinstance(records, Iterator)
    got = []
    with pytest.raises(DataError, match=r"cut\.json:1:\d+: not valid JSON"):
        for record in records:
            got.append(record["id"])
    # Articles (20 questions each here) are the unit parsed: all but the cut-off one came out.
    assert got == [f"q{q}" for q in range(3 * WRITE_BATCH - 20)]


def test_streamed_records_equal_the_whole_file_reader(tmp_path: Path) -> None:
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(_squad(50)), encoding="utf-8")
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps([{"context": "a b", "question": "q", "answers": []}, {}]))
    lines = tmp_path / "lines.json"  # JSON Lines under a .json name
    lines.write_bytes(b'\xef\xbb\xbf{"context": "a b", "question": "q"}\r\n\n{"question": "r"}\n')
    for source in [*(sample_data_path(n) for n in ("train", "unanswerable")), path, flat, lines]:
        assert list(stream_records(source, DataConfig())) == read_records(source, DataConfig())


@pytest.mark.parametrize(
    "text",
    [
        '{"version": 1, "data": []}',
        '{"version": 1}',
        '{"data": {"a": 1}}',
        "3",
        '[{"context": "a b", "question": "q"}, 3]',
        '{"data": [{"title": "t"}]}',
        '[{"context": "a", "question": "q", "answers": {"text": ["a"], "answer_start": [NaN]}}]',
        '{"data": [{"title": "t", "paragraphs": [{"context": "a", "qas": []}]}], ',
        '[{"question": "q"}]',
    ],
)
def test_odd_json_gives_what_the_whole_file_reader_gives(tmp_path: Path, text: str) -> None:
    path = tmp_path / "odd.json"
    path.write_text(text, encoding="utf-8")

    def outcome(read: Any) -> Any:
        try:
            return list(read(path, DataConfig()))
        except DataError as exc:
            return f"error: {exc}"

    assert outcome(stream_records) == outcome(read_records)


def _python_peak(function: Any) -> tuple[Any, int]:
    """(result, peak bytes of Python objects allocated while ``function`` ran)."""
    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_loading_holds_about_one_batch_in_python(tmp_path: Path) -> None:
    # Against the whole-file path on the same 10k questions: that one holds every record (and
    # the file's text) at once; streaming holds a batch, the ids seen (for duplicates) and
    # ijson's buffer.
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_squad(10_000)), encoding="utf-8")
    config = DataConfig()

    def streamed() -> int:
        report = SplitReport()
        count = write_examples(
            iter_validated(stream_records(path, config), False, report), tmp_path / "x.arrow"
        )
        assert count == report.examples_kept
        return count

    def whole() -> int:
        return len(to_dataset(validate_records(read_records(path, config), False, SplitReport())))

    streamed()  # imports and first-use caches are not what is measured
    whole()
    (count, streamed_peak), (expected, whole_peak) = _python_peak(streamed), _python_peak(whole)
    assert count == expected == 10_000
    print(f"Python peak: streamed {streamed_peak:,} bytes, whole file {whole_peak:,}")
    assert streamed_peak * 4 < whole_peak


def test_examples_and_windows_are_written_in_batches_to_the_staging_folder(
    tmp_path: Path, minilm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa

    from qa_finetune.training import prepare as prepare_module

    path = tmp_path / "squad.json"
    path.write_text(json.dumps(_squad(2 * WRITE_BATCH + 10)), encoding="utf-8")
    seen: dict[str, Any] = {}
    load_data, write_atomically = prepare_module.load_data, prepare_module.write_atomically

    def loading(*args: Any, work_dir: Path, **kwargs: Any) -> Any:
        loaded = load_data(*args, work_dir=work_dir, **kwargs)
        seen["examples"] = [f["filename"] for f in loaded.splits["train"].cache_files]
        seen["work"] = work_dir
        return loaded

    def saving(cache_dir: Path, splits: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        # The windows as they reach the saved folders: still backed by their cache file.
        seen["windows"] = [f["filename"] for f in splits["train"].cache_files]
        return write_atomically(cache_dir, splits, *args, **kwargs)

    monkeypatch.setattr(prepare_module, "load_data", loading)
    monkeypatch.setattr(prepare_module, "write_atomically", saving)
    config = _config(minilm_dir, path, tmp_path / "out", validation_fraction=0.0)
    prepared = prepare_module.prepare(config)
    work = seen["work"]
    assert (
        work
        == prepared.cache_dir.with_name(f"{prepared.cache_dir.name}.tmp-{os.getpid()}") / "work"
    )
    assert seen["examples"] == [str(work / "train-examples.arrow")]
    assert seen["windows"] == [str(work / "train-windows.arrow")]
    assert not work.parent.exists()  # the staging folder became the cache
    # The saved windows came from a file of record batches, not one table built in memory.
    with pa.OSFile(str(prepared.cache_dir / "train" / "data-00000-of-00001.arrow")) as stream:
        sizes = [batch.num_rows for batch in pa.ipc.open_stream(stream)]
    assert sum(sizes) == len(prepared.train) and max(sizes) <= WRITE_BATCH


def _config(model: Path, train: Path, output: Path, **data: Any) -> Config:
    return Config.from_dict(
        {
            "model": {"name_or_path": str(model)},
            "data": {"train_file": str(train), **data},
            "preprocess": {"max_length": 128, "stride": 32},
            "train": {"output_dir": str(output)},
        }
    )


def _whole_file_features(config: Config) -> dict[str, Any]:
    """The features as prepare built them before streaming: the file read whole, validated
    into a list, split in Python, and windowed in memory."""
    from qa_finetune.features.labels import prepare_eval_features, prepare_train_features
    from qa_finetune.training.prepare import check_model

    _, tokenizer, spec = check_model(config)
    records = validate_records(
        read_records(Path(config.data.train_file or ""), config.data), False, SplitReport()
    )
    contexts = sorted({r["context"] for r in records})
    random.Random(config.train.seed).shuffle(contexts)
    held_out = set(contexts[: max(1, round(len(contexts) * config.data.validation_fraction))])
    train = to_dataset([r for r in records if r["context"] not in held_out])
    validation = to_dataset([r for r in records if r["context"] in held_out])
    common = {"batched": True, "fn_kwargs": {"tokenizer": tokenizer, "spec": spec}}
    return {
        "train": train.map(
            prepare_train_features, remove_columns=train.column_names, **common
        ).remove_columns(["label_text", "gold_texts"]),
        "validation": validation.map(
            prepare_eval_features, remove_columns=validation.column_names, **common
        ),
        "validation_examples": validation,
    }


@pytest.mark.parametrize("chunk", [None, 100])
def test_streamed_features_equal_the_whole_file_path(
    tmp_path: Path, minilm_dir: Path, monkeypatch: pytest.MonkeyPatch, chunk: int | None
) -> None:
    from qa_finetune.training import prepare as prepare_module

    if chunk:  # examples mapped in chunks of their own memory maps, as large data is
        monkeypatch.setattr(prepare_module, "MAP_BATCH_SIZE", chunk // 2)
        monkeypatch.setattr(prepare_module, "MAP_CHUNK_EXAMPLES", chunk)
    config = _config(minilm_dir, sample_data_path("train"), tmp_path)
    prepared = prepare_module.prepare(config)
    if chunk:
        assert prepared.report["train"]["examples"] > 2 * chunk
    expected = _whole_file_features(config)
    got = {
        "train": prepared.train,
        "validation": prepared.validation,
        "validation_examples": prepared.validation_examples,
    }
    for name, dataset in expected.items():
        assert got[name].features == dataset.features, name
        assert got[name].data.table.equals(dataset.data.table), name
    assert prepared.report["train"]["features"] == len(expected["train"]) > 0
    assert prepared.report["validation"]["examples"] == len(expected["validation_examples"]) > 0


def test_load_data_splits_live_in_arrow_files(tmp_path: Path) -> None:
    loaded = load_data(DataConfig(train_file=str(sample_data_path("train"))), work_dir=tmp_path)
    files = {name: [f["filename"] for f in s.cache_files] for name, s in loaded.splits.items()}
    assert files == {
        "train": [str(tmp_path / "train-held-in.arrow")],
        "validation": [str(tmp_path / "validation-held-out.arrow")],
    }


def test_saving_streamed_writes_what_save_to_disk_writes(tmp_path: Path) -> None:
    from datasets import Dataset, concatenate_datasets

    from qa_finetune.data.dataset_save import save_dataset

    parts = []
    for number in range(2):  # two files, batches that 1000-row slices cut across
        records = [
            {"id": f"{number}-{i}", "title": "", "context": "c" * (i % 7), "question": "q",
             "answers": {"text": ["c"] * (i % 3), "answer_start": [0] * (i % 3)}}
            for i in range(1500 + number)
        ]  # fmt: skip
        write_examples(records, tmp_path / f"part{number}.arrow")
        parts.append(Dataset.from_file(str(tmp_path / f"part{number}.arrow")))
    dataset = concatenate_datasets(parts).remove_columns(["title"])
    dataset.save_to_disk(str(tmp_path / "reference"))
    calls = []
    original = Dataset.save_to_disk
    Dataset.save_to_disk = lambda self, *a, **k: calls.append(a) or original(self, *a, **k)
    try:
        save_dataset(dataset, tmp_path / "streamed")
        assert calls == []  # written by the stream, not by save_to_disk
        save_dataset(dataset.select(range(10, 20)), tmp_path / "slice")
        assert len(calls) == 1  # a slice of a file: save_to_disk's own way
    finally:
        Dataset.save_to_disk = original
    names = sorted(p.name for p in (tmp_path / "reference").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "streamed").iterdir())
    for name in names:
        assert (tmp_path / "streamed" / name).read_bytes() == (
            tmp_path / "reference" / name
        ).read_bytes(), name
