"""Keep TensorFlow's native start-up messages off the terminal.

TensorFlow's C++ runtime prints oneDNN, CUDA-probe and absl notices straight to file
descriptor 2 while it is imported and when it first looks for GPUs; TF_CPP_MIN_LOG_LEVEL does
not reach all of them. They are noise for a command-line user (a CPU machine reports a "CUDA
error"), so the first import runs with descriptor 2 pointed at /dev/null, wherever in the
program it happens (``quiet_tensorflow_imports``: the sentence encoder of ``index`` and ``ask
--index`` imports TensorFlow deep inside). Python exceptions are unaffected. ``qa-finetune
--verbose`` (or QA_FINETUNE_TF_LOGS=1) shows the messages.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any


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


class _QuietFinder(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` as the other finders do, with a loader that silences its start."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "tensorflow":
            return None
        # Libraries ask for the spec only to see whether TensorFlow is installed: the finder
        # stays until the import itself.
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


class _QuietLoader(importlib.abc.Loader):
    """TensorFlow's own loader, run with descriptor 2 silenced, the device probe included."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietFinder)]
        # The module's own loader from here on (reload, resources).
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        with native_stderr_silenced():
            self.loader.exec_module(module)
            module.config.list_physical_devices("GPU")


def quiet_tensorflow_imports() -> None:
    """Silence TensorFlow's native start-up wherever it is first imported (once a process;
    nothing when it is imported already or QA_FINETUNE_TF_LOGS=1 asks to see it)."""
    if "tensorflow" in sys.modules or os.environ.get("QA_FINETUNE_TF_LOGS") == "1":
        return
    if not any(isinstance(finder, _QuietFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietFinder())
