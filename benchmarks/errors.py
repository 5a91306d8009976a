"""The benchmark tool's one error: bad input, said in one line, exit 2."""


class UsageError(Exception):
    """A suite, flag or results file the tool cannot use; the message names
    the problem and the fix."""
