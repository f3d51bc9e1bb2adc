"""Load question-answering examples from any supported source and validate them.

Every source becomes a ``datasets.DatasetDict`` with the same columns:
``id, title, context, question, answers{text: list[str], answer_start: list[int]}``.
Reading the formats is ``data/records``; keeping, repairing and counting examples is
``data/validation``; this module joins them into train and validation splits.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from qa_finetune.config import DataConfig
from qa_finetune.data.example_files import (
    example_features,
    open_examples,
    split_by_context,
    split_by_document,
    write_examples,
)
from qa_finetune.data.record_stream import stream_records
from qa_finetune.data.records import DataError, hub_records
from qa_finetune.data.validation import SplitReport, iter_validated
from qa_finetune.files import check_file

log = logging.getLogger(__name__)


@dataclass
class LoadedData:
    """Validated splits, their reports and a description of where they came from."""

    splits: Any  # datasets.DatasetDict; kept as Any so this module imports datasets lazily
    reports: dict[str, SplitReport]
    sources: dict[str, str]


def split_paths(files: str) -> list[str]:
    """Several data files may be given as one comma-separated value."""
    return [part.strip() for part in files.split(",") if part.strip()]


# Said whether or not a --config was given: a config file may set no data (an empty one).
NO_DATA = (
    "no data given: pass --train-file FILE or --dataset NAME, or a --config file that sets "
    "data.train_file or data.dataset"
)


def check_data_given(config: DataConfig, training: bool = False) -> None:
    """Fail before anything is written when no data is configured (``training``: no
    training data, a validation file alone trains nothing)."""
    if config.dataset:
        return
    train = split_paths(config.train_file or "")
    if not train and not split_paths(config.validation_file or ""):
        raise DataError(NO_DATA)
    if training and not train:
        raise DataError(
            "no training data given (only --validation-file): pass --train-file FILE or "
            "--dataset NAME, or a --config file that sets data.train_file or data.dataset"
        )


def check_files_exist(config: DataConfig) -> None:
    """Fail early, before anything reads them, when no data is configured or configured
    data files are missing."""
    check_data_given(config)
    for option, files in (
        ("--train-file", config.train_file),
        ("--validation-file", config.validation_file),
        ("data.replay_file", config.replay_file),
    ):
        for name in split_paths(files or ""):
            check_file(Path(name), "data file", option, DataError)


def to_dataset(records: list[dict[str, Any]]) -> Any:
    """Validated records -> a ``datasets.Dataset`` with the standard columns and types."""
    from datasets import Dataset

    return Dataset.from_list(records, features=example_features())


def load_hub_split(config: DataConfig, split: str) -> Iterable[dict[str, Any]]:
    """One split of a Hub dataset as flat records, with a clear error when it cannot load."""
    from datasets import load_dataset

    try:
        dataset = load_dataset(config.dataset, config.dataset_config, split=split)
    except (ConnectionError, OSError) as exc:
        raise DataError(
            f"cannot load dataset '{config.dataset}' from the Hugging Face Hub "
            f"({type(exc).__name__}); "
            "check the name and the network, or pass local files with --train-file"
        ) from exc
    except ValueError as exc:
        raise DataError(f"dataset '{config.dataset}' has no split '{split}': {exc}") from exc
    return hub_records(dataset)


def _dropped(report: SplitReport) -> str:
    """What was dropped (every example, as no split is made of none): how many, the first
    record named (record or article, and field), and every reason when there are several."""
    reasons = report.drops_in_words()
    count = report.examples_dropped
    counted = "its only example was dropped" if count == 1 else f"all {count} examples dropped"
    if not report.samples:
        return f"{counted}: {reasons}"
    if count == 1:
        return f"{counted}: {report.samples[0]}"
    if len(report.drop_reasons) == 1:
        return f"{counted}; first: {report.samples[0]}"
    return f"{counted}: {reasons}; first: {report.samples[0]}"


def _why_none(report: SplitReport, name: str) -> str:
    """Why a split has no examples (in parentheses), and the fix: an empty file, every
    record dropped, or (examples kept) every context held out for the other split."""
    if not report.examples_read:
        return "(the data holds no examples at all); add questions, or check the file given"
    if not report.examples_kept:
        return f"({_dropped(report)}); check the file's fields"
    other = "held-out validation" if name == "train" else "train"
    kept = report.examples_kept
    return (
        f"({kept} usable example{'s' if kept != 1 else ''}, whose contexts all went to the "
        f"{other} split); give questions about more contexts, or a --validation-file"
    )


def capped_contexts(
    records: Iterable[dict[str, Any]], limit: int, source: str
) -> Iterator[dict[str, Any]]:
    """``records``, refusing the first whose context is longer than ``limit`` characters."""
    for record in records:
        context = record.get("context")
        if isinstance(context, str) and len(context) > limit:
            raise DataError(
                f"{source}: record {record.get('id')!r} has a context of {len(context):,} "
                f"characters, over data.max_context_chars ({limit:,}): split it into "
                "paragraphs (one record each), raise data.max_context_chars, or index whole "
                "documents with `qa-finetune index DOCS --output INDEX` and ask them with --index"
            )
        yield record


def _raw_splits(
    config: DataConfig,
) -> tuple[dict[str, Iterable[dict[str, Any]]], dict[str, str]]:
    """Each split's records, not yet read (a Hub split or the streamed files), and its source."""
    raw: dict[str, Iterable[dict[str, Any]]] = {}
    sources: dict[str, str] = {}
    if config.dataset:
        for name, split in (("train", config.train_split), ("validation", config.validation_split)):
            source = f"{config.dataset}:{split}"
            raw[name] = capped_contexts(
                load_hub_split(config, split), config.max_context_chars, source
            )
            sources[name] = source
        return raw, sources
    for name, given in (("train", config.train_file), ("validation", config.validation_file)):
        if given:
            paths = [Path(f) for f in split_paths(given)]
            records = chain.from_iterable(stream_records(p, config) for p in paths)
            raw[name] = capped_contexts(records, config.max_context_chars, given)
            sources[name] = given
    if not raw:
        raise DataError(NO_DATA)
    return raw, sources


def _with_negatives(
    examples: Any, target: Path, kind: str, fraction: float, seed: int, source: str, required: bool
) -> Any:
    """``examples`` with negatives of ``kind`` added (``question_negatives``: another
    paragraph; ``swap_negatives``: a name swapped), written to ``target``. ``required``
    (training data): no question to make one from is an error; other data is then kept as
    it is, with a note."""
    if kind == "swap_negatives":
        from qa_finetune.data.swap_negatives import no_swaps_error as error
        from qa_finetune.data.swap_negatives import swap_negatives as make
    else:
        from qa_finetune.data.question_negatives import no_documents_error as error
        from qa_finetune.data.question_negatives import question_negatives as make

    negatives, report = make(examples, fraction, seed)
    if not report.eligible:
        if required:
            raise error(source)
        log.info("%s: no question to make data.%s from", source, kind)
        return examples
    write_examples(chain(iter(examples), negatives), target)
    log.info(
        "%s: %d negatives added by data.%s (%d of %d eligible questions chosen)",
        source,
        report.made,
        kind,
        report.chosen,
        report.eligible,
    )
    return open_examples(target)


def load_data(config: DataConfig, seed: int = 42, work_dir: Path | None = None) -> LoadedData:
    """Load, validate and split the configured data into ``train`` and ``validation``.

    Records stream from the files through validation into Arrow files in ``work_dir`` (a
    temporary folder removed when the process ends, when not given), a batch at a time:
    memory does not grow with the number of examples.
    """
    if work_dir is None:
        # Kept until the process ends: the splits may outlive the returned object, and a
        # Dataset pickled to worker processes reopens its files by name.
        work_dir = Path(tempfile.mkdtemp(prefix="qa-finetune-examples-"))
        atexit.register(shutil.rmtree, work_dir, True)
    work_dir.mkdir(parents=True, exist_ok=True)
    raw, sources = _raw_splits(config)
    reports: dict[str, SplitReport] = {}
    files: dict[str, Path] = {}
    for name, records in raw.items():
        reports[name] = SplitReport()
        files[name] = work_dir / f"{name}-examples.arrow"
        write_examples(iter_validated(records, config.allow_no_answer, reports[name]), files[name])

    if "train" in files and "validation" not in files and config.validation_fraction > 0:
        held_in, held_out = work_dir / "train-held-in.arrow", work_dir / "validation-held-out.arrow"
        split = split_by_document if config.validation_group_by == "title" else split_by_context
        split(files["train"], config.validation_fraction, seed, held_in, held_out)
        files["train"], files["validation"] = held_in, held_out
        whole = " documents" if config.validation_group_by == "title" else ""
        sources["validation"] = (
            f"{sources['train']} (held-out {config.validation_fraction:.0%}{whole})"
        )

    splits = {name: open_examples(path) for name, path in files.items()}
    limits = {"train": config.max_train_samples, "validation": config.max_eval_samples}
    for name, limit in limits.items():
        if limit is not None and name in splits and limit < len(splits[name]):
            splits[name] = splits[name].select(range(limit))
    # Swaps first: they are made of the answerable questions the data itself holds.
    for kind in ("swap_negatives", "question_negatives"):
        fraction = getattr(config, kind)
        for name in list(splits) if fraction > 0 else []:
            target = work_dir / f"{name}-with-{kind}.arrow"
            required = name == "train"
            splits[name] = _with_negatives(
                splits[name], target, kind, fraction, seed, sources[name], required
            )

    for name, examples in splits.items():
        report = reports.get(name) or reports["train"]
        if config.strict and (report.answers_repaired or report.examples_dropped):
            raise DataError(
                f"{sources[name]}: {report.answers_repaired} answers repaired and "
                f"{report.examples_dropped} examples dropped ({report.drops_in_words()}); "
                "fix the file or run without --strict"
            )
        if not len(examples):
            raise DataError(f"{sources[name]}: no usable examples {_why_none(report, name)}")

    from datasets import DatasetDict

    return LoadedData(splits=DatasetDict(splits), reports=reports, sources=sources)
