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


# The knee on the real engines: sessions of a 64-token shared system prompt and 4 turns of
# 48 user and 96 output tokens, c of them in step at each point (one session per slot).
KNEE_ARGS = ["--sessions", "1", "--turns", "4", "--isl", "48", "--osl", "96",
             "--shared-prefixes", "1", "--prefix-tokens", "64", "--requests-per-point", "4",
             "--warmup-per-point", "0", "--no-saturation-stop", "-q"]  # fmt: skip


def sweep_knee_of(url: str, values: str, tmp_path: Path):
    from accelbench.report.knee import sweep_dir_knee
    from cli_inprocess import run_cli

    code, out, err, _ = run_cli(["sweep", "--url", url, "--values", values, *KNEE_ARGS,
                                 "-o", "sw"], tmp_path)  # fmt: skip
    assert code == 0, err
    knee = sweep_dir_knee(tmp_path / "sw")
    assert knee is not None and knee.measured.found, knee
    return knee


def test_llama_server_knee_is_its_slot_count(tmp_path):
    """llama-server (-np 4): each slot keeps one session's prompt, so four sessions hit
    and a fifth thrashes them; plan's prediction from the context size and the slots
    falls in the measured bracket."""
    from accelbench.engines import tinymodel as tm
    from accelbench.engines.llamacpp import running_llama_server
    from accelbench.metrics.knee import knee_agrees
    from accelbench.plan.architecture import arch_from_config
    from accelbench.plan.knee import SessionMix, predict_knee

    tiny = arch_from_config({
        "model_type": "llama", "hidden_size": tm.N_EMBD, "intermediate_size": tm.N_FF,
        "num_hidden_layers": tm.N_LAYER, "num_attention_heads": tm.N_HEAD,
        "num_key_value_heads": tm.N_HEAD_KV, "head_dim": tm.HEAD_DIM,
        "vocab_size": tm.N_VOCAB, "max_position_embeddings": tm.N_CTX,
    }, name="tiny")  # fmt: skip

    with running_llama_server("tiny", parallel=4, ctx_per_slot=1024) as srv:
        knee = sweep_knee_of(srv.url, "2,4,5,8", tmp_path)
    assert (knee.measured.interval.low, knee.measured.interval.high) == (4.0, 5.0)
    mix = SessionMix(turns=4, user_tokens=48, output_tokens=96, system_tokens=64)
    p = predict_knee(tiny, None, 1, mix, context_tokens=4096, block_size=1,
                     slots=4)  # fmt: skip
    assert knee_agrees(p, knee.measured).status == "pass"


@pytest.mark.vllm
def test_vllm_knee_agrees_with_its_published_capacity(tmp_path):
    """vLLM with 100 blocks of 32 tokens: the sweep's own prediction (from vLLM's
    cache_config_info and the sessions sent) falls in the measured bracket."""
    import os

    from accelbench.engines.vllm import running_vllm_server

    if os.environ.get("ACCELBENCH_SKIP_VLLM") == "1":
        pytest.skip("ACCELBENCH_SKIP_VLLM=1: vLLM NOT TESTED")
    extra = ["--num-gpu-blocks-override", "100", "--block-size", "32"]
    with running_vllm_server("tiny", extra_args=extra) as srv:
        knee = sweep_knee_of(srv.url, "4,6,7,8", tmp_path)
    assert knee.predicted is not None and knee.predicted.capacity_blocks in (99, 100)
    assert knee.agreement is not None and knee.agreement.status == "pass", knee.lines()
