"""Start/end logits of unpadded windows, in length-sorted batches, from any model backend.

A Keras model runs eagerly for a few batches and then through one ``tf.function`` traced for
any batch and length; an object with ``predict_batch`` (ONNX Runtime, a serving layer's own)
is called as it is. TensorFlow is imported only when a Keras model is compiled, so the ONNX
path never loads it. A call's batches may run in several passes at once, each with its
share of the cores (``modeling/cpu_threads``): on 2 cores two passes of one thread ran 34%
more windows per second than one pass of two (bench/reports/09-serve.md).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qa_finetune.errors import InferenceError
from qa_finetune.features.arrays import Ragged
from qa_finetune.modeling.cpu_threads import shared_passes

# Logit written beyond the end of a window: exp(-1e4) is 0, and it stays finite in float16 sums.
LOGIT_FILL = -1e4
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")

# Tracing a model into a graph costs seconds (about 7 s for MiniLM on a 2-core CPU) and then
# saves the eager overhead of every batch (about 0.3 s there): a model is compiled once it has
# run this many batches, so one `ask` stays eager and quick while evaluation compiles at once.
COMPILE_AFTER_BATCHES = 16


def _ragged(column: Any) -> Ragged:
    """A list column from Arrow (no Python ints are made) or from plain lists, as int32."""
    # pyarrow is imported only for Arrow columns: a cold `ask` on plain lists skips its import.
    if type(column).__module__.startswith("pyarrow"):
        return Ragged.from_arrow(column, dtype=np.int32)
    return Ragged.from_lists(column, dtype=np.int32)


def _input_columns(features: Any) -> dict[str, Ragged]:
    """The model input columns of a ``datasets.Dataset`` or of a mapping of lists."""
    if hasattr(features, "with_format"):
        table = features.with_format("arrow")[:]
        names = [n for n in INPUT_NAMES if n in table.column_names]
        return {name: _ragged(table.column(name)) for name in names}
    return {name: _ragged(features[name]) for name in INPUT_NAMES if name in features}


@dataclass
class _ModelState:
    """Per model: compiled forwards by input names, and batches run eagerly so far."""

    forwards: dict[tuple[str, ...], Any] = field(default_factory=dict)
    eager_batches: int = 0


# Weak keys, so a dropped model frees its graphs.
_MODELS: weakref.WeakKeyDictionary[Any, _ModelState] = weakref.WeakKeyDictionary()


def _state(model: Any) -> _ModelState:
    try:
        return _MODELS.setdefault(model, _ModelState())
    except TypeError:  # an object that cannot be weakly referenced: nothing is remembered
        return _ModelState()


def _compiled(model: Any, state: _ModelState, names: tuple[str, ...]) -> Any:
    """A ``tf.function`` of the model for any batch and length: traced once, not per shape."""
    import tensorflow as tf

    if names not in state.forwards:
        # A weak reference, so the cached graph does not keep the model alive.
        model_ref = weakref.ref(model)
        signature = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}

        @tf.function(input_signature=[signature])
        def forward(inputs: dict[str, Any]) -> tuple[Any, Any]:
            outputs = model_ref()(inputs, training=False)
            return outputs.start_logits, outputs.end_logits

        state.forwards[names] = forward
    return state.forwards[names]


def _forward(model: Any, names: tuple[str, ...], batches: int, compile: bool | None) -> Any:
    """The compiled forward, or the eager model while compiling would not pay off yet."""
    state = _state(model)
    if compile is None:
        compile = names in state.forwards or (state.eager_batches + batches > COMPILE_AFTER_BATCHES)
    if compile:
        return _compiled(model, state, names)
    state.eager_batches += batches

    def eager(inputs: dict[str, Any]) -> tuple[Any, Any]:
        outputs = model(inputs, training=False)
        return outputs.start_logits, outputs.end_logits

    return eager


def _pad_token_id(model: Any) -> int:
    value = getattr(getattr(model, "config", None), "pad_token_id", None)
    return int(value) if isinstance(value, int) else 0


def _run_batches(run: Callable[[np.ndarray], None], batches: list[np.ndarray], passes: int) -> None:
    """``run`` every batch, ``passes`` at once on threads of their own, each taking the next
    batch not yet taken; the first failure stops the others after their current batch and is
    raised here, as is Ctrl-C."""
    if passes == 1 or len(batches) < 2:
        for rows in batches:
            run(rows)
        return
    pending = iter(batches)
    taking = threading.Lock()
    stop = threading.Event()
    failures: list[BaseException] = []

    def work() -> None:
        while not stop.is_set():
            with taking:
                rows = next(pending, None)
            if rows is None:
                return
            try:
                run(rows)
            except BaseException as exc:  # handed to the caller's thread below
                failures.append(exc)
                stop.set()

    threads = [
        threading.Thread(target=work, name=f"qa-pass-{number}")
        for number in range(min(passes, len(batches)))
    ]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except BaseException:
        stop.set()  # Ctrl-C: the passes running finish, no new one starts
        raise
    if failures:
        raise failures[0]


def _batch_forward(
    model: Any, names: tuple[str, ...], batches: int, compile: bool | None
) -> tuple[Any, bool]:
    """The model's forward over one padded batch, and whether calls may overlap: a Keras
    model's may; a predictor's only when it says so (``concurrent_calls``)."""
    if callable(getattr(model, "predict_batch", None)):
        # A Predictor (ONNX Runtime, a serving layer's own).
        return model.predict_batch, bool(getattr(model, "concurrent_calls", False))
    return _forward(model, names, batches, compile), True


def _watched(forward: Any, watch: Callable[[int, int, float], None] | None) -> Any:
    """``forward``, telling ``watch`` the windows, padded length and seconds of each pass."""
    if watch is None:
        return forward

    def timed(batch: dict[str, np.ndarray]) -> Any:
        began = time.perf_counter()
        # As arrays: a TensorFlow result may still be computing until it is read.
        start, end = (np.asarray(logits) for logits in forward(batch))
        windows, length = batch["input_ids"].shape
        watch(windows, length, time.perf_counter() - began)
        return start, end

    return timed


def predict_features(
    model: Any,
    features: Any,
    batch_size: int,
    pad_token_id: int | None = None,
    compile: bool | None = None,
    passes: int | None = None,
    watch: Callable[[int, int, float], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits ``[features, longest window]`` (float32) in the features' order.

    ``features`` is a ``datasets.Dataset`` (or a mapping of lists) with ``input_ids``,
    ``attention_mask`` and optionally ``token_type_ids``, unpadded. Windows are run in
    length-sorted batches, each padded to its own longest window; positions beyond a window's
    end hold ``LOGIT_FILL``. ``compile=None`` runs a ``tf.function`` of the model once it has
    run ``COMPILE_AFTER_BATCHES`` batches (at once for a call with more), eagerly before.
    ``passes`` batches run at once, each on a thread of its own (None: as many as the cores
    were shared among, ``cpu_threads.share_cores``; 1 when they were not); the batches and
    the logits are the same for any number; ``watch`` hears of each pass (``live_check``).
    """
    if batch_size < 1:
        raise InferenceError(f"batch size must be at least 1, got {batch_size}")
    passes = shared_passes() if passes is None else passes
    if passes < 1:
        raise InferenceError(f"passes must be at least 1, got {passes}")
    columns = _input_columns(features)
    if "input_ids" not in columns:
        raise InferenceError(
            "features have no input_ids column: build them with `qa-finetune prepare`"
        )
    lengths = columns["input_ids"].lengths
    count, width = len(lengths), int(lengths.max(initial=0))
    start = np.full((count, width), LOGIT_FILL, dtype=np.float32)
    end = np.full((count, width), LOGIT_FILL, dtype=np.float32)
    if count == 0:
        return start, end
    forward, overlaps = _batch_forward(model, tuple(columns), -(-count // batch_size), compile)
    fills = {"input_ids": _pad_token_id(model) if pad_token_id is None else pad_token_id}
    forward = _watched(forward, watch)

    def run(rows: np.ndarray) -> None:
        longest = int(lengths[rows].max())
        batch = {
            name: column.padded(rows, longest, fills.get(name, 0))
            for name, column in columns.items()
        }
        # Mixed-precision models return float16 logits; scores are computed in float32.
        start_logits, end_logits = (np.asarray(x, dtype=np.float32) for x in forward(batch))
        # Each batch writes only its own rows: passes at once never write the same row.
        for k, (s, e) in enumerate(zip(start_logits, end_logits, strict=True)):
            size = lengths[rows[k]]
            start[rows[k], :size] = s[:size]
            end[rows[k], :size] = e[:size]

    # Longest first: a batch that does not fit in memory fails at once, not at the end.
    order = np.argsort(-lengths, kind="stable")
    batches = [order[begin : begin + batch_size] for begin in range(0, count, batch_size)]
    _run_batches(run, batches, passes if overlaps else 1)
    return start, end
