"""docs/CLAIMS.md: the published claims checked by the shipped model; the page is what
the code prints now, the verdict rule and the cost arithmetic hand-checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cli_inprocess import run_cli

from accelbench.metrics.verdict import Status
from accelbench.predict.claims import CLAIMS, OLD_RATES, _usd_per_m, check_claim, claims_page, judge
from accelbench.predict.point import Estimate

DOC = Path(__file__).resolve().parents[1] / "docs" / "CLAIMS.md"


def test_the_page_is_what_the_code_prints_now() -> None:
    assert DOC.read_text(encoding="utf-8") == claims_page(), (
        "docs/CLAIMS.md is stale: accelbench predict --claims --write-docs docs/CLAIMS.md"
    )


@pytest.mark.parametrize(
    ("low", "high", "threshold", "side", "status"),
    [
        (0.5, 0.9, 1.0, "below", Status.PASS),
        (1.0, 1.4, 1.0, "below", Status.FAIL),  # at the threshold is not below it
        (0.9, 1.1, 1.0, "below", Status.INCONCLUSIVE),
        (1.3, 2.0, 1.3, "above", Status.PASS),
        (0.3, 0.74, 1.3, "above", Status.FAIL),
        (1.0, 1.5, 1.3, "above", Status.INCONCLUSIVE),
    ],
)
def test_verdict_rule(low: float, high: float, threshold: float, side: str, status: Status) -> None:
    assert judge(low, high, threshold, side) is status


def test_cost_arithmetic_is_the_claims() -> None:
    """1.48 $/GPU-h / (1,369 tok/s x 3,600 / 1e6) = $0.300 per M tokens; 1.95 / (1,756 x
    0.0036) = $0.3085 (the claim's $0.31)."""
    f = _usd_per_m("mi355x", OLD_RATES)
    e = f.__call__  # a prediction's throughput interval -> the cost interval, ends swapped
    from dataclasses import dataclass

    @dataclass
    class P:
        throughput_per_gpu: Estimate

    got = e(P(Estimate(1369.0, 1000.0, 2000.0)))  # type: ignore[arg-type]
    assert got.value == pytest.approx(0.300, abs=5e-4)
    assert got.low == pytest.approx(1.48 / 2000 / 0.0036) and got.high == pytest.approx(
        1.48 / 1000 / 0.0036
    )
    b200 = _usd_per_m("b200", OLD_RATES)(P(Estimate(1756.0, 1756.0, 1756.0)))  # type: ignore[arg-type]
    assert b200.value == pytest.approx(0.30847, abs=1e-5)


def test_each_claim_states_statistic_interval_threshold() -> None:
    for c in CLAIMS:
        ch = check_claim(c)
        v = ch.verdict
        assert v.interval is not None and v.low is not None and v.high is not None
        assert v.low <= v.estimate <= v.high  # type: ignore[operator]
        assert v.status is judge(v.low, v.high, c.threshold, c.side)
        assert ch.pred_a.interactivity > 0 and ch.meas_a is not None and ch.meas_b is not None


def test_cli_claims_writes_the_page(tmp_path: Path) -> None:
    code, out, err, _ = run_cli(["predict", "--claims", "--write-docs", "claims.md"], tmp_path)
    assert code == 0, err
    assert (tmp_path / "claims.md").read_text(encoding="utf-8") == out == claims_page()
