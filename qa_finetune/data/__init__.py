"""Examples in: every file format and Hub split read, validated and split (no TensorFlow)."""
