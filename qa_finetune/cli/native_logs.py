"""Keep TensorFlow's native start-up messages off the terminal.

TensorFlow's C++ runtime prints oneDNN, CUDA-probe and absl notices straight to file
descriptor 2 while it is imported and when it first looks for GPUs; TF_CPP_MIN_LOG_LEVEL does
not reach all of them. They are noise for a command-line user (a CPU machine reports a "CUDA
error"), so the first import runs with descriptor 2 pointed at /dev/null. Python exceptions
are unaffected. Set QA_FINETUNE_TF_LOGS=1 to see the messages.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null for the duration of the block."""
    if os.environ.get("QA_FINETUNE_TF_LOGS") == "1":
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def import_tensorflow_quietly() -> None:
    """Import TensorFlow and probe devices once, without the native start-up chatter."""
    if "tensorflow" in sys.modules:
        return
    with native_stderr_silenced():
        import tensorflow as tf

        tf.config.list_physical_devices("GPU")
