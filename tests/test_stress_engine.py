"""Flood and mixed against the real engine: llama-server with the generated tiny model
(three instances on the same cores for mixed, where the interference is real)."""

from __future__ import annotations

import contextlib
import json
import os

import pytest

from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.suites.stress.flood import FloodConfig, run_flood
from accelbench.suites.stress.mixed import MixedConfig, run_mixed

pytestmark = pytest.mark.engine


def test_flood_fits_ttft_and_classifies_context_overflow(tmp_path):
    from accelbench.engines.llamacpp import running_llama_server

    ctx = 4096
    with running_llama_server("tiny", parallel=1, ctx_per_slot=ctx, log=lambda m: None) as s:
        load = BenchmarkConfig(url=s.url, telemetry=False, workload=WorkloadConfig(), timeout_s=120)
        cfg = FloodConfig(load=load, lengths=[256, 1024, 2048, 3500, 6000], requests=2, osl=4,
                          server_pid=s.pid, sample_s=0.5, gpu=False)  # fmt: skip
        res = run_flood(cfg, tmp_path / "flood")
    assert res.status == "completed"
    steps = {st.input_tokens: st for st in res.steps}
    for n in (256, 1024, 2048, 3500):
        assert steps[n].ok == 2 and not steps[n].errors
        assert (steps[n].prefill_tok_per_s_p50 or 0) > 0
    # past the context: every request fails, classified as an overflow, not a failure
    assert steps[6000].ok == 0 and steps[6000].errors == {"context_overflow": 2}
    # TTFT grows with the input: the fitted curve rises over the measured lengths (its
    # linear term alone need not be positive: b and c trade off, b = -0.008 once in CI)
    assert res.fit.n == 8
    a, b, c = (res.fit.coef[k].estimate or 0.0 for k in ("a", "b", "c"))
    assert a + b * 3500 + c * 3500**2 > a + b * 256 + c * 256**2
    assert (steps[3500].ttft_ms or {})["p50"] > (steps[256].ttft_ms or {})["p50"]
    v = {x.name: x for x in res.verdicts}
    assert v["flood errors"].word == "pass"
    assert v["flood errors"].evidence["context_overflow"] == 2
    assert "leak server_rss_bytes" in v
    doc = json.loads((tmp_path / "flood" / "stress.json").read_text())
    assert len(doc["runs"]) == 5 and doc["ttft_fit_ms"]["model"] == "y = a + b*x + c*x^2"


def test_mixed_three_engines_interference_interval_excludes_zero(tmp_path):
    from accelbench.engines.llamacpp import running_llama_server

    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(
                running_llama_server(
                    "tiny", parallel=1, ctx_per_slot=512, threads=1, log=lambda m: None
                )
            )  # fmt: skip
            for _ in range(3)
        ]
        for s in servers:  # the same core for all three: interference by construction
            for tid in os.listdir(f"/proc/{s.pid}/task"):
                os.sched_setaffinity(int(tid), {0})
        loads = [
            # no prompt cache: a cycled prompt must cost the same alone and together
            # one thread per engine: llama.cpp's spinning thread barriers make a
            # multi-threaded engine erratic on a busy 2-core machine
            BenchmarkConfig(
                url=s.url,
                concurrency=1,
                telemetry=False,
                warmup_requests=2,
                extra_body={"cache_prompt": False},
                workload=WorkloadConfig(isl=64, osl=8, seed=k),
            )  # fmt: skip
            for k, s in enumerate(servers)
        ]
        # 8 s: a median's interval needs 10 requests a side (the jitter claim, with 8
        # windows of the 12 its interval needs, is "too few windows")
        cfg = MixedConfig(loads=loads, duration_s=8, window_s=1, claim_pct=3.0)
        res = run_mixed(cfg, tmp_path / "mixed")
    assert res.status == "completed"
    for e in res.endpoints:
        c = e.estimates["ttft_p50_change_pct"]
        # three engines on two cores: the change is real and its interval excludes zero
        assert c.ci_low is not None and c.ci_low > 0, e
        assert e.solo_requests >= 10 and e.mixed_requests >= 10
    names = {v.name for v in res.verdicts}
    assert {f"claim ep{i} fluctuation < 3%" for i in range(3)} <= names
    for v in res.verdicts:  # no interval, no pass
        if v.kind == "claim":
            assert v.word == "n/a" and v.note.startswith("too few windows"), v
    doc = json.loads((tmp_path / "mixed" / "stress.json").read_text())
    assert len(doc["runs"]) == 6  # 3 solo + 3 together
    for r in doc["runs"]:
        assert (
            json.loads((tmp_path / "mixed" / r / "run.json").read_text())["status"] == "completed"
        )
