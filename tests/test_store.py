"""The DuckDB runs store and the vllm bench serve import."""

from __future__ import annotations

import json

import pytest

from accelbench.errors import AccelbenchError
from accelbench.store.runs import import_vllm, list_runs, load_run, query_runs
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
    from accelbench.sweep import load_inputs

    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(_vllm_result(n=40)))
    old = import_vllm(f, tmp_path / "results", gpus=1, isl=100, osl=11)
    new = make_run(tmp_path / "results" / "new", 40, concurrency=4, isl=100, osl=11,
                   model="meta-llama/Llama-3.1-8B-Instruct", chunks=False)  # fmt: skip
    a, b = load_inputs([old, new])
    comps = compare_sets(a, b, n_boot=100)
    assert comps[0].condition == "same load: c=4"
    assert any("not recorded on one side" in w for w in comps[0].warnings)
