"""``--backend auto`` in a folder holding both a TensorFlow model and model.onnx: the runtime
measured faster on this machine, its profile cached; plain rules everywhere else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from qa_finetune.modeling import batch_profile, profile_cache
from qa_finetune.modeling.batch_policy import CostProfile, choose_backend


@pytest.fixture(scope="module")
def both_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny TF model folder with its own ONNX export's model.onnx beside the weights."""
    pytest.importorskip("tf2onnx")
    from qa_finetune.publish.export import export_run

    exported = export_run(tiny_model_dir, "onnx", output=tmp_path_factory.mktemp("onnx") / "onnx")
    target = tmp_path_factory.mktemp("both") / "model"
    shutil.copytree(tiny_model_dir, target)
    shutil.copy(exported / "model.onnx", target / "model.onnx")
    return target


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(batch_profile.PROFILE_ENV, "on")
    return tmp_path / "xdg" / "qa-finetune" / "batch-profiles"


def seed(folder: Path, backend: str, seconds_per_window: float) -> None:
    """A cached profile for ``backend`` in ``folder`` at 96 tokens (the tests' max_length)."""
    size = (folder / "model.onnx").stat().st_size
    model_file = f"model.onnx:{size}" if backend == "onnx" else ""
    key = profile_cache.profile_key(folder, backend, (96,), model_file)
    profile_cache.write(key, CostProfile(backend, {96: {1: seconds_per_window}}))


@pytest.mark.parametrize(
    ("tf_cost", "onnx_cost", "expected"), [(0.01, 0.02, "tf"), (0.02, 0.01, "onnx")]
)
def test_auto_takes_the_backend_whose_cached_profile_is_faster(
    both_dir: Path, cache: Path, tf_cost: float, onnx_cost: float, expected: str
) -> None:
    from qa_finetune.modeling.for_answering import load_for_answering

    seed(both_dir, "tf", tf_cost)
    seed(both_dir, "onnx", onnx_cost)
    loaded = load_for_answering(str(both_dir), max_length=96)
    assert loaded.backend == expected
    assert len(list(cache.glob("*.json"))) == 2  # read, not measured again


def test_auto_measures_both_backends_once(both_dir: Path, cache: Path) -> None:
    from qa_finetune.modeling.for_answering import load_for_answering

    loaded = load_for_answering(str(both_dir), max_length=96)
    stored = {
        json.loads(p.read_text())["key"]["backend"]: CostProfile.from_dict(
            json.loads(p.read_text())["profile"]
        )
        for p in cache.glob("*.json")
    }
    assert sorted(stored) == ["onnx", "tf"]
    assert loaded.backend == choose_backend(stored)


def test_explicit_backends_the_switch_and_one_runtime_folders_measure_nothing(
    both_dir: Path, tiny_model_dir: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.modeling.for_answering import load_for_answering

    assert load_for_answering(str(both_dir), max_length=96, backend="tf").backend == "tf"
    assert load_for_answering(str(both_dir), max_length=96, backend="onnx").backend == "onnx"
    assert load_for_answering(str(tiny_model_dir), max_length=96).backend == "tf"
    assert not cache.exists()
    monkeypatch.setenv(batch_profile.PROFILE_ENV, "off")
    assert load_for_answering(str(both_dir), max_length=96).backend == "onnx"
    assert not cache.exists()
