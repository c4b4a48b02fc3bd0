"""``accelbench monitor``: the monitor loop (plain ``monitor ...``), and ``monitor rules`` /
``monitor dashboard`` to connect it to Prometheus, Alertmanager and Grafana.

Thin wrappers: the logic lives in accelbench.health.monitor and accelbench.monitoring.
"""

from __future__ import annotations

import shlex
import threading
from pathlib import Path

import typer

from accelbench.cli.telemetry import _source_list
from accelbench.console import printable
from accelbench.errors import AccelbenchError, UsageError
from accelbench.health.rules import Health, HealthConfig
from accelbench.lifetime import ignore_stop_signals, noted_stops
from accelbench.monitoring.rules import DEFAULT_WINDOW_S, FLAVOURS, AlertSettings
from accelbench.telemetry.schema import Row
from accelbench.telemetry.sources import Source, close_sources, open_sources

monitor_app = typer.Typer(
    help="Watch GPUs, host and server: alert, recover, serve Prometheus metrics "
    "(plain `monitor`), or write Prometheus rules / a Grafana dashboard for it.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def _write(text: str, out: Path | None, what: str) -> None:
    if out is None:
        typer.echo(text, nl=False)
        return
    from accelbench import validate as v
    from accelbench.store.rundir import write_text_atomic

    v.output_file("--out", out)
    write_text_atomic(out, text)  # a stop while writing leaves the earlier file whole
    typer.echo(f"wrote {what} to {out}")


@monitor_app.callback()
def monitor_cmd(
    ctx: typer.Context,
    source: list[str] = typer.Option(None, "--source", "-s", help="Sources (default: autodetect)."),
    server_url: str = typer.Option(None, "--server-url", help="Inference server base URL."),
    pid: int = typer.Option(None, "--pid", help="Server process id."),
    replay: list[Path] = typer.Option(
        None,
        "--replay",
        help="Replay captured tool outputs instead of live GPUs, one file per sample "
        "(repeat the option; the last file repeats).",
    ),
    replay_format: str = typer.Option(None, "--replay-format", help="Format of --replay files."),
    interval: float = typer.Option(1.0, "--interval", help="Seconds between samples.", min=0.05),
    window: float = typer.Option(
        DEFAULT_WINDOW_S, "--window", help="Seconds of history the rules see."
    ),
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
    recover_cmd: str = typer.Option(
        None,
        "--recover-cmd",
        help="Recovery action run while a chosen rule fires, split into arguments (no shell).",
    ),
    recover_on: str = typer.Option(
        "ecc", "--recover-on", help="Comma-separated health rules that trigger it, or 'any'."
    ),
    recover_severity: str = typer.Option(
        "fail", "--recover-severity", help="Lowest finding severity that triggers it: warn|fail."
    ),
    recover_cooldown: float = typer.Option(
        600.0, "--recover-cooldown", help="Seconds after an action before the next one."
    ),
    recover_max_per_hour: int = typer.Option(
        3, "--recover-max-per-hour", help="At most this many actions in any hour."
    ),
    recover_dry_run: bool = typer.Option(
        False, "--recover-dry-run", help="Log what would run, run nothing."
    ),
    recover_log: Path = typer.Option(
        None, "--recover-log", help="Append every recovery decision as JSON lines here."
    ),
    duration: float = typer.Option(None, "--duration", help="Stop after this many seconds."),
) -> None:
    """Sample continuously, evaluate health rules, alert on changes, serve Prometheus metrics."""
    from accelbench.cli.options import given_options, refuse_unmet, refuse_unused

    given = given_options(ctx)
    if ctx.invoked_subcommand is not None:
        # the options before a subcommand are the monitor loop's, which does not run
        refuse_unused(
            given, (), f"monitor {ctx.invoked_subcommand} (options before "
            f"`{ctx.invoked_subcommand}` are the monitor loop's; give its own after it)",
        )  # fmt: skip
        return
    from accelbench import validate as v
    from accelbench.health.monitor import Monitor
    from accelbench.monitoring.recovery import Recovery, RecoveryEntry, RecoveryPolicy
    from accelbench.monitoring.replay import ReplaySource
    from accelbench.telemetry.exporter import Exporter
    from accelbench.telemetry.parsers import FORMATS
    from accelbench.validate import check_url

    # every option is checked here, before a source is opened, a port taken or a file
    # written (docs/LIMITS.md)
    names = _source_list(source)
    recover = recover_cmd is not None
    sources = not replay or names is not None  # live sources are opened too
    refuse_unmet(given, [
        *[(o, recover, "with --recover-cmd") for o in (
            "--recover-on", "--recover-severity", "--recover-cooldown",
            "--recover-max-per-hour", "--recover-log", "--recover-dry-run")],
        ("--replay-format", bool(replay), "with --replay"),
        ("--server-url", sources and (names is None or "server" in names),
         "to live sources: autodetected or --source server (with --replay: --source server)"),
        ("--pid", sources and (names is None or "host" in names),
         "to live sources: autodetected or --source host (with --replay: --source host)"),
        ("--port", not no_exporter, "with the exporter (not with --no-exporter)"),
        ("--host", not no_exporter, "with the exporter (not with --no-exporter)"),
    ])  # fmt: skip
    v.optional_number("--duration", duration, 0, 30 * 86400.0, unit="s")
    Monitor.check(interval, window)
    v.port("--port", port)
    if not no_exporter or not host.strip():  # "" would be every interface
        v.bind_host("--host", host, port)
    if server_url is not None:
        check_url(server_url, "--server-url")
    if pid is not None:
        v.integer("--pid", pid, 1, 1 << 22)  # Linux's largest pid_max
    replays = [v.input_file("--replay", p) for p in replay or []]
    if replay_format is not None:
        v.choice("--replay-format", replay_format, tuple(FORMATS))
    argv = v.command_line("--alert-cmd", alert_cmd)
    if webhook is not None:
        check_url(webhook, "--webhook")
    policy = None
    if recover_cmd is not None:
        policy = RecoveryPolicy(
            argv=v.command_line("--recover-cmd", recover_cmd) or [],
            rules=[r.strip() for r in recover_on.split(",") if r.strip()],
            min_severity=recover_severity,
            cooldown_s=recover_cooldown,
            max_per_hour=recover_max_per_hour,
            dry_run=recover_dry_run,
            log_path=recover_log,
            inputs=replays,
        )
        policy.validate()
    active: list[Source]
    notes: list[str] = []  # what the replayed captures' parsers remarked
    if replays:
        rsrc = ReplaySource(replays, replay_format)
        reason = rsrc.probe()
        if reason is not None:
            raise AccelbenchError(f"--replay {reason}")
        notes = rsrc.notes
        active, status = [rsrc], {"replay": f"ok ({len(replays)} file(s))"}
        if names:
            more, more_status = open_sources(names, server_url, pid)
            active += more
            status.update(more_status)
    else:
        active, status = open_sources(names, server_url, pid)
    for name, state in status.items():
        typer.echo(printable(f"source {name}: {state}"))
    for note in notes:
        typer.echo(printable(f"note: {note}"))
    exporter = None
    if not no_exporter:
        exporter = Exporter(port=port, host=host)
        try:
            bound = exporter.start()
        except OSError as exc:
            close_sources(active)
            raise AccelbenchError(f"cannot serve metrics on {host}:{port}: {exc}") from exc
        typer.echo(f"serving Prometheus metrics on http://{host}:{bound}/metrics")

    printed = [0]

    def on_tick(rows: list[Row], health: Health) -> None:
        for ev in mon.events[printed[0] :]:
            typer.echo(f"{ev['time']} verdict {ev['previous']} -> {ev['verdict']}")
            for f in ev["findings"]:
                typer.echo(
                    printable(f"  [{f['severity']}] {f['rule']}: {f['device']}: {f['message']}")
                )
            for reason in ev.get("unknown", []):
                typer.echo(printable(f"  [unknown] {reason}"))
        printed[0] = len(mon.events)
        if recovery is not None:
            entry = recovery.consider(health)
            if entry is not None:
                show(entry)

    def show(entry: RecoveryEntry) -> None:
        typer.echo(
            f"recovery {entry['action']}: {shlex.join(entry['argv'])}"
            + (f" (exit {entry['exit_status']})" if entry["action"] == "ran" else "")
            + (f" ({entry['reason']})" if entry.get("reason") else "")
        )

    mon = Monitor(
        active,
        interval,
        window,
        config=HealthConfig(),
        alert_cmd=argv,
        webhook=webhook,
        exporter=exporter,
        on_tick=on_tick,
    )
    # the recovery action runs off the sampling path too (a hung action must not stop
    # sampling), in the monitor's dispatcher, and is ended when the monitor stops
    recovery = None if policy is None else Recovery(policy, dispatcher=mon.dispatcher, on_done=show)
    stop = threading.Event()
    timer = None
    # Ctrl-C, SIGTERM and SIGHUP are the normal way out (exit 0): each sets the stop, the
    # tick in progress finishes, and the monitor stops in order; a second one while it
    # stops (alerts draining, exporter, sources) is noted, not raised (it used to cut
    # that short and exit 130)
    with noted_stops(lambda name: stop.set()):
        if duration is not None:
            timer = threading.Timer(duration, stop.set)
            timer.daemon = True
            timer.start()
        try:
            mon.run(stop)
        finally:
            stop.set()
            if timer is not None:
                timer.cancel()
            if exporter is not None:
                exporter.stop()
            close_sources(active)
    ignore_stop_signals()  # stopped: a later stop changes nothing (exit 0)


@monitor_app.command("rules")
def rules_cmd(
    ctx: typer.Context,
    out: Path = typer.Option(None, "--out", "-o", help="Write here (default: stdout)."),
    flavour: list[str] = typer.Option(
        None, "--flavour", help=f"Exporter names to target (default: all): {', '.join(FLAVOURS)}."
    ),
    window: float = typer.Option(DEFAULT_WINDOW_S, "--window", help="Rule window, seconds."),
    for_s: float = typer.Option(60.0, "--for", help="Seconds a condition must hold to fire."),
    temp_margin: float = typer.Option(
        HealthConfig().temp_margin_c, "--temp-margin", help="Warn this close (C) to the limit."
    ),
    queue_max: float = typer.Option(
        AlertSettings().queue_waiting_max, "--queue-max", help="Alert above this many waiting."
    ),
    error_rate_max: float = typer.Option(
        AlertSettings().error_rate_max, "--error-rate-max", help="Alert above this 5xx ratio."
    ),
    amd_temp_limit: float = typer.Option(
        None, "--amd-temp-limit", help="Temperature limit (C) for AMD exporter alerts."
    ),
    amd_prefix: str = typer.Option("", "--amd-prefix", help="Prefix of AMD exporter names."),
    no_data_for: float = typer.Option(
        AlertSettings().no_data_for_s,
        "--no-data-for",
        help="Seconds of unknown verdict or vanished series before the no-data alerts fire.",
    ),
) -> None:
    """Write Prometheus alerting and recording rules equivalent to the health rules."""
    from accelbench.cli.options import given_options, refuse_unmet
    from accelbench.monitoring.rules import rules_yaml

    names = _source_list_plain(flavour)
    chosen = set(names or FLAVOURS)  # unknown names: rules_yaml says which
    amd = "amd" in chosen
    refuse_unmet(given_options(ctx), [
        ("--amd-prefix", amd, "to the amd flavour (--flavour amd, or no --flavour)"),
        ("--amd-temp-limit", amd, "to the amd flavour (--flavour amd, or no --flavour)"),
        # the amd flavour has temperature alerts only against --amd-temp-limit
        ("--temp-margin", bool(chosen - {"amd"}) or amd_temp_limit is not None,
         "to the accelbench and dcgm flavours, or to amd with --amd-temp-limit"),
    ])  # fmt: skip
    settings = AlertSettings(
        health=HealthConfig(temp_margin_c=temp_margin),
        window_s=window,
        for_s=for_s,
        queue_waiting_max=queue_max,
        error_rate_max=error_rate_max,
        amd_temp_limit_c=amd_temp_limit,
        amd_prefix=amd_prefix,
        no_data_for_s=no_data_for,
    )
    _write(rules_yaml(names, settings), out, "Prometheus rules")


@monitor_app.command("dashboard")
def dashboard_cmd(
    out: Path = typer.Option(None, "--out", "-o", help="Write here (default: stdout)."),
    title: str = typer.Option(
        "accelbench: accelerators and serving", "--title", help="Dashboard title in Grafana."
    ),
    uid: str = typer.Option("accelbench-monitor", "--uid", help="Dashboard uid."),
) -> None:
    """Write a Grafana dashboard (JSON) over the recorded series of `monitor rules`."""
    from accelbench.monitoring.dashboard import dashboard_json

    _write(dashboard_json(title=title, uid=uid), out, "Grafana dashboard")


def _source_list_plain(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    names = [x.strip() for v in values for x in v.split(",") if x.strip()]
    if not names:  # given, but empty: never read as "all"
        raise UsageError(f"--flavour is empty; choose from {', '.join(FLAVOURS)}")
    return names


def register(app: typer.Typer) -> None:
    """Attach the ``monitor`` group to the main app."""
    app.add_typer(monitor_app, name="monitor")
