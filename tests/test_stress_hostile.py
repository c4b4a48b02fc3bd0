"""Checked before anything runs (docs/LIMITS.md), for every option of `stress` (soak,
mixed, consistency, flood), `monitor` (and `monitor rules` / `dashboard`), `health` and
`report`: Hypothesis feeds each option hostile values of its kind (NaN, infinities,
negative, huge, empty, odd strings, unbalanced quotes, FIFOs, directories for files, an
output that is an input) through the real CLI, in process, and asserts: exit 2, exactly
one line on stderr starting with ``error:``, nothing on stdout, no traceback, no file
written or changed, and quickly.

Every command is otherwise valid and would run: a hostile value that slipped through
would reach a closed port (stress), serve for 0 s (monitor) or write its file (report,
rules), and fail the "exit 2, nothing written" assertion.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_inprocess import run_cli
from conftest import fixture_file

CLOSED = "http://127.0.0.1:1"
CLOSED2 = "http://127.0.0.1:2"
L4 = fixture_file("telemetry", "dcgm-exporter_metrics__l4__drv580.105.08__default-counters.prom")
QUICK_S = 5.0  # a check is milliseconds; an engine start or a run would take longer

# -- hostile values, by kind ---------------------------------------------------------------
NON_FINITE = st.sampled_from(["nan", "NaN", "inf", "-inf", "+inf", "1e400", "-1e400"])
JUNK = st.sampled_from(["", " ", "abc", "1,5", "0x", "--", "1e", "[/red]"])


def numbers(lo: float, hi: float, lo_open: bool = False) -> st.SearchStrategy[str]:
    """Text of a number outside [lo, hi] (or (lo, hi]), or not a finite number at all."""
    below = st.floats(max_value=lo, exclude_max=not lo_open, allow_nan=False, allow_infinity=False)
    above = st.floats(min_value=hi, exclude_min=True, allow_nan=False, allow_infinity=False)
    return st.one_of(NON_FINITE, JUNK, below.map(repr), above.map(repr))


def integers(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.one_of(
        NON_FINITE,
        JUNK,
        st.integers(max_value=lo - 1).map(str),
        st.integers(min_value=hi + 1).map(str),
        st.sampled_from(["1.5", "2.0001", "1e3"]).filter(lambda s: True),
    )


def choices(allowed: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.one_of(
        JUNK, st.text(min_size=1, max_size=12).filter(lambda s: s.strip() not in allowed)
    )


CMD = st.sampled_from(["'unbalanced", '"', "a 'b", "", "   ", 'echo "x', "\\"])
URL = st.sampled_from(
    ["", "ftp://127.0.0.1:21", "not a url", "http://", "http://127.0.0.1:99999", "http://[::1"]
)
PROM = st.one_of(
    st.sampled_from(['x"} or vector(1) #', "a b", "1abc", "amd-", "é", "a\n"]),
    st.text(min_size=1, max_size=10).filter(lambda s: not s.replace("_", "a").isalnum()),
)

# file-system kinds: names of things the fixture makes in the box
IN_FILE = st.sampled_from(["fifo", "adir", "missing.xml", "/dev/zero"])
OUT_FILE = st.sampled_from(["adir", "fifo", "afile/x.out", "input"])
NEW_FILE = st.sampled_from(["adir", "fifo", "afile/x.out", ""])  # a command with no input
OUT_DIR = st.sampled_from(["afile", "afile/sub"])


def _ints(lo: int, hi: int) -> st.SearchStrategy[str]:
    return integers(lo, hi)


# -- the commands: (base args, option, strategy) -------------------------------------------
SOAK = [
    "stress",
    "soak",
    "--url",
    CLOSED,
    "--duration",
    "5",
    "--window",
    "1",
    "--out",
    "out/soak",
    "-q",
]
MIXED = ["stress", "mixed", "--url", CLOSED, "--url", CLOSED2, "--duration", "1", "--out",
         "out/mixed", "-q"]  # fmt: skip
CONS = ["stress", "consistency", "--url", CLOSED, "--out", "out/cons", "-q"]
FLOOD = ["stress", "flood", "--url", CLOSED, "--lengths", "16", "--out", "out/flood", "-q"]
MON = ["monitor", "--replay", str(L4), "--no-exporter", "--duration", "0"]
MON_EXPORTER = ["monitor", "--replay", str(L4), "--port", "0", "--duration", "0"]
RULES = ["monitor", "rules", "-o", "out/rules.yml"]
DASH = ["monitor", "dashboard", "-o", "out/dash.json"]
HEALTH = ["health", "--file", str(L4)]
REPORT = ["report", "results/a", "-o", "out/r.html"]

# load options every stress suite shares (their bounds: docs/LIMITS.md)
LOAD = [
    ("--rate", numbers(1e-3, 1e6)),
    ("--isl", _ints(1, 1 << 20)),
    ("--osl", _ints(1, 1 << 20)),
    ("--seed", _ints(0, (1 << 32) - 1)),
    ("--timeout", numbers(0, 30 * 86400, lo_open=True)),
    ("--gpus", _ints(1, 1_000_000)),
    ("--dataset", IN_FILE),
    ("--out", OUT_DIR),
    ("--extra-body", st.sampled_from(["{", "[]", "@fifo", "@adir", "1"])),
]

CASES: list[tuple[list[str], str, st.SearchStrategy[str]]] = [
    # soak
    *[(SOAK, o, s) for o, s in LOAD if o != "--rate"],
    (SOAK, "--duration", numbers(1, 30 * 86400)),
    (SOAK, "--window", numbers(1, 86400)),
    (SOAK, "--segment", numbers(5, 30 * 86400)),
    (SOAK, "--sample-interval", numbers(0.1, 60)),  # at most --window
    (SOAK, "--server-pid", _ints(1, 1 << 22)),
    (SOAK, "--metric", PROM),
    (SOAK, "--leak-warn", numbers(0, 32)),  # at most --leak-fail (32 MiB/h)
    (SOAK, "--leak-fail", numbers(4, 2**30)),  # MiB/h: 1 PiB/h
    (SOAK, "--exhaustion-horizon", numbers(0, 1e6, lo_open=True)),
    (SOAK, "--drift-warn", numbers(0, 20)),
    (SOAK, "--drift-fail", numbers(5, 1e6)),
    (SOAK, "--warn-errors", numbers(0, 0.05)),  # at most --fail-errors (0.05)
    (SOAK, "--fail-errors", numbers(0, 1)),
    (SOAK, "--resume", st.sampled_from(["fifo", "afile", "missing", "adir"])),
    # mixed
    *[(MIXED, o, s) for o, s in LOAD],
    (MIXED, "--duration", numbers(1, 30 * 86400)),
    (MIXED, "--rounds", _ints(1, 1000)),
    (MIXED, "--window", numbers(0.1, 86400)),
    (MIXED, "--claim", numbers(0, 1e6)),
    (MIXED, "--claim-stat", choices(("jitter", "change"))),
    (MIXED, "--warn", numbers(0, 50)),
    (MIXED, "--fail", numbers(10, 1e6)),
    (MIXED, "--stagger", numbers(0, 3600)),
    (
        MIXED,
        "--url",
        st.sampled_from(
            [
                f"{CLOSED},isl=nan",
                f"{CLOSED},osl=-1",
                f"{CLOSED},rate=inf",
                f"{CLOSED},concurrency=0",
                f"{CLOSED},isl=1e30",
                f"{CLOSED},bogus=1",
            ]
        ),
    ),  # fmt: skip
    # consistency
    *[(CONS, o, s) for o, s in LOAD if o != "--rate"],
    (CONS, "--url", URL),
    (CONS, "--prompts", _ints(1, 100_000)),
    (CONS, "--repeats", _ints(1, 10_000)),
    (CONS, "--pause", numbers(0, 86400)),
    (CONS, "--loaded-concurrency", _ints(2, 100_000).filter(lambda s: s != "0")),
    (CONS, "--warn-divergent", numbers(0, 0.05)),
    (CONS, "--fail-divergent", numbers(0, 1)),
    # flood
    *[(FLOOD, o, s) for o, s in LOAD if o not in ("--rate", "--isl", "--osl", "--dataset")],
    (FLOOD, "--lengths", st.sampled_from(["0", "-1", "nan", "1,x", "99999999999", ""])),
    (FLOOD, "--max-context", _ints(1, 1 << 22)),
    (FLOOD, "--concurrencies", st.sampled_from(["0", "-1", "1,x", "", "1000000"])),
    (FLOOD, "--requests", _ints(1, 1_000_000)),
    (FLOOD, "--osl", _ints(1, 1 << 20)),
    (FLOOD, "--context", _ints(1, 1 << 22)),
    (FLOOD, "--server-pid", _ints(1, 1 << 22)),
    (FLOOD, "--metric", PROM),
    (FLOOD, "--warn-errors", numbers(0, 0.05)),
    (FLOOD, "--fail-errors", numbers(0, 1)),
    # monitor
    (MON, "--interval", numbers(0.05, 86400)),
    (MON, "--window", numbers(0, 30 * 86400)),
    (MON, "--duration", numbers(0, 30 * 86400)),
    (MON_EXPORTER, "--port", _ints(0, 65535)),  # not with --no-exporter
    (MON_EXPORTER, "--host", st.sampled_from(["", " ", "no such host!", "[::1", "1.2.3.4.5"])),
    (MON + ["--source", "server"], "--server-url", URL),  # with --replay: beside a source
    (MON + ["--source", "host"], "--pid", _ints(1, 1 << 22)),
    (MON, "--replay", IN_FILE),
    (MON, "--replay-format", choices(("dcgm", "nvidia-smi-xml"))),
    (MON, "--source", choices(("host", "server", "nvml"))),
    (MON, "--alert-cmd", CMD),
    (MON, "--webhook", URL),
    (MON, "--recover-cmd", CMD),
    (MON + ["--recover-cmd", "true"], "--recover-on", choices(("ecc", "any", "temperature"))),
    (MON + ["--recover-cmd", "true"], "--recover-severity", choices(("warn", "fail"))),
    (MON + ["--recover-cmd", "true"], "--recover-cooldown", numbers(0, 30 * 86400)),
    (MON + ["--recover-cmd", "true"], "--recover-max-per-hour", _ints(1, 3600)),
    (MON + ["--recover-cmd", "true"], "--recover-log", OUT_FILE),
    # monitor rules / dashboard
    (RULES, "--window", numbers(0.001, 30 * 86400)),
    (RULES, "--for", numbers(0, 30 * 86400)),
    (RULES, "--temp-margin", numbers(0, 100)),
    (RULES, "--queue-max", numbers(0, 1e9)),
    (RULES, "--error-rate-max", numbers(0, 1)),
    (RULES, "--amd-temp-limit", numbers(0, 200, lo_open=True)),
    (RULES, "--amd-prefix", PROM),
    (RULES, "--no-data-for", numbers(0, 3599)),
    (RULES, "--flavour", choices(("accelbench", "dcgm", "amd"))),
    (RULES, "-o", NEW_FILE),
    (DASH, "--uid", st.sampled_from(["", "a b", "x" * 41, "ü", 'a"b'])),
    (DASH, "--title", st.sampled_from(["", " ", "a\nb", "x" * 201])),
    (DASH, "-o", NEW_FILE),
    # health
    (HEALTH, "--temp-margin", numbers(0, 100)),
    (HEALTH, "--format", choices(("dcgm", "nvidia-smi-xml"))),
    (["health", "--source", "host"], "--duration", numbers(0, 86400)),
    (["health", "--source", "host"], "--interval", numbers(0.05, 3600)),
    (["health", "--source", "server"], "--server-url", URL),
    (["health", "--source", "host"], "--pid", _ints(1, 1 << 22)),
    (["health"], "--file", IN_FILE),
    # report
    (REPORT, "--attainment", numbers(0, 1, lo_open=True)),
    (REPORT, "--at", st.one_of(NON_FINITE, JUNK, st.floats(max_value=0).map(repr))),
    (REPORT, "--n-boot", _ints(100, 1_000_000)),
    (REPORT, "--slo", st.sampled_from(["ttft_ms=nan", "ttft_ms=-1", "bogus=1", "ttft_ms"])),
    (REPORT, "-o", OUT_FILE),
    (REPORT, "--markdown", OUT_FILE),
]


# -- the box -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from synthetic_runs import make_run

    root = tmp_path_factory.mktemp("hostile")
    make_run(root / "results" / "a", concurrency=4)
    (root / "adir").mkdir()
    (root / "afile").write_text("a file, not a directory\n")
    os.mkfifo(root / "fifo")
    return root


def _resolve(val: str, root: Path, base: list[str]) -> str:
    """File-system kinds name things in the box; "input" is a file the command reads."""
    if val == "input":
        if base[0] == "report":
            return "results/a/summary.json"
        if base[0] == "monitor" and "--replay" in base:
            return str(L4)
        raise AssertionError(f"{base}: no input to name")
    return val


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    } | {str(p.relative_to(root)) + "/": "" for p in root.rglob("*") if p.is_dir()}


invoke = run_cli


def check_refused(box: Path, args: list[str]) -> None:
    before = snapshot(box)
    code, out, err, took = invoke(args, box)
    shown = f"{args}\nstdout: {out!r}\nstderr: {err!r}"
    assert code == 2, shown
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), shown
    assert "Traceback" not in err + out and "internal error" not in err, shown
    assert out == "", shown
    assert snapshot(box) == before, shown
    assert took < QUICK_S, (took, shown)


HYP = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize(
    ("base", "option", "values"),
    CASES,
    ids=[
        f"{' '.join(b[:2] if b[0] != 'monitor' or b[1] in ('rules', 'dashboard') else b[:1])} {o}"
        for b, o, _ in CASES
    ],  # fmt: skip
)
@HYP
@given(data=st.data())
def test_hostile_option_is_refused_before_anything_runs(
    box: Path, base: list[str], option: str, values: st.SearchStrategy[str], data: st.DataObject
) -> None:
    val = _resolve(data.draw(values, label=option), box, base)
    check_refused(box, [*base, f"{option}={val}"] if option.startswith("--") else
                  [*base, option, val])  # fmt: skip


# -- the issue's examples, as concrete cases ---------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        MON_EXPORTER + ["--port", "70000"],
        MON + ["--alert-cmd", "notify 'unbalanced"],
        MON + ["--recover-cmd", 'reset "gpu'],
        ["monitor", "--replay", "fifo", "--no-exporter", "--duration", "0"],  # hung before
        MON + ["--recover-cmd", "true", "--recover-log", "adir"],  # died at the 1st recovery
        MON + ["--recover-cmd", "true", "--recover-cooldown", "nan"],  # was "no cool-down"
        MON + ["--recover-log", "out/r.jsonl"],  # without --recover-cmd: never silently unused
        ["report", "results/a", "-o", "results/a/summary.json"],  # overwrote its input
        ["report", "results/a", "-o", "out/r.html", "--markdown", "out/r.html"],
        # a manifest written over a file of the model it hashes
        ["doctor", "weights", "results/a", "--write-manifest", "-o", "results/a/run.json"],
        ["monitor", "rules", "--amd-prefix", 'x"} or vector(1) #'],
        # ep1's override is bad: refused before ep0's phase runs
        MIXED[:4] + [f"{CLOSED2},isl=0", *MIXED[6:]],
        ["stress", "soak", "--resume", "results/a", "-q"],  # not a soak
        # a load option the steps would ignore (-c beside --rate): refused before the
        # stress directory is made, not when the first step runs
        MIXED + ["--rate", "2", "-c", "8"],
        SOAK + ["--rate", "2", "-c", "8"],
        MIXED + ["--burstiness", "2"],  # without --arrival gamma
        # a step given twice ran the earlier steps, then found its directory taken (exit 2,
        # no stress.json: the finished steps never judged)
        FLOOD[:4] + ["--lengths", "16,32,16", *FLOOD[6:]],
        FLOOD + ["--concurrencies", "1,2,1"],
        # an open-loop option in a closed-loop suite: refused when the first step started
        FLOOD + ["--arrival", "gamma"],
        CONS + ["--max-concurrency", "4"],
        CONS + ["--warmup", "3"],  # was silently ignored (every step forced 0)
        # ep0's isl=1 was silently replaced by isl=2; model= was sent as an empty name
        MIXED[:3] + [f"{CLOSED},isl=1,isl=2", *MIXED[4:]],
        MIXED[:3] + [f"{CLOSED},model=", *MIXED[4:]],
    ],
)
def test_issue_examples(box: Path, args: list[str]) -> None:
    check_refused(box, args)


@HYP
@given(
    xs=st.lists(st.integers(1, 1 << 16), min_size=1, max_size=6),
    data=st.data(),
    which=st.sampled_from(["lengths", "concurrencies"]),
)
def test_a_flood_step_given_twice_is_refused(xs: list[int], data: st.DataObject, which: str):
    from accelbench.errors import UsageError
    from accelbench.runner.config import BenchmarkConfig
    from accelbench.suites.stress.flood import FloodConfig

    twice = xs + [data.draw(st.sampled_from(xs))]
    twice = data.draw(st.permutations(twice))
    load = BenchmarkConfig(url=CLOSED)
    kw = {which: twice} if which == "concurrencies" else {}
    cfg = FloodConfig(load, twice if which == "lengths" else [16], requests=1, **kw)
    with pytest.raises(UsageError, match=f"--{which} gives .* more than once"):
        cfg.validate()
    once = sorted(set(twice))
    FloodConfig(load, once if which == "lengths" else [16], requests=1,
                **({which: once} if which == "concurrencies" else {})).validate()  # fmt: skip


@HYP
@given(
    pairs=st.lists(
        st.sampled_from(["isl=16", "osl=4", "concurrency=2", "rate=3", "model=m"]),
        min_size=1, max_size=4, unique=True,
    ),
    data=st.data(),
)  # fmt: skip
def test_an_endpoint_key_given_twice_is_refused(pairs: list[str], data: st.DataObject) -> None:
    from accelbench.cli.stress import _endpoint_cfg
    from accelbench.errors import UsageError
    from accelbench.runner.config import BenchmarkConfig

    key = data.draw(st.sampled_from(pairs)).partition("=")[0]
    again = data.draw(st.sampled_from(["", "1", "x", "2.5"]))
    spec = ",".join([CLOSED, *data.draw(st.permutations([*pairs, f"{key}={again}"]))])
    with pytest.raises(UsageError, match=f"'{key}' more than once|{key}= is empty"):
        _endpoint_cfg(spec, BenchmarkConfig(url=CLOSED))
    _endpoint_cfg(",".join([CLOSED, *pairs]), BenchmarkConfig(url=CLOSED))  # each once: fine


def test_report_output_linked_to_an_input_is_refused(box: Path) -> None:
    """The same file by another name (hard link, symlink) is the input too."""
    target = box / "results" / "a" / "summary.json"
    links = box / "links"
    links.mkdir(exist_ok=True)
    try:
        os.link(target, links / "hard.json")
        (links / "soft.json").symlink_to(target)
        for name in ("hard.json", "soft.json"):
            check_refused(box, ["report", "results/a", "-o", f"links/{name}"])
    finally:
        for p in links.iterdir():
            p.unlink()
        links.rmdir()


# -- the Python API refuses the same values with the same words (one validation layer) ----
def _api_cases() -> list[tuple[str, object]]:
    from dataclasses import replace

    from accelbench.health.monitor import Monitor
    from accelbench.monitoring.recovery import RecoveryPolicy
    from accelbench.monitoring.rules import AlertSettings, rules_yaml
    from accelbench.runner.config import BenchmarkConfig
    from accelbench.suites.stress.consistency import ConsistencyConfig
    from accelbench.suites.stress.flood import FloodConfig
    from accelbench.suites.stress.mixed import MixedConfig
    from accelbench.suites.stress.soak import SoakConfig
    from accelbench.telemetry.exporter import Exporter
    from accelbench.urls import Endpoint
    from accelbench.workload.config import WorkloadConfig

    def ep(url: str, isl: int = 16) -> BenchmarkConfig:
        return BenchmarkConfig(url=url, workload=WorkloadConfig(isl=isl))

    return [
        ("--port", lambda: Exporter(port=70000)),
        ("--webhook", lambda: Monitor([], 1.0, webhook="ftp://x")),
        ("--alert-cmd", lambda: Monitor([], 1.0, alert_cmd=[])),
        (
            "--recover-cooldown",
            lambda: RecoveryPolicy(["true"], cooldown_s=float("nan")).validate(),
        ),
        ("--recover-log", lambda: RecoveryPolicy(["true"], log_path=Path("/")).validate()),
        ("--amd-prefix", lambda: rules_yaml(["amd"], AlertSettings(amd_prefix='x"}'))),
        ("ep1", lambda: MixedConfig([ep(CLOSED), ep(CLOSED2, isl=0)]).validate()),
        ("--server-pid", lambda: SoakConfig(ep(CLOSED), 100.0, server_pid=-1).validate()),
        ("--metric", lambda: SoakConfig(ep(CLOSED), 100.0, metrics=["a b"]).validate()),
        ("--warn-errors", lambda: SoakConfig(ep(CLOSED), 100.0, warn_errors=0.1).validate()),
        ("--fail-errors", lambda: FloodConfig(ep(CLOSED), [16], fail_errors=1.5).validate()),
        ("--lengths", lambda: FloodConfig(ep(CLOSED), [16, 16]).validate()),
        ("--arrival", lambda: FloodConfig(replace(ep(CLOSED), arrival="gamma"), [16]).validate()),
        ("--warmup", lambda: ConsistencyConfig(
            replace(ep(CLOSED), warmup_requests=2), [Endpoint.parse(CLOSED)]).validate()),
        ("--burstiness", lambda: ConsistencyConfig(
            replace(ep(CLOSED), burstiness=2.0), [Endpoint.parse(CLOSED)]).validate()),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(15))
def test_the_api_refuses_the_same_values(case: int) -> None:
    from accelbench.errors import UsageError

    name, call = _api_cases()[case]
    with pytest.raises(UsageError, match=name):
        call()  # type: ignore[operator]


@given(st.text())
def test_an_error_message_is_always_one_line(text: str) -> None:
    from accelbench.console import one_line

    assert len(one_line(f"x {text} y").splitlines()) == 1


def test_a_report_in_a_run_directory_may_be_written_again(tmp_path: Path) -> None:
    """A report's own kind (.html, .md) inside an input directory is never read, so a
    rerun may overwrite it; the run's files, and a link to one named .html, stay refused."""
    from synthetic_runs import make_run

    make_run(tmp_path / "results" / "a", concurrency=4)
    for _ in range(2):
        code, out, err, _took = invoke(
            ["report", "results/a", "-o", "results/a/report.html",
             "--markdown", "results/a/report.md"], tmp_path,
        )  # fmt: skip
        assert code == 0, err
    (tmp_path / "results" / "a" / "evil.html").symlink_to("summary.json")
    check_refused(tmp_path, ["report", "results/a", "-o", "results/a/evil.html"])
    check_refused(tmp_path, ["report", "results/a", "-o", "results/a/run.json"])


@pytest.mark.parametrize(
    "option", ["--trace", "--dataset", "--dataset-format", "--isl-std", "--arrival",
               "--burstiness", "--max-concurrency"],
)  # fmt: skip
def test_flood_offers_no_option_its_steps_cannot_use(option: str) -> None:
    """The audit: `stress flood --trace t.jsonl` was refused with '--concurrency does not
    apply to it' (never given: each step is a closed loop of --lengths-token prompts);
    --help listed these options. They are not flood's options now."""
    from typer.testing import CliRunner

    from accelbench.cli.main import app

    r = CliRunner().invoke(app, ["stress", "flood", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and f" {option} " not in r.output
    r = CliRunner().invoke(app, ["stress", "flood", "--lengths", "16", option, "1"])
    assert r.exit_code == 2 and "No such option" in r.output


@settings(max_examples=60, deadline=None)
@given(duration=st.floats(1.0, 30 * 86400.0), window=st.floats(1.0, 86400.0))
def test_a_soak_window_longer_than_its_duration_is_refused(duration: float, window: float) -> None:
    """`stress soak -d 2 --window 10` (or -d 30 with the 60 s default) ran, read no whole
    window and judged nothing (every verdict n/a): refused in one line naming both."""
    from accelbench.errors import UsageError
    from accelbench.runner.config import BenchmarkConfig
    from accelbench.suites.stress.soak import SoakConfig

    cfg = SoakConfig(BenchmarkConfig(url=CLOSED), duration, window_s=window,
                     segment_s=max(window, 3600.0), sample_s=min(window, 5.0))  # fmt: skip
    if window > duration:
        with pytest.raises(UsageError, match=r"^--window .* longer than --duration .*: no window"):
            cfg.validate()
    else:
        cfg.validate()
