"""`accelbench sweep`, `frontier`, `compare`, `report` and `runs` (list, query,
import-vllm). Argument handling only; the logic lives in accelbench.sweep,
accelbench.metrics.frontier / compare, accelbench.report and accelbench.store.runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import typer

from accelbench.errors import AccelbenchError


def _floats(text: str | None, what: str) -> list[float]:
    if not text:
        return []
    try:
        return [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise AccelbenchError(f"{what} must be a comma-separated list of numbers") from None


def _slo(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            raise AccelbenchError(f"--slo must be KEY=VALUE, e.g. tpot_ms=50 (got {item!r})")
        key = key.strip()
        if key not in ("ttft_ms", "tpot_ms", "e2e_ms"):
            raise AccelbenchError(f"unknown SLO {key!r}: use ttft_ms, tpot_ms or e2e_ms")
        try:
            out[key] = float(val)
        except ValueError:
            raise AccelbenchError(f"--slo {key}: {val!r} is not a number") from None
        if out[key] <= 0:
            raise AccelbenchError(f"SLO {key} must be positive")
    return out


def _pairs(items: list[str]) -> list[tuple[int, int]]:
    out = []
    for it in items:
        a, sep, b = it.partition("/")
        try:
            out.append((int(a), int(b)))
        except ValueError:
            raise AccelbenchError(f"--isl-osl must look like 1024/1024 (got {it!r})") from None
        if not sep or out[-1][0] < 1 or out[-1][1] < 1:
            raise AccelbenchError(f"--isl-osl must look like 1024/1024 (got {it!r})")
    return out


def _console():  # noqa: ANN202
    from rich.console import Console

    return Console()


# ----------------------------------------------------------------------------- sweep


def sweep_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Sweep directory (rerun to resume)."),
    url: str = typer.Option(None, help="OpenAI-compatible base URL; default: embedded engine."),
    model: str = typer.Option(
        None, "--model", "-m", help="Model name (default: the first listed)."
    ),
    endpoint: str = typer.Option("completions", help="completions | chat"),
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
    dataset: str = typer.Option(None, help="Dataset file instead of synthetic prompts."),
    requests_per_point: float = typer.Option(
        10.0, help="Measured requests per point, x concurrency."
    ),
    warmup_per_point: float = typer.Option(2.0, help="Warm-up requests per point, x concurrency."),
    num_requests: int = typer.Option(
        None, "--num-requests", "-n", help="Rate sweeps: requests per point."
    ),
    gpus: int = typer.Option(1, help="Accelerators behind the endpoint (per-GPU figures)."),
    slo: list[str] = typer.Option([], help="SLO for goodput, e.g. --slo tpot_ms=50."),
    saturation_stop: bool = typer.Option(
        True, "--saturation-stop/--no-saturation-stop", help="Stop climbing once saturated."
    ),
    min_gain: float = typer.Option(
        0.05, help="Saturation: throughput must grow by this fraction..."
    ),
    latency_factor: float = typer.Option(2.0, help="...unless p50 latency grew by this factor."),
    max_error_rate: float = typer.Option(0.05, help="Stop when a point's error rate passes this."),
    timeout: float = typer.Option(600.0, help="Per-request timeout (s)."),
    api_key_env: str = typer.Option(
        "OPENAI_API_KEY", help="Environment variable holding the API key."
    ),
    seed: int = typer.Option(0, help="Seed for prompts and arrivals."),
    embedded_model: str = typer.Option("smollm2", help="Embedded engine model (without --url)."),
    api_key_file: str = typer.Option(None, help="File whose first line is the API key."),
    workers: int = typer.Option(None, help="Load worker processes per point (default: auto)."),
    ray: str = typer.Option(None, "--ray", help="Load workers as Ray actors (docs/CLUSTER.md)."),
    telemetry: bool = typer.Option(
        True, "--telemetry/--no-telemetry", help="Sample telemetry beside every point."
    ),
    telemetry_interval: float = typer.Option(1.0, help="Telemetry sampling interval (s)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Run a series of benchmarks over concurrency (or request rate), one run directory
    per point under OUT; rerunning resumes, running only the missing points."""
    from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
    from accelbench.sweep import (
        SaturationRule,
        SweepPlan,
        inferencex_config,
        plan_values,
        run_sweep,
    )

    kind = "rate" if rate_mode else "concurrency"
    vals = plan_values(_floats(values, "--values"), start, end, kind)  # type: ignore[arg-type]
    if endpoint not in ("completions", "chat"):
        raise AccelbenchError("--endpoint must be completions or chat")
    if preset not in (None, "inferencex"):
        raise AccelbenchError(f"unknown preset {preset!r}: use inferencex")
    pairs = _pairs(isl_osl) or [(isl, osl)]
    base = BenchmarkConfig(
        url=url, model=model, endpoint=endpoint, gpus=gpus, slo=_slo(slo),  # type: ignore[arg-type]
        timeout_s=timeout, api_key_env=api_key_env, num_requests=num_requests,
        workload=WorkloadConfig(isl=isl, osl=osl, dataset=dataset, seed=seed),
        embedded_model=embedded_model, api_key_file=api_key_file, workers=workers,
        telemetry=telemetry, telemetry_interval_s=telemetry_interval, ray=ray,
    )  # fmt: skip
    rule = SaturationRule(saturation_stop, min_gain, latency_factor, max_error_rate)
    con = _console()
    for i, o in pairs:
        cfg = base.with_(workload=replace(base.workload, isl=i, osl=o))
        if preset == "inferencex":
            cfg = inferencex_config(cfg, i, o)
        cfg.validate()
        d = out if len(pairs) == 1 else out / f"isl{i}_osl{o}"
        plan = SweepPlan(cfg, list(vals), kind, preset, requests_per_point, warmup_per_point, rule)  # type: ignore[arg-type]

        def show(p: dict) -> None:
            extra = f" ({p['reason']})" if p.get("reason") else ""
            fig = p.get("output_tps_per_gpu")
            figs = f" {fig:,.1f} out tok/s/GPU" if isinstance(fig, float) else ""
            con.print(f"  point {p['value']:g}: {p['status']}{figs}{extra}")
            if p.get("saturation"):
                con.print(f"  [yellow]stop: {p['saturation']}[/yellow]")

        con.print(f"[bold]sweep {d}[/bold] ({kind}: {', '.join(f'{v:g}' for v in vals)})")
        doc = run_sweep(d, plan, progress=not quiet, on_point=show)
        con.print(f"  sweep {doc['status']}; report: accelbench report {d}")


# ----------------------------------------------------------------------------- frontier


def frontier_cmd(
    inputs: list[Path] = typer.Argument(..., help="Sweep or run directories."),
    at: float = typer.Option(None, "--at", help="Target interactivity (tok/s/user)."),
    slo: list[str] = typer.Option([], help="SLO for goodput, e.g. --slo tpot_ms=50."),
    attainment: float = typer.Option(0.9, help="Fraction of requests that must meet the SLOs."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The throughput-interactivity frontier of each sweep (output and total tokens per
    GPU), values at a target interactivity, and goodput under SLOs."""
    from rich.table import Table

    from accelbench.metrics.frontier import (
        FRONTIER_METRICS,
        build_frontier,
        goodput_points,
        highest_load_meeting,
    )
    from accelbench.sweep import load_inputs

    slos = _slo(slo)
    result = []
    for s in load_inputs(inputs):
        entry: dict = {"name": s.name, "warnings": s.problems, "frontiers": {}}
        for m in FRONTIER_METRICS:
            f = build_frontier(s.runs, m, s.name)
            e = f.to_json()
            if at is not None:
                v = f.at(at)
                e["at"] = {"target": at, "value": v.value, "reason": v.reason}
            entry["frontiers"][m] = e
        if slos:
            gp = goodput_points([r for r in s.runs if r.summary], slos, attainment)
            best = highest_load_meeting(gp)
            entry["goodput"] = [g.__dict__ for g in gp]
            entry["highest_load_meeting_slo"] = best.label if best else None
        result.append(entry)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    con = _console()
    for e in result:
        con.print(f"[bold]{e['name']}[/bold]")
        for w in e["warnings"]:
            con.print(f"  [yellow]warning:[/yellow] {w}")
        for m, f in e["frontiers"].items():
            t = Table(title=FRONTIER_METRICS[m])
            t.add_column("point")
            t.add_column("tok/s/user", justify="right")
            t.add_column("tok/s/GPU", justify="right")
            for p in f["points"]:
                t.add_row(p["label"], f"{p['interactivity']:.2f}", f"{p['throughput_per_gpu']:.1f}")
            con.print(t)
            if "at" in f:
                a = f["at"]
                txt = f"{a['value']:,.1f} tok/s/GPU" if a["value"] is not None else a["reason"]
                con.print(f"  at {at:g} tok/s/user: {txt}")
        if "goodput" in e:
            con.print(f"  highest load meeting the SLOs: {e['highest_load_meeting_slo'] or 'none'}")


# ----------------------------------------------------------------------------- compare


def compare_cmd(
    a: Path = typer.Argument(..., help="Baseline A: run or sweep directory."),
    b: Path = typer.Argument(..., help="Candidate B: run or sweep directory."),
    claim: list[str] = typer.Option([], help="e.g. 'B >= 1.3 x A at 32 tok/s/user'; repeatable."),
    at: float = typer.Option(
        None, "--at", help="Also compare at this interactivity on the frontiers."
    ),
    allow_mismatch: bool = typer.Option(False, help="Compare even if the workloads differ."),
    n_boot: int = typer.Option(1000, help="Bootstrap replicates."),
    tolerance: float = typer.Option(0.05, help="Relative slack on the claimed factor (rounding)."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Ratios B / A of the main metrics at matched conditions with 95% bootstrap
    confidence intervals, and verdicts on claims. Exit status 1 if a claim is refuted."""
    from rich.table import Table

    from accelbench.metrics.compare import METRICS, compare_sets
    from accelbench.report.html import fmt
    from accelbench.sweep import load_inputs

    if n_boot < 50:
        raise AccelbenchError("--n-boot must be at least 50")
    sa, sb = load_inputs([a, b])
    comps = compare_sets(
        sa, sb, claims=claim, target_interactivity=at, allow_mismatch=allow_mismatch,
        n_boot=n_boot, seed=seed, tolerance=tolerance,
    )  # fmt: skip
    verdicts = [v for c in comps for v in c.verdicts]
    if as_json:
        typer.echo(json.dumps([c.to_json() for c in comps], indent=2))
    else:
        con = _console()
        for p in sa.problems + sb.problems:
            con.print(f"[yellow]warning:[/yellow] {p}")
        for c in comps:
            t = Table(title=f"{c.b_name} (B) vs {c.a_name} (A): {c.condition}")
            for h in ("metric", "A", "B", "B / A", "95% CI", "note"):
                t.add_column(h, justify="left" if h in ("metric", "note") else "right")
            for e in c.estimates:
                ci = f"[{fmt(e.lo)}, {fmt(e.hi)}]" if e.lo is not None else "—"
                t.add_row(METRICS[e.metric][2], fmt(e.a), fmt(e.b), fmt(e.ratio), ci, e.note or "")
            con.print(t)
            for w in c.warnings:
                con.print(f"  [yellow]warning:[/yellow] {w}")
            for v in c.verdicts:
                colour = {"supported": "green", "refuted": "red"}.get(v.verdict, "yellow")
                con.print(f"  claim '{v.claim}': [{colour}]{v.verdict}[/{colour}] — {v.reason}")
    if any(v.verdict == "refuted" for v in verdicts):
        raise typer.Exit(1)


# ----------------------------------------------------------------------------- report


def report_cmd(
    inputs: list[Path] = typer.Argument(..., help="Run or sweep directories (first = A)."),
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="HTML file to write."),
    markdown: Path = typer.Option(None, "--markdown", help="Also write a Markdown summary here."),
    at: float = typer.Option(None, "--at", help="Target interactivity (tok/s/user) to mark."),
    claim: list[str] = typer.Option([], help="Claim to judge (B against A); repeatable."),
    slo: list[str] = typer.Option([], help="SLO for goodput, e.g. --slo tpot_ms=50."),
    attainment: float = typer.Option(0.9, help="Fraction of requests that must meet the SLOs."),
    allow_mismatch: bool = typer.Option(False, help="Compare even if the workloads differ."),
    n_boot: int = typer.Option(1000, help="Bootstrap replicates for comparisons."),
) -> None:
    """Write one self-contained HTML report (opens offline) and optionally a Markdown
    summary. Missing or failed points are listed in the report, never fatal."""
    from accelbench.report.data import build_report_data
    from accelbench.report.html import write_html
    from accelbench.report.markdown import write_markdown

    data = build_report_data(
        inputs, target=at, claims=claim, slo=_slo(slo) or None, attainment=attainment,
        allow_mismatch=allow_mismatch, n_boot=n_boot,
    )  # fmt: skip
    p = write_html(data, out)
    con = _console()
    con.print(f"wrote {p}")
    if markdown:
        con.print(f"wrote {write_markdown(data, markdown)}")
    n = sum(len(s.warnings) for s in data.sets) + len(data.comparison_errors)
    if n:
        con.print(f"[yellow]{n} warning(s): see the report's 'Warnings and missing data'[/yellow]")


# ----------------------------------------------------------------------------- runs

runs_app = typer.Typer(help="The runs store: list, query (DuckDB SQL) and import results.")


@runs_app.command("list")
def runs_list(
    root: Path = typer.Option(Path("results"), "--root", help="Results root to scan."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every run directory under the results root, with its key figures."""
    from rich.table import Table

    from accelbench.report.html import fmt
    from accelbench.store.runs import list_runs, run_row

    rows = [run_row(r) for r in list_runs(root)]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    cols = ("run_id", "sweep", "status", "model", "concurrency", "rate", "gpus", "isl", "osl",
            "output_tps_per_gpu", "interactivity", "ttft_p50_ms", "error_rate")  # fmt: skip
    t = Table(title=f"{len(rows)} run(s) under {root}")
    for c in cols:
        t.add_column(c)
    for r in rows:
        t.add_row(*[fmt(r.get(c)) for c in cols])
    _console().print(t)


@runs_app.command("query")
def runs_query(
    sql: str = typer.Argument(..., help="SQL over the views `runs` and `requests`."),
    root: Path = typer.Option(Path("results"), "--root", help="Results root to scan."),
    fmt_: str = typer.Option("table", "--format", help="table | csv | json"),
) -> None:
    """Run SQL (DuckDB) over every run under the results root: views `runs` (one row per
    run) and `requests` (every request record, with run_id)."""
    import csv
    import sys

    from rich.table import Table

    from accelbench.store.runs import query_runs

    cols, rows = query_runs(root, sql)
    if fmt_ == "json":
        typer.echo(
            json.dumps([dict(zip(cols, r, strict=True)) for r in rows], default=str, indent=2)
        )
    elif fmt_ == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    elif fmt_ == "table":
        t = Table()
        for c in cols:
            t.add_column(c)
        for r in rows:
            t.add_row(*["" if v is None else str(v) for v in r])
        _console().print(t)
    else:
        raise AccelbenchError("--format must be table, csv or json")


@runs_app.command("import-vllm")
def runs_import_vllm(
    files: list[Path] = typer.Argument(..., help="vllm bench serve --save-result JSON files."),
    root: Path = typer.Option(Path("results"), "--root", help="Results root to write into."),
    gpus: int = typer.Option(1, help="Accelerators behind the endpoint."),
    isl: int = typer.Option(None, help="Declared input length of the workload."),
    osl: int = typer.Option(None, help="Declared output length of the workload."),
    dataset: str = typer.Option(None, help="Declared dataset."),
    label: str = typer.Option(None, help="Run directory name (one file only)."),
) -> None:
    """Import vllm bench serve results as run directories beside accelbench runs."""
    from accelbench.store.runs import import_vllm

    if label and len(files) > 1:
        raise AccelbenchError("--label needs exactly one file")
    if gpus < 1:
        raise AccelbenchError("--gpus must be at least 1")
    for f in files:
        out = import_vllm(f, root, gpus=gpus, isl=isl, osl=osl, dataset=dataset, label=label)
        typer.echo(f"imported {f} -> {out}")


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)
    app.command("frontier")(frontier_cmd)
    app.command("compare")(compare_cmd)
    app.command("report")(report_cmd)
    app.add_typer(runs_app, name="runs")
