"""Everything `accelbench plan` shows, as a typed result: the model, the hardware, the
memory fit at the peak context, the two limits (physical roofline and expected ceiling)
over the batch sizes that fit, and, for runs, measured against both limits.

The physical roofline runs at peak FLOPS and bandwidth; nothing can beat it. The expected
ceiling derates both by the catalog's GEMM and HBM fractions (or ``eff_flops``/``eff_bw``):
an engineering estimate of what good software reaches, not a bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from accelbench.cost.costing import load_points, run_mean_lengths
from accelbench.errors import AccelbenchError, UsageError
from accelbench.hardware.catalog import Accelerator, find_accelerator, load_catalog
from accelbench.plan.architecture import DP_ATTENTION_ONE_GPU, ModelArch
from accelbench.plan.models import find_model, resolve_model
from accelbench.plan.roofline import (
    BATCH_CAP,
    DEFAULT_RESERVE,
    Fit,
    Hardware,
    Roofline,
    Step,
    Workload,
    check_int,
    check_number,
    efficiency,
    hardware_for,
    memory_fit,
)
from accelbench.store.runs import RunInfo

MAX_OVERHEAD_MS = 1e6


# -- `plan --json`: the plain-JSON form of a Plan ------------------------------------------
class PlanModelJSON(TypedDict):
    name: str
    attention: str
    total_params: int
    active_params: int
    max_context_tokens: int | None
    kv_bytes_per_token: float
    kv_precision: str
    weight_bytes: float
    precision: str
    source: dict[str, str]


class FigureJSON(TypedDict):
    """A catalog figure the limits rest on, with where it comes from."""

    value: str
    source: str
    date: str
    status: str
    title: str


class PlanHardwareJSON(TypedDict):
    accelerator: str
    name: str
    gpus: int
    compute_format: str
    peak_tflops_per_gpu: float
    bandwidth_tbs_per_gpu: float
    memory_bytes_per_gpu: float
    memory_gib_per_gpu: float
    expected_eff_flops: float
    expected_eff_bw: float
    notes: list[str]
    sources: dict[str, FigureJSON]


class PlanWorkloadJSON(TypedDict):
    context: float
    peak_context: float
    isl: int | None
    osl: int | None
    concurrency: int
    overhead_ms: float


class LimitRowJSON(TypedDict):
    batch: int
    physical: dict[str, object]  # Step.as_dict()
    expected: dict[str, object]


class PrefillJSON(TypedDict):
    physical: float | None
    expected: float | None


class AtInteractivityJSON(TypedDict):
    target_tok_s_user: float
    physical: dict[str, object] | None
    expected: dict[str, object] | None


class RunEfficiencyJSON(TypedDict):
    run: str
    batch: int
    context: float
    basis: str
    measured_tok_s_per_gpu: float
    physical_tok_s_per_gpu: float
    expected_tok_s_per_gpu: float
    measured_tok_s_user: float | None
    physical_tok_s_user: float
    expected_tok_s_user: float
    of_physical: float
    of_expected: float


class PlanJSON(TypedDict):
    model: PlanModelJSON
    hardware: PlanHardwareJSON
    workload: PlanWorkloadJSON
    fit: dict[str, object]  # Fit.as_dict()
    roofline: list[LimitRowJSON]
    prefill_s: PrefillJSON
    at_interactivity: AtInteractivityJSON | None
    efficiency: list[RunEfficiencyJSON]
    warnings: list[str]


@dataclass(frozen=True)
class LimitRow:
    """One batch size under both limits."""

    batch: int
    physical: Step
    expected: Step


@dataclass(frozen=True)
class AtInteractivity:
    """The best throughput at or above a tokens/s/user target, under both limits."""

    target_tok_s_user: float
    physical: Step | None
    expected: Step | None


@dataclass(frozen=True)
class RunEfficiency:
    """One run measured against both limits at its batch and context."""

    run: str
    batch: int
    context: float
    basis: str  # "output" or "total" tokens/s per GPU
    measured_tok_s_per_gpu: float
    physical_tok_s_per_gpu: float
    expected_tok_s_per_gpu: float
    measured_tok_s_user: float | None
    physical_tok_s_user: float
    expected_tok_s_user: float

    @property
    def of_physical(self) -> float:
        """measured / physical roofline (at most 1 for any real run)."""
        return efficiency(self.measured_tok_s_per_gpu, self.physical_tok_s_per_gpu)

    @property
    def of_expected(self) -> float:
        """measured / expected ceiling (may exceed 1: the ceiling is an estimate)."""
        return efficiency(self.measured_tok_s_per_gpu, self.expected_tok_s_per_gpu)


@dataclass(frozen=True)
class Plan:
    """What `accelbench plan` computes."""

    arch: ModelArch
    accelerator: Accelerator
    hardware: Hardware
    precision: str
    kv_precision: str
    workload: Workload
    concurrency: int
    overhead_ms: float
    fit: Fit
    rows: list[LimitRow]
    prefill_physical_s: float | None
    prefill_expected_s: float | None
    at_interactivity: AtInteractivity | None = None
    runs: list[RunEfficiency] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> PlanJSON:
        """Plain-JSON form (units in the key names)."""
        a, acc, hw = self.arch, self.accelerator, self.hardware
        ai = self.at_interactivity
        return PlanJSON(
            model=PlanModelJSON(
                name=a.name,
                attention=a.attention_kind,
                total_params=a.total_params,
                active_params=a.active_params,
                max_context_tokens=a.max_context,
                kv_bytes_per_token=a.kv_bytes_per_token(self.kv_precision),
                kv_precision=self.kv_precision,
                weight_bytes=a.weight_bytes(self.precision),
                precision=self.precision,
                source=a.source,
            ),
            hardware=PlanHardwareJSON(
                accelerator=acc.id,
                name=acc.name,
                gpus=hw.n_gpus,
                compute_format=hw.compute_format,
                peak_tflops_per_gpu=hw.peak_flops / 1e12,
                bandwidth_tbs_per_gpu=hw.bandwidth / 1e12,
                memory_bytes_per_gpu=hw.memory_bytes,
                memory_gib_per_gpu=hw.memory_bytes / 2**30,
                expected_eff_flops=hw.eff_flops,
                expected_eff_bw=hw.eff_bw,
                notes=list(hw.notes),
                sources={
                    k: FigureJSON(
                        value=acc.figure(k).text(),
                        source=acc.figure(k).source,
                        date=acc.figure(k).date,
                        status=acc.figure(k).status,
                        title=acc.source_title(k),
                    )
                    for k in ("memory_gib", "memory_bw_tbs", f"{hw.compute_format}_tflops")
                },
            ),
            workload=PlanWorkloadJSON(
                context=self.workload.context,
                peak_context=self.workload.peak_context,
                isl=self.workload.isl,
                osl=self.workload.osl,
                concurrency=self.concurrency,
                overhead_ms=self.overhead_ms,
            ),
            fit=self.fit.as_dict(),
            roofline=[
                LimitRowJSON(
                    batch=r.batch, physical=r.physical.as_dict(), expected=r.expected.as_dict()
                )  # fmt: skip
                for r in self.rows
            ],
            prefill_s=PrefillJSON(
                physical=self.prefill_physical_s, expected=self.prefill_expected_s
            ),
            at_interactivity=None
            if ai is None
            else AtInteractivityJSON(
                target_tok_s_user=ai.target_tok_s_user,
                physical=_step(ai.physical),
                expected=_step(ai.expected),
            ),
            efficiency=[
                RunEfficiencyJSON(
                    run=e.run,
                    batch=e.batch,
                    context=e.context,
                    basis=e.basis,
                    measured_tok_s_per_gpu=e.measured_tok_s_per_gpu,
                    physical_tok_s_per_gpu=e.physical_tok_s_per_gpu,
                    expected_tok_s_per_gpu=e.expected_tok_s_per_gpu,
                    measured_tok_s_user=e.measured_tok_s_user,
                    physical_tok_s_user=e.physical_tok_s_user,
                    expected_tok_s_user=e.expected_tok_s_user,
                    of_physical=e.of_physical,
                    of_expected=e.of_expected,
                )  # fmt: skip
                for e in self.runs
            ],
            warnings=list(self.warnings),
        )


def _step(s: Step | None) -> dict[str, object] | None:
    return s.as_dict() if s is not None else None


def _run_batch(r: RunInfo, batch: int | None) -> int:
    if batch is not None:
        return batch
    if r.concurrency is None:
        raise AccelbenchError(
            f"{r.path}: the run has no target concurrency (client.target_concurrency); give --batch"
        )
    return check_int(f"{r.path}: target concurrency", r.concurrency, 1, BATCH_CAP)


def build_plan(
    model: str,
    accelerator: str,
    gpus: int | None = None,
    precision: str = "bf16",
    kv_precision: str = "bf16",
    context: int | None = None,
    isl: int | None = None,
    osl: int | None = None,
    concurrency: int = 1,
    reserve: float = DEFAULT_RESERVE,
    eff_flops: float | None = None,
    eff_bw: float | None = None,
    overhead_ms: float = 0.0,
    dp_attention: bool = False,
    interactivity: float | None = None,
    run: str | Path | None = None,
    batch: int | None = None,
    points: int | None = None,
    catalog_files: Sequence[str | Path] | None = None,
) -> Plan:
    """Fit, both limits and (with ``run``) efficiency of a model on accelerators."""
    check_number("overhead (--overhead-ms)", overhead_ms, 0, MAX_OVERHEAD_MS)
    if batch is not None:
        check_int("batch (--batch)", batch, 1, BATCH_CAP)
    arch = resolve_model(model)
    acc = find_accelerator(accelerator, load_catalog(catalog_files))
    runs, left_out = load_points(run) if run is not None else ([], [])
    for r in runs:  # a run of another catalog model: its efficiency is not this model's
        recorded = r.workload().get("model")
        try:
            rec = find_model(recorded).arch if isinstance(recorded, str) else None
        except AccelbenchError:
            rec = None  # a name the catalog does not know: MODEL says what it is
        if rec is not None and not rec.same_architecture(arch):
            raise AccelbenchError(
                f"{r.path / 'run.json'}: a run of {recorded}, not of {arch.name}: give the "
                "model the run served"
            )
    n = gpus if gpus is not None else (runs[0].gpus if runs else 1)
    hw = hardware_for(acc, n, precision, eff_flops, eff_bw)
    if context is None and isl is None and runs:
        m_isl, m_osl = run_mean_lengths(runs[0])
        if m_isl is not None:
            isl = round(m_isl)
            osl = max(1, round(m_osl)) if m_osl else None
    wl = Workload.of(context, isl, osl, kv_precision)
    too_long = arch.context_warning(wl.peak_context)
    warnings: list[str] = [too_long] if too_long else []
    warnings += left_out  # the sweep's runs left out of the efficiency table, with why
    if dp_attention:
        if n == 1:
            raise UsageError(DP_ATTENTION_ONE_GPU.format(flag="--gpus"))
        unused = arch.dp_attention_unused(n)
        warnings += [unused] if unused else []
    fit = memory_fit(
        arch, hw, precision, kv_precision, wl.peak_context, concurrency, reserve, dp_attention
    )
    expected = Roofline(arch, hw, precision, wl, overhead_ms / 1000.0, dp_attention)
    physical = expected.physical()
    rows = [
        LimitRow(p.batch, p, e)
        for p, e in zip(
            physical.curve(fit.max_batch, points),
            expected.curve(fit.max_batch, points),
            strict=True,
        )
    ]
    at = None
    if interactivity is not None:
        at = AtInteractivity(
            interactivity,
            physical.best_at_interactivity(interactivity, fit.max_batch),
            expected.best_at_interactivity(interactivity, fit.max_batch),
        )
    effs = []
    for r in runs:
        b = _run_batch(r, batch)
        m_isl, m_osl = run_mean_lengths(r)
        rwl = (
            Workload.of(None, round(m_isl), max(1, round(m_osl or 1)), kv_precision)
            if m_isl is not None and context is None
            else wl
        )
        rhw = hardware_for(acc, r.gpus, precision, eff_flops, eff_bw) if r.gpus != n else hw
        exp_roof = Roofline(arch, rhw, precision, rwl, overhead_ms / 1000.0, dp_attention)
        lim_e, lim_p = exp_roof.step(b), exp_roof.physical().step(b)
        measured, basis = r.figure("output_tps_per_gpu"), "output"
        lp, le = lim_p.output_tok_s_per_gpu, lim_e.output_tok_s_per_gpu
        if measured is None:
            measured, basis = r.figure("total_tps_per_gpu"), "total"
            lp, le = lim_p.total_tok_s_per_gpu, lim_e.total_tok_s_per_gpu
        assert measured is not None  # load_points keeps runs with throughput only
        if measured > lp * (1 + 1e-9):  # nothing beats the physical roofline: say so
            warnings.append(
                f"{r.path}: measured {measured:,.4g} {basis} tok/s/GPU is above the physical "
                f"roofline ({lp:,.4g} at batch {b}, {rhw.n_gpus} x {acc.id}, {precision}): "
                "the run is not of this model, accelerator, GPU count or precision "
                "(or its batch was above --batch)"
            )
        effs.append(
            RunEfficiency(
                str(r.path),
                b,
                rwl.context,
                basis,
                measured,
                lp,
                le,
                r.figure("interactivity"),
                lim_p.tok_s_user,
                lim_e.tok_s_user,
            )
        )
    return Plan(
        arch,
        acc,
        hw,
        precision,
        kv_precision,
        wl,
        concurrency,
        overhead_ms,
        fit,
        rows,
        physical.prefill_s(wl.isl) if wl.isl is not None else None,
        expected.prefill_s(wl.isl) if wl.isl is not None else None,
        at,
        effs,
        warnings,
    )
