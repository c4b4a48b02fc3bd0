"""Bootstrap comparisons and claim verdicts on synthetic runs with known ratios."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.metrics.compare import compare_sets, evaluate_claim, parse_claim
from accelbench.suites.sweep import load_inputs, load_sweep
from synthetic_runs import make_run, make_sweep


def _pair(tmp_path, ratio, n=1500, jitter=0.05, concurrency=16, seed_b=1, **kw):
    a = make_run(
        tmp_path / "a",
        n,
        concurrency=concurrency,
        tpot_ms=20,
        ttft_ms=60,
        jitter=jitter,
        seed=0,
        chunks=False,
        **kw,
    )
    b = make_run(
        tmp_path / "b",
        n,
        concurrency=concurrency,
        tpot_ms=20 / ratio,
        ttft_ms=60 / ratio,
        jitter=jitter,
        seed=seed_b,
        chunks=False,
        **kw,
    )
    return load_inputs([a, b])


def test_parse_claim():
    c = parse_claim("B >= 1.3 x A at 32 tok/s/user")
    assert (c.op, c.factor, c.metric, c.at_interactivity) == (">=", 1.3, "output_tps_per_gpu", 32)
    c = parse_claim("B<=0.8xA on ttft at concurrency 16")
    assert (c.op, c.factor, c.metric, c.at_load) == ("<=", 0.8, "ttft_p50_ms", 16)
    assert parse_claim("B > 2 x A on total").metric == "total_tps_per_gpu"
    with pytest.raises(AccelbenchError, match="cannot read claim"):
        parse_claim("B is faster")
    with pytest.raises(AccelbenchError, match="unknown metric"):
        parse_claim("B >= 1.3 x A on speed")


def test_true_14x_supports_13x(tmp_path):
    a, b = _pair(tmp_path, 1.4)
    cond, v, _ = evaluate_claim(parse_claim("B >= 1.3 x A"), a, b, n_boot=400)
    assert v.word == "supported", v.note
    assert v.estimate == pytest.approx(1.4, rel=0.02)
    assert 1.3 < v.low < v.estimate < v.high
    assert (v.thresholds["claim"], v.thresholds["refute_at"]) == (1.3, pytest.approx(1.3 * 0.95))


def test_true_13x_is_not_evidence_for_13x(tmp_path):
    # a claim at the truth is not supported (the interval straddles it), and within the
    # rounding tolerance it is not refuted either
    a, b = _pair(tmp_path, 1.3)
    _, v, _ = evaluate_claim(parse_claim("B >= 1.3 x A"), a, b, n_boot=400)
    assert v.word == "inconclusive", v.note
    assert "not wholly above 1.3 nor below 1.235" in v.note


def test_true_10x_refuted(tmp_path):
    a, b = _pair(tmp_path, 1.0)
    _, v, _ = evaluate_claim(parse_claim("B >= 1.3 x A at concurrency 16"), a, b, n_boot=400)
    assert v.word == "refuted", v.note
    assert v.high < 1.3 * 0.95


def test_noisy_small_sample_inconclusive(tmp_path):
    a, b = _pair(tmp_path, 1.3, n=20, jitter=0.7, concurrency=4)
    _, v, _ = evaluate_claim(parse_claim("B >= 1.3 x A"), a, b, n_boot=400)
    assert v.word == "inconclusive", v.note
    assert "not wholly above 1.3" in v.note
    # below 20 requests a side the throughput interval under-covers: none is given
    a, b = _pair(tmp_path / "few", 1.3, n=12, jitter=0.7, concurrency=4)
    _, v, _ = evaluate_claim(parse_claim("B >= 1.3 x A"), a, b, n_boot=400)
    assert v.word == "inconclusive" and "too few requests (20 a side)" in v.note, v.note


def test_latency_claim_lower_is_better(tmp_path):
    a, b = _pair(tmp_path, 1.3)
    _, v, _ = evaluate_claim(parse_claim("B <= 0.8 x A on ttft_p50_ms"), a, b, n_boot=300)
    assert v.word == "supported", v.note  # true ratio 1/1.3 = 0.77
    _, v, _ = evaluate_claim(parse_claim("B <= 0.5 x A on e2e"), a, b, n_boot=300)
    assert v.word == "refuted", v.note


def test_repeated_runs_pooled(tmp_path):
    for i in range(3):
        make_run(tmp_path / "A" / f"rep{i}", 300, concurrency=8, seed=i, chunks=False)
        make_run(
            tmp_path / "B" / f"rep{i}",
            300,
            concurrency=8,
            seed=10 + i,
            tpot_ms=10,
            ttft_ms=25,
            chunks=False,
        )
    a, b = load_inputs([tmp_path / "A", tmp_path / "B"])
    comps = compare_sets(a, b, claims=["B >= 1.5 x A"], n_boot=200)
    same = [c for c in comps if c.condition.startswith("same load")]
    assert len(same) == 1 and "x3 runs" in same[0].condition
    assert comps[-1].verdicts[0].word == "supported"


def _sweeps(tmp_path, gpus_a, gpus_b):
    pts = [
        {"concurrency": c, "tpot_ms": 10 * (1 + c / 8), "ttft_ms": 20 * (1 + c / 4)}
        for c in (1, 2, 4, 8, 16)
    ]
    a = make_sweep(
        tmp_path / "A", pts, gpus=gpus_a, osl=32, chunks=False, requests_per_concurrency=40
    )
    b = make_sweep(
        tmp_path / "B", pts, gpus=gpus_b, osl=32, chunks=False, requests_per_concurrency=40
    )
    return load_sweep(a), load_sweep(b)


def test_frontier_claims(tmp_path):
    # Same timings; A spread over 4 GPUs, B over 3: per-GPU ratio 4/3 at every interactivity.
    a, b = _sweeps(tmp_path, 4, 3)
    comps = compare_sets(
        a,
        b,
        claims=[
            # truth 4/3: 1.25 is shown with 40 requests a point, 1.3 would need more
            "B >= 1.25 x A at 60 tok/s/user",
            "B >= 1.5 x A at 60 tok/s/user",
            "B >= 1.3 x A at 500 tok/s/user",
        ],
        n_boot=200,
    )
    v = [c.verdicts[0] for c in comps if c.verdicts]
    assert v[0].word == "supported", v[0].note
    assert v[0].estimate == pytest.approx(4 / 3, rel=1e-6)
    assert v[1].word == "refuted", v[1].note
    assert v[2].word == "inconclusive" and "out of measured range" in v[2].note
    assert any("GPU counts differ" in w for w in comps[0].warnings)


def test_mismatched_workloads_refused(tmp_path):
    a = make_run(tmp_path / "a", 50, isl=1024, chunks=False)
    b = make_run(tmp_path / "b", 50, isl=8192, chunks=False)
    sa, sb = load_inputs([a, b])
    with pytest.raises(AccelbenchError, match="different workloads.*isl: 1024 vs 8192"):
        compare_sets(sa, sb)
    comps = compare_sets(sa, sb, allow_mismatch=True, n_boot=50)
    assert any("workloads differ" in w for w in comps[0].warnings)


def test_sweeps_without_condition_are_inconclusive(tmp_path):
    a, b = _sweeps(tmp_path, 1, 1)
    _, v, _ = evaluate_claim(parse_claim("B >= 1.3 x A"), a, b, n_boot=50)
    assert v.word == "inconclusive" and "condition" in v.note


def test_subsampled_bootstrap_matches_full(tmp_path, monkeypatch):
    # the frontier's replicates: a run above MAX_BOOT_REQUESTS is bootstrapped on a
    # subsample, its spread rescaled (m-out-of-n)
    import accelbench.metrics.compare as cmp

    a, _ = _pair(tmp_path, 1.2, n=4000, jitter=0.3)
    runs = cmp.group_points(a)[0].runs
    metrics = ("output_tps_per_gpu", "total_tps_per_gpu", "requests_per_s")
    full = {m: cmp.PointSamples("a", 16, runs).boot_pair(m, 400, np.random.default_rng(0))
            for m in metrics}  # fmt: skip
    monkeypatch.setattr(cmp, "MAX_BOOT_REQUESTS", 400)
    for m in metrics:
        sub = cmp.PointSamples("a", 16, runs).boot_pair(m, 400, np.random.default_rng(0))
        for f, g in zip(full[m], sub, strict=True):  # interactivity, then the metric
            assert np.std(g) == pytest.approx(np.std(f), rel=0.35), m
            assert np.mean(g) == pytest.approx(np.mean(f), rel=0.01), m
        # one resample: a slower one has less of both
        assert np.corrcoef(full[m][0], full[m][1])[0, 1] > 0.3, m


@pytest.mark.parametrize(
    ("opt", "value", "needle"),
    [
        ("tolerance", -1, "--tolerance must be in [0, 1)"),
        ("tolerance", float("nan"), "--tolerance must be in [0, 1)"),
        ("tolerance", float("inf"), "--tolerance must be in [0, 1)"),
        ("tolerance", 1.0, "--tolerance must be in [0, 1)"),
        ("n_boot", 10, "--n-boot must be a whole number in 50..1000000"),
        ("target_interactivity", float("nan"), "--at must be a finite number in [0.001, 1e+07]"),
        ("target_interactivity", -3.0, "--at must be a finite number in [0.001, 1e+07]"),
        ("seed", -1, "--seed must be in [0, 4_294_967_295]"),
        ("seed", 10**30, "--seed must be in [0, 4_294_967_295]"),
    ],
)
def test_comparison_options_out_of_range(tmp_path, opt, value, needle):
    a, b = _pair(tmp_path, 1.3, n=50)
    with pytest.raises(AccelbenchError) as exc:
        compare_sets(a, b, **{opt: value})
    assert needle in str(exc.value)


def test_compare_cli_bad_tolerance_is_one_line(tmp_path):
    import subprocess
    import sys

    a, b = _pair(tmp_path, 1.3, n=50)
    for tol in ("-1", "nan", "inf"):
        res = subprocess.run(
            [sys.executable, "-m", "accelbench", "compare", str(a.path), str(b.path),
             "--claim", "B >= 1.3 x A", "--tolerance", tol],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert res.returncode == 2 and "Traceback" not in res.stderr
        assert res.stderr.strip().splitlines() == [
            f"error: --tolerance must be in [0, 1) (got {float(tol)!r})"
        ]


# -- options each command reads: any other given is refused (docs/LIMITS.md) ---------------
@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    d = tmp_path_factory.mktemp("opts")
    pts = [{"concurrency": c, "tpot_ms": 10 * (1 + c / 8), "ttft_ms": 20 * (1 + c / 4)}
           for c in (1, 2, 4)]  # fmt: skip
    make_sweep(d / "A", pts, osl=16)
    make_sweep(d / "B", pts, osl=16, gpus=2)
    return d


_FRONTIER_OPTS = {"--at": "40", "--slo": "tpot_ms=50", "--attainment": "0.5", "--json": None}
_FRONTIER_USES = {"plain": {"--at", "--json"}, "--slo": {"--at", "--json", "--slo", "--attainment"}}
_COMPARE_OPTS = {"--claim": "B >= 0.5 x A at concurrency 2", "--at": "40", "--allow-mismatch": None,
                 "--n-boot": "50", "--tolerance": "0.1", "--seed": "1", "--json": None}  # fmt: skip
# --n-boot and --seed are read where an interval is a bootstrap: here only with --at (the
# sweeps have no hit rates; the claim above is at a concurrency), checked once loaded
_BOOTSTRAP = {"--n-boot", "--seed"}
_COMPARE_USES = {
    "plain": {"--at", "--allow-mismatch", "--n-boot", "--seed", "--json"},
    "--claim": {
        "--at",
        "--allow-mismatch",
        "--n-boot",
        "--seed",
        "--json",
        "--claim",
        "--tolerance",
    },
}


def _options_of(fn):
    import typer

    app = typer.Typer(add_completion=False)
    app.command()(fn)
    cmd = typer.main.get_command(app)
    return {max(p.opts, key=len) for p in cmd.params if p.opts and p.param_type_name == "option"}


def test_every_frontier_and_compare_option_belongs_to_a_mode() -> None:
    """An option no mode reads would be refused everywhere: each one has its mode."""
    from accelbench.cli.analysis import COMPARE_MODES, FRONTIER_MODES, compare_cmd, frontier_cmd

    opts = _options_of(frontier_cmd)
    assert opts == set(_FRONTIER_OPTS) == set().union(*_FRONTIER_USES.values())
    assert opts == set().union(*FRONTIER_MODES.values())
    opts = _options_of(compare_cmd)
    assert opts == set(_COMPARE_OPTS) == set().union(*_COMPARE_USES.values())
    assert opts == set().union(*COMPARE_MODES.values())


def _args(cmd, opts, values):
    args = list(cmd)
    for o in sorted(opts):
        args += [o] if values[o] is None else [o, values[o]]
    return args


def _refused(args, cwd, option):
    from cli_inprocess import run_cli

    code, out, err, _ = run_cli(args, cwd)
    assert code == 2 and out == "", (args, code, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    assert option in err, (args, err)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["frontier", "A", "--attainment", "0.5"], "--attainment"),  # was: exit 0, unchanged
        (["frontier", "A", "--attainment", "0.9", "--json"], "--attainment"),  # at its default
        (["frontier", "A", "B", "--at", "40", "--attainment", "0.5"], "--attainment"),
        (["compare", "A", "B", "--tolerance", "0.2"], "--tolerance"),  # was: JSON identical
        (["compare", "A", "B", "--tolerance", "0.05", "--json"], "--tolerance"),  # its default
        (
            ["compare", "A", "B", "--at", "40", "--n-boot", "50", "--tolerance", "0.1"],
            "--tolerance",
        ),
        # no interval a bootstrap (no --at, no hit rates): was the same output for any value
        (["compare", "A", "B", "--n-boot", "50", "--json"], "--n-boot"),
        (["compare", "A", "B", "--seed", "0"], "--seed"),  # at its default
        (
            ["compare", "A", "B", "--claim", "B >= 0.5 x A at concurrency 2", "--seed", "3"],
            "--seed",
        ),
    ],
)
def test_cli_frontier_compare_refuse_options_they_would_ignore(sweeps, args, option):
    _refused(args, sweeps, option)


@pytest.mark.parametrize(
    "args",
    [
        ["frontier", "A", "--slo", "tpot_ms=50", "--attainment", "0.5", "--json"],
        ["frontier", "A", "--at", "40", "--json"],
        ["compare", "A", "B", "--claim", "B >= 0.5 x A at concurrency 2", "--tolerance", "0.1",
         "--json"],
        ["compare", "A", "B", "--at", "40", "--n-boot", "50", "--seed", "1", "--allow-mismatch",
         "--json"],
        ["compare", "A", "B", "--claim", "B >= 0.5 x A at 40 tok/s/user", "--n-boot", "50",
         "--json"],
    ],
)  # fmt: skip
def test_cli_frontier_compare_accept_what_they_read(sweeps, args):
    from cli_inprocess import run_cli

    code, out, err, _ = run_cli(args, sweeps)
    assert code == 0, (args, err)
    json.loads(out)


@settings(max_examples=40, deadline=None)
@given(
    cmd=st.sampled_from(["frontier", "compare"]),
    picked=st.sets(
        st.sampled_from(sorted({*_FRONTIER_OPTS, *_COMPARE_OPTS})), min_size=1, max_size=4
    ),
)
def test_property_frontier_compare_refuse_what_they_ignore(sweeps, cmd, picked) -> None:
    """`frontier --attainment` without --slo and `compare --tolerance` without --claim ran
    and changed nothing: an option the command line's mode does not read is refused in one
    line, exit 2, naming it, before any work."""
    values, uses = (
        (_FRONTIER_OPTS, _FRONTIER_USES) if cmd == "frontier" else (_COMPARE_OPTS, _COMPARE_USES)
    )
    opts = picked & set(values)
    switch = "--slo" if cmd == "frontier" else "--claim"
    unused = opts - uses[switch if switch in opts else "plain"]
    if cmd == "compare" and "--at" not in opts:
        unused = unused or opts & _BOOTSTRAP  # the mode's options are checked first
    if not unused:
        return  # accepted lines: the cases above
    _refused(_args([cmd, "A", "B"], opts, values), sweeps, min(unused))


def test_a_zero_throughput_figure_is_said_as_such_not_as_too_few_requests(tmp_path):
    """A summary whose throughput is 0 (edited; 500 requests succeeded) has no ratio on
    the log scale: the note said "too few requests (2 a side)"."""
    a = make_run(tmp_path / "a", 500, seed=1)
    b = make_run(tmp_path / "b", 500, seed=2)
    s = json.loads((b / "summary.json").read_text())
    s["throughput"]["output_tokens_per_s_per_gpu"] = 0
    (b / "summary.json").write_text(json.dumps(s))
    sa, sb = load_inputs([a, b])
    _, v, _ = evaluate_claim(parse_claim("B >= 1 x A"), sa, sb)
    assert v.word == "inconclusive" and "figure is 0" in v.note and "too few" not in v.note


@settings(max_examples=80, deadline=None)
@given(
    n=st.one_of(st.sampled_from(["0", "0.0", "0.0001", "0.001", "10000000", "10000001"]),
                st.decimals(0, 2e7, places=4, allow_nan=False).map(lambda d: format(d, "f"))),
    cond=st.sampled_from(["tok/s/user", "concurrency", "rate"]),
)  # fmt: skip
def test_property_a_claims_condition_is_in_range_or_refused(n: str, cond: str) -> None:
    """'at 0 tok/s/user' and 'at concurrency 0' were read and judged inconclusive; now a
    condition outside --at's range (or a load not above 0) is refused in one line."""
    text = f"B >= 1 x A at {n} tok/s/user" if cond == "tok/s/user" else f"B >= 1 x A at {cond} {n}"
    x = float(n)
    ok = 1e-3 <= x <= 1e7 if cond == "tok/s/user" else x > 0
    if ok:
        parse_claim(text)
    else:
        with pytest.raises(AccelbenchError, match="claim"):
            parse_claim(text)


def test_claims_at_zero_are_refused() -> None:
    for text in ("B >= 1 x A at 0 tok/s/user", "B >= 1 x A at concurrency 0",
                 "B hit_rate >= A hit_rate + 5pp at c=0"):  # fmt: skip
        with pytest.raises(AccelbenchError):
            parse_claim(text)
