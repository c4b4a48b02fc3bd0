"""Metric arithmetic against hand-computed cases (docs/METRICS.md)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.metrics.completion import complete_row, first_of_each
from accelbench.metrics.records import MAX_STAMP_AGE_NS, RequestRecord, records_to_table
from accelbench.metrics.summary import summarize

MS = 1_000_000


def _rec(idx, send_ms, first_ms, chunk_ms, osl, isl=100, warm=False, ok=True, kind=None):
    r = RequestRecord(idx=idx, warmup=warm, t_sched=send_ms * MS, t_send=send_ms * MS)
    if ok:
        r.t_first = first_ms * MS
        r.chunk_times = [int(c * MS) for c in chunk_ms]
        r.t_last = r.chunk_times[-1]
        r.t_done = r.t_last + 1 * MS
        r.osl_server = osl
        r.isl = isl
        r.isl_source = "server_usage"
        r.ok = True
    else:
        r.error_kind = kind
        r.t_done = (send_ms + 5) * MS
    return complete_row(r.to_row(), None, False)


def test_per_request_formulas():
    row = _rec(0, 0, 100, [100, 110, 130, 160], osl=4)
    assert row["ttft_ms"] == 100
    assert row["e2e_ms"] == 160
    assert row["tpot_ms"] == pytest.approx(20.0)  # (160-100)/(4-1)
    assert row["ntpot_ms"] == 40.0  # 160/4
    assert row["tail_ms"] == 1.0
    assert row["osl_source"] == "server_usage" and row["osl_mismatch"] == 0


def test_osl_one_has_no_tpot_and_chunk_fallback():
    r = RequestRecord(idx=0, t_send=0, t_first=5 * MS, t_last=5 * MS, chunk_times=[5 * MS], ok=True)
    row = complete_row(r.to_row(), None, False)
    assert row["osl"] == 1 and row["osl_source"] == "chunk_count" and row["tpot_ms"] is None


def test_run_summary_hand_checked():
    rows = [
        _rec(0, 0, 10, [10, 20], osl=2, warm=True),  # warm-up: excluded
        _rec(1, 100, 150, [150, 160, 170], osl=3),  # ttft 50, e2e 70, tpot 10
        _rec(2, 100, 200, [200, 230], osl=2),  # ttft 100, e2e 130, tpot 30
        _rec(3, 110, 0, [], osl=0, ok=False, kind="http_5xx"),
    ]
    s = summarize(records_to_table(rows), gpus=2, slo={"ttft_ms": 60}, target_concurrency=3)
    assert s["counts"] == {
        "planned": None,
        "completed": 2,
        "failed": 1,
        "warmup": 1,
        "interrupted": 0,
    }
    # window: first send 100 ms -> last t_last 230 ms = 0.13 s
    assert s["window"]["duration_s"] == pytest.approx(0.13)
    assert s["throughput"]["requests_per_s"] == pytest.approx(2 / 0.13)
    assert s["throughput"]["output_tokens_per_s"] == pytest.approx(5 / 0.13)
    assert s["throughput"]["total_tokens_per_s_per_gpu"] == pytest.approx(205 / 0.13 / 2)
    assert s["latency"]["ttft_ms"]["p50"] == pytest.approx(75)
    assert s["latency"]["tpot_ms"]["mean"] == pytest.approx(20)
    # token-weighted TPOT: weights OSL-1 = 2 and 1 -> (10*2 + 30*1)/3
    assert s["latency"]["tpot_ms_token_weighted"]["mean"] == pytest.approx(50 / 3)
    # chunk gaps pooled: 10, 10 (req 1), 30 (req 2)
    assert s["latency"]["chunk_gap_ms"]["count"] == 3
    assert s["latency"]["chunk_gap_ms"]["mean"] == pytest.approx(50 / 3)
    assert s["interactivity"]["tok_s_user"] == pytest.approx(1000 / 20)
    assert s["errors"] == {
        "count": 1,
        "rate": pytest.approx(1 / 3),
        "by_kind": {"http_5xx": 1},
        "by_status": {},
    }
    assert s["goodput"]["requests"] == 1 and s["goodput"]["output_tokens_per_s"] == pytest.approx(
        3 / 0.13
    )
    assert s["latency"]["ttft_ms_adjusted"]["p99"] == "inf"


def test_interrupted_requests_are_counted_apart():
    rows = [_rec(0, 0, 10, [10, 20], osl=2), _rec(1, 0, 0, [], osl=0, ok=False, kind="interrupted")]
    s = summarize(records_to_table(rows))
    assert s["counts"]["interrupted"] == 1 and s["errors"]["count"] == 0


def test_steady_state_concurrency():
    # two requests overlap from 50 to 100 ms: target 2 -> 90% threshold 1.8
    rows = [_rec(0, 0, 10, [10, 100], osl=2), _rec(1, 50, 60, [60, 150], osl=2)]
    s = summarize(records_to_table(rows), target_concurrency=2)
    st = s["steady_state"]
    assert st["start_ns"] == 50 * MS and st["end_ns"] == 101 * MS  # until t_done of req 0


def _closed_loop_rows(slots: list[list[tuple[int, int]]], gap_ns: int = 5_000) -> list[dict]:
    """A closed loop as the runner runs it: each slot sends its next request ``gap_ns``
    after its previous one's end (t_done); a request is (TTFT ms, chunks), 10 ms apart."""
    rows, idx = [], 0
    for slot in slots:
        t = 0
        for ttft_ms, chunks in slot:
            r = RequestRecord(idx=idx, t_sched=t, t_send=t)
            r.chunk_times = [t + (ttft_ms + 10 * k) * MS for k in range(chunks)]
            r.t_first, r.t_last = r.chunk_times[0], r.chunk_times[-1]
            r.t_done, r.ok, r.osl_server, r.isl = r.t_last + 1000, True, chunks, 8
            r.isl_source = "server_usage"
            rows.append(complete_row(r.to_row(), None, False))
            t, idx = r.t_done + gap_ns, idx + 1
    return rows


def test_steady_state_closed_loop_is_not_cut_by_the_resend():
    """4 slots, 10 requests each, sent back to back: the loop held 4 in flight from the
    first sends to the first slot's last end. The re-issue moment (t_done to the next
    send, microseconds) used to count as a dip below 90% of 4, so the steady state was one
    request long (0.24 s of a 2.4 s run in a real reference-server run)."""
    rows = _closed_loop_rows([[(50, 20)] * 10 for _ in range(4)])
    s = summarize(records_to_table(rows), target_concurrency=4)
    st = s["steady_state"]
    slot_end = min(r["t_done"] for r in rows[9::10])  # each slot's last request
    assert st["start_ns"] == 0 and st["end_ns"] == min(slot_end, s["window"]["end_ns"])
    assert st["duration_s"] > 0.9 * s["window"]["duration_s"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(1, 200), st.integers(1, 30)), min_size=2, max_size=8),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 500_000),
)
def test_steady_state_closed_loop_spans_the_busy_slots(slots, gap_ns):
    """Any closed loop: the steady state covers every moment all slots were busy (from the
    last slot's first send to the first slot's last end), and lies within the window."""
    rows = _closed_loop_rows(slots, gap_ns)
    s = summarize(records_to_table(rows), target_concurrency=len(slots))
    first = [i for i, r in enumerate(rows) if r["t_send"] == 0]
    lasts = [i - 1 for i in first[1:]] + [len(rows) - 1]
    busy_from = max(rows[i]["t_send"] for i in first)
    busy_to = min(min(rows[i]["t_done"] for i in lasts), s["window"]["end_ns"])
    st_ = s["steady_state"]
    assert st_ is not None
    assert st_["start_ns"] <= busy_from and st_["end_ns"] >= busy_to
    assert s["window"]["start_ns"] <= st_["start_ns"] < st_["end_ns"] <= s["window"]["end_ns"]


def test_steady_state_rate_span_ends_at_the_last_send():
    """120 sends at 45/s asked at 40/s: 12.5 % over, no span within 5 %. Bins of 1 s from
    the first send used to count the last bin (0.64 s of sends) as a full second: 120 over
    3 s = 40/s, 'within 5 %', a span ending 0.36 s after the last send and past the window."""
    rows = [_rec(i, i * 1000 / 45, i * 1000 / 45 + 50, [i * 1000 / 45 + 50 + k for k in (0, 10)], osl=2)
            for i in range(120)]  # fmt: skip
    s = summarize(records_to_table(rows), mode="rate", requested_rate=40.0)
    assert s["steady_state"] is None
    s = summarize(records_to_table(rows), mode="rate", requested_rate=45.0)
    st_ = s["steady_state"]
    assert st_ is not None and st_["end_ns"] <= max(r["t_send"] for r in rows)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 300),
    st.floats(0.5, 200),
    st.lists(st.floats(0.8, 1.2), min_size=1, max_size=300),
)
def test_steady_state_rate_span_within_the_sends(n, rate, jitter):
    """Any open loop near its rate: the steady span lies within [first send, last send]
    and the window."""
    gaps = [1000 / rate * jitter[i % len(jitter)] for i in range(n)]
    sends_ms = [int(sum(gaps[:i])) for i in range(n)]
    rows = [_rec(i, t, t + 5, [t + 5, t + 7], osl=2) for i, t in enumerate(sends_ms)]
    s = summarize(records_to_table(rows), mode="rate", requested_rate=rate)
    st_ = s["steady_state"]
    if st_ is not None:
        assert min(sends_ms) * MS <= st_["start_ns"] < st_["end_ns"] <= max(sends_ms) * MS
        assert st_["end_ns"] <= s["window"]["end_ns"]


def test_metric_registry_is_the_one_source():
    """compare, report, the store and docs/METRICS.md's alias table read one registry."""
    from pathlib import Path

    from accelbench.metrics import registry
    from accelbench.metrics.compare import METRICS
    from accelbench.metrics.frontier import FRONTIER_METRICS
    from accelbench.report.data import FIGURES as REPORT_FIGURES
    from accelbench.store.query import RUN_FIELDS

    assert all(METRICS[k] is registry.FIGURES[k] for k in METRICS)
    assert all(REPORT_FIGURES[k] is registry.FIGURES[k] for k in REPORT_FIGURES)
    assert set(FRONTIER_METRICS) == set(registry.FRONTIER)
    assert set(registry.FIGURES) <= {name for name, _ in RUN_FIELDS}
    for a in registry.TOOL_ALIASES:
        assert a.ours is None or a.ours in registry.QUANTITIES, a
    doc = (Path(__file__).resolve().parent.parent / "docs" / "METRICS.md").read_text()
    assert registry.alias_table_markdown() in doc
    # a figure reads its summary path; junk reads as unknown
    f = registry.figure("ttft")
    assert f.name == "ttft_p50_ms" and not f.higher_is_better
    assert f.value({"latency": {"ttft_ms": {"p50": 12.5}}}) == 12.5
    for junk in ({"latency": {"ttft_ms": {"p50": "12"}}}, {"latency": [1]}, None,
                 {"latency": {"ttft_ms": {"p50": float("nan")}}}):  # fmt: skip
        assert f.value(junk) is None


# ----------------------------------------------------------------- a record's impossible times
_MARKS = ("t_sched", "t_send", "t_headers", "t_first", "t_last", "t_done")
_times = st.integers(-(10**13), 10**13)


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({m: _times if m in ("t_sched", "t_send") else st.none() | _times
                              for m in _MARKS}),
       st.lists(_times, max_size=4))  # fmt: skip
def test_a_record_with_times_out_of_order_is_of_the_wrong_shape(marks, chunks):
    """Any order of a record's times (audit: TTFT min -1,000,000 ms and negative schedule
    lags were summarised with exit 0): complete_row refuses the record (ValueError: the
    journal readers count it as of the wrong shape), or its times are possible: none below
    0, none of the timeline earlier than an earlier mark by more than a wall-clock step can
    move a kernel stamp (MAX_STAMP_AGE_NS). Records in order are always kept."""
    chunks = sorted(chunks)
    row = RequestRecord(idx=0, chunk_times=chunks, ok=True, **marks).to_row()
    present = [marks[m] for m in _MARKS if marks[m] is not None]
    in_order = present == sorted(present) and present[0] >= 0 and marks["t_send"] >= 0
    in_order = in_order and all(c >= marks["t_send"] for c in chunks)
    try:
        done = complete_row(row, None, False)
    except ValueError:
        assert not in_order
        return
    slack_ms = MAX_STAMP_AGE_NS / MS
    assert done["t_send"] >= 0 and done["t_sched"] >= 0
    for name in ("schedule_lag_ms", "ttft_ms", "e2e_ms", "tail_ms", "tpot_ms"):
        assert done[name] is None or done[name] >= -slack_ms, name
    for c in chunks[:1] + chunks[-1:]:
        assert c >= marks["t_send"] - MAX_STAMP_AGE_NS


def test_audit_example_negative_ttft_is_refused():
    r = RequestRecord(idx=0, t_sched=5 * 10**12, t_send=5 * 10**12, ok=True, osl_server=1)
    r.t_first = r.t_last = r.t_done = r.t_send - 10**12
    r.chunk_times = [r.t_first]
    with pytest.raises(ValueError, match="t_first is before t_send"):
        complete_row(r.to_row(), None, False)
    with pytest.raises(ValueError, match="below 0"):
        complete_row(RequestRecord(idx=1, t_send=-5).to_row(), None, False)
    with pytest.raises(ValueError, match="idx must be a whole number"):
        complete_row({**RequestRecord(idx=0).to_row(), "idx": None}, None, False)


@given(st.lists(st.integers(-3, 12), max_size=40))
def test_first_of_each_keeps_each_idx_once_in_journal_order(idx):
    keep, repeated, sample = first_of_each(np.array(idx, dtype=np.int64))
    first = list(dict.fromkeys(idx))
    kept = idx if keep is None else [i for i, k in zip(idx, keep, strict=True) if k]
    assert kept == first and repeated == len(idx) - len(first)
    assert (keep is None) == (repeated == 0) and set(sample) <= set(idx)


_TIMES = ("t_sched", "t_send", "t_headers", "t_first", "t_last", "t_done")


def _shifted(row: dict, origin: int) -> dict:
    out = dict(row)
    for k in _TIMES:
        if out.get(k):
            out[k] = out[k] + origin
    if out.get("chunk_times"):
        out["chunk_times"] = [c + origin for c in out["chunk_times"]]
    return out


@settings(max_examples=60, deadline=None)
@given(origin=st.one_of(st.integers(0, 2**62), st.sampled_from([2**53 + 1, 200 * 86400 * 10**9])))
def test_summary_figures_do_not_depend_on_the_clocks_origin(origin):
    """Property: the timestamps are time.monotonic_ns(), whose origin is the host's boot;
    the figures are the same wherever it lies. Before, a host up more than 104 days
    (stamps past 2^53 ns) failed every summary: ArrowInvalid "Integer value ... not in
    range", an internal error from summarize, and its runs had no figures."""
    rows = [
        _rec(1, 100, 150, [150, 160, 170], osl=3),
        _rec(2, 100, 200, [200, 230], osl=2),
        _rec(3, 110, 0, [], osl=0, ok=False, kind="http_5xx"),
    ]
    base = summarize(records_to_table(rows), gpus=2, target_concurrency=3)
    s = summarize(records_to_table([_shifted(r, origin) for r in rows]), gpus=2,
                  target_concurrency=3)  # fmt: skip
    for path in (("window", "duration_s"), ("throughput", "output_tokens_per_s"),
                 ("latency", "ttft_ms", "p50"), ("latency", "tpot_ms", "mean"),
                 ("latency", "chunk_gap_ms", "mean"), ("interactivity", "tok_s_user")):  # fmt: skip
        a, b = base, s
        for k in path:
            a, b = a[k], b[k]
        assert b == pytest.approx(a, rel=1e-4), (path, a, b)
