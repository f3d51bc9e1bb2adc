"""Labeling your own data: a local page over your documents, saved as SQuAD JSON."""
