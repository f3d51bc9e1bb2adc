"""The one exception type that the command line turns into a one-line message."""


class QAFinetuneError(Exception):
    """A problem the user can fix: the message names the problem and the fix, on one line."""
