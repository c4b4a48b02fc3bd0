"""Checks for values that come from outside (CLI options, config files, API callers).

Every check raises :class:`~accelbench.errors.UsageError` with one line that names the
option as the CLI spells it, the allowed range and the value given, so the Python API and
the CLI reject the same inputs with the same words. NaN and infinities are never in range.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError

MAX_SEED = (1 << 32) - 1  # numpy's SeedSequence takes any non-negative int; keep it 32-bit


def seed(name: str, value: Any) -> int:
    """A random seed: a whole number in [0, 2**32-1]."""
    return integer(name, value, 0, MAX_SEED)


_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _fmt(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else f"{v:,}".replace(",", "_")


def number(
    name: str,
    value: Any,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    unit: str = "",
) -> float:
    """A finite real number in [lo, hi] (or (lo, hi] with ``lo_open``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number (got {value!r})") from None
    if isinstance(value, bool):
        raise UsageError(f"{name} must be a number (got {value!r})")
    lo_s = "-inf" if lo is None else _fmt(lo)
    hi_s = "inf" if hi is None else _fmt(hi)
    rng = f"{'(' if lo_open or lo is None else '['}{lo_s}, {hi_s}{']' if hi is not None else ')'}"
    unit_s = f" {unit}" if unit else ""
    ok = math.isfinite(v)
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
        ok = v <= hi
    if not ok:
        raise UsageError(f"{name} must be a finite number in {rng}{unit_s} (got {value!r})")
    return v


def integer(name: str, value: Any, lo: int, hi: int, *, unit: str = "") -> int:
    """A whole number in [lo, hi] (bools and non-integral floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{name} must be a whole number (got {value!r})")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise UsageError(f"{name} must be a whole number (got {value!r})")
    v = int(value)
    if not lo <= v <= hi:
        unit_s = f" {unit}" if unit else ""
        raise UsageError(f"{name} must be in [{_fmt(lo)}, {_fmt(hi)}]{unit_s} (got {value!r})")
    return v


def optional_number(name: str, value: Any, *args: Any, **kw: Any) -> float | None:
    return None if value is None else number(name, value, *args, **kw)


def optional_integer(name: str, value: Any, lo: int, hi: int, **kw: Any) -> int | None:
    return None if value is None else integer(name, value, lo, hi, **kw)


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UsageError(f"{name} must be one of {', '.join(allowed)} (got {value!r})")
    return str(value)


def header_value(name: str, value: str) -> str:
    """A value sent in an HTTP header (an API key): visible ASCII, with spaces or tabs only
    between other characters (RFC 9110 5.5). A CR or LF would end the header and start
    another; the value is a secret, so the message names the position, never the value."""
    for i, ch in enumerate(value):
        inner = 0 < i < len(value) - 1
        if not ("!" <= ch <= "~" or (ch in " \t" and inner)):
            raise UsageError(
                f"{name} has a character not allowed in an HTTP header (U+{ord(ch):04X} at "
                f"position {i + 1} of {len(value)}: visible ASCII only); the key is not shown"
            )
    return value


def label(name: str, value: str) -> str:
    """A name that is one safe path component: letters, digits, '.', '_', '-', not
    starting with '.', at most 100 characters, so it can never leave its parent folder."""
    if not isinstance(value, str) or not _LABEL.match(value):
        raise UsageError(
            f"{name} must be 1-100 characters of letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit (got {value!r})"
        )
    return value


def output_dir(name: str, path: str | Path) -> Path:
    """A directory we may create or write into: not an existing file, and a parent that
    exists as a directory or can be created."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{name} {p} exists and is not a directory")
    for parent in [p, *p.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{name} {p} cannot be created: {parent} is not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UsageError(f"{name} {p} cannot be created: {parent} is not writable")
            break
    return p


def make_dir(name: str, path: str | Path) -> Path:
    """Create directory ``path`` (and its parents); one line naming ``name`` when that is
    impossible or the directory is not writable."""
    p = output_dir(name, path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{name} {p}: cannot create it ({exc.strerror or exc})") from None
    if not os.access(p, os.W_OK):
        raise UsageError(f"{name} {p}: not writable")
    return p


def output_file(name: str, path: str | Path) -> Path:
    """A file about to be (over)written, checked before any work is done: not a
    directory, its folder created if needed, writable."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{name} {p} is a directory; give a file name")
    make_dir(name, p.parent if str(p.parent) else ".")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{name} {p}: not writable")
    return p


def input_file(name: str, path: str | Path) -> Path:
    """An existing regular file (not a FIFO, device or directory, which would hang or fail)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{name} {p} does not exist")
    if not p.is_file():
        raise UsageError(f"{name} {p} is not a regular file")
    return p


SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")


def slo(values: dict[str, Any]) -> dict[str, float]:
    """Goodput SLOs: known keys, each a finite number of milliseconds above 0 (30 days max)."""
    out: dict[str, float] = {}
    for k, val in values.items():
        if k not in SLO_KEYS:
            raise UsageError(f"unknown SLO {k!r}: use {', '.join(SLO_KEYS)}")
        out[k] = number(f"--slo {k}", val, 0, 30 * 86400e3, lo_open=True, unit="ms")
    return out
