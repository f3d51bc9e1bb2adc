"""Cross-validation: folds of the training data grouped by document, each fold trained as an
ordinary run and scored on its held-out part as ``evaluate`` scores, and a summary.

It sits above training and evaluation (it calls both) and below the CLI.
"""
