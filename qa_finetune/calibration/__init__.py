"""Every decision fitted on held-out answers, in one shape: features -> fit on held-out answers
-> saved with provenance -> applied.

- ``no_answer_rule``: when a question gets "no answer" (the null-score gap or a classifier on
  the reader's signals) and at which threshold;
- ``confidence``: the probability that the first answer is right (temperature scaling or a
  logistic calibrator on the reader's own features);
- ``runner_up``: the confidence of the answers after the first (``--top-k``);
- ``open_search``: the confidence of an answer found by search (``ask --index``);
- ``logistic``: what the calibrators share: the regression, its cross-validation, the range
  each feature was fitted on (clipped to, and flagged outside of, when applied) and the refusal
  of a fit that learned nothing;
- ``answers``: the confidence each answer shown gets; ``held_out``: what one reading of held-out
  questions chooses; ``metrics``: how good those decisions are.

The package is pure (NumPy, no TensorFlow, no disk): a run's ``calibration.json`` and
``no_answer_rule.json`` are read and written by ``runs``, from each calibrator's
``to_dict``/``from_dict``.

Each fit records what it was fitted on (``fitted_on``: the data's base name, how many questions,
documents and unanswerable, and how many the reader trained on), so a number shown to a user can
say where it comes from. ``decoding`` below holds the span search these decisions read.
"""
