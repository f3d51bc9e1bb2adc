"""Sharing the cores among forward passes: the threads each pass gets, and who reads them."""

from __future__ import annotations

import sys
import types

import pytest

from qa_finetune.modeling import cpu_threads


@pytest.fixture
def cores(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A machine of ``cores.count`` usable cores; what TensorFlow is told goes to
    ``cores.told`` (this test process keeps its own threads), the share is put back after."""
    import tensorflow as tf

    machine = types.SimpleNamespace(count=8, told=[])
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: machine.count)
    monkeypatch.setattr(cpu_threads, "_threads_per_pass", None)
    monkeypatch.setattr(cpu_threads, "_passes", None)
    monkeypatch.setattr(
        tf.config.threading, "set_intra_op_parallelism_threads", machine.told.append
    )
    return machine


def test_one_pass_on_one_core_two_wherever_there_are_two(cores: types.SimpleNamespace) -> None:
    assert [cpu_threads.default_passes(n) for n in (1, 2, 3, 16)] == [1, 2, 2, 2]
    cores.count = 1
    assert cpu_threads.default_passes() == 1


@pytest.mark.parametrize(
    ("count", "passes", "threads"), [(8, 2, 4), (2, 2, 1), (3, 2, 1), (1, 4, 1)]
)
def test_each_pass_gets_its_share_of_the_cores_and_tensorflow_is_told(
    cores: types.SimpleNamespace, count: int, passes: int, threads: int
) -> None:
    cores.count = count
    assert cpu_threads.threads_per_pass() == count  # all of them until shared out
    assert cpu_threads.shared_passes() == 1
    assert cpu_threads.share_cores(passes) == threads
    assert cpu_threads.threads_per_pass() == threads
    assert cpu_threads.shared_passes() == passes  # what predict_features runs by default
    assert cores.told == [threads]


def test_before_tensorflow_is_imported_the_share_goes_to_its_environment(
    cores: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    cores.count = 6
    assert cpu_threads.share_cores(3) == 2
    assert cpu_threads.os.environ["TF_NUM_INTRAOP_THREADS"] == "2"
    assert cores.told == []


def test_a_started_tensorflow_keeps_its_threads_and_says_so(
    cores: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import tensorflow as tf

    def started(threads: int) -> None:
        raise RuntimeError("Intra op parallelism cannot be modified after initialization.")

    monkeypatch.setattr(tf.config.threading, "set_intra_op_parallelism_threads", started)
    assert cpu_threads.share_cores(2) == 4
    assert caplog.messages == [
        "the 2 passes each use the threads the model started with, not 4 each: the model was "
        "running before they were set up (the answers are the same)"
    ]


def test_onnx_sessions_take_the_share(cores: types.SimpleNamespace) -> None:
    ort = pytest.importorskip("onnxruntime")
    from qa_finetune.modeling.formats.onnx import session_options

    assert session_options(ort).intra_op_num_threads == 8
    cpu_threads.share_cores(4)
    assert session_options(ort).intra_op_num_threads == 2
    assert session_options(ort, threads=3).intra_op_num_threads == 3
