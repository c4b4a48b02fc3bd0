"""Sanity against the world: MLPerf reference results against their two limits.

For each result in plan/data/mlperf.yaml the system's limits are taken at their most
generous: the lowest-precision weights the accelerator computes natively (FP4 where it
has an FP4 rate, else FP8), an FP8 KV cache, attention data-parallel (no replicated MLA
cache), and the benchmark's context: its mean output tokens per sample (decode context
OSL / 2, peak OSL) with no input tokens (the datasets' input lengths are not in the
sources; fewer tokens can only raise the limit). Server and interactive results are held
to the tokens/s/user their p99 TPOT limit implies (1000 / TPOT_ms) within the memory
that fits; offline results to the largest batch that fits. MLPerf counts generated
(output) tokens, so they are compared with output tokens/s.

Two limits: the physical roofline (peak FLOPS and bandwidth; every result must lie at or
below it) and the expected ceiling (derated by the catalog's GEMM/HBM fractions).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.hardware.catalog import Accelerator, find_accelerator, load_catalog
from accelbench.plan.models import find_model
from accelbench.plan.roofline import Roofline, Step, Workload, hardware_for, memory_fit
from accelbench.yamlfile import load_yaml

SCENARIOS = ("server", "interactive", "offline")


@dataclass(frozen=True)
class MlperfCheck:
    """One MLPerf result against its system's physical roofline and expected ceiling."""

    round: str
    system: str
    model: str
    scenario: str
    measured_tok_s: float
    physical_tok_s: float
    expected_tok_s: float
    precision: str
    min_tok_s_user: float | None
    context: float
    source: str

    @property
    def efficiency(self) -> float:
        """measured / physical roofline (at most 1)."""
        return self.measured_tok_s / self.physical_tok_s

    @property
    def of_expected(self) -> float:
        """measured / expected ceiling (an estimate: may exceed 1)."""
        return self.measured_tok_s / self.expected_tok_s

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form (with both ratios)."""
        return {**asdict(self), "efficiency": self.efficiency, "of_expected": self.of_expected}


@dataclass(frozen=True)
class MlperfBenchmark:
    """One MLPerf benchmark: mean output tokens per sample, p99 TPOT limit per
    latency-bound scenario."""

    output_tokens: float
    tpot_ms: dict[str, float]  # scenario -> limit (server, interactive)


@dataclass(frozen=True)
class MlperfResult:
    """One system's published result: output tokens/s per scenario (None: none)."""

    round: str
    system: str
    accelerator: str
    gpus: int
    model: str
    tok_s: dict[str, float | None]
    source: str


@dataclass(frozen=True)
class MlperfData:
    """plan/data/mlperf.yaml (schema accelbench.mlperf/2)."""

    benchmarks: dict[str, MlperfBenchmark]
    results: list[MlperfResult]
    sources: dict[str, str]  # key -> title


def _mlperf_data(doc: Any) -> MlperfData:
    def fail(where: str) -> AccelbenchError:
        return AccelbenchError(f"plan/data/mlperf.yaml: {where}")

    if not isinstance(doc, dict) or doc.get("schema") != "accelbench.mlperf/2":
        raise fail("not an accelbench.mlperf/2 document")
    try:
        sources = {str(k): str(v["title"]) for k, v in doc["sources"].items()}
        benchmarks = {
            str(name): MlperfBenchmark(
                float(b["output_tokens"]),
                {sc: float(b[sc]["tpot_ms"]) for sc in SCENARIOS if sc in b},
            )
            for name, b in doc["benchmarks"].items()
        }
        results = [
            MlperfResult(
                str(r["round"]),
                str(r["system"]),
                str(r["accelerator"]),
                int(r["gpus"]),
                str(r["model"]),
                {sc: None if r.get(sc) is None else float(r[sc]) for sc in SCENARIOS},
                str(r["source"]),
            )  # fmt: skip
            for r in doc["results"]
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise fail(f"malformed ({type(exc).__name__}: {exc})") from None
    for r in results:
        if r.model not in benchmarks:
            raise fail(f"result {r.system} {r.round}: unknown benchmark {r.model!r}")
        if r.source not in sources:
            raise fail(f"result {r.system} {r.round}: unknown source {r.source!r}")
    return MlperfData(benchmarks, results, sources)


@lru_cache(maxsize=1)
def mlperf_results() -> MlperfData:
    """The shipped MLPerf reference data."""
    text = resources.files("accelbench.plan").joinpath("data/mlperf.yaml").read_text()
    return _mlperf_data(load_yaml(text))


def most_generous_precision(acc: Accelerator) -> str:
    """'fp4' where the accelerator has an FP4 rate, else 'fp8'."""
    return "fp4" if acc.peak_tflops("fp4") else "fp8"


def _limit(roof: Roofline, scenario: str, floor: float | None, max_batch: int | None) -> float:
    step: Step | None
    if scenario == "offline" or floor is None:
        step = roof.max_throughput(max_batch)
    else:
        step = roof.best_at_interactivity(floor, max_batch)
    return step.output_tok_s_per_gpu * roof.hw.n_gpus if step else 0.0


def check_mlperf() -> list[MlperfCheck]:
    """Every MLPerf reference point against its system's two limits."""
    data = mlperf_results()
    cat = load_catalog([])
    out: list[MlperfCheck] = []
    for r in data.results:
        bench = data.benchmarks[r.model]
        acc = find_accelerator(r.accelerator, cat)
        arch = find_model(r.model).arch
        prec = most_generous_precision(acc)
        hw = hardware_for(acc, r.gpus, prec)
        wl = Workload.of(None, 0, max(1, round(bench.output_tokens)), "fp8")
        fit = memory_fit(arch, hw, prec, "fp8", wl.peak_context, 1, dp_attention=True)
        expected = Roofline(arch, hw, prec, wl, dp_attention=True)
        physical = expected.physical()
        for scenario in SCENARIOS:
            measured = r.tok_s[scenario]
            if measured is None:
                continue
            floor = None
            if scenario != "offline":
                floor = 1000.0 / bench.tpot_ms[scenario]
            out.append(
                MlperfCheck(
                    r.round,
                    r.system,
                    r.model,
                    scenario,
                    measured,
                    _limit(physical, scenario, floor, fit.max_batch),
                    _limit(expected, scenario, floor, fit.max_batch),
                    prec,
                    floor,
                    wl.context,
                    r.source,
                )
            )
    return out
