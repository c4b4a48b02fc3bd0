"""The commands that read run directories (``runs list``/``query``, ``frontier``,
``compare``, ``report``, ``cost``, ``summarize``), fed damaged run directories and
hostile output paths, by class: each ends in one clear line naming the file, with the
README's exit code, never waits for ever, and never replaces a result (or a device) with
something else. The runs are real: measured against the reference server once."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from cli_inprocess import run_cli
from conftest import RefServer
from test_hostile_inputs import assert_clean

HYP = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two complete runs at the same load (c=4), measured against the reference server
    (res/good, res/bad), and beside them a shadow directory (sh) replaying a trace of 12
    requests against two, a 2-second soak's stress directory (st) and the good run with
    LoadGen's two logs (ml: an MLPerf directory as the report reads one)."""
    from accelbench.suites.shadow.replay import ReplayOptions, replay

    tmp = tmp_path_factory.mktemp("runs")
    servers = [RefServer(["--ttft-ms", "1", "--itl-ms", "1"], tmp) for _ in range(2)]
    try:
        for name, n in (("good", 24), ("bad", 16)):
            cfg = BenchmarkConfig(url=servers[0].url, out_dir=str(tmp / "res" / name),
                                  concurrency=4, num_requests=n, telemetry=False,
                                  workload=WorkloadConfig(isl=8, osl=3))  # fmt: skip
            run_benchmark(cfg, progress=False)
        trace = tmp / "trace.jsonl"
        trace.write_text("".join(json.dumps({"timestamp": i * 5.0, "input_length": 8,
                                             "output_length": 3, "hash_ids": []}) + "\n"
                                 for i in range(12)))  # fmt: skip
        cfg = BenchmarkConfig(workload=WorkloadConfig(trace=str(trace)), telemetry=False)
        replay(cfg, ReplayOptions(servers[0].url, servers[1].url, str(tmp / "sh")))
        soak = ["stress", "soak", "--url", servers[0].url, "--rate", "20", "--duration", "2",
                "--window", "1", "--sample-interval", "0.5", "--out", "st", "--quiet"]  # fmt: skip
        code, _, err, _ = run_cli(soak, tmp)
        assert code == 0 and (tmp / "st" / "windows.jsonl").is_file(), err
        shutil.copytree(tmp / "res" / "good", tmp / "ml")  # a run with LoadGen's logs
        (tmp / "ml" / "mlperf_log_detail.txt").write_text(
            ':::MLLOG {"key": "result_validity", "value": "VALID", "time_ms": 1.0, '
            '"namespace": "mlperf::logging", "event_type": "POINT_IN_TIME", "metadata": {}}\n'
        )
        (tmp / "ml" / "mlperf_log_summary.txt").write_text("Result is : VALID\n")
    finally:
        for srv in servers:
            srv.stop()
    return tmp / "res"


def fresh(real_runs: Path, tmp: Path) -> Path:
    """A working directory holding a copy of the two runs under res/, of the shadow
    directory as sh/ and of the stress directory as st/."""
    box = tmp / "box"
    if box.exists():
        for p in box.rglob("*"):
            if p.is_symlink() or p.is_fifo():
                p.unlink()
        shutil.rmtree(box)
    box.mkdir()
    shutil.copytree(real_runs, box / "res")
    shutil.copytree(real_runs.parent / "sh", box / "sh")
    shutil.copytree(real_runs.parent / "st", box / "st")
    shutil.copytree(real_runs.parent / "ml", box / "ml")
    return box


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def watchdog() -> Iterator[list[Path]]:
    """FIFOs to open for writing if a command is still waiting on one after 60 s (so that
    a reader that blocks ends the test with a failure instead of hanging it); the list
    ends with a sentinel path once that was needed."""
    fifos: list[Path] = []
    done = threading.Event()

    def unblock() -> None:
        if done.wait(60):
            return
        fifos.append(Path("BLOCKED"))
        while not done.is_set():
            for f in list(fifos):
                try:
                    os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass  # no reader waits on this one
            done.wait(0.05)

    t = threading.Thread(target=unblock, daemon=True)
    t.start()
    yield fifos
    done.set()
    t.join()


FILES = ("run.json", "summary.json", "requests.parquet", "requests.jsonl")
SHADOW_FILES = ("shadow.json", "baseline.jsonl", "candidate.jsonl", "trace.jsonl")
STRESS_FILES = ("stress.json", "windows.jsonl", "memory.jsonl")
MLPERF_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt")
DAMAGE = ("fifo", "directory", "link loop", "dangling link", "truncated", "nul", "not utf-8",
          "empty", "newer version")  # fmt: skip


def damage(f: Path, how: str) -> None:
    data = f.read_bytes()
    if how in ("fifo", "directory", "link loop", "dangling link"):
        f.unlink()
        if how == "fifo":
            os.mkfifo(f)
        elif how == "directory":
            f.mkdir()
        elif how == "link loop":
            f.symlink_to(f.name)
        else:
            f.symlink_to("nowhere")
    elif how == "truncated":
        f.write_bytes(data[: len(data) // 2])
    elif how == "nul":
        f.write_bytes(data[:20] + b"\0" + data[20:])
    elif how == "not utf-8":
        f.write_bytes(data[:30] + b"\xff\xfe" + data[30:])
    elif how == "empty":
        f.write_bytes(b"")
    elif how == "newer version" and f.suffix == ".json":
        doc = json.loads(data)
        doc["schema"] = doc["schema"].rsplit("/", 1)[0] + "/99"
        f.write_text(json.dumps(doc))


COMMANDS = {
    "runs list": ["runs", "list", "--root", "res"],
    "runs list --json": ["runs", "list", "--root", "res", "--json"],
    "runs query": ["runs", "query", "--root", "res", "SELECT count(*) FROM requests"],
    "frontier": ["frontier", "res/bad"],
    "compare": ["compare", "res/good", "res/bad"],
    "report": ["report", "res/good", "res/bad", "-o", "out/r.html"],
    "cost": ["cost", "h100:res/bad"],
    "summarize": ["summarize", "res/bad"],
}
SHADOW_COMMANDS = {
    "shadow verdict": ["shadow", "verdict", "sh", "-g", "ttft_p50 <= +50%"],
    "report of a shadow directory": ["report", "sh", "-o", "out/s.html"],
}
STRESS_COMMANDS = {
    "report of a stress directory": ["report", "st", "-o", "out/st.html"],
    "runs list of a stress directory": ["runs", "list", "--root", "st"],
}
MLPERF_COMMANDS = {"report of an MLPerf directory": ["report", "ml", "-o", "out/ml.html"]}
COMMANDS_ALL = {**COMMANDS, **SHADOW_COMMANDS, **STRESS_COMMANDS, **MLPERF_COMMANDS}


@settings(HYP, max_examples=100)  # a run directory's files, a shadow directory's
@given(
    target=st.one_of(
        st.tuples(st.just("res/bad"), st.sampled_from(FILES), st.sampled_from(sorted(COMMANDS))),
        st.tuples(
            st.just("sh"), st.sampled_from(SHADOW_FILES), st.sampled_from(sorted(SHADOW_COMMANDS))
        ),
        st.tuples(
            st.just("st"), st.sampled_from(STRESS_FILES), st.sampled_from(sorted(STRESS_COMMANDS))
        ),
        st.tuples(
            st.just("ml"), st.sampled_from(MLPERF_FILES), st.sampled_from(sorted(MLPERF_COMMANDS))
        ),
    ),
    how=st.sampled_from(DAMAGE),
)
def test_a_damaged_run_file_is_named_never_waited_on(
    real_runs: Path, tmp_path: Path, watchdog: list[Path], target: tuple[str, str, str], how: str
) -> None:
    """Any file of a run directory, a shadow or a stress directory, that is not a regular
    file (a FIFO, a directory, a link loop) or not a document (cut short, a NUL, not
    UTF-8, empty, a newer version): every command that reads them ends at once (a FIFO was
    read, and waited on, for ever: every analysis command, ``shadow verdict``, a report of
    a stress directory, of an MLPerf one), in clear lines,
    and where it says a file is wrong it says which and why; the good run beside it is
    never touched. A run that is listed or left out with a damaged file says so (``runs
    list`` showed it as dashes without a word)."""
    where, which, command = target
    box = fresh(real_runs, tmp_path)
    f = box / where / which
    damage(f, how)
    if how == "fifo":
        watchdog.append(f)
    good = digest(box / "res" / "good")
    code, out, err, _ = run_cli(COMMANDS_ALL[command], box)
    assert Path("BLOCKED") not in watchdog, f"{command} waited on the FIFO {which}"
    text = out + err
    assert_clean(code, text, wrong=False)
    assert code in (0, 1, 2, 3) if command == "shadow verdict" else code in (0, 1, 2), text
    if code == 2:  # refused: one error line naming the file
        (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert which in line or where in line, line
    assert digest(box / "res" / "good") == good
    words = {
        "fifo": "is a FIFO, not a file",
        "directory": "is a directory",
        "link loop": "Too many levels of symbolic links",
        "not utf-8": "not UTF-8",
    }
    files = ("fifo", "directory", "link loop")
    if (
        command.startswith("runs list")
        and where == "res/bad"
        and which.endswith(".json")
        and how in words
    ):
        assert f"{which} {words[how]}" in err or words[how] in err, err
    named_in_report = {
        "shadow.json": words,
        "stress.json": words,
        "windows.jsonl": files,
        "memory.jsonl": files,
    }  # a row file's bad line is counted, not named
    if command.startswith("report of") and how in named_in_report.get(which, ()):
        page = (box / COMMANDS_ALL[command][-1]).read_text()  # its warnings name the file
        assert any(which in t and words[how] in t for t in page.split("<")), which


def test_a_fifo_as_run_json_is_one_warning_and_summarize_refuses(
    real_runs: Path, tmp_path: Path, watchdog: list[Path]
) -> None:
    """The concrete case: run.json a FIFO. frontier read it and waited for ever."""
    box = fresh(real_runs, tmp_path)
    f = box / "res" / "bad" / "run.json"
    damage(f, "fifo")
    watchdog.append(f)
    code, out, err, _ = run_cli(["frontier", "res/bad"], box)
    assert code == 0 and "warning: bad: run.json is a FIFO, not a file" in out + err
    code, out, err, _ = run_cli(["summarize", "res/bad"], box)
    assert code == 2 and err.strip() == "error: res/bad/run.json is a FIFO, not a file"
    code, out, err, _ = run_cli(["runs", "list", "--root", "res"], box)
    assert code == 0 and "warning: res/bad: run.json is a FIFO, not a file" in err
    assert stat.S_ISFIFO(f.lstat().st_mode)
    assert Path("BLOCKED") not in watchdog


def test_a_fifo_as_a_shadow_journal_is_one_line(
    real_runs: Path, tmp_path: Path, watchdog: list[Path]
) -> None:
    """The concrete case: ``shadow verdict`` read a FIFO baseline.jsonl and waited for
    ever."""
    box = fresh(real_runs, tmp_path)
    f = box / "sh" / "baseline.jsonl"
    damage(f, "fifo")
    watchdog.append(f)
    code, out, err, _ = run_cli(SHADOW_COMMANDS["shadow verdict"], box)
    assert code == 2 and err.strip() == "error: sh/baseline.jsonl is a FIFO, not a file", err
    assert Path("BLOCKED") not in watchdog


def test_a_fifo_as_a_stress_row_file_is_named_in_the_report(
    real_runs: Path, tmp_path: Path, watchdog: list[Path]
) -> None:
    """The concrete case: a report of a soak whose windows.jsonl is a FIFO waited for
    ever; as a directory, the report said "stress directory malformed: Is a directory"."""
    box = fresh(real_runs, tmp_path)
    for how in ("fifo", "directory"):
        f = box / "st" / "windows.jsonl"
        if how == "directory":  # the FIFO of the round before
            f.unlink()
            f.write_text("")
        damage(f, how)
        watchdog.append(f)
        code, out, err, _ = run_cli(STRESS_COMMANDS["report of a stress directory"], box)
        assert code == 0, err
        page = (box / "out" / "st.html").read_text()
        words = "is a FIFO, not a file" if how == "fifo" else "is a directory, not a file"
        assert f"stress directory malformed: windows.jsonl {words}" in page
    assert Path("BLOCKED") not in watchdog


def test_bad_json_is_named_by_line_and_column(real_runs: Path, tmp_path: Path) -> None:
    """It was 'run.json unreadable (JSONDecodeError)': neither where nor what."""
    box = fresh(real_runs, tmp_path)
    (box / "res" / "bad" / "run.json").write_text('{\n  "schema": "accelbench.run/1",\n  x\n}')
    code, out, err, _ = run_cli(["summarize", "res/bad"], box)
    assert code == 2, err
    assert err.strip() == (
        "error: res/bad/run.json unreadable (not JSON at line 3 column 3: "
        "Expecting property name enclosed in double quotes)"
    )


# -- outputs: where -o points, and a stop while writing ---------------------------------------
TARGETS = ("link to /dev/null", "link to /dev/full", "directory", "fifo", "link loop", "input")
WRITERS = {
    "report -o": ["report", "res/good", "-o", "{}"],
    "report --markdown": ["report", "res/good", "-o", "out/r.html", "--markdown", "{}"],
    "monitor rules -o": ["monitor", "rules", "-o", "{}"],
    "monitor dashboard -o": ["monitor", "dashboard", "-o", "{}"],
}


def make_target(box: Path, how: str) -> Path:
    t = box / "target"
    if how == "link to /dev/null":
        t.symlink_to("/dev/null")
    elif how == "link to /dev/full":
        t.symlink_to("/dev/full")
    elif how == "directory":
        t.mkdir()
    elif how == "fifo":
        os.mkfifo(t)
    elif how == "link loop":
        t.symlink_to(t.name)
    else:
        t = box / "res" / "good" / "summary.json"
    return t


def kind(p: Path) -> tuple[int, str | None]:
    st_ = p.lstat()
    return stat.S_IFMT(st_.st_mode), (os.readlink(p) if p.is_symlink() else None)


@HYP
@given(writer=st.sampled_from(sorted(WRITERS)), how=st.sampled_from(TARGETS))
def test_an_output_is_written_in_place_or_refused_never_replaced(
    real_runs: Path, tmp_path: Path, watchdog: list[Path], writer: str, how: str
) -> None:
    """``-o`` at a device (through a link too), a directory, a FIFO, a link loop or an
    input: the device is written in place (``/dev/null`` exit 0; ``/dev/full`` exit 2,
    "No space left on device"), anything else refused in one line, exit 2; the path is
    what it was (a link stays the link, a device the device: the report was renamed over
    ``/dev/full``, and as root a report to ``/dev/null`` put a file where /dev/null was,
    for every process), and no temporary file is left."""
    assume(how != "input" or writer.startswith("report"))  # monitor reads no run
    box = fresh(real_runs, tmp_path)
    t = make_target(box, how)
    if how == "fifo":
        watchdog.append(t)
    args = WRITERS[writer]
    before, inputs = kind(t), digest(box / "res")
    code, out, err, _ = run_cli([a.replace("{}", str(t)) for a in args], box)
    assert Path("BLOCKED") not in watchdog, f"{writer} waited on the FIFO"
    assert_clean(code, out + err, wrong=how != "link to /dev/null")
    assert kind(t) == before, f"{t} was replaced"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISCHR(os.stat("/dev/full").st_mode)
    if how == "link to /dev/null":
        assert code == 0, err
    else:
        assert code == 2, out + err
        (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
        if how == "link to /dev/full":
            assert "No space left on device" in line, line
    assert digest(box / "res") == inputs
    assert not [p for p in box.rglob("*") if ".tmp-" in p.name]


def test_a_report_to_dev_full_is_one_line_and_the_device_stays(
    real_runs: Path, tmp_path: Path
) -> None:
    """The concrete case: ``report -o /dev/full`` said "wrote /dev/full", exit 0, having
    renamed the report over the device node (as root: /dev/full became a file). Through a
    link here, so that a regression replaces the link, not the machine's /dev/full."""
    box = fresh(real_runs, tmp_path)
    (box / "full").symlink_to("/dev/full")
    code, out, err, _ = run_cli(["report", "res/good", "-o", "full"], box)
    assert code == 2 and err.strip() == "error: cannot write full: No space left on device"
    assert (box / "full").is_symlink() and stat.S_ISCHR(os.stat(box / "full").st_mode)


@pytest.mark.parametrize(
    "args",
    [
        ["report", "res/good", "res/bad", "-o", "out/r.html"],
        ["summarize", "res/bad", "--gpus", "2"],
    ],
)
def test_a_stop_while_writing_leaves_the_earlier_file_whole(
    real_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """Ctrl-C as the new file is being written (between its bytes and the rename): exit
    130, the earlier report / summary.json as it was, no temporary file."""
    import accelbench.store.rundir as rundir

    box = fresh(real_runs, tmp_path)
    assert run_cli(["report", "res/good", "-o", "out/r.html"], box)[0] == 0
    before = digest(box)

    def stop(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(rundir.os, "fsync", stop)
    code, _, err, _ = run_cli(args, box)
    assert code == 130 and "interrupted" in err
    after = digest(box)
    assert after["out/r.html"] == before["out/r.html"]
    assert after["res/bad/summary.json"] == before["res/bad/summary.json"]
    assert not [p for p in box.rglob("*") if ".tmp-" in p.name]


# -- a results root: run ids shared by several run directories, many runs -------------------
@HYP
@given(copies=st.lists(st.sampled_from(["good", "bad"]), min_size=1, max_size=4))
def test_a_run_id_shared_by_copies_is_said_and_requests_join_on_path(
    real_runs: Path, tmp_path: Path, copies: list[str]
) -> None:
    """A run copied (or two roots side by side) gives several directories one run_id:
    the documented join ``requests JOIN runs USING (run_id)`` counted each copy's
    requests once per copy of that id, without a word. The requests view has the run's
    ``path`` to join on, and each shared id is one ``warning:`` line, in ``runs list``
    too."""
    import pyarrow.parquet as pq

    box = tmp_path / "root"
    shutil.rmtree(box, ignore_errors=True)
    for i, which in enumerate(copies):
        shutil.copytree(real_runs / which, box / f"d{i}" / "run")
    want = {
        f"d{i}/run": pq.read_metadata(box / f"d{i}" / "run" / "requests.parquet").num_rows
        for i in range(len(copies))
    }
    sql = "SELECT r.path, count(*) AS n FROM runs r JOIN requests q USING (path) GROUP BY 1"
    code, out, err, _ = run_cli(["runs", "query", "--root", ".", "--format", "json", sql], box)
    assert code == 0, err
    assert {row["path"]: row["n"] for row in json.loads(out)} == want
    shared = {w for w in copies if copies.count(w) > 1}
    said = [ln for ln in err.splitlines() if "is shared by" in ln]
    assert len(said) == len(shared), err
    code, _, err, _ = run_cli(["runs", "list", "--root", "."], box)
    assert code == 0 and [ln for ln in err.splitlines() if "is shared by" in ln] == said


def test_runs_list_holds_one_run_at_a_time(
    real_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A results root of 10,000 runs took 0.6 GB to list: every run's documents were held
    until the table was printed. Now at most one run is alive at a time (counted with
    weak references, not measured)."""
    import gc
    import weakref

    import accelbench.store.reader as reader

    for i in range(30):
        d = tmp_path / "root" / f"r{i}"
        d.mkdir(parents=True)
        for f in ("run.json", "summary.json"):
            shutil.copy(real_runs / "good" / f, d / f)
    alive: list[weakref.ref[reader.RunInfo]] = []
    most = [0]
    real_load = reader.load_run

    def load(path: Path, **kw: object) -> reader.RunInfo:
        gc.collect()
        most[0] = max(most[0], sum(r() is not None for r in alive))
        info = real_load(path)
        alive.append(weakref.ref(info))
        return info

    monkeypatch.setattr(reader, "load_run", load)
    for args in (["runs", "list", "--root", "root"], ["runs", "query", "--root", "root",
                                                       "SELECT count(*) FROM runs"]):  # fmt: skip
        code, out, err, _ = run_cli(args, tmp_path)
        assert code == 0, err
    assert most[0] <= 1, f"{most[0]} runs held at once"


# -- per-request figures in requests.parquet that no request can have ------------------------
@HYP
@given(
    column=st.sampled_from(["ttft_ms", "tpot_ms", "e2e_ms"]),  # those compare reads
    value=st.one_of(
        st.floats(max_value=-1e-9, allow_infinity=True, allow_nan=False),
        st.floats(min_value=5.2e9, allow_infinity=True, allow_nan=False),
    ),
    row=st.integers(0, 15),
    summary=st.booleans(),
)
def test_an_impossible_latency_in_requests_parquet_is_named_never_used(
    real_runs: Path, tmp_path: Path, column: str, value: float, row: int, summary: bool
) -> None:
    """A latency below 0, infinite or beyond what a request can last, in requests.parquet:
    ``compare`` (whose intervals come from the requests) and the figures recomputed where
    summary.json is gone name the file, the column and the row, and compute nothing from
    it. Before, a TTFT of -5 ms was a recomputed median TTFT of -5 ms and a bootstrap
    interval reaching 0, without a word; ``summarize`` of a run without its journal
    summarised it into a summary.json that replaced the good one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    box = fresh(real_runs, tmp_path)
    p = box / "res" / "bad" / "requests.parquet"
    t = pq.read_table(p)
    vals = t.column(column).to_pylist()
    vals[row] = value
    t = t.set_column(t.column_names.index(column), column, pa.array(vals, pa.float64()))
    pq.write_table(t, p)
    if not summary:
        (box / "res" / "bad" / "summary.json").unlink()
    said = f"requests.parquet: {column} of row {row} is "
    code, out, err, _ = run_cli(["compare", "res/good", "res/bad"], box)
    assert_clean(code, out + err, wrong=True)
    assert code == 2 and said in err, err
    if not summary:
        code, out, err, _ = run_cli(["runs", "list", "--root", "res", "--json"], box)
        assert code == 0 and said in err, err
        (bad,) = [r for r in json.loads(out) if r["path"].endswith("bad")]
        assert bad["ttft_p50_ms"] is None and bad["output_tps_per_gpu"] is None
    # summarize with no journal keeps requests.parquet: never summarised into figures (its
    # summary.json, with a median TTFT of -5 ms, replaced the good one)
    (box / "res" / "bad" / "requests.jsonl").unlink()
    before = digest(box / "res" / "bad")
    code, out, err, _ = run_cli(["summarize", "res/bad"], box)
    assert code == 2 and said in err, err
    assert digest(box / "res" / "bad") == before


# -- summary.json request counts -------------------------------------------------------------
@HYP
@given(
    key=st.sampled_from(["planned", "completed", "failed", "warmup", "interrupted"]),
    value=st.one_of(
        st.integers(max_value=-1),
        st.integers(min_value=2**53 + 1),
        st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: x != int(x) if
                                                              math.isfinite(x) else True),
        st.booleans(),
        st.text(max_size=5),
        st.integers(0, 2**53),  # a whole number in range: read as written
    ),
)  # fmt: skip
def test_a_request_count_that_cannot_be_is_damage(
    real_runs: Path, tmp_path: Path, key: str, value: object
) -> None:
    """summary.json ``counts`` read back: a count below 0, not whole, past 2**53 or not a
    number is damage (one warning naming it; the figures recomputed from
    requests.parquet); before, ``completed: -5`` was listed and summed by ``runs query``
    as it was, and 2**63 shown as null, without a word."""
    box = fresh(real_runs, tmp_path)
    p = box / "res" / "bad" / "summary.json"
    doc = json.loads(p.read_text())
    true_count = doc["counts"][key]
    doc["counts"][key] = value
    p.write_text(json.dumps(doc))
    code, out, err, _ = run_cli(["runs", "list", "--root", "res", "--json"], box)
    assert code == 0, err
    (bad,) = [r for r in json.loads(out) if r["path"].endswith("bad")]
    fine = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53
    if fine:
        assert "warning" not in err, err
        if key == "completed":
            assert bad["completed"] == value
    else:
        assert f"summary.json: counts.{key}" in err and "figures recomputed" in err, err
        if key == "completed":
            assert bad["completed"] == true_count
