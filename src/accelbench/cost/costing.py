"""Cost per token, tokens/s per MW and joules per token (docs/METRICS.md, "Cost and
energy"; InferenceX-compatible):

- ``$ per million tokens = TCO_usd_per_gpu_hour / (tokens_per_s_per_gpu * 3600 / 1e6)``,
  for total, input and output tokens (each variant charges the whole cost to that class)
- ``tokens/s per MW = tokens_per_s_per_gpu * 1000 / kW_per_gpu`` (all-in provisioned kW)
- ``J per token = kW_per_gpu * 1000 / tokens_per_s_per_gpu``; and, where telemetry
  measured energy, the run's measured joules / tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.cost.catalog import Accelerator
from accelbench.cost.frontier import interpolate_on_frontier
from accelbench.cost.runs import RunPoint, is_run_dir, is_sweep_dir, load_run, load_sweep
from accelbench.cost.tco import Tco
from accelbench.errors import AccelbenchError


def usd_per_million_tokens(usd_per_gpu_hour: float, tok_s_per_gpu: float) -> float:
    """Dollars per million tokens at ``tok_s_per_gpu`` and ``usd_per_gpu_hour``."""
    if usd_per_gpu_hour < 0:
        raise AccelbenchError(f"usd_per_gpu_hour must not be negative (got {usd_per_gpu_hour:g})")
    if not tok_s_per_gpu > 0:
        raise AccelbenchError(f"tokens/s per GPU must be > 0 (got {tok_s_per_gpu:g})")
    return usd_per_gpu_hour / (tok_s_per_gpu * 3600.0 / 1e6)


def tokens_per_s_per_mw(tok_s_per_gpu: float, kw_per_gpu: float) -> float:
    """Tokens/s per megawatt of all-in provisioned power."""
    if not kw_per_gpu > 0:
        raise AccelbenchError(f"kw_per_gpu must be > 0 (got {kw_per_gpu:g})")
    return tok_s_per_gpu * 1000.0 / kw_per_gpu


def joules_per_token(kw_per_gpu: float, tok_s_per_gpu: float) -> float:
    """Provisioned joules per token: all-in kW per GPU over tokens/s per GPU."""
    if not tok_s_per_gpu > 0:
        raise AccelbenchError(f"tokens/s per GPU must be > 0 (got {tok_s_per_gpu:g})")
    if kw_per_gpu < 0:
        raise AccelbenchError(f"kw_per_gpu must not be negative (got {kw_per_gpu:g})")
    return kw_per_gpu * 1000.0 / tok_s_per_gpu


@dataclass
class Throughput:
    """Tokens/s per GPU to price, and where they came from."""

    total: float
    input: float | None = None
    output: float | None = None
    interactivity: float | None = None
    j_per_token_measured: float | None = None
    origin: str = ""
    j_per_output_token_measured: float | None = None
    notes: list[str] = field(default_factory=list)


def parse_plain_number(text: str) -> Throughput:
    """'1369' (total tok/s/GPU) or '1200+169' (input + output tok/s/GPU)."""
    try:
        if "+" in text:
            a, b = (float(x) for x in text.split("+", 1))
            t = Throughput(a + b, input=a, output=b, origin=f"given {a:g} in + {b:g} out tok/s/GPU")
        else:
            v = float(text)
            t = Throughput(v, origin=f"given {v:g} tok/s/GPU")
    except ValueError as exc:
        raise AccelbenchError(
            f"{text!r} is neither a run/sweep directory nor a number (tok/s/GPU, or IN+OUT)"
        ) from exc
    if not t.total > 0 or (t.input is not None and (t.input < 0 or (t.output or 0) < 0)):
        raise AccelbenchError(f"tokens/s per GPU must be > 0 (got {text})")
    return t


def throughput_from_run(run: RunPoint) -> Throughput:
    """The measured throughput of one run."""
    return Throughput(
        run.total_tok_s_per_gpu,
        run.input_tok_s_per_gpu,
        run.output_tok_s_per_gpu,
        run.interactivity,
        run.j_per_token,
        origin=f"run {run.path}",
        j_per_output_token_measured=run.j_per_output_token,
    )


def throughput_from_sweep(runs: list[RunPoint], interactivity: float, origin: str) -> Throughput:
    """Throughput per GPU at ``interactivity`` on a sweep's frontier (total tokens per GPU
    decides dominance; input, output and measured J/token are interpolated over the same
    points). Raises OutOfMeasuredRange outside the measured range."""
    pts = [r for r in runs if r.interactivity is not None]
    if not pts:
        raise AccelbenchError(f"{origin}: no run has interactivity.tok_s_user")
    others = {}
    for key, attr in (
        ("input", "input_tok_s_per_gpu"),
        ("output", "output_tok_s_per_gpu"),
        ("j", "j_per_token"),
        ("jo", "j_per_output_token"),
    ):
        vals = [getattr(r, attr) for r in pts]
        others[key] = [math.nan if v is None else v for v in vals]
    res = interpolate_on_frontier(
        [r.interactivity for r in pts],  # type: ignore[misc]
        [r.total_tok_s_per_gpu for r in pts],
        interactivity,
        others,
    )

    def fin(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return Throughput(
        res["throughput"],
        fin(res["input"]),
        fin(res["output"]),
        interactivity,
        fin(res["j"]),
        origin=f"sweep {origin} at {interactivity:g} tok/s/user "
        f"({len(pts)} runs, PCHIP on the frontier)",
        j_per_output_token_measured=fin(res["jo"]),
    )


def throughput_from_source(source: str, interactivity: float | None = None) -> Throughput:
    """Throughput from a run directory, a sweep directory (needs ``interactivity``) or a
    plain number."""
    p = Path(source).expanduser()
    if is_run_dir(p):
        return throughput_from_run(load_run(p))
    if is_sweep_dir(p):
        if interactivity is None:
            raise AccelbenchError(
                f"{source} is a sweep: give --interactivity (tok/s/user) to read its frontier"
            )
        return throughput_from_sweep(load_sweep(p), interactivity, str(p))
    if p.exists():
        raise AccelbenchError(f"{source} is neither a run directory nor a sweep directory")
    return parse_plain_number(source)


@dataclass
class CostResult:
    """Cost and energy figures for one accelerator at one throughput."""

    label: str
    accelerator: str
    throughput: Throughput
    tco: Tco
    usd_per_m_total: float
    usd_per_m_input: float | None
    usd_per_m_output: float | None
    tok_s_per_mw: float | None
    j_per_token: float | None
    j_per_output_token: float | None
    j_per_token_measured: float | None
    j_per_output_token_measured: float | None = None

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form."""
        t = self.throughput
        return {
            "label": self.label,
            "accelerator": self.accelerator,
            "source": t.origin,
            "interactivity_tok_s_user": t.interactivity,
            "total_tok_s_per_gpu": t.total,
            "input_tok_s_per_gpu": t.input,
            "output_tok_s_per_gpu": t.output,
            "usd_per_gpu_hour": self.tco.usd_per_gpu_hour,
            "kw_per_gpu_all_in": self.tco.kw_per_gpu,
            "tco_mode": self.tco.mode,
            "usd_per_m_total_tokens": self.usd_per_m_total,
            "usd_per_m_input_tokens": self.usd_per_m_input,
            "usd_per_m_output_tokens": self.usd_per_m_output,
            "tok_s_per_mw": self.tok_s_per_mw,
            "j_per_token_provisioned": self.j_per_token,
            "j_per_output_token_provisioned": self.j_per_output_token,
            "j_per_token_measured": self.j_per_token_measured,
            "j_per_output_token_measured": self.j_per_output_token_measured,
            "assumptions": list(self.tco.assumptions) + list(t.notes),
        }


def cost_of(label: str, acc: Accelerator, thr: Throughput, tco: Tco) -> CostResult:
    """All cost and energy figures for ``thr`` tokens/s per GPU on ``acc`` at ``tco``."""
    usd = tco.usd_per_gpu_hour
    kw = tco.kw_per_gpu

    def per_m(v: float | None) -> float | None:
        return usd_per_million_tokens(usd, v) if v else None

    return CostResult(
        label=label,
        accelerator=acc.id,
        throughput=thr,
        tco=tco,
        usd_per_m_total=usd_per_million_tokens(usd, thr.total),
        usd_per_m_input=per_m(thr.input),
        usd_per_m_output=per_m(thr.output),
        tok_s_per_mw=tokens_per_s_per_mw(thr.total, kw) if kw else None,
        j_per_token=joules_per_token(kw, thr.total) if kw else None,
        j_per_output_token=joules_per_token(kw, thr.output) if kw and thr.output else None,
        j_per_token_measured=thr.j_per_token_measured,
        j_per_output_token_measured=thr.j_per_output_token_measured,
    )
