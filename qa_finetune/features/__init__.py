"""Examples to model inputs: windows of question and context, answer labels (no TensorFlow)."""
