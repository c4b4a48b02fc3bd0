"""Sanity against the world: MLPerf reference results must not beat the roofline.

For each result in plan/data/mlperf.yaml the roofline of its system is taken at its
most generous: the lowest-precision weights the accelerator computes natively (FP4
where it has an FP4 rate, else FP8), an FP8 KV cache, and zero context (any real
context only adds KV reads and attention FLOPs). Server and interactive results are
held to the roofline at the tokens/s/user their p99 TPOT limit implies
(1000 / TPOT_ms); offline results to the largest batch. MLPerf counts generated
(output) tokens, so they are compared with the roofline's output tokens/s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib import resources

import yaml

from accelbench.cost.catalog import Accelerator, find_accelerator, load_catalog
from accelbench.plan.models import find_model
from accelbench.plan.roofline import Roofline, Workload, hardware_for, memory_fit


@dataclass(frozen=True)
class MlperfCheck:
    """One MLPerf result against its roofline."""

    round: str
    system: str
    model: str
    scenario: str
    measured_tok_s: float
    roofline_tok_s: float
    precision: str
    min_tok_s_user: float | None

    @property
    def efficiency(self) -> float:
        """measured / roofline."""
        return self.measured_tok_s / self.roofline_tok_s

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form (with the efficiency)."""
        return {**asdict(self), "efficiency": self.efficiency}


def mlperf_results() -> dict:
    """The shipped MLPerf reference data."""
    text = resources.files("accelbench.plan").joinpath("data/mlperf.yaml").read_text()
    return yaml.safe_load(text)


def most_generous_precision(acc: Accelerator) -> str:
    """'fp4' where the accelerator has an FP4 rate, else 'fp8'."""
    return "fp4" if acc.peak_tflops("fp4") else "fp8"


def check_mlperf() -> list[MlperfCheck]:
    """Every MLPerf reference point against its system's roofline."""
    data = mlperf_results()
    cat = load_catalog([])
    out: list[MlperfCheck] = []
    for r in data["results"]:
        acc = find_accelerator(r["accelerator"], cat)
        arch = find_model(r["model"]).arch
        prec = most_generous_precision(acc)
        hw = hardware_for(acc, int(r["gpus"]), prec)
        wl = Workload.of(0.0, None, None, "fp8")
        fit = memory_fit(arch, hw, prec, "fp8", 0.0, 1)
        roof = Roofline(arch, hw, prec, wl)
        for scenario in ("server", "interactive", "offline"):
            measured = r.get(scenario)
            if measured is None:
                continue
            floor = None
            if scenario == "offline":
                step = roof.max_throughput(fit.max_batch)
            else:
                floor = 1000.0 / float(data["tpot_ms"][r["model"]][scenario])
                step = roof.best_at_interactivity(floor, fit.max_batch)
            limit = step.output_tok_s_per_gpu * hw.n_gpus if step else 0.0
            out.append(
                MlperfCheck(
                    r["round"],
                    r["system"],
                    r["model"],
                    scenario,
                    float(measured),
                    limit,
                    prec,
                    floor,
                )
            )
    return out
