"""Errors that the CLI shows as one clear line (no traceback unless --debug)."""


class AccelbenchError(Exception):
    """A user-facing error: bad input, unreachable server, missing file.

    The message must say what is wrong and, where possible, what to do about it.
    """
