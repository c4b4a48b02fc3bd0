"""`accelbench shadow proxy | replay | verdict` (docs/SHADOW.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from accelbench.cli.options import SESSION_OPTIONS, config_from_options, load_options
from accelbench.lifetime import exit_now

if TYPE_CHECKING:
    from accelbench.suites.shadow.document import ShadowVerdictDoc

shadow_app = typer.Typer(
    help="Shadow traffic: a candidate beside the baseline, and a go / no-go verdict.",
    no_args_is_help=True,
)


def _default_out(kind: str) -> str:
    return f"results/shadow-{kind}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"


def _log(msg: str) -> None:
    from accelbench.console import console, esc

    console(stderr=True).print(f"[dim]{esc(msg)}[/dim]")


@shadow_app.command("proxy")
def proxy_cmd(
    listen: str = typer.Option("127.0.0.1:8100", help="HOST:PORT the proxy serves on."),
    baseline: str = typer.Option(
        ..., help="The system callers get answers from (http://host:port)."
    ),
    candidate: str = typer.Option(
        ..., help="The system under evaluation (copies, answers discarded)."
    ),
    sample: float = typer.Option(
        1.0, help="Fraction of requests copied to the candidate (above 0, up to 1)."
    ),
    max_inflight: int = typer.Option(
        256, help="Copies in flight at most; more are dropped and counted."
    ),
    candidate_timeout: float = typer.Option(120.0, help="Timeout of a copy (s)."),
    timeout: float = typer.Option(600.0, help="Timeout of a baseline request (s)."),
    candidate_model: str = typer.Option(None, help="Model name to put in the copies."),
    candidate_api_key_env: str = typer.Option(
        None, help="Variable holding the candidate's API key."
    ),
    max_requests: int = typer.Option(None, help="Stop after this many recorded requests."),
    duration: float = typer.Option(None, help="Stop after this many seconds."),
    out: str = typer.Option(
        None, "--out", "-o", help="Shadow directory (default `results/shadow-proxy-<time>`)."
    ),
    seed: int = typer.Option(None, help="Seed of the sampling (default 0; with --sample < 1)."),
) -> None:
    """Serve as an OpenAI-compatible proxy: the baseline answers callers (relayed byte for
    byte), the candidate gets a copy that is measured and discarded. Ctrl-C, SIGTERM or
    SIGHUP stops it (status `interrupted`, exit 1; requests in flight are cut and recorded
    as such), `--duration` or `--max-requests` ends it (`completed`, exit 0); everything is
    journalled in the shadow directory as it happens."""

    from accelbench import validate as v
    from accelbench.client.session import load_api_key
    from accelbench.suites.shadow.proxy import ProxyConfig, parse_listen, run_proxy
    from accelbench.urls import Endpoint

    if candidate_api_key_env is not None:
        v.env_var("--candidate-api-key-env", candidate_api_key_env)
    host, port = parse_listen(listen)
    cfg = ProxyConfig(
        baseline=Endpoint.parse(baseline), candidate=Endpoint.parse(candidate),
        out=out or _default_out("proxy"), host=host,
        port=port, sample=sample, max_inflight=max_inflight, candidate_timeout_s=candidate_timeout,
        baseline_timeout_s=timeout, candidate_model=candidate_model,
        candidate_api_key=load_api_key(candidate_api_key_env, None),
        max_requests=max_requests, duration_s=duration, seed=seed,
    )  # fmt: skip

    def ready(p: int) -> None:
        typer.echo(f"shadow proxy on http://{host}:{p} -> baseline {cfg.baseline.display}, "
                   f"candidate {cfg.candidate.display}; Ctrl-C stops it", err=True)  # fmt: skip

    d, status = run_proxy(cfg, ready)
    typer.echo(str(d))
    if status != "completed":
        typer.secho(f"proxy {status}: what it recorded is in {d}", fg="yellow", err=True)
        exit_now(1)  # stopped by a signal, files written


_REPLAY_EXCLUDE = (
    "url", "concurrency", "isl", "isl_dist", "osl_dist", "range_ratio", "range_convention",
    "isl_std", "osl_std", "dataset", "dataset_format", "duration", "warmup", "drain_timeout",
    "workers", "gpus", "slo", "save_text", "label",
    "embedded_engine", "embedded_model", "embedded_parallel", "results_root", "out",
    *SESSION_OPTIONS,
    "ray",  # one process sends both sides' requests: listed in --help, it was always refused
)  # fmt: skip


@shadow_app.command("replay")
@load_options(exclude=_REPLAY_EXCLUDE)
def replay_cmd(
    trace: str = typer.Option(
        ..., help="Trace: a shadow dir / trace.jsonl, Azure CSV, Mooncake JSONL, ShareGPT."
    ),
    baseline: str = typer.Option(..., help="Baseline URL (http://host:port)."),
    candidate: str = typer.Option(..., help="Candidate URL."),
    speed: float = typer.Option(1.0, help="Time scale: 2 replays twice as fast."),
    sequential: bool = typer.Option(
        False, help="Baseline first, then the candidate (not both at once)."
    ),
    candidate_model: str = typer.Option(
        None, help="The candidate's model (default: --model, else its first)."
    ),
    candidate_api_key_env: str = typer.Option(
        None, help="Variable holding the candidate's API key."
    ),
    trace_format: str = typer.Option(
        "auto", help="auto | accelbench | azure | mooncake | sharegpt"
    ),
    out: str = typer.Option(
        None, "--out", "-o", help="Shadow directory (default `results/shadow-replay-<time>`)."
    ),
    load: dict[str, Any] | None = None,
) -> None:
    """Replay a trace to the baseline and the candidate at its arrival times (or scaled),
    measuring both on one clock; then `accelbench shadow verdict DIR`."""
    from accelbench.suites.shadow.replay import ReplayOptions, replay
    from accelbench.urls import Endpoint

    cfg = config_from_options(load or {}, trace=trace)
    opt = ReplayOptions(
        baseline=Endpoint.parse(baseline), candidate=Endpoint.parse(candidate),
        out=out or _default_out("replay"), speed=speed,
        sequential=sequential, candidate_model=candidate_model,
        candidate_api_key_env=candidate_api_key_env, trace_format=trace_format,
        block_size=cfg.workload.trace_block_size,
    )  # fmt: skip
    d, status = replay(cfg, opt, _log)
    typer.echo(str(d))
    if status != "completed":
        typer.secho(f"replay {status}: what finished is in {d}", fg="yellow", err=True)
        exit_now(1)  # stopped by a signal, files written


@shadow_app.command("verdict")
def verdict_cmd(
    shadow_dir: Path = typer.Argument(..., help="A shadow directory (proxy or replay)."),
    gate: list[str] = typer.Option(
        [], "--gate", "-g", help="METRIC OP VALUE, e.g. 'ttft_p99 <= +10%', 'error_rate <= +0.5pp'."
    ),
    window: float = typer.Option(None, help="Window length (s); default: a quarter of the span."),
    confidence: float = typer.Option(0.95, help="Interval confidence (0.5 to 0.999)."),
    json_out: bool = typer.Option(False, "--json", help="Print verdict.json instead of the table."),
) -> None:
    """Go / no-go / inconclusive, per gate with its statistic, interval and threshold.
    Exit 0 go, 1 no-go, 3 inconclusive, 2 bad usage. Writes DIR/verdict.json, but never
    over one computed from more paired requests (kept, and said)."""
    import json

    from accelbench.suites.shadow.verdict import shadow_verdict

    doc = shadow_verdict(shadow_dir, gate, window_s=window, confidence=confidence)
    if json_out:
        typer.echo(json.dumps(doc.to_json(), indent=2, default=str))
    else:
        print_verdict(doc)
    raise typer.Exit(doc.exit_code or 0)


def records_line(doc: ShadowVerdictDoc) -> str:
    """How many records of each side were read, paired and left unpaired."""
    read = {k: s.requests for k, s in doc.sides.items()}
    return (
        f"records read: {read.get('baseline', 0)} baseline, {read.get('candidate', 0)} "
        f"candidate; {doc.paired_requests} paired; unpaired: "
        f"{doc.unpaired.get('baseline', 0)} baseline, {doc.unpaired.get('candidate', 0)} candidate"
    )


def print_verdict(doc: ShadowVerdictDoc) -> None:
    from rich.table import Table

    from accelbench.console import console, esc
    from accelbench.metrics.format import with_unit
    from accelbench.metrics.verdict import word
    from accelbench.report.verdicts import COLOUR, TERMINAL_HEAD, terminal_cells

    con = console(width=max(console().width, 120))
    t = Table(
        title=f"shadow verdict: {esc(doc.shadow_dir)} ({doc.paired_requests} paired requests)"
    )
    for col in (*TERMINAL_HEAD, "baseline -> candidate", "test"):
        t.add_column(col)
    for entry in doc.gates:
        g = entry.verdict
        ev = g.evidence
        side_u = "ms" if g.unit in ("ratio", "ms") else "fraction"
        sides = f"{with_unit(_num(ev.get('baseline')), side_u)} -> "
        sides += with_unit(_num(ev.get("candidate")), side_u)
        test = f"{ev['test']} p={ev['p_value']:.2g}" if ev.get("test") else esc(g.note or "-")
        t.add_row(*terminal_cells(g), esc(sides), test)
    con.print(t)
    for entry in doc.gates:
        g = entry.verdict
        if g.note and g.evidence.get("test"):
            con.print(f"  {esc(g.name)}: {esc(g.note)}")
        for d in entry.first_differences[:3]:
            con.print(f"  request {d['idx']} differs at char {d['at_char']}: "
                      f"{esc(repr(d['baseline']))} vs {esc(repr(d['candidate']))}")  # fmt: skip
    if doc.windows:
        wt = Table(title="per window")
        wt.add_column("window (s)")
        wt.add_column("requests")
        wt.add_column("verdict")
        for entry in doc.gates:
            wt.add_column(esc(entry.verdict.name))
        for w in doc.windows:
            wc = COLOUR[w.status]
            cells = [f"[{COLOUR[wg.status]}]{esc(with_unit(wg.verdict.estimate, wg.verdict.unit))}[/]"
                     for wg in w.gates]  # fmt: skip
            wt.add_row(
                f"{w.start_s:.1f}-{w.end_s:.1f}", str(w.requests),
                f"[{wc}]{word(w.status, 'shadow')}[/]", *cells,
            )  # fmt: skip
        con.print(wt)
    if doc.counters:
        con.print("counters: " + ", ".join(f"{k} {v}" for k, v in sorted(doc.counters.items())))
    r = doc.resources or {}
    if r.get("telemetry") == "off":
        con.print(f"resources: telemetry off ({r.get('reason')})", markup=False)
    else:
        from accelbench.suites.shadow.verdict import resources_line

        for side in ("baseline", "candidate"):
            con.print(f"resources, {side}: {resources_line(r.get(side))}", markup=False)
    for name, n in doc.unreadable_lines.items():
        con.print(f"skipped {n} unreadable line(s) of {name} (torn or damaged)", markup=False)
    con.print(records_line(doc), markup=False)
    for line in doc.warnings:
        con.print(f"warning: {line}", markup=False)
    vc = COLOUR[doc.status]
    con.print(f"[bold {vc}]verdict: {doc.word.upper()}[/] (exit {doc.exit_code})")


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def register(app: typer.Typer) -> None:
    app.add_typer(shadow_app, name="shadow")
