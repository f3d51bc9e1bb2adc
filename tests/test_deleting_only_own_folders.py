"""Folders deleted by the benchmark's re-indexing and by a worker's end of run are only ever
the ones they made: an index, a worker's own scratch folder."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from bench.retrieval_scale import remove_old_index
from qa_finetune.retrieval.building import build_index
from qa_finetune.training.bookkeeping import Bookkeeping
from qa_finetune.training.cluster import worker_claim


def test_the_benchmark_removes_an_index_and_refuses_anything_else(tmp_path: Path) -> None:
    docs = tmp_path / "collection-2000"
    docs.mkdir()
    (docs / "a.txt").write_text("Quokkas live on Rottnest Island.\n", "utf-8")
    index = tmp_path / "index-2000"
    build_index([docs], index)
    remove_old_index(index, docs)
    assert not index.exists()

    mine = tmp_path / "index-50000"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", "utf-8")
    with pytest.raises(SystemExit, match="is not an index this benchmark wrote"):
        remove_old_index(mine, docs)
    assert (mine / "notes.txt").read_text("utf-8") == "mine"

    link = tmp_path / "index-500000"
    link.symlink_to(docs, target_is_directory=True)
    with pytest.raises(SystemExit):
        remove_old_index(link, docs)
    assert (docs / "a.txt").exists()
    remove_old_index(tmp_path / "index-missing", docs)  # nothing there: nothing to do


def test_the_benchmark_keeps_a_users_index_of_other_documents(tmp_path: Path) -> None:
    """An index the user built of their own documents, at the path the benchmark would use,
    is an index but not of the benchmark's collection: refused and left whole."""
    own = tmp_path / "my-docs"
    own.mkdir()
    (own / "b.txt").write_text("The Osk lighthouse keeper was Tomas Ebbe.\n", "utf-8")
    index = tmp_path / "index-2000"
    build_index([own], index)
    before = sorted((p.relative_to(index), p.read_bytes()) for p in index.rglob("*") if p.is_file())
    collection = tmp_path / "collection-2000"
    collection.mkdir()
    with pytest.raises(SystemExit, match="is not an index this benchmark wrote"):
        remove_old_index(index, collection)
    after = sorted((p.relative_to(index), p.read_bytes()) for p in index.rglob("*") if p.is_file())
    assert after == before


def test_a_worker_removes_its_scratch_folder_and_never_the_run(tmp_path: Path) -> None:
    run = tmp_path / "outputs" / "run"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("kept", "utf-8")
    keeper = Bookkeeping.__new__(Bookkeeping)
    keeper.cluster = types.SimpleNamespace(chief=False)
    keeper.run_dir = run
    keeper.claim = worker_claim(resume=False)
    scratch = keeper.claim.run_dir
    assert scratch.is_dir() and run not in (scratch, *scratch.parents)
    assert scratch.name.startswith("qa-finetune-worker-")
    keeper.release()
    assert not scratch.exists()
    assert (run / "config.yaml").read_text("utf-8") == "kept"
