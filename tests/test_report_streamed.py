"""The report's latency boxes and timeline, computed in two passes over a run's requests a
slice of rows at a time (so a 72-hour soak's 13 million requests are never held at once),
against the figures computed directly: numpy's percentiles over the measured requests,
in-flight counts by definition, and each request's tokens spread evenly by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import accelbench.report.data as data
from accelbench.report.data import BOX_QUANTILES, LATENCY_METRICS, TIMELINE_BINS
from accelbench.store.reader import column_np, load_run

sys.path.insert(0, str(Path(__file__).parent))
from synthetic_runs import make_requests, make_run  # noqa: E402


def _expected(t: pa.Table) -> tuple[dict[str, dict[str, float]], list[int], np.ndarray]:
    """Boxes, in-flight counts at the bins' middles and tokens/s per bin, from the whole
    table at once and by definition."""
    meas = ~column_np(t, "warmup", bool) & column_np(t, "ok", bool)
    boxes = {}
    for k in LATENCY_METRICS:
        v = column_np(t, k)[meas]
        v = v[np.isfinite(v)]
        if v.size:
            qs = np.percentile(v, BOX_QUANTILES)
            b = {f"p{q}": float(x) for q, x in zip(BOX_QUANTILES, qs, strict=True)}
            boxes[k] = b | {"mean": float(v.mean()), "count": int(v.size)}
    send, last = column_np(t, "t_send"), column_np(t, "t_last")
    end = np.where(np.isfinite(last), last, send)
    t0, t1 = float(np.nanmin(send)), float(np.nanmax(end))
    if t1 <= t0:  # no span: no timeline (_check)
        return boxes, [], np.empty(0)
    edges = np.linspace(t0, t1, TIMELINE_BINS + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    inflight = [int(((send <= m) & ~(end <= m)).sum()) for m in mids]  # sent, not ended
    # tokens delivered by time q: the first at t_first, the other n - 1 evenly to t_last
    first, osl = column_np(t, "t_first"), np.nan_to_num(column_np(t, "osl"))
    q = (edges - t0) / 1e9
    delivered = np.zeros(q.size)
    for a, b, n in zip((first - t0) / 1e9, (last - t0) / 1e9, osl, strict=True):
        if not (np.isfinite(a) and np.isfinite(b) and n >= 1):
            continue
        if b > a:
            delivered += (q >= a) * 1.0 + (n - 1) * np.clip((q - a) / (b - a), 0.0, 1.0)
        else:
            delivered += (q >= a) * n
    return boxes, inflight, np.diff(delivered) / ((edges[1] - edges[0]) / 1e9)


def _check(run_dir: Path, t: pa.Table) -> None:
    boxes, inflight, tokens = _expected(t)
    run = load_run(run_dir)
    got_boxes, tl, t0 = data._distributions(run, True)
    assert t0 == float(np.nanmin(column_np(t, "t_send")))
    assert got_boxes.keys() == boxes.keys()
    for k, exp in boxes.items():
        for name, x in exp.items():
            assert got_boxes[k][name] == pytest.approx(x, rel=1e-12, abs=1e-12), (k, name)
        for name in ("count", *(f"p{q}" for q in BOX_QUANTILES)):
            assert got_boxes[k][name] == exp[name], (k, name)  # order statistics: exact
    if not inflight:
        # no span to draw (one request that failed at its send, Hypothesis found): the
        # report shows no timeline rather than bins of zero width
        assert tl is None
        return
    assert tl is not None and tl.inflight == inflight
    if tl.source.startswith("tokens spread evenly"):  # shown to 0.01 tokens/s
        assert np.asarray(tl.tokens_per_s) == pytest.approx(tokens, rel=1e-9, abs=0.0051)


def _write(run_dir: Path, t: pa.Table, row_group: int) -> None:
    pq.write_table(t, run_dir / "requests.parquet", row_group_size=row_group)


def test_report_distributions_by_hand(tmp_path: Path) -> None:
    # 3 requests of 2 tokens: sent at 0, 1 and 2 s, first token 1 s later, the last 1 s
    # after that; the second is a warm-up, so the boxes hold the first and the third
    t = make_requests(3, osl=2, jitter=0.0, concurrency=3, chunks=False)
    s = np.array([0, 1, 2], dtype=np.int64) * 10**9 + 10**15
    t = t.set_column(t.schema.get_field_index("t_send"), "t_send", pa.array(s))
    t = t.set_column(t.schema.get_field_index("t_first"), "t_first", pa.array(s + 10**9))
    t = t.set_column(t.schema.get_field_index("t_last"), "t_last", pa.array(s + 2 * 10**9))
    t = t.set_column(t.schema.get_field_index("warmup"), "warmup", pa.array([False, True, False]))
    t = t.set_column(
        t.schema.get_field_index("ttft_ms"), "ttft_ms", pa.array([1000.0, 7.0, 3000.0])
    )
    run_dir = make_run(tmp_path / "r", 3, files=("run.json",))
    _write(run_dir, t, 2)
    boxes, tl, _ = data._distributions(load_run(run_dir), True)
    assert boxes["ttft_ms"]["p50"] == 2000.0 and boxes["ttft_ms"]["count"] == 2
    assert boxes["ttft_ms"]["p1"] == pytest.approx(1020.0) and boxes["ttft_ms"]["mean"] == 2000.0
    assert tl is not None and len(tl.inflight) == TIMELINE_BINS
    # the run spans 0-4 s: 1 request in flight in the first and the last second, 2 between
    assert tl.inflight[0] == 1 and tl.inflight[-1] == 1 and max(tl.inflight) == 2
    assert tl.inflight[TIMELINE_BINS // 2 - 1] == 2 and tl.source.startswith("tokens spread")
    # 6 tokens in all, 2 a second while two requests deliver (1 to 3 s)
    width_s = tl.t_s[1] - tl.t_s[0]
    assert sum(tl.tokens_per_s) * width_s == pytest.approx(6.0, rel=1e-3)
    _check(run_dir, t)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(1, 80),
    osl=st.integers(1, 4),
    fail=st.sampled_from([0.0, 0.2]),
    warmup=st.integers(0, 5),
    nan_ttft=st.integers(0, 3),
    row_group=st.integers(1, 50),
    slice_rows=st.integers(1, 40),
    seed=st.integers(0, 1000),
)
@example(n=1, osl=1, fail=0.2, warmup=0, nan_ttft=0, row_group=1, slice_rows=1, seed=0)
def test_report_distributions_over_slices_equal_direct(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    osl: int,
    fail: float,
    warmup: int,
    nan_ttft: int,
    row_group: int,
    slice_rows: int,
    seed: int,
) -> None:
    t = make_requests(n, osl=osl, fail_frac=fail, warmup=warmup, jitter=0.5, seed=seed,
                      concurrency=4)  # fmt: skip
    if nan_ttft:  # requests that say no TTFT
        ttft = column_np(t, "ttft_ms").copy()
        ttft[:: max(1, t.num_rows // nan_ttft)] = np.nan
        t = t.set_column(t.schema.get_field_index("ttft_ms"), "ttft_ms", pa.array(ttft))
    run_dir = make_run(tmp_path_factory.mktemp("run"), n, files=("run.json",))
    _write(run_dir, t, row_group)
    monkeypatch.setattr(data, "SLICE_ROWS", slice_rows)
    monkeypatch.setattr(data, "EXACT_TIMELINE_MAX_REQUESTS", 0)  # the streamed token path
    _check(run_dir, t)


def test_report_reads_a_big_run_a_slice_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No read of the whole table: every read of requests.parquet is one slice."""
    t = make_requests(5000, osl=3, fail_frac=0.01, warmup=20, seed=3)
    run_dir = make_run(tmp_path / "r", 5000, files=("run.json",))
    _write(run_dir, t, 1024)
    run = load_run(run_dir)
    monkeypatch.setattr(data, "SLICE_ROWS", 700)
    monkeypatch.setattr(data, "EXACT_TIMELINE_MAX_REQUESTS", 0)
    seen: list[int] = []
    real = run.iter_requests

    def spy(columns, rows=1 << 16):  # type: ignore[no-untyped-def]
        for piece in real(columns, rows):
            seen.append(piece.num_rows)
            yield piece

    monkeypatch.setattr(run, "iter_requests", spy)
    monkeypatch.setattr(run, "read_requests", lambda *a, **k: pytest.fail("whole-table read"))
    data._distributions(run, True)
    assert max(seen) <= 700 and sum(seen) == 2 * t.num_rows
    _check(run_dir, t)
