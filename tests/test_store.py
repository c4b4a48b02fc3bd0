"""The DuckDB runs store and the vllm bench serve import."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.store.runs import import_vllm, import_vllm_files, list_runs, load_run, query_runs
from synthetic_runs import make_run, make_sweep


@pytest.fixture()
def root(tmp_path):
    make_sweep(tmp_path / "sweep1", [{"concurrency": c} for c in (1, 2, 4)], osl=16, chunks=False)
    make_run(tmp_path / "single", 30, concurrency=3, gpus=8, model="big", chunks=False)
    make_run(tmp_path / "broken", 10, files=("run.json",))
    return tmp_path


def test_runs_view(root):
    cols, rows = query_runs(
        root, "SELECT run_id, sweep, concurrency, gpus, completed FROM runs ORDER BY path"
    )
    assert cols == ["run_id", "sweep", "concurrency", "gpus", "completed"]
    assert rows == [
        ("broken", None, 8, 1, None),
        ("single", None, 3, 8, 30),
        ("c0001", "sweep1", 1, 1, 10),
        ("c0002", "sweep1", 2, 1, 20),
        ("c0004", "sweep1", 4, 1, 40),
    ]
    _, rows = query_runs(root, "SELECT problems FROM runs WHERE run_id = 'broken'")
    assert "summary.json missing" in rows[0][0]


def test_requests_view_and_join(root):
    _, rows = query_runs(root, "SELECT count(*) FROM requests")
    assert rows == [(100,)]
    _, rows = query_runs(
        root,
        "SELECT r.concurrency, count(*), round(avg(q.ttft_ms)) FROM requests q "
        "JOIN runs r USING (run_id) GROUP BY 1 ORDER BY 1",
    )
    assert [(c, n) for c, n, _ in rows] == [(1, 10), (2, 20), (3, 30), (4, 40)]


def test_bad_sql_is_one_clear_error(root):
    with pytest.raises(AccelbenchError, match="query failed"):
        query_runs(root, "SELECT nope FROM runs")
    with pytest.raises(AccelbenchError, match="no such file"):
        list_runs(root / "missing")


@pytest.mark.parametrize("damage", [b"", b"PAR1", bytes(range(256)) * 4, "half"])
def test_one_damaged_parquet_leaves_the_other_runs_queryable(root, damage):
    # a truncated/empty/garbage requests.parquet made DuckDB's view fail: exit 70 for every query
    f = root / "single" / "requests.parquet"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2] if damage == "half" else damage)
    assert query_runs(root, "SELECT count(*) FROM requests")[1] == [(70,)]
    assert query_runs(root, "SELECT count(*) FROM runs")[1] == [(5,)]


@pytest.mark.parametrize("sql", ["", "  ", ";", "/* nothing */"])
def test_empty_sql_is_one_clear_error(root, sql):
    # DuckDB returns no cursor for these: AttributeError, exit 70
    with pytest.raises(AccelbenchError, match="empty|no SQL statement"):
        query_runs(root, sql)


def test_empty_root_has_empty_views(tmp_path):
    _, rows = query_runs(tmp_path, "SELECT count(*) FROM requests")
    assert rows == [(0,)]


def _vllm_result(n=5, with_starts=True):
    d = {
        "date": "20250101-000000",
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": n,
        "request_rate": "inf",
        "max_concurrency": 4,
        "duration": 2.0,
        "completed": n - 1,
        "failed": 1,
        "total_input_tokens": 100 * (n - 1),
        "total_output_tokens": 11 * (n - 1),
        "request_throughput": (n - 1) / 2.0,
        "output_throughput": 11 * (n - 1) / 2.0,
        "total_token_throughput": 111 * (n - 1) / 2.0,
        "input_lens": [100] * n,
        "output_lens": [11] * (n - 1) + [0],
        "ttfts": [0.05] * (n - 1) + [0.0],
        "itls": [[0.02] * 10] * (n - 1) + [[]],
        "generated_texts": ["x"] * (n - 1) + [""],
        "errors": [""] * (n - 1) + ["Bad gateway"],
        "mean_ttft_ms": 50.0,
        "median_ttft_ms": 50.0,
        "p99_ttft_ms": 50.0,
        "median_tpot_ms": 20.0,
    }
    if with_starts:
        d["start_times"] = [0.1 * i for i in range(n)]
    return d


@pytest.mark.parametrize("with_starts", [True, False])
def test_import_vllm(tmp_path, with_starts):
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(_vllm_result(with_starts=with_starts)))
    out = import_vllm(f, tmp_path / "results", gpus=2, isl=100, osl=11)
    r = load_run(out)
    assert r.usable and not r.problems
    assert r.figure("ttft_p50_ms") == pytest.approx(50)
    assert r.figure("tpot_p50_ms") == pytest.approx(20)
    assert r.figure("interactivity") == pytest.approx(50)
    assert r.summary["counts"]["failed"] == 1 and r.summary["counts"]["completed"] == 4
    assert r.workload()["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert r.concurrency == 4 and r.gpus == 2
    if not with_starts:  # throughput from the file's own figures
        assert r.figure("output_tps_per_gpu") == pytest.approx(11 * 4 / 2.0 / 2)
        assert any("start_times" in a for a in r.summary["absent"])
    _, rows = query_runs(tmp_path / "results", "SELECT source, gpus FROM runs")
    assert rows == [("vllm bench serve", 2)]
    with pytest.raises(AccelbenchError, match="exists already"):
        import_vllm(f, tmp_path / "results", gpus=2)


def test_import_rejects_other_json(tmp_path):
    f = tmp_path / "x.json"
    f.write_text('{"hello": 1}')
    with pytest.raises(AccelbenchError, match="not a vllm bench serve result"):
        import_vllm(f, tmp_path / "r")
    f.write_text("{")
    with pytest.raises(AccelbenchError, match="not a JSON file"):
        import_vllm(f, tmp_path / "r")


def test_imported_vllm_run_beside_ours(tmp_path):
    from accelbench.metrics.compare import compare_sets
    from accelbench.suites.sweep import load_inputs

    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(_vllm_result(n=40)))
    old = import_vllm(f, tmp_path / "results", gpus=1, isl=100, osl=11)
    new = make_run(tmp_path / "results" / "new", 40, concurrency=4, isl=100, osl=11,
                   model="meta-llama/Llama-3.1-8B-Instruct", chunks=False)  # fmt: skip
    a, b = load_inputs([old, new])
    comps = compare_sets(a, b, n_boot=100)
    assert comps[0].condition == "same load: c=4"
    assert any("not recorded on one side" in w for w in comps[0].warnings)


# ----------------------------------------------------------------------------- one reader


def _cli(*args, cwd=None):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "accelbench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def _one_line_exit_2(res, needle):
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines


def test_killed_run_without_summary_is_recomputed(tmp_path):
    """A run killed before summary.json: run.json + requests.parquet, or run.json + the
    journal only. Both load with the figures of the complete run."""
    import pyarrow.parquet as pq

    from accelbench.metrics.records import FIELD_NAMES

    full = load_run(make_run(tmp_path / "full", 20, concurrency=2, osl=16, chunks=False))
    pq_only = make_run(tmp_path / "pq", 20, concurrency=2, osl=16, chunks=False,
                       files=("run.json", "requests.parquet"))  # fmt: skip
    r = load_run(pq_only)
    assert r.usable and "figures recomputed from requests.parquet" in r.problems
    assert r.figure("output_tps_per_gpu") == pytest.approx(full.figure("output_tps_per_gpu"))
    # the journal holds raw records (no derived fields, OSL in the server's usage)
    jdir = make_run(tmp_path / "j", 20, concurrency=2, osl=16, chunks=False,
                    files=("run.json", "requests.parquet"))  # fmt: skip
    rows = pq.read_table(jdir / "requests.parquet").to_pylist()
    (jdir / "requests.parquet").unlink()
    with open(jdir / "requests.jsonl", "w") as f:
        for row in rows:
            raw = {k: row[k] for k in FIELD_NAMES if k in row}
            raw["osl_server"], raw["osl"] = raw["osl"], None
            raw["chunk_times"] = [raw["t_first"], raw["t_last"]]
            for k in ("ttft_ms", "tpot_ms", "e2e_ms", "ntpot_ms"):
                raw[k] = None
            f.write(json.dumps(raw) + "\n")
        f.write('{"torn')  # a torn last line
    j = load_run(jdir)
    assert j.usable and "figures recomputed from requests.jsonl" in j.problems
    assert "requests.jsonl: 1 line(s) unreadable" in j.problems
    for k in ("output_tps_per_gpu", "ttft_p50_ms", "tpot_p50_ms", "e2e_p99_ms"):
        assert j.figure(k) == pytest.approx(full.figure(k), rel=1e-6), k
    assert j.read_requests(("osl",)).column("osl").to_pylist() == [16] * 20


# -- summary.json figures that cannot be measurements (negative, NaN, infinite, not a
# number) or a summary without its figure sections: damaged, recomputed from the requests

_IMPOSSIBLE = st.sampled_from(
    [-1, -1e-9, -1e300, float("nan"), float("inf"), float("-inf"), "inf", "-inf", 10**400,
     "fast", True, [1.0], {"v": 1}]
) | st.floats(max_value=-1e-12, allow_nan=False)  # fmt: skip


def _figure_paths(summary: dict) -> list[tuple[str, ...]]:
    """The paths of every registry figure the summary holds as a number, and of every
    throughput."""
    from accelbench.metrics.registry import FIGURES

    paths = {f.path for f in FIGURES.values() if f.value(summary) is not None}
    paths |= {("throughput", k) for k, v in summary["throughput"].items() if v is not None}
    return sorted(paths)


@pytest.fixture(scope="module")
def _pristine(tmp_path_factory):
    d = make_run(tmp_path_factory.mktemp("pristine") / "r", 24, concurrency=2, osl=16)
    return d, load_run(d)


def _damaged_copy(src, dst, edit):
    import shutil

    shutil.copytree(src, dst)
    s = json.loads((dst / "summary.json").read_text())
    edit(s)
    (dst / "summary.json").write_text(json.dumps(s))  # json writes NaN / Infinity as such
    return dst


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(pick=st.integers(0, 1000), bad=_IMPOSSIBLE, parquet=st.booleans())
def test_an_impossible_summary_figure_is_damage_never_a_figure(
    _pristine, tmp_path_factory, pick, bad, parquet
):
    """Any figure of summary.json (the registry's, every throughput) replaced by a value
    that cannot be a measurement: the run's figures are recomputed from its
    requests.parquet, with the damage named in its problems; without the requests the run
    has no figures (left out, said), never the impossible one."""
    from accelbench.errors import DocumentError
    from accelbench.store.rundoc import read_summary

    src, good = _pristine
    s0 = json.loads((src / "summary.json").read_text())
    paths = _figure_paths(s0)
    path = paths[pick % len(paths)]

    def edit(s):
        parent = s
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = bad

    d = _damaged_copy(src, tmp_path_factory.mktemp("dmg") / "r", edit)
    if not parquet:
        (d / "requests.parquet").unlink()
    with pytest.raises(DocumentError) as exc:
        read_summary(d, "summary.json")
    line = str(exc.value)
    assert line.startswith("summary.json: ") and "\n" not in line and "." in line
    r = load_run(d)
    assert line in r.problems
    if parquet:
        assert r.usable and "figures recomputed from requests.parquet" in r.problems
        for name in ("output_tps_per_gpu", "total_tps_per_gpu", "interactivity", "ttft_p50_ms"):
            assert r.figure(name) == pytest.approx(good.figure(name)), name
    else:
        assert r.summary is None and not r.usable


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(pick=st.integers(0, 1000), scale=st.floats(1.0001, 1e300))
def test_a_summary_figure_beyond_what_a_run_can_measure_is_damage(
    _pristine, tmp_path_factory, pick, scale
):
    """A throughput or latency above the most a run can measure (registry: every request
    a run may send with 10M tokens each in one clock tick; a request longer than twice the
    longest timeout) is damage, recomputed from requests.parquet: an edited summary of
    1e308 tok/s/GPU was a figure, and `compare --claim "B >= 1 x A"` said supported."""
    from accelbench.errors import DocumentError
    from accelbench.metrics.registry import FIGURES
    from accelbench.store.rundoc import read_summary

    src, good = _pristine
    s0 = json.loads((src / "summary.json").read_text())
    bounded = [f for f in FIGURES.values() if math.isfinite(f.hi) and f.hi > 1
               and f.present(s0) and f.raw(s0) is not None]  # fmt: skip
    assert {"output_tps_per_gpu", "requests_per_s", "ttft_p50_ms"} <= {f.name for f in bounded}
    fig = bounded[pick % len(bounded)]
    bad = min(fig.hi * scale, 1.7e308)

    def edit(s):
        parent = s
        for k in fig.path[:-1]:
            parent = parent[k]
        parent[fig.path[-1]] = bad

    d = _damaged_copy(src, tmp_path_factory.mktemp("huge") / "r", edit)
    with pytest.raises(DocumentError, match="outside its physical range"):
        read_summary(d, "summary.json")
    r = load_run(d)
    assert r.usable and "figures recomputed from requests.parquet" in r.problems
    assert r.figure(fig.name) == pytest.approx(good.figure(fig.name)), fig.name


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(pick=st.integers(0, 1000), x=st.floats(0, 1e12))
def test_a_summary_figure_in_its_range_is_read_as_written(_pristine, tmp_path_factory, pick, x):
    """The other side: any figure within its physical range is the file's own value (no
    recompute, no warning)."""
    from accelbench.metrics.registry import FIGURES

    src, _ = _pristine
    s0 = json.loads((src / "summary.json").read_text())
    path = _figure_paths(s0)[pick % len(_figure_paths(s0))]
    fig = next((f for f in FIGURES.values() if f.path == path), None)
    v = min(x, fig.hi) if fig is not None else x

    def edit(s):
        parent = s
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = v

    r = load_run(_damaged_copy(src, tmp_path_factory.mktemp("ok") / "r", edit))
    assert r.problems == [] and r.summary is not None
    got = r.summary
    for k in path:
        got = got[k]
    assert got == v


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(drop=st.sets(st.sampled_from(["throughput", "interactivity", "latency", "counts",
                                     "throughput.output_tokens_per_s_per_gpu",
                                     "throughput.total_tokens_per_s_per_gpu",
                                     "interactivity.tok_s_user"]), min_size=1))  # fmt: skip
def test_a_summary_without_its_figure_sections_is_recomputed(_pristine, tmp_path_factory, drop):
    """summary.json that parses but has lost the sections its figures live in (the
    frontier's axes, its throughput): recomputed from requests.parquet, said."""
    src, good = _pristine

    def edit(s):
        for p in drop:
            sec, _, key = p.partition(".")
            if key and isinstance(s.get(sec), dict):
                s[sec].pop(key, None)
            elif not key:
                s.pop(sec, None)

    r = load_run(_damaged_copy(src, tmp_path_factory.mktemp("cut") / "r", edit))
    lost = {"throughput", "interactivity", "throughput.output_tokens_per_s_per_gpu",
            "throughput.total_tokens_per_s_per_gpu", "interactivity.tok_s_user"} & drop  # fmt: skip
    if not lost:  # latency / counts alone: read, the registry says unknown where asked
        assert r.problems == []
        return
    assert any("the summary lost its figure sections" in p for p in r.problems), r.problems
    assert "figures recomputed from requests.parquet" in r.problems
    assert r.figure("output_tps_per_gpu") == pytest.approx(good.figure("output_tps_per_gpu"))


def test_audit_summary_with_schema_only_or_negative_throughput(tmp_path):
    """The audit's examples: summary.json holding only its schema (a frontier showed
    nothing, silently), and every throughput -1 (compare printed B / A = -0.0008)."""
    only = make_run(tmp_path / "d2", 20, concurrency=2, osl=16)
    (only / "summary.json").write_text('{"schema": "accelbench.summary/1"}')
    neg = make_run(tmp_path / "d4", 20, concurrency=2, osl=16)
    s = json.loads((neg / "summary.json").read_text())
    s["throughput"] = {k: -1 for k in s["throughput"]}
    (neg / "summary.json").write_text(json.dumps(s))
    base = load_run(make_run(tmp_path / "base", 20, concurrency=2, osl=16))
    for d, says in ((only, "interactivity.tok_s_user missing"),
                    (neg, "throughput.output_tokens_per_s_per_gpu = -1 is outside")):  # fmt: skip
        r = load_run(d)
        assert r.usable and "figures recomputed from requests.parquet" in r.problems
        assert any(says in p for p in r.problems), r.problems
        assert r.figure("output_tps_per_gpu") == pytest.approx(base.figure("output_tps_per_gpu"))


def test_damaged_run_files_do_not_break_the_root(tmp_path):
    """`runs list` over a root where one run has NaN / wrong-typed values in run.json (an
    interrupted run recomputed from its requests) or a wrong-typed summary.json."""
    make_run(tmp_path / "good", 10, concurrency=2, chunks=False)
    nan = make_run(tmp_path / "nan", 10, concurrency=2, chunks=False,
                   files=("run.json", "requests.parquet"))  # fmt: skip
    doc = json.loads((nan / "run.json").read_text())
    doc["config"]["slo"] = {"ttft_ms": None, "tpot_ms": float("nan"), "bogus": 3}
    doc["config"]["concurrency"] = "lots"
    doc["config"]["gpus"] = 1e300
    (nan / "run.json").write_text(json.dumps(doc))  # json writes NaN
    bad = make_run(tmp_path / "badsum", 10, concurrency=2, chunks=False)
    s = json.loads((bad / "summary.json").read_text())
    s["latency"], s["gpus"] = [1, 2], 2
    (bad / "summary.json").write_text(json.dumps(s))
    worse = make_run(tmp_path / "worse", 10, chunks=False)
    (worse / "summary.json").write_text(json.dumps({"gpus": "eight"}))
    runs = {r.run_id: r for r in list_runs(tmp_path)}
    assert set(runs) == {"good", "nan", "badsum", "worse"}
    assert runs["nan"].usable and runs["nan"].concurrency is None and runs["nan"].gpus == 1
    assert any("SLO tpot_ms" in p for p in runs["nan"].problems)
    assert runs["badsum"].figure("ttft_p50_ms") is None
    assert runs["badsum"].figure("output_tps_per_gpu") is not None
    assert "summary.json: latency is not an object; ignored" in runs["badsum"].problems
    assert any("gpus must be a whole number in 1..65536" in p for p in runs["worse"].problems)
    res = _cli("runs", "list", "--root", tmp_path, "--json")
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)) == 4


# ----------------------------------------------------------------------------- query sandbox


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("COPY (SELECT * FROM runs) TO '{out}/leak.csv'", "file system operations are disabled"),
        ("SELECT * FROM read_csv('/etc/hostname')", "file system operations are disabled"),
        ("INSTALL httpfs", "query failed"),
        ("ATTACH '{out}/x.duckdb'", "query failed"),
        ("SET enable_external_access = true", "configuration has been locked"),
    ],
)
def test_query_cannot_touch_files_or_network(root, tmp_path, sql, needle):
    out = tmp_path / "outside"
    out.mkdir()
    with pytest.raises(AccelbenchError, match=needle):
        query_runs(root, sql.format(out=out))
    assert list(out.iterdir()) == []
    # the views still read the runs' own files
    assert query_runs(root, "SELECT count(*) FROM requests")[1] == [(100,)]


def test_query_attacks_on_the_command_line(root, tmp_path):
    out = tmp_path / "outside"
    out.mkdir()
    for sql in (
        f"COPY (SELECT * FROM runs) TO '{out}/leak.csv'",
        "SELECT * FROM read_csv('/etc/hostname')",
        "INSTALL httpfs",
    ):
        _one_line_exit_2(_cli("runs", "query", "--root", root, sql), "query failed")
    assert list(out.iterdir()) == []


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("label", ["../x", "../../x", "/abs/x", "a/b", ".hidden", "..", ""])
def test_import_label_must_be_one_directory_name(tmp_path, label):
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(_vllm_result()))
    root = tmp_path / "results"
    with pytest.raises(AccelbenchError, match="--label"):
        import_vllm(f, root, label=label)
    assert not root.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["vllm.json"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    stem=st.one_of(
        st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,94}\Z"),
        st.text(st.sampled_from("ab 1é#:-"), min_size=1, max_size=12),
        st.just("x" * 200),
    )
)
def test_property_the_run_id_from_a_file_name_is_a_label_or_refused(tmp_path, stem):
    """Without --label the run id is vllm-<file name>: one with a space was taken, one of
    250 characters failed in mkdir ('File name too long'). It follows --label's rule now,
    else one line asking for --label, nothing written."""
    import re
    import tempfile

    box = Path(tempfile.mkdtemp(dir=tmp_path))
    f = box / f"{stem}.json"
    f.write_text(json.dumps(_vllm_result()))
    root = box / "results"
    rid = f"vllm-{stem}"
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", rid):
        assert import_vllm(f, root).name == rid
    else:
        with pytest.raises(AccelbenchError, match="give one with --label") as err:
            import_vllm(f, root)
        assert "\n" not in str(err.value) and err.value.exit_code == 2
        assert not root.exists()


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("completed", "four", "'completed' must be a whole number"),
        ("completed", 10**30, "'completed' must be a whole number"),
        ("max_concurrency", 1e400, "'max_concurrency'"),
        ("input_lens", [100, "x", 100, 100, 100], "'input_lens'[1]"),
        ("ttfts", {"a": 1}, "'ttfts' must be a list"),
        ("itls", [[0.02], ["slow"], [], [], []], "'itls'[1]"),
        ("start_times", [0, 1, 2, 3, -1], "'start_times'[4]"),
        ("output_lens", [11, 11, 11, 11, 2**70], "'output_lens'[4]"),
        ("model_id", ["m"], "'model_id' must be a string"),
    ],
)
def test_import_wrong_typed_fields_one_line(tmp_path, field, value, needle):
    d = _vllm_result()
    d[field] = value
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(d))
    with pytest.raises(AccelbenchError) as exc:
        import_vllm(f, tmp_path / "results")
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    assert not (tmp_path / "results").exists()


# every number the import reads from a vLLM result, and what it accepts there (the base
# file: 5 requests, 4 completed, 1 failed); None (absent) is accepted for every field
_WHOLE, _REAL = "whole", "real"
_MS_MAX = 30 * 86400 * 1000.0
_NUMERIC_FIELDS: dict[str, tuple[str, float, float]] = {  # field -> (kind, lo, hi)
    "completed": (_WHOLE, 4, 4),  # what its errors list says: 4 of 5 completed
    "failed": (_WHOLE, 1, 1),
    "num_prompts": (_WHOLE, 5, 10_000_000),  # at least the 5 requests listed
    "max_concurrency": (_WHOLE, 1, 2**53 - 1),
    "total_input_tokens": (_WHOLE, 0, 2**53 - 1),
    "total_output_tokens": (_WHOLE, 0, 2**53 - 1),
    "duration": (_REAL, 1e-6, 30 * 86400.0),  # the totals are divided by it
    "request_rate": (_REAL, math.ulp(0.0), math.inf),  # above 0; inf or "inf": all at once
    "request_throughput": (_REAL, 0, 1e16),  # registry.MAX_REQUESTS_PER_S
    "output_throughput": (_REAL, 0, 1e23),  # registry.MAX_TOKENS_PER_S
    "total_token_throughput": (_REAL, 0, 1e23),
    **{f"{s}_{m}_ms": (_REAL, 0, _MS_MAX) for m in ("ttft", "tpot", "e2el")
       for s in ("mean", "std", "median", "p90", "p95", "p99", "p99.9")},
    "median_tpot_ms": (_REAL, 1e-13, _MS_MAX),  # or 0; tok/s/user 1000 / it, at most 1e16
}  # fmt: skip


def _rates_agree(d: dict) -> bool:
    """vllm bench serve's throughputs are its totals over its duration (rounding only)."""
    dur, tin, tout = d.get("duration"), d.get("total_input_tokens"), d.get("total_output_tokens")
    if dur is None:
        return True
    for rate, total in ((d.get("request_throughput"), d.get("completed")),
                        (d.get("output_throughput"), tout),
                        (d.get("total_token_throughput"),
                         None if tin is None or tout is None else tin + tout)):  # fmt: skip
        if rate is not None and total is not None:
            if abs(rate - total / dur) > 1e-3 * max(abs(total / dur), abs(rate)):
                return False
    return True


def _accepted(field: str, v: object) -> bool:
    kind, lo, hi = _NUMERIC_FIELDS[field]
    if v is None:
        return True
    if field == "request_rate" and v in ("inf", math.inf):
        return True
    if field == "median_tpot_ms" and v == 0 and not isinstance(v, bool):
        return True
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
        return False
    if kind == _WHOLE and not isinstance(v, int):
        return False
    return lo <= v <= hi and (kind == _WHOLE or math.isfinite(v))


_ABSURD = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -2, -1, -1e-9, 0, 0.0, 5e-324, 1e-6, 1,
                     3, 4, 5, 6, 100,
                     10**12, 2**53, 2**70, 10**17, 10**24, 1e300, 4.0, 2.5, True, False, None, "fast", "inf",
                     "-inf", "nan", "1", "", [1], {"a": 1}]),
    st.floats(),
    st.integers(-(10**20), 10**20),
)  # fmt: skip


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(field=st.sampled_from(sorted(_NUMERIC_FIELDS)), value=_ABSURD)
def test_every_number_read_from_a_vllm_result_is_checked(tmp_path, field, value):
    """Property: each numeric field the import reads is refused, one line naming it,
    nothing written, when NaN, infinite, negative, huge, of the wrong type or against the
    file's own requests (more completed than sent); else imported into a run whose own
    reader finds it whole, with no negative figure. Before, `duration: -2` gave -200
    tokens/s, `completed: 100` of 5 requests was written, `request_rate: -1` made a
    run.json summarize called damaged, and "fast", NaN and 10**12 passed in silence."""
    d = _vllm_result(with_starts=False)  # the file's duration and totals are used
    d[field] = value
    import tempfile

    box = Path(tempfile.mkdtemp(dir=tmp_path))  # one an example: hypothesis reruns some
    f = box / "vllm.json"
    f.write_text(json.dumps(d))
    root = box / "results"
    if not _accepted(field, value) or not _rates_agree(d):
        with pytest.raises(AccelbenchError) as exc:
            import_vllm(f, root)
        msg = str(exc.value)
        assert f"'{field}'" in msg and "\n" not in msg and exc.value.exit_code == 2, msg
        assert not root.exists()
        return
    r = load_run(import_vllm(f, root))
    assert not r.problems, r.problems
    s = r.summary
    assert s is not None
    if field != "duration" or value is not None:  # no start_times, no duration: no window
        assert r.usable and s["window"]["duration_s"] > 0
    assert all(x is None or x >= 0 for x in s["throughput"].values()), s["throughput"]
    assert s["counts"]["completed"] + s["counts"]["failed"] <= 5
    from accelbench.runner.finalize import _recorded_config  # summarize's check of run.json

    _recorded_config(r.config, r.path / "run.json")


def test_the_audits_vllm_results_are_refused_naming_the_field(tmp_path):
    """runs import-vllm exit 2, one line naming the field, nothing written: each of these
    was imported, exit 0."""
    n = 5
    starts = {"start_times": [0.1 * i for i in range(n)]}
    cases = [
        ({"duration": -2}, "'duration' must be a number of seconds from 1e-06 to 2,592,000"),
        ({"completed": 100, **starts}, "'completed' is 100, more than the requests of "
                                       "input_lens (5)"),
        ({"request_rate": -1, **starts}, "'request_rate' must be a number of requests/s"),
        ({"request_rate": "fast"}, "'request_rate'"),
        ({"duration": math.nan}, "'duration'"),
        ({"num_prompts": 10**12}, "'num_prompts' must be a whole number in 1..10,000,000"),
        ({"num_prompts": 4}, "'num_prompts' is 4, fewer than the 5 requests of input_lens"),
        ({"input_lens": None, "num_prompts": None, "completed": 6},
         "'completed' is 6, more than ttfts' 5"),
        # its counts against its own errors list (written as given: a summary of 1
        # completed over 5 successful rows; 4 + 0 of 5 requests)
        ({"completed": 1, "failed": 0, "errors": [""] * n},
         "'completed' is 1, but errors says 5 of its 5 requests completed"),
        ({"failed": 0}, "'failed' is 0, but errors says 1 of its 5 requests failed"),
        ({"median_tpot_ms": 1e-300}, "'median_tpot_ms' must be 0 or a number of ms in [1e-13"),
        # its rates against its totals over its duration: 4e8 input tokens/s beside 222 in all
        ({"duration": 1e-6}, "'request_throughput' is 2, but 'completed' over 'duration' is "
                             "4 / 1e-06 s = 4e+06"),
    ]  # fmt: skip
    for i, (change, needle) in enumerate(cases):
        f = tmp_path / f"v{i}.json"
        f.write_text(json.dumps({**_vllm_result(n, with_starts=False), **change}))
        _one_line_exit_2(_cli("runs", "import-vllm", f, "--root", tmp_path / "r"), needle)
    assert not (tmp_path / "r").exists()
    # what vllm bench serve writes is imported, and its run.json is no damaged one
    f = tmp_path / "ok.json"
    f.write_text(json.dumps({**_vllm_result(n), "request_rate": 12.5}))
    out = import_vllm(f, tmp_path / "r")
    from accelbench.runner.finalize import _recorded_config  # summarize's check of run.json

    _recorded_config(load_run(out).config, out / "run.json")


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(starts=st.booleans(), gpus=st.integers(1, 8),
       opts=st.sampled_from([[], ["--gpus", "2"], ["--slo", "ttft_ms=100"]]))  # fmt: skip
def test_summarize_leaves_an_imported_run_as_imported(tmp_path, starts, gpus, opts):
    """An imported run has no journal: summarize rebuilt it from requests.parquet alone,
    exit 1, and overwrote summary.json with less (throughput 22 tok/s -> null without
    start_times; source and absent gone). Now exit 2, one line saying it was imported,
    every file as it was."""
    import tempfile

    from cli_inprocess import run_cli

    box = Path(tempfile.mkdtemp(dir=tmp_path))
    f = box / "v.json"
    f.write_text(json.dumps(_vllm_result(with_starts=starts)))
    out = import_vllm(f, box / "r", gpus=gpus)
    before = {p: p.read_bytes() for p in out.iterdir()}
    code, _, err, _ = run_cli(["summarize", str(out), *opts], box)
    (line,) = err.strip().splitlines()
    assert code == 2 and "was imported from vllm bench serve" in line, err
    assert {p: p.read_bytes() for p in out.iterdir()} == before


_PER_REQUEST = ("input_lens", "output_lens", "errors", "itls", "start_times", "ttfts")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(field=st.sampled_from(_PER_REQUEST), length=st.integers(1, 9).filter(lambda k: k != 5))
def test_a_per_request_list_of_another_length_is_refused(tmp_path, field, length):
    """A per-request list one entry short (or long) was dropped, and every request then
    read as failed (ok False, osl None) while the summary said 4 completed: now one line
    naming the list and both lengths, nothing written."""
    assume((field, length) != ("ttfts", 4))  # one a completed request: how some write it
    d = _vllm_result(with_starts=True)
    d[field] = (d[field] * 2)[:length]
    f = tmp_path / f"vllm-{field}-{length}.json"
    f.write_text(json.dumps(d))
    root = tmp_path / f"results-{field}-{length}"
    with pytest.raises(AccelbenchError) as exc:
        import_vllm(f, root)
    msg = str(exc.value)
    n = 5 if field != "input_lens" else length  # the requests are input_lens' entries
    other = length if field != "input_lens" else 5
    assert f"has {other} entries for {n} requests" in msg and "\n" not in msg, msg
    assert not root.exists()


# each per-request list's entries and what the import accepts there (None: not read)
_ENTRY_OK = {
    "input_lens": lambda v: v is None or (_whole(v) and 0 <= v <= 10_000_000),
    "output_lens": lambda v: v is None or (_whole(v) and 0 <= v <= 10_000_000),
    "ttfts": lambda v: v is None or (_real(v) and 0 <= v <= 30 * 86400),
    "start_times": lambda v: _real(v) and 0 <= v <= 4e9,
    "itls": lambda v: (
        isinstance(v, list) and all(_real(g) and g >= 0 for g in v) and sum(v) <= 30 * 86400
    ),
}


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _real(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(field=st.sampled_from(sorted(_ENTRY_OK)), i=st.integers(0, 3),
       value=st.one_of(_ABSURD, st.lists(_ABSURD, max_size=3), st.just([1e6] * 3)),
       starts=st.booleans())  # fmt: skip
def test_every_per_request_entry_is_checked(tmp_path, field, i, value, starts):
    """Property: an entry of a per-request list (one of the 4 completed requests) that no
    request can have (a TTFT of 10^10 s, gaps summing past 30 days, 2^52 output tokens)
    is refused, one line naming field[i], nothing written; else the run imports and its
    own reader finds it whole. Before, ttfts 1e10 wrote a summary the reader called
    damaged (latency 1e13 ms), or with start_times failed as 'OverflowError: Python int
    too large'; output_lens 2^52 wrote tok/s/user 2.3e16."""
    if field == "start_times" and not starts:
        return
    d = _vllm_result(with_starts=starts)
    d[field] = list(d[field])
    d[field][i] = value
    import tempfile

    box = Path(tempfile.mkdtemp(dir=tmp_path))
    f = box / "vllm.json"
    f.write_text(json.dumps(d))
    root = box / "results"
    if not _ENTRY_OK[field](value):
        with pytest.raises(AccelbenchError) as exc:
            import_vllm(f, root)
        msg = str(exc.value)
        assert f"'{field}'[{i}]" in msg and "\n" not in msg and exc.value.exit_code == 2, msg
        assert not root.exists()
        return
    r = load_run(import_vllm(f, root))
    assert not r.problems, r.problems


def test_import_without_errors_or_output_lens_reads_completed(tmp_path):
    """With neither list, which requests failed is known only when none did (completed
    is every request); otherwise refused, never every request marked failed."""
    d = _vllm_result(with_starts=True)
    del d["errors"], d["output_lens"]
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(d))
    with pytest.raises(AccelbenchError, match="cannot tell which of the 5 requests failed"):
        import_vllm(f, tmp_path / "results")
    d.update(completed=5, failed=0, ttfts=[0.05] * 5, itls=[[0.02] * 10] * 5,
             request_throughput=5 / 2.0)  # fmt: skip
    f.write_text(json.dumps(d))
    r = load_run(import_vllm(f, tmp_path / "results"))
    assert r.summary["counts"]["completed"] == 5 and r.summary["counts"]["failed"] == 0


def test_import_huge_start_time_is_one_line(tmp_path):
    d = _vllm_result()
    d["start_times"] = [1e300] * 5
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(d))
    with pytest.raises(AccelbenchError, match=r"field 'start_times'\[0\] must be"):
        import_vllm(f, tmp_path / "results")
    assert not (tmp_path / "results").exists()


def test_import_cli_bad_input_exit_2(tmp_path):
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(_vllm_result()))
    _one_line_exit_2(_cli("runs", "import-vllm", f, "--root", tmp_path / "r", "--label", "../x"),
                     "--label")  # fmt: skip
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _one_line_exit_2(_cli("runs", "import-vllm", f, "--root", blocker / "sub"), "--root")
    _one_line_exit_2(_cli("runs", "import-vllm", f, "--root", tmp_path / "r", "--gpus", "0"),
                     "--gpus")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "vllm.json"]


def test_write_parquet_atomic_replaces(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from accelbench.store.rundir import write_parquet_atomic

    p = tmp_path / "sub" / "t.parquet"
    write_parquet_atomic(p, pa.table({"a": [1]}))
    write_parquet_atomic(p, pa.table({"a": [1, 2]}))
    assert pq.read_table(p).num_rows == 2
    assert [x.name for x in p.parent.iterdir()] == ["t.parquet"]
    with pytest.raises(AttributeError):  # a failed write keeps the old file, no temp file
        write_parquet_atomic(p, "not a table")  # type: ignore[arg-type]
    assert pq.read_table(p).num_rows == 2
    assert [x.name for x in p.parent.iterdir()] == ["t.parquet"]


# ----------------------------------------------------------------------------- one statement


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(st.lists(st.text(alphabet="ab;' -", max_size=6), min_size=1, max_size=3), st.booleans())
def test_more_than_one_statement_is_refused(tmp_path, literals, trailing):
    """``runs query "select 1; select 2"`` ran both and printed the last (docs/LIMITS.md:
    one statement). A ';' inside a string literal, or one at the end, is no second one."""
    stmts = ["SELECT '" + lit.replace("'", "''") + "' AS x" for lit in literals]
    sql = "; ".join(stmts) + (";" if trailing else "")
    if len(stmts) == 1:
        assert query_runs(tmp_path, sql)[1] == [(literals[0],)]
    else:
        with pytest.raises(AccelbenchError, match=f"holds {len(stmts)} SQL statements"):
            query_runs(tmp_path, sql)


def test_two_statements_on_the_command_line(root):
    _one_line_exit_2(_cli("runs", "query", "--root", root, "select 1; select 2"),
                     "the query holds 2 SQL statements: give one")  # fmt: skip


def test_a_run_left_out_of_the_requests_view_is_said(root):
    # audit: run b's requests vanished from `SELECT count(*) FROM requests`, stderr empty
    (root / "single" / "requests.parquet").write_bytes(b"garbage\n")
    left_out: list[str] = []
    assert query_runs(root, "SELECT count(*) FROM requests", left_out=left_out)[1] == [(70,)]
    assert len(left_out) == 1 and left_out[0].startswith(f"{root / 'single'}: requests.parquet")
    r = _cli("runs", "query", "--root", root, "--format", "csv", "SELECT count(*) FROM requests")
    assert r.returncode == 0 and r.stdout.splitlines() == ["count_star()", "70"]
    assert r.stderr.splitlines() == [f"warning: {left_out[0]}"], r.stderr


def test_an_import_with_no_window_says_it_has_no_throughput(tmp_path):
    """A result with neither start_times nor duration was imported with null throughput
    and `absent` did not list it."""
    from accelbench.store.vllm_import import NO_THROUGHPUT

    d = _vllm_result(with_starts=False)
    del d["duration"]
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(d))
    r = load_run(import_vllm(f, tmp_path / "results"))
    assert r.figure("output_tps_per_gpu") is None
    assert NO_THROUGHPUT in r.summary["absent"] and NO_THROUGHPUT in r.run["absent"]
    for with_starts, keep_duration in ((True, False), (False, True)):  # either gives one
        d = _vllm_result(with_starts=with_starts)
        if not keep_duration:
            del d["duration"]
        f.write_text(json.dumps(d))
        r = load_run(import_vllm(f, tmp_path / "results", label=f"r{with_starts}"))
        assert r.figure("output_tps_per_gpu") and NO_THROUGHPUT not in r.summary["absent"]


def test_the_import_cli_says_a_run_has_no_throughput(tmp_path):
    d = _vllm_result(with_starts=False)
    del d["duration"]
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(d))
    p = _cli("runs", "import-vllm", f, "--root", tmp_path / "r")
    assert p.returncode == 0, p.stderr
    warn = [ln for ln in p.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "neither start_times nor duration" in warn[0], p.stderr


_BAD_FILES = [
    {"ttfts": [1e10] * 5},
    {"completed": 1},
    {"duration": -2},
    {"output_lens": [2**52] * 5},
]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(n=st.integers(1, 4), bad_at=st.integers(0, 4), bad=st.sampled_from(range(len(_BAD_FILES))),
       twin=st.booleans())  # fmt: skip
def test_several_files_import_all_or_none(tmp_path, n, bad_at, bad, twin):
    """Property: `runs import-vllm A B C` imports every file or none. Before, a bad B
    (or B with A's file name from another folder) stopped the import there: A imported,
    C never tried, and the one error line named only B; with two x.json the second was
    refused 'exists already; pass another --label', which more than one file cannot take."""
    import tempfile

    box = Path(tempfile.mkdtemp(dir=tmp_path))
    files = []
    for i in range(n):
        (box / f"d{i}").mkdir()
        files.append(box / f"d{i}" / f"v{i}.json")
        files[-1].write_text(json.dumps(_vllm_result()))
    root = box / "results"
    if bad_at < n:
        files[bad_at].write_text(json.dumps({**_vllm_result(), **_BAD_FILES[bad]}))
    elif twin and n > 1:  # the last file named as the first, in another folder
        files[-1] = files[-1].rename(files[-1].with_name(files[0].name))
    else:
        outs = import_vllm_files(files, root)
        assert sorted(p.name for p in root.iterdir()) == sorted(f"vllm-{f.stem}" for f in files)
        assert all(load_run(o).usable for o in outs)
        return
    from cli_inprocess import run_cli

    code, out, err, _ = run_cli(["runs", "import-vllm", *map(str, files), "--root", str(root)],
                                box)  # fmt: skip
    named = str(files[bad_at]) if bad_at < n else "would both be run"
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and named in lines[0] and out == "", (code, err)
    assert not root.exists()


def _strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(xs=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=4))
def test_runs_query_format_json_is_json_for_any_double(tmp_path, xs):
    """Property: `runs query --format json` is JSON (RFC 8259) whatever the query
    computes. Before, `SELECT 1/0` or a NaN printed Infinity / NaN, which jq and strict
    readers refuse. Now NaN is null and infinities "inf" / "-inf", as in the run files."""
    from cli_inprocess import run_cli

    lit = ", ".join(f"'{x!r}'::double AS c{i}" for i, x in enumerate(xs))
    code, out, err, _ = run_cli(["runs", "query", "--root", str(tmp_path), "--format", "json",
                                 f"SELECT {lit}, [{lit.split(' AS ')[0]}] AS l"], tmp_path)  # fmt: skip
    assert code == 0, err
    (row,) = _strict_json(out)
    want = [None if math.isnan(x) else ("inf" if x > 0 else "-inf") if math.isinf(x) else x
            for x in xs]  # fmt: skip
    assert [row[f"c{i}"] for i in range(len(xs))] == want
    assert row["l"] == want[:1]
