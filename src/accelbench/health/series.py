"""One device's samples as columns, the form the health rules read.

A :class:`DeviceSeries` keeps the rows of one device (in time order) and, beside them, the
numeric columns the rules use as a float64 array (NaN where a row has no value), so each
rule is a few numpy operations instead of a pass over row dicts. Rows are appended at the
end and dropped from the front, so the monitor keeps one series per device across ticks
(:class:`accelbench.health.window.RollingWindow`) and never rebuilds the window; the
one-shot :func:`accelbench.health.rules.evaluate` builds the same series from a list of
rows. Both then run the same rules, so they give the same verdicts.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import Any

import numpy as np

from accelbench.telemetry.schema import Row, numeric

# Columns the health rules (and the "required signal" check) read as numbers.
NUMERIC = (
    "temp_gpu_c",
    "temp_hotspot_c",
    "temp_mem_c",
    "temp_slowdown_c",
    "temp_mem_max_c",
    "throttle_power_s",
    "throttle_thermal_s",
    "throttle_reasons",  # 1.0 a reason is active, 0.0 none, NaN not reported
    "ecc_uncorrected_volatile",
    "ecc_uncorrected_aggregate",
    "remapped_rows_unc",
    "remapped_rows_failure",
    "ecc_corrected_volatile",
    "ecc_corrected_aggregate",
    "ecc_deferred",
    "pcie_width",
    "pcie_width_max",
    "pcie_gen",
    "pcie_gen_max",
    "util_gpu",
    "pcie_replay",
    "nvlink_errors",
    "power_w",
    "power_limit_w",
    "mem_used_bytes",
    "proc_rss_bytes",
)
COLUMN = {c: i for i, c in enumerate(NUMERIC)}
_REASONS = COLUMN["throttle_reasons"]
_NAN = math.nan


def _number(v: Any) -> float:
    """A cell as a float; missing (None) or not a number is NaN, i.e. not reported."""
    if v is None:
        return _NAN
    try:
        return float(v)
    except (TypeError, ValueError):
        return _NAN


def _reasons(v: Any) -> list[str]:
    return [x for x in (v or "").split(",") if x] if isinstance(v, str) else []


class DeviceSeries:
    """The rows of one device in time order, with their numeric columns (see module
    docstring). ``seq`` numbers rows across devices so several series can be put back in
    the order their rows arrived."""

    def __init__(self, capacity: int = 64) -> None:
        self.rows: deque[Row] = deque()
        self._data = np.empty((capacity, len(NUMERIC)))
        self._t = np.zeros(capacity, dtype=np.int64)
        self._t_ok = np.zeros(capacity, dtype=bool)
        self._seq = np.zeros(capacity, dtype=np.int64)
        self._lo = 0
        self._hi = 0
        self.reasons: Counter[str] = Counter()  # active throttle reasons over the rows
        self._present: np.ndarray | None = None  # ~isnan of the rows, until they change

    @classmethod
    def from_rows(cls, rows: list[Row]) -> DeviceSeries:
        s = cls(max(len(rows), 1))
        for i, r in enumerate(rows):
            s.append(r, i)
        return s

    def __len__(self) -> int:
        return self._hi - self._lo

    def append(self, row: Row, seq: int) -> None:
        if self._hi == len(self._t):
            self._make_room()
        i = self._hi
        vals = [_number(row.get(c)) for c in NUMERIC]
        reasons = row.get("throttle_reasons")
        vals[_REASONS] = _NAN if reasons is None else float(bool(reasons))
        self._data[i] = vals
        t = row.get("t_ns")
        self._t[i] = t if t is not None else 0
        self._t_ok[i] = t is not None
        self._seq[i] = seq
        self._hi += 1
        self._present = None
        self.rows.append(row)
        self.reasons.update(_reasons(reasons))

    def drop_before(self, t_ns: int) -> None:
        """Drop rows from the front while their time is before ``t_ns``."""
        while self._lo < self._hi and self._t[self._lo] < t_ns:
            row = self.rows.popleft()
            self._lo += 1
            self._present = None
            gone = _reasons(row.get("throttle_reasons"))
            if gone:
                self.reasons.subtract(gone)
                for x in gone:
                    if self.reasons[x] <= 0:
                        del self.reasons[x]

    def _make_room(self) -> None:
        n = len(self)
        cap = len(self._t)
        new_cap = cap if n <= cap // 2 else cap * 2  # compact in place, or grow
        data = np.empty((new_cap, len(NUMERIC)))
        data[:n] = self._data[self._lo : self._hi]
        t, t_ok, seq = (np.zeros(new_cap, dtype=a.dtype) for a in (self._t, self._t_ok, self._seq))
        t[:n], t_ok[:n], seq[:n] = (
            a[self._lo : self._hi] for a in (self._t, self._t_ok, self._seq)
        )
        self._data, self._t, self._t_ok, self._seq = data, t, t_ok, seq
        self._lo, self._hi = 0, n

    # ------------------------------------------------------------------ reading

    def col(self, name: str) -> np.ndarray:
        """The column as a float64 view (NaN: not reported)."""
        return self._data[self._lo : self._hi, COLUMN[name]]

    def has(self, name: str) -> np.ndarray:
        """Which rows report the column (computed once for all columns per change)."""
        if self._present is None:
            self._present = ~np.isnan(self._data[self._lo : self._hi])
        return self._present[:, COLUMN[name]]

    def any(self, name: str) -> bool:
        return bool(self.has(name).any())

    def value(self, i: int, name: str) -> int | float:
        """The original value of row ``i`` (as the source gave it: int stays int); ``i``
        is a row where ``name`` was observed (an unobserved one is a LookupError)."""
        v = numeric(self.rows[i], name)
        if v is None:
            raise LookupError(f"row {i} did not observe {name}")
        return v

    @property
    def first_seq(self) -> int:
        return int(self._seq[self._lo])

    @property
    def t_ns(self) -> np.ndarray:
        return self._t[self._lo : self._hi]

    @property
    def t_ok(self) -> np.ndarray:
        return self._t_ok[self._lo : self._hi]

    def span_s(self) -> float:
        """Seconds between the first and last timed row (0 with fewer than two)."""
        ok = self.t_ok
        if np.count_nonzero(ok) < 2:
            return 0.0
        t = self.t_ns[ok]
        return (int(t.max()) - int(t.min())) / 1e9

    def delta(self, name: str, base: Row | None) -> float | None:
        """Last value minus the baseline's (or the first value) of a counter column."""
        idx = np.flatnonzero(self.has(name))
        if idx.size == 0:
            return None
        v = self.col(name)
        b = None if base is None else numeric(base, name)
        start = float(b) if b is not None else float(v[idx[0]])
        return float(v[idx[-1]]) - start
