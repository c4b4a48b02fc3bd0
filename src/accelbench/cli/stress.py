"""`accelbench stress soak | flood | mixed | consistency` (docs/STRESS.md).

Each writes a stress directory (its runs as ordinary run directories under runs/, and
stress.json with the verdicts and their evidence), prints a one-screen verdict table
and exits 1 when a verdict failed or the suite did not complete."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from accelbench.cli.options import config_from_options, load_options
from accelbench.errors import UsageError
from accelbench.runner.config import BenchmarkConfig

stress_app = typer.Typer(
    help="Stress suites with verdicts: soak, flood, mixed, consistency.", no_args_is_help=True
)


def _log(msg: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(f"[dim]{escape(msg)}[/dim]")


def _fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "-"
    if unit == "B/h":
        return f"{x / 2**20:+.3g}M/h"
    return f"{x:+.3g}{unit if unit.startswith('%') else (' ' + unit) if unit else ''}"


def print_verdicts(title: str, verdicts: list[Any], status: str, path: Path) -> None:
    """The one-screen verdict table."""
    from rich.console import Console
    from rich.table import Table

    colour = {"pass": "green", "warn": "yellow", "fail": "red", "n/a": "dim"}
    t = Table(title=f"{title}: {status}  ({path})", show_lines=False)
    for c in ("verdict", "check", "estimate", "95% interval", "warn / fail at"):
        t.add_column(c, overflow="fold")
    for v in verdicts:
        d = v if isinstance(v, dict) else v.to_dict()
        unit = d["unit"]
        ci = (
            f"[{_fmt(d['ci_low'], unit)}, {_fmt(d['ci_high'], unit)}]"
            if d["ci_low"] is not None
            else "-"
        )
        th = f"{_fmt(d['warn'], unit)} / {_fmt(d['fail'], unit)}"
        c = colour.get(d["verdict"], "white")
        name = d["name"].replace("metric:", "").replace("_bytes", "")
        t.add_row(f"[{c}]{d['verdict']}[/{c}]", name, _fmt(d["estimate"], unit), ci, th)
    Console(width=max(100, Console().width)).print(t)
    typer.echo(
        "M/h = MiB per hour; %/h = % of the median per hour; pp/h = percentage points per hour"
    )


def _finish(title: str, verdicts: list[Any], status: str, path: Path, quiet: bool) -> None:
    if not quiet:
        print_verdicts(title, verdicts, status, path)
    bad = status != "completed" or any(
        (v if isinstance(v, dict) else v.to_dict())["verdict"] == "fail" for v in verdicts
    )
    if bad:
        typer.secho(f"stress {title}: {status}, see {path}/stress.json", fg="yellow", err=True)
        raise typer.Exit(1)


@contextlib.contextmanager
def _server(cfg: BenchmarkConfig, server_pid: int | None) -> Iterator[int | None]:
    """The embedded engine, started once for the whole suite when no --url is given."""
    if cfg.url is not None:
        yield server_pid
        return
    from accelbench.servers.llamacpp import running_llama_server

    with running_llama_server(cfg.embedded_model, parallel=cfg.embedded_parallel, log=_log) as s:
        cfg.url = s.url
        cfg.model = cfg.model or s.alias
        yield s.pid


def _mib(x: float) -> float:
    return x * 2**20


@stress_app.command("soak")
@load_options(exclude=("num_requests", "label"))
def soak(
    window: float = typer.Option(60.0, "--window", help="Window length (s)."),
    segment: float = typer.Option(
        3600.0, "--segment", help="Length of each run directory (s); bounds client memory."
    ),
    sample_interval: float = typer.Option(5.0, "--sample-interval", help="Memory sampling (s)."),
    server_pid: int = typer.Option(None, "--server-pid", help="Server process to watch (RSS)."),
    metric: list[str] = typer.Option(
        [], "--metric", help="Prometheus gauge (bytes) on the server's /metrics to judge as memory."
    ),
    leak_warn: float = typer.Option(4.0, "--leak-warn", help="Leak warn threshold (MiB/h)."),
    leak_fail: float = typer.Option(32.0, "--leak-fail", help="Leak fail threshold (MiB/h)."),
    horizon: float = typer.Option(
        72.0, "--exhaustion-horizon", help="Fail if memory runs out within this many hours."
    ),
    drift_warn: float = typer.Option(5.0, "--drift-warn", help="Drift warn threshold (%/h)."),
    drift_fail: float = typer.Option(20.0, "--drift-fail", help="Drift fail threshold (%/h)."),
    resume: Path = typer.Option(None, "--resume", help="Continue an interrupted soak directory."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No verdict table."),
    load: dict[str, Any] | None = None,
) -> None:
    """Steady load for --duration, judged per --window: leak verdicts for every memory
    series, drift verdicts for latency, throughput and error rate."""
    from accelbench.stress.common import stress_dir
    from accelbench.stress.soak import SoakConfig, run_soak
    from accelbench.stress.verdicts import DriftThresholds, LeakThresholds

    load = load or {}
    if load.get("duration") is None:
        raise UsageError("stress soak needs --duration (seconds)")
    cfg = config_from_options(load)
    duration = float(load["duration"])
    path = (
        resume
        if resume
        else stress_dir(load.get("out"), load.get("results_root") or "results", "soak")
    )
    with _server(cfg, server_pid) as pid:
        sc = SoakConfig(
            load=cfg, duration_s=duration, window_s=window, segment_s=segment,
            sample_s=sample_interval, server_pid=pid, metrics=list(metric),
            leak=LeakThresholds(_mib(leak_warn), _mib(leak_fail), horizon),
            drift=DriftThresholds(drift_warn, drift_fail), gpu=cfg.telemetry,
        )  # fmt: skip
        res = run_soak(sc, path, resume=resume is not None, log=_log)
    _finish("soak", res.verdicts, res.status, path, quiet)


@stress_app.command("consistency")
@load_options(exclude=("url", "num_requests", "duration", "concurrency", "rate", "label"))
def consistency(
    url: list[str] = typer.Option(
        [], "--url", "-u", help="Endpoint; repeat it: the first is the baseline."
    ),
    prompts: int = typer.Option(32, "--prompts", help="Size of the fixed prompt set."),
    repeats: int = typer.Option(2, "--repeats", help="Repeats over time."),
    pause: float = typer.Option(0.0, "--pause", help="Seconds between repeats."),
    loaded_concurrency: int = typer.Option(
        8, "--loaded-concurrency", help="Also run the set at this concurrency (0: skip)."
    ),
    warn_divergent: float = typer.Option(0.0, "--warn-divergent", help="Warn above this fraction."),
    fail_divergent: float = typer.Option(
        0.05, "--fail-divergent", help="Fail above this fraction."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No verdict table."),
    load: dict[str, Any] | None = None,
) -> None:
    """Greedy outputs of a fixed prompt set: over time, alone vs under load, and across
    endpoints; identical fraction, first differing token, similarity, every diverging
    pair kept (divergent.jsonl)."""
    from accelbench.stress.common import stress_dir
    from accelbench.stress.consistency import ConsistencyConfig, run_consistency

    load = load or {}
    cfg = config_from_options(load, url=url[0] if url else None)
    path = stress_dir(load.get("out"), load.get("results_root") or "results", "consistency")
    with _server(cfg, None):
        cc = ConsistencyConfig(
            load=cfg, urls=list(url) or [str(cfg.url)], prompts=prompts, repeats=repeats,
            loaded_concurrency=loaded_concurrency or None, pause_s=pause,
            warn_divergent=warn_divergent, fail_divergent=fail_divergent,
        )  # fmt: skip
        res = run_consistency(cc, path, log=_log)
    if not quiet:
        for c in res.comparisons:
            typer.echo(
                f"{c['run']}: {c['identical']}/{c['compared']} identical, first diff at "
                f"{c['first_diff_min']}, similarity {c['similarity_mean']:.4f}"
            )
    _finish("consistency", res.verdicts, res.status, path, quiet)


def register(app: typer.Typer) -> None:
    app.add_typer(stress_app, name="stress")
