"""Will a training batch fit in memory? An estimate made before any work, on CPU only.

On a GPU, TensorFlow raises ``ResourceExhaustedError`` when a batch does not fit, and ``train``
turns that into one line. On a CPU it usually does not: the kernel's OOM killer ends the
process, with no message from the program, minutes into the run. So before anything else,
``check_fits`` compares an estimate of the run's peak memory with what the machine has.

The estimate is the encoder's activations kept for the backward pass, per window, plus a fixed
runtime and four copies of the weights (weights, gradients, Adam's two moments). Its constants
were fitted on the packaged MiniLM (6 layers, 12 heads, hidden 384, feed-forward 1,536):
peak RSS of 2.2 / 4.5 / 7.7 GiB at batch 4 / 16 / 32 and max_length 384, and 2.5 GiB at
batch 16 and max_length 192 (bench/reports/10-cost-growth.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.families import WEIGHT_FILES, shape_keys

GIB = 1024**3
# TensorFlow, the tokenizer and the features' memory maps, measured with MiniLM at batch 4.
RUNTIME_BYTES = GIB
# Per layer and token: about three attention-score tensors per head (scores, softmax,
# dropout) of the window's length, ten hidden-sized and three feed-forward-sized activations.
SCORE_TENSORS = 3
HIDDEN_TENSORS = 10
FEED_FORWARD_TENSORS = 3
WEIGHT_COPIES = 4  # weights, gradients, Adam's first and second moments


@dataclass(frozen=True)
class EncoderShape:
    """The sizes that decide how much memory a window's activations take."""

    layers: int
    hidden: int
    heads: int
    feed_forward: int


def encoder_shape(model_dir: Path) -> EncoderShape | None:
    """The encoder's sizes from its config.json; None for a family these names do not fit."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    # Each family's config.json names of (layers, hidden, heads, feed-forward).
    for keys in shape_keys():
        values = [config.get(key) for key in keys]
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            return EncoderShape(*values)
    return None


def window_bytes(shape: EncoderShape, length: int, bytes_per_value: int = 4) -> int:
    """Activation bytes one window of ``length`` tokens keeps for the backward pass."""
    per_token = (
        SCORE_TENSORS * shape.heads * length
        + HIDDEN_TENSORS * shape.hidden
        + FEED_FORWARD_TENSORS * shape.feed_forward
    )
    return bytes_per_value * shape.layers * length * per_token


def weights_bytes(model_dir: Path) -> int:
    """Size of the model's weights file (float32), 0 when none is found."""
    for name in WEIGHT_FILES:
        path = Path(model_dir) / name
        if path.is_file():
            return path.stat().st_size
    return 0


def fixed_bytes(weights: int) -> int:
    """What a training process holds whatever the batch: the runtime and the weights' copies."""
    return RUNTIME_BYTES + WEIGHT_COPIES * weights


def training_bytes(
    shape: EncoderShape, weights: int, batch_size: int, max_length: int, bytes_per_value: int = 4
) -> int:
    """Estimated peak memory of a training process with batches of ``batch_size`` windows."""
    return fixed_bytes(weights) + batch_size * window_bytes(shape, max_length, bytes_per_value)


def available_bytes() -> int | None:
    """Memory this process can still use: MemAvailable, capped by a cgroup limit; None where
    neither can be read (not Linux)."""
    found: list[int] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit.isdigit():
            found.append(int(limit) - used)
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def check_fits(
    model_dir: Path,
    batch_size: int,
    max_length: int,
    bytes_per_value: int = 4,
    available: int | None = None,
) -> None:
    """Refuse, with the fix, a batch whose estimated training memory exceeds what is available.

    ``batch_size`` is this process's share of the global batch. Unknown model families and
    machines whose free memory cannot be read are let through.
    """
    shape = encoder_shape(model_dir)
    available = available if available is not None else available_bytes()
    if shape is None or available is None:
        return
    weights = weights_bytes(model_dir)
    needed = training_bytes(shape, weights, batch_size, max_length, bytes_per_value)
    if needed <= available:
        return
    per_window = window_bytes(shape, max_length, bytes_per_value)
    fitting = max(math.floor((available - fixed_bytes(weights)) / per_window), 0)
    hint = f"at most about {fitting} fit" if fitting else "not even 1 fits: lower --max-length"
    raise QAFinetuneError(
        f"batches of {batch_size} windows of {max_length} tokens need about "
        f"{needed / GIB:.1f} GiB of memory to train on CPU, and {available / GIB:.1f} GiB is "
        f"available: lower --batch-size ({hint}) or --max-length, or set "
        "train.memory_check=false to try anyway (a CPU process that runs out is killed "
        "without a message)"
    )
