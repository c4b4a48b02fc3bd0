"""Hostile input, as a new user or a careless script would give it: absurd numbers, bad
paths, random bytes in every file accelbench reads. Every case must end in one clear line
(no traceback, no "internal error"), a non-zero exit code where the input is wrong, nothing
written outside the directory the command was pointed at, and no existing result changed.

The CLI runs in-process (``accelbench.cli.main.main`` with ``sys.argv`` set), so hundreds
of cases take seconds. Servers are never reached: the URL is a closed port on 127.0.0.1,
and a valid configuration ends with "cannot reach" (exit 2) before any request is sent.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.runner.config import BenchmarkConfig
from cli_inprocess import run_cli

CLOSED = "http://127.0.0.1:1"  # nothing listens on port 1: connection refused at once
HYP = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def invoke(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``accelbench ARGS`` in-process in ``cwd``; (exit code, stdout+stderr).
    ``serve`` runs in a subprocess with a time limit: a value that wrongly passed its
    checks would start a server that never returns."""
    if args[0] == "serve":
        import subprocess

        env = {k: v for k, v in os.environ.items() if k != "ACCELBENCH_DEBUG"}
        try:
            p = subprocess.run(
                [sys.executable, "-m", "accelbench", *args], cwd=cwd, env=env,
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return 0, f"still serving after 60 s: {args} was accepted"
        return p.returncode, p.stdout + p.stderr
    code, out, err, _ = run_cli(args, cwd)
    return code, out + err


def snapshot(root: Path) -> dict[str, str]:
    """path -> content hash of every file under root."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def assert_clean(code: int, text: str, *, wrong: bool, option: str | None = None) -> None:
    assert "Traceback" not in text, text
    assert "internal error" not in text, text
    if wrong:
        assert code != 0, f"exit 0 for wrong input: {text}"
        errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
        assert errors or code == 2, text  # click's own usage errors print a box, exit 2
        if option and errors:
            assert option in errors[0], f"{option!r} not named in {errors[0]!r}"


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """A working directory holding one complete, untouchable result."""
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "result.json").write_text('{"precious": true}\n')
    return tmp_path


def run_args(*extra: str) -> list[str]:
    return ["run", "--url", CLOSED, "--results-root", "res", "-q", "--no-telemetry", *extra]


# -- 1. named bad values: each option with values no run can use --------------------------
BAD_RUN_VALUES: list[tuple[str, str]] = [
    (opt, val)
    for opt, vals in {
        "--rate": ["nan", "inf", "-inf", "-1", "0", "1e-300", "1e300"],
        "--duration": ["nan", "inf", "-5", "0", "1e12"],
        "--concurrency": ["0", "-3", "100000000"],
        "--max-concurrency": ["0", "-1", "100000000"],
        "--num-requests": ["0", "-1", "1000000000000"],
        "--warmup": ["-1", "100000000000"],
        "--isl": ["0", "-1", "2000000000"],
        "--osl": ["0", "-7", "2000000000"],
        "--seed": ["-1", "99999999999999"],
        "--timeout": ["0", "-1", "nan", "inf"],
        "--drain-timeout": ["-1", "nan"],
        "--burstiness": ["0", "-1", "nan", "inf"],
        "--range-ratio": ["-0.1", "1.5", "nan"],
        "--isl-std": ["-1", "nan", "inf"],
        "--gpus": ["0", "-2", "10000000000"],
        "--workers": ["0", "-1", "100000"],
        "--telemetry-interval": ["0", "-1", "nan", "inf", "1e9"],
        "--embedded-parallel": ["0", "100000"],
        "--embedded-engine": ["tensorrt", ""],
        "--endpoint": ["embeddings", ""],
        "--arrival": ["uniform"],
        "--transport": ["http3"],
        "--isl-dist": ["zipf"],
        "--label": ["../../x", "/abs", "..", ".hidden", "a/b", "x" * 300, ""],
        "--url": ["ftp://127.0.0.1:21", "not a url", "http://", "http://127.0.0.1:99999"],
    }.items()
    for val in vals
]


@pytest.mark.parametrize(("opt", "val"), BAD_RUN_VALUES)
def test_run_rejects_bad_value(box: Path, opt: str, val: str) -> None:
    before = snapshot(box)
    code, text = invoke(run_args(opt, val), box)
    assert_clean(code, text, wrong=True, option=opt)
    assert code == 2
    assert snapshot(box) == before  # nothing written, nothing changed


@pytest.mark.parametrize(
    ("key", "val"),
    [("ttft_ms", "nan"), ("tpot_ms", "inf"), ("e2e_ms", "-1"), ("ttft_ms", "0"), ("bogus", "1")],
)
def test_run_rejects_bad_slo(box: Path, key: str, val: str) -> None:
    code, text = invoke(run_args("--slo", f"{key}={val}"), box)
    assert_clean(code, text, wrong=True)
    assert code == 2


def test_vllm_embedded_engine_with_a_gguf_only_model(box: Path) -> None:
    """vLLM cannot serve SmolLM2 (GGUF only): one line naming the options, nothing
    installed or started, exit 2."""
    before = snapshot(box)
    code, text = invoke(["run", "--embedded-engine", "vllm", "-n", "1", "-q"], box)
    assert_clean(code, text, wrong=True, option="--embedded-engine")
    assert code == 2 and "SmolLM2 ships only as GGUF" in text
    assert snapshot(box) == before


# -- 2. paths -------------------------------------------------------------------------------
def test_out_naming_a_file(box: Path) -> None:
    code, text = invoke(["run", "--url", CLOSED, "-q", "--out", "keep/result.json"], box)
    assert_clean(code, text, wrong=True, option="--out")
    assert (box / "keep" / "result.json").read_text() == '{"precious": true}\n'


def test_results_root_under_a_file(box: Path) -> None:
    code, text = invoke(["run", "--url", CLOSED, "-q", "--results-root", "keep/result.json/x"], box)
    assert_clean(code, text, wrong=True, option="--results-root")


def test_out_existing_non_empty_run_is_never_overwritten(box: Path) -> None:
    before = snapshot(box)
    code, text = invoke(["run", "--url", CLOSED, "-q", "--out", "keep"], box)
    assert_clean(code, text, wrong=True)
    assert snapshot(box) == before


def test_dataset_fifo_does_not_hang(box: Path) -> None:
    os.mkfifo(box / "fifo")
    code, text = invoke(run_args("--dataset", "fifo"), box)
    assert_clean(code, text, wrong=True, option="--dataset")


@pytest.mark.parametrize("content", ["", "\n", "   \n\n"])
def test_empty_api_key_file(box: Path, content: str) -> None:
    (box / "key").write_text(content)
    code, text = invoke(run_args("--api-key-file", "key"), box)
    assert_clean(code, text, wrong=True)
    assert "index out of range" not in text


@pytest.mark.parametrize(
    "extra", ["{bad", "[1, 2]", "@missing.json", '"text"', "@/dev/null", "[" * 100000]
)
def test_bad_extra_body(box: Path, extra: str) -> None:
    code, text = invoke(run_args("--extra-body", extra), box)
    assert_clean(code, text, wrong=True, option="--extra-body")


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    keys=st.sets(
        st.sampled_from(
            [
                "prompt",
                "messages",
                "model",
                "stream",
                "ignore_eos",
                "temperature",
                "seed",
                "max_tokens",
                "max_completion_tokens",
                "top_k",
            ]
        ),  # fmt: skip
        min_size=1,
        max_size=3,
    )
)
def test_extra_body_fields_the_run_sets_itself_are_refused(box: Path, keys: set[str]) -> None:
    """`--extra-body '{"stream": false}'` replaced the run's own field without a word (the
    client then parsed a JSON answer as a stream); so did prompt / messages (the planned
    prompts, and their ISL, gone), model and ignore_eos; max_tokens replaced every planned
    output length (`--osl 128` went out as 64, run.json said 128). Refused in one line
    naming the field and the option that sets it; other fields (sampling) pass."""
    from accelbench.client.openai import build_body

    # the run's own fields, from the body it builds (not from the list the check keeps):
    # and max_completion_tokens, OpenAI's chat name for max_tokens (which servers take
    # first); stream_options passes (a server that refuses include_usage: usage counted)
    built = [build_body(endpoint=e, model="m", prompt="p", max_tokens=1, stream=True,
                        ignore_eos=True) for e in ("completions", "chat")]  # fmt: skip
    run_sets = {k for b in built for k in b} - {"stream_options"} | {"max_completion_tokens"}
    extra = json.dumps(dict.fromkeys(sorted(keys), 0))
    own = sorted(keys & run_sets)
    cfg = BenchmarkConfig(url="http://127.0.0.1:9", num_requests=4, extra_body=json.loads(extra))
    if own:
        with pytest.raises(AccelbenchError, match=r"--extra-body sets '(\w+)', which the run sets"):
            cfg.validate()
    else:
        cfg.validate()


# a key given twice in one JSON object: refused at every reader of a user's JSON (json.loads
# keeps the last without a word); the readers' property test is tests/test_jsonfile.py
DUP_FILES = {
    "trace": ("t.jsonl", '{"timestamp":0,"input_length":9,"output_length":5}\n'
              '{"timestamp":5,"input_length":9,"output_length":5,"output_length":7}\n'),
    "import": ("v.json", '{"completed":1,"request_throughput":1,"completed":2}'),
    "plan": ("m/config.json", '{"num_hidden_layers":2,"hidden_size":64,"hidden_size":128}'),
    "manifest": ("man.json", '{"version":1,"version":2}'),
}  # fmt: skip


@pytest.mark.parametrize(
    ("which", "args", "option"),
    [
        ("trace", run_args("--trace", "t.jsonl"), "t.jsonl:2"),
        ("import", ["runs", "import-vllm", "v.json", "--root", "res"], "v.json"),
        ("plan", ["plan", "m", "-a", "h100"], "m/config.json"),
        ("manifest", ["doctor", "weights", "keep", "--verify", "man.json"], "man.json"),
        (None, run_args("--extra-body", '{"max_tokens":8,"max_tokens":64}'), "--extra-body"),
    ],
)
def test_a_json_key_given_twice(box: Path, which: str | None, args: list[str], option: str) -> None:
    if which is not None:
        name, text = DUP_FILES[which]
        (box / name).parent.mkdir(exist_ok=True)
        (box / name).write_text(text)
    code, out = invoke(args, box)
    assert_clean(code, out, wrong=True, option=option)
    assert "given twice in one object" in out, out


def test_a_json_key_given_twice_in_a_data_set(tmp_path: Path) -> None:
    """Data sets are read after the server answers (its tokenizer): here, directly."""
    from accelbench.suites.mlperf.qsl import read_records
    from accelbench.workload.datasets import load_dataset

    rows = [
        '{"prompt":"hi","output_tokens":3}',
        '{"prompt":"x","output_tokens":3,"output_tokens":9}',
    ]
    (tmp_path / "d.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "d.json").write_text("[" + ",".join(rows) + "]")
    with pytest.raises(AccelbenchError, match=r"d.jsonl:2: key 'output_tokens' given twice"):
        load_dataset(str(tmp_path / "d.jsonl"))
    with pytest.raises(AccelbenchError, match=r"d.json: key 'output_tokens' given twice"):
        load_dataset(str(tmp_path / "d.json"))
    with pytest.raises(AccelbenchError, match=r"line 2: key 'output_tokens' given twice"):
        read_records(str(tmp_path / "d.jsonl"))
    with pytest.raises(AccelbenchError, match=r"d.json: key 'output_tokens' given twice"):
        read_records(str(tmp_path / "d.json"))


# -- 3. random values for every numeric option ----------------------------------------------
NUMERIC_RUN_OPTIONS = [
    "--rate", "--duration", "--concurrency", "--max-concurrency", "--num-requests", "--warmup",
    "--isl", "--osl", "--seed", "--timeout", "--drain-timeout", "--burstiness", "--range-ratio",
    "--gpus", "--workers", "--telemetry-interval", "--isl-std", "--osl-std",
]  # fmt: skip
weird_numbers = st.one_of(
    st.sampled_from(["nan", "-nan", "inf", "-inf", "1e309", "-0", "0x10", "1_000", "", " ", "١"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.text(max_size=12),
)


@HYP
@given(opt=st.sampled_from(NUMERIC_RUN_OPTIONS), val=weird_numbers)
def test_random_numeric_values(tmp_path: Path, opt: str, val: str) -> None:
    if val.startswith("-") and val[1:2].isalpha():
        val = " " + val  # click would read "-nan" as an option name; still a bad value
    code, text = invoke(run_args(opt, val), tmp_path)
    # in range or not, the server is closed: the command must fail, in one clean line
    assert_clean(code, text, wrong=True)
    assert code == 2
    outside = [p for p in tmp_path.iterdir() if p.name != "res"]
    assert not outside, outside


# -- 4. random bytes as files accelbench reads ---------------------------------------------
@HYP
@given(data=st.binary(max_size=2000))
def test_random_bytes_as_dataset(tmp_path: Path, data: bytes) -> None:
    from accelbench.workload.datasets import load_dataset

    p = tmp_path / "ds.jsonl"
    p.write_bytes(data)
    try:
        load_dataset(str(p))
    except AccelbenchError as exc:
        assert str(exc) and "\n" not in str(exc).strip()


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)


@settings(HYP, max_examples=25)  # five commands per example, a report among them
@given(
    which=st.sampled_from(["run.json", "summary.json", "requests.jsonl"]),
    data=st.one_of(st.binary(max_size=500), json_values.map(lambda v: json.dumps(v).encode())),
)
def test_random_run_files(tmp_path: Path, which: str, data: bytes) -> None:
    """A results root with one damaged run: listing, comparing, reporting, costing and
    summarizing it ends in one line, and the intact run next to it is untouched."""
    from synthetic_runs import make_run

    root = tmp_path / "results"
    good = make_run(root / "good", concurrency=4)
    bad = make_run(root / "bad", concurrency=4)
    (bad / which).write_bytes(data)
    keep = snapshot(good)
    for args in (
        ["runs", "list", "--root", "results"],
        ["compare", "results/good", "results/bad"],
        ["report", "results/good", "results/bad", "-o", "out/r.html"],
        ["cost", "h100:results/bad"],
        ["summarize", "results/bad"],
    ):
        code, text = invoke(args, tmp_path)
        assert_clean(code, text + f"  <- {args}", wrong=False)
    assert snapshot(good) == keep
    stray = {p.name for p in tmp_path.iterdir()} - {"results", "out"}
    assert not stray, stray


# -- 5. analysis, cost and plan options ------------------------------------------------------
@pytest.fixture
def runs(tmp_path: Path) -> Path:
    from synthetic_runs import make_run

    make_run(tmp_path / "results" / "a", concurrency=4)
    make_run(tmp_path / "results" / "b", concurrency=4)
    return tmp_path


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["compare", "results/a", "results/b", "--tolerance", "-1"], "--tolerance"),
        (["compare", "results/a", "results/b", "--tolerance", "nan"], "--tolerance"),
        (["compare", "results/a", "results/b", "--n-boot", "0"], "--n-boot"),
        (["compare", "results/a", "results/b", "--n-boot", "1000000000"], "--n-boot"),
        (["report", "results/a", "--attainment", "5"], "--attainment"),
        (["report", "results/a", "--attainment", "nan"], "--attainment"),
        (["report", "results/a", "-o", "results"], "-o"),
        (["frontier", "results/a", "--attainment", "-1"], "--attainment"),
        (["frontier", "results/a", "--at", "nan"], "--at"),
        (["cost", "h100:inf"], None),
        (["cost", "h100:nan"], None),
        (["cost", "h100:-2"], None),
        (["cost", "h100:1e400"], None),
        (["cost", "h100:results/a", "--pue", "0"], "--pue"),
        (["cost", "h100:results/a", "--usd-per-gpu-hour", "nan"], "--usd-per-gpu-hour"),
        (["cost", "h100:results/a", "--capex", "1", "--utilisation", "7"], "--utilisation"),
        (["plan", "llama-2-70b", "-a", "h100", "-c", "4096", "--points", "1"], "--points"),
        (["plan", "llama-2-70b", "-a", "h100", "-c", "4096", "--gpus", "0"], "--gpus"),
        (["plan", "llama-2-70b", "-a", "h100", "--context", "nan"], "--context"),
        (["plan", "/dev/urandom", "-a", "h100"], None),
        (["runs", "list", "--root", "results/a/run.json"], None),
        (["runs", "import-vllm", "x.json", "--label", "../x"], "--label"),
        (["runs", "query", "--root", "results", "COPY (SELECT 1) TO 'leak.csv'"], None),
        (["runs", "query", "--root", "results", "SELECT * FROM read_csv('/etc/hostname')"], None),
        (["runs", "query", "--root", "results", "INSTALL httpfs"], None),
        (["summarize", "results/nope"], None),
        (["serve", "reference", "--osl", "2000000000"], "--osl"),
        (["serve", "reference", "--port", "99999"], "--port"),
        (["serve", "reference", "--fault", "429:7"], "--fault"),
        (["serve", "llama", "--parallel", "0"], "--parallel"),
        # options the server would ignore (a bind to 192.0.2.1 fails at once if not refused)
        (["serve", "reference", "--host", "192.0.2.1", "--diverge", "0.5"], "--diverge"),
        (
            ["serve", "reference", "--host", "192.0.2.1", "--max-throughput", "--itl-ms", "1"],
            "--itl-ms",
        ),
        (
            ["serve", "reference", "--host", "192.0.2.1", "--fault", "500:0.1", "--stall-s", "1"],
            "--stall-s",
        ),
        (
            ["serve", "reference", "--host", "192.0.2.1", "--prefix-block-size", "16"],
            "--prefix-block-size",
        ),  # typed at its default, still unused
        # nothing drawn (fixed delays, no fault): the seed changed nothing
        (["serve", "reference", "--host", "192.0.2.1", "--seed", "3"], "--seed"),
        (["serve", "llama", "--build-only", "--parallel", "8"], "--parallel"),
        (["serve", "vllm", "--install-only", "--no-prefix-caching"], "--prefix-caching"),
    ],
)
def test_analysis_bad_values(runs: Path, args: list[str], option: str | None) -> None:
    (runs / "x.json").write_text("{}")
    before = snapshot(runs)
    code, text = invoke(args, runs)
    assert_clean(code, text, wrong=True, option=option)
    after = snapshot(runs)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing changed
    assert set(after) == set(before), set(after) ^ set(before)  # nothing written


_SPREAD = st.sampled_from(["5", "uniform:1:5", "normal:5:1", "exp:5"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ttft=st.one_of(st.none(), _SPREAD), itl=st.one_of(st.none(), _SPREAD),
       osl=st.one_of(st.none(), _SPREAD), fast=st.booleans(), fault=st.booleans(),
       drop=st.booleans())  # fmt: skip
def test_reference_seed_only_where_something_is_drawn(tmp_path_factory, ttft, itl, osl, fast,
                                                      fault, drop):  # fmt: skip
    """`serve reference --seed` draws the delays and lengths of a distribution, faults
    and dropped connections: given where none is drawn it is refused in one line
    (--seed 3 with fixed delays changed nothing), elsewhere the server starts (here: its
    bind to a documentation address fails, naming the address)."""
    delays = not fast or fault  # --max-throughput writes at once, faults aside
    if not delays:
        ttft = itl = None  # refused of their own with --max-throughput
    args = ["serve", "reference", "--host", "192.0.2.1", "--seed", "3"]
    for opt, value in (("--ttft-ms", ttft), ("--itl-ms", itl), ("--osl", osl)):
        args += [opt, value] if value is not None else []
    args += ["--max-throughput"] * fast + ["--fault", "500:0.1"] * fault
    args += ["--drop-keepalive", "0.1"] * drop
    spread = [d is not None and not d.isdigit() for d in (ttft, itl, osl)]
    drawn = any(spread) or fault or drop
    code, out, err, _ = run_cli(args, tmp_path_factory.mktemp("seed"))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert ("--seed" in lines[0]) == (not drawn), (args, lines[0])
    assert drawn or "cannot listen" not in lines[0]


def _damage_summary(run: Path, how: str) -> None:
    if how == "schema only":
        (run / "summary.json").write_text('{"schema": "accelbench.summary/1"}')
        return
    s = json.loads((run / "summary.json").read_text())
    if how == "throughput -1":
        s["throughput"] = {k: -1 for k in s["throughput"]}
    elif how == "ttft NaN":
        s["latency"]["ttft_ms"]["p50"] = float("nan")
    else:  # "throughput fast"
        s["throughput"] = "fast"
    (run / "summary.json").write_text(json.dumps(s))


@pytest.mark.parametrize("how", ["throughput -1", "schema only", "ttft NaN", "throughput fast"])
def test_compare_and_frontier_of_a_damaged_summary(runs: Path, how: str) -> None:
    """The audit's examples (findings 6b and 9): a summary.json with impossible figures, or
    one that parses but holds no figures. compare and frontier recompute the run from its
    intact requests.parquet and say so (compare --json on stderr); the impossible figure is
    never shown. Without requests.parquet, compare's one error line says why."""
    _damage_summary(runs / "results" / "b", how)
    code, text = invoke(["compare", "results/a", "results/b"], runs)
    assert_clean(code, text, wrong=False)
    assert code == 0 and "figures recomputed from requests.parquet" in text, text
    code, out, err, _ = run_cli(["compare", "results/a", "results/b", "--json"], runs)
    assert code == 0 and "figures recomputed from requests.parquet" in err, err
    for e in json.loads(out)[0]["estimates"]:  # b is a's twin: its recomputed figures
        assert e["ratio"] == pytest.approx(1.0), e
    code, out, err, _ = run_cli(["frontier", "results/b", "--json"], runs)
    (entry,) = json.loads(out)
    assert code == 0 and "b: figures recomputed from requests.parquet" in entry["warnings"]
    for fr in entry["frontiers"].values():
        assert [p["throughput_per_gpu"] > 0 for p in fr["points"]] == [True]
    (runs / "results" / "b" / "requests.parquet").unlink()
    code, text = invoke(["compare", "results/a", "results/b"], runs)
    assert_clean(code, text, wrong=True)
    (line,) = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert line.startswith("error: no usable runs in b (b: summary.json: ") and (
        "requests.parquet missing" in line
    ), line
    assert "report" not in line  # compare writes no report


def test_report_into_directory_leaves_no_tmp(runs: Path) -> None:
    invoke(["report", "results/a", "-o", "results"], runs)
    assert not list(runs.rglob("*.tmp"))


def test_label_stays_inside_results_root(runs: Path) -> None:
    for label in ("../escape", "/tmp/escape", "a/../../escape"):
        code, text = invoke(run_args("--label", label), runs)
        assert_clean(code, text, wrong=True, option="--label")
    assert not (runs.parent / "escape").exists()


@pytest.mark.parametrize("content", ["", "null\n", "# nothing yet\n"])
def test_cost_tco_file_with_no_fields(tmp_path: Path, content: str) -> None:
    """Before: exit 0, the published rate used, the file never mentioned."""
    (tmp_path / "tco.yaml").write_text(content)
    code, text = invoke(["cost", "-a", "h100", "1000", "--tco", "tco.yaml"], tmp_path)
    assert_clean(code, text, wrong=True)
    assert code == 2 and text.count("\n") == 1 and "tco.yaml holds no fields" in text, text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("cost_of_capital: 1.0e10\n", "cost_of_capital (--cost-of-capital) must be in [0, 1]"),
        ("usd_per_gpu_hour: 1e308\n", "usd_per_gpu_hour (--usd-per-gpu-hour) must be in"),
        ("usd_per_gpu_hour: 1e-300\n", None),
        ("usd_per_gpu_hour: 2.5E0\n", None),
    ],
)
def test_cost_tco_numbers_in_exponent_form(
    tmp_path: Path, content: str, message: str | None
) -> None:
    """YAML 1.1 read these as text: "must be a number (got '1.0e10')"."""
    (tmp_path / "tco.yaml").write_text(content)
    code, text = invoke(["cost", "-a", "h100", "1000", "--tco", "tco.yaml"], tmp_path)
    assert "must be a number" not in text, text
    if message is None:
        assert code == 0, text
    else:
        assert_clean(code, text, wrong=True)
        assert code == 2 and message in text, text


def test_server_words_are_never_markup(tmp_path: Path) -> None:
    """A model name or an error text with Rich markup or emoji codes prints literally."""
    from rich.console import Console

    from accelbench.documents import load_json
    from accelbench.report.terminal import print_run_dir
    from accelbench.store.rundir import write_json_atomic
    from synthetic_runs import make_run

    run = make_run(tmp_path / "r", concurrency=2)
    meta = load_json(run / "run.json")
    assert isinstance(meta, dict)
    meta["config"]["model"] = "[/bold]evil[red] 0000:cd:00.0"
    write_json_atomic(run / "run.json", meta)
    s = load_json(run / "summary.json")
    assert isinstance(s, dict)
    s["client"]["warnings"] = ["server said [/] :cd: [link=x]"]
    write_json_atomic(run / "summary.json", s)
    con = Console(record=True, width=200)
    print_run_dir(run, con)
    text = con.export_text()
    assert "[/bold]evil[red] 0000:cd:00.0" in text
    assert "server said [/] :cd: [link=x]" in text


# -- 6. the suites' files in a report: random bytes, or the right schema with junk ----------
SUITE_FILES = {  # every schema version the readers accept
    "stress.json": ("accelbench.stress/1", "accelbench.stress/2"),
    "verdict.json": ("accelbench.suites.shadow-verdict/1", "accelbench.suites.shadow-verdict/2"),
    "mlperf_log_detail.txt": (),
}
# a verdict entry of the one record, damaged field by field
_VERDICT = {"name": "x", "status": "pass", "word": "pass", "statistic": "s", "unit": "%",
            "estimate": 1.0, "interval": {"low": 0.5, "high": 2.0}, "thresholds": {"warn": 1},
            "rule": "r", "evidence": {"n": 3}}  # fmt: skip
verdict_entries = st.lists(
    st.one_of(json_values, st.dictionaries(st.sampled_from(sorted(_VERDICT)), json_values).map(
        lambda d: {**_VERDICT, **d})),
    max_size=3,
)  # fmt: skip
_JUNK_KEYS = ("suite", "status", "verdicts", "steps", "ttft_fit_ms", "endpoints", "windows",
              "interference_matrix", "comparisons", "gates", "sides", "counters", "resources")  # fmt: skip
shaped = st.fixed_dictionaries({}, optional={k: json_values for k in _JUNK_KEYS})


@settings(HYP, max_examples=40)
@given(
    which=st.sampled_from(sorted(SUITE_FILES)),
    data=st.one_of(st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode())),
    junk=st.one_of(st.none(), shaped),
    suite=st.sampled_from(["soak", "flood", "mixed", "consistency", "other"]),
    version=st.integers(0, 1),
    entries=verdict_entries,
)
def test_random_suite_files(
    tmp_path: Path,
    which: str,
    data: bytes,
    junk: dict | None,
    suite: str,
    version: int,
    entries: list,
) -> None:
    """A damaged stress.json, shadow verdict or LoadGen log: `report` and `runs list` end
    clean; unreadable content is exactly one warning line of that directory."""
    import tempfile

    from accelbench.report.data import build_report_data
    from accelbench.suites.sections import SECTIONS
    from synthetic_runs import make_run

    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # one per example
    root = tmp_path / "results"
    d = root / "suite"
    if which == "stress.json":
        make_run(d / "runs" / "s0", concurrency=2)
    elif which == "verdict.json":
        d.mkdir(parents=True)
    else:
        make_run(d, concurrency=1)
        (d / "mlperf_log_summary.txt").write_text("MLPerf Results Summary\n")
    schema = SUITE_FILES[which][version] if SUITE_FILES[which] else None
    if junk is not None and schema:  # the right schema, every other field junk
        doc = {**junk, "schema": schema}
        if which == "stress.json":
            doc["suite"] = suite
        if version == 1 and entries:  # verdict records, some damaged
            doc["verdicts" if which == "stress.json" else "gates"] = entries
        data = json.dumps(doc).encode()
    (d / which).write_bytes(data)
    for args in (
        ["report", "results/suite", "-o", "out/r.html", "--markdown", "out/r.md"],
        ["runs", "list", "--root", "results"],
    ):
        code, text = invoke(args, tmp_path)
        assert_clean(code, text + f"  <- {args}", wrong=False)
    if junk is None or not schema:
        warns = build_report_data([d], timelines=False, sections=SECTIONS).suites[0].warnings
        assert len(warns) == 1, warns
        assert (Path(tmp_path / "out" / "r.md").read_text()).count(warns[0][:40]) == 1


# -- 7. every suite document: any mutation is its type or one DocumentError ---------------
def _valid_documents() -> dict[str, tuple[object, object]]:
    """name -> (a valid JSON document, the reader that turns it into its type): every
    document a suite writes, in its current version and (where it has one) its older."""
    from accelbench.documents import Fields
    from accelbench.metrics.verdict import Interval, Status, Verdict
    from accelbench.store.sweepdoc import SweepDoc, SweepPoint
    from accelbench.suites.mlperf.document import MlperfDoc
    from accelbench.suites.shadow.document import ShadowMeta, ShadowVerdictDoc, Side
    from accelbench.suites.stress import document as sd

    v = Verdict("leak rss", Status.WARN, "Theil-Sen slope", "B/h", 2.0, Interval(1.0, 3.0),
                {"warn": 1.0, "fail": 5.0}, "rule", {"n": 60, "kind": "leak"})  # fmt: skip
    v1 = {"name": "drift ttft p50", "kind": "drift", "statistic": "s", "unit": "%/h",
          "estimate": 1.5, "ci_low": 0.5, "ci_high": 2.5, "warn": 1.0, "fail": 3.0,
          "verdict": "warn", "rule": "r", "confidence": 0.95, "evidence": {"n": 61}}  # fmt: skip
    est = sd.Estimate(3.0, 1.0, 5.0)
    stats = sd.WindowStats(10, 9, 0.1, {"timeout": 1}, 2.0, 30.0, {"p50": 5.0}, {"p50": 1.0},
                           {"p50": 9.0})  # fmt: skip
    parts: list[sd.Part] = [
        sd.SoakPart(2, 3, 180.0, 30, 1000, 33.3),
        sd.FloodPart(
            [sd.FloodStep(256, 1, 4, 4, {}, {"p50": 5.0}, 51.0, "runs/a")],
            sd.QuadFit(8, {k: est for k in "abc"}, 0.9),
        ),  # fmt: skip
        sd.MixedPart(
            [
                sd.MixedEndpoint(
                    0,
                    "http://h/v1",
                    10,
                    11,
                    {"ttft_p50_change_pct": est},
                    {"ttft_solo_p50_ms": 4.0},
                )
            ],
            [[None, est], [est, None]],
            "note",
        ),  # fmt: skip
        sd.ConsistencyPart(
            "runs/r0", "token", [sd.Comparison("r1", 12, 10, 2, 0.83, 0, 3, 4, 0.9, None)]
        ),  # fmt: skip
    ]
    docs: dict[str, tuple[object, object]] = {}
    for p in parts:
        doc = sd.StressDoc(sd.SUITES[parts.index(p)], "completed", {"x": 1}, ["runs/a"], [v], p,
                           {"client_rss_bytes": 8e9})  # fmt: skip
        j = doc.to_json()
        docs[f"stress/2 {doc.suite}"] = (j, sd.StressDoc.from_json)
        docs[f"stress/1 {doc.suite}"] = ({**j, "schema": sd.SCHEMA_V1, "verdicts": [v1]},
                                         sd.StressDoc.from_json)  # fmt: skip
    docs["windows.jsonl row"] = (
        sd.SoakWindow(0, 0.0, 30.0, 60.0, 60.0, stats, {"gpu0_temp_gpu_c_max": 60}).to_json(),
        lambda d: sd.SoakWindow.from_json(Fields(d, "windows.jsonl")),
    )
    docs["memory.jsonl row"] = (
        {"t_s": 1.0, "client_rss_bytes": 5e8, "gpu0_throttle_reasons": "hw_slowdown"},
        lambda d: sd.memory_sample(Fields(d, "memory.jsonl")),
    )
    docs["divergent.jsonl row"] = (
        sd.Divergence("r1", 3, 5, 0.9, "a b c", "a b d").to_json(),
        lambda d: sd.Divergence.from_json(Fields(d, "divergent.jsonl")),
    )
    docs["shadow.json"] = (
        ShadowMeta(
            "replay",
            Side("http://b/v1", "m"),
            Side("http://c/v1"),
            "completed",
            "2026-01-01T00:00:00+00:00",
            counters={"sent": 3},
            settings={"speed": 1.0},
        ).to_json(),  # fmt: skip
        ShadowMeta.from_json,
    )
    gate_v1 = {"gate": "ttft_p99 <= +10%", "status": "inconclusive", "statistic": 1.05,
               "lo": 0.98, "hi": 1.12, "threshold": 1.1, "unit": "ratio", "n_baseline": 500,
               "n_candidate": 500, "baseline": 40.0, "candidate": 42.0,
               "test": {"name": "mann-whitney-u", "p_value": 0.2}, "note": None}  # fmt: skip
    verdict_v1 = {"schema": "accelbench.suites.shadow-verdict/1", "shadow_dir": "d",
                  "verdict": "inconclusive", "exit_code": 3, "confidence": 0.95,
                  "paired_requests": 500, "gates": [gate_v1],
                  "windows": [{"start_s": 0, "end_s": 10, "requests": 250, "verdict": "go",
                               "gates": [{**gate_v1, "status": "pass"}]}],
                  "sides": {"baseline": {"requests": 500, "ok": 500, "errors": {},
                                         "ttft": {"count": 500, "p50": 5.0}}},
                  "counters": {"sent": 500}, "status": "completed", "mode": "replay",
                  "resources": {"telemetry": "off", "reason": "no"},
                  "unreadable_lines": {}}  # fmt: skip
    docs["verdict.json v1"] = (verdict_v1, ShadowVerdictDoc.from_json)
    docs["verdict.json v2"] = (ShadowVerdictDoc.from_json(verdict_v1).to_json(),
                               ShadowVerdictDoc.from_json)  # fmt: skip
    docs["mlperf.json"] = (
        MlperfDoc(
            "llama2-70b",
            "server",
            "INVALID",
            False,
            ["1 of 9 requests failed"],
            "VALID",
            "Server",
            ["1 of 9 samples failed"],
            {"min duration": True},
            {"ttft_p99_ms": 120.0},
            None,
            {"settings": {"effective": {"x": 1}}},
        ).to_json(),  # fmt: skip
        MlperfDoc.from_json,
    )
    docs["sweep.json"] = (
        SweepDoc(
            "concurrency",
            [1, 2],
            {"model": "m", "workload": {"isl": 8}},
            [
                SweepPoint(1, "c0001", "completed", run_id="r", output_tps_per_gpu=3.0),
                SweepPoint(2, "c0002", "failed", reason="boom"),
            ],
            "partial",
        ).to_json(),  # fmt: skip
        SweepDoc.from_json,
    )
    return docs


DOCUMENTS = _valid_documents()
_SCHEMAS = {"StressDoc": "accelbench.stress/2",
            "ShadowVerdictDoc": "accelbench.suites.shadow-verdict/2"}  # fmt: skip
_finite_json = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(2**40), 2**40) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)  # fmt: skip


def _paths(x: object, at: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every path to a value inside a JSON document (the root included)."""
    out = [at]
    if isinstance(x, dict):
        for k, y in x.items():
            out += _paths(y, (*at, k))
    elif isinstance(x, list):
        for i, y in enumerate(x):
            out += _paths(y, (*at, i))
    return out


def _mutate(doc: object, path: tuple[object, ...], how: str, new: object) -> object:
    """``doc`` with the value at ``path`` replaced by ``new``, deleted, or wrapped."""
    import copy

    if not path:
        return new if how != "wrap" else [doc]
    out = copy.deepcopy(doc)
    parent: object = out
    for k in path[:-1]:
        parent = parent[k]  # type: ignore[index]
    k = path[-1]
    if how == "delete":
        del parent[k]  # type: ignore[attr-defined]
    elif how == "wrap":
        parent[k] = {"x": parent[k]}  # type: ignore[index]
    else:
        parent[k] = new  # type: ignore[index]
    return out


@settings(HYP, max_examples=400)
@given(
    name=st.sampled_from(sorted(DOCUMENTS)),
    pick=st.integers(0, 10_000),
    how=st.sampled_from(["replace", "delete", "wrap"]),
    new=_finite_json,
    more=st.integers(0, 2),
)
def test_every_document_mutated_is_its_type_or_one_document_error(
    name: str, pick: int, how: str, new: object, more: int
) -> None:
    """Any damage to any suite document (a value replaced by any JSON, a field deleted, a
    value wrapped in an object; up to three at once): its one reader gives its type or
    one DocumentError line, never another exception; what it gives is written back
    (``to_json``) and read again unchanged, so the writer writes what the reader reads."""
    from accelbench.errors import DocumentError

    doc, read = DOCUMENTS[name]
    for i in range(more + 1):
        paths = _paths(doc)
        doc = _mutate(doc, paths[(pick * (i + 7)) % len(paths)], how, new)
    try:
        got = read(doc)  # type: ignore[operator]
    except DocumentError as exc:
        assert str(exc) and "\n" not in str(exc), exc
        return
    if hasattr(got, "to_json"):
        again = read(got.to_json())  # type: ignore[operator]
        assert again == _current(got), (again, got)


def _current(doc: object) -> object:
    """A document as its writer writes it: in the current version (an older one is read
    and written anew in the current)."""
    import dataclasses

    if dataclasses.is_dataclass(doc) and hasattr(doc, "schema"):
        schema = _SCHEMAS.get(type(doc).__name__, doc.schema)
        return dataclasses.replace(doc, schema=schema)  # type: ignore[type-var]
    return doc


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_every_document_round_trips(name: str) -> None:
    """Each valid document reads into its type, and writes back to what it read."""
    doc, read = DOCUMENTS[name]
    got = read(doc)  # type: ignore[operator]
    if hasattr(got, "to_json"):
        assert read(got.to_json()) == _current(got)  # type: ignore[operator]


# -- an option that would change nothing is refused, never ignored (audit_opts 3) ----------
UNSET_ENV = "ACCELBENCH_TEST_UNSET_VARIABLE"
_PROXY = ["shadow", "proxy", "--baseline", CLOSED, "--candidate", "http://127.0.0.1:2", "-o", "px"]
_REPLAY = ["shadow", "replay", "--trace", "t.jsonl", "--baseline", CLOSED, "--candidate",
           "http://127.0.0.1:2", "-o", "sh", "--no-telemetry"]  # fmt: skip
IGNORED: list[tuple[list[str], str]] = [
    (["mlperf", "offline", "--url", CLOSED, "--ray", "10.255.255.1:6379"], "--ray"),
    ([*_REPLAY, "--ray", "10.255.255.1:6379"], "--ray"),
    (run_args("--api-key-env", UNSET_ENV), "--api-key-env"),
    (run_args("--api-key-env", "1bad"), "--api-key-env"),
    (["sweep", "--url", CLOSED, "-o", "sw", "--values", "1", "--api-key-env", UNSET_ENV],
     "--api-key-env"),
    (["mlperf", "server", "--url", CLOSED, "--api-key-env", UNSET_ENV], "--api-key-env"),
    ([*_REPLAY, "--candidate-api-key-env", UNSET_ENV], "--candidate-api-key-env"),
    ([*_PROXY, "--candidate-api-key-env", UNSET_ENV], "--candidate-api-key-env"),
    ([*_PROXY, "--seed", "5"], "--seed"),
    (["predict", "--model", "llama-3.1-8b", "--accelerator", "h100", "--concurrency", "8",
      "--ep", "8"], "--ep"),
    (["health", "--source", "host", "--duration", "0", "--interval", "3000"], "--interval"),
    (["serve", "reference", "--port", "0", "--device-memory-warmup-s", "5"],
     "--device-memory-warmup-s"),
    (["trace", "agent", "--sessions", "1", "--rate", "5", "-o", "a.jsonl"], "--rate"),
]  # fmt: skip


def refused_in_one_line(box: Path, args: list[str], option: str) -> None:
    """The command line is refused with one line naming ``option``, exit 2, and nothing
    in ``box`` changed."""
    before = snapshot(box)
    code, text = invoke(args, box)
    assert_clean(code, text, wrong=True, option=option)
    assert code == 2 and len(text.strip().splitlines()) == 1, text
    assert snapshot(box) == before


@pytest.mark.parametrize(("args", "option"), IGNORED)
def test_an_option_that_would_change_nothing_is_refused(
    box: Path, args: list[str], option: str
) -> None:
    os.environ.pop(UNSET_ENV, None)
    (box / "t.jsonl").write_text(
        '{"timestamp": 0, "input_length": 8, "output_length": 4}\n'
        '{"timestamp": 10, "input_length": 8, "output_length": 4}\n'
    )
    refused_in_one_line(box, args, option)


@HYP
@given(name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True), value=st.text())
def test_an_explicit_key_variable_is_set_and_not_empty(name: str, value: str) -> None:
    """--api-key-env NAME (and --candidate-api-key-env): set and not empty is accepted,
    unset or empty refused naming the option; the default OPENAI_API_KEY may be unset."""
    from accelbench import validate as v
    from accelbench.runner.config import BenchmarkConfig

    name = f"ACCELBENCH_T_{name}"
    value = value.replace("\0", "")
    old = os.environ.pop(name, None)
    try:
        if value:
            os.environ[name] = value
            assert v.env_var("--api-key-env", name) == name
        with_default = BenchmarkConfig(url=CLOSED)
        with_default.validate()  # the default variable, unset or not: never refused
        cfg = BenchmarkConfig(url=CLOSED, api_key_env=name)
        if value:
            cfg.validate()
        else:
            with pytest.raises(AccelbenchError, match=rf"^--api-key-env {name}: .* not set"):
                cfg.validate()
    finally:
        os.environ.pop(name, None)
        if old is not None:
            os.environ[name] = old


@pytest.mark.parametrize(
    "args",
    [
        ["trace", "agent", "--sessions", "2", "--rate", "5", "-o", "a.jsonl"],
        ["health", "--source", "host", "--duration", "0.1", "--interval", "0.05", "--json"],
    ],
)
def test_the_same_option_where_it_applies_is_accepted(box: Path, args: list[str]) -> None:
    code, text = invoke(args, box)
    assert code in (0, 1) and "error:" not in text, text


# -- absurd values inside what was documented (audit_opts 6): the boundary of each -------
_FRONTIER_RUN = ["frontier", "nonexistent-run-dir", "--at"]
ABSURD: list[tuple[list[str], str]] = [
    (run_args("--timeout", "1e-300"), "--timeout"),
    (run_args("--timeout", "0.00099"), "--timeout"),
    ([*_FRONTIER_RUN, "1e308"], "--at"),
    ([*_FRONTIER_RUN, "1e-300"], "--at"),
    (["compare", "a", "b", "--at", "99999999999999999999"], "--at"),
    (["sweep", "--url", CLOSED, "-o", "sw", "--values", "1", "--requests-per-point", "1e-300"],
     "--requests-per-point"),
    (["sweep", "--url", CLOSED, "-o", "sw", "--values", "1", "--warmup-per-point", "1e-300"],
     "--warmup-per-point"),
    (["serve", "reference", "--port", "0", "--device-memory-rate", "-1"], "--device-memory-rate"),
    (["plan", "knee", "-m", "llama-3.1-8b", "--turns", "2", "--user-tokens", "1e-300", "--osl",
      "10", "--context-tokens", "4096"], "--user-tokens"),
    (["plan", "knee", "-m", "llama-3.1-8b", "--turns", "2", "--user-tokens", "10", "--osl",
      "10", "--kv-cache-gib", "1e-300"], "--kv-cache-gib"),
    ([*_PROXY, "--sample", "0"], "--sample"),
    (["monitor", "--no-exporter", "--duration", "0", "--alert-cmd", "accelbench-no-such-program"],
     "--alert-cmd"),
    (["monitor", "--no-exporter", "--duration", "0", "--recover-cmd", "./no-such-script x"],
     "--recover-cmd"),
    # a trace no reader would take: its sessions' starts spanning 1e300 s (audit a1)
    (["trace", "agent", "--sessions", "2", "--rate", "1e-300", "-o", "a.jsonl"], "--rate"),
    (["trace", "agent", "--sessions", "9", "--rate", "1e-6", "-o", "a.jsonl"], "--rate"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "option"), ABSURD)
def test_an_absurd_value_is_refused_naming_its_option(
    box: Path, args: list[str], option: str
) -> None:
    refused_in_one_line(box, args, option)


@HYP
@given(
    x=st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([0.001, 1e7, math.nextafter(0.001, 0), math.nextafter(1e7, math.inf)]),
    )
)
def test_the_boundaries_of_at_timeout_and_per_point(x: float) -> None:
    """Just inside each bound is accepted; just outside one line naming the option."""
    from accelbench.metrics.compare import MAX_AT, MIN_AT, check_comparison_options
    from accelbench.runner.config import MIN_TIMEOUT_S, BenchmarkConfig
    from accelbench.suites.sweep.core import MIN_PER_POINT, SweepPlan

    def ok(f: Any, name: str, inside: bool) -> None:
        if inside:
            f()
        else:
            with pytest.raises(AccelbenchError, match=rf"^{name} must be"):
                f()

    ok(lambda: check_comparison_options(target=x), "--at", MIN_AT <= x <= MAX_AT)
    ok(
        lambda: BenchmarkConfig(url=CLOSED, timeout_s=x).validate(),
        "--timeout",
        MIN_TIMEOUT_S <= x <= 30 * 86400,
    )
    ok(
        lambda: SweepPlan(BenchmarkConfig(url=CLOSED), [1], requests_per_point=x),
        "--requests-per-point",
        MIN_PER_POINT <= x <= 1e6,
    )
    ok(
        lambda: SweepPlan(BenchmarkConfig(url=CLOSED), [1], warmup_per_point=x),
        "--warmup-per-point",
        x == 0 or MIN_PER_POINT <= x <= 1e6,
    )


@pytest.mark.parametrize(
    "cmd", [["reference"], ["emulated", "--accelerator", "h100", "--model", "llama-3.1-8b"]]
)
@pytest.mark.parametrize("host", ["", " ", "no-such-host.invalid"])
def test_serve_host_is_an_address_to_bind(tmp_path: Path, cmd: list[str], host: str) -> None:
    """serve --host '' bound every interface (audit_opts #5); the same check as monitor's
    (validate.bind_host): one line naming --host, before the port is taken."""
    code, text = invoke(["serve", *cmd, "--host", host, "--port", "0"], tmp_path)
    assert code == 2 and "--host" in text, text
    assert_clean(code, text, wrong=True, option="--host")


# -- audit_opts #7, #8: refused before anything is written, naming the option --------------
_TINY = ["--isl", "8", "--osl", "8", "--no-telemetry", "-q"]
_SOAK = ["stress", "soak", "--url", CLOSED, "--duration", "2", "--window", "1",
         "--sample-interval", "0.5", *_TINY]  # fmt: skip
_CONSISTENCY = ["stress", "consistency", "--url", CLOSED, "--prompts", "2", "--repeats", "1",
                "--loaded-concurrency", "0", *_TINY]  # fmt: skip
_FLOOD = ["stress", "flood", "--url", CLOSED, "--lengths", "8", "--requests", "1", "--osl", "2",
          "--no-telemetry", "-q"]  # fmt: skip
_MIXED = ["stress", "mixed", "--url", CLOSED, "--url", CLOSED, "--duration", "1", "--window",
          "0.5", "--stagger", "0", *_TINY]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["predict", "--validate", "--write-docs", "keep"], "--write-docs"),  # a directory
        (["predict", "--validate", "--write-docs", "keep/result.json/zz"], "--write-docs"),
        (run_args("--model", "nosuch"), "cannot reach"),  # no empty res/ left behind
        (run_args("--api-key-file", "nan"), "--api-key-file"),
        (["run", "--url", CLOSED, "-q", "--no-telemetry", "--ray", "nan"], "--ray"),
        (
            [
                "sweep",
                "--url",
                CLOSED,
                "--model",
                "nosuch",
                "-o",
                "sw",
                "--values",
                "1,2",
                "--isl",
                "8",
                "--osl",
                "8",
                "--no-telemetry",
            ],
            "cannot reach",
        ),  # fmt: skip
        (["runs", "list", "--root", "nope/zz"], "--root"),
        (["runs", "query", "select 1", "--root", "keep/result.json"], "--root"),
        (["cost", "--rates", "nan", "--usd-per-gpu-hour", "2", "1000"], "--rates"),
        (["cost", "--tier", "gold", "h100:1000"], "--tier"),
        (
            [
                "predict",
                "--model",
                "llama-3.1-8b",
                "--accelerator",
                "h100",
                "--concurrency",
                "8",
                "--kv-precision",
                "nan",
            ],
            "--kv-precision",
        ),  # fmt: skip
        (
            [
                "plan",
                "fit",
                "llama-3.1-8b",
                "-a",
                "h100",
                "--context",
                "1000",
                "--kv-precision",
                "nan",
            ],
            "--kv-precision",
        ),  # fmt: skip
        (["doctor", "weights", "keep", "--verify", "keep/result.json"], "--verify"),
        # the stress suites: refused at their first step, no stress directory left behind
        ([*_SOAK, "--api-key-file", "nan"], "--api-key-file"),
        ([*_SOAK, "--ray", "nan"], "--ray"),
        ([*_SOAK, "--model", "nosuch", "-o", "keep/soak"], "cannot reach"),
        ([*_CONSISTENCY, "--api-key-file", "nan"], "--api-key-file"),
        ([*_CONSISTENCY, "--model", "nosuch", "--results-root", "r/r"], "cannot reach"),
        ([*_FLOOD, "--api-key-file", "nan"], "--api-key-file"),
        ([*_MIXED, "--api-key-file", "nan"], "--api-key-file"),
    ],
)
def test_refused_up_front_naming_the_option(box: Path, args: list[str], option: str) -> None:
    before = snapshot(box)
    dirs = sorted(p for p in box.rglob("*") if p.is_dir())
    code, text = invoke(args, box)
    assert code == 2, text
    assert_clean(code, text, wrong=True, option=option)
    assert len([ln for ln in text.splitlines() if ln.startswith("error:")]) == 1, text
    assert snapshot(box) == before
    assert sorted(p for p in box.rglob("*") if p.is_dir()) == dirs  # no empty results/, sw/


# -- a --metric gauge the server never reports is said, not left out (audit a1) ------------
@pytest.mark.parametrize(
    "args",
    [
        ["stress", "soak", "--duration", "2", "--window", "1", "--sample-interval", "0.5",
         "-c", "1", "--isl", "8", "--osl", "8", "--no-telemetry", "-o", "s"],
        ["stress", "flood", "--lengths", "8", "--requests", "1", "--osl", "2",
         "--no-telemetry", "-q", "-o", "s"],
    ],
)  # fmt: skip
def test_a_metric_the_server_never_reports_is_said(
    reference_server: Any, tmp_path: Path, args: list[str]
) -> None:
    srv = reference_server("--ttft-ms", "1", "--itl-ms", "1")
    code, text = invoke([*args, "--url", srv.url, "--metric", "nan"], tmp_path)
    assert_clean(code, text, wrong=False)
    assert "warning: --metric nan: not found on the server's /metrics" in text, text
    doc = json.loads((tmp_path / "s" / "stress.json").read_text())
    (v,) = [v for v in doc["verdicts"] if v["name"] == "leak metric:nan"]
    assert v["status"] == "n/a" and "--metric nan" in v["note"], v


# -- serve llama --port: a port something already listens on --------------------------


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["", "0.0.0.0"]))
def test_a_taken_port_is_refused_before_the_engine_starts(listen_on: str) -> None:
    """Whatever listens on the port (on loopback or every interface), the engine's options
    are refused naming --port; nothing is built or started, so a readiness check can never
    take another server for the engine. The same port once freed passes."""
    import socket

    from accelbench.engines.llamacpp import check_server_options
    from accelbench.ports import free_port

    port = free_port()
    with socket.socket() as s:
        s.bind((listen_on or "127.0.0.1", port))
        s.listen()
        with pytest.raises(AccelbenchError, match=rf"--port {port} is taken") as err:
            check_server_options(1, 64, port)
        assert err.value.exit_code == 2
    check_server_options(1, 64, port)  # free again
    check_server_options(1, 64, 0)  # any


def test_serve_llama_on_a_taken_port_is_one_line(tmp_path: Path) -> None:
    """Regression: with another HTTP server on --port, `serve llama` said "serving at
    http://127.0.0.1:PORT" (the other server answered /health), then "llama-server exited
    with 1"."""
    import socket

    from accelbench.ports import free_port

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        code, text = invoke(["serve", "llama", "--model", "tiny", "--port", str(port)], tmp_path)
    assert code == 2, text
    assert "serving at" not in text and f"--port {port} is taken" in text, text
    assert_clean(code, text, wrong=True, option="--port")
