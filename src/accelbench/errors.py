"""Errors that the CLI shows as one clear line (no traceback unless --debug).

Exit codes (README, "Exit codes"): 0 completed; 1 the command finished but its result
is a failure (a run that failed or was interrupted, a failed health or claim check);
2 bad usage or input. :class:`UsageError` and every other :class:`AccelbenchError` map
to 2 unless they say otherwise.
"""


class AccelbenchError(Exception):
    """A user-facing error: bad input, unreachable server, missing file.

    The message must say what is wrong and, where possible, what to do about it.
    """

    exit_code = 2


class UsageError(AccelbenchError):
    """An option or input value outside what the command accepts."""


class DocumentError(AccelbenchError):
    """A file accelbench wrote (run.json, summary.json, a suite's document) that is damaged,
    of an unknown version, or not the type it claims: one line naming the file and field.

    The line quotes the file (its keys and values): whatever it holds, a character that
    does not print (a newline in a key) is shown escaped, so the line stays one line."""

    def __init__(self, message: str) -> None:
        super().__init__("".join(c if c.isprintable() else repr(c)[1:-1] for c in str(message)))
