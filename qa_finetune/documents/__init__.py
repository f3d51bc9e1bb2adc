"""Documents in: files and folders of text, Markdown, HTML, PDF and SQuAD contexts read as
plain text whose character offsets answers point into (no TensorFlow, no model)."""
