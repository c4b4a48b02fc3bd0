"""`accelbench frontier`, `compare`, `report` and `runs` (list, query,
import-vllm). Argument handling only; the logic lives in accelbench.suites.sweep,
accelbench.metrics.frontier / compare, accelbench.report and accelbench.store.runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import typer

from accelbench.errors import AccelbenchError

if TYPE_CHECKING:  # the CLI imports the metrics when a command runs
    from collections.abc import Sequence

    from accelbench.metrics.compare import Comparison
    from accelbench.metrics.frontier import FrontierJSON


class FrontierSet(TypedDict):
    """``accelbench frontier --json``: one entry per input."""

    name: str
    warnings: list[str]
    frontiers: dict[str, FrontierJSON]  # metric -> its frontier
    goodput: NotRequired[list[dict[str, object]]]  # each point's goodput (with --slo)
    highest_load_meeting_slo: NotRequired[str | None]


def _slo(items: list[str]) -> dict[str, float]:
    from accelbench.cli.options import parse_kv_floats
    from accelbench.validate import slo

    return slo(parse_kv_floats(items, "--slo"))


def _json(doc: object, default: Any = None) -> str:
    """Strict JSON for --json / --format json (NaN as null, infinities as "inf")."""
    from accelbench.store.rundir import json_text

    return json_text(doc, default) if default is not None else json_text(doc)


def _console(stderr: bool = False):  # noqa: ANN202
    from accelbench.console import console

    return console(stderr=stderr)


def _e(x: object) -> str:
    """Outside text (names, paths, warnings, query results) inside a markup string."""
    from accelbench.console import esc

    return esc(x)


def _refuse(given: frozenset[str], modes: dict[str, tuple[str, ...]], mode: str) -> None:
    """Refuse, in one line before any work, every option given that ``mode`` (one of
    ``modes``: a command's modes and the options each uses) would not read."""
    from accelbench.cli.options import refuse_unused

    homes = {m: opts for m, opts in modes.items() if m != mode}
    refuse_unused(given, modes[mode], mode, homes)


# ----------------------------------------------------------------------------- frontier

# the options each way of running `frontier` reads; any other given is refused
# (docs/LIMITS.md): --attainment is the share of requests that must meet the --slo
FRONTIER_MODES = {
    "frontier without --slo": ("--at", "--json"),
    "frontier --slo": ("--at", "--json", "--slo", "--attainment"),
}


def frontier_cmd(
    ctx: typer.Context,
    inputs: list[Path] = typer.Argument(..., help="Sweep or run directories."),
    at: float = typer.Option(None, "--at", help="Target interactivity (tok/s/user)."),
    slo: list[str] = typer.Option([], help="SLO for goodput, e.g. --slo tpot_ms=50."),
    attainment: float = typer.Option(0.9, help="Fraction of requests that must meet the SLOs."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The throughput-interactivity frontier of each sweep (output and total tokens per
    GPU), values at a target interactivity, and goodput under SLOs."""
    from rich.table import Table

    from accelbench.cli.options import given_options
    from accelbench.metrics.compare import check_comparison_options
    from accelbench.metrics.frontier import (
        FRONTIER_METRICS,
        build_frontier,
        check_goodput_options,
        goodput_points,
        highest_load_meeting,
        left_off_frontier,
    )
    from accelbench.store.sets import load_inputs

    given = given_options(ctx)
    _refuse(
        given, FRONTIER_MODES, "frontier --slo" if "--slo" in given else "frontier without --slo"
    )
    slos = _slo(slo)
    check_goodput_options(slos, attainment)
    check_comparison_options(target=at)
    result: list[FrontierSet] = []
    for s in load_inputs(inputs):
        warnings = [*s.problems, *left_off_frontier(s.runs)]
        entry: FrontierSet = {"name": s.name, "warnings": warnings, "frontiers": {}}
        for m in FRONTIER_METRICS:
            f = build_frontier(s.runs, m, s.name)
            fj = f.to_json()
            if at is not None:
                v = f.at(at)
                fj["at"] = {"target": at, "value": v.value, "reason": v.reason}
            entry["frontiers"][m] = fj
        if slos:
            gp = goodput_points([r for r in s.runs if r.summary], slos, attainment)
            best = highest_load_meeting(gp)
            entry["goodput"] = [g.__dict__ for g in gp]
            entry["highest_load_meeting_slo"] = best.label if best else None
        result.append(entry)
    if not any(fr["points"] for e in result for fr in e["frontiers"].values()):
        # nothing to show: empty tables and exit 0 read as a frontier (README: exit 1)
        if as_json:
            typer.echo(_json(result))
        else:
            for e in result:
                for w in e["warnings"]:
                    typer.echo(f"warning: {e['name']}: {w}", err=True)
        typer.echo(
            "error: no point has both an interactivity and a throughput figure: there is no "
            f"frontier to show ({'its warnings' if as_json else 'the warnings above'} say why)",
            err=True,
        )
        raise typer.Exit(1)
    if as_json:
        typer.echo(_json(result))
        return
    con = _console()
    for e in result:
        con.print(f"[bold]{_e(e['name'])}[/bold]")
        for w in e["warnings"]:
            con.print(f"  [yellow]warning:[/yellow] {_e(w)}")
        for m, fr in e["frontiers"].items():
            t = Table(title=FRONTIER_METRICS[m])
            t.add_column("point")
            t.add_column("tok/s/user", justify="right")
            t.add_column("tok/s/GPU", justify="right")
            for p in fr["points"]:
                t.add_row(
                    _e(p["label"]), f"{p['interactivity']:.2f}", f"{p['throughput_per_gpu']:.1f}"
                )
            con.print(t)
            if "at" in fr:
                a = fr["at"]
                txt = f"{a['value']:,.1f} tok/s/GPU" if a["value"] is not None else _e(a["reason"])
                con.print(f"  at {at:g} tok/s/user: {txt}")
        if "goodput" in e:
            con.print(
                f"  highest load meeting the SLOs: {_e(e.get('highest_load_meeting_slo') or 'none')}"
            )


# ----------------------------------------------------------------------------- compare

# --tolerance is the slack on a claimed factor: read only when judging a --claim
_COMPARE_BASE = ("--at", "--allow-mismatch", "--n-boot", "--seed", "--json")
COMPARE_MODES = {
    "compare without --claim": _COMPARE_BASE,
    "compare --claim": (*_COMPARE_BASE, "--claim", "--tolerance"),
}


def refuse_unbootstrapped(given: frozenset[str], comps: Sequence[Comparison]) -> None:
    """--n-boot and --seed set the bootstrap: refused where no interval of ``comps`` is one
    (known only once the inputs are read: a hit rate is bootstrapped when a side has it)."""
    from accelbench.cli.options import refuse_unused

    if not any(c.bootstrap for c in comps):
        refuse_unused(
            given & {"--n-boot", "--seed"}, (), "these comparisons: none of their intervals "
            "is a bootstrap (one is with --at, a claim at an interactivity or on a hit rate, "
            "or prefix-cache hit rates on a side)",
        )  # fmt: skip


def compare_cmd(
    ctx: typer.Context,
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
    """Ratios B / A of the main metrics at matched conditions with 95% confidence
    intervals (docs/ANALYSIS.md "Intervals"), and verdicts on claims. Exit status 1 if a claim is refuted."""
    from rich.table import Table

    from accelbench.cli.options import given_options
    from accelbench.metrics.compare import METRICS, check_comparison_options, compare_sets
    from accelbench.metrics.verdict import Status
    from accelbench.report.html import fmt
    from accelbench.report.verdicts import terminal_line
    from accelbench.store.sets import load_inputs

    given = given_options(ctx)
    _refuse(
        given, COMPARE_MODES, "compare --claim" if "--claim" in given else "compare without --claim"
    )
    check_comparison_options(tolerance=tolerance, n_boot=n_boot, target=at, seed=seed)
    sa, sb = load_inputs([a, b])
    comps = compare_sets(
        sa, sb, claims=claim, target_interactivity=at, allow_mismatch=allow_mismatch,
        n_boot=n_boot, seed=seed, tolerance=tolerance,
    )  # fmt: skip
    refuse_unbootstrapped(given, comps)
    verdicts = [v for c in comps for v in c.verdicts]
    con = _console(stderr=as_json)  # with --json, stdout is the JSON: the inputs' warnings
    for p in sa.problems + sb.problems:  # (a summary recomputed, a run left out) on stderr
        con.print(f"[yellow]warning:[/yellow] {_e(p)}")
    if as_json:
        typer.echo(_json([c.to_json() for c in comps]))
    else:
        for c in comps:
            t = Table(title=_e(f"{c.b_name} (B) vs {c.a_name} (A): {c.condition}"))
            for h in ("metric", "A", "B", "B / A", "95% CI", "note"):
                t.add_column(h, justify="left" if h in ("metric", "note") else "right")
            for e in c.estimates:
                ci = f"[{fmt(e.lo)}, {fmt(e.hi)}]" if e.lo is not None else "—"
                t.add_row(
                    METRICS[e.metric].description,
                    fmt(e.a),
                    fmt(e.b),
                    fmt(e.ratio),
                    _e(ci),
                    _e(e.note or ""),
                )
            con.print(t)
            for w in c.warnings:
                con.print(f"  [yellow]warning:[/yellow] {_e(w)}")
            for v in c.verdicts:
                con.print(f"  {terminal_line(v)}")
    if any(v.status == Status.FAIL for v in verdicts):  # refuted
        raise typer.Exit(1)


# ----------------------------------------------------------------------------- report


_REPORT_KINDS = (".html", ".htm", ".md", ".markdown")

# the options `report` reads, by what they need (docs/LIMITS.md); any other given is
# refused. --claim with fewer than two inputs is read: the report says it needs two
_REPORT_SLO = "report --slo of a run or sweep input"
_REPORT_TWO = "report of two or more run or sweep inputs"
_REPORT_RUNS = "report of a run or sweep input"
REPORT_MODES = {
    "report": ("--out", "--markdown", "--claim"),
    _REPORT_RUNS: ("--at",),  # the target marked on each input's frontiers
    _REPORT_SLO: ("--slo", "--attainment"),  # goodput of each run or sweep input
    _REPORT_TWO: ("--allow-mismatch", "--n-boot"),  # the comparisons of B against A
}


def _report_options(given: frozenset[str], runs: int) -> None:
    """Refuse the options a report of ``runs`` run or sweep inputs (a stress or shadow
    directory is none; an MLPerf one is also a run) would not read."""
    from accelbench.cli.options import refuse_unused

    modes = ["report"]
    if runs:
        modes.append(_REPORT_RUNS)
    if runs and "--slo" in given:
        modes.append(_REPORT_SLO)
    if runs >= 2:
        modes.append(_REPORT_TWO)
    what = "report of " + (
        "no run or sweep input"
        if not runs
        else "one run or sweep input"
        if runs == 1
        else f"{runs} run or sweep inputs"
    )
    if "--slo" not in given and given & set(REPORT_MODES[_REPORT_SLO]):
        what += " without --slo"
    used = [o for m in modes for o in REPORT_MODES[m]]
    homes = {m: opts for m, opts in REPORT_MODES.items() if m not in modes}
    refuse_unused(given, used, what, homes)


def report_cmd(
    ctx: typer.Context,
    inputs: list[Path] = typer.Argument(
        ..., help="Run or sweep directories (first = A); stress, shadow or MLPerf directories."
    ),
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
    from accelbench.cli.options import given_options
    from accelbench.report.data import build_report_data
    from accelbench.report.html import write_html
    from accelbench.report.markdown import write_markdown
    from accelbench.report.sections import find_section
    from accelbench.suites.sections import SECTIONS
    from accelbench.validate import output_file

    # a stress or shadow directory is no run set (an MLPerf one is also a run)
    sections = [find_section(p, SECTIONS) for p in inputs]
    given = given_options(ctx)
    _report_options(given, sum(s is None or s.also_a_run for s in sections))

    # before the work: a bad path is one line, nothing written; never one of the inputs
    # (`report RUN -o RUN/summary.json` overwrote what it read)
    # (folders are made when writing, after every other option is checked)
    # (a report of its own kind in a run directory may be written again: never read)
    output_file("--out", out, inputs, mkdir=False, own_kinds=_REPORT_KINDS)
    if markdown:
        output_file("--markdown", markdown, [*inputs, out], mkdir=False, own_kinds=_REPORT_KINDS)
    data = build_report_data(
        inputs, target=at, claims=claim, slo=_slo(slo) or None, attainment=attainment,
        allow_mismatch=allow_mismatch, n_boot=n_boot, sections=SECTIONS,
    )  # fmt: skip
    if len(data.sets) >= 2:
        refuse_unbootstrapped(given, data.comparisons)
    p = write_html(data, out)
    con = _console()
    con.print(f"wrote {_e(p)}")
    if markdown:
        con.print(f"wrote {_e(write_markdown(data, markdown))}")
    n = sum(len(s.warnings) for s in data.sets) + len(data.comparison_errors)
    n += sum(len(s.warnings) for s in data.suites)
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
    from accelbench.store.runs import iter_runs, run_row, shared_run_ids
    from accelbench.suites.sections import suite_of
    from accelbench.validate import input_dir

    rows, ids = [], []
    for r in iter_runs(input_dir("--root", root)):  # one run's documents at a time
        rows.append(run_row(r, suite_of))
        ids.append((r.run_id, r.path))
        for p in r.problems:  # a damaged run is listed with what could be read: say why
            typer.echo(f"warning: {r.path}: {p}", err=True)
    for line in shared_run_ids(ids):
        typer.echo(f"warning: {line}", err=True)
    if as_json:
        typer.echo(_json(rows))
        return
    cols = ("run_id", "sweep", "suite", "verdict", "status", "model", "concurrency", "rate", "gpus", "isl", "osl",
            "output_tps_per_gpu", "interactivity", "ttft_p50_ms", "error_rate")  # fmt: skip
    t = Table(title=f"{len(rows)} run(s) under {_e(root)}")
    for c in cols:
        t.add_column(c)
    for row in rows:
        t.add_row(*[_e(fmt(row.get(c))) for c in cols])
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
    from accelbench.suites.sections import suite_of
    from accelbench.validate import input_dir

    if fmt_ not in ("table", "csv", "json"):
        raise AccelbenchError("--format must be table, csv or json")
    left_out: list[str] = []
    cols, rows = query_runs(input_dir("--root", root), sql, suite_of, left_out)
    for line in left_out:  # dropped from the requests view, ids shared: said, the query ran
        typer.echo(f"warning: {line}", err=True)
    if fmt_ == "json":
        typer.echo(_json([dict(zip(cols, r, strict=True)) for r in rows], default=str))
    elif fmt_ == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    else:
        t = Table()
        for c in cols:
            t.add_column(_e(c))
        for r in rows:
            t.add_row(*["" if v is None else _e(v) for v in r])
        _console().print(t)


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
    from accelbench.store.rundoc import read_run_doc
    from accelbench.store.runs import import_vllm_files
    from accelbench.store.vllm_import import NO_THROUGHPUT

    # every file checked before the first is written: all or none
    outs = import_vllm_files(files, root, gpus=gpus, isl=isl, osl=osl, dataset=dataset,
                             label=label)  # fmt: skip
    for f, out in zip(files, outs, strict=True):
        typer.echo(f"imported {f} -> {out}")
        if NO_THROUGHPUT in (read_run_doc(out).absent or []):
            typer.echo(f"warning: {f}: imported without {NO_THROUGHPUT}; see absent", err=True)


def register(app: typer.Typer) -> None:
    app.command("frontier")(frontier_cmd)
    app.command("compare")(compare_cmd)
    app.command("report")(report_cmd)
    app.add_typer(runs_app, name="runs")
