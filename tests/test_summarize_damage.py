"""`summarize` on a damaged journal never replaces a complete result with less: it keeps
the better of the two, says what was unreadable, and exits 1 when records were lost."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.runner.finalize import finalize_run, journal_problem
from conftest import RefServer

N = 40


@pytest.fixture(scope="module")
def complete_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("complete")
    srv = RefServer(["--ttft-ms", "1", "--itl-ms", "1"], tmp)
    try:
        cfg = BenchmarkConfig(url=srv.url, out_dir=str(tmp / "run"), concurrency=4,
                              num_requests=N, telemetry=False,
                              workload=WorkloadConfig(isl=8, osl=3))  # fmt: skip
        return run_benchmark(cfg, progress=False).directory
    finally:
        srv.stop()


def copy(run: Path, tmp: Path) -> Path:
    dst = tmp / "copy"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(run, dst)
    return dst


def summarize_cli(run: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelbench", "summarize", str(run)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def rows(run: Path) -> int:
    return pq.read_metadata(run / "requests.parquet").num_rows


def damage(run: Path, how: str) -> None:
    j = run / "requests.jsonl"
    data = j.read_bytes()
    lines = data.splitlines(keepends=True)
    if how == "garbage":
        j.write_bytes(bytes(range(256)) * 40)
    elif how == "truncated":
        j.write_bytes(b"".join(lines[:20]) + lines[20][: len(lines[20]) // 2])  # torn line 21
    elif how == "one_bad_line":
        lines[6] = b'{"idx": 6, "t_se\n'
        j.write_bytes(b"".join(lines))
    elif how == "wrong_shape":
        lines[6] = b'{"idx": "six", "t_send": [1], "chunk_times": 5}\n'
        j.write_bytes(b"".join(lines))
    elif how == "missing":
        j.unlink()
    elif how == "directory":
        j.unlink()
        j.mkdir()
    elif how == "link_loop":
        j.unlink()
        j.symlink_to(j.name)
    elif how == "empty":
        j.write_bytes(b"")


@pytest.mark.parametrize(
    "how, says",
    [("garbage", "unreadable line"), ("truncated", "unreadable line(s) in requests.jsonl (line 21)"),
     ("one_bad_line", "(line 7)"), ("wrong_shape", "1 journal record(s) of the wrong shape"),
     ("missing", "requests.jsonl is missing"), ("empty", "instead of the 0 the journal gave"),
     # both said "requests.jsonl is missing"
     ("directory", "requests.jsonl is a directory, not a file"),
     ("link_loop", "requests.jsonl cannot be read (Too many levels of symbolic links)")],
)  # fmt: skip
def test_damaged_journal_keeps_the_complete_result(complete_run, tmp_path, how, says):
    run = copy(complete_run, tmp_path)
    before = pq.read_table(run / "requests.parquet")
    damage(run, how)
    r = summarize_cli(run)
    assert r.returncode == 1, r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr
    assert f"kept the existing requests.parquet ({N} rows)" in r.stderr
    assert pq.read_table(run / "requests.parquet").equals(before)
    s = json.loads((run / "summary.json").read_text())
    assert s["counts"]["completed"] == N and s["journal"]["kept_parquet_rows"] == N


def test_intact_journal_exits_0(complete_run, tmp_path):
    run = copy(complete_run, tmp_path)
    r = summarize_cli(run)
    assert r.returncode == 0, r.stderr
    assert rows(run) == N and "journal" not in json.loads((run / "summary.json").read_text())


def test_first_summarize_of_a_killed_run_says_what_was_lost(complete_run, tmp_path):
    run = copy(complete_run, tmp_path)
    (run / "requests.parquet").unlink()
    damage(run, "truncated")
    r = summarize_cli(run)
    assert r.returncode == 1 and "line 21" in r.stderr
    assert rows(run) == 20  # all that could be read: nothing better existed


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.integers(0, N - 1), st.binary(max_size=60)), max_size=6),
       st.integers(0, 10_000))  # fmt: skip
def test_random_damage_never_loses_rows(complete_run, tmp_path, edits, cut):
    run = copy(complete_run, tmp_path)
    j = run / "requests.jsonl"
    lines = j.read_bytes().splitlines(keepends=True)
    for i, junk in edits:
        lines[i] = junk + b"\n"
    data = b"".join(lines)
    j.write_bytes(data[: len(data) - cut] if cut < len(data) else b"")
    summary = finalize_run(run)
    assert rows(run) == N  # never fewer than the complete result
    assert summary["counts"]["completed"] == N
    lost = summary.get("journal")
    assert (lost is None) == (journal_problem(summary) is None)


def test_batched_finalize_equals_one_batch(complete_run, tmp_path, monkeypatch):
    """finalize completes the journal in batches (bounded memory): batches of 7 over 40
    records, one of them of the wrong shape in the third batch, give the same table and
    summary as one batch, with the bad record counted once."""
    from accelbench.runner import finalize

    run = copy(complete_run, tmp_path)
    j = run / "requests.jsonl"
    lines = j.read_bytes().splitlines(keepends=True)
    lines[16] = b'{"idx": "not a number", "ok": 7}\n'
    j.write_bytes(b"".join(lines))
    (run / "requests.parquet").unlink()
    one = finalize_run(run)
    t_one = pq.read_table(run / "requests.parquet")
    (run / "requests.parquet").unlink()
    monkeypatch.setattr(finalize, "TABLE_BATCH", 7)
    batched = finalize_run(run)
    t_batched = pq.read_table(run / "requests.parquet")
    assert t_batched.num_rows == t_one.num_rows == N - 1
    assert t_batched.to_pylist() == t_one.to_pylist()
    assert batched["journal"]["bad_records"] == one["journal"]["bad_records"] == 1
    assert {k: v for k, v in batched.items() if k != "journal"} == {
        k: v for k, v in one.items() if k != "journal"
    }


def _files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in run.iterdir()}


@pytest.mark.parametrize(
    "kw, config, says",
    [
        ({"gpus": -1}, None, "--gpus must be in [1, 1_000_000] (got -1)"),
        ({"gpus": 10**30}, None, "--gpus must be in [1, 1_000_000]"),
        ({"slo": {"tpot_ms": float("nan")}}, None, "--slo tpot_ms must be a finite number"),
        ({"slo": {"tpot_ms": -1.0}}, None, "--slo tpot_ms must be a finite number"),
        ({"slo": {"foo": 1.0}}, None, "unknown SLO 'foo'"),
        ({}, {"gpus": -3}, "run.json is damaged: config gpus must be in"),
        ({}, {"gpus": "x"}, "run.json is damaged: config gpus must be a whole number"),
        ({}, {"slo": [1]}, "run.json is damaged: config slo must be an object"),
        ({}, {"slo": {"tpot_ms": "x"}}, "run.json is damaged: config --slo tpot_ms must be"),
        ({}, {"rate": [1]}, "run.json is damaged: config rate must be a number"),
        ({}, {"concurrency": "x"}, "run.json is damaged: config concurrency must be"),
        ({}, [1], "run.json: config: expected an object"),
    ],
)
def test_bad_overrides_or_damaged_config_never_rewrite_the_result(
    complete_run, tmp_path, kw, config, says
):
    # each was written into summary.json (gpus -1: negative per-GPU figures; nan SLO: goodput 0)
    # or ended in a TypeError deep in the statistics (exit 70)
    run = copy(complete_run, tmp_path)
    if config is not None:
        meta = json.loads((run / "run.json").read_text())
        meta["config"] = {**meta["config"], **config} if isinstance(config, dict) else config
        (run / "run.json").write_text(json.dumps(meta))
    before = _files(run)
    with pytest.raises(AccelbenchError) as exc:
        finalize_run(run, **kw)
    assert says in str(exc.value)
    assert _files(run) == before


def test_summarize_cli_bad_gpus_is_one_line(complete_run, tmp_path):
    run = copy(complete_run, tmp_path)
    before = _files(run)
    r = subprocess.run([sys.executable, "-m", "accelbench", "summarize", str(run), "--gpus", "-1"],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "error: --gpus must be in [1, 1_000_000] (got -1)"
    ]
    assert _files(run) == before


def test_a_journal_that_cannot_be_read_and_no_parquet_says_why(complete_run, tmp_path):
    run = copy(complete_run, tmp_path)
    (run / "requests.parquet").unlink()
    damage(run, "directory")
    r = summarize_cli(run)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"error: {run / 'requests.jsonl'} is a directory, not a file: nothing to summarise"
    ]


def _doubled(run: Path) -> None:
    j = run / "requests.jsonl"
    j.write_bytes(j.read_bytes() * 2)


def test_a_journal_appended_twice_counts_each_request_once(complete_run, tmp_path):
    # audit: completed 2N of N planned, throughput doubled, requests.parquet rewritten with
    # every record twice, exit 0 and not a word
    run = copy(complete_run, tmp_path)
    before = pq.read_table(run / "requests.parquet")
    _doubled(run)
    r = summarize_cli(run)
    assert r.returncode == 1, r.stderr
    assert f"{N} journal record(s) repeating an earlier record's idx skipped" in r.stderr
    s = json.loads((run / "summary.json").read_text())
    assert s["counts"]["completed"] == s["counts"]["planned"] == N
    assert s["journal"]["repeated_records"] == N and len(s["journal"]["repeated_idx"]) == 10
    assert pq.read_table(run / "requests.parquet").sort_by("idx").equals(before.sort_by("idx"))


def test_a_parquet_written_twice_over_is_mended(complete_run, tmp_path):
    # what the audit's summarize left behind: requests.parquet with every record twice;
    # with a journal cut short it was kept as the longer result, repeats and all
    import pyarrow as pa

    run = copy(complete_run, tmp_path)
    before = pq.read_table(run / "requests.parquet")
    pq.write_table(pa.concat_tables([before, before]), run / "requests.parquet")
    damage(run, "truncated")
    r = summarize_cli(run)
    assert r.returncode == 1, r.stderr
    assert f"kept the existing requests.parquet ({N} rows)" in r.stderr
    assert f"{N} repeated record(s) left out of it" in r.stderr
    assert pq.read_table(run / "requests.parquet").equals(before)
    assert json.loads((run / "summary.json").read_text())["counts"]["completed"] == N


@pytest.mark.parametrize("keep_parquet", [True, False])
def test_more_measured_requests_than_planned_is_refused(complete_run, tmp_path, keep_parquet):
    """A journal with another run's records joined (other idx): the summary would claim
    more completed than planned; nothing is written."""
    run = copy(complete_run, tmp_path)
    j = run / "requests.jsonl"
    lines = j.read_bytes().splitlines()
    other = [json.dumps({**json.loads(x), "idx": json.loads(x)["idx"] + N}).encode() for x in lines]
    j.write_bytes(b"\n".join(lines + other) + b"\n")
    if not keep_parquet:
        (run / "requests.parquet").unlink()
    before = _files(run)
    r = summarize_cli(run)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"error: {j} holds {2 * N} measured requests, more than the {N} run.json plans "
        "(records of another run?): nothing was written"
    ]
    assert _files(run) == before


def test_records_with_impossible_times_are_of_the_wrong_shape(complete_run, tmp_path):
    # audit: a first chunk 1,000 s before the send and a send at -5 ns were summarised as
    # TTFT min -1,000,000 ms and a schedule lag of -50,519 ms, exit 0
    run = copy(complete_run, tmp_path)
    (run / "requests.parquet").unlink()
    j = run / "requests.jsonl"
    recs = [json.loads(x) for x in j.read_bytes().splitlines()]
    r0 = recs[0]
    r0["t_done"] = r0["t_first"] = r0["t_send"] - 10**12
    r0["chunk_times"] = [r0["t_send"] - 10**12] * len(r0["chunk_times"])
    recs[1]["t_send"] = -5
    j.write_text("".join(json.dumps(x) + "\n" for x in recs))
    r = summarize_cli(run)
    assert r.returncode == 1 and "2 journal record(s) of the wrong shape skipped" in r.stderr
    s = json.loads((run / "summary.json").read_text())
    assert s["counts"]["completed"] == N - 2
    assert s["latency"]["ttft_ms"]["min"] > 0 and s["latency"]["schedule_lag_ms"]["min"] >= 0


def test_summarize_of_a_run_killed_before_its_client_reported(complete_run, tmp_path):
    """audit_srv #9: the summary of a run killed before its end printed 'client: None
    worker(s)'. Now it says the client's figures were not recorded."""
    run = copy(complete_run, tmp_path)
    doc = json.loads((run / "run.json").read_text())
    doc.pop("client", None)
    doc["status"] = "running"
    (run / "run.json").write_text(json.dumps(doc))
    (run / "summary.json").unlink()
    (run / "requests.parquet").unlink()
    r = summarize_cli(run)
    assert "None worker" not in r.stdout and "client: not recorded" in r.stdout, r.stdout
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"
