"""The one exception type the CLI turns into a clean one-line error."""


class RobenchError(Exception):
    """A user-facing problem: bad input, missing resource, unknown name.

    The message must say what is wrong and what to do about it; the CLI prints
    it on one line and exits non-zero, without a traceback.
    """
