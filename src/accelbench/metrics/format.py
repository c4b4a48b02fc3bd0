"""How accelbench writes a number for a person: one module for the report's cells, the
terminal's verdict lines and the CLI tables (machine formats, such as Prometheus
durations, are their writers' own).

- :func:`sig`: significant digits, thousands separated from ``big`` on, a placeholder
  for unknown (None, NaN) and infinity shown as such;
- :func:`fixed`: fixed decimals with thousands separators (the run summary's tables);
- :func:`with_unit`: a verdict's statistic in its own unit (``1.234x``, ``+0.50pp``,
  ``12.3 ms``, ``+1.2M/h``, ``+3.4%/h``).
"""

from __future__ import annotations

import math

MIB = 2**20


def sig(
    v: float | int | None,
    digits: int = 4,
    *,
    big: float = 10_000,
    none: str = "—",
    inf: str | None = "∞",
) -> str:
    """``v`` to ``digits`` significant digits; from ``big`` on, whole and thousands
    separated (``12,345``); ``none`` for None and NaN; infinity as ``inf`` (``none``
    when ``inf`` is None); never ``-0``."""
    if v is None or isinstance(v, bool):
        return none
    x = float(v)
    if math.isnan(x):
        return none
    if math.isinf(x):
        if inf is None:
            return none
        return inf if x > 0 else "-" + inf
    x += 0.0  # no "-0"
    if abs(x) >= big:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def fixed(v: float | int | None, digits: int = 2, *, none: str = "-") -> str:
    """A float with ``digits`` decimals, an int whole, both thousands separated."""
    if v is None:
        return none
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def with_unit(x: float | None, unit: str, *, none: str = "-") -> str:
    """A statistic in its unit, as verdict lines show it: a ratio ``1.234x``, percentage
    points ``+0.50pp``, milliseconds ``12.3 ms``, a fraction ``0.0123``, bytes per hour
    in MiB ``+1.2M/h``, a percent or rate ``+3.4%`` / ``+3.4%/h``, anything else to three
    significant digits with its sign and unit."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return none
    if unit in ("ratio", "x"):
        return f"{x:.3f}x"
    if unit == "pp":
        return f"{x:+.2f}pp"
    if unit == "ms":
        return f"{x:.1f} ms"
    if unit == "fraction":
        return f"{x:.4f}"
    if unit == "B/h":
        return f"{x / MIB:+.3g}M/h"
    if unit.startswith("%"):
        return f"{x:+.3g}{unit}"
    return f"{x:+.3g} {unit}" if unit else f"{x:+.3g}"
