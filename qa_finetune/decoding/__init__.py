"""Model logits to answers: the n-best span search and the no-answer rule (no TensorFlow)."""
