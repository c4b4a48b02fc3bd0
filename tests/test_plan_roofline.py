"""Memory fit, roofline, MLPerf sanity and `accelbench plan` (numbers worked by hand)."""

from __future__ import annotations

import json
import math

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from accelbench.cli.cost import register
from accelbench.errors import AccelbenchError
from accelbench.hardware.catalog import shipped_catalog
from accelbench.plan.mlperf import check_mlperf
from accelbench.plan.models import find_model
from accelbench.plan.planner import build_plan
from accelbench.plan.roofline import MAX_CONTEXT, Roofline, Workload, hardware_for, memory_fit

GIB = 2**30


def test_hardware_defaults_to_measured_fractions_and_range_ends():
    cat = shipped_catalog()
    h = hardware_for(cat["h100"], 8, "fp8")
    assert (h.compute_format, h.peak_flops, h.eff_flops, h.eff_bw) == ("fp8", 1979e12, 0.70, 0.89)
    b = hardware_for(cat["b200"], 8, "fp8")
    # range: upper end for bandwidth (8.0 of 7.7-8.0), lower end for capacity (180 of 180-192)
    assert (b.bandwidth, b.memory_bytes, b.eff_flops) == (8.0e12, 180 * GIB, 1.0)
    # the physical roofline runs at peak
    assert (h.physical().eff_flops, h.physical().eff_bw, h.physical().peak_flops) == (1, 1, 1979e12)
    # H100 has no FP4 rate: MXFP4 weights compute in FP8
    assert hardware_for(cat["h100"], 1, "mxfp4").compute_format == "fp8"
    assert hardware_for(cat["mi355x"], 1, "mxfp4").compute_format == "fp4"
    with pytest.raises(AccelbenchError, match=r"efficiency \(--eff-bw\) must be in \[0.001, 1\]"):
        hardware_for(cat["h100"], 1, "bf16", eff_bw=1.5)
    with pytest.raises(
        AccelbenchError, match=r"gpus \(--gpus\) must be an integer in \[1, 65,536\]"
    ):
        hardware_for(cat["h100"], 0, "bf16")


@settings(max_examples=60, deadline=None)
@given(
    which=st.sampled_from(["eff_flops", "eff_bw"]),
    eff=st.floats(min_value=0.0, max_value=1e-3, allow_nan=False, exclude_max=True),
)
def test_property_an_efficiency_below_its_floor_is_refused(which, eff):
    """--eff-flops / --eff-bw below 0.1 % of peak (the catalog's floor for the same
    shares) is refused naming the option; 5e-324 was read and the plan's JSON held
    Infinity. At the floor itself every figure is finite."""
    cat = shipped_catalog()
    opt = "--eff-flops" if which == "eff_flops" else "--eff-bw"
    with pytest.raises(AccelbenchError, match=rf"\({opt}\) must be in \[0.001, 1\]"):
        hardware_for(cat["h100"], 1, "bf16", **{which: eff})


def test_plan_cli_eff_floor_regression(tmp_path):
    """`plan ... --eff-flops 5e-324 --eff-bw 5e-324 --json` printed "step_s": Infinity
    27 times with exit 0; now exit 2, one line. At 0.001 the JSON is finite."""
    from cli_inprocess import run_cli

    base = ["plan", "llama-3.1-405b", "-a", "h100", "-n", "8", "-p", "fp8", "-c", "2048"]
    code, out, err, _ = run_cli([*base, "--eff-flops", "5e-324", "--eff-bw", "5e-324"], tmp_path)
    assert code == 2 and not out
    (line,) = err.strip().splitlines()
    assert "(--eff-flops) must be in [0.001, 1]" in line
    code, out, err, _ = run_cli(
        [*base, "--json", "--eff-flops", "1e-3", "--eff-bw", "1e-3"], tmp_path
    )
    assert code == 0, err
    json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the plan's JSON"))


def test_fit_llama_70b_by_hand():
    a = find_model("llama-3.1-70b").arch
    cat = shipped_catalog()
    one = hardware_for(cat["h100"], 1, "bf16")
    f1 = memory_fit(a, one, "bf16", "bf16", 8192)
    assert not f1.fits and not f1.weights_fit  # 141 GB of weights in 72 GiB usable
    eight = hardware_for(cat["h100"], 8, "bf16")
    f8 = memory_fit(a, eight, "bf16", "bf16", 8192, concurrency=32)
    usable = 8 * 80 * GIB * 0.9  # vendor "80 GB" is 80 GiB
    kv_seq = 8192 * 327680  # 320 KiB per token, 8 KV heads on 8 GPUs: no replication
    # (618.48e9 - 141.107e9 weights) // 2.684e9 per sequence = 177 (162 if GB were 1e9 B)
    assert f8.usable_bytes == pytest.approx(usable)
    assert f8.kv_bytes_per_sequence == kv_seq
    assert f8.max_batch == int((usable - a.weight_bytes("bf16")) // kv_seq)
    assert f8.fits and f8.max_batch == 177


def test_405b_fp8_on_8_h200_largest_batch_by_hand():
    # issue example: 8 x H200 (141 GiB each), FP8 weights, 4096-token context, BF16 KV
    p = build_plan("llama-3.1-405b", "h200", gpus=8, precision="fp8", context=4096)
    a = find_model("llama-3.1-405b").arch
    usable = 8 * 141 * GIB * 0.9
    kv_seq = 4096 * 516096  # 504 KiB per token
    assert p.fit.max_batch == int((usable - a.weight_bytes("fp8")) // kv_seq) == 321
    # reading GB as 1e9 bytes would give 286
    assert int((8 * 141e9 * 0.9 - a.weight_bytes("fp8")) // kv_seq) == 286


def test_memory_fit_uses_the_peak_context():
    # ISL 4096 + OSL 4096: decode runs at 6144 on average, but every sequence must fit
    # at 8192 before it finishes
    p = build_plan("llama-3.1-70b", "h100", gpus=8, isl=4096, osl=4096)
    assert (p.workload.context, p.workload.peak_context) == (6144, 8192)
    assert p.fit.kv_bytes_per_sequence == 8192 * 327680
    assert p.fit.max_batch == 177  # as at --context 8192


def test_context_beyond_the_model_maximum_warns():
    p = build_plan("llama-2-70b", "h100", gpus=8, context=16384)
    assert any("exceeds" in w and "4,096" in w for w in p.warnings)
    assert not build_plan("llama-2-70b", "h100", gpus=8, context=4096).warnings


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
    # the physical roofline is above the expected ceiling everywhere
    phys = r.physical().curve(fit.max_batch)
    assert all(
        p.output_tok_s_per_gpu >= e.output_tok_s_per_gpu for p, e in zip(phys, curve, strict=True)
    )
    # total = output x (ISL + OSL) / OSL
    assert curve[-1].total_tok_s_per_gpu == pytest.approx(2 * curve[-1].output_tok_s_per_gpu)
    best = r.best_at_interactivity(40, fit.max_batch)
    assert best.tok_s_user >= 40 and r.step(best.batch + 1).tok_s_user < 40
    assert r.best_at_interactivity(1e6, fit.max_batch) is None
    # prefill of 8192 tokens is compute-bound: FLOPs / (N * eff * peak)
    assert r.prefill_s(8192) == pytest.approx(
        a.prefill_flops(8192) / (8 * hw.eff_flops * hw.peak_flops)
    )


def test_mlperf_results_are_at_or_below_the_physical_roofline():
    checks = check_mlperf()
    # 13 system x model results (FACTS.md, MLPerf v5.1 B200 and MI355X), 32 scenario results
    assert len(checks) == 32
    for c in checks:
        assert 0 < c.efficiency <= 1.0, c
        assert c.physical_tok_s >= c.expected_tok_s, c
        assert c.source
    by = {(c.round, c.system, c.model, c.scenario): c for c in checks}
    # hand check: 8 x H200, FP8, Llama-2-70B offline: compute-bound at the largest batch
    h200 = by[("v5.0", "8 x H200", "llama-2-70b", "offline")]
    a = find_model("llama-2-70b").arch
    assert h200.context == pytest.approx(265 / 2, abs=0.5)  # mean OSL 265, no input
    flops = 2 * a.active_params + a.attention_flops_per_token(h200.context)
    assert h200.physical_tok_s == pytest.approx(8 * 1979e12 / flops, rel=0.01)
    assert h200.expected_tok_s == pytest.approx(0.69 * h200.physical_tok_s, rel=0.01)
    assert h200.efficiency == pytest.approx(0.303, abs=0.005)
    # MI325X is not "1.3x H200": same MLPerf workload, ~0.93-0.97x measured
    mi = by[("v5.0", "8 x MI325X", "llama-2-70b", "offline")]
    assert mi.measured_tok_s / h200.measured_tok_s == pytest.approx(0.975, abs=0.01)
    # the MLPerf v5.1 points are there, each with its own source
    b200 = by[("v5.1", "8 x B200", "deepseek-r1", "server")]
    assert b200.measured_tok_s == 18592.2 and b200.source == "mlperf-v5.1-nvidia-b200"
    assert by[("v5.1", "8 x B200", "llama-3.1-405b", "interactive")].min_tok_s_user == 12.5


def test_latency_bound_limit_falls_below_offline_with_context():
    # with a real context (ISL 1024 + OSL 1024) the KV cache caps the batch at 1,520
    # sequences on 8 x H200 (FP8). 5 tok/s/user (MLPerf server, TPOT 200 ms) is met at that
    # batch: server = offline. Up to ~147 tok/s/user the physical limit stays on its compute
    # plateau (per-token FLOPs fix tok/s/GPU whatever the batch); 200 tok/s/user (5 ms per
    # step) needs a batch so small that reading the weights dominates, and the limit drops.
    kw = dict(gpus=8, precision="fp8", isl=1024, osl=1024)
    p = build_plan("llama-2-70b", "h200", **kw)
    offline = p.rows[-1].physical
    assert offline.batch == p.fit.max_batch == 1520
    server = build_plan("llama-2-70b", "h200", interactivity=5, **kw).at_interactivity
    fast = build_plan("llama-2-70b", "h200", interactivity=200, **kw).at_interactivity
    assert server is not None and fast is not None and server.physical and fast.physical
    assert server.physical.batch == offline.batch
    assert fast.physical.tok_s_user >= 200 and fast.physical.bound == "memory"
    assert fast.physical.output_tok_s_per_gpu < 0.9 * offline.output_tok_s_per_gpu


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
    assert p["fit"]["fits"] and p["fit"]["max_batch"] == 177
    assert p["model"]["kv_bytes_per_token"] == 327680
    assert p["hardware"]["sources"]["memory_gib"]["source"] == "facts"
    assert p["hardware"]["memory_bytes_per_gpu"] == 80 * GIB
    rows = p["roofline"]
    assert rows[0]["batch"] == 1 and rows[-1]["batch"] == 177
    peak = 989e12 / (2 * find_model("llama-3.1-70b").arch.active_params)
    assert all(r["expected"]["output_tok_s_per_gpu"] <= 0.70 * peak for r in rows)
    assert all(r["physical"]["output_tok_s_per_gpu"] <= peak for r in rows)


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
    at = p["at_interactivity"]
    assert at["physical"]["tok_s_user"] >= 25 and at["expected"]["tok_s_user"] >= 25
    assert 0 < p["prefill_s"]["physical"] <= p["prefill_s"]["expected"]  # MI355X: none measured
    assert p["workload"]["context"] == 8192 + 512 and p["workload"]["peak_context"] == 8192 + 1024


def test_plan_cli_text_output_shows_sources(app):
    r = CliRunner().invoke(app, ["plan", "gpt-oss-120b", "-a", "b200", "-p", "mxfp4", "-c", "4096"])
    assert r.exit_code == 0, r.output
    assert "Physical roofline" in r.output and "expected ceiling" in r.output
    assert "source facts" in r.output and "fits" in r.output


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
        roof = Roofline(a, hw, "fp8", Workload.of(None, 1000, 1000))
        exp, phys = roof.step(b), roof.physical().step(b)
        assert e["batch"] == b and e["context"] == 1500
        assert e["expected_tok_s_per_gpu"] == pytest.approx(exp.output_tok_s_per_gpu)
        assert e["physical_tok_s_per_gpu"] == pytest.approx(phys.output_tok_s_per_gpu)
        assert e["of_physical"] == pytest.approx(out / phys.output_tok_s_per_gpu)
        assert 0 < e["of_physical"] <= e["of_expected"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("llama-3.1-70b", "-a", "h100", "-n", "3", "-c", "100"), "does not divide"),
        (("llama-3.1-7b", "-a", "h100", "-c", "100"), "did you mean"),
        (("llama-3.1-70b", "-a", "h1000", "-c", "100"), "unknown accelerator"),
        (("llama-3.1-70b", "-a", "h100"), "give --context"),
        (
            ("llama-3.1-70b", "-a", "h100", "-c", "-5"),
            "context (--context) must be an integer in [1,",
        ),
        (
            ("llama-3.1-70b", "-a", "h100", "-c", "0"),
            "context (--context) must be an integer in [1,",
        ),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "-p", "fp5"), "--precision must be one of"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "--points", "1"), "points (--points) must"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "--points", "0"), "points (--points) must"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "-n", "0"), "gpus (--gpus) must be"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "-n", "100000000"), "gpus (--gpus) must be"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "--concurrency", "0"), "(--concurrency)"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "--reserve", "nan"), "(--reserve)"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "--eff-bw", "nan"), "(--eff-bw)"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "--overhead-ms", "inf"), "(--overhead-ms)"),
        (("llama-3.1-70b", "-a", "h100", "-c", "10", "-i", "nan"), "(--interactivity)"),
        (("llama-3.1-70b", "-a", "h100", "--isl", "-1"), "isl (--isl) must be"),
        (("llama-3.1-70b", "-a", "h100", "--isl", "10", "--osl", "0"), "osl (--osl) must be"),
    ],
)
def test_plan_cli_bad_input(app, args, message):
    r = CliRunner().invoke(app, ["plan", *args])
    assert isinstance(r.exception, AccelbenchError), r.output
    assert message in str(r.exception)


@pytest.mark.parametrize("value", ["nan", "inf", "0.4", "1e-300", "1.5"])
def test_plan_cli_context_is_whole_tokens(app, value):
    # audit_opts 1c: --context 1e-300 was an IndexError in human_bytes (exit 70), and
    # --context 0.4 printed "peak context 0 tokens"
    r = CliRunner().invoke(app, ["plan", "llama-3.1-8b", "-a", "h100", "-c", value])
    assert r.exit_code == 2 and "--context" in r.output, r.output


@settings(max_examples=30, deadline=None)
@given(st.one_of(st.integers(-3, 3), st.integers(MAX_CONTEXT - 2, MAX_CONTEXT + 2), st.floats()))
def test_workload_context_boundary(context):
    """Whole tokens in [1, MAX_CONTEXT] are a workload; anything else is one named error."""
    whole = isinstance(context, int) or (math.isfinite(context) and context.is_integer())
    if whole and 1 <= context <= MAX_CONTEXT:
        assert Workload.of(context, None, None).peak_context == context
    else:
        with pytest.raises(AccelbenchError, match=r"context \(--context\) must be an integer"):
            Workload.of(context, None, None)


def test_plan_cli_points(app):
    p = plan_json(app, "llama-3.1-8b", "-a", "h100", "-c", "1024", "--points", "2")
    assert len(p["roofline"]) == 2 and p["roofline"][0]["batch"] == 1
    assert p["roofline"][-1]["batch"] == p["fit"]["max_batch"]
    p = plan_json(app, "llama-3.1-8b", "-a", "h100", "-c", "1024", "--points", "3")
    assert len(p["roofline"]) == 3


def test_plan_cli_warns_about_the_model_context(app):
    r = CliRunner().invoke(app, ["plan", "llama-2-70b", "-a", "h100", "-n", "8", "-c", "16384"])
    assert r.exit_code == 0 and "warning" in r.output and "4,096" in r.output


def test_plan_cli_binary_config_is_one_line(app, tmp_path):
    p = tmp_path / "model.json"
    p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    r = CliRunner().invoke(app, ["plan", str(p), "-a", "h100", "-c", "10"])
    assert isinstance(r.exception, AccelbenchError) and "not UTF-8" in str(r.exception)


def test_plan_of_a_killed_run_without_summary(app, tmp_path):
    from synthetic_runs import make_run

    d = make_run(
        tmp_path / "k",
        60,
        concurrency=4,
        isl=500,
        osl=100,
        gpus=8,
        files=("run.json", "requests.parquet"),
    )
    p = plan_json(app, "llama-3.1-70b", "-a", "h200", "-p", "fp8", "--run", str(d))
    (e,) = p["efficiency"]
    assert e["batch"] == 4 and e["context"] == 550  # ISL 500 + OSL 100 / 2
    assert 0 < e["of_physical"] <= 1


# --------------------------------------------------------------------------- options refused

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tests.cli_inprocess import run_cli  # noqa: E402

# a value for each `plan fit` option besides --accelerator ({dir}: the test's directory)
_FIT_OPTS: dict[str, str | None] = {
    "--gpus": "2", "--precision": "fp8", "--kv-precision": "fp8", "--context": "2048",
    "--isl": "1000", "--osl": "100", "--concurrency": "2", "--reserve": "0.1",
    "--eff-flops": "0.5", "--eff-bw": "0.7", "--overhead-ms": "1", "--dp-attention": None,
    "--interactivity": "20", "--run": "{dir}/run", "--batch": "8", "--points": "3",
    "--catalog": "{dir}/catalog.yaml", "--json": None,
}  # fmt: skip


def _fit_uses(opts: set[str]) -> set[str]:
    used = {"--accelerator", *_FIT_OPTS} - {"--batch", "--osl"}
    return (
        used
        | ({"--batch"} if "--run" in opts else set())
        | ({"--osl"} if "--isl" in opts else set())
    )


def test_every_plan_fit_option_belongs_to_a_mode():
    from accelbench.cli.cost import _FIT_MODES, plan_command

    a = typer.Typer(add_completion=False)
    a.command()(plan_command)
    opts = {max(p.opts, key=len) for p in typer.main.get_command(a).params if p.opts}
    opts.discard("model")
    assert opts == {"--accelerator", *_FIT_OPTS} == set().union(*map(set, _FIT_MODES.values()))


@pytest.mark.parametrize(
    "args, name",
    [
        (["--context", "4096", "--batch", "8"], "--batch"),
        (["--isl", "1000", "--osl", "100", "--batch", "8"], "--batch"),
        (["--context", "4096", "--osl", "256"], "--osl"),
        (["--osl", "256"], "--osl"),
        (["--run", "{dir}/run", "--osl", "256"], "--osl"),
    ],
)
def test_plan_fit_option_it_would_ignore_is_refused(tmp_path, args, name):
    """--batch without --run and --osl without --isl were ignored (--osl even written
    into the JSON): one line, exit 2, naming it."""
    _make_run(tmp_path / "run", 400.0, 40.0, 16)
    args = [a.format(dir=tmp_path) for a in args]
    code, out, err, _ = run_cli(["plan", "llama-3.1-8b", "-a", "h100", *args], tmp_path)
    assert code == 2 and out == "", (args, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    assert name in err and "does not apply" in err, err


def test_plan_fit_batch_with_a_run_and_osl_with_isl_still_run(app, tmp_path):
    _make_run(tmp_path / "run", 400.0, 40.0, 16)
    p = plan_json(
        app, "llama-3.1-8b", "-a", "h100", "--isl", "1000", "--osl", "256",
        "--run", str(tmp_path / "run"), "--batch", "8",
    )  # fmt: skip
    assert p["workload"]["osl"] == 256


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(opts=st.sets(st.sampled_from(sorted(set(_FIT_OPTS) - {"--catalog"})), max_size=5))
def test_property_a_plan_fit_option_it_ignores_is_refused(tmp_path, opts):
    """Whatever the options, --batch without --run or --osl without --isl is refused in
    one line, exit 2, naming it, before any output; other lines are not refused."""
    d = tmp_path / "w"
    if not d.exists():
        _make_run(d / "run", 400.0, 40.0, 16)
    unused = opts - _fit_uses(opts)
    args = ["plan", "llama-3.1-8b", "-a", "h100"]
    if not opts & {"--context", "--isl", "--run"}:
        args += ["--context", "1024"]
    for opt in sorted(opts):
        v = _FIT_OPTS[opt]
        args += [opt] if v is None else [opt, v.format(dir=d)]
    code, out, err, _ = run_cli(args, tmp_path)
    if not unused:
        assert "not apply" not in err, (args, err)
        return
    assert code == 2 and out == "", (args, code, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    assert ("--batch" if "--batch" in unused else "--osl") in err, (args, err)


@settings(max_examples=40, deadline=None)
@given(
    isl=st.one_of(st.integers(-3, 3), st.integers(MAX_CONTEXT - 2, MAX_CONTEXT + 2)),
    osl=st.one_of(st.none(), st.integers(1, 4096)),
)
def test_property_plan_isl_osl_hold_a_token(isl, osl):
    """plan fit --isl [--osl]: ISL 0 to MAX_CONTEXT (0: decode only, documented) with a
    context of at least one token, else one named error. --isl 0 alone was taken: "peak
    context 0 tokens", "KV 0 B/sequence", "largest batch unlimited by KV", a table up to
    16,777,216 sequences, exit 0."""
    from accelbench.plan.planner import build_plan

    ok = 0 <= isl <= MAX_CONTEXT and isl + (osl or 0) >= 1
    try:
        plan = build_plan("llama-3.1-8b", "h200", isl=isl, osl=osl, points=2)
    except AccelbenchError as exc:
        assert not ok, str(exc)
        assert str(exc).startswith("isl (--isl)"), str(exc)
        return
    assert ok and plan.workload.peak_context >= 1


def test_plan_cli_isl_0_alone_is_refused(app):
    r = CliRunner().invoke(app, ["plan", "llama-3.1-8b", "-a", "h100", "--isl", "0"])
    assert isinstance(r.exception, AccelbenchError), r.output
    assert "isl (--isl) 0 without --osl" in str(r.exception)


@settings(max_examples=15, deadline=None)
@given(
    recorded=st.sampled_from(["qwen2.5-7b", "llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct",
                              "llama-3.3-70b", "my-finetune"]),
    planned=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b"]),
)  # fmt: skip
def test_property_a_run_of_another_catalog_model_is_refused(recorded, planned):
    """`plan llama-3.1-70b --run` over a run of qwen2.5-7b printed its efficiency (272 % of
    the physical roofline) without a word. A run whose recorded model is a catalog model
    of another architecture is refused naming its run.json; a name the catalog does not
    know is what MODEL says; the same architecture under another name is the same."""
    import tempfile
    from pathlib import Path

    from synthetic_runs import make_run

    with tempfile.TemporaryDirectory() as tmp:
        d = make_run(Path(tmp) / "r", 20, concurrency=2, model=recorded)
        try:
            other = not find_model(recorded).arch.same_architecture(find_model(planned).arch)
        except AccelbenchError:
            other = False
        if other:
            with pytest.raises(AccelbenchError, match=rf"run.json: a run of {recorded}, not of"):
                build_plan(planned, "h100", run=d)
        else:
            assert build_plan(planned, "h100", run=d).runs


def test_plan_says_a_run_above_the_physical_roofline_and_a_run_left_out(tmp_path):
    """A run faster than the physical roofline (1,581 % of it: a run of a smaller model
    planned as Llama-3.1-405B on one H100) was printed without a word; a sweep's run with
    no throughput (every request failed) was left out of the efficiency table without a
    word. Both are now warnings."""
    from synthetic_runs import make_sweep

    sw = make_sweep(tmp_path / "sw", [dict(concurrency=1), dict(concurrency=2, fail_frac=1.0)])
    big = build_plan("llama-3.1-405b", "h100", run=sw)
    (e,) = big.runs
    assert e.measured_tok_s_per_gpu > e.physical_tok_s_per_gpu
    above = [w for w in big.warnings if "above the physical roofline" in w]
    assert len(above) == 1 and "c0001" in above[0]
    assert any(w.startswith("c=2: no throughput") for w in big.warnings), big.warnings
    small = build_plan("llama-3.1-8b", "h100", run=sw)
    assert not [w for w in small.warnings if "above the physical" in w]


@settings(max_examples=12, deadline=None)
@given(
    model=st.sampled_from(["llama-3.1-405b", "llama-3.1-8b", "llama-3.1-70b"]),
    target=st.sampled_from([0.5, 1.0, 50.0, 1e5]),
)
def test_property_the_interactivity_line_says_why_no_batch_qualifies(model, target):
    """`plan llama-3.1-405b -a h100 -c 100 -i 1` said 'even batch 1 is slower than the
    target' while batch 1 runs at 4 tok/s/user: nothing fits in one H100. The line now
    says 'no batch fits in memory' iff none fits, and 'even batch 1 is slower' iff one
    fits and batch 1 is below the target."""
    import tempfile
    from pathlib import Path

    from cli_inprocess import run_cli

    p = build_plan(model, "h100", context=100, interactivity=target)
    with tempfile.TemporaryDirectory() as d:
        code, out, err, _ = run_cli(
            ["plan", model, "-a", "h100", "-c", "100", "-i", str(target)], Path(d)
        )
    assert code == 0, err
    text = " ".join(out.split())
    none_fit = "physical roofline): no batch fits in memory" in text
    too_slow = "physical roofline): even batch 1 is slower than the target" in text
    fits = p.fit.max_batch is None or p.fit.max_batch >= 1
    assert none_fit == (not fits)
    assert too_slow == (fits and p.at_interactivity.physical is None)


# --------------------------------------------------------------------------- --dp-attention


def test_dp_attention_on_one_gpu_is_refused_everywhere(tmp_path):
    """With one GPU attention is not split: --dp-attention was taken and changed nothing
    (plan fit, plan knee, predict). One line naming it and the GPU count, exit 2."""
    mix = ["--turns", "3", "--user-tokens", "50", "--osl", "50"]
    for args, gpus in (
        (["plan", "fit", "llama-3.1-8b", "-a", "h100", "--context", "4096"], "--gpus"),
        (["plan", "knee", "-m", "llama-3.1-8b", "-a", "h100", *mix], "--tp"),
        (["predict", "--model", "llama-3.1-8b", "--accelerator", "h100", "--tp", "1",
          "--isl", "128", "--osl", "128", "--concurrency", "4"], "--tp"),
    ):  # fmt: skip
        code, out, err, _ = run_cli([*args, "--dp-attention"], tmp_path)
        assert code == 2 and out == "", (args, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "--dp-attention needs more than one GPU" in err and gpus in err, err


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "deepseek-v3"]),
    tp=st.sampled_from([2, 4, 8, 16, 32, 64]),
)
def test_property_dp_attention_is_said_exactly_where_it_changes_nothing(model, tp):
    """plan fit with --dp-attention on more than one GPU: a warning naming the option
    exactly where the KV cache per sequence is the same with and without it (GQA with
    no more GPUs than KV heads); none where it changes the fit (MLA, or more GPUs than
    KV heads)."""
    a = find_model(model).arch
    try:
        a.check_tensor_parallel(tp)
    except AccelbenchError:
        return  # not a layout of this model
    plain = build_plan(model, "h200", gpus=tp, context=4096)
    dp = build_plan(model, "h200", gpus=tp, context=4096, dp_attention=True)
    same = dp.fit.kv_bytes_per_sequence == plain.fit.kv_bytes_per_sequence
    said = [w for w in dp.warnings if "--dp-attention changes nothing" in w]
    assert bool(said) == same, (dp.warnings, same)
    assert not [w for w in plain.warnings if "dp-attention" in w]
