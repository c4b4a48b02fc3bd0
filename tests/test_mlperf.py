"""accelbench mlperf: LoadGen's settings, the QSL readers, LoadGen's verdict against the
reference server (known latencies), and Offline on the real engine."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import mlperf_loadgen  # noqa: E402, F401 - the [test] extra installs it: missing fails
import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.errors import UsageError
from accelbench.suites.mlperf.logs import read_issue_side
from accelbench.suites.mlperf.qsl import read_records, samples_from_records
from accelbench.suites.mlperf.settings import (
    MAX_QPS,
    MIN_QPS,
    MlperfSettings,
    build,
    check_user_conf,
    compliance,
)
from cli_inprocess import run_cli


# -- settings: the benchmark's defaults are LoadGen's own mlperf.conf ------------------
@pytest.mark.parametrize(
    "scenario,benchmark,ttft_ms,tpot_ms",
    [
        ("server", "llama2-70b", 2000, 200),  # mlperf.conf: llama2-70b.Server.*
        ("interactive", "llama2-70b", 450, 40),  # llama2-70b-interactive.Server.*
        ("server", "llama3_1-405b", 6000, 175),
        ("interactive", "llama3_1-405b", 4500, 80),
    ],
)
def test_benchmark_defaults(scenario: str, benchmark: str, ttft_ms: int, tpot_ms: int) -> None:
    ms = MlperfSettings(scenario=scenario, benchmark=benchmark)
    ms.validate()
    _, defaults, eff = build(ms, qsl_size=100)
    assert defaults["ttft_latency"] == ttft_ms * 1_000_000
    assert defaults["tpot_latency"] == tpot_ms * 1_000_000
    assert defaults["min_duration_ms"] == 600_000
    assert defaults["use_token_latencies"] is True
    assert eff["performance_sample_count_override"] == 100  # never beyond the QSL
    assert compliance(defaults, eff, synthetic=False) == [
        f"100 performance samples, the benchmark uses "
        f"{defaults['performance_sample_count_override']}"
    ]


def test_user_conf_then_command_line(tmp_path: Path) -> None:
    conf = tmp_path / "user.conf"
    conf.write_text(
        "# a comment\n*.Server.min_duration = 5000\nllama2-70b.Server.target_qps = 7.5\n"
        "llama2-70b.Server.ttft_latency = 3000\n"
    )
    ms = MlperfSettings(scenario="server", user_conf=str(conf), min_query_count=20)
    ms.validate()
    ts, defaults, eff = build(ms, qsl_size=50)
    assert eff["min_duration_ms"] == 5000 and eff["server_target_qps"] == 7.5
    assert eff["ttft_latency"] == 3_000_000_000 and eff["min_query_count"] == 20
    reasons = compliance(defaults, eff, synthetic=True)
    assert "min_duration 5 s is below the benchmark's 600 s" in reasons
    assert "the TTFT limit 3000 ms is above the benchmark's 2000 ms" in reasons
    assert "the samples are synthetic, not the benchmark's dataset" in reasons
    # the command line wins over user.conf
    ms2 = MlperfSettings(scenario="server", user_conf=str(conf), target_qps=3, min_duration_s=1)
    ms2.validate()
    _, _, eff2 = build(ms2, qsl_size=50)
    assert eff2["server_target_qps"] == 3 and eff2["min_duration_ms"] == 1000


@settings(max_examples=40, deadline=None)
@given(
    opts=st.fixed_dictionaries({}, optional={"target_qps": st.just(3.0),
                                             "min_duration_s": st.just(1.0),
                                             "min_query_count": st.just(20)}),
    lines=st.sets(st.sampled_from(["*.Server.target_qps = 7.5", "*.Server.min_duration = 5000",
                                   "llama2-70b.Server.min_query_count = 30",
                                   "*.Offline.target_qps = 2", "*.Server.ttft_latency = 3000"]),
                  min_size=1),
)  # fmt: skip
def test_a_user_conf_line_the_command_line_replaces_is_never_recorded_as_applied(
    tmp_path_factory, opts: dict, lines: set[str]
) -> None:
    """`--target-qps 3` beside `*.Server.target_qps = 7.5`: the command line won and
    mlperf.json still listed the line as applied, with nothing said. Now each such line
    carries `replaced_by` (the option); every other line none."""
    conf = tmp_path_factory.mktemp("uc") / "user.conf"
    conf.write_text("\n".join(sorted(lines)) + "\n")
    ms = MlperfSettings(scenario="server", user_conf=str(conf), **opts)
    ms.validate()
    option = {"target_qps": "--target-qps", "min_duration": "--min-duration",
              "min_query_count": "--min-query-count"}  # fmt: skip
    field = {"target_qps": "target_qps", "min_duration": "min_duration_s",
             "min_query_count": "min_query_count"}  # fmt: skip
    for ln in ms.user_conf_lines:
        key = ln["text"].split()[0].rsplit(".", 1)[-1]
        replaced = ln["applies"] and key in field and field[key] in opts
        assert ln.get("replaced_by") == (option[key] if replaced else None), ln


@pytest.mark.parametrize(
    "line",
    [
        "*.Server.min_duration=5000",
        "min_duration = 5000",
        "*.Server.target_qps = fast",
        "*.Server.target_qps = 5  # a comment after a value fails LoadGen's whole file",
    ],
)
def test_user_conf_lines_loadgen_would_skip(tmp_path: Path, line: str) -> None:
    conf = tmp_path / "user.conf"
    conf.write_text(f"*.Server.min_query_count = 10\n{line}\n")
    with pytest.raises(UsageError, match="line 2"):
        check_user_conf(str(conf))


@pytest.mark.parametrize(
    ("scenario", "line", "key"),
    [
        ("server", "*.Server.target_qps = nan", "target_qps"),
        ("server", "*.Server.target_qps = -5", "target_qps"),
        ("server", "*.Server.target_qps = 0", "target_qps"),
        ("offline", "*.Offline.target_qps = inf", "target_qps"),
        ("server", "*.*.min_query_count = 100000000000000000000000000000", "min_query_count"),
        ("server", "*.*.min_duration = 99999999999999", "min_duration"),
        # strtoull reads "1e308" as 1 (ms) and "-1" as 2^64 - 1: never what was written
        ("server", "*.*.min_duration = 1e308", "min_duration"),
        ("server", "*.*.min_query_count = -1", "min_query_count"),
    ],
)
def test_user_conf_values_no_run_can_use(
    tmp_path: Path, scenario: str, line: str, key: str
) -> None:
    """LoadGen applies these without a word and then never finishes (NaN or negative
    rate) or allocates until killed (a count past 2^64): one line naming the line,
    before the run."""
    conf = tmp_path / "user.conf"
    conf.write_text(line + "\n")
    ms = MlperfSettings(scenario=scenario, user_conf=str(conf))
    with pytest.raises(UsageError, match=rf"--user-conf .* line 1: .*{key} must be"):
        ms.validate()


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"scenario": "interactive", "benchmark": "mixtral-8x7b"}, "no interactive"),
        ({"scenario": "offline", "find_peak": True}, "--find-peak"),
        ({"scenario": "single-stream", "target_qps": 2}, "single-stream"),
        ({"scenario": "server", "target_qps": -1}, "--target-qps"),
        ({"scenario": "server", "benchmark": "bert"}, "--benchmark"),
    ],
)
def test_bad_settings(kw: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        MlperfSettings(**kw).validate()


@settings(max_examples=60, deadline=None)
@given(
    scenario=st.sampled_from(["server", "interactive", "offline"]),
    qps=st.one_of(
        st.sampled_from([MIN_QPS, MAX_QPS, 1e-300, 5e-324, 0.0]),
        st.floats(0, 2 * MIN_QPS),
        st.floats(MAX_QPS / 2, 2 * MAX_QPS),
    ),
)
def test_target_qps_boundary(scenario: str, qps: float) -> None:
    """--target-qps in [0.001, 1e6] (run's --rate bounds) is accepted; below or above is one
    line naming it (audit_opts 2a: 1e-300 left LoadGen waiting ~1e300 s for a first query)."""
    ms = MlperfSettings(scenario=scenario, target_qps=qps)
    if MIN_QPS <= qps <= MAX_QPS:
        ms.validate()
    else:
        with pytest.raises(UsageError, match=r"^--target-qps must be a finite number in \[0.001,"):
            ms.validate()


@pytest.mark.parametrize("scenario", ["server", "interactive", "offline"])
def test_cli_tiny_target_qps_is_refused_before_connecting(tmp_path: Path, scenario: str) -> None:
    code, out, err, _ = run_cli(
        [
            "mlperf", scenario, "--url", "http://127.0.0.1:9", "--samples", "4",
            "--min-query-count", "4", "--min-duration", "0", "--target-qps", "1e-300",
            "--isl", "8", "--osl", "8",
        ],
        tmp_path,
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and "--target-qps" in err, err
    assert not list(tmp_path.iterdir())


def test_user_conf_target_qps_has_the_same_floor(tmp_path: Path) -> None:
    conf = tmp_path / "user.conf"
    conf.write_text("*.Server.target_qps = 0.0001\n")
    with pytest.raises(UsageError, match="target_qps"):
        MlperfSettings(scenario="server", user_conf=str(conf)).validate()


def test_cli_bad_option_is_one_line() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "mlperf", "offline", "--find-peak"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "--find-peak" in r.stderr


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["--isl-std", "5"], "--isl-std"),
        (["--embedded-model", "tiny"], "--embedded-model"),
        (["--api-key-env", "FOO", "--api-key-file", "{key}"], "--api-key-env"),
        (["--out", "{out}", "--results-root", "{root}"], "--results-root"),
        (["--dataset-format", "auto"], "--dataset-format"),  # typed at the default
        (["--allow-pickle"], "--allow-pickle"),
        (["--dataset", "{data}", "--isl", "128"], "--isl"),
        # an MLPerf set's records are its samples: --samples 3 over 8 ran all 8
        (["--dataset", "{mldata}", "--samples", "3"], "--samples"),
        # nothing is drawn from an MLPerf set: --seed 5 was recorded and changed nothing
        (["--dataset", "{mldata}", "--seed", "5"], "--seed"),
    ],
)
def test_cli_refuses_what_run_refuses_as_unused(tmp_path, args: list[str], word: str) -> None:
    """mlperf never called the load options' combination checks: each of these passed
    silently to the connect. Exit 2, one line naming the option, before any connect."""
    (tmp_path / "key").write_text("k\n")
    (tmp_path / "d.jsonl").write_text('{"prompt": "hi"}\n')
    (tmp_path / "ml.jsonl").write_text('{"input": "hi", "tok_input": [1, 2]}\n')
    fill = {"key": tmp_path / "key", "out": tmp_path / "o", "root": tmp_path / "r",
            "data": tmp_path / "d.jsonl", "mldata": tmp_path / "ml.jsonl"}  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "mlperf", "offline", "--url", "http://127.0.0.1:9",
         *(a.format(**fill) for a in args)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and word in r.stderr, r.stderr
    assert "cannot reach" not in r.stderr and not (tmp_path / "o").exists()


@settings(max_examples=40, deadline=None)
@given(
    samples=st.one_of(st.none(), st.integers(min_value=1, max_value=1_000_000)),
    fmt=st.sampled_from(["auto", "mlperf", "prompts"]),
)
def test_property_samples_applies_to_every_set_but_an_mlperf_one(tmp_path_factory, samples, fmt):
    """--samples sizes a synthetic set or the draw from an accelbench dataset; an MLPerf
    set's records are its samples, so --samples beside one (detected or named) is refused
    naming the option, never ignored; without --samples the set is the file's."""
    from accelbench.suites.mlperf.run import QslOptions, _check_qsl

    d = tmp_path_factory.mktemp("qsl")
    ml = d / "ml.jsonl"
    ml.write_text('{"input": "hi", "tok_input": [1, 2]}\n')
    q = QslOptions(samples=samples, dataset=str(ml), dataset_format=fmt)
    if samples is not None and fmt != "prompts":
        with pytest.raises(UsageError, match=r"^--samples does not apply to an MLPerf dataset"):
            _check_qsl(q)
    else:
        _check_qsl(q)
        assert q.size == (1024 if samples is None else samples)
    synthetic = QslOptions(samples=samples)
    _check_qsl(synthetic)
    assert synthetic.size == (1024 if samples is None else samples)


# -- the QSL: MLPerf's dataset shape --------------------------------------------------
LLAMA2_ROWS = [
    # Llama-2-70B (processorca.py): input, tok_input, output, tok_output_length
    {"input": "<s>[INST] Hi [/INST]", "tok_input": [1, 518, 25580, 29962, 6324, 29871],
     "output": "Hello there", "tok_output_length": 3},
    # Llama-3.1-405B (dataset.py): input, tok_input, tok_input_len, gt_output
    {"input": "Sum 2+2", "tok_input": [128000, 9370], "tok_input_len": 2, "gt_output": "4",
     "tok_ref_output_len": 2},
]  # fmt: skip


def test_dataset_shapes(tmp_path: Path) -> None:
    as_list = tmp_path / "set.json"
    as_list.write_text(json.dumps(LLAMA2_ROWS))
    as_lines = tmp_path / "set.jsonl"
    as_lines.write_text("\n".join(json.dumps(r) for r in LLAMA2_ROWS) + "\n")
    as_columns = tmp_path / "cols.json"  # pandas DataFrame.to_json() default
    cols = {k: {str(i): r.get(k) for i, r in enumerate(LLAMA2_ROWS)} for k in LLAMA2_ROWS[0]}
    as_columns.write_text(json.dumps(cols))
    for path in (as_list, as_lines):
        s = samples_from_records(read_records(str(path)), tok=None, default_osl=99)
        assert [(x.prompt, x.isl_planned, x.max_tokens) for x in s] == [
            ("<s>[INST] Hi [/INST]", 6, 3),
            ("Sum 2+2", 2, 2),
        ]
    s = samples_from_records(read_records(str(as_columns)), tok=None, default_osl=99)
    assert [(x.isl_planned, x.max_tokens) for x in s] == [(6, 3), (2, 99)]


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(
        st.fixed_dictionaries({
            "input": st.text(min_size=1, max_size=6),
            "tok_input_length": st.integers(1, 99),
            "tok_output_length": st.integers(1, 99),
        }),
        min_size=1, max_size=12,
    ),
    index=st.sampled_from(["range", "ids", "negative"]),
    data=st.data(),
)  # fmt: skip
def test_columns_are_aligned_by_index_key(
    tmp_path_factory, rows: list[dict], index: str, data: st.DataObject
) -> None:
    """Property: pandas' to_json() column form gives the same rows whatever order each
    column lists its index keys in (they were read by position: a column in another order
    gave one sample another's output length, silently). Rows come in index order: numeric
    for whole-number keys ("10" after "9"), else the first column's order."""
    n = len(rows)
    keys = {"range": [str(i) for i in range(n)], "ids": [f"id{i}" for i in range(n)],
            "negative": [str(i - n // 2) for i in range(n)]}[index]  # fmt: skip
    d = tmp_path_factory.mktemp("cols")
    cols = {}
    for j, k in enumerate(rows[0]):
        order = list(range(n))
        if j or index != "ids":  # with keys not whole numbers, the first column's order rules
            order = data.draw(st.permutations(order))
        cols[k] = {keys[i]: rows[i][k] for i in order}
    (d / "cols.json").write_text(json.dumps(cols))
    assert read_records(str(d / "cols.json")) == rows
    # a list is a column whose index is its positions: it aligns with "0", "1", ...
    if index == "range":
        cols["input"] = [r["input"] for r in rows]
        (d / "mixed.json").write_text(json.dumps(cols))
        assert read_records(str(d / "mixed.json")) == rows


def test_columns_with_different_index_keys_are_refused(tmp_path: Path) -> None:
    """The audit's file: `tok_output_length` listed "1" before "0" gave sample 0 the
    output length of sample 1; now aligned. Columns whose keys differ are refused."""
    p = tmp_path / "cols.json"
    p.write_text(json.dumps({"input": {"0": "alpha prompt", "1": "beta prompt"},
                             "tok_input_length": {"0": 3, "1": 4},
                             "tok_output_length": {"1": 5, "0": 9}}))  # fmt: skip
    s = samples_from_records(read_records(str(p)), tok=None, default_osl=99)
    assert [(x.prompt, x.isl_planned, x.max_tokens) for x in s] == [
        ("alpha prompt", 3, 9),
        ("beta prompt", 4, 5),
    ]
    for other, said in [
        ({"0": 9, "2": 5}, "has 1 index key ('2') that column 'input' lacks and lacks 1 "
                           "index key ('1') that column 'input' has"),
        ([9], "lacks 1 index key ('1') that column 'input' has"),
        ({"0": 9, "1": 5, "x": 1}, "has 1 index key ('x') that column 'input' lacks"),
    ]:  # fmt: skip
        p.write_text(json.dumps({"input": {"0": "a", "1": "b"}, "tok_output_length": other}))
        with pytest.raises(UsageError) as exc:
            read_records(str(p))
        msg = str(exc.value)
        assert msg.startswith(f"--dataset {p}: column 'tok_output_length' {said}"), msg
        assert "\n" not in msg and exc.value.exit_code == 2


def test_mlperf_run_of_reordered_columns_sends_each_sample_its_length(
    reference_server, tmp_path: Path
) -> None:
    """The audit's command: sample 0 (isl 3) was sent max_tokens 5, sample 1's. Columns
    whose keys differ: exit 2, one line, nothing written."""
    from cli_inprocess import run_cli

    srv = reference_server("--max-throughput")
    data = tmp_path / "cols.json"
    data.write_text(json.dumps({"input": {"0": "alpha prompt", "1": "beta prompt"},
                                "tok_input_length": {"0": 3, "1": 4},
                                "tok_output_length": {"1": 5, "0": 9}}))  # fmt: skip
    out = tmp_path / "mlout"
    code, text = _run(["offline", "-b", "llama3_1-8b", "--url", srv.url, "--dataset",
                       str(data), "--min-duration", "0", "--min-query-count", "1", "-o",
                       str(out), "-q"])  # fmt: skip
    assert code == 0, text
    sent = {(r["isl_planned"], r["max_tokens"])
            for r in map(json.loads, (out / "requests.jsonl").read_text().splitlines())}  # fmt: skip
    assert sent == {(3, 9), (4, 5)}
    data.write_text(json.dumps({"input": {"0": "a", "1": "b"}, "tok_output_length": {"0": 9}}))
    code, _, err, _ = run_cli(["mlperf", "offline", "-b", "llama3_1-8b", "--url", srv.url,
                               "--dataset", str(data), "-o", "bad", "-q"], tmp_path)  # fmt: skip
    assert code == 2 and err.count("\n") == 1, err
    assert "column 'tok_output_length' lacks 1 index key ('1')" in err, err
    assert not (tmp_path / "bad").exists()


def test_pickle_only_when_allowed(tmp_path: Path) -> None:
    p = tmp_path / "set.pkl"
    p.write_bytes(pickle.dumps(LLAMA2_ROWS))
    with pytest.raises(UsageError, match="--allow-pickle"):
        read_records(str(p))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["input", "tok_input", "tok_input_len", "tok_output_length", "x"]),
            st.one_of(
                st.none(), st.text(max_size=5), st.integers(-5, 2**40), st.floats(),
                st.lists(st.integers(0, 9), max_size=4), st.booleans(),
            ),
        ),
        max_size=5,
    )
)  # fmt: skip
def test_records_from_outside(rows: list[dict]) -> None:
    try:
        out = samples_from_records(rows, tok=None, default_osl=7)
    except UsageError:
        return
    assert len(out) == len(rows)
    assert all(isinstance(x.prompt, str) and x.prompt and x.max_tokens >= 1 for x in out)


# -- LoadGen's trace: how late queries reached the SUT ----------------------------------
FIXTURES = Path(__file__).parent / "fixtures" / "mlperf"


def test_issue_side_from_a_real_server_trace() -> None:
    """An excerpt of LoadGen 6.0's own trace of a Server run (its LogDetail lines are not
    JSON: skipped). 10 Latency counters, issue_delay 191 ns .. 374,750 ns; 9 IssueQuery
    spans, the longest 322.8 us. The Sample events repeat the delays: not counted twice."""
    got = read_issue_side(FIXTURES / "trace_server.json")
    assert got is not None
    assert got.queries == 10
    assert got.delay_ms_max == got.delay_ms_p99 == 0.375  # rank int(0.99 x 10) = 9: the max
    assert got.call_ms_max == pytest.approx(0.3228)


def test_issue_side_from_a_real_offline_trace() -> None:
    """Offline: no Latency counters; the 48 Sample events' issue_start_ns (180 ns at
    most, 0.000 ms at 1 us resolution) and the one IssueQuery span of 124.225 us."""
    got = read_issue_side(FIXTURES / "trace_offline.json")
    assert got is not None
    assert (got.queries, got.delay_ms_max) == (48, 0.0)
    assert got.call_ms_max == pytest.approx(0.124225)


def test_issue_side_missing_or_empty(tmp_path: Path) -> None:
    assert read_issue_side(tmp_path / "none.json") is None
    (tmp_path / "t.json").write_text('{"traceEvents":[\n{"name":"Wait","ph":"X"}\n]}')
    assert read_issue_side(tmp_path / "t.json") is None


_EVENT = st.fixed_dictionaries(
    {"name": st.sampled_from(["Latency", "Sample", "IssueQuery", "x"]),
     "ph": st.sampled_from(["X", "C", "b"]),
     "dur": st.one_of(st.floats(), st.integers(-5, 2**70), st.text(max_size=3), st.none()),
     "args": st.one_of(st.none(), st.dictionaries(
         st.sampled_from(["issue_delay", "issue_start_ns"]),
         st.one_of(st.floats(), st.integers(-5, 2**70), st.booleans(), st.text(max_size=3)),
     ))}
)  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(_EVENT.map(json.dumps), st.text(max_size=30)), max_size=12))
def test_issue_side_of_any_trace_lines(tmp_path_factory, lines: list[str]) -> None:
    """Whatever the lines hold (torn JSON, NaN, negative, huge, wrong types), the reader
    gives None or finite, non-negative figures, and never raises."""
    p = tmp_path_factory.mktemp("trace") / "t.json"
    p.write_text(",\n".join(lines), encoding="utf-8", errors="surrogatepass")
    got = read_issue_side(p)
    if got is not None:
        figs = (got.delay_ms_p99, got.delay_ms_max, got.call_ms_max)
        assert all(np.isfinite(x) and x >= 0 for x in figs) and got.queries > 0
        assert got.delay_ms_p99 <= got.delay_ms_max


# -- LoadGen against the reference server (known TTFT / ITL) ---------------------------
def _run(args: list[str]) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["mlperf", *args], catch_exceptions=False)
    return r.exit_code, r.output


def test_server_valid_and_ttft_agrees(reference_server, tmp_path: Path) -> None:
    """TTFT 20 ms, 5 ms between tokens, 8 tokens: 55 ms a request; 64 in flight hold
    ~1,100 QPS, so 150 QPS is VALID (enough queries for LoadGen's early stopping)."""
    srv = reference_server("--ttft-ms", "20", "--itl-ms", "5")
    out = tmp_path / "run"
    code, text = _run(
        ["server", "--url", srv.url, "--target-qps", "150", "--min-duration", "3",
         "--min-query-count", "480", "--isl", "32", "--osl", "8", "--samples", "64",
         "--max-concurrency", "64", "--trace", "--out", str(out), "-q"]
    )  # fmt: skip
    doc = json.loads((out / "mlperf.json").read_text())
    assert doc["result"] == "VALID", text
    assert code == 0
    assert "MLPerf: VALID" in text and "NON-COMPLIANT" in text
    assert "MLPerf Results Summary" in (out / "mlperf_log_summary.txt").read_text()
    assert (out / "mlperf_log_detail.txt").stat().st_size > 0
    run = json.loads((out / "run.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert run["mlperf"]["compliant"] is False and summary["mlperf"]["compliant"] is False
    assert any("min_duration 3 s" in r for r in summary["mlperf"]["noncompliance"])
    # the SUT's records carry the kernel's receive times, and the summary says so
    assert summary["client"]["arrival_stamps"] == "kernel"
    assert summary["client"]["workers"][0]["receive"]["reads"] > 0
    t = pq.read_table(out / "requests.parquet").to_pydict()
    n = len(t["idx"])
    assert n == doc["figures"]["query_count"] == summary["counts"]["completed"]
    assert all(t["ok"]) and set(t["osl"]) == {8}
    # LoadGen's p99 TTFT against accelbench's records of the same requests (LoadGen's
    # percentile: the sorted value at floor(n * 0.99)), timed from the moment LoadGen
    # handed each query over.
    ttft = np.sort((np.array(t["t_first"]) - np.array(t["t_sched"])) / 1e6)
    ours = float(ttft[int(n * 0.99)])
    theirs = doc["figures"]["ttft_p99_ms"]
    assert ours >= 20 and theirs >= ours - 0.05  # LoadGen's clock starts earlier, never later
    # Per request LoadGen's TTFT exceeds the record's by the query's issue side
    # (scheduled time -> LoadGen's IssueQuery call -> the SUT's callback, which may wait
    # for the GIL: both from LoadGen's trace, --trace) and the SUT's hand-over (the
    # kernel's receive stamp t_first -> FirstTokenComplete, loop lag included: measured
    # by the SUT). Each is 0 or more, so LoadGen's p99 lies between the records' p99 and
    # that plus the largest of their sum. A 1 ms agreement is a fair test only when all
    # are small (p99 <= 0.5 ms); on a busier host the check is that measured bound, and
    # every figure is stated.
    sut = doc["sut"]
    handover, loop_lag = sut["first_token_handover_ms_p99"], sut["loop_lag_ms_p99"]
    issue_p99, issue_max = sut["loadgen_issue_delay_ms_p99"], sut["loadgen_issue_delay_ms_max"]
    call_max = sut["loadgen_issue_call_ms_max"]
    assert None not in (handover, loop_lag, issue_p99, issue_max, call_max), sut
    assert (out / "mlperf_log_trace.json").stat().st_size > 0
    fair = max(handover, loop_lag, issue_p99) <= 0.5
    late = sut["first_token_handover_ms_max"] + issue_max + call_max
    bound = 1.0 if fair else 1.0 + late
    note = (
        f"LoadGen TTFT p99 {theirs:.3f} ms vs records {ours:.3f} ms (diff "
        f"{theirs - ours:.3f} ms); hand-over p99 {handover:.2f} ms, max "
        f"{sut['first_token_handover_ms_max']:.2f} ms, loop lag p99 {loop_lag:.2f} ms; "
        f"LoadGen's issue delay p99 {issue_p99:.2f} ms, max {issue_max:.2f} ms, its "
        f"IssueQuery call max {call_max:.2f} ms; "
        f"bound {bound:.2f} ms ({'fair: the 1 ms target' if fair else 'host too busy for 1 ms'})"
    )
    print(note)
    if not fair:
        warnings.warn(note, stacklevel=1)
    assert abs(theirs - ours) < bound, (doc["figures"], note)


def test_interactive_far_above_capacity_is_invalid(reference_server, tmp_path: Path) -> None:
    """2 in flight at 55 ms a request hold ~36 QPS: at 90 QPS the queue grows and the
    p99 TTFT passes the interactive 450 ms limit."""
    srv = reference_server("--ttft-ms", "20", "--itl-ms", "5")
    out = tmp_path / "run"
    code, text = _run(
        ["interactive", "--url", srv.url, "--target-qps", "90", "--min-duration", "2",
         "--min-query-count", "20", "--isl", "32", "--osl", "8", "--samples", "32",
         "--max-concurrency", "2", "--out", str(out), "-q"]
    )  # fmt: skip
    doc = json.loads((out / "mlperf.json").read_text())
    assert code == 1 and doc["result"] == "INVALID"
    assert doc["checks"]["performance constraints (latency limits)"] is False
    assert any("TTFT constrain not met" in r for r in doc["reasons"])
    assert doc["figures"]["ttft_p99_ms"] > 450 and doc["figures"]["ttft_limit_ms"] == 450
    assert "MLPerf: INVALID" in text


# -- Offline on the real engine ----------------------------------------------------------
@pytest.mark.engine
def test_offline_tiny_model_throughput(tmp_path: Path) -> None:
    from accelbench.engines.llamacpp import start_llama_server

    server = start_llama_server("tiny", parallel=4, log=lambda _m: None)
    try:
        out = tmp_path / "run"
        code, text = _run(
            ["offline", "--url", server.url, "--target-qps", "40", "--min-duration", "1",
             "--min-query-count", "48", "--isl", "32", "--osl", "16", "--samples", "48",
             "--out", str(out), "-q"]
        )  # fmt: skip
    finally:
        server.stop()
    doc = json.loads((out / "mlperf.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert doc["result"] is not None, text
    n = summary["counts"]["completed"]
    assert n >= 48 and summary["counts"]["failed"] == 0
    # LoadGen: samples / (last completion - the query's start). The same from the run
    # directory's records: the SUT stamps each sample with the moment LoadGen handed the
    # query over (t_sched) and its completion (t_done), so the two agree to the hand-over.
    lg_sps = doc["figures"]["completed_samples_per_s"]
    t = pq.read_table(out / "requests.parquet").to_pydict()
    span_s = (max(t["t_done"]) - min(t["t_sched"])) / 1e9
    assert lg_sps == pytest.approx(n / span_s, rel=0.03), (lg_sps, n / span_s)
    # accelbench's own figure times from the first send (inside LoadGen's window): never
    # lower; higher by the time from the hand-over to the first send (a short offline run
    # on a busy host can wait a noticeable part of its length for that)
    ours = summary["throughput"]["requests_per_s"]
    assert ours >= lg_sps * 0.97, (lg_sps, ours)
    assert doc["figures"]["tokens_per_s"] == pytest.approx(
        lg_sps * summary["tokens"]["output"] / n, rel=0.01
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 2.5, "12", True])
def test_a_non_integer_token_count_is_one_clear_line(bad) -> None:
    """Found by test_records_from_outside: NaN and inf crashed int() with a traceback."""
    with pytest.raises(UsageError, match="tok_input is not a token count"):
        samples_from_records([{"input": "x", "tok_input": bad}], tok=None, default_osl=7)


@settings(max_examples=20, deadline=None)
@given(cap=st.integers(min_value=1, max_value=100_000))
def test_property_max_concurrency_is_refused_for_single_stream(cap):
    """SingleStream issues one query when the last completes: --max-concurrency changed
    nothing, yet the run said 'at most 4 in flight'. Refused in one line, before any
    connect, for every cap."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        code, out, err, _ = run_cli(["mlperf", "single-stream", "--url", "http://127.0.0.1:9",
                                     "--max-concurrency", str(cap)], Path(d))  # fmt: skip
        assert code == 2 and not out
        (line,) = err.strip().splitlines()
        assert "--max-concurrency does not apply to single-stream" in line


@pytest.mark.parametrize("scenario", ["offline", "server", "interactive"])
def test_max_concurrency_still_applies_to_the_other_scenarios(tmp_path, scenario):
    code, _, err, _ = run_cli(["mlperf", scenario, "--url", "http://127.0.0.1:9", "--samples",
                               "4", "--max-concurrency", "4", "--target-qps", "1"]
                              if scenario != "offline" else
                              ["mlperf", scenario, "--url", "http://127.0.0.1:9", "--samples",
                               "4", "--max-concurrency", "4"], tmp_path)  # fmt: skip
    assert "--max-concurrency" not in err, err


@settings(max_examples=10, deadline=None)
@given(scenario=st.sampled_from(["server", "interactive"]), qps=st.floats(0.001, 1000))
def test_property_no_stream_is_refused_where_loadgen_judges_token_latencies(scenario, qps):
    """Unstreamed, the first token is marked when the whole reply came: a Server run
    judged TTFT as the full latency and TPOT as 0.017 ms against the benchmark's limits,
    and said nothing. Refused in one line, before any connect."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        code, out, err, _ = run_cli(["mlperf", scenario, "--url", "http://127.0.0.1:9",
                                     "--target-qps", repr(qps), "--no-stream"], Path(d))  # fmt: skip
        assert code == 2 and not out
        (line,) = err.strip().splitlines()
        assert f"--no-stream does not apply to {scenario}" in line
