"""Memory fit, roofline, MLPerf sanity and `accelbench plan` (numbers worked by hand)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from accelbench.cli.cost import register
from accelbench.cost.catalog import shipped_catalog
from accelbench.errors import AccelbenchError
from accelbench.plan.mlperf import check_mlperf
from accelbench.plan.models import find_model
from accelbench.plan.roofline import Roofline, Workload, hardware_for, memory_fit

GB = 1e9


def test_hardware_defaults_to_measured_fractions_and_range_ends():
    cat = shipped_catalog()
    h = hardware_for(cat["h100"], 8, "fp8")
    assert (h.compute_format, h.peak_flops, h.eff_flops, h.eff_bw) == ("fp8", 1979e12, 0.70, 0.89)
    b = hardware_for(cat["b200"], 8, "fp8")
    # range: upper end for bandwidth (8.0 of 7.7-8.0), lower end for capacity (180 of 180-192)
    assert (b.bandwidth, b.memory_bytes, b.eff_flops) == (8.0e12, 180 * GB, 1.0)
    # H100 has no FP4 rate: MXFP4 weights compute in FP8
    assert hardware_for(cat["h100"], 1, "mxfp4").compute_format == "fp8"
    assert hardware_for(cat["mi355x"], 1, "mxfp4").compute_format == "fp4"
    with pytest.raises(AccelbenchError, match="efficiency must be in"):
        hardware_for(cat["h100"], 1, "bf16", eff_bw=1.5)
    with pytest.raises(AccelbenchError, match="gpus must be >= 1"):
        hardware_for(cat["h100"], 0, "bf16")


def test_fit_llama_70b_by_hand():
    a = find_model("llama-3.1-70b").arch
    cat = shipped_catalog()
    one = hardware_for(cat["h100"], 1, "bf16")
    f1 = memory_fit(a, one, "bf16", "bf16", 8192)
    assert not f1.fits and not f1.weights_fit  # 141 GB of weights in 72 GB usable
    eight = hardware_for(cat["h100"], 8, "bf16")
    f8 = memory_fit(a, eight, "bf16", "bf16", 8192, concurrency=32)
    usable = 8 * 80e9 * 0.9
    kv_seq = 8192 * 327680  # 320 KiB per token, 8 KV heads on 8 GPUs: no replication
    # (576e9 - 141.107e9 weights) // 2.684e9 per sequence = 162
    assert f8.usable_bytes == pytest.approx(usable)
    assert f8.kv_bytes_per_sequence == kv_seq
    assert f8.max_batch == int((usable - a.weight_bytes("bf16")) // kv_seq)
    assert f8.fits and f8.max_batch == 162


def test_mla_latent_cache_is_replicated_under_tensor_parallelism():
    a = find_model("deepseek-v3").arch
    hw = hardware_for(shipped_catalog()["b200"], 8, "fp8")
    tp = memory_fit(a, hw, "fp8", "bf16", 1000)
    dp = memory_fit(a, hw, "fp8", "bf16", 1000, dp_attention=True)
    assert tp.kv_bytes_per_sequence == 8 * dp.kv_bytes_per_sequence == 8 * 1000 * 70272


def test_tp_must_divide_heads_in_fit():
    a = find_model("qwen3-32b").arch  # 64 heads, 8 KV heads
    hw = hardware_for(shipped_catalog()["h100"], 3, "bf16")
    with pytest.raises(AccelbenchError, match="does not divide num_attention_heads=64"):
        memory_fit(a, hw, "bf16", "bf16", 1000)


def test_decode_step_by_hand_batch_1():
    a = find_model("llama-3.1-8b").arch
    hw = hardware_for(shipped_catalog()["h100"], 1, "bf16")  # eff 0.70 / 0.89
    r = Roofline(a, hw, "bf16", Workload.of(1000, None, None))
    s = r.step(1)
    weight_bytes = a.decode_weight_bytes(1, "bf16")
    # all weights except the embedding table, plus one embedding row
    assert weight_bytes == 2 * (a.total_params - a.vocab_size * 4096) + 4096 * 2
    mem = (weight_bytes + 1000 * 131072) / (0.89 * 3.35e12)
    flops = 2 * a.active_params + 4 * 32 * 32 * 128 * 1000
    comp = flops / (0.70 * 989e12)
    assert s.memory_s == pytest.approx(mem) and s.compute_s == pytest.approx(comp)
    assert s.bound == "memory" and s.step_s == pytest.approx(mem)
    assert s.tok_s_user == pytest.approx(1 / mem)
    assert s.output_tok_s_per_gpu == pytest.approx(1 / mem)


def test_roofline_shape_and_physical_ceiling():
    a = find_model("llama-3.1-70b").arch
    hw = hardware_for(shipped_catalog()["mi300x"], 8, "fp8")
    wl = Workload.of(None, 1024, 1024, "fp8")
    assert wl.context == 1024 + 512
    fit = memory_fit(a, hw, "fp8", "fp8", wl.context)
    r = Roofline(a, hw, "fp8", wl)
    curve = r.curve(fit.max_batch)
    thr = [s.output_tok_s_per_gpu for s in curve]
    inter = [s.tok_s_user for s in curve]
    assert thr == sorted(thr) and inter == sorted(inter, reverse=True)
    ceiling = hw.eff_flops * hw.peak_flops / (2 * a.active_params)
    assert max(thr) <= ceiling
    # total = output x (ISL + OSL) / OSL
    assert curve[-1].total_tok_s_per_gpu == pytest.approx(2 * curve[-1].output_tok_s_per_gpu)
    best = r.best_at_interactivity(40, fit.max_batch)
    assert best.tok_s_user >= 40 and r.step(best.batch + 1).tok_s_user < 40
    assert r.best_at_interactivity(1e6, fit.max_batch) is None
    # prefill of 8192 tokens is compute-bound: FLOPs / (N * eff * peak)
    assert r.prefill_s(8192) == pytest.approx(
        a.prefill_flops(8192) / (8 * hw.eff_flops * hw.peak_flops)
    )


def test_mlperf_results_are_at_or_below_the_roofline():
    checks = check_mlperf()
    # 9 systems x models in FACTS.md, 23 scenario results
    assert len(checks) == 23
    for c in checks:
        assert 0 < c.efficiency <= 1.0, c
    by = {(c.round, c.system, c.model, c.scenario): c for c in checks}
    # hand check: 8 x H200, FP8, Llama-2-70B offline; compute ceiling at zero context
    h200 = by[("v5.0", "8 x H200", "llama-2-70b", "offline")]
    p_active = find_model("llama-2-70b").arch.active_params
    assert h200.roofline_tok_s == pytest.approx(8 * 0.69 * 1979e12 / (2 * p_active), rel=0.01)
    assert h200.efficiency == pytest.approx(0.438, abs=0.005)
    # MI325X is not "1.3x H200": same MLPerf workload, ~0.93-0.97x measured
    mi = by[("v5.0", "8 x MI325X", "llama-2-70b", "offline")]
    assert mi.measured_tok_s / h200.measured_tok_s == pytest.approx(0.975, abs=0.01)


# ------------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    a = typer.Typer()

    @a.callback()
    def _root() -> None:
        pass

    register(a)
    return a


def plan_json(app, *args):
    r = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert r.exit_code == 0, (r.output, r.exception)
    return json.loads(r.output)


def test_plan_cli_fit_and_roofline(app):
    p = plan_json(
        app, "llama-3.1-70b", "-a", "h100", "-n", "8", "--context", "8192", "--concurrency", "32"
    )
    assert p["fit"]["fits"] and p["fit"]["max_batch"] == 162
    assert p["model"]["kv_bytes_per_token"] == 327680
    assert p["hardware"]["sources"]["memory_gb"]["source"] == "facts"
    rows = p["roofline"]
    assert rows[0]["batch"] == 1 and rows[-1]["batch"] == 162
    ceiling = 0.70 * 989e12 / (2 * find_model("llama-3.1-70b").arch.active_params)
    assert all(r["output_tok_s_per_gpu"] <= ceiling for r in rows)


def test_plan_cli_interactivity_and_prefill(app):
    p = plan_json(
        app,
        "deepseek-r1",
        "-a",
        "mi355x",
        "-n",
        "8",
        "-p",
        "fp8",
        "--isl",
        "8192",
        "--osl",
        "1024",
        "-i",
        "25",
    )
    step = p["at_interactivity"]["step"]
    assert step["tok_s_user"] >= 25
    assert p["prefill_s"] > 0 and p["workload"]["context"] == 8192 + 512


def test_plan_cli_text_output_shows_sources(app):
    r = CliRunner().invoke(app, ["plan", "gpt-oss-120b", "-a", "b200", "-p", "mxfp4", "-c", "4096"])
    assert r.exit_code == 0, r.output
    assert "Roofline" in r.output and "source facts" in r.output and "fits" in r.output


def _make_run(path, out_per_gpu, inter, conc, gpus=8, isl=1000, osl=1000):
    path.mkdir(parents=True)
    total = out_per_gpu * (isl + osl) / osl
    (path / "summary.json").write_text(
        json.dumps(
            {
                "gpus": gpus,
                "counts": {"completed": 10},
                "tokens": {"input": 10 * isl, "output": 10 * osl},
                "throughput": {
                    "total_tokens_per_s_per_gpu": total,
                    "input_tokens_per_s_per_gpu": total - out_per_gpu,
                    "output_tokens_per_s_per_gpu": out_per_gpu,
                },
                "interactivity": {"tok_s_user": inter},
                "client": {"target_concurrency": conc},
            }
        )
    )


def test_plan_cli_efficiency_of_a_sweep(app, tmp_path):
    _make_run(tmp_path / "sw" / "c16", 400.0, 40.0, 16)
    _make_run(tmp_path / "sw" / "c64", 1000.0, 25.0, 64)
    p = plan_json(app, "llama-3.1-70b", "-a", "h200", "-p", "fp8", "--run", str(tmp_path / "sw"))
    assert p["hardware"]["gpus"] == 8  # from the runs
    a = find_model("llama-3.1-70b").arch
    hw = hardware_for(shipped_catalog()["h200"], 8, "fp8")
    for e, b, out in zip(p["efficiency"], (16, 64), (400.0, 1000.0), strict=True):
        lim = Roofline(a, hw, "fp8", Workload.of(None, 1000, 1000)).step(b)
        assert e["batch"] == b and e["context"] == 1500
        assert e["limit_tok_s_per_gpu"] == pytest.approx(lim.output_tok_s_per_gpu)
        assert e["throughput_efficiency"] == pytest.approx(out / lim.output_tok_s_per_gpu)
        assert 0 < e["throughput_efficiency"] <= 1


@pytest.mark.parametrize(
    "args, message",
    [
        (("llama-3.1-70b", "-a", "h100", "-n", "3", "-c", "100"), "does not divide"),
        (("llama-3.1-7b", "-a", "h100", "-c", "100"), "did you mean"),
        (("llama-3.1-70b", "-a", "h1000", "-c", "100"), "unknown accelerator"),
        (("llama-3.1-70b", "-a", "h100"), "give --context"),
        (("llama-3.1-70b", "-a", "h100", "-c", "-5"), "context must be >= 0"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "-p", "fp5"), "unknown precision"),
    ],
)
def test_plan_cli_bad_input(app, args, message):
    r = CliRunner().invoke(app, ["plan", *args])
    assert isinstance(r.exception, AccelbenchError), r.output
    assert message in str(r.exception)
