"""`accelbench sweep`: a series of runs over concurrency or request rate. Argument
handling only; the logic lives in accelbench.suites.sweep."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from accelbench.cli.options import config_from_options, load_options
from accelbench.errors import UsageError
from accelbench.lifetime import noted_stops, stops_noted
from accelbench.validate import distinct
from accelbench.workload.config import WorkloadConfig


def _floats(text: str | None, what: str) -> list[float]:
    """A comma-separated list of numbers; an empty entry (``1,,2``, ``4,``) is refused:
    it was dropped without a word, a value the user meant to give."""
    if not text or not text.strip():
        return []  # not given: the sweep asks for its values
    items = text.replace(" ", "").split(",")
    if "" in items:
        raise UsageError(
            f"{what} has an empty entry (got {text!r}): give a number between each comma"
        )
    try:
        return [float(x) for x in items]
    except ValueError:
        raise UsageError(f"{what} must be a comma-separated list of numbers") from None


def _pairs(items: list[str]) -> list[tuple[int, int]]:
    out = []
    for it in items:
        a, sep, b = it.partition("/")
        try:
            out.append((int(a), int(b)))
        except ValueError:
            raise UsageError(f"--isl-osl must look like 1024/1024 (got {it!r})") from None
        if not sep or out[-1][0] < 1 or out[-1][1] < 1:
            raise UsageError(f"--isl-osl must look like 1024/1024 (got {it!r})")
    # each pair once: a pair given twice ran its sweep, then "resumed" it in the same
    # directory (isl16_osl8 for 16/8 and 016/8 alike) without a word
    distinct("--isl-osl", (f"{i}/{o}" for i, o in out))
    return out


# The sweep sets these per point; `--rate` is a flag here (sweep rates, not concurrency).
PER_POINT = ("rate", "concurrency", "num_requests", "duration", "warmup", "out", "label")


@load_options(exclude=PER_POINT)
def sweep_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Sweep directory (rerun to resume)."),
    values: str = typer.Option(None, help="Explicit points, e.g. 1,2,4,8,16."),
    start: float = typer.Option(None, help="First point (with --end: x2 steps)."),
    end: float = typer.Option(None, help="Last point."),
    rate_mode: bool = typer.Option(
        False, "--rate", help="Sweep request rate (req/s), not concurrency."
    ),
    preset: str = typer.Option(
        None, help="inferencex: random prompts, range ratio 0.8 ([0.8L, L]), ignore_eos."
    ),
    isl_osl: list[str] = typer.Option(
        [], "--isl-osl", help="ISL/OSL pair, e.g. 1024/1024; repeat for several (one sweep each)."
    ),
    isl: int = typer.Option(1024, help="Input length (without --isl-osl)."),
    osl: int = typer.Option(1024, help="Output length (without --isl-osl)."),
    requests_per_point: float = typer.Option(
        10.0, help="Measured requests per point, x concurrency."
    ),
    warmup_per_point: float = typer.Option(2.0, help="Warm-up requests per point, x concurrency."),
    num_requests: int = typer.Option(
        None, "--num-requests", "-n", help="Rate sweeps: requests per point."
    ),
    saturation_stop: bool = typer.Option(
        True, "--saturation-stop/--no-saturation-stop", help="Stop climbing once saturated."
    ),
    min_gain: float = typer.Option(
        0.05, help="Saturation: throughput must grow by this fraction..."
    ),
    latency_factor: float = typer.Option(2.0, help="...unless p50 latency grew by this factor."),
    max_error_rate: float = typer.Option(0.05, help="Stop when a point's error rate passes this."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    load: dict[str, Any] | None = None,
) -> None:
    """Run a series of benchmarks over concurrency (or request rate), one run directory
    per point under OUT; rerunning resumes, running only the missing points. Takes every
    load option of `accelbench run` except those the sweep sets per point."""
    from accelbench.console import console
    from accelbench.console import esc as escape
    from accelbench.store.sweepdoc import SweepPoint
    from accelbench.suites.sweep import (
        SaturationRule,
        SweepPlan,
        check_resume,
        inferencex_config,
        plan_values,
        run_sweep,
    )
    from accelbench.suites.sweep.core import Kind

    kind: Kind = "rate" if rate_mode else "concurrency"
    vals = plan_values(_floats(values, "--values"), start, end, kind)
    if preset not in (None, "inferencex"):
        raise UsageError(f"unknown preset {preset!r}: use inferencex")
    _refuse_unused(kind, preset, isl_osl, isl, osl, num_requests, requests_per_point,
                   warmup_per_point, saturation_stop, min_gain, latency_factor,
                   max_error_rate, load or {})  # fmt: skip
    load = load or {}
    if load.get("dataset") and not isl_osl and "--isl" not in getattr(load, "given", ()):
        isl = WorkloadConfig.isl  # the dataset gives the prompts: no sweep default for them
    pairs = _pairs(isl_osl) or [(isl, osl)]
    base = config_from_options(load, num_requests=num_requests, isl=isl, osl=osl)
    rule = SaturationRule(saturation_stop, min_gain, latency_factor, max_error_rate)
    con = console()
    plans = []
    for i, o in pairs:  # check every pair before the first run starts
        cfg = base.with_(workload=replace(base.workload, isl=i, osl=o))
        if preset == "inferencex":
            cfg = inferencex_config(cfg, i, o)
        copy.deepcopy(cfg).validate()  # the points fill in their own defaults
        d = out if len(pairs) == 1 else out / f"isl{i}_osl{o}"
        plan = SweepPlan(cfg, list(vals), kind, preset, requests_per_point, warmup_per_point, rule)
        for x in plan.values:  # every point as it will run: an option it would ignore fails now
            point = plan.point_config(x, d / plan.point_dir(x))
            point.validate()
            point.check_run_options()
        if (d / "run.json").is_file():  # its sweep.json would hide the run (frontier, report)
            raise UsageError(f"--out {d} is a run directory (it holds run.json): give the "
                             "sweep a directory of its own")  # fmt: skip
        check_resume(d, plan)  # an earlier sweep.json there: the same sweep, measured alike
        plans.append((d, plan))
    stops = stops_noted()
    kept = False  # a point's results are on disk (an interrupted sweep then exits 1, not 130)
    # a stop signal ends the sweep after the point it came in (run_sweep); between two
    # sweeps, and once the last is done, it is noted and changes nothing done
    with noted_stops():
        for d, plan in plans:
            if stops_noted() > stops:
                con.print(escape(f"sweep {d}: not run (stopped)"))
                raise typer.Exit(1)

            def show(p: SweepPoint) -> None:
                extra = f" ({p.reason})" if p.reason else ""
                fig = p.output_tps_per_gpu
                figs = f" {fig:,.1f} out tok/s/GPU" if isinstance(fig, float) else ""
                con.print(escape(f"  point {p.value:g}: {p.status}{figs}{extra}"))
                if p.saturation:
                    con.print(f"  [yellow]stop: {escape(p.saturation)}[/yellow]")

            con.print(
                f"[bold]sweep {escape(str(d))}[/bold] ({kind}: {', '.join(f'{x:g}' for x in vals)})"
            )
            doc = run_sweep(d, plan, progress=not quiet, on_point=show)
            kept = kept or any((d / p.dir).is_dir() for p in doc.points)
            if plan.base.workload.sessions is not None and kind == "concurrency":
                from accelbench.report.knee import sweep_dir_knee

                if (knee := sweep_dir_knee(d)) is not None:
                    for line in knee.lines():
                        con.print(escape(f"  {line}"))
            con.print(escape(f"  sweep {doc.status}; report: accelbench report {d}"))
            if doc.status == "interrupted" and not kept:  # stopped before any point ran
                raise typer.Exit(130)
            if doc.status != "completed":  # interrupted, or a point failed: exit 1
                raise typer.Exit(1)


def _refuse_unused(
    kind: str, preset: str | None, isl_osl: list[str], isl: int, osl: int,
    num_requests: int | None, requests_per_point: float, warmup_per_point: float,
    saturation_stop: bool, min_gain: float, latency_factor: float, max_error_rate: float,
    load: dict[str, Any],
) -> None:  # fmt: skip
    """The sweep's own options that its points would ignore: refused, as the load options
    are (docs/LIMITS.md "Combinations")."""
    from accelbench.cli.options import SHARED, long_option

    typed: frozenset[str] = getattr(load, "given", frozenset())
    given = {k for k, v in load.items()
             if k in SHARED and (v != SHARED[k][1].default or long_option(k) in typed)}  # fmt: skip

    def set_(name: str, value: object, default: object) -> bool:  # typed, or not the default
        return name in typed or value != default

    if kind == "concurrency" and num_requests is not None:
        raise UsageError("-n is a rate sweep's; a concurrency sweep sends "
                         "--requests-per-point x concurrency per point")  # fmt: skip
    if kind == "rate":
        for name, value, default in (("--requests-per-point", requests_per_point, 10.0),
                                     ("--warmup-per-point", warmup_per_point, 2.0)):  # fmt: skip
            if set_(name, value, default):
                raise UsageError(f"{name} is a concurrency sweep's; a rate sweep sends -n "
                                 "requests per point")  # fmt: skip
    if isl_osl and (set_("--isl", isl, 1024) or set_("--osl", osl, 1024)):
        raise UsageError("--isl and --osl do not apply with --isl-osl, which sets both")
    if not saturation_stop:
        for name, value, default in (("--min-gain", min_gain, 0.05),
                                     ("--latency-factor", latency_factor, 2.0),
                                     ("--max-error-rate", max_error_rate, 0.05)):  # fmt: skip
            if set_(name, value, default):
                raise UsageError(f"{name} does not apply with --no-saturation-stop")
    if preset == "inferencex":
        fixed = ("isl_dist", "osl_dist", "range_ratio", "range_convention", "dataset",
                 "ignore_eos")  # fmt: skip
        for k in fixed:
            if k in given:
                opt = "--no-ignore-eos" if k == "ignore_eos" else "--" + k.replace("_", "-")
                raise UsageError(f"--preset inferencex sets the lengths and ignore_eos: "
                                 f"{opt} does not apply with it")  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)
