"""Commands: ``accelbench health``, ``accelbench telemetry parse`` (``monitor``: cli/monitor.py).

Thin wrappers: the logic lives in accelbench.telemetry and accelbench.health.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from accelbench.errors import AccelbenchError
from accelbench.health.check import HealthCheck, check_file, check_live
from accelbench.health.rules import HealthConfig
from accelbench.lifetime import ignore_stop_signals
from accelbench.telemetry.parsers import FORMATS, read_capture
from accelbench.telemetry.schema import coerce_row
from accelbench.telemetry.sources import SOURCE_NAMES

telemetry_app = typer.Typer(
    help="Telemetry tools: parse captured nvidia-smi / rocm-smi / amd-smi / exporter output.",
    no_args_is_help=True,
)


def _source_list(sources: list[str] | None) -> list[str] | None:
    if not sources:
        return None
    names: list[str] = []
    for s in sources:
        names.extend(x.strip() for x in s.split(",") if x.strip())
    if not names:  # given, but empty: never read as "autodetect"
        raise AccelbenchError(f"--source is empty; known: {', '.join(SOURCE_NAMES)}")
    unknown = [n for n in names if n not in SOURCE_NAMES]
    if unknown:
        raise AccelbenchError(
            f"unknown source(s) {', '.join(unknown)}; known: {', '.join(SOURCE_NAMES)}"
        )
    return names


def _print_health(result: HealthCheck) -> None:
    # Plain typer.echo throughout: captured data (bus ids, model names) is printed as
    # it is, never through Rich markup or emoji codes; control characters as escapes.
    from accelbench.console import printable as p

    for name, state in result["sources"].items():
        typer.echo(p(f"source {name}: {state}"))
    health = result["health"]
    typer.echo(f"samples: {result['samples']}")
    for note in result.get("notes") or []:
        typer.echo(p(f"note: {note}"))
    for f in health["findings"]:
        typer.echo(p(f"[{f['severity']}] {f['rule']}: {f['device']}: {f['message']}"))
    for why in health.get("unknown") or []:
        typer.echo(p(f"[unknown] {why}"))
    from accelbench.metrics.verdict import Status
    from accelbench.report.verdicts import COLOUR

    colour = COLOUR.get(Status(health["verdict"]), "white")
    typer.secho(f"verdict: {health['verdict']}", fg=colour, bold=True)


def health_cmd(
    ctx: typer.Context,
    source: list[str] = typer.Option(
        None,
        "--source",
        "-s",
        help=f"Sources to use (default: autodetect): {', '.join(SOURCE_NAMES)}.",
    ),
    server_url: str = typer.Option(
        None, "--server-url", help="Inference server base URL (/metrics)."
    ),
    pid: int = typer.Option(None, "--pid", help="Server process id (RSS and CPU of its tree)."),
    duration: float = typer.Option(3.0, "--duration", help="Seconds to sample.", min=0.0),
    interval: float = typer.Option(1.0, "--interval", help="Seconds between samples.", min=0.05),
    file: Path = typer.Option(
        None, "--file", help="Check a captured tool output instead of live sources."
    ),
    fmt: str = typer.Option(None, "--format", help=f"Format of --file: {', '.join(FORMATS)}."),
    temp_margin: float = typer.Option(
        5.0, "--temp-margin", help="Warn this close (C) to slowdown."
    ),
    strict: bool = typer.Option(False, "--strict", help="Exit non-zero on warnings too."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """One-shot health check of GPUs, host and server. Exit 1 when the verdict is fail
    or unknown (no samples, data lost from a capture, a GPU without temperature or
    memory-error counters); warn exits 0 unless --strict."""
    from accelbench.cli.options import given_options, refuse_unmet

    given = given_options(ctx)
    live = file is None
    names = _source_list(source) if live else None
    refuse_unmet(given, [  # a file is parsed, or live sources sampled: never both
        ("--source", live, "to live sampling (not with --file)"),
        ("--duration", live, "to live sampling (not with --file)"),
        ("--interval", live, "to live sampling (not with --file)"),
        # a check shorter than one interval takes one sample: the interval never applies
        ("--interval", not live or not math.isfinite(duration) or not math.isfinite(interval)
         or duration > interval,
         "with a --duration longer than the interval (a check no longer takes one sample)"),
        ("--server-url", live and (names is None or "server" in names),
         "to live sampling with autodetected sources or --source server (not --file)"),
        ("--pid", live and (names is None or "host" in names),
         "to live sampling with autodetected sources or --source host (not --file)"),
        ("--format", not live, "with --file"),
    ])  # fmt: skip
    config = HealthConfig(temp_margin_c=temp_margin)
    if file is not None:
        result = check_file(file, fmt, config)
    else:
        result = check_live(names, server_url, pid, duration, interval, config)
    # the check is done: a stop from now on changes nothing (docs/PROCESSES.md)
    ignore_stop_signals()
    if as_json:
        typer.echo(json.dumps(result, indent=2, default=str))
    else:
        _print_health(result)
    verdict = result["health"]["verdict"]
    if "interrupted" in result:  # judged on the samples taken before a stop (README)
        typer.secho(f"health interrupted ({result['interrupted']}): the verdict is on "
                    f"{result['samples']} samples", fg="yellow", err=True)  # fmt: skip
        raise typer.Exit(1)
    if verdict in ("fail", "unknown") or (strict and verdict == "warn"):
        raise typer.Exit(1)


@telemetry_app.command("parse")
def parse_cmd(
    file: Path = typer.Argument(..., help="Captured tool output."),
    fmt: str = typer.Option(
        None, "--format", help=f"One of: {', '.join(FORMATS)} (default: guess)."
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per sample (all columns)."),
) -> None:
    """Print the normalised samples (base units) of a captured file. What could not be
    read (a cut capture, values that are not numbers) goes to stderr."""
    from accelbench.console import one_line

    # captured text (model names, bus ids, a value quoted in a lost line) is printed with
    # its control characters escaped, as health and doctor print it: an ESC sequence in a
    # capture (a terminal title, a screen clear) reached the terminal as it was
    cap = read_capture(file, fmt)
    rows = [coerce_row(r) for r in cap.rows]
    for note in cap.notes:
        typer.echo(one_line(f"note: {note}"), err=True)
    for lost in cap.lost:
        typer.echo(one_line(f"lost: {lost}"), err=True)
    if not rows:
        typer.echo(one_line(f"no samples in {file} ({cap.format})"), err=True)
    for r in rows:
        if as_json:  # JSON escapes control characters itself (and all but ASCII)
            typer.echo(json.dumps(r, default=str))
            continue
        idx, name = r.get("device_index"), r.get("model") or r.get("engine")
        head = f"# {r.get('kind')}" + ("" if idx is None else f" {idx}")
        typer.echo(one_line(head + ("" if name is None else f": {name}")))
        for k, v in r.items():
            if v is not None and k not in ("kind", "device_index", "model"):
                typer.echo(one_line(f"  {k} = {v}"))


def register(app: typer.Typer) -> None:
    """Attach ``health`` and the ``telemetry`` group to the main app."""
    app.command("health")(health_cmd)
    app.add_typer(telemetry_app, name="telemetry")
