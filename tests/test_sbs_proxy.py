"""Goal (a) of side_by_side.py's section 2 (benchmarks/sbs_proxy.py), round by round:
hand-checked numbers, including no difference (no alarm either way) and rounds that
disagree (no verdict)."""

from __future__ import annotations

import pytest

from benchmark_modules import import_benchmark

P = import_benchmark("sbs_proxy")


def test_rounds_that_disagree_give_no_verdict() -> None:
    # 2026-12-05 07:47, 64 streams: p99 TTFT per round through accelbench and nginx (ms)
    verdict, diffs = P.goal_a_verdict([30.86, 27.05, 30.03], [31.18, 28.53, 27.41])
    assert diffs == pytest.approx([-0.32, -1.48, 2.62])
    assert verdict == "not shown either way: no worse in 2 of 3 rounds"


@pytest.mark.parametrize(
    ("acc", "ngx", "want"),
    [
        ([20.0, 21.0, 22.0], [20.0, 21.0, 22.0], "met in every round (3 of 3)"),  # no difference
        ([19.0, 20.5, 21.0], [20.0, 21.0, 22.0], "met in every round (3 of 3)"),
        ([25.0, 26.0, 27.0], [20.0, 21.0, 22.0], "NOT met in any round (0 of 3)"),
        ([25.0, None, 19.0], [20.0, 21.0, None], "NOT met in any round (0 of 1)"),  # pairs only
        ([None], [20.0], "no round with both"),
    ],
)
def test_goal_a_round_by_round(acc: list, ngx: list, want: str) -> None:
    assert P.goal_a_verdict(acc, ngx)[0] == want


def test_pin_sets_give_the_hop_the_last_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert P.pin_sets(False) == (None, None)
    monkeypatch.setattr(P.os, "sched_getaffinity", lambda pid: {0, 3, 5})
    assert P.pin_sets(True) == ({0, 3}, {5})
    monkeypatch.setattr(P.os, "sched_getaffinity", lambda pid: {2})
    with pytest.raises(SystemExit, match="at least 2 CPUs"):
        P.pin_sets(True)


def test_hop_cpu_ratio_per_case() -> None:
    """The hop's CPU per request, accelbench over nginx per round, in the goals line
    (hand-checked: 900/500, 960/480, 1000/520 -> 1.80, 2.00, 1.92; median 1.92)."""
    names = P.contenders_order(0)
    per = {k: {f: [None] * 3 for f in P.FIGURES} | {"status": ["ok"] * 3} for k in names}
    for k in names:
        per[k]["ttft_p99_ms"] = [30.0, 31.0, 32.0]
    per["accelbench (a)"]["hop_cpu_us"] = [900.0, 960.0, 1000.0]
    per["nginx (a)"]["hop_cpu_us"] = [500.0, 480.0, 520.0]
    text, raw = P.table(64, 320, per, {}, 1.5)
    assert "hop CPU per request accelbench / nginx (a) 1.92 (1.80-2.00)" in text
    assert "(b) refused: 0 rounds with both figures" in text  # no figures: no ratio
    assert raw["ratios"]["accelbench (a) / nginx (a) hop CPU"]["ratios"] == pytest.approx(
        [1.8, 2.0, 1000 / 520]
    )
    assert "| 960 (900-1000) |" in text
