"""qa-finetune: fine-tune, run, score and publish extractive question-answering models."""

import os

# tf-keras (Keras 2) is what the transformers TensorFlow classes need; the variable must be
# set before TensorFlow is first imported anywhere in the process.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# TensorFlow's C++ start-up chatter drowns the tool's own output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"

# The public API, imported on first use so `import qa_finetune` (and `--help`) stays instant.
_PUBLIC = {
    "QuestionAnswerer": "qa_finetune.inference.answerer",
    "get_answer": "qa_finetune.inference.answerer",
    "load_config": "qa_finetune.config",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> object:
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'qa_finetune' has no attribute {name!r}")
