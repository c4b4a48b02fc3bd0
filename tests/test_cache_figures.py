"""The prefix-cache figures (summary.json ``cache``) as registry figures, claims on them
(``B hit_rate >= A hit_rate + 10pp``: a difference in points with a cluster bootstrap over
sessions), the report's "Prefix cache" section and ``runs query``'s columns.

The interval is checked as tests/test_interval_coverage.py checks every interval: coverage
in simulation near its nominal 95 % (93-97 %), no alarm without a difference, an injected
difference found. End to end: a real run against the reference server whose requests are
given the cached tokens a server would have reported (the reference server's own cache is
another change), then ``accelbench compare``, ``report`` and ``runs query`` on it.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.metrics import registry
from accelbench.metrics.compare import (
    MIN_CLUSTERS,
    cache_clusters,
    compare_sets,
    evaluate_claim,
    parse_claim,
)
from accelbench.metrics.prefixcache import CACHE_COLUMNS, cache_section
from accelbench.metrics.stats import bootstrap_difference_ci, cluster_ratio_replicates
from accelbench.metrics.verdict import Status

LO, HI = 0.93, 0.97


def one_sided_limit(trials: int) -> float:
    return 0.025 + 3 * math.sqrt(0.025 * 0.975 / trials)


# -- the registry --------------------------------------------------------------------------
SUMMARY = {
    "cache": {
        "hit_rate": 0.42, "hit_rate_server": 0.40, "ideal_infinite": 0.75, "ideal_lru": 0.5,
        "gap_pp": 8.0,
    }
}  # fmt: skip


def test_registry_reads_the_cache_section():
    f = registry.figure
    assert f("cache_hit_rate").value(SUMMARY) == 0.42
    assert f("hit_rate").name == "cache_hit_rate"  # the claim's alias
    assert f("cache_hit_rate_server").value(SUMMARY) == 0.40
    assert f("ideal").value(SUMMARY) == 0.75
    assert f("cache_ideal_lru").value(SUMMARY) == 0.5
    assert f("gap").value(SUMMARY) == 8.0
    assert f("cache_hit_rate").value({"latency": {}}) is None  # no cache section
    assert f("cache_ideal_lru").value({"cache": {"ideal_lru": None}}) is None
    for name in registry.CACHE:
        fig = registry.FIGURES[name]
        assert fig.higher_is_better == (name != "cache_gap_pp")
        assert fig.unit == ("pp" if name == "cache_gap_pp" else "fraction")
        assert not fig.comparable  # never a ratio
    assert registry.DIFFERENCE == ("cache_hit_rate",)


# -- the claim grammar ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, op, offset, load",
    [
        ("B hit_rate >= A hit_rate + 10pp", ">=", 10.0, None),
        ("B >= A + 10pp on hit_rate", ">=", 10.0, None),
        ("B >= A + 10 points", ">=", 10.0, None),
        ("B cache_hit_rate > A cache_hit_rate - 5 points at concurrency 8", ">", -5.0, 8.0),
        ("b hit_rate ≤ a hit_rate + 0.5pp at c=4", "<=", 0.5, 4.0),
        ("B hit_rate >= A hit_rate", ">=", 0.0, None),
    ],
)
def test_difference_claims_parse(text, op, offset, load):
    c = parse_claim(text)
    assert (c.metric, c.op, c.offset_pp, c.at_load, c.is_difference) == (
        "cache_hit_rate", op, offset, load, True)  # fmt: skip


def test_ratio_claims_still_parse():
    c = parse_claim("B >= 1.3 x A at 32 tok/s/user")
    assert (c.factor, c.metric, c.offset_pp, c.is_difference) == (1.3, "output_tps_per_gpu",
                                                                  None, False)  # fmt: skip
    c = parse_claim("B ttft <= 0.8 x A ttft at c=4")
    assert (c.factor, c.metric, c.at_load) == (0.8, "ttft_p50_ms", 4.0)
    assert parse_claim("B <= 0.8 x A on ttft").metric == "ttft_p50_ms"


@pytest.mark.parametrize(
    "text, needle",
    [
        ("B hit_rate >= 1.1 x A hit_rate", "percentage points, not as a ratio"),
        ("B >= 1.1 x A + 10pp", "percentage points, not as a ratio"),
        ("B hit_rate >= A ttft + 1pp", "more than one figure"),
        ("B ideal >= A ideal + 1pp", "cannot be claimed on"),
        ("B >= A + 10pp on ttft", "percentage points apply to hit rates"),
        ("B hit_rate >= A hit_rate + 10pp at 32 tok/s/user", "at a load"),
        ("B hit_rate >= A hit_rate + 101pp", "at most 100 points"),
        ("B >= A", "give the factor"),
        ("B hit_rate >= A hit_rate + 10%", "cannot read claim"),
    ],
)
def test_bad_claims_are_one_line(text, needle):
    with pytest.raises(AccelbenchError, match=needle) as e:
        parse_claim(text)
    assert "\n" not in str(e.value)


_PIECES = ["B", "A", " ", ">=", "<=", ">", "<", "≥", "+", "-", "−", "10", "0.5", "pp", "points",
           "x", "1.3", "hit_rate", "ttft", "ideal", "on", "at", "c=4", "concurrency", "tok/s",
           "32", "%", "\n", "'", "é"]  # fmt: skip


@given(st.lists(st.sampled_from(_PIECES), max_size=14).map("".join) | st.text(max_size=40))
@settings(max_examples=400, deadline=None)
def test_any_claim_text_parses_or_is_refused_in_one_line(text):
    try:
        c = parse_claim(text)
    except AccelbenchError as e:
        assert str(e) and "\n" not in str(e).replace(repr(text.strip()), "")
        return
    assert c.is_difference == (c.offset_pp is not None)
    if c.is_difference:
        assert c.metric == "cache_hit_rate" and abs(c.offset_pp) <= 100
        assert c.at_interactivity is None
    else:
        assert c.factor > 0 and c.metric != "cache_hit_rate"


# -- the interval: coverage in simulation -----------------------------------------------------
def _sessions(rng, g: int, base: float, conc: float = 6.0) -> tuple[np.ndarray, np.ndarray]:
    """Per session (cached, prompt) token sums: 1-6 turns of 50-1999 prompt tokens; the
    session's hit probability is Beta around ``base + 0.05 (turns - 1)`` (long sessions hit
    more: size and rate correlated). Truth: :func:`_truth`."""
    turns = rng.integers(1, 7, g)
    each = rng.integers(50, 2000, (g, 6))
    prompt = np.where(np.arange(6)[None, :] < turns[:, None], each, 0).sum(axis=1).astype(float)
    m = base + 0.05 * (turns - 1)
    rate = rng.beta(m * conc, (1 - m) * conc)
    return rng.binomial(prompt.astype(np.int64), rate).astype(float), prompt


def _truth(base: float) -> float:
    """E[sum cached] / E[sum prompt]: turns uniform 1-6, E[prompt | turns] ∝ turns."""
    t = np.arange(1, 7)
    return float((t * (base + 0.05 * (t - 1))).sum() / t.sum())


@pytest.mark.parametrize("g", [MIN_CLUSTERS, 60, 300])
def test_hit_rate_difference_interval_covers(g):
    # the tool's path: cluster_ratio_replicates per side, the percentile interval of B - A
    rng = np.random.default_rng(g)
    trials, hit = 1500, 0
    truth = _truth(0.45) - _truth(0.3)
    for _ in range(trials):
        (na, da), (nb, db) = _sessions(rng, g, 0.3), _sessions(rng, g, 0.45)
        ra = cluster_ratio_replicates(na, da, 1000, rng, 20_000)
        rb = cluster_ratio_replicates(nb, db, 1000, rng, 20_000)
        lo, hi, _ = bootstrap_difference_ci(ra, rb)
        assert lo is not None and hi is not None
        hit += lo <= truth <= hi
    cov = hit / trials  # binomial SE 0.56 % at 1,500 trials
    assert LO <= cov <= HI, f"{g} sessions a side: coverage {cov:.3f}"


def test_requests_of_a_session_are_one_cluster_and_requests_alone_their_own():
    class Run:
        path = Path("r")
        has_requests = True

        def read_requests(self, columns=()):
            return pa.table({
                "warmup": [True, False, False, False, False, False, False],
                "isl": [100, 100, 200, 50, 80, 10, None],
                "cached_tokens": [100, 0, 150, None, 40, 0, 5],
                "session": [0, 0, 0, 1, None, None, 2],
            })  # fmt: skip

    num, den = cache_clusters(Run())  # type: ignore[arg-type]
    # warm-up, an unreported request and a request without ISL are left out (as the
    # summary's hit_rate does); session 0 is one cluster, the two lone requests two
    assert sorted(zip(num.tolist(), den.tolist(), strict=True)) == [
        (0.0, 10.0), (40.0, 80.0), (150.0, 300.0)]  # fmt: skip


# -- known truth through compare: runs held in memory -----------------------------------------
class _MemRun:
    """A run of ``g`` sessions at concurrency 4 (metrics.protocols.RunLike), its requests
    drawn per turn with the session's hit probability."""

    def __init__(self, rng, g: int, base: float, name: str, conc: float = 10.0) -> None:
        turns = rng.integers(1, 7, g)
        sess = np.repeat(np.arange(g), turns)
        isl = rng.integers(50, 2000, sess.size)
        m = base + 0.05 * (turns - 1)
        rate = rng.beta(m * conc, (1 - m) * conc)[sess]
        cached = rng.binomial(isl, rate)
        n = sess.size
        self.t = pa.table({"warmup": np.zeros(n, bool), "ok": np.ones(n, bool),
                           "isl": isl, "cached_tokens": cached, "session": sess})  # fmt: skip
        self.hit = float(cached.sum() / isl.sum())
        self.run_id, self.path, self.summary, self.has_requests = name, Path(name), None, True
        self.rate, self.load, self.load_label = None, 4.0, "c=4"

    def figure(self, name):
        return self.hit if name == "cache_hit_rate" else None

    def read_requests(self, columns=()):
        return self.t


class _MemSet:
    def __init__(self, run, name):
        self.usable_runs, self.name, self.gpus, self.cache = [run], name, 1, {}

    def workload(self):
        return None


def _verdict(text: str, a, b, seed: int = 0):
    _, v, e = evaluate_claim(parse_claim(text), _MemSet(a, "A"), _MemSet(b, "B"), seed=seed)
    return v, e


def test_equal_hit_rates_raise_no_alarm():
    # A/A: "B >= A + 0pp" (true at the boundary) and "B <= A + 0pp" are never refuted (the
    # 5-point tolerance); "+3pp" and "-3pp" (false) are supported at most the nominal 2.5 %
    rng = np.random.default_rng(7)
    trials = 400
    count = {k: 0 for k in ("refuted", "false_support")}
    for k in range(trials):
        a, b = _MemRun(rng, 60, 0.4, "a"), _MemRun(rng, 60, 0.4, "b")
        for text in ("B hit_rate >= A hit_rate", "B hit_rate <= A hit_rate"):
            v, _ = _verdict(text, a, b, k)
            count["refuted"] += v.status == Status.FAIL
        for text in ("B hit_rate >= A hit_rate + 3pp", "B hit_rate <= A hit_rate - 3pp"):
            v, _ = _verdict(text, a, b, k)
            count["false_support"] += v.status == Status.PASS
    assert count["refuted"] == 0
    assert count["false_support"] / (2 * trials) <= one_sided_limit(2 * trials)


def test_a_true_20pp_difference_supports_10pp_and_refutes_30pp():
    rng = np.random.default_rng(11)
    for k in range(10):
        a, b = _MemRun(rng, 1000, 0.3, "a"), _MemRun(rng, 1000, 0.5, "b")
        v10, e = _verdict("B hit_rate >= A hit_rate + 10pp", a, b, k)
        assert v10.status == Status.PASS, v10.note
        assert e is not None and e.diff_pp == pytest.approx(100 * (b.hit - a.hit))
        assert 15 < e.diff_pp < 25 and e.diff_lo < e.diff_pp < e.diff_hi
        v30, _ = _verdict("B hit_rate >= A hit_rate + 30pp", a, b, k)
        assert v30.status == Status.FAIL, v30.note
        # the verdict carries its statistic, interval and thresholds, in points
        assert (v30.unit, v30.statistic) == ("pp", "difference B - A of cache_hit_rate")
        assert v30.thresholds == {"claim": 30.0, "refute_at": 25.0}
        assert v30.interval is not None and v30.interval.high < 25.0
        assert "sessions" in v30.interval.method
        vlow, _ = _verdict("B hit_rate <= A hit_rate + 10pp", a, b, k)
        assert vlow.status == Status.FAIL


def test_too_few_sessions_is_inconclusive_with_the_estimate():
    rng = np.random.default_rng(3)
    a, b = _MemRun(rng, MIN_CLUSTERS - 1, 0.3, "a"), _MemRun(rng, MIN_CLUSTERS - 1, 0.7, "b")
    v, e = _verdict("B hit_rate >= A hit_rate + 10pp", a, b)
    assert v.status == Status.INCONCLUSIVE and "too few sessions" in v.note
    assert e is not None and e.diff_pp is not None and e.diff_lo is None


# -- end to end: a real run, then compare / report / runs query --------------------------------
PY = [sys.executable, "-m", "accelbench"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def session_runs(tmp_path_factory) -> dict[int, Path]:
    """Real runs of 24 two-turn sessions against the reference server, at concurrency 4
    and 2."""
    root = tmp_path_factory.mktemp("cache")
    port = _free_port()
    srv = subprocess.Popen([*PY, "serve", "reference", "--port", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        out = {c: root / f"c{c}" for c in (4, 2)}
        for c, d in out.items():
            subprocess.run([*PY, "run", "--url", f"http://127.0.0.1:{port}", "--sessions", "24",
                            "--turns", "2", "-c", str(c), "--isl", "20", "--osl", "4",
                            "--shared-prefixes", "2", "--prefix-tokens", "40", "-o", str(d)],
                           check=True, capture_output=True, timeout=300)  # fmt: skip
    finally:
        srv.terminate()
        srv.wait(10)
    return out


def _reported(src: Path, dst: Path, share: float) -> Path:
    """A copy of the run whose later turns said ``share`` of their prompt was cached (as a
    server with a prefix cache would), its summary's cache section recomputed."""
    import shutil

    shutil.copytree(src, dst)
    t = pq.read_table(dst / "requests.parquet")
    isl = t.column("isl").to_pylist()
    turn = t.column("turn").to_pylist()
    cached = [int(share * i) if tu else 0 for i, tu in zip(isl, turn, strict=True)]
    i = t.column_names.index("cached_tokens")
    t = t.set_column(i, t.schema.field(i), pa.array(cached, pa.int64()))
    pq.write_table(t, dst / "requests.parquet")
    s = json.loads((dst / "summary.json").read_text())
    rows = t.select([c for c in CACHE_COLUMNS if c in t.column_names]).to_pylist()
    s["cache"] = cache_section(rows, s["client"].get("server_cache"))
    (dst / "summary.json").write_text(json.dumps(s))
    return dst


def test_claims_report_and_query_on_real_runs(session_runs, tmp_path):
    from accelbench.store.query import query_runs
    from accelbench.store.sets import load_inputs

    session_run = session_runs[4]
    summary = json.loads((session_run / "summary.json").read_text())
    ideal = summary["cache"]["ideal_infinite"]
    assert 0 < ideal < 1 and summary["cache"]["hit_rate"] is None  # no server cache yet
    a = _reported(session_run, tmp_path / "res" / "a", 0.2)
    b = _reported(session_run, tmp_path / "res" / "b", 0.8)
    sa, sb = load_inputs([a, b])
    comps = compare_sets(sa, sb, claims=["B hit_rate >= A hit_rate + 10pp",
                                         "B hit_rate >= A hit_rate + 60pp"])  # fmt: skip
    (same,) = [c for c in comps if c.condition.startswith("same load")]
    (e,) = [e for e in same.estimates if e.metric == "cache_hit_rate"]
    ha, hb = (json.loads((d / "summary.json").read_text())["cache"]["hit_rate"] for d in (a, b))
    assert (e.a, e.b) == (pytest.approx(ha), pytest.approx(hb))  # the summary's figure
    assert e.diff_pp == pytest.approx(100 * (hb - ha))
    assert same.bootstrap  # the hit rates' interval: --n-boot and --seed apply
    words = [v.word for c in comps for v in c.verdicts]
    assert words[0] == "supported"  # about +30 points on the later turns' half
    assert words[1] == "refuted"

    # the CLI: the verdict line in points, exit 1 for a refuted claim
    cli = subprocess.run([*PY, "compare", str(a), str(b), "--claim",
                          "B hit_rate >= A hit_rate + 60pp"], capture_output=True, text=True)  # fmt: skip
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "refuted" in cli.stdout and "pp" in cli.stdout
    cli = subprocess.run([*PY, "compare", str(a), str(b), "--n-boot", "60", "--seed", "3",
                          "--json"], capture_output=True, text=True)  # fmt: skip
    assert cli.returncode == 0, cli.stderr  # no --at, no claim: the hit rates bootstrap

    # the report: a Prefix cache section with the three hit rates and the gap
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    rep = subprocess.run([*PY, "report", str(a), str(b), "-o", str(html), "--markdown", str(md),
                          "--claim", "B hit_rate >= A hit_rate + 10pp"],
                         capture_output=True, text=True)  # fmt: skip
    assert rep.returncode == 0, rep.stdout + rep.stderr
    text = md.read_text()
    assert "#### Prefix cache" in text and "hit rate (responses)" in text
    assert f"{100 * ideal:.1f}%" in text and "gap to the ideal" in text
    assert "| turn | 0 | 24 |" in text and "| turn | 1 | 24 |" in text  # TTFT by turn
    assert "**supported**" in text and "B - A (points)" in text
    page = html.read_text()
    assert 'id="cache"' in page and "ideal (infinite)" in page and "TTFT p50 (ms)" in page

    # runs query: the figures are columns of the runs view
    cols, rows = query_runs(tmp_path / "res", "SELECT run_id, cache_hit_rate, "
                            "cache_ideal_infinite, cache_gap_pp FROM runs ORDER BY cache_hit_rate")  # fmt: skip
    assert cols == ["run_id", "cache_hit_rate", "cache_ideal_infinite", "cache_gap_pp"]
    assert [r[1] for r in rows] == [pytest.approx(ha), pytest.approx(hb)]
    assert all(r[2] == pytest.approx(ideal) for r in rows)
    assert rows[0][3] == pytest.approx(100 * (ideal - ha))


def test_a_sweep_report_shows_the_figures_per_point(session_runs, tmp_path):
    # two loads of one workload (a sweep's points): the Prefix cache table has a row each,
    # with the hit rate from the responses, the ideal and the gap
    sweep = tmp_path / "sweep"
    a = _reported(session_runs[2], sweep / "c2", 0.3)
    b = _reported(session_runs[4], sweep / "c4", 0.6)
    md, html = tmp_path / "s.md", tmp_path / "s.html"
    rep = subprocess.run([*PY, "report", str(sweep), "-o", str(html), "--markdown", str(md)],
                         capture_output=True, text=True)  # fmt: skip
    assert rep.returncode == 0, rep.stdout + rep.stderr
    text = md.read_text()
    for d, label in ((a, "c=2"), (b, "c=4")):
        c = json.loads((d / "summary.json").read_text())["cache"]
        row = (f"| {label} | {100 * c['hit_rate']:.1f}% | 48/48 | n/a | "
               f"{100 * c['ideal_infinite']:.1f}% | n/a | {c['gap_pp']:+.1f} points |")  # fmt: skip
        assert row in text, text
    page = html.read_text()
    assert page.count("gap to the ideal") == 2  # one headline per point
    assert "sum of cached_tokens / sum of prompt tokens" in page  # the definitions


# -- the server's counters: a hit rate only where they can be true --------------------
COUNTER = st.one_of(st.none(), st.floats(0, 1e12, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(hits=COUNTER, queries=COUNTER)
def test_the_server_hit_rate_is_a_fraction_or_none(hits, queries):
    """Over any counter deltas: the hit rate is in [0, 1] or None; None (with a reason)
    where there are more hits than queries; the same figure wherever it is shown."""
    from accelbench.metrics.prefixcache import server_counter_problem, server_hit_rate

    sc = {"hits": hits, "queries": queries}
    rate, problem = server_hit_rate(sc), server_counter_problem(sc)
    assert rate is None or 0.0 <= rate <= 1.0
    assert (problem is not None) == (hits is not None and queries is not None and hits > queries)
    if problem is None and hits is not None and queries:
        assert rate == hits / queries
    else:
        assert rate is None


def test_more_hits_than_queries_is_na_on_the_console_and_in_summary_json():
    """The audit: /metrics hits growing 100x faster than queries printed 10000% on the
    console and 100.0 in summary.json, with no warning."""
    from accelbench.report.cache import headline
    from accelbench.runner.finalize import _server_count_warnings

    rows = [{c: None for c in CACHE_COLUMNS} | {"idx": i, "warmup": False, "ok": True,
            "t_send": i, "t_done": i + 1, "isl": 8, "isl_planned": 8, "osl": 4,
            "prefix_group": i % 2, "prefix_tokens": 4} for i in range(6)]  # fmt: skip
    server = {"hits": 600.0, "queries": 6.0, "block_size": 16}
    c = cache_section(rows, server)
    assert c is not None and c["hit_rate_server"] is None
    line = headline(c)
    assert "n/a from the server's counters" in line and "10000" not in line
    summary = {"client": {"warnings": [], "server_cache": server}, "tokens": {}}
    _server_count_warnings(summary)  # type: ignore[arg-type]
    assert any("600 hits of 6 queries" in w for w in summary["client"]["warnings"])


_OPT = st.one_of(st.none(), st.integers(1, 1 << 40))


@given(kv=_OPT, block=_OPT, has_cache=st.booleans(), earlier=st.lists(st.text(), max_size=3))
def test_cache_options_a_run_does_not_use_are_said(kv, block, has_cache, earlier) -> None:
    """--kv-capacity-tokens / --block-size shape only the prefix-cache figures: a run
    without them (no sessions, prefixes, trace blocks or reported cached tokens) says the
    options were not used, and keeps every earlier warning; one with them says nothing."""
    from accelbench.runner.finalize import _unused_cache_options

    summary: dict = {"client": {"warnings": list(earlier)}}
    if has_cache:
        summary["cache"] = {"hit_rate": 0.5}
    config = {"workload": {"kv_capacity_tokens": kv, "block_size": block}}
    _unused_cache_options(summary, config)  # type: ignore[arg-type]
    warnings = summary["client"]["warnings"]
    said = [w for w in warnings if "not used" in w and w not in earlier]
    given_opts = [o for o, v in (("--kv-capacity-tokens", kv), ("--block-size", block)) if v]
    assert warnings[: len(earlier)] == earlier
    if has_cache or not given_opts:
        assert not said
    else:
        assert len(said) == 1 and all(o in said[0] for o in given_opts)


def test_kv_capacity_on_a_plain_run_is_said(reference_server, tmp_path: Path) -> None:
    """The audit: `run --kv-capacity-tokens 100 --block-size 16` against a server without
    a prefix cache ran without a word; neither option was used."""
    from accelbench.runner.benchmark import run_benchmark
    from accelbench.runner.config import BenchmarkConfig, WorkloadConfig

    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    wl = WorkloadConfig(isl=16, osl=4, kv_capacity_tokens=100, block_size=16)
    cfg = BenchmarkConfig(url=srv.url, out_dir=str(tmp_path / "r"), num_requests=4,
                          telemetry=False, workload=wl)  # fmt: skip
    s = run_benchmark(cfg, progress=False).summary
    assert "cache" not in s
    assert any(
        w.startswith("--kv-capacity-tokens and --block-size not used")
        for w in s["client"]["warnings"]
    )


# -- sessions: completed, ended early, stopped ------------------------------------------
def _turn_row(session: int, turn: int, planned: int | None, ok: bool, kind=None) -> dict:
    row = dict.fromkeys(CACHE_COLUMNS)
    t = 1_000_000_000 * (session * 10 + turn)
    row |= {"idx": session * 100 + turn, "warmup": False, "ok": ok, "error_kind": kind,
            "t_send": t, "t_done": t + 500_000_000 if ok else None, "isl": 10 * (turn + 1),
            "session": session, "turn": turn, "session_turns": planned}  # fmt: skip
    return row


_SESSION = st.tuples(
    st.integers(1, 5),  # planned turns
    st.integers(1, 5),  # turns recorded (at most the planned)
    st.sampled_from(["ok", "failed", "interrupted"]),  # how the last recorded turn ended
)


@given(st.lists(_SESSION, min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_sessions_are_completed_ended_early_or_stopped(sessions):
    """Any sessions: each one is exactly one of completed (every planned turn answered),
    ended early (a turn failed) or stopped (the run's stop cut it: an interrupted turn,
    or fewer turns than planned with none failed); only completed ones have a time to
    finish. A stopped session counted as completed before."""
    rows, want = [], {"completed": 0, "ended_early": 0, "stopped": 0}
    for s, (planned, n, last) in enumerate(sessions):
        n = min(n, planned)
        for k in range(n):
            end = last if k == n - 1 else "ok"
            kind = {"ok": None, "failed": "http_5xx", "interrupted": "interrupted"}[end]
            rows.append(_turn_row(s, k, planned, end == "ok", kind))
        if last == "failed":
            want["ended_early"] += 1
        elif last == "interrupted" or n < planned:
            want["stopped"] += 1
        else:
            want["completed"] += 1
    ss = cache_section(rows, None)["sessions"]
    assert {k: ss[k] for k in want} == want and ss["n"] == len(sessions)
    assert ss["time_to_finish_s"]["count"] == want["completed"]


def test_a_session_the_stop_cut_is_not_completed():
    """The audit's case: a 5-turn session with 4 turns answered when Ctrl-C came, one with
    1, and one whole: 1 completed, 2 stopped (it said 3 completed); records of a run
    written before the field (no session_turns) read as before."""
    rows = [_turn_row(0, k, 5, True) for k in range(4)] + [_turn_row(1, 0, 5, True)]
    rows += [_turn_row(2, k, 5, True) for k in range(5)]
    ss = cache_section(rows, None)["sessions"]
    assert (ss["n"], ss["completed"], ss["ended_early"], ss["stopped"]) == (3, 1, 0, 2)
    assert ss["time_to_finish_s"]["count"] == 1
    old = [r | {"session_turns": None} for r in rows]
    assert cache_section(old, None)["sessions"]["completed"] == 3
