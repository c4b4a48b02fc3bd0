"""The arithmetic of side_by_side.py's section 4 (benchmarks/sbs_timing.py): token errors
against the server's ground truth, vLLM's stamps rebuilt from its saved result, the
warning check and the table's goal cell. No vLLM, no server: hand-checked numbers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmark_modules import import_benchmark

T = import_benchmark("sbs_timing")
Row = import_benchmark("sbs_common").Row


def test_token_errors_hand_checked() -> None:
    # request 1: first token 0.5 ms late, then gaps 10.0 / 10.2 ms against 10 / 10 ms
    # request 2: first token 2 ms late, gap 9 ms against 10 ms
    # request 3: 2 stamps for 3 written tokens: left out, counted
    truth = [[0, 10_000_000, 20_000_000], [100_000_000, 110_000_000], [0, 1, 2]]
    arr = [[500_000, 10_500_000, 20_700_000], [102_000_000, 111_000_000], [0, 1]]
    e = T.token_errors(arr, truth)
    assert e["requests"] == 2 and e["mismatched"] == 1
    # |TTFT errors| 0.5 and 2.0 ms: p50 1.25, max 2.0, p99 = 0.5 + 0.99 * 1.5
    assert e["ttft_abs_err_ms"]["p50"] == pytest.approx(1.25)
    assert e["ttft_abs_err_ms"]["p99"] == pytest.approx(1.985)
    assert e["ttft_abs_err_ms"]["max"] == pytest.approx(2.0)
    # |gap errors| 0.0, 0.2, 1.0 ms (sorted): p50 0.2, max 1.0
    assert e["gap_abs_err_ms"]["p50"] == pytest.approx(0.2)
    assert e["gap_abs_err_ms"]["max"] == pytest.approx(1.0)
    assert e["true_gap_ms_p50"] == pytest.approx(10.0)


@given(
    st.lists(st.integers(0, 10**7), min_size=1, max_size=20),
    st.integers(-(10**6), 10**6),
)
def test_a_constant_delay_is_a_ttft_error_and_no_gap_error(gaps: list[int], d: int) -> None:
    t, truth = 10**12, []
    for g in gaps:
        t += g
        truth.append(t)
    e = T.token_errors([[x + d for x in truth]], [truth])
    assert e["ttft_abs_err_ms"]["p99"] == pytest.approx(abs(d) / 1e6)
    if len(truth) > 1:
        assert e["gap_abs_err_ms"]["max"] == pytest.approx(0.0, abs=1e-6)


def test_vllm_arrivals_are_its_perf_counter_readings() -> None:
    # start 100 s, ttft 50 ms, itls 10 and 20 ms -> 100.05, 100.06, 100.08 s
    got = T.vllm_arrivals_ns(100.0, 0.05, [0.01, 0.02])
    assert got == pytest.approx([100.05e9, 100.06e9, 100.08e9], abs=1.0)


def test_out_of_order() -> None:
    # sent, received by the server, first token at the tool (ns); 1 ms of slack
    sent = [0, 0, 5_000_000, 0]
    recv = [1_000, 1_000, 1_000, 10_000_000]
    first = [9_000_000, 9_000_000, 9_000_000, 5_000_000]
    # the 3rd was received 5 ms before it was sent, the 4th answered before received
    assert T.out_of_order(sent, recv, first) == 2
    assert T.out_of_order([900_000], [1_000], [9_000_000]) == 0  # 0.9 ms: within the slack


def test_warning_check() -> None:
    lag = ["load worker 0 event loop lagged (p99 12.0 ms; it was busy): ..."]
    other = ["achieved 9.00 req/s of the requested 10 req/s"]
    assert T.warning_check(25.0, 20.0, lag) == "needed, fired"
    assert T.warning_check(25.0, 20.0, other) == "needed, MISSED"
    assert T.warning_check(5.0, 20.0, lag) == "not needed, fired"
    assert T.warning_check(5.0, 20.0, []) == "not needed, silent"
    assert T.warning_check(None, 20.0, lag) == "no figure"


def _rows(figs: dict[str, tuple[list[float | None], list[float | None]]]) -> dict:
    out = {}
    for k in T.CONTENDERS:
        tt, gg = figs.get(k, ([None] * 3, [None] * 3))
        out[k] = {"ttft": Row(k, list(tt), ["ok"] * 3), "gap": Row(k, list(gg), ["ok"] * 3)}
    return out


def test_table_goal_and_refusal() -> None:
    rows = _rows({
        "a256": ([0.03, 0.04, 0.04], [0.02, 0.02, 0.03]),
        "v256": ([30.0, 33.0, 35.0], [20.0, 22.0, 25.0]),
        # a second accelbench row whose rounds disagree (0.1 to 40 ms) and overlap vLLM's: refused
        "a1000": ([0.1, 40.0, 20.0], [30.0, 31.0, 32.0]),
    })  # fmt: skip
    checks = {"a256": ["not needed, silent"] * 3, "a1000": ["needed, fired", "needed, MISSED"]}
    text, raw = T._table("t", rows, checks, 1.5)
    lines = {ln.split(" | ")[0].lstrip("| "): ln for ln in text.splitlines() if ln.startswith("|")}
    a256 = lines["accelbench, 256 streams"]
    # per-round TTFT ratios 0.03/30, 0.04/33, 0.04/35 = 0.001, 0.00121, 0.00114; gap ratios
    # 0.02/20, 0.02/22, 0.03/25 = 0.001, 0.00091, 0.0012 (2 significant digits)
    assert "| 0.0011 (0.001-0.0012) | 0.001 (0.00091-0.0012) |" in a256
    assert "yes (worst round: TTFT 0.0012, gap 0.0012)" in a256
    assert "| ok: not needed, silent" in a256
    a1000 = lines["accelbench, 1,000 streams, --workers 2"]
    # per-round TTFT ratios 0.1/30, 40/33, 20/35: 364x apart, and the rounds overlap
    assert "refused: per-round ratios disagree (max/min 363.64 > 1.5) and the rounds " in a1000
    assert "overlap (a1000 0.1-40, v256 30-35)" in a1000
    # TTFT 40/33 = 1.21; gap 30/20 = 1.5
    assert "NO (worst round: TTFT 1.2, gap 1.5)" in a1000
    assert "MISSED 1: needed, fired, needed, MISSED" in a1000
    ray = lines["accelbench, 1,000 streams, --ray local --workers 2"]
    assert "no: fewer than 3 rounds" in ray and "0/3" in ray
    assert raw[1]["goal"] == "-"  # vLLM's own row


def test_sizes_fit_the_streams() -> None:
    # every stream busy: at least one full wave per run (--quick), two at the default size
    for quick, waves in ((True, 1), (False, 2)):
        n = T.sizes(quick)
        assert all(n[k] >= waves * T.CONTENDERS[k][1] for k in T.CONTENDERS)


def test_ratio_rule_hand_checked() -> None:
    """sbs_common.ratio_cell: printed when the per-round ratios agree or the rounds do not
    overlap; refused when neither (the difference is within the rounds' spread)."""
    from sbs_common import ratio_cell

    def row(name: str, *f: float | None) -> Row:
        return Row(name, list(f), ["ok"] * len(f))

    # absolute figures move 3x between rounds, the ratio stays 0.1: printed
    text, info = ratio_cell(row("a", 1.0, 3.0, 2.0), row("b", 10.0, 30.0, 20.0), 1.5)
    assert text == "0.10 (0.10-0.10)" and "agree" in info["basis"]
    # ratios 0.16 / 0.16 / 0.23 (max/min 1.44): printed
    text, _ = ratio_cell(row("a", 0.53, 0.34, 1.20), row("b", 3.24, 2.17, 5.25), 1.5)
    assert text == "0.16 (0.16-0.23)"
    # ratios 0.1 / 0.5 / 0.2 (5x apart) but every round of a below every round of b: printed
    text, info = ratio_cell(row("a", 1.0, 4.0, 2.0), row("b", 10.0, 8.0, 10.0), 1.5)
    assert text == "0.20 (0.10-0.50)" and info["basis"] == "the rounds do not overlap"
    # overlapping rounds, ratios 0.5 / 2 / 1: refused, saying both
    text, info = ratio_cell(row("a", 1.0, 4.0, 2.0), row("b", 2.0, 2.0, 2.0), 1.5)
    assert text.startswith("refused: per-round ratios disagree (max/min 4.00 > 1.5)")
    assert "rounds overlap (a 1.00-4.00, b 2.00-2.00)" in text
    # fewer than 3 rounds with both figures: refused
    text, _ = ratio_cell(row("a", 1.0, None, 2.0), row("b", 10.0, 10.0, 10.0), 1.5)
    assert text == "refused: 2 rounds with both figures (< 3)"
