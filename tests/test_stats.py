"""Every statistic of accelbench.metrics.stats, once each, against hand-checked numbers
(published tables or arithmetic written out here). Their coverage in simulation is
tests/test_interval_coverage.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.metrics import stats as S

# ----------------------------------------------------------------------------- percentiles


def test_describe_matches_numpy_linear():
    d = S.describe([1, 2, 3, 4])
    # linear: p50 = 2.5, p90 at rank 2.7 -> 3.7
    assert d["p50"] == 2.5 and d["p90"] == pytest.approx(3.7)
    assert d["mean"] == 2.5 and d["std"] == pytest.approx(math.sqrt(1.25))
    assert S.describe([])["p50"] is None and S.describe([])["count"] == 0


def test_weighted_percentile_equals_repetition():
    v = np.array([10.0, 20.0, 30.0])
    w = np.array([1, 3, 2])
    expanded = np.repeat(v, w)  # 10 20 20 20 30 30
    for q in (0, 10, 25, 50, 75, 90, 99, 100):
        assert S.weighted_percentile(v, w, q) == pytest.approx(np.percentile(expanded, q))
    d = S.describe_weighted(v, w)
    assert d["count"] == 6 and d["mean"] == pytest.approx(130 / 6)  # (10 + 3 * 20 + 2 * 30) / 6


def test_adjusted_percentile_counts_failures_as_infinite():
    vals = np.array([1.0, 2.0, 3.0])
    assert S.adjusted_percentile(vals, 0, 50) == 2.0
    # 3 ok + 1 failed: sorted 1,2,3,inf; p50 at rank 1.5 -> 2.5; p90 at 2.7 -> between 3 and inf
    assert S.adjusted_percentile(vals, 1, 50) == 2.5
    assert S.adjusted_percentile(vals, 1, 90) == math.inf
    assert S.adjusted_percentile(vals, 1, 100 * 2 / 3) == 3.0
    assert S.describe_adjusted(vals, 1)["p90"] == "inf"  # JSON has no infinity


# ----------------------------------------------------------------------------- critical values


def test_critical_values_from_the_tables():
    assert S.z_critical() == pytest.approx(1.959964, abs=1e-6)
    assert S.z_critical(0.90) == pytest.approx(1.644854, abs=1e-6)
    assert S.t_critical(0.95, 10) == pytest.approx(2.228139, abs=1e-6)  # t table, 10 dof
    assert S.t_critical(0.95, np.array([10.0]))[0] == pytest.approx(2.228139, abs=1e-6)


# ----------------------------------------------------------------------------- order statistics


def test_quantile_interval_ranks_by_hand():
    # median of 20: B ~ Binomial(20, 0.5); P(B >= 6) = 1 - 0.020695 = 0.979305,
    # P(B >= 7) = 1 - 0.057659 = 0.942341; the low end interpolates to the 0.975 level:
    # 6 + (0.979305 - 0.975) / (0.979305 - 0.942341) = 6.1165; the high end mirrors it
    lo, hi = S.quantile_ci_ranks(20, 50)
    assert lo == pytest.approx(6.1165, abs=1e-4) and hi == pytest.approx(21 - 6.1165, abs=1e-4)
    x = np.arange(1.0, 21.0)  # X_(k) = k: the interval is the ranks themselves
    ci = S.quantile_ci(x, 50)
    assert (float(ci[0]), float(ci[1])) == pytest.approx((lo, hi))
    assert S.quantile_ci_ranks(1, 50) is None and S.quantile_ci(np.ones(3), 99) is None


def _ranks_over_every_k(n: int, q: float, confidence: float = 0.95):
    """quantile_ci_ranks written over every rank 1..n, as it was first written."""
    from scipy import stats

    p, a = q / 100.0, (1.0 - confidence) / 2.0
    k = np.arange(1, n + 1)
    below, above = stats.binom.sf(k - 1, n, p), stats.binom.cdf(k - 1, n, p)
    ok_lo, ok_hi = np.nonzero(below >= 1 - a)[0], np.nonzero(above >= 1 - a)[0]
    if ok_lo.size == 0 or ok_hi.size == 0:
        return None
    i, j = int(ok_lo[-1]), int(ok_hi[0])
    lo, hi = float(i + 1), float(j + 1)
    if i + 1 < n and below[i] > below[i + 1]:
        lo += (below[i] - (1 - a)) / (below[i] - below[i + 1])
    if j > 0 and above[j] > above[j - 1]:
        hi -= (above[j] - (1 - a)) / (above[j] - above[j - 1])
    return lo, hi


@pytest.mark.parametrize("q", [1, 25, 50, 75, 90, 99, 99.9])
@pytest.mark.parametrize("n", [2, 3, 10, 37, 500, 4096, 100_003])
def test_quantile_interval_ranks_near_np_equal_every_rank(n: int, q: float) -> None:
    # only ranks near n p are evaluated (a 13-million-request run): the same ends
    assert S.quantile_ci_ranks(n, q) == _ranks_over_every_k(n, q)
    assert S.quantile_ci_ranks(n, q, 0.5) == _ranks_over_every_k(n, q, 0.5)


def test_quantile_interval_from_partition_equals_sorted() -> None:
    rng = np.random.default_rng(2)
    x = rng.lognormal(0, 1, (3, 2001))
    x[:, 7] = x[:, 8]  # ties
    for q in (1, 50, 99):
        lo, hi = S.quantile_ci(x, q)
        r = S.quantile_ci_ranks(x.shape[-1], q)
        xs = np.sort(x, axis=-1)
        assert np.array_equal(lo, S._at_rank(xs, r[0])) and np.array_equal(hi, S._at_rank(xs, r[1]))


def test_min_samples():
    # five beyond the percentile, at least 10 (500 for p99, 50 for p90)
    assert S.min_samples(99) == 500 and S.min_samples(50) == 10 and S.min_samples(90) == 50
    # a low percentile needs the order-statistic interval's own minimum:
    # 1 - 0.99^n >= 0.975 -> n >= log(0.025) / log(0.99) = 367.04 -> 368
    assert S.min_quantile_samples(1) == 368 and S.min_samples(1) == 368
    assert S.min_samples(1, 0.99) > S.min_samples(1)


# ----------------------------------------------------------------------------- ratios


def test_runs_ratio_interval_by_hand():
    # log A = (0, 1), log B = (1, 2): d = 1, pooled SS = 0.5 + 0.5 = 1 on 2 dof,
    # se = sqrt(1 / 2 * (1/2 + 1/2)) = 0.70711, t(0.975, 2) = 4.30265: exp(1 +- 3.04243)
    r, lo, hi = S.runs_ratio_ci(np.array([1.0, math.e]), np.array([math.e, math.e**2]))
    assert float(r) == pytest.approx(math.e)
    assert float(lo) == pytest.approx(math.exp(1 - 3.04243), rel=1e-4)
    assert float(hi) == pytest.approx(math.exp(1 + 3.04243), rel=1e-4)
    assert S.runs_ratio_ci(np.array([1.0]), np.array([2.0])) is None  # no spread


def test_log_scale_intervals_by_hand():
    # 100 with log se 0.1: 100 exp(+-1.959964 * 0.1) = 82.2015, 121.6523
    assert S.log_normal_ci(100, 0.1) == pytest.approx((82.2015, 121.6523), abs=1e-4)
    lo, hi = S.log_ratio_ci(0.0, 0.03, 0.04)  # se of the difference: 0.05
    assert (float(lo), float(hi)) == pytest.approx((math.exp(-0.0979982), math.exp(0.0979982)))
    # open loop, every request 1 token: var(log sum) = 1 / n
    assert float(S.throughput_log_se(np.ones(100), None)) == pytest.approx(0.1)
    # closed loop, tokens proportional to E2E: the ratio has no spread
    tok = np.array([1.0, 2.0, 3.0, 4.0])
    assert float(S.throughput_log_se(tok, 10 * tok)) == pytest.approx(0.0)


def test_open_loop_degrees_of_freedom_by_hand():
    # tokens (1, 1, 1, 3): sum x^2 = 12, sum x^4 = 84, kappa = 4 * 84 / 144 = 7 / 3,
    # dof = 2 * 4 / (7 / 3 - 1) = 6; Welch of (0.1, 6) and (0.1, inf): 0.02^2 / (0.01^2 / 6)
    assert float(S.open_loop_log_dof(np.array([1.0, 1.0, 1.0, 3.0]))) == pytest.approx(6.0)
    assert float(S.welch_dof(0.1, 6.0, 0.1, math.inf)) == pytest.approx(24.0)
    lo, hi = S.log_ratio_ci(0.0, 0.1, 0.1, dof=24.0)  # t(0.975, 24) = 2.063899
    assert float(hi) == pytest.approx(math.exp(2.063899 * math.sqrt(0.02)), rel=1e-6)


def test_tail_shape_recovers_a_generalized_pareto():
    # the sqrt(n) longest of 40,000 Pareto(alpha) values exceed the next one by a GPD of
    # shape 1 / alpha; an exponential tail has shape 0; a bounded one, negative
    rng = np.random.default_rng(3)
    for alpha in (1.5, 2.0, 4.0):
        assert S.e2e_tail_shape(1 + rng.pareto(alpha, 40_000)) == pytest.approx(1 / alpha, abs=0.12)
    assert S.e2e_tail_shape(rng.exponential(1.0, 40_000)) == pytest.approx(0.0, abs=0.12)
    assert S.e2e_tail_shape(rng.uniform(0, 1, 40_000)) < -0.5
    assert math.isnan(S.e2e_tail_shape(np.ones(5)))  # too few for a tail
    # the longest a quarter of a slot's part or more, and the shape past 0.6: no interval
    e = np.r_[np.ones(99), 1e6]
    assert S.too_heavy_tail(e, 8) is not None and S.too_heavy_tail(np.ones(100), 8) is None


def test_bootstrap_ratio_interval_is_the_replicates_percentiles():
    # ratios 1..41: numpy's 2.5th percentile at position 1 -> 2, the 97.5th at 39 -> 40
    lo, hi, n = S.bootstrap_ratio_ci(np.ones(41), np.arange(1.0, 42.0))
    assert (lo, hi, n) == (pytest.approx(2.0), pytest.approx(40.0), 41)
    # non-finite replicates are dropped; fewer than 10 kept: no interval
    assert S.bootstrap_ratio_ci(np.zeros(20), np.ones(20)) == (None, None, 0)


def test_bootstrap_replicates_share_resamples_and_rescale():
    rng = np.random.default_rng(7)
    x = rng.normal(10.0, 2.0, 2000)

    def stat(idx):
        return x[idx].mean(axis=1), 2.0 * x[idx].mean(axis=1)

    a, b = S.bootstrap_replicates(x.size, 3000, stat, np.random.default_rng(1), max_n=10**6)
    assert np.array_equal(b, 2.0 * a)  # the same resamples behind both statistics
    # the bootstrap SE of a mean is the sample SD (ddof 0) over sqrt(n)
    assert np.std(a) == pytest.approx(np.std(x) / math.sqrt(x.size), rel=0.05)
    # m-out-of-n: 200 of the 2,000 resampled, the spread rescaled by sqrt(200 / 2000)
    c, _ = S.bootstrap_replicates(x.size, 3000, stat, np.random.default_rng(1), max_n=200)
    assert np.std(c) == pytest.approx(np.std(a), rel=0.15)
    assert np.mean(c) == pytest.approx(x.mean(), abs=0.02)
    one = np.full(500, 3.0)  # no spread: every replicate is the value, rescaled or not
    (k,) = S.bootstrap_replicates(500, 10, lambda i: (one[i].mean(axis=1),), rng, max_n=50)
    assert np.all(k == 3.0)


def test_cv_estimate_and_interval_order():
    # 9, 10, 11 four times: mean 10, sample variance 8 / 11 -> cv 0.085280
    cv, lo, hi = S.cv_ci(np.array([9.0, 10.0, 11.0] * 4))
    assert float(cv) == pytest.approx(math.sqrt(8 / 11) / 10)
    assert float(lo) < float(cv) < float(hi)
    assert math.isnan(float(S.cv_ci(np.array([-1.0, 1.0] * 6))[0]))  # mean not positive


# ----------------------------------------------------------------------------- proportions


def test_wilson_from_newcombes_table():
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I
    assert S.wilson(81, 263) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert S.wilson(15, 148) == pytest.approx((0.0624, 0.1605), abs=1e-4)
    z = 1.959963984540054  # 0 of n: upper = z^2 / (n + z^2)
    assert S.wilson(0, 600) == pytest.approx((0.0, z * z / (600 + z * z)))
    assert S.wilson(0, 0) == (0.0, 1.0)


def test_newcombe_from_his_table():
    # Newcombe (1998), "Interval estimation for the difference between independent
    # proportions", Table II (a): 56/70 - 48/80 = 0.2, method 10: [0.0524, 0.3339]
    assert S.newcombe(48, 80, 56, 70) == pytest.approx((0.0524, 0.3339), abs=2e-4)


def test_clopper_pearson_hand_checked():
    # 0 of 10: upper = 1 - 0.025^(1/10); 10 of 10 mirrors it
    assert S.clopper_pearson(0, 10) == pytest.approx((0.0, 1 - 0.025 ** (1 / 10)))
    assert S.clopper_pearson(10, 10) == pytest.approx((0.025 ** (1 / 10), 1.0))
    # Newcombe (1998) Table I, exact method: 81/263 -> [0.2527, 0.3676]
    assert S.clopper_pearson(81, 263) == pytest.approx((0.2527, 0.3676), abs=1e-4)
    assert S.clopper_pearson(0, 0) == (0.0, 1.0)


# ----------------------------------------------------------------------------- tests


def test_rank_and_exact_tests_by_hand():
    # 1 of 10 against 9 of 10: hypergeometric, P(X <= 1) = (1 + 100) / C(20, 10);
    # two-sided doubles it: 202 / 184756
    t = S.fisher_exact(1, 10, 9, 10)
    assert t["name"] == "fisher-exact" and t["p_value"] == pytest.approx(202 / 184756)
    # (1, 2, 3) against (4, 5, 6): U = 0, exact two-sided p = 2 / C(6, 3) = 0.1
    t = S.mann_whitney(np.array([1.0, 2, 3]), np.array([4.0, 5, 6]))
    assert t["p_value"] == pytest.approx(0.1) and t["p_candidate_slower"] == 0.0


# ----------------------------------------------------------------------------- trends


def test_ar1_rho_and_inflation():
    assert S.ar1_inflation(0.5) == 3.0  # (1 + 0.5) / (1 - 0.5)
    assert S.ar1_rho(np.array([1.0, -1.0] * 3)) == 0.0  # negative: never trusted
    assert S.ar1_rho(np.array([1.0, 2.0])) == 0.0  # too short


def test_linear_trend_by_hand():
    # (0, 0), (1, 1), (2, 2), (3, 3.5): Sxy = 5.75, Sxx = 5 -> slope 1.15,
    # intercept 1.625 - 1.15 * 1.5 = -0.1; 4 points have no interval (NaN)
    tr = S.linear_trend([0, 1, 2, 3], [0, 1, 2, 3.5])
    assert tr.slope == pytest.approx(1.15) and tr.intercept == pytest.approx(-0.1)
    assert math.isnan(tr.ci_low) and math.isnan(tr.ci_high)
    assert tr.to_dict()["ci_low"] is None and tr.to_dict()["growth"] == pytest.approx(3.45)
    assert S.linear_trend([1, 2], [1, 2]) is None
    assert S.linear_trend([1, 1, 1], [1, 2, 3]) is None
    tr = S.linear_trend(range(60), range(60))  # exact line: zero-width interval
    assert tr.slope == pytest.approx(1.0) and tr.ci_low == pytest.approx(1.0)


def test_linear_trend_interval_is_the_textbook_one_without_autocorrelation():
    from scipy import stats

    t = np.arange(80.0)
    y = 3.0 + 0.5 * t + np.array([1.0, -1.0] * 40)  # alternating: rho clipped to 0
    tr = S.linear_trend(t, y)
    ref = stats.linregress(t, y)
    half = stats.t.ppf(0.975, 78) * ref.stderr
    assert tr.ar1_rho == 0.0 and tr.n_eff == 80
    assert (tr.ci_low, tr.ci_high) == pytest.approx((ref.slope - half, ref.slope + half))


def test_theil_sen_and_warm_up_by_hand():
    # pairwise slopes of y = (0, 1, 2, 3, 10): median 1; intercept median(y) - 1 * 2 = 0
    slope, icpt, lo, hi, _ = S.sen_interval(np.arange(5.0), np.array([0.0, 1, 2, 3, 10]))
    assert (slope, icpt) == (1.0, 0.0) and math.isnan(lo) and math.isnan(hi)
    # 10 per s for 20 s (a pool filling), then 1 per s: the warm-up ends at 20 s and the
    # trend after it is exactly 1
    t = np.arange(100.0)
    y = np.where(t < 20, 10 * t, 200 + (t - 20))
    assert S.warmup_end(t, y) == 20.0
    tr = S.robust_trend(t, y)
    assert (tr.slope, tr.ci_low, tr.ci_high, tr.start_s, tr.n_fit) == (1.0, 1.0, 1.0, 20.0, 80)
    assert S.robust_trend([0, 1, 2], [1, 2, 3]) is None


def test_quadratic_fit_exact_and_degenerate():
    f = S.quadratic_fit([0, 1, 2, 3], [1, 2, 5, 10])  # y = 1 + x^2 exactly
    assert f["a"]["estimate"] == pytest.approx(1.0)
    assert f["b"]["estimate"] == pytest.approx(0.0, abs=1e-12)
    assert f["c"]["estimate"] == pytest.approx(1.0) and f["r2"] == 1.0
    assert "error" in S.quadratic_fit([1, 1, 2], [1, 2, 3])


_vals = st.lists(
    st.one_of(st.floats(-1e9, 1e9, allow_nan=False), st.integers(-3, 3).map(float),
              st.integers(0, 60).map(lambda k: 1000 + k / 1e4),  # many in one bucket
              st.just(math.nan)),
    max_size=120,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(_vals, st.data())
def test_weighted_percentiles_by_bucket_equal_the_sort(
    vals: list[float], data: st.DataObject
) -> None:
    """Above WEIGHTED_SORT_MAX values the order statistics come from bucket counts: the
    same values as the stable sort, ties, zero weights and NaN included."""
    v = np.asarray(vals, dtype=float)
    w = np.asarray(data.draw(st.lists(st.integers(0, 9), min_size=v.size, max_size=v.size)),
                   dtype=np.int64)  # fmt: skip
    qs = [0.0, 1.0, 50.0, 90.0, 99.9, 100.0]
    want = S.weighted_percentiles(v, w, qs)
    old = S.WEIGHTED_SORT_MAX
    try:
        S.WEIGHTED_SORT_MAX = 0
        got = S.weighted_percentiles(v, w, qs)
    finally:
        S.WEIGHTED_SORT_MAX = old
    assert np.array_equal(np.asarray(got), np.asarray(want), equal_nan=True)


@settings(max_examples=150, deadline=None)
@given(_vals, st.integers(0, 50))
def test_describe_adjusted_partition_equals_sorted(vals: list[float], n_failed: int) -> None:
    v = np.asarray(vals, dtype=float)
    got = S.describe_adjusted(v, n_failed)
    ok = v[~np.isnan(v)]
    for name, q in S.QUANTILES:
        r = S.adjusted_percentile(ok, n_failed, q)
        assert got[name] == (None if math.isnan(r) else ("inf" if math.isinf(r) else r)), name


def test_counted_order_stat_hand_checked() -> None:
    """{0.1: 5, 0.2: 4, 7.0: 1}: ten samples; rank int(0.99 x 10) = 9 is the 7.0, rank
    int(0.5 x 10) = 5 the first 0.2; an empty histogram gives 0."""
    counts = {0.2: 4, 7.0: 1, 0.1: 5}
    assert S.counted_order_stat(counts, 0.99) == 7.0
    assert S.counted_order_stat(counts, 0.5) == 0.2
    assert S.counted_order_stat(counts, 0.0) == 0.1
    assert S.counted_order_stat({}, 0.99) == 0.0
