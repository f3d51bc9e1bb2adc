"""One-off studies: each answered one question, its figures recorded in bench/reports/."""
