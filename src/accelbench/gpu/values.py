"""Values as GPU tools and libraries return them, turned into numbers in base units.

Tools print "N/A", "[Not Supported]", "23028 MiB", "(800Mhz)", "0x1e"; libraries return
bytes, "N/A" strings or raise for unsupported fields. These helpers are the one place
that reads such a field: :func:`to_float` and :func:`to_int` give ``None`` for anything
that is not a number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

NA_STRINGS = {
    "",
    "n/a",
    "[n/a]",
    "na",
    "none",
    "not supported",
    "[not supported]",
    "unknown",
    "[unknown error]",
    "requested functionality has been deprecated",
    "[requested functionality has been deprecated]",
    "insufficient permissions",
    "[insufficient permissions]",
    "gpu is lost",
    "[gpu is lost]",
}

_MULT = {
    # bytes
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    # power
    "w": 1.0,
    "mw": 1e-3,
    "uw": 1e-6,
    "kw": 1e3,
    # energy
    "j": 1.0,
    "mj": 1e-3,
    "uj": 1e-6,
    "µj": 1e-6,
    "kj": 1e3,
    # frequency
    "hz": 1.0,
    "khz": 1e3,
    "mhz": 1e6,
    "ghz": 1e9,
    # time
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
    # temperature
    "c": 1.0,
    "°c": 1.0,
    # ratio
    "%": 0.01,
}

# What each unit measures: a value that carries a unit of another quantity than its
# field's ("56 %" for a temperature, "1011 W" for memory) is not a reading of that field.
_DIMENSION = {
    **dict.fromkeys(("b", "kb", "mb", "gb", "kib", "mib", "gib"), "size"),
    **dict.fromkeys(("w", "mw", "uw", "kw"), "power"),
    **dict.fromkeys(("j", "mj", "uj", "µj", "kj"), "energy"),
    **dict.fromkeys(("hz", "khz", "mhz", "ghz"), "frequency"),
    **dict.fromkeys(("s", "ms", "us", "µs", "ns"), "time"),
    **dict.fromkeys(("c", "°c"), "temperature"),
    "%": "ratio",
    "x": "count",
    **dict.fromkeys(("gt/s", "mt/s"), "transfer rate"),
}

_NUM_UNIT = re.compile(
    r"^\s*\(?\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*([A-Za-zµ°%/]*)\s*\)?\s*$"
)


def is_na(value: Any) -> bool:
    """True for the many spellings of "not available" in tool output."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    if isinstance(value, str) and value.strip().lower() in NA_STRINGS:
        return True
    return False


def parse_quantity(
    value: Any, default_unit: str | None = None, expect: str | None = None
) -> float | None:
    """ "23028 MiB" -> 24146608128.0, "25.58 W" -> 25.58, "17 C" -> 17.0, "0 %" -> 0.0,
    "(800Mhz)" -> 8e8, "N/A" -> None. A bare number takes ``default_unit`` (or none).

    Returns the value in the base unit of its dimension. Unknown units raise ValueError,
    and so does a unit of another quantity than ``expect`` (a unit of the field; without
    it, ``default_unit`` when the value carries its own unit): "56 %" read in "C".
    """
    if is_na(value):
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        num, unit = float(value), ""
    else:
        m = _NUM_UNIT.match(str(value))
        if not m:
            raise ValueError(f"not a quantity: {value!r}")
        num, unit = float(m.group(1)), m.group(2)
    unit = unit.strip().lower()
    want = expect if expect is not None else (default_unit if unit else None)
    if not unit:
        unit = (default_unit or "").lower()
    if want and unit and _DIMENSION.get(unit, unit) != _DIMENSION.get(want.lower(), want):
        raise ValueError(
            f"unit {unit!r} in {value!r} is not a unit of "
            f"{_DIMENSION.get(want.lower(), want)} ({want})"
        )
    if not unit or unit == "x":  # "16x" link width: a plain count
        return num
    if unit in ("gt/s", "mt/s"):
        return num * (1000.0 if unit == "gt/s" else 1.0)  # in MT/s
    if unit not in _MULT:
        raise ValueError(f"unknown unit {unit!r} in {value!r}")
    return num * _MULT[unit]


def parse_int(value: Any) -> int | None:
    """ "0" -> 0, "16x" -> 16, "0x1e" -> 30, "N/A" -> None; "16 W" (a unit of a
    quantity, not a count) raises ValueError."""
    if is_na(value):
        return None
    if isinstance(value, int):
        return value
    s = str(value).strip().lower()
    if s.startswith("0x"):
        return int(s, 16)
    q = parse_quantity(s, expect="x")  # a count: "16x" or bare, never "16 W"
    return None if q is None else int(round(q))


def to_float(value: Any, default_unit: str | None = None) -> float | None:
    """A tool or library field as a number in base units; None when not available or
    not a number (see :func:`parse_quantity`)."""
    try:
        return parse_quantity(value, default_unit)
    except (ValueError, OverflowError):
        return None


def to_int(value: Any) -> int | None:
    """A tool or library field as an integer; None when not available or not a number
    (see :func:`parse_int`)."""
    try:
        return parse_int(value)
    except (ValueError, OverflowError):
        return None


def whole(value: float | None) -> int | None:
    """A number in base units (bytes, lanes, counts) as the integer its column holds."""
    return None if value is None else int(round(value))


def text(value: Any) -> str | None:
    """A library string (pynvml returns bytes with old versions) as str; None stays None."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a GPU library function; any error (not supported, no permission, a lost
    GPU) gives None, so one missing field never loses a sample."""
    try:
        return fn(*args)
    except Exception:
        return None
