"""Cost per token, tokens/s per MW and joules per token (docs/METRICS.md, "Cost and
energy"; InferenceX-compatible):

- ``$ per million tokens = TCO_usd_per_gpu_hour / (tokens_per_s_per_gpu * 3600 / 1e6)``,
  for total, input and output tokens (each variant charges the whole cost to that class)
- ``tokens/s per MW = tokens_per_s_per_gpu * 1000 / kW_per_gpu`` (all-in provisioned kW)
- ``J per token = kW_per_gpu * 1000 / tokens_per_s_per_gpu``; and, where telemetry
  measured energy, the run's measured joules / tokens.

Runs and sweeps are read with :mod:`accelbench.store.runs` (a run killed before its
summary was written is recomputed from requests.parquet there) and sweep frontiers with
:mod:`accelbench.metrics.frontier`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accelbench.cost.tco import Tco, TcoInputs, resolve_tco
from accelbench.errors import AccelbenchError
from accelbench.hardware.catalog import Accelerator, find_accelerator, load_catalog

if TYPE_CHECKING:
    from accelbench.store.runs import RunInfo

# The run store and the frontier (pyarrow, pyarrow.compute) are imported by the functions
# that read runs: pricing a predicted or plain-number throughput (`accelbench predict`,
# `cost` with a number) needs neither, and the import was a fifth of that process.

MAX_TOK_S_PER_GPU = 1e9  # accepted plain throughput: [1e-6, 1e9] tokens/s per GPU
MIN_TOK_S_PER_GPU = 1e-6  # below this every cost figure is astronomical or overflows


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
    # what was left out of a sweep: its runs with no figures, and those left off its frontier
    # for want of one (named, with why; accelbench.metrics.frontier.left_off_frontier)
    warnings: list[str] = field(default_factory=list)


def parse_plain_number(text: str) -> Throughput:
    """'1369' (total tok/s/GPU) or '1200+169' (input + output tok/s/GPU); each a finite
    number, the total in (0, 1e9]."""
    try:
        if "+" in text:
            a, b = (float(x) for x in text.split("+", 1))
            t = Throughput(a + b, input=a, output=b, origin=f"given {a:g} in + {b:g} out tok/s/GPU")
        else:
            v = float(text)
            t = Throughput(v, origin=f"given {v:g} tok/s/GPU")
    except ValueError:
        raise AccelbenchError(
            f"{text!r} is neither a run/sweep directory nor a number (tok/s/GPU, or IN+OUT)"
        ) from None
    parts = [t.total] + ([t.input or 0.0, t.output or 0.0] if t.input is not None else [])
    ok = all(math.isfinite(x) and x >= 0 for x in parts)
    if not ok or not MIN_TOK_S_PER_GPU <= t.total <= MAX_TOK_S_PER_GPU:
        raise AccelbenchError(
            f"tokens/s per GPU must be a finite number in [{MIN_TOK_S_PER_GPU:g}, "
            f"{MAX_TOK_S_PER_GPU:g}] (got {text})"
        )
    return t


def _fig(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def run_energy(r: RunInfo) -> tuple[float | None, float | None]:
    """Measured (J per total token, J per output token) of a run, None where telemetry did
    not measure energy. accelbench.telemetry writes ``j_per_total_token`` and
    ``j_per_output_token``; the short form ``{joules, tokens, j_per_token}`` is read too."""
    from accelbench.store.runs import dig

    energy = dig(r.summary, "energy")
    if not isinstance(energy, dict):
        return None, None
    jpt = _fig(energy.get("j_per_total_token"))
    if jpt is None:
        jpt = _fig(energy.get("j_per_token"))
    if jpt is None:
        joules, toks = _fig(energy.get("joules")), _fig(energy.get("tokens"))
        if joules is not None and toks:
            jpt = joules / toks
    return jpt, _fig(energy.get("j_per_output_token"))


def energy_warnings(r: RunInfo) -> list[str]:
    """What the run's telemetry said of its energy figure (summary.json
    ``energy.warnings``: a GPU unseen over part of the window), each naming the run."""
    from accelbench.store.runs import dig

    said = dig(r.summary, "energy", "warnings")
    if not isinstance(said, list):
        return []
    return [f"{r.path.name}: measured energy: {w}" for w in said if isinstance(w, str)]


def run_mean_lengths(r: RunInfo) -> tuple[float | None, float | None]:
    """Mean input and output tokens per completed request (None where unknown)."""
    from accelbench.store.runs import dig

    done = _fig(dig(r.summary, "counts", "completed"))
    if not done or done <= 0:
        return None, None
    isl, osl = _fig(dig(r.summary, "tokens", "input")), _fig(dig(r.summary, "tokens", "output"))
    return (isl / done if isl is not None else None), (osl / done if osl is not None else None)


def load_points(path: str | Path) -> tuple[list[RunInfo], list[str]]:
    """The run at ``path``, or the runs of the sweep at ``path``, that have throughput
    figures (a run without summary.json is recomputed from its requests.parquet), and
    the warning lines naming the runs of the sweep left out, with why (a sweep's
    problems; a run with no throughput: every request failed)."""
    from accelbench.metrics.frontier import left_off
    from accelbench.store.runs import is_run_dir, load_run

    p = Path(path).expanduser()
    if not p.is_dir():
        raise AccelbenchError(f"{p} is neither a run directory nor a sweep directory")
    if is_run_dir(p):
        return _priced(p, [load_run(p)]), []
    from accelbench.suites.sweep.core import load_sweep  # lazy: only sweeps need it

    sweep = load_sweep(p)
    left = left_off(sweep.runs, "total_tps_per_gpu", "the efficiency table")
    return _priced(p, sweep.runs), [*sweep.problems, *left]


def _priced(p: Path, runs: list[RunInfo]) -> list[RunInfo]:
    """The runs of ``runs`` (read from ``p``) with a throughput to price; none: the error."""
    usable = [r for r in runs if r.figure("total_tps_per_gpu") is not None]
    if not usable:
        why = "; ".join(f"{r.path.name}: {', '.join(r.problems) or 'no figures'}" for r in runs)
        raise AccelbenchError(f"{p}: no run with throughput figures ({why})")
    return usable


def throughput_from_run(run: RunInfo) -> Throughput:
    """The measured throughput of one run."""
    from accelbench.store.runs import dig

    jpt, jpo = run_energy(run)
    total = run.figure("total_tps_per_gpu")
    if total is None:
        raise AccelbenchError(f"{run.path}: no throughput.total_tokens_per_s_per_gpu")
    return Throughput(
        total,
        _fig(dig(run.summary, "throughput", "input_tokens_per_s_per_gpu")),
        run.figure("output_tps_per_gpu"),
        run.figure("interactivity"),
        jpt,
        origin=f"run {run.path}",
        j_per_output_token_measured=jpo,
        notes=[f"{run.path.name}: {x}" for x in run.problems],
        # a J/token priced from a partial window is said where it is priced
        warnings=energy_warnings(run) if jpt is not None or jpo is not None else [],
    )


def throughput_from_sweep(runs: list[RunInfo], interactivity: float, origin: str) -> Throughput:
    """Throughput per GPU at ``interactivity`` on a sweep's frontier (total tokens per GPU
    decides dominance; input, output and measured J/token are interpolated over the same
    points with the same PCHIP). Outside the measured range: AccelbenchError, never an
    extrapolation."""
    from accelbench.metrics.frontier import monotone_interp, pareto_indices

    if isinstance(interactivity, bool) or not (
        math.isfinite(interactivity) and 0 < interactivity <= 1e7
    ):
        raise AccelbenchError(
            f"interactivity (--interactivity) must be in (0, 1e7] tok/s/user (got {interactivity})"
        )
    thr = [throughput_from_run(r) for r in runs]
    pts = [t for t in thr if t.interactivity is not None and t.interactivity > 0 and t.total > 0]
    # a figure of 0 (an imported or edited summary: accelbench writes null where nothing
    # was measured) is no point to price: named, with why (the runs with null are named
    # where the sweep is read, throughput_from_source)
    zero = [r.load_label for r, t in zip(runs, thr, strict=True)
            if t.interactivity == 0 or t.total == 0]  # fmt: skip
    if not pts:
        raise AccelbenchError(f"{origin}: no run has interactivity.tok_s_user")
    x = np.array([t.interactivity for t in pts], dtype=float)
    keep = pareto_indices(x, np.array([t.total for t in pts]))
    fx = x[keep]
    lo, hi = float(fx[0]), float(fx[-1])
    if not lo <= interactivity <= hi:
        raise AccelbenchError(
            f"interactivity {interactivity:g} tok/s/user is out of measured range "
            f"[{lo:.4g}, {hi:.4g}] on the frontier of {origin}"
        )

    def at(attr: str) -> float | None:
        vals = np.array([getattr(pts[i], attr) for i in keep], dtype=float)  # None -> nan
        if not np.all(np.isfinite(vals)):
            return None
        return (
            float(vals[0]) if len(keep) == 1 else float(monotone_interp(fx, vals, interactivity)[0])
        )

    total = at("total")
    assert total is not None  # every frontier point has a finite total
    out = Throughput(
        total,
        at("input"),
        at("output"),
        interactivity,
        at("j_per_token_measured"),
        origin=f"sweep {origin} at {interactivity:g} tok/s/user "
        f"({len(pts)} runs, PCHIP on the frontier)",
        j_per_output_token_measured=at("j_per_output_token_measured"),
        warnings=[f"{', '.join(zero)}: interactivity or total throughput of 0: left off the "
                  "frontier"] if zero else [],
    )  # fmt: skip
    if out.j_per_token_measured is not None or out.j_per_output_token_measured is not None:
        out.warnings += [w for i in keep for w in pts[i].warnings]  # the points it came from
    return out


def throughput_from_source(source: str, interactivity: float | None = None) -> Throughput:
    """Throughput from a run directory, a sweep directory (needs ``interactivity``) or a
    plain number."""
    from accelbench.store.runs import is_run_dir

    p = Path(source).expanduser()
    if p.is_dir():
        if is_run_dir(p):
            return throughput_from_run(load_points(p)[0][0])
        from accelbench.metrics.frontier import left_off_frontier
        from accelbench.suites.sweep.core import load_sweep  # lazy: only sweeps need it

        sweep = load_sweep(p)
        runs = _priced(p, sweep.runs)
        if interactivity is None:
            raise AccelbenchError(
                f"{source} is a sweep: give --interactivity (tok/s/user) to read its frontier"
            )
        thr = throughput_from_sweep(runs, interactivity, str(p))
        # the runs left out, each named with why (they were left out without a word)
        thr.warnings += [*sweep.problems, *left_off_frontier(sweep.runs, ("total_tps_per_gpu",))]
        return thr
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
            "warnings": list(t.warnings),
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


def split_source(
    text: str, default_acc: str | None, cat: dict[str, Accelerator]
) -> tuple[str, str]:
    """``ACCEL:SOURCE`` (or SOURCE with ``default_acc``) -> (accelerator id, SOURCE).
    An empty SOURCE is refused: ``h100:`` was read as the directory ``.``."""

    def given(src: str) -> str:
        if not src.strip():
            raise AccelbenchError(
                f"{text!r}: no SOURCE (a run or sweep directory, or tok/s per GPU) given"
            )
        return src

    if ":" in text:
        head, tail = text.split(":", 1)
        try:
            return find_accelerator(head, cat).id, given(tail)
        except AccelbenchError:
            if default_acc is None or not tail.strip():
                raise
    if default_acc is None:
        raise AccelbenchError(
            f"{text!r}: say which accelerator, as ACCEL:{text} or with --accelerator"
        )
    return find_accelerator(default_acc, cat).id, given(text)


def source_options(
    sources: list[str], accelerator: str | None, catalog_files: list[Path] | None = None
) -> set[str]:
    """Which of ``--accelerator`` and ``--interactivity`` the sources use: the accelerator
    where a source has no known ``ACCEL:`` prefix, the interactivity where a source is a
    sweep directory (a run directory or a number has one throughput)."""
    from accelbench.store.runs import is_run_dir

    cat = load_catalog(list(catalog_files or []))
    used: set[str] = set()
    for text in sources:
        src = text
        head, sep, tail = text.partition(":")
        try:
            if not sep:
                raise AccelbenchError(text)
            find_accelerator(head, cat)
            src = tail
        except AccelbenchError:
            used.add("--accelerator")
        p = Path(src).expanduser()
        if p.is_dir() and not is_run_dir(p):
            used.add("--interactivity")
    return used


def compute_costs(
    sources: list[str],
    accelerator: str | None,
    interactivity: float | None,
    tco_inputs: TcoInputs,
    catalog_files: list[Path] | None = None,
) -> list[CostResult]:
    """Cost figures for each ``ACCEL:SOURCE`` (run dir, sweep dir or tok/s/GPU number)."""
    if not sources:
        raise AccelbenchError("give at least one SOURCE (run dir, sweep dir or tok/s/GPU)")
    tco_inputs.validate()
    cat = load_catalog(list(catalog_files or []))
    out = []
    for text in sources:
        aid, src = split_source(text, accelerator, cat)
        acc = cat[aid]
        thr = throughput_from_source(src, interactivity)
        tco = resolve_tco(acc, tco_inputs)
        out.append(cost_of(f"{aid}: {src}", acc, thr, tco))
    return out


def ratios_vs_first(results: list[CostResult]) -> list[dict[str, str | float]]:
    """Every numeric figure of results[1:] divided by the first result's."""
    if len(results) < 2:
        return []
    base = results[0].as_dict()
    out = []
    for r in results[1:]:
        d = r.as_dict()
        row: dict[str, str | float] = {"label": r.label}
        for k, v in d.items():
            b = base.get(k)
            if isinstance(v, int | float) and isinstance(b, int | float) and b:
                row[k] = v / b
        out.append(row)
    return out
