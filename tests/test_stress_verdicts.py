"""The stress statistics against known truths (synthetic series with fixed seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.metrics.stats import robust_trend, warmup_end
from accelbench.metrics.verdict import Status
from accelbench.suites.stress.verdicts import (
    HOUR,
    DriftThresholds,
    LeakThresholds,
    change_pct,
    compare_tokens,
    drift_verdict,
    jitter_pct,
    judge,
    judge_claim,
    leak_verdict,
    leak_verdicts,
)

GIB = 2**30
T = np.arange(0.0, 600.0, 5.0)  # a 10-minute soak sampled every 5 s


def memory(seed: int, leak_b_per_s: float = 0.0) -> np.ndarray:
    """2 GiB base, a 300 MB pool filling linearly over the first minute, 2 MB noise."""
    rng = np.random.default_rng(seed)
    return 2 * GIB + 300e6 * np.minimum(T / 60, 1) + leak_b_per_s * T + rng.normal(0, 2e6, T.size)


def test_judge_rules_hand_checked():
    assert judge(50, 40, 60, warn=10, fail=30)[0] == "fail"
    assert judge(50, 20, 60, warn=10, fail=30)[0] == "warn"
    # the estimate above the fail threshold, the interval not wholly: no pass
    assert judge(50, 5, 60, warn=10, fail=30)[0] == "inconclusive"
    assert judge(20, 5, 60, warn=10, fail=30)[0] == "pass"  # no evidence beyond it
    assert judge(0, 0, 0.109, warn=0, fail=0.05)[0] == "pass"  # 0 of 32 differ
    assert judge(12, -1, 15, warn=10, fail=None)[0] == "inconclusive"
    assert judge(8, -1, 12, warn=None, fail=None)[0] == "pass"  # nothing to hold it to
    assert judge_claim(1.0, 2.5, 3.0)[0] == "pass"
    assert judge_claim(3.5, 4.0, 3.0)[0] == "fail"
    assert judge_claim(2.0, 4.0, 3.0)[0] == "warn"


def test_injected_leak_estimated_within_10_percent_and_fails():
    rate = 1e9 / HOUR  # 1 GB/h
    for seed in range(5):
        v = leak_verdict("m", T, memory(seed, rate), 80 * GIB)
        assert v.word == "fail"
        assert v.estimate == pytest.approx(1e9, rel=0.10)
        assert v.low < 1e9 < v.high
        # the pool filling in the first minute is cut off, not read as a leak
        assert 50 <= v.evidence["warmup_end_s"] <= 80
        tte = v.evidence["time_to_exhaustion_h"]
        assert tte == pytest.approx((80 * GIB - v.evidence["last_bytes"]) / v.estimate)


def test_no_leak_no_false_alarm_in_20_seeded_soaks():
    verdicts = [leak_verdict("m", T, memory(seed), 80 * GIB) for seed in range(20)]
    assert [v.word for v in verdicts] == ["pass"] * 20
    # the interval covers zero in (nearly) every repetition: no bias from the warm-up
    assert sum(v.low <= 0 <= v.high for v in verdicts) >= 18


def test_warmup_without_cut_would_read_as_a_leak():
    # the same series judged from t=0 (no change point) shows the pool as a leak; the
    # misfit's residuals are strongly correlated, which the AR(1) interval allows for
    tr = robust_trend(T, memory(0), skip_warmup=False)
    assert tr is not None and tr.slope * HOUR > 4 * 2**20  # above the warn threshold
    assert tr.ar1_rho > 0.5 and tr.ci_low < tr.slope < tr.ci_high
    assert warmup_end(T, memory(0)) == pytest.approx(60, abs=15)


def test_leak_running_out_within_horizon_fails_even_below_rate_threshold():
    t = np.arange(0.0, 3600.0, 30.0)
    y = 79.99 * GIB + (20 * 2**20 / HOUR) * t  # 20 MiB/h, 10 MiB left
    v = leak_verdict("m", t, y, 80 * GIB, LeakThresholds(fail_bytes_per_h=1e12))
    assert v.word == "fail" and v.evidence["time_to_exhaustion_h"] < 1


def test_small_total_growth_is_not_a_leak():
    t = np.arange(0.0, 60.0, 1.0)
    y = 2e8 + 100e3 * t / 60  # 100 kB in 60 s: 6 MB/h, but only 100 kB grown
    assert leak_verdict("m", t, y, 8 * GIB).word == "pass"


def test_steep_growth_in_a_short_soak_is_not_a_pass():
    """0.9 MiB in a minute (under the 1 MiB exemption) is 54 MiB/h, above the 32 MiB/h
    fail threshold: too little growth to call it a leak, and no pass either."""
    t = np.arange(0.0, 61.0, 1.0)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        y = 2e8 + 0.9 * 2**20 * t / 60 + rng.normal(0, 20e3, t.size)
        v = leak_verdict("m", t, y, 8 * GIB)
        assert v.estimate == pytest.approx(54 * 2**20, rel=0.1)
        assert v.evidence["growth_low_bytes"] < 2**20  # the exemption applies ...
        assert v.word == "inconclusive"  # ... but cannot turn 54 MiB/h into a pass
        assert "inconclusive if the estimate then lies above the fail threshold" in v.rule


def test_flat_noisy_short_soak_passes_in_20_seeds():
    t = np.arange(0.0, 61.0, 1.0)
    got = [leak_verdict("m", t, 2e8 + np.random.default_rng(s).normal(0, 200e3, t.size),
                        8 * GIB).word for s in range(20)]  # fmt: skip
    assert got == ["pass"] * 20


def windows(seed: int, drift_pct_per_h: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """60 half-minute windows (the fewest a trend interval is given for) of p50 latency
    around 100 ms with 3 % noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(60) * 30.0 + 15
    return t, 100.0 * (1 + drift_pct_per_h / 100 * t / HOUR) * rng.normal(1, 0.03, t.size)


def test_injected_latency_drift_detected():
    for seed in range(5):
        t, y = windows(seed, drift_pct_per_h=60.0)
        v = drift_verdict("ttft", t, y, bad="up")
        assert v.word == "fail"
        assert v.low < 60 * 1.0 < v.high * 1.0 + 10  # the interval is near the truth
        assert v.estimate == pytest.approx(60, rel=0.25)


def test_no_drift_no_false_alarm_in_20_seeds():
    for bad in ("up", "down"):
        got = [drift_verdict("x", *windows(seed), bad=bad).word for seed in range(20)]
        assert got == ["pass"] * 20


def test_throughput_drift_direction():
    t, y = windows(1, drift_pct_per_h=-60.0)  # falling throughput is bad
    assert drift_verdict("tput", t, y, bad="down").word == "fail"
    assert drift_verdict("lat", t, y, bad="up").word == "pass"


def test_too_few_windows_give_no_interval_and_no_verdict():
    t, y = windows(0, drift_pct_per_h=600.0)
    v = drift_verdict("ttft", t[:59], y[:59], bad="up")
    assert v.word == "n/a" and v.low is None and "too few windows (59" in v.note
    v = leak_verdict("m", T[:50], memory(0, 1e9 / HOUR)[:50], 80 * GIB)
    assert v.word == "n/a" and v.low is None and "too few samples" in v.note


def test_error_rate_drift_in_percentage_points():
    t = np.arange(60) * 60.0
    y = 0.01 + 0.05 * t / HOUR  # +5 pp per hour
    v = drift_verdict("err", t, y, bad="up", relative=False)
    assert v.unit == "pp/h" and v.estimate == pytest.approx(5.0) and v.word == "fail"


def test_compare_tokens_hand_checked():
    assert compare_tokens("abc", "abc") == {
        "identical": True,
        "first_diff": None,
        "similarity": 1.0,
    }
    c = compare_tokens("abcd", "abXd")
    assert c["first_diff"] == 2 and c["similarity"] == pytest.approx(0.75)
    assert compare_tokens("ab", "abc")["first_diff"] == 2  # a prefix differs at its end


def test_change_excludes_zero_for_a_real_shift():
    rng = np.random.default_rng(3)
    solo = rng.gamma(20, 5, 300)  # mean 100
    covered = 0
    for _ in range(20):  # a 30 % shift of the median: found every time, covered ~95 %
        c = change_pct(rng.gamma(20, 5, 300), rng.gamma(20, 5, 300) * 1.3, 50)
        assert 20 < c["estimate"] < 40 and c["ci_low"] > 0
        covered += c["ci_low"] <= 30 <= c["ci_high"]
    assert covered >= 17
    mixed = rng.gamma(20, 5, 300) * 1.3
    same = [change_pct(rng.gamma(20, 5, 300), rng.gamma(20, 5, 300), 50) for _ in range(20)]
    assert sum(c["ci_low"] < 0 < c["ci_high"] for c in same) >= 17  # no change: no alarm
    c = change_pct(solo, mixed, 99)  # p99 needs 500 a side
    assert c["estimate"] is None and "p99 needs 500" in c["note"]
    j = jitter_pct(np.array([9.0, 10.0, 11.0] * 4))
    assert j["estimate"] == pytest.approx(100 * np.std([9.0, 10, 11] * 4, ddof=1) / 10)
    assert j["ci_low"] < j["estimate"] < j["ci_high"]
    j = jitter_pct(np.array([9.0, 10.0, 11.0] * 3 + [10.0, 10.0]))  # 11 windows
    assert j["estimate"] is None and j["note"].startswith("too few windows (11")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e15, 1e15), min_size=0, max_size=40))
def test_verdicts_never_raise_on_any_series(ys):
    t = np.arange(len(ys), dtype=float)
    v = leak_verdict("m", t, ys, 80 * GIB)
    assert v.word in ("pass", "warn", "fail", "n/a")
    d = drift_verdict("d", t, ys)
    assert d.word in ("pass", "warn", "fail", "n/a")
    if d.estimate is not None:
        assert math.isfinite(d.estimate)


@settings(max_examples=40, deadline=None)
@given(
    sampled=st.sets(st.sampled_from(["a_bytes", "b_used_bytes", "c"]), max_size=3),
    asked=st.lists(
        st.sampled_from(["a_bytes", "b_used_bytes", "c", "nan", "abc"]), max_size=5, unique=True
    ),  # fmt: skip
)
def test_every_metric_asked_for_has_a_leak_verdict(sampled: set[str], asked: list[str]) -> None:
    """--metric NAME the server never reported is an n/a verdict naming it (it was left
    out without a word: audit a1), one sampled its ordinary verdict; nothing twice."""
    series = {f"metric:{m}": ([0.0, 1.0], [5.0, 5.0]) for m in sampled}
    series["client_rss_bytes"] = ([0.0, 1.0], [1.0, 1.0])
    out = leak_verdicts(series, asked, lambda _: None, LeakThresholds())
    names = [v.name for v in out]
    assert len(names) == len(set(names))
    assert set(names) == {f"leak {s}" for s in series} | {f"leak metric:{m}" for m in asked}
    for v in out:
        missing = v.name.removeprefix("leak metric:") in set(asked) - sampled
        assert v.note.startswith("--metric ") == missing
        if missing:
            assert v.status == Status.NA and "not found on the server's /metrics" in v.note


# -- soak errors: the level of the error rate ------------------------------------------
def soak_windows(seed: int, p_fail: float, n_windows: int = 60, per_window: int = 50):
    """Windows of a soak whose requests each fail with probability ``p_fail``."""
    from accelbench.suites.stress.document import SoakWindow, WindowStats

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_windows):
        k = int(rng.binomial(per_window, p_fail))
        st = WindowStats(per_window, per_window - k, k / per_window, {"http_5xx": k} if k else {},
                         1.0, 10.0, {}, {}, {})  # fmt: skip
        out.append(SoakWindow(i, 60.0 * i, 60.0 * i + 30, 60.0 * (i + 1), 60.0, st))
    return out


def test_soak_errors_fail_a_server_failing_half_its_requests_without_drift():
    from accelbench.suites.stress.soak import soak_verdicts

    ws = soak_windows(0, 0.5)
    vs = {v.name: v for v in soak_verdicts(ws, [], {}, LeakThresholds(), DriftThresholds())}
    # the error rate does not drift: its drift verdict has nothing to say ...
    assert vs["drift error rate"].word != "fail"
    # ... the level does: its verdict states the statistic, interval and thresholds
    v = vs["soak errors"]
    assert v.word == "fail" and v.unit == "fraction" and v.kind == "errors"
    assert v.estimate == pytest.approx(0.5, abs=0.03)
    assert v.interval is not None and 0.05 < v.low < 0.5 < v.high
    assert "Clopper-Pearson" in v.statistic and v.thresholds == {"warn": 0.0, "fail": 0.05}
    assert v.evidence["requests"] == 3000  # every window's requests and failures counted
    assert v.evidence["failed"] == sum(w.stats.requests - w.stats.ok for w in ws)


def test_soak_errors_no_alarm_below_the_thresholds_in_20_seeds():
    from accelbench.suites.stress.soak import errors_verdict

    # no errors at all: pass with the defaults (warn above 0, fail above 5 %)
    assert [errors_verdict(soak_windows(s, 0.0), 0.0, 0.05).word for s in range(20)] == [
        "pass"
    ] * 20
    # 1 % failing against warn 2 % / fail 5 %: no warn, fail or inconclusive
    got = [errors_verdict(soak_windows(s, 0.01), 0.02, 0.05).word for s in range(20)]
    assert got == ["pass"] * 20
    # 1 % failing against the defaults: a warning (some fail, none beyond 5 %), not a fail
    assert {errors_verdict(soak_windows(s, 0.01), 0.0, 0.05).word for s in range(20)} == {"warn"}


def test_soak_errors_inconclusive_when_the_estimate_leans_bad():
    from accelbench.suites.stress.soak import errors_verdict

    # 1 of 10 requests failed: 10 % > 5 %, but the interval [0.3 %, 45 %] cannot confirm it
    ws = soak_windows(0, 0.0, n_windows=1, per_window=10)
    ws[0].stats.ok = 9
    v = errors_verdict(ws, 0.02, 0.05)
    assert v.word == "inconclusive" and v.low < 0.02 and 0.05 < v.estimate
    assert errors_verdict(ws, 0.0, 0.05).word == "warn"  # some fail, for certain
    assert errors_verdict([], 0.0, 0.05).word == "n/a"  # no request: nothing to judge
