"""Captured text as it arrives from real machines: byte-order marks, CRLF line ends, a
tool's warning printed before its JSON, a file cut short. One place reads all of them.

:func:`clean` normalises (BOM, CRLF / CR); :func:`strip_ansi` drops terminal escapes (a
`nvidia-smi topo -m` header is underlined); :func:`find_json` finds the JSON document in
a capture that carries text before it (amd-smi as a non-root user prints
"WARNING: User is missing the following required groups: render, video ..." on stdout
before the JSON) and says what it skipped; :func:`not_an_object` records a per-GPU
JSON entry that is not an object (rocm-smi's ``cardN``, an amd-smi list entry);
:func:`reading` / :func:`reading_int` read a field as a number and record one that is
not a number.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.gpu.values import is_na, parse_int, parse_quantity

BOM = "\ufeff"


def clean(text: str) -> str:
    """Drop a UTF-8 byte-order mark (also one decoded as U+FEFF mid-file at a line
    start, as concatenated captures carry) and turn CRLF / CR line ends into LF."""
    if BOM in text:
        text = text.replace(BOM, "")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


# what a text capture never holds: a byte that is not UTF-8 (read as U+FFFD) or a C0/DEL
# control other than tab, line ends, form feed and ESC (terminal colours)
_NOT_TEXT = re.compile("[\ufffd\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
NOT_TEXT_SHARE = 0.10


def not_text(text: str) -> str | None:
    """Why ``text`` (a file read as UTF-8 with errors replaced) is binary data rather
    than a tool's text output, or None. Binary: at least :data:`NOT_TEXT_SHARE` of its
    characters are bytes that are not UTF-8 or control characters no tool prints (NUL
    padding at the end is not counted). A text capture with a few stray bytes is text."""
    body = text.rstrip("\x00")
    if not body:
        return None
    bad = len(_NOT_TEXT.findall(body))
    if bad < NOT_TEXT_SHARE * len(body):
        return None
    return (
        f"binary data, not text ({bad:,} of its {len(body):,} characters are bytes that are "
        "not UTF-8 or control characters such as NUL)"
    )


def quote(text: str) -> str:
    """``text`` quoted for an error line: :func:`repr`, with the replacement character
    that a byte that is not UTF-8 was read as written ``\\ufffd`` (never shown as is)."""
    return repr(text).replace("\ufffd", "\\ufffd")


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Text without ANSI escape sequences (``ESC[4m`` ... ``ESC[0m``)."""
    return _ANSI.sub("", text)


def find_json(text: str, what: str) -> tuple[Any, list[str]]:
    """The first JSON document (object or array) in ``text`` that starts at a line
    start, and the non-blank lines skipped before it (a tool's warnings). Text after the
    document is ignored but reported. Raises AccelbenchError naming ``what`` when there
    is no complete document (for example a capture cut short) or one Python's reader
    refuses (nested too deeply, a number of more than 4,300 digits)."""
    text = clean(text)
    decoder = json.JSONDecoder()
    pos = 0
    first_error: json.JSONDecodeError | None = None
    skipped: list[str] = []
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith(("{", "[")):
            start = pos + (len(line) - len(stripped))
            try:
                data, end = decoder.raw_decode(text, start)
            except json.JSONDecodeError as exc:
                first_error = first_error or exc
            except (ValueError, RecursionError) as exc:
                # JSON that Python will not read: a number of more than 4,300 digits
                # (ValueError), arrays or objects nested deeper than its stack
                why = (
                    "nested too deeply"
                    if isinstance(exc, RecursionError)
                    else str(exc).split(";")[0]
                )
                raise AccelbenchError(f"not valid {what} JSON: {why}") from None
            else:
                notes = [f"skipped text before the JSON: {s.strip()[:120]}" for s in skipped]
                rest = text[end:].strip()
                if rest:
                    notes.append(f"ignored text after the JSON: {rest.splitlines()[0][:120]}")
                return data, notes
        if line.strip():
            skipped.append(line)
        pos += len(line)
    if first_error is not None:
        cut = first_error.pos >= len(text.rstrip()) - 1
        raise AccelbenchError(
            f"not valid {what} JSON: {first_error.msg} at line {first_error.lineno}"
            + (" (the capture ends inside the JSON: truncated?)" if cut else "")
        )
    raise AccelbenchError(f"no JSON document in the {what} capture")


def _said(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def reading(
    value: Any, unit: str | None, lost: list[str] | None, where: str, expect: str | None = None
) -> float | None:
    """A captured field as a number in base units (:func:`~accelbench.gpu.values.
    parse_quantity`, ``unit`` for a bare number): None for "N/A" and its spellings, and
    None said in ``lost`` (naming ``where``: the row or GPU and the field) for a value
    that is there but not a finite number ("abc W", an object, 1e999) or whose unit is
    of another quantity than the field's (``expect``, else ``unit``): "56 %" for a
    temperature in C. Its range is checked on the row
    (:func:`~accelbench.telemetry.schema.plausible`)."""
    if is_na(value):
        return None
    try:  # a JSON true / false is no reading either
        v = None if isinstance(value, bool) else parse_quantity(value, unit, expect)
    except (ValueError, OverflowError) as exc:
        v = None
        if "is not a unit of" in str(exc):
            if lost is not None:
                lost.append(
                    f"{where}: value {_said(value)} is not in a unit of the field's quantity "
                    f"({expect or unit}); that field is unknown"
                )
            return None
    if v is None or not math.isfinite(v):
        if lost is not None:
            lost.append(f"{where}: value {_said(value)} is not a number; that field is unknown")
        return None
    return v


def reading_int(value: Any, lost: list[str] | None, where: str) -> int | None:
    """:func:`reading` for a count, a bitmask or an index ("0x1e" is 30)."""
    if is_na(value):
        return None
    if not isinstance(value, bool):
        with contextlib.suppress(ValueError, OverflowError):  # not a count: said below
            return parse_int(value)
    if lost is not None:
        lost.append(f"{where}: value {_said(value)} is not a number; that field is unknown")
    return None


def not_an_object(lost: list[str] | None, what: str, value: Any) -> None:
    """Record in ``lost`` that the per-GPU entry ``what`` of a JSON capture is not an
    object (``"N/A"``, a number, a list) and is skipped: one GPU is not read."""
    if lost is not None:
        lost.append(f"{what}: not an object ({_said(value)}), skipped")
