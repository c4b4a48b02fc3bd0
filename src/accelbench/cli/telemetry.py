"""Commands: ``accelbench health``, ``accelbench monitor``, ``accelbench telemetry parse``.

Thin wrappers: the logic lives in accelbench.telemetry and accelbench.health.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import signal
import threading
from pathlib import Path
from typing import Any

import typer

from accelbench.errors import AccelbenchError
from accelbench.health.check import check_file, check_live
from accelbench.health.rules import HealthConfig
from accelbench.telemetry.parsers import FORMATS, parse_file
from accelbench.telemetry.schema import coerce_row
from accelbench.telemetry.sources import SOURCE_NAMES, close_sources, open_sources

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
    unknown = [n for n in names if n not in SOURCE_NAMES]
    if unknown:
        raise AccelbenchError(
            f"unknown source(s) {', '.join(unknown)}; known: {', '.join(SOURCE_NAMES)}"
        )
    return names


def _print_health(result: dict[str, Any]) -> None:
    for name, state in result["sources"].items():
        typer.echo(f"source {name}: {state}")
    health = result["health"]
    typer.echo(f"samples: {result['samples']}")
    for f in health["findings"]:
        typer.echo(f"[{f['severity']}] {f['rule']}: {f['device']}: {f['message']}")
    colour = {"pass": typer.colors.GREEN, "warn": typer.colors.YELLOW, "fail": typer.colors.RED}
    typer.secho(f"verdict: {health['verdict']}", fg=colour[health["verdict"]], bold=True)


def health_cmd(
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
    """One-shot health check of GPUs, host and server; exits 1 on failure."""
    config = HealthConfig(temp_margin_c=temp_margin)
    if file is not None:
        result = check_file(file, fmt, config)
    else:
        result = check_live(_source_list(source), server_url, pid, duration, interval, config)
    if as_json:
        typer.echo(json.dumps(result, indent=2, default=str))
    else:
        _print_health(result)
    verdict = result["health"]["verdict"]
    if verdict == "fail" or (strict and verdict == "warn"):
        raise typer.Exit(1)


def monitor_cmd(
    source: list[str] = typer.Option(None, "--source", "-s", help="Sources (default: autodetect)."),
    server_url: str = typer.Option(None, "--server-url", help="Inference server base URL."),
    pid: int = typer.Option(None, "--pid", help="Server process id."),
    interval: float = typer.Option(1.0, "--interval", help="Seconds between samples.", min=0.05),
    window: float = typer.Option(300.0, "--window", help="Seconds of history the rules see."),
    port: int = typer.Option(9464, "--port", help="Prometheus exporter port (0: any free port)."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Exporter bind address (default loopback only)."
    ),
    no_exporter: bool = typer.Option(False, "--no-exporter", help="Do not serve /metrics."),
    alert_cmd: str = typer.Option(
        None,
        "--alert-cmd",
        help="Command run on each verdict change, split into arguments (no shell); "
        "gets the event as JSON on stdin.",
    ),
    webhook: str = typer.Option(None, "--webhook", help="URL to POST each verdict change to."),
    duration: float = typer.Option(None, "--duration", help="Stop after this many seconds."),
) -> None:
    """Sample continuously, evaluate health rules, alert on changes, serve Prometheus metrics."""
    from accelbench.health.monitor import Monitor
    from accelbench.telemetry.exporter import Exporter

    argv = shlex.split(alert_cmd) if alert_cmd else None
    if alert_cmd is not None and not argv:
        raise AccelbenchError("--alert-cmd is empty")
    active, status = open_sources(_source_list(source), server_url, pid)
    for name, state in status.items():
        typer.echo(f"source {name}: {state}")
    exporter = None
    if not no_exporter:
        exporter = Exporter(port=port, host=host)
        try:
            bound = exporter.start()
        except OSError as exc:
            raise AccelbenchError(f"cannot serve metrics on {host}:{port}: {exc}") from exc
        typer.echo(f"serving Prometheus metrics on http://{host}:{bound}/metrics")

    printed = [0]

    def on_tick(rows: list[dict[str, Any]], health: dict[str, Any]) -> None:
        for ev in mon.events[printed[0] :]:
            typer.echo(f"{ev['time']} verdict {ev['previous']} -> {ev['verdict']}")
            for f in ev["findings"]:
                typer.echo(f"  [{f['severity']}] {f['rule']}: {f['device']}: {f['message']}")
        printed[0] = len(mon.events)

    mon = Monitor(
        active,
        interval,
        window,
        alert_cmd=argv,
        webhook=webhook,
        exporter=exporter,
        on_tick=on_tick,
    )
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    timer = None
    if duration is not None:
        timer = threading.Timer(duration, stop.set)
        timer.daemon = True
        timer.start()
    try:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way out
            mon.run(stop)
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop.set()
        if timer is not None:
            timer.cancel()
        if exporter is not None:
            exporter.stop()
        close_sources(active)


@telemetry_app.command("parse")
def parse_cmd(
    file: Path = typer.Argument(..., help="Captured tool output."),
    fmt: str = typer.Option(
        None, "--format", help=f"One of: {', '.join(FORMATS)} (default: guess)."
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per sample (all columns)."),
) -> None:
    """Print the normalised samples (base units) of a captured file."""
    rows = [coerce_row(r) for r in parse_file(file, fmt)]
    for r in rows:
        if as_json:
            typer.echo(json.dumps(r, default=str))
            continue
        typer.echo(
            f"# {r.get('kind')} {r.get('device_index')}: {r.get('model') or r.get('engine')}"
        )
        for k, v in r.items():
            if v is not None and k not in ("kind", "device_index", "model"):
                typer.echo(f"  {k} = {v}")


def register(app: typer.Typer) -> None:
    """Attach ``health``, ``monitor`` and the ``telemetry`` group to the main app."""
    app.command("health")(health_cmd)
    app.command("monitor")(monitor_cmd)
    app.add_typer(telemetry_app, name="telemetry")
