"""Sessions on the real engines (issue 22): llama-server's slot prompt cache and vLLM's
prefix cache, as each reports them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig

pytestmark = [pytest.mark.engine]


def bench(url: str, out: Path, wl: WorkloadConfig, **kw) -> tuple[dict, list[dict]]:
    cfg = BenchmarkConfig(url=url, out_dir=str(out), workload=wl, telemetry=False, **kw)
    res = run_benchmark(cfg, progress=False)
    rows = pq.read_table(res.directory / "requests.parquet").to_pylist()
    return json.loads((res.directory / "summary.json").read_text()), rows


def test_llama_server_reuses_the_slot_for_later_turns(llama_server, tmp_path):
    """Turns after the first hit llama-server's slot cache (its responses say how many
    prompt tokens it reused) and come back faster than a cold prompt of the same length."""
    wl = WorkloadConfig(isl=160, osl=8, sessions=2, turns="4")
    s, rows = bench(llama_server, tmp_path / "sessions", wl, concurrency=1)
    assert s["errors"]["count"] == 0 and s["counts"]["completed"] == 8
    assert all(r["cached_tokens"] is not None for r in rows)  # every response says
    later = [r for r in rows if r["turn"] >= 2]
    # the history (all but the new message) comes from the slot: at least most of it
    for r in later:
        assert r["cached_tokens"] >= 0.5 * (r["isl"] - r["turn_tokens"]), r
    cache = s["cache"]
    assert cache["hit_rate"] > 0.4 and cache["reported"] == 8
    # a cold prompt as long as the last turns' (about 500 tokens), sent alone
    length = int(np.median([r["isl"] for r in rows if r["turn"] == 3]))
    cold_s, cold = bench(llama_server, tmp_path / "cold", WorkloadConfig(isl=length, osl=8),
                         concurrency=1, num_requests=3)  # fmt: skip
    assert all(r["cached_tokens"] == 0 or r["cached_tokens"] < 16 for r in cold)
    warm_ttft = np.median([r["ttft_ms"] for r in rows if r["turn"] == 3])
    cold_ttft = np.median([r["ttft_ms"] for r in cold])
    assert warm_ttft < cold_ttft, (warm_ttft, cold_ttft)
