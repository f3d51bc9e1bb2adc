"""``--backend auto`` in a folder that both TensorFlow and ONNX Runtime can run: the faster one.

Which runtime is faster depends on the machine (ONNX Runtime wins on some CPUs, TensorFlow on
others), so it is measured, with the same cost profile that chooses the batch size
(``modeling/batch_profile``), and cached with it: once per model, machine and backend, and
after that without loading the slower model at all. A folder with one runtime's model (a run's
``model/``, an ONNX export) keeps the plain rule of ``formats.choose_backend``; so does
``QA_FINETUNE_BATCH_PROFILE=off``. The int8 model is an explicit choice (``quantized``), never
measured against the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_finetune.modeling import batch_profile, profile_cache
from qa_finetune.modeling.batch_policy import CostProfile, choose_backend, choose_batch
from qa_finetune.modeling.families import LOADABLE_WEIGHTS

log = logging.getLogger(__name__)

# backend -> (model, tokenizer) of that backend, loaded only when its profile is not cached
Loader = Callable[[str], tuple[Any, Any]]


def runs_on_tensorflow(model_dir: Path) -> bool:
    """Whether the folder holds weights TensorFlow loads."""
    return any(p.is_file() for pattern in LOADABLE_WEIGHTS for p in Path(model_dir).glob(pattern))


def measurable(model_dir: Path, backend: str, chosen: str, quantized: bool) -> bool:
    """Whether ``auto`` has two runtimes to measure here: the folder's ONNX model (not int8)
    and TensorFlow weights, with measuring on."""
    return (
        backend == "auto"
        and chosen == "onnx"
        and not quantized
        and batch_profile.enabled()
        and runs_on_tensorflow(model_dir)
    )


def _model_file(model_dir: Path, backend: str) -> str:
    """The key's file of a backend, as ``batch_profile`` names a loaded predictor's file."""
    if backend == "tf":
        return ""
    from qa_finetune.modeling.formats.onnx import model_file

    path = model_file(model_dir)
    return f"{path.name}:{path.stat().st_size}"


def faster_backend(model_dir: Path, max_length: int, load: Loader) -> str:
    """``tf`` or ``onnx``, whichever answers more windows per second here (see the module)."""
    lengths = batch_profile.profile_lengths(max_length)
    profiles: dict[str, CostProfile] = {}
    for backend in ("tf", "onnx"):
        key = profile_cache.profile_key(
            model_dir, backend, lengths, _model_file(model_dir, backend)
        )
        cached = profile_cache.read(key)
        if cached is None:
            model, tokenizer = load(backend)
            cached = batch_profile.model_profile(model, tokenizer, model_dir, backend, max_length)
            del model  # the slower one is not kept
        profiles[backend] = cached
    chosen = choose_backend(profiles)
    speeds = ", ".join(
        f"{name} {profile.windows_per_second(choose_batch(profile)):.1f}"
        for name, profile in sorted(profiles.items())
    )
    log.info("--backend auto: %s (windows per second: %s)", chosen, speeds)
    return chosen
