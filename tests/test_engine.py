"""Against the real engine: llama.cpp's llama-server (built and cached by accelbench)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request

import psutil
import pyarrow.parquet as pq
import pytest

from accelbench.errors import AccelbenchError
from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig

pytestmark = pytest.mark.engine


def scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(llamacpp:[a-z_]+)\s+([0-9.e+-]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def test_counts_agree_with_server_metrics(llama_server, tmp_path):
    before = scrape(llama_server)
    cfg = BenchmarkConfig(
        url=llama_server, concurrency=4, num_requests=12, warmup_requests=2,
        workload=WorkloadConfig(isl=48, osl=16, seed=1), out_dir=str(tmp_path / "r"),
    )  # fmt: skip
    run_dir = run_benchmark(cfg, progress=False).directory
    after = scrape(llama_server)
    s = json.loads((run_dir / "summary.json").read_text())
    t = pq.read_table(run_dir / "requests.parquet").to_pylist()
    assert s["counts"]["completed"] == 12 and s["errors"]["count"] == 0
    assert s["tokens"]["osl_source"] == {"server_usage": 12}
    # every request, warm-up and the one probe included, as the server counted them
    generated = sum(r["osl"] for r in t) + 1
    assert (
        after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"]
        == generated
    )
    assert s["tokens"]["output"] == 12 * 16
    # exact input length in the server's own tokens (BOS included)
    assert all(r["isl"] == 48 for r in t)
    assert s["tokens"]["input"] == 12 * 48
    # one token per SSE event on llama.cpp: the client count agrees with the server's
    assert s["tokens"]["osl_mismatch"]["requests"] == 0
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["server"]["models"] and meta["environment"]["python"]


def test_chat_endpoint_and_text(llama_server, tmp_path):
    cfg = BenchmarkConfig(
        url=llama_server, endpoint="chat", concurrency=2, num_requests=4, save_text=True,
        extra_body={"temperature": 0}, workload=WorkloadConfig(isl=40, osl=12),
        out_dir=str(tmp_path / "c"),
    )  # fmt: skip
    run_dir = run_benchmark(cfg, progress=False).directory
    t = pq.read_table(run_dir / "requests.parquet").to_pylist()
    assert all(r["ok"] and r["osl"] == 12 and r["output_text"] for r in t)
    assert all(r["isl"] == 40 for r in t)  # chat template tokens calibrated away


def test_wrong_model_name_is_refused(llama_server, tmp_path):
    cfg = BenchmarkConfig(url=llama_server, model="gpt-17", num_requests=1,
                          out_dir=str(tmp_path / "w"))  # fmt: skip
    with pytest.raises(AccelbenchError, match="not served"):
        run_benchmark(cfg, progress=False)


def test_prompt_over_context_is_an_error_record(llama_server, tmp_path):
    # 4 slots x 1024 context: a 2000-token prompt gets HTTP 400 from llama-server, whose
    # message names the context: the error kind says so
    cfg = BenchmarkConfig(url=llama_server, concurrency=1, num_requests=2,
                          workload=WorkloadConfig(isl=2000, osl=4), out_dir=str(tmp_path / "o"))  # fmt: skip
    run_dir = run_benchmark(cfg, progress=False).directory
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["errors"]["by_kind"] == {"context_exceeded": 2} and s["counts"]["completed"] == 0


def test_embedded_default_cli(tmp_path):
    """`accelbench run` with no URL: starts the engine, benchmarks it, stops it."""
    out = tmp_path / "embedded"

    def engines(port: str | None = None) -> set[int]:
        """llama-servers running (on ``port`` only, where given: another test's or
        user's engine on this host is not this run's)."""
        out = set()
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or []
            if cmd and "llama-server" in cmd[0] and (port is None or port in cmd):
                out.add(p.pid)
        return out

    before = engines()
    r = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "-n", "3", "-c", "3", "--isl", "32",
         "--osl", "8", "--out", str(out), "--embedded-parallel", "3"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["counts"]["completed"] == 3 and s["tokens"]["output"] == 24
    assert "throughput" in r.stdout and "TTFT" in r.stdout
    meta = json.loads((out / "run.json").read_text())
    assert "embedded" in meta["server"]
    args = meta["server"]["embedded"]["args"]
    port = args[args.index("--port") + 1]
    assert not engines(port) - before  # the engine it started is gone
