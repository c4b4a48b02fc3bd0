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
