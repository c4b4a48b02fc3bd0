"""The compiled per-value loops of the streamed summary (metrics/_chunkstats.c) against the
numpy paths they replace: the chunk gaps, their token weights and the tokens in a span of
any table of chunk lists (failed rows, null lists, token lists of another length), the
per-batch figures of StreamedDescribe, and the kept buckets; the percentiles, counts and
extremes bit for bit, sums (mean, std, tokens in the span) to the last digits."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import accelbench.metrics.stats as stats
import accelbench.metrics.summary as summary_mod
from test_summary_streamed import _streamed  # the streamed describe's two-pass driver


def test_the_compiled_loops_are_built() -> None:
    assert stats._chunkstats is not None, "metrics/_chunkstats.c was not built"
    assert summary_mod._chunkstats is not None


def _numpy_piece(
    t: pa.Table, mask: np.ndarray, osl: np.ndarray, a: int, b: int
) -> tuple[np.ndarray, np.ndarray, bool, float]:
    part = t.filter(pa.array(mask))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(summary_mod, "_chunkstats", None)
        g, w, known = summary_mod._chunk_gaps(part)
    return g, w, known, summary_mod._span_tokens(part, osl, a, b)


row = st.tuples(
    st.booleans(),  # ok
    st.one_of(st.none(), st.lists(st.integers(0, 10**6), max_size=6)),  # gaps between chunks
    st.sampled_from(["same", "none", "short"]),  # the row's chunk_tokens
    st.one_of(st.floats(0, 1e4), st.just(math.nan)),  # osl
)


@settings(max_examples=150, deadline=None)
@given(st.lists(row, max_size=30), st.integers(0, 3 * 10**6), st.integers(0, 3 * 10**6))
def test_piece_gaps_equal_numpy(rows: list, a: int, span: int) -> None:
    times, tokens, ok, osl = [], [], [], []
    for k, (is_ok, steps, tok, o) in enumerate(rows):
        ok.append(is_ok)
        osl.append(o)
        if steps is None:
            times.append(None)
            tokens.append(None if tok == "none" else [])
            continue
        ts = list(np.cumsum([10**6 * k, *steps]))
        times.append(ts)
        n = len(ts)
        tokens.append({"same": [1 + (k + j) % 3 for j in range(n)], "none": None,
                       "short": [1] * max(n - 1, 0)}[tok])  # fmt: skip
    t = pa.table({"chunk_times": pa.array(times, pa.list_(pa.int64())),
                  "chunk_tokens": pa.array(tokens, pa.list_(pa.int32()))})  # fmt: skip
    mask = np.asarray(ok, dtype=bool)
    osl_ok = np.asarray(osl, dtype=np.float64)[mask]
    b = a + span
    got = summary_mod._piece_gaps(t, mask, (osl_ok, a, b))
    assert got is not None
    exp = _numpy_piece(t, mask, osl_ok, a, b)
    assert np.array_equal(got[0], exp[0])
    assert np.array_equal(got[1], exp[1])
    assert got[2] == exp[2]
    assert math.isclose(got[3], exp[3], rel_tol=1e-12, abs_tol=1e-9)
    # the whole table (the dense path's call) is the same as every row masked
    whole = summary_mod._piece_gaps(t.filter(pa.array(mask)), None)
    assert whole is not None
    assert np.array_equal(whole[0], exp[0]) and np.array_equal(whole[1], exp[1])
    assert whole[2] == exp[2]


def test_piece_gaps_by_hand() -> None:
    # two ok rows (chunks at 0, 2, 5 ms and 10, 11 ms), a failed one between them
    t = pa.table({
        "chunk_times": pa.array([[0, 2_000_000, 5_000_000], [1, 2], [10_000_000, 11_000_000]],
                                pa.list_(pa.int64())),
        "chunk_tokens": pa.array([[1, 2, 3], [1, 1], [4, 5]], pa.list_(pa.int32())),
    })  # fmt: skip
    got = summary_mod._piece_gaps(t, np.array([True, False, True]),
                                  (np.array([6.0, 4.0]), 1_000_000, 10_000_000))  # fmt: skip
    assert got is not None
    gaps, w, known, in_span = got
    assert gaps.tolist() == [2.0, 3.0, 1.0] and w.tolist() == [2, 3, 5] and known
    # in [1, 10] ms: row 1's chunks at 2 and 5 ms (6 tokens / 3 chunks each), row 3's at 10
    assert in_span == 2.0 + 2.0 + 2.0


def _describe(v: np.ndarray, w: np.ndarray, cuts: list[int], compiled: bool) -> tuple:
    with pytest.MonkeyPatch.context() as m:
        if not compiled:
            m.setattr(stats, "_chunkstats", None)
        return _streamed(v, w, cuts, guess_after=7)


values = st.lists(
    st.one_of(
        st.floats(-1e6, 1e6, allow_subnormal=False),
        st.integers(-3, 3).map(float),
        st.just(math.nan),
        st.just(-0.0),
    ),  # fmt: skip
    max_size=300,
)


@settings(max_examples=120, deadline=None)
@given(values, st.data())
def test_streamed_describe_compiled_equals_numpy(vals: list[float], data: st.DataObject) -> None:
    v = np.asarray(vals, dtype=np.float64)
    w = np.asarray(data.draw(st.lists(st.integers(0, 5), min_size=v.size, max_size=v.size)),
                   dtype=np.int64)  # fmt: skip
    cuts = data.draw(st.lists(st.integers(0, v.size), max_size=4))
    for got, exp in zip(_describe(v, w, cuts, True), _describe(v, w, cuts, False), strict=True):
        for k, x in exp.items():
            if k in ("mean", "std") and x is not None:
                assert math.isclose(got[k], x, rel_tol=1e-12, abs_tol=1e-9), k
            else:
                assert got[k] == x, k


def test_batch_by_hand() -> None:
    ext = stats._chunkstats
    assert ext is not None
    v = np.array([1.0, 2.0, 2.0, -4.0])
    w = np.array([0, 3, 1, 1], dtype=np.int64)
    (n, s, m2, lo, hi, klo, wn, ws, wm2, wlo, whi, wklo, every), kb, cb, wcb = ext.batch(v, w)
    # mean 0.25: deviations 0.75, 1.75, 1.75, -4.25, squared 0.5625 + 2 x 3.0625 + 18.0625
    assert (n, s, lo, hi) == (4, 1.0, -4.0, 2.0) and m2 == pytest.approx(24.75)
    # weighted: 2 x 3, 2 x 1, -4 x 1: n 5, sum 4, mean 0.8, m2 3 x 1.44 + 1.44 + 23.04
    assert (wn, ws, wlo, whi, every) == (5, 4.0, -4.0, 2.0, 0) and wm2 == pytest.approx(28.8)
    keys = np.frombuffer(kb, np.int64)
    assert keys.tolist() == stats._bucket_keys(v).tolist() and klo == keys.min()
    counts = np.frombuffer(cb, np.int64)
    assert counts[keys - klo].tolist() == [1, 2, 2, 1] and counts.sum() == 4
    assert np.frombuffer(wcb, np.int64).sum() == 5 and wklo == keys.min()
    assert ext.batch(np.array([1.0, math.nan]), np.zeros(2, np.int64)) is None


def test_bad_buffers_are_refused() -> None:
    ext = stats._chunkstats
    assert ext is not None
    t = np.arange(4, dtype=np.int64)
    empty32 = np.empty(0, np.int32)
    with pytest.raises(ValueError, match="out of range"):  # an offset past the values
        ext.gaps(t, np.array([0, 9], np.int32), empty32, empty32, np.ones(1, np.uint8),
                 np.empty(0), 0, 0)  # fmt: skip
    with pytest.raises(ValueError, match="inconsistent"):  # offsets for another row count
        ext.gaps(t, np.array([0, 4], np.int32), empty32, empty32, np.ones(3, np.uint8),
                 np.empty(0), 0, 0)  # fmt: skip
    with pytest.raises(ValueError, match="one length"):
        ext.batch(np.ones(3), np.ones(2, np.int64))
    with pytest.raises(ValueError, match="outside"):
        ext.keep(np.ones(1), np.ones(1, np.int64), np.array([5], np.int64), np.ones(2, np.uint8))
