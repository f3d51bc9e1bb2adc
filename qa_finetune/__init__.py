"""qa-finetune: fine-tune, run, score and publish extractive question-answering models."""

import os

# tf-keras (Keras 2) is what the transformers TensorFlow classes need; the variable must be
# set before TensorFlow is first imported anywhere in the process.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# TensorFlow's C++ start-up chatter drowns the tool's own output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
