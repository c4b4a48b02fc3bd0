"""The AIConfigurator adapter (predict/whatif.py): point mapping, units, the error
arithmetic against hand-checked numbers (a fake estimator: the arithmetic only), and the
missing extra's one line. The real package is exercised only by the ``whatif``-marked test
at the end, on request (see there): CI does not install it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from accelbench.errors import AccelbenchError
from accelbench.predict import whatif as wi
from accelbench.predict.calibration import Point
from accelbench.predict.stepmodel import Layout

ROOT = Path(__file__).resolve().parent.parent


def _point(hw: str = "h200", engine: str = "sglang", precision: str = "fp8",
           layout: Layout = Layout(8), conc: int = 64, isl: int = 1024, osl: int = 1024,
           tput: float = 1000.0, ttft: float = 0.5, tpot: float = 0.02) -> Point:  # fmt: skip
    return Point(hw, engine, "not in source", "deepseek-r1", precision, layout, isl, osl, conc,
                 tput, ttft, tpot, "2025-11-02", "test", "")  # fmt: skip


# -- mapping -------------------------------------------------------------------------------
def test_query_for_tp_layout() -> None:
    q = wi.query_for(_point(conc=64, isl=8192, osl=1024))
    assert q == wi.Query(
        "deepseek-ai/DeepSeek-R1", "h200_sxm", "sglang", 8, 1, 8, 1, 8192, 1024, 64
    )


def test_query_for_dp_attention_and_ep() -> None:
    # TP8 EP8 with DP attention, 256 users: 8 attention ranks of 32, experts over 8 ranks
    q = wi.query_for(_point("b200", "trt-llm", "fp4", Layout(8, 8, True), conc=256))
    assert q == wi.Query(
        "nvidia/DeepSeek-V3.1-NVFP4", "b200_sxm", "trtllm", 1, 8, 1, 8, 1024, 1024, 32
    )
    # TP4 EP4 without DP attention: experts over 4 ranks, attention tensor-parallel
    q = wi.query_for(_point("b300", "sglang", "fp4", Layout(4, 4), conc=16))
    assert q == wi.Query(
        "nvidia/DeepSeek-V3.1-NVFP4", "b300_sxm", "sglang", 4, 1, 1, 4, 1024, 1024, 16
    )


@pytest.mark.parametrize(
    ("point", "why"),
    [
        (_point("mi355x"), "AMD accelerator (AIConfigurator models NVIDIA GPUs only)"),
        (_point("mi300x", "atom"), "AMD accelerator (AIConfigurator models NVIDIA GPUs only)"),
        (_point("h200", "vllm"), "engine vllm not in AIConfigurator"),
        (
            _point("h200", precision="bf16"),
            "deepseek-r1 bf16 not mapped to an AIConfigurator model",
        ),
        (_point("a100"), "accelerator a100 not mapped to an AIConfigurator system"),
        (
            _point(layout=Layout(8, 8, True), conc=4),
            "concurrency not a multiple of the attention-DP size",
        ),
        (_point(layout=Layout(8, 3)), "EP3 does not divide TP8"),
    ],
)
def test_query_for_refusals(point: Point, why: str) -> None:
    assert wi.query_for(point) == why


def test_estimate_units() -> None:
    """ms -> s; seq/s/GPU x (ISL + OSL) = input + output tokens/s per GPU (InferenceX's)."""
    q = wi.Query("m", "h200_sxm", "sglang", 8, 1, 8, 1, 8192, 1024, 16)
    e = wi.estimate_from_raw(q, {"seq/s/gpu": 0.125, "ttft": 409.0, "tpot": 13.25}, "db", False)
    assert e == wi.Estimate(1152.0, 0.409, 0.01325, "db", False)  # 0.125 x 9216 = 1152


# -- the error arithmetic --------------------------------------------------------------------
def test_compare_hand_checked() -> None:
    pts = [
        _point("h200", tput=1000.0, ttft=0.5, tpot=0.020),
        _point("h200", conc=32, tput=500.0, ttft=0.4, tpot=0.010),
        _point("b200", conc=16, tput=800.0, ttft=1.0, tpot=0.010),
        _point("mi355x"),
        _point("b200", conc=8, tput=100.0, ttft=1.0, tpot=0.010),
    ]
    answers: list[wi.Answer] = [
        wi.Estimate(1100.0, 0.25, 0.024, "h200_sxm/sglang/0.5.14"),  # +10 %, -50 %, +20 %
        wi.Estimate(400.0, 0.8, 0.010, "h200_sxm/sglang/0.5.14"),  # -20 %, +100 %, 0 %
        wi.Estimate(1200.0, 1.3, 0.009, "b200_sxm/sglang/0.5.14", kv_warning=True),  # +50, +30, -10
        "AIConfigurator: RuntimeError: OOM: the model does not fit",
    ]
    asked: list[list[wi.Query]] = []

    def fake(queries):  # type: ignore[no-untyped-def]
        asked.append(list(queries))
        return answers

    ab = np.array(
        [[900.0, 0.6, 0.020], [500.0, 0.2, 0.011], [800.0, 1.0, 0.012], [1, 1, 1], [1, 1, 1]]
    )
    w = wi.compare(pts, ab, fake, "0.12.0")
    assert len(asked) == 1 and len(asked[0]) == 4  # the AMD point never asked
    assert [r.point for r in w.results] == pts[:3]
    assert w.skipped_counts() == [
        ("AMD accelerator (AIConfigurator models NVIDIA GPUs only)", 1),
        ("AIConfigurator: RuntimeError: OOM: the model does not fit", 1),
    ]
    rows = {(r.scheme, r.accelerator, r.metric): r for r in w.rows}
    h = rows[(wi.AIC_SCHEME, "h200", "throughput")]  # APEs 0.10, 0.20
    assert h.n == 2 and h.median_ape == pytest.approx(0.15) and h.p90_ape == pytest.approx(0.19)
    t = rows[(wi.AIC_SCHEME, "h200", "ttft")]  # APEs 0.5, 1.0: p90 = 0.5 + 0.9 x 0.5
    assert t.median_ape == pytest.approx(0.75) and t.p90_ape == pytest.approx(0.95)
    assert w.mape[(wi.AIC_SCHEME, "h200", "tpot")] == pytest.approx(0.10)  # 0.2, 0.0
    a = rows[(wi.AIC_SCHEME, "all", "ttft")]  # 0.5, 1.0, 0.3
    assert a.n == 3 and a.median_ape == pytest.approx(0.5)
    assert w.mape[(wi.AIC_SCHEME, "all", "ttft")] == pytest.approx(0.6)
    b = rows[(wi.AB_SCHEME, "h200", "ttft")]  # accelbench on the same points: 0.2, 0.5
    assert b.n == 2 and b.median_ape == pytest.approx(0.35)
    assert rows[(wi.AB_SCHEME, "b200", "tpot")].median_ape == pytest.approx(0.2)
    md = wi.table_markdown(w)
    assert (
        "| h200 | throughput | 2 | 15.0% | 19.0% | 15.0% | 5.0% | 9.0% | 5.0% |" in md
    )  # ab: 0.1, 0
    assert "warned on 1 of them" in md and "- 1: AMD accelerator" in md
    doc = wi.whatif_json(w)
    assert doc["databases"] == ["b200_sxm/sglang/0.5.14", "h200_sxm/sglang/0.5.14"]
    assert len(doc["points"]) == 3 and json.dumps(doc)


def test_compare_refuses_bad_estimates_and_shapes() -> None:
    pts = [_point(), _point(conc=32)]
    bad: list[wi.Answer] = [
        wi.Estimate(float("nan"), 0.1, 0.01, "d"),
        wi.Estimate(1.0, -0.1, 0.01, "d"),
    ]
    w = wi.compare(pts, np.ones((2, 3)), lambda qs: bad)
    assert w.results == [] and w.rows == []
    assert w.skipped_counts() == [("AIConfigurator: a non-positive or non-finite estimate", 2)]
    with pytest.raises(AccelbenchError, match="answered 1 of 2"):
        wi.compare(pts, np.ones((2, 3)), lambda qs: bad[:1])
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        wi.compare(pts, np.ones((3, 3)), lambda qs: bad)


def test_calibration_nvidia_points_all_mapped_or_explained() -> None:
    """Every shipped point maps to a query or says why; each NVIDIA non-DP point maps."""
    from accelbench.predict.calibration import load_calibration

    for p in load_calibration():
        q = wi.query_for(p)
        if p.hardware in wi.SYSTEMS and p.engine in wi.BACKENDS and not p.layout.dp_attention:
            assert isinstance(q, wi.Query), (p.system, q)
            assert q.tp_size * q.attention_dp_size == q.moe_tp_size * q.moe_ep_size == p.layout.tp
        else:
            assert isinstance(q, wi.Query) or q


# -- the missing extra ---------------------------------------------------------------------
def test_missing_extra_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator", None)  # import fails as when absent
    monkeypatch.setitem(sys.modules, "aiconfigurator.cli", None)
    monkeypatch.setitem(sys.modules, "aiconfigurator.cli.api", None)
    with pytest.raises(AccelbenchError) as exc:
        wi.installed_version()
    assert str(exc.value) == wi.MISSING
    assert "pip install 'accelbench[whatif]'" in wi.MISSING and "\n" not in wi.MISSING
    with pytest.raises(AccelbenchError, match=r"accelbench\[whatif\]"):
        wi.aiconfigurator_estimates([])


def test_cli_whatif_missing_extra() -> None:
    """`accelbench predict --validate --whatif` without the extra: the one line, exit 2,
    before the validation's work. (Where the main venv has the extra, this cannot hold.)"""
    code = (
        "import sys; sys.modules['aiconfigurator'] = None\n"
        "from accelbench.cli.main import main; main()"
    )
    cmd = [sys.executable, "-c", code, "predict", "--validate", "--whatif"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert wi.MISSING in res.stderr and res.stderr.strip().count("\n") == 0
    assert "points" not in res.stdout  # the validation did not run
    res = subprocess.run(
        [*cmd[:3], "predict", "--whatif"], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 2 and "--whatif goes with --validate" in res.stderr


# -- the real package (opt-in: not in CI) -------------------------------------------------------
PEER_PYTHON = (
    Path.home() / ".cache/accelbench/peers" / f"aiconfigurator-{wi.AIC_VERSION}" / "bin/python"
)


@pytest.mark.whatif
def test_real_aiconfigurator_answers() -> None:
    """Two points through the real AIConfigurator (its own virtualenv, as the benchmark runs
    it): finite, in the calibration set's units, and a bigger batch gives more throughput
    per GPU and a longer TPOT. Runs with ACCELBENCH_TEST_WHATIF=1 (python:
    ACCELBENCH_WHATIF_PYTHON, default the peer venv); then a missing package FAILS."""
    if os.environ.get("ACCELBENCH_TEST_WHATIF") != "1":
        pytest.skip("AIConfigurator NOT TESTED: set ACCELBENCH_TEST_WHATIF=1 (accelbench[whatif])")
    python = os.environ.get("ACCELBENCH_WHATIF_PYTHON", str(PEER_PYTHON))
    small = wi.query_for(_point(conc=4))
    assert isinstance(small, wi.Query)
    queries = [small, replace(small, batch_size=64)]
    res = subprocess.run(
        [python, "-m", "accelbench.predict.whatif"],
        input=json.dumps([q.__dict__ for q in queries]),
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["version"] == wi.AIC_VERSION
    a, b = (wi.Estimate(**x) for x in doc["answers"])
    assert a.database.startswith("h200_sxm/sglang/")
    for e in (a, b):
        assert 0.01 < e.ttft_s < 60 and 0.001 < e.tpot_s < 1 and 1 < e.throughput_per_gpu < 1e5
    assert b.throughput_per_gpu > 2 * a.throughput_per_gpu and b.tpot_s > a.tpot_s
