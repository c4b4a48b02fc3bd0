"""Theil-Sen's pairwise slopes of a long series (stats._slopes_between): the compiled loop
(metrics/_pairslopes.c) and the numpy tiles give exactly the slopes, and the count below a
bracket, that every pair computed one by one gives, whatever the order of the points,
their ties, the bracket, the block size and the thread count."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import accelbench.metrics.parallel as parallel
import accelbench.metrics.stats as stats


def _brute(t: np.ndarray, y: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, int]:
    i, j = np.triu_indices(t.size, 1)
    dt = t[j] - t[i]
    keep = dt != 0
    s = (y[j] - y[i])[keep] / dt[keep]
    return np.sort(s[(s >= lo) & (s <= hi)]), int(np.count_nonzero(s < lo))


def test_the_compiled_loop_is_built() -> None:
    assert stats._pairslopes is not None, "metrics/_pairslopes.c was not built"


@st.composite
def _series(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, float, float]:
    n = draw(st.integers(2, 90))
    steps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 5.0, 3600.0]), min_size=n, max_size=n))
    t = np.cumsum(np.asarray(steps)) + draw(st.floats(-1e6, 1e6))
    ys = st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False)
    y = np.asarray(draw(st.lists(ys, min_size=n, max_size=n)))
    perm = draw(st.permutations(range(n)))  # any order of the points
    t, y = t[list(perm)], y[list(perm)]
    all_s = _brute(t, y, -np.inf, np.inf)[0]
    if all_s.size and draw(st.booleans()):  # a bracket at slopes that exist (edges count)
        a, b = sorted(draw(st.lists(st.sampled_from(list(all_s)), min_size=2, max_size=2)))
    else:
        a, b = sorted(draw(st.lists(st.floats(-1e9, 1e9), min_size=2, max_size=2)))
    return t, y, float(a), float(b)


@settings(max_examples=150, deadline=None)
@given(series=_series(), rows=st.sampled_from([1, 3, 64]), threads=st.sampled_from([1, 3]),
       compiled=st.booleans())  # fmt: skip
def test_slopes_between_equals_every_pair(
    series: tuple[np.ndarray, np.ndarray, float, float],
    rows: int,
    threads: int,
    compiled: bool,
) -> None:
    t, y, lo, hi = series
    with pytest.MonkeyPatch.context() as m:
        m.setattr(stats, "_SEN_ROWS", rows)
        m.setattr(stats, "_SEN_TILE", 7 * rows)  # tiles that end mid-row
        m.setattr(parallel, "cores", lambda: threads)
        if not compiled:
            m.setattr(stats, "_pairslopes", None)
        got, below = stats._slopes_between(t, y, lo, hi)
    want, want_below = _brute(t, y, lo, hi)
    assert below == want_below
    # the same values (bits, but for a zero slope's sign: the points are put in time order,
    # and 0 / -dt is -0.0 where 0 / dt is 0.0)
    assert (np.sort(got) + 0.0).tobytes() == (want + 0.0).tobytes()


@pytest.mark.parametrize("compiled", [True, False])
def test_theil_sen_large_path_equals_dense_on_a_soak_like_series(
    monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """A memory series sampled every 5 s (no ties), with an AR(1)-like wander: the large
    path's slope and interval are the dense path's, by the compiled loop and by numpy."""
    n = 3500
    rng = np.random.default_rng(7)
    t = np.arange(n) * 5.0
    y = 2e9 + 25 * t + rng.normal(0, 4e5, n) + np.cumsum(rng.normal(0, 3e4, n))
    if not compiled:
        monkeypatch.setattr(stats, "_pairslopes", None)
    big = stats.sen_interval(t, y)
    monkeypatch.setattr(stats, "SEN_DENSE_MAX", 10**9)
    assert big == stats.sen_interval(t, y)


def test_block_refuses_bad_buffers() -> None:
    ext = stats._pairslopes
    assert ext is not None
    t = np.arange(4.0)
    with pytest.raises(ValueError, match="one length"):
        ext.block(t, np.arange(3.0), 0, 1, 0.0, 1.0)
    with pytest.raises(ValueError, match="out of range"):
        ext.block(t, t, 0, 5, 0.0, 1.0)
    below, inside = ext.block(t, 2 * t, 0, 3, 0.0, 10.0)
    assert below == 0 and np.frombuffer(inside).tolist() == [2.0] * 6
