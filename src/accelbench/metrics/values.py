"""Reading values that come from files: a column of an Arrow table as numpy, and a JSON
value as a finite number (or None)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa


def column_np(t: pa.Table, name: str, dtype: Any = np.float64) -> np.ndarray:
    """A column as a numpy array; nulls become NaN (floats) or False (bools); a column the
    table lacks reads as all-NaN (all-False). Integers above 2^53 are rounded to the
    nearest float64 (not refused): the timestamps are ``time.monotonic_ns()``, past 2^53
    on a host up for more than 104 days, where a float's step is 2 ns (512 ns at 2^62)."""
    if name not in t.column_names:
        if dtype is bool:
            return np.zeros(t.num_rows, dtype=bool)
        return np.full(t.num_rows, np.nan)
    col = t.column(name)
    if dtype is bool:
        return np.asarray(col.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    arr = col.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    return np.asarray(arr, dtype=np.float64)


def finite_number(x: Any, *, strings: bool = False) -> float | None:
    """``x`` as a finite float; None for booleans, non-numbers, NaN and infinities (and for
    strings unless ``strings``, when numeric strings such as "12.5" are read)."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, str) and strings:
        try:
            x = float(x)
        except ValueError:
            return None
    if not isinstance(x, int | float):
        return None
    try:
        v = float(x)
    except OverflowError:  # an int beyond float range
        return None
    return v if math.isfinite(v) else None
