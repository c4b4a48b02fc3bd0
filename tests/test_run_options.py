"""Every option of `run` (and `sweep`, which shares them) is honoured or refused: never
recorded in run.json as if used. A Hypothesis property over option combinations builds
the configuration exactly as the CLI does, and for every combination accepted checks
that the load the run would send (the worker specs derived from it) is what the
recorded configuration says; every conflicting one is refused with one line naming an
option. The oracle below restates docs/LIMITS.md "Combinations" independently of
``BenchmarkConfig.check_run_options``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.cli.options import SHARED, LoadOptions, config_from_options, long_option
from accelbench.errors import UsageError
from accelbench.runner.benchmark import (
    _worker_specs,
    planned_measured,
    resolve_workers,
    schedule_doc,
)
from accelbench.runner.config import run_mode
from accelbench.workload.plan import PlannedRequest, arrival_offsets
from accelbench.workload.traces import load_trace

TRACE_N = 10  # requests in the test trace
SESSION = {"turns": "4", "think_time": "0"}  # the session options' defaults
# options a command line may give at their default value (the property types some)
AT_DEFAULT = ("arrival", "burstiness", "dataset_format", "telemetry_interval", "api_key_env",
              "results_root", "embedded_model", "isl", "isl_dist", "osl_dist", "range_ratio",
              "turns", "think_time")  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("opts")
    trace = d / "mooncake.jsonl"
    # Mooncake: arrival in ms since the first request; irregular gaps
    times = [0, 40, 45, 200, 210, 400, 420, 425, 800, 1000]
    trace.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": 8 + i, "output_length": 4}) + "\n"
            for i, t in enumerate(times)
        )
    )
    dataset = d / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(5)))
    key = d / "key"
    key.write_text("k\n")
    # a trace of recorded requests (shadow proxy's trace.jsonl): each replayed as recorded
    from accelbench.workload.traces import trace_header, trace_row

    body = {"model": "m", "prompt": "hi", "max_tokens": 3, "stream": True}
    recorded = d / "recorded.jsonl"
    rows = [trace_header(), *(trace_row(i, 0.05 * i, "completions", body) for i in range(4))]
    recorded.write_text("".join(json.dumps(x) + "\n" for x in rows))
    # lengths and hash_ids (--block-size read); ShareGPT: prompts, no times (--osl read)
    blocks = d / "blocks.jsonl"
    blocks.write_text("".join(json.dumps({"timestamp": 10 * i, "input_length": 600, "output_length": 4,
                                          "hash_ids": [i, i + 1]}) + "\n" for i in range(4)))  # fmt: skip
    sharegpt = d / "sharegpt.json"
    conv = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}
    sharegpt.write_text(json.dumps([conv] * 4))
    tok = d / "tokenizer.json"
    tok.write_text("{}")
    return {"trace": str(trace), "dataset": str(dataset), "key": str(key), "dir": str(d),
            "recorded": str(recorded), "blocks": str(blocks), "sharegpt": str(sharegpt),
            "tokenizer": str(tok)}  # fmt: skip


# -- the oracle: docs/LIMITS.md "Combinations", restated --------------------------------
def conflicts(o: dict[str, Any], typed: frozenset[str] = frozenset()) -> set[str]:
    """The options of ``o`` that the run would ignore (empty: the combination is fine).
    An option counts as set when it differs from its default or is in ``typed`` (the
    command line gave it, at whatever value)."""

    def set_(k: str, default: Any) -> bool:
        return k in typed or o[k] != default

    bad: set[str] = set()
    trace, dataset = o["trace"] is not None, o["dataset"] is not None
    rate = o["rate"] is not None
    closed = not rate and not trace
    if o["url"] is not None:
        bad |= {f"--{k.replace('_', '-')}" for k in ("embedded_model",) if set_(k, "smollm2")}
    if o["out"] is not None:
        if set_("results_root", "results"):
            bad.add("--results-root")
        if o["label"] is not None:
            bad.add("--label")
    if not o["telemetry"] and set_("telemetry_interval", 1.0):
        bad.add("--telemetry-interval")
    if o["api_key_file"] is not None and set_("api_key_env", "OPENAI_API_KEY"):
        bad.add("--api-key-env")
    elif set_("api_key_env", "OPENAI_API_KEY") and not os.environ.get(o["api_key_env"]):
        bad.add("--api-key-env")  # an explicitly named variable that would send no key
    shape_isl = set_("isl", 128) or set_("isl_dist", "fixed") or set_("range_ratio", 0.0)
    shape_isl = shape_isl or o["isl_std"] is not None
    if trace:
        if rate:
            bad.add("--rate")
        if o["concurrency"] is not None:
            bad.add("--concurrency")
        if set_("arrival", "poisson"):
            bad.add("--arrival")
        if set_("burstiness", 1.0):
            bad.add("--burstiness")
        if dataset:
            bad.add("--dataset")
        if set_("dataset_format", "auto"):
            bad.add("--dataset-format")
        if shape_isl or set_("osl_dist", "fixed"):
            bad |= {"--isl", "--isl-dist", "--osl-dist", "--range-ratio", "--isl-std"}
        if o["warmup"] >= TRACE_N:
            bad.add("--warmup")
        elif o["num_requests"] is not None and o["warmup"] + o["num_requests"] > TRACE_N:
            bad.add("--num-requests")
    elif rate:
        if o["concurrency"] is not None:
            bad.add("--concurrency")
        if set_("burstiness", 1.0) and o["arrival"] != "gamma":
            bad.add("--burstiness")
    else:
        if o["max_concurrency"] is not None:
            bad.add("--max-concurrency")
        if set_("arrival", "poisson"):
            bad.add("--arrival")
        if set_("burstiness", 1.0):
            bad.add("--burstiness")
    if not trace:
        if dataset:
            if shape_isl or set_("osl_dist", "fixed"):
                bad |= {"--isl", "--isl-dist", "--osl-dist", "--range-ratio", "--isl-std"}
        else:
            if set_("dataset_format", "auto"):
                bad.add("--dataset-format")
            uniform = "uniform" in (o["isl_dist"], o["osl_dist"])
            if set_("range_ratio", 0.0) and not uniform:
                bad.add("--range-ratio")
            if o["isl_std"] is not None and o["isl_dist"] not in ("normal", "lognormal"):
                bad.add("--isl-std")
    # no --sessions here: what shapes sessions is unused
    bad |= {f"--{k.replace('_', '-')}" for k in ("turns", "think_time") if set_(k, SESSION[k])}
    if o["workers"] is not None and not bad:
        streams = (o["concurrency"] or 1) if closed else o["max_concurrency"]
        if streams is not None and o["workers"] > streams:
            bad.add("--workers")
        n = o["num_requests"]
        if n is None and trace:
            n = TRACE_N - o["warmup"]
        if n is None and not trace and o["duration"] is None:
            n = max(10, 10 * (o["concurrency"] or 1))  # the default -n
        if n is not None and o["workers"] > n:
            bad.add("--workers")
    return bad


def choices(files: dict[str, str]) -> dict[str, list[Any]]:
    """Each option's values to try, its default first."""
    return {
        "rate": [None, 50.0],
        "concurrency": [None, 1, 3],
        "max_concurrency": [None, 1, 4],
        "workers": [None, 1, 2, 5],
        "trace": [None, files["trace"]],
        "dataset": [None, files["dataset"]],
        "dataset_format": ["auto", "prompts"],
        "arrival": ["poisson", "constant", "gamma"],
        "burstiness": [1.0, 0.5],
        "warmup": [0, 2, TRACE_N],
        "num_requests": [None, 4, 9],
        "duration": [None, 5.0],
        "isl": [128, 64],
        "isl_dist": ["fixed", "uniform", "normal"],
        "osl_dist": ["fixed", "uniform"],
        "range_ratio": [0.0, 0.5],
        "isl_std": [None, 3.0],
        "seed": [0, 7],
        "telemetry": [True, False],
        "telemetry_interval": [1.0, 2.0],
        "url": [None, "http://127.0.0.1:9"],
        "embedded_model": ["smollm2", "tiny"],
        "out": [None, files["dir"] + "/run"],
        "label": [None, "x"],
        "results_root": ["results", files["dir"] + "/root"],
        "api_key_file": [None, files["key"]],
        "api_key_env": ["OPENAI_API_KEY", "MY_KEY"],
        "turns": ["4", "2"],
        "think_time": ["0", "0.5"],
    }


@st.composite
def options(draw: st.DrawFn, files: dict[str, str]) -> dict[str, Any]:
    """A command line: a few options moved off their defaults (drawing every option at
    random would make nearly every combination a conflict, and leave the accepted ones,
    where an option could be ignored silently, almost untested)."""
    c = choices(files)
    o = {k: v[0] for k, v in c.items()}
    for k in draw(st.sets(st.sampled_from(sorted(c)), max_size=7)):
        o[k] = draw(st.sampled_from(c[k]))
    return o


def fake_plan(cfg, total: int) -> list[PlannedRequest]:
    """The plan's shape without a server: the trace's own arrival offsets, or none."""
    if cfg.workload.trace:
        entries = load_trace(cfg.workload.trace, limit=total).entries
        return [PlannedRequest("x", 4, 8, offset_s=e.offset_s) for e in entries]
    return [PlannedRequest("x", 4, 8) for _ in range(total)]


def check_derived_load(cfg) -> None:
    """The worker specs a run would start from ``cfg``, against its recorded config."""
    rec = cfg.to_json()  # what run.json records
    n_warm, n_meas = cfg.warmup_requests, planned_measured(cfg)
    n_workers = resolve_workers(cfg, n_meas)
    plan = fake_plan(cfg, n_warm + n_meas)
    specs = _worker_specs(cfg, plan, n_warm, n_workers, None, "t")
    doc = schedule_doc(cfg, specs, 0)
    mode = run_mode(rec)
    assert doc["mode"] == mode
    if rec["workers"] is not None:
        assert len(specs) == rec["workers"]  # never silently fewer
    meas = [p for s in specs for p in s.phases if p.name == "measured"]
    assert len(meas) == len(specs)
    for p in meas:
        assert p.duration_s == rec["duration_s"]
        # -n and -d together: whichever comes first (the plan is not cycled past -n)
        assert p.cycle == (rec["num_requests"] is None)
    if rec["num_requests"] is not None:
        assert n_meas == rec["num_requests"]
    if mode == "concurrency":
        assert all(p.offsets is None for p in meas)
        assert sum(p.concurrency or 0 for p in meas) == rec["concurrency"]
        assert all((p.concurrency or 0) >= 1 for p in meas)
        assert rec["max_concurrency"] is None
    else:
        assert rec["concurrency"] is None  # an open loop never says "concurrency N"
        # the union of the workers' schedules is the plan's, each arrival once
        got = sorted(
            (i, off) for p in meas for (i, _), off in zip(p.items, p.offsets or [], strict=True)
        )
        assert [i for i, _ in got] == list(range(n_warm, n_warm + n_meas))
        offs = np.array([off for _, off in got])
        if mode == "trace":
            want = np.array([q.offset_s for q in plan[n_warm:]])
            want -= want[0]
        else:
            s = rec["workload"]["seed"]
            want = arrival_offsets(n_meas, rec["rate"], rec["arrival"], rec["burstiness"], s + 1)
        np.testing.assert_allclose(offs, want, rtol=0, atol=1e-12)
        if rec["max_concurrency"] is not None:
            assert sum(p.max_concurrency or 0 for p in meas) == rec["max_concurrency"]
            assert all((p.max_concurrency or 0) >= 1 for p in meas)  # 0 would mean "no cap"
        else:
            assert all(p.max_concurrency is None for p in meas)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_option_is_honoured_or_refused(files, data):
    o = data.draw(options(files))
    typed = frozenset(data.draw(st.sets(st.sampled_from(AT_DEFAULT), max_size=3)))
    load = LoadOptions({k: o[k] for k in o if k in SHARED}, frozenset(map(long_option, typed)))
    bad = conflicts(o, typed)
    cfg = config_from_options(load)
    try:
        cfg.validate()
        cfg.check_run_options()
    except UsageError as exc:
        msg = str(exc)
        assert bad, f"refused a fine combination: {msg}"
        assert "\n" not in msg
        assert any(b in msg for b in bad), (msg, bad)
        return
    assert not bad, f"accepted {bad} although the run would ignore it"
    check_derived_load(cfg)


def test_trace_with_workers_is_split_and_says_open_loop(files):
    """The issue's case: `--trace FILE --workers N` used one worker and the summary said
    "concurrency 1"."""
    cfg = config_from_options({"trace": files["trace"], "workers": 3, "url": "http://h:1"})
    cfg.validate()
    cfg.check_run_options()
    assert cfg.concurrency is None and cfg.mode == "trace"
    n = planned_measured(cfg)
    assert n == TRACE_N and resolve_workers(cfg, n) == 3
    check_derived_load(cfg)
    from accelbench.report.terminal import load_description

    text = load_description(cfg.to_json())
    assert "concurrency" not in text and "trace replay mooncake.jsonl" in text


@pytest.mark.parametrize(
    "args, word",
    [
        (["--trace", "{trace}", "--rate", "5"], "--rate"),
        (["--trace", "{trace}", "--dataset", "{dataset}"], "--dataset"),
        (["--trace", "{trace}", "-c", "4"], "--concurrency"),
        (["--trace", "{trace}", "--warmup", "10"], "--warmup"),
        (["-c", "2", "--workers", "4"], "--workers"),
        (["--rate", "5", "-c", "4"], "--concurrency"),
        (["-c", "4", "--max-concurrency", "2"], "--max-concurrency"),
        (["--rate", "5", "--max-concurrency", "1", "--workers", "2"], "--workers"),
        (["--rate", "1", "-d", "1", "--workers", "20"], "--workers"),  # 18 planned arrivals
        # typed at the default value, still unused: refused as well
        (["--turns", "4"], "--turns"),
        (["-c", "2", "--arrival", "poisson"], "--arrival"),
        (["--telemetry-interval", "1"], "--telemetry-interval"),  # the run has --no-telemetry
        # every request recorded with its prompt: nothing for the seed to draw
        (["--trace", "{recorded}", "--seed", "5"], "--seed"),
    ],
)
def test_cli_refuses_in_one_line_before_anything_runs(files, tmp_path, args, word):
    out = tmp_path / "run"
    argv = [a.format(**files) for a in args]
    # the server URL is closed: a refusal must come before any connection is tried
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "--url", "http://127.0.0.1:9", "--out",
         str(out), "--no-telemetry", "-q", *argv],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and word in lines[0], r.stderr
    assert not out.exists()


def test_sharegpt_trace_is_refused_with_the_way_to_run_it(tmp_path):
    p = tmp_path / "sg.json"
    p.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"}]}]))
    cfg = config_from_options({"trace": str(p), "url": "http://h:1"})
    cfg.validate()
    with pytest.raises(UsageError, match="--dataset FILE --rate R"):
        cfg.check_run_options()


@pytest.mark.parametrize(
    "args, word",
    [
        (["--values", "1,2", "--trace", "{trace}"], "--trace"),
        (["--values", "1,2", "-n", "5"], "-n"),
        (["--values", "1,2", "--max-concurrency", "4"], "--max-concurrency"),
        (["--values", "1,2", "--arrival", "gamma"], "--arrival"),
        (["--values", "1,4", "--workers", "2"], "--workers"),  # point 1 has one stream
        (["--rate", "--values", "1,2", "--requests-per-point", "3"], "--requests-per-point"),
        (["--values", "1,2", "--no-saturation-stop", "--min-gain", "0.1"], "--min-gain"),
        (["--values", "1", "--preset", "inferencex", "--isl-dist", "normal"], "--isl-dist"),
        (["--values", "1", "--isl-osl", "64/64", "--isl", "32"], "--isl"),
        # typed at the default value, still unused
        (["--values", "1", "--isl-osl", "64/64", "--isl", "1024"], "--isl"),
        (["--values", "1,2", "--no-saturation-stop", "--min-gain", "0.05"], "--min-gain"),
        (["--values", "1,2", "--arrival", "poisson"], "--arrival"),
        (["--values", "1,2", "--start", "4", "--end", "64"], "--start"),
        (["--values", "1", "--dataset", "{dataset}", "--isl", "1024"], "--isl"),
    ],
)
def test_sweep_refuses_what_its_points_would_ignore(files, tmp_path, args, word):
    out = tmp_path / "sweep"
    argv = [a.format(**files) for a in args]
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "sweep", "--url", "http://127.0.0.1:9", "-o",
         str(out), "--no-telemetry", "-q", *argv],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and word in lines[0], r.stderr
    assert not out.exists()


def test_recorded_trace_needs_its_own_endpoint(tmp_path):
    """A recorded request is re-issued as its prompt on --endpoint: a chat trace sent to
    completions would send messages as a prompt (the option silently disagreeing)."""
    from accelbench.workload.traces import trace_header, trace_row

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    rows = [trace_row(i, 0.1 * i, "chat", body) for i in range(3)]
    p = tmp_path / "trace.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in [trace_header(), *rows]))
    cfg = config_from_options({"trace": str(p), "url": "http://h:1"})
    cfg.validate()
    with pytest.raises(UsageError, match="records chat requests: add --endpoint chat"):
        cfg.check_run_options()
    cfg = config_from_options({"trace": str(p), "url": "http://h:1", "endpoint": "chat"})
    cfg.validate()
    cfg.check_run_options()
    mixed = tmp_path / "mixed.jsonl"
    comp = {"model": "m", "prompt": "hi", "max_tokens": 3}
    mixed.write_text("".join(json.dumps(x) + "\n" for x in
                             [trace_header(), rows[0], trace_row(1, 0.2, "completions", comp)]))  # fmt: skip
    cfg = config_from_options({"trace": str(mixed), "url": "http://h:1", "endpoint": "chat"})
    cfg.validate()
    with pytest.raises(UsageError, match="both chat and completions"):
        cfg.check_run_options()


# -- shadow replay: what the trace decides ------------------------------------------------
# option -> (field, a value off the default); each value is also what a command line types
REPLAY_OPTIONS = {
    "--endpoint": ("endpoint", "chat"), "--stream": ("stream", False),
    "--ignore-eos": ("ignore_eos", False), "--extra-body": ("extra_body", '{"temperature": 0}'),
    "--tokenizer": ("tokenizer", "{tokenizer}"), "--osl": ("osl", 16), "--seed": ("seed", 3),
    "--block-size": ("block_size", 300), "--arrival": ("arrival", "gamma"),
    "--burstiness": ("burstiness", 0.5), "--num-requests": ("num_requests", 9),
}  # fmt: skip


def replay_unused(kind: str, given: set[str]) -> set[str]:
    """The oracle (docs/SHADOW.md "Options a trace decides", restated): the options of
    ``given`` that a replay of the ``kind`` trace would not read. recorded: every
    request sent as recorded; mooncake: lengths, no hash_ids; blocks: lengths and
    hash_ids; sharegpt: prompts (no output lengths without a tokenizer), no times. Each
    holds 4 requests but mooncake's 10: -n 9 is beyond the others."""
    unused = {
        "recorded": set(REPLAY_OPTIONS) - {"--arrival", "--burstiness"},
        "mooncake": {"--osl", "--block-size"},
        "blocks": {"--osl", "--num-requests"},
        "sharegpt": {"--block-size", "--num-requests"},
    }[kind]
    if kind != "sharegpt":  # the trace's own arrival times
        unused |= {"--arrival", "--burstiness"}
    elif "--arrival" not in given:  # the shape of --arrival gamma only
        unused.add("--burstiness")
    return unused & given


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["recorded", "mooncake", "blocks", "sharegpt"]),
       chosen=st.sets(st.sampled_from(sorted(REPLAY_OPTIONS)), max_size=4))  # fmt: skip
def test_replay_refuses_what_its_trace_decides(files, kind, chosen):
    """Each option a shadow replay of the trace would not read, given alone or with
    others, is refused in one line naming one of them; every other combination is read."""
    from accelbench.suites.shadow.replay import check_trace_options
    from accelbench.workload.traces import load_trace

    path = {"recorded": files["recorded"], "mooncake": files["trace"],
            "blocks": files["blocks"], "sharegpt": files["sharegpt"]}[kind]  # fmt: skip
    values: dict[str, Any] = {"trace": path, "rate": 50.0 if kind == "sharegpt" else None}
    for opt in chosen:
        f, value = REPLAY_OPTIONS[opt]
        values[f] = files["tokenizer"] if value == "{tokenizer}" else value
    typed = {"--rate"} if kind == "sharegpt" else set()
    cfg = config_from_options(LoadOptions(values, frozenset(chosen | typed)))
    cfg.validate()
    cfg.check_common_options()
    trace = load_trace(path, rate=cfg.rate, arrival=cfg.arrival, burstiness=cfg.burstiness,
                       limit=cfg.num_requests, block_size=cfg.workload.trace_block_size)  # fmt: skip
    bad = replay_unused(kind, set(chosen))
    try:
        check_trace_options(cfg, trace)
    except UsageError as exc:
        msg = str(exc)
        assert bad, f"refused what the replay reads: {msg}"
        assert "\n" not in msg and any(b in msg for b in bad), (msg, bad)
        return
    assert not bad, f"accepted {bad} although the replay would not read it"


def test_replay_of_recorded_requests_refuses_no_stream(files, tmp_path):
    """The issue's case: `shadow replay --trace trace.jsonl --no-stream` streamed every
    request as recorded, and exited 0."""
    from cli_inprocess import run_cli

    out = tmp_path / "shadow"
    code, _, err, _ = run_cli(
        ["shadow", "replay", "--trace", files["recorded"], "--baseline", "http://127.0.0.1:9",
         "--candidate", "http://127.0.0.1:9", "--no-stream", "--out", str(out)], tmp_path,
    )  # fmt: skip
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "--stream/--no-stream does not apply to --trace" in lines[0], err
    assert not out.exists()


# -- --drain-timeout: the stop of every kind of loop ------------------------------------
async def _never_answers(rec, body) -> None:
    """A request that stays in flight until it is cut (the client's own send, stubbed)."""
    import asyncio

    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        rec.interrupt("cut")
        raise


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["closed", "sessions", "open"]),
    duration=st.sampled_from([None, 0.05]),
    workers=st.integers(1, 2),
    slots=st.integers(1, 3),
    drain=st.sampled_from([0.0, 0.01, 0.05]),
)
def test_drain_timeout_ends_every_kind_of_loop(kind, duration, workers, slots, drain):
    """Whatever the loop (closed, sessions, open; one worker or several sharing the
    closed loop's counter; the stop at -n or at --duration), the requests in flight at
    the stop get --drain-timeout seconds and are then cut (recorded as interrupted),
    never waited for until they end: a closed loop awaited its slots, so every request,
    and the timeout (recorded in run.json) was never applied."""
    import asyncio
    import multiprocessing

    from accelbench.metrics.records import ErrorKind
    from accelbench.runner.loadgen import LoadWorker, PhaseSpec, WorkerSpec

    # every request is taken at once (slots per worker >= what the plan holds): the stop
    # comes with the last one taken, or with the duration
    n = slots * workers
    items = [(i, PlannedRequest("x", 4, 8)) for i in range(n)]
    counter = multiprocessing.Value("q", 0)
    rows: list[dict] = []

    def phase() -> PhaseSpec:
        if kind == "open":
            return PhaseSpec("measured", items, offsets=[0.0] * n, duration_s=duration,
                             cycle=False, drain_timeout_s=drain)  # fmt: skip
        if kind == "sessions":
            return PhaseSpec("measured", [], concurrency=slots, duration_s=duration,
                             drain_timeout_s=drain, sessions=[[it] for it in items])  # fmt: skip
        return PhaseSpec("measured", items, concurrency=slots, duration_s=duration,
                         cycle=duration is not None, drain_timeout_s=drain)  # fmt: skip

    def worker(k: int) -> LoadWorker:
        spec = WorkerSpec(k, workers, "http://127.0.0.1:9", "m", "completions", True, None,
                          60.0, True, {}, False, "t", [phase()])  # fmt: skip
        counters = {"measured": counter} if kind != "open" and workers > 1 else None
        w = LoadWorker(spec, rows.extend, lambda: False, counters=counters)
        w.client.send = _never_answers  # type: ignore[method-assign]
        return w

    async def main() -> None:
        # the guard only: a loop that waits for requests that never end never returns
        await asyncio.wait_for(asyncio.gather(*(worker(k).run() for k in range(workers))), 60)

    asyncio.run(main())
    assert rows, "nothing was sent"
    assert all(r["error_kind"] == ErrorKind.INTERRUPTED for r in rows), rows


# -- the embedded engine's options, once a suite started it -----------------------------
EMBEDDED = {"--embedded-engine": ("embedded_engine", "llama"),
            "--embedded-model": ("embedded_model", "tiny"),
            "--embedded-parallel": ("embedded_parallel", 2)}  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(chosen=st.sets(st.sampled_from(sorted(EMBEDDED)), max_size=3),
       url=st.sampled_from(["none", "--url", "engine"]))  # fmt: skip
def test_embedded_options_are_refused_only_beside_a_url_given(chosen, url):
    """--embedded-* are refused beside a --url (no engine is started), and never once the
    run or a stress suite started the engine with them: `stress flood --embedded-model
    tiny` started tiny, then its first step refused the option naming --url (the
    engine's), and the suite ended with nothing measured."""
    from dataclasses import replace

    from accelbench.suites.stress.common import check_load

    values: dict[str, Any] = {EMBEDDED[o][0]: EMBEDDED[o][1] for o in chosen}
    if url == "--url":
        values["url"] = "http://127.0.0.1:9"
    cfg = config_from_options(LoadOptions(values, frozenset(chosen)))
    if url == "engine":  # what runner.benchmark.embedded_engine and stress's _server do
        cfg.validate()  # the pre-flight check, while no URL is known
        cfg.check_run_options()
        from accelbench.urls import Endpoint

        cfg.url, cfg.engine_started = Endpoint.parse("http://127.0.0.1:9"), True
    step = {"concurrency": 1, "rate": None, "num_requests": 2, "duration_s": None,
            "warmup_requests": 0, "save_text": False, "extra_body": {}}  # fmt: skip
    try:
        # a suite's step, as stress.common.run_step derives it from the suite's load
        check_load(replace(cfg, given=cfg.given - {"--out"}), step=step)  # type: ignore[arg-type]
    except UsageError as exc:
        assert url == "--url" and chosen, str(exc)
        assert any(o in str(exc) for o in chosen), str(exc)
        return
    assert not (url == "--url" and chosen)
    assert "engine_started" not in cfg.to_json()
