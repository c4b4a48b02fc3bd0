"""The large-run paths of the summary and the trend statistics against the in-memory
ones: the streamed chunk-gap statistics (exact percentiles), the table read a column at a
time, Theil-Sen over blocks of pairs and the warm-up break from the normal equations."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import accelbench.metrics.stats as stats
import accelbench.metrics.summary as summary_mod
from accelbench.metrics.stats import StreamedDescribe, describe, describe_weighted
from accelbench.metrics.summary import summarize
from accelbench.store.rundir import ParquetColumns, read_for_summary

sys.path.insert(0, str(Path(__file__).parent))
from synthetic_runs import make_requests  # noqa: E402

EXACT = ("count", "min", "max", "p50", "p90", "p95", "p99", "p99.9")


def _streamed(
    v: np.ndarray, w: np.ndarray, cuts: list[int], guess_after: int = 1 << 20
) -> tuple[dict, dict]:
    sd = StreamedDescribe(guess_after=guess_after)
    parts = np.split(np.arange(v.size), sorted(cuts))
    for p in parts:
        sd.add(v[p], w[p])
    if not sd.complete():
        sd.second_pass()
        for p in parts:
            sd.add(v[p], w[p])
    return sd.result()


def _same(got: dict, exp: dict) -> None:
    # a sum's rounding is relative to the values' size, not to the result's: numpy's std of
    # five equal values of 419,430.71 is 5.8e-11, not 0 (Hypothesis, CI): allow 64 ulps of
    # the largest value
    scale = max((abs(exp[k]) for k in ("min", "max") if exp.get(k) is not None), default=0.0)
    for k in exp:
        if k in EXACT or exp[k] is None:
            assert got[k] == exp[k], k
        else:  # mean, std: summed per batch
            tol = max(1e-12, 64 * sys.float_info.epsilon * scale)
            assert math.isclose(got[k], exp[k], rel_tol=1e-12, abs_tol=tol), k


values = st.lists(
    st.one_of(
        st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False),
        st.integers(-3, 3).map(float),  # ties
    ),
    min_size=0,
    max_size=400,
)


@settings(max_examples=80, deadline=None)
@given(values, st.data())
def test_streamed_describe_equals_describe(vals: list[float], data: st.DataObject) -> None:
    v = np.asarray(vals, dtype=float)
    w = np.asarray(data.draw(st.lists(st.integers(0, 5), min_size=v.size, max_size=v.size)),
                   dtype=np.int64)  # fmt: skip
    cuts = data.draw(st.lists(st.integers(0, max(v.size, 0)), max_size=4))
    # the guess after the first few values (one pass where it holds, two where not) or
    # never (every value kept)
    guess = data.draw(st.sampled_from([1, 7, 50, 1 << 20]))
    plain, weighted = _streamed(v, w, cuts, guess)
    _same(plain, describe(v))
    _same(weighted, describe_weighted(v, w))


def test_equal_values_have_a_std_of_zero_within_rounding() -> None:
    """Hypothesis's case from CI: two equal values weighted 1 and 4, cut after the first:
    the streamed std is 0.0 exactly, numpy's 5.8e-11 (its mean's rounding)."""
    v = np.array([419430.71067933063] * 2)
    plain, weighted = _streamed(v, np.array([1, 4]), [1], 1)
    assert weighted["std"] == 0.0 and plain["std"] == 0.0
    _same(plain, describe(v))
    _same(weighted, describe_weighted(v, np.array([1, 4])))


def test_streamed_describe_by_hand() -> None:
    # 1, 2, 3, 4 with weights 1, 0, 2, 1: the weighted sample is 1, 3, 3, 4
    plain, weighted = _streamed(np.array([4.0, 1.0, 3.0, 2.0]), np.array([1, 1, 2, 0]), [2])
    assert plain["count"] == 4 and plain["p50"] == 2.5 and plain["min"] == 1.0
    assert weighted["count"] == 4 and weighted["p50"] == 3.0 and weighted["max"] == 4.0
    assert weighted["mean"] == pytest.approx(11 / 4)


def test_summary_streamed_equals_in_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    t = make_requests(3000, osl=40, fail_frac=0.02, warmup=50, jitter=0.3, seed=4)
    dense = summarize(t, mode="concurrency", target_concurrency=8)
    monkeypatch.setattr(summary_mod, "DENSE_CHUNKS", 1000)  # 3000 x 40 chunks: streamed
    monkeypatch.setattr(summary_mod, "SLICE_ROWS", 701)
    streamed = summarize(t, mode="concurrency", target_concurrency=8)
    pq.write_table(t, tmp_path / "requests.parquet", row_group_size=900)
    lazy, chunks = read_for_summary(tmp_path / "requests.parquet", 1000)
    assert isinstance(lazy, ParquetColumns) and chunks is not None
    from_file = summarize(lazy, mode="concurrency", target_concurrency=8, chunks=chunks)
    for got in (streamed, from_file):
        for key, exp in dense["latency"].items():
            _same(got["latency"][key], exp)  # type: ignore[arg-type]
        for sec in ("counts", "errors", "tokens", "window", "throughput", "interactivity"):
            assert got[sec] == dense[sec], sec  # type: ignore[literal-required]
        a, b = got["steady_state"], dense["steady_state"]
        assert a is not None and b is not None
        assert a["output_tokens_per_s"] == pytest.approx(b["output_tokens_per_s"], rel=1e-12)
    whole, none = read_for_summary(tmp_path / "requests.parquet", 10**9)
    assert none is None and whole.num_rows == t.num_rows


@pytest.mark.parametrize("n", [3100, 4200])
def test_theil_sen_blocks_equal_dense(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    rng = np.random.default_rng(n)
    t = np.arange(n) * 5.0
    t[7] = t[8]  # a tie: that pair has no slope
    y = 1e8 + 40 * t + rng.normal(0, 3e5, n) + np.cumsum(rng.normal(0, 2e4, n))
    big = stats.sen_interval(t, y)
    monkeypatch.setattr(stats, "SEN_DENSE_MAX", 10**9)
    assert big == stats.sen_interval(t, y)


def test_hinge_break_normal_equations_equal_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 2600
    t = np.arange(n) * 5.0
    rng = np.random.default_rng(1)
    y = 5e8 + 3e7 * (1 - np.exp(-t / 900)) + rng.normal(0, 2e5, n)  # a warm-up, then flat
    max_k = n // 2
    large = stats._hinge_break(t, y, max_k)
    sse = stats._hinge_sse(t, y, max_k)
    monkeypatch.setattr(stats, "HINGE_DENSE_MAX", 10**9)
    assert large is not None and large == stats._hinge_break(t, y, max_k)
    x0 = t - t[0]
    for k in (3, 500, max_k - 1):  # each k's residuals against its own least-squares fit
        x = np.column_stack([np.ones(n), x0, np.maximum(0.0, t - t[k])])
        r = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
        assert sse[k - 3] == pytest.approx(float(r @ r), rel=1e-6)


@pytest.mark.parametrize("tokens", ["none", "some"])
def test_summary_streamed_without_chunk_tokens(
    monkeypatch: pytest.MonkeyPatch, tokens: str
) -> None:
    """Where the server did not say the tokens of every chunk, the weighted chunk-gap
    figures are those of every weight 1, streamed as in memory."""
    import pyarrow as pa

    t = make_requests(2000, osl=12, fail_frac=0.02, warmup=30, jitter=0.3, seed=9)
    i = t.schema.get_field_index("chunk_tokens")
    col = t.column("chunk_tokens").to_pylist()
    new = (
        [None] * len(col) if tokens == "none" else [x if k % 3 else None for k, x in enumerate(col)]
    )
    t = t.set_column(i, t.schema.field(i), pa.array(new, t.schema.field(i).type))
    dense = summarize(t, mode="concurrency", target_concurrency=8)
    assert dense["tokens"]["chunk_tokens_known"] is False
    monkeypatch.setattr(summary_mod, "DENSE_CHUNKS", 1000)
    monkeypatch.setattr(summary_mod, "SLICE_ROWS", 333)
    streamed = summarize(t, mode="concurrency", target_concurrency=8)
    assert streamed["tokens"]["chunk_tokens_known"] is False
    for key in ("chunk_gap_ms", "chunk_gap_ms_token_weighted"):
        _same(streamed["latency"][key], dense["latency"][key])  # type: ignore[arg-type]
    w = streamed["latency"]["chunk_gap_ms_token_weighted"]
    assert w["count"] == streamed["latency"]["chunk_gap_ms"]["count"]


@pytest.mark.parametrize("moved", [False, True])
def test_streamed_describe_one_pass_where_stable(moved: bool) -> None:
    """A stable sample needs one pass (the first values' percentiles chose the buckets to
    keep); one whose later values moved needs the second; both exact."""
    rng = np.random.default_rng(5)
    v = rng.lognormal(1.6, 0.2, 300_000)
    if moved:
        v[20_000:] += 3.0  # after the guess, everything shifted
    w = rng.integers(1, 4, v.size)
    sd = StreamedDescribe(guess_after=20_000)
    for p in np.array_split(np.arange(v.size), 30):
        sd.add(v[p], w[p])
    assert sd.complete() is (not moved)
    if not moved:  # the guessed buckets, not every value
        assert sum(x[0].size for x in sd.kept) < 0.2 * v.size
    plain, weighted = _streamed(v, w, list(range(10_000, v.size, 10_000)), 20_000)
    _same(plain, describe(v))
    _same(weighted, describe_weighted(v, w))


@pytest.mark.parametrize("guess_after", [1 << 20, 500])  # one pass (stable), or the guess early
def test_summary_streamed_is_the_same_on_any_thread_count(
    monkeypatch: pytest.MonkeyPatch, guess_after: int
) -> None:
    """The chunk pieces are prepared in threads (metrics.parallel) and committed in their
    order: the summary is the same, to the last bit, on one thread and on three."""
    import accelbench.metrics.parallel as parallel

    t = make_requests(2500, osl=30, fail_frac=0.03, warmup=40, jitter=0.4, seed=9)
    monkeypatch.setattr(summary_mod, "DENSE_CHUNKS", 1000)
    monkeypatch.setattr(summary_mod, "SLICE_ROWS", 333)
    real = stats.StreamedDescribe.__init__

    def init(self: StreamedDescribe, *a: object, **k: object) -> None:
        real(self, guess_after=guess_after)

    monkeypatch.setattr(stats.StreamedDescribe, "__init__", init)
    got = []
    for threads in (1, 3):
        monkeypatch.setattr(parallel, "cores", lambda threads=threads: threads)
        got.append(summarize(t, mode="concurrency", target_concurrency=8))
    assert got[0] == got[1]
    assert got[0]["latency"]["chunk_gap_ms"]["count"] > 0
