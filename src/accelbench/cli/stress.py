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
def _server(
    cfg: BenchmarkConfig, server_pid: int | None, context: int | None = None, parallel: int = 0
) -> Iterator[int | None]:
    """The embedded engine, started once for the whole suite when no --url is given.
    ``context`` (tokens per slot) also lifts the model's trained context length, so the
    generated tiny model serves 131,072 tokens."""
    if cfg.url is not None:
        yield server_pid
        return
    from accelbench.servers.embedded import running_engine

    with running_engine(
        cfg.embedded_engine,
        cfg.embedded_model,
        parallel=parallel or cfg.embedded_parallel,
        log=_log,
        context=context,
    ) as s:
        cfg.url = s.url
        cfg.model = cfg.model or s.alias
        yield s.pid


def _check(cfg: BenchmarkConfig) -> None:
    """Check the load options before an engine is started (on a copy: validate fills
    defaults that the suites set per step)."""
    from dataclasses import replace

    replace(cfg, workload=replace(cfg.workload)).validate()


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
    _check(cfg)
    sc = SoakConfig(
        load=cfg, duration_s=duration, window_s=window, segment_s=segment,
        sample_s=sample_interval, server_pid=server_pid, metrics=list(metric),
        leak=LeakThresholds(_mib(leak_warn), _mib(leak_fail), horizon),
        drift=DriftThresholds(drift_warn, drift_fail), gpu=cfg.telemetry,
    )  # fmt: skip
    sc.validate()
    path = (
        resume
        if resume
        else stress_dir(load.get("out"), load.get("results_root") or "results", "soak")
    )
    with _server(cfg, server_pid) as pid:
        sc.server_pid = pid
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
    _check(cfg)
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


def _ints(text: str, name: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{name} must be comma-separated integers (got {text!r})") from None


def _server_context(url: str) -> int | None:
    """The context per slot a llama-server reports (/props), else None."""
    import asyncio

    from accelbench.client.session import get_json
    from accelbench.errors import AccelbenchError

    try:
        doc = asyncio.run(get_json(url, "/props", None, timeout=3))
    except AccelbenchError:
        return None
    if isinstance(doc, dict):
        n = (doc.get("default_generation_settings") or {}).get("n_ctx") or doc.get("n_ctx")
        return int(n) if n else None
    return None


@stress_app.command("flood")
@load_options(
    exclude=("isl", "osl", "num_requests", "duration", "concurrency", "rate", "label", "isl_dist")
)
def flood(
    lengths: str = typer.Option(None, "--lengths", help="Input lengths, e.g. 1024,8192,131072."),
    max_context: int = typer.Option(
        None, "--max-context", help="Step powers of two up to this (default: the server's /props)."
    ),
    concurrencies: str = typer.Option("1", "--concurrencies", help="e.g. 1,4"),
    requests: int = typer.Option(4, "--requests", help="Requests per step (at least -c)."),
    osl: int = typer.Option(8, "--osl", help="Output tokens per request."),
    context: int = typer.Option(
        None,
        "--context",
        help="Embedded engine: context per slot (e.g. 131072 for the tiny model).",
    ),
    server_pid: int = typer.Option(None, "--server-pid", help="Server process to watch (RSS)."),
    metric: list[str] = typer.Option([], "--metric", help="Prometheus memory gauge to judge."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No verdict table."),
    load: dict[str, Any] | None = None,
) -> None:
    """Long-context flood: TTFT and prefill throughput against input length (fitted
    a + bL + cL^2 with intervals), errors by kind, memory leak rate over the flood."""
    from accelbench.stress.common import stress_dir
    from accelbench.stress.flood import FloodConfig, default_lengths, run_flood

    load = load or {}
    cfg = config_from_options(load)
    _check(cfg)
    concs = _ints(concurrencies, "--concurrencies")
    path = stress_dir(load.get("out"), load.get("results_root") or "results", "flood")
    with _server(
        cfg, server_pid, context=context or max_context, parallel=max(concs or [1])
    ) as pid:
        if lengths:
            steps = _ints(lengths, "--lengths")
        else:
            top = max_context or context or _server_context(str(cfg.url))
            if not top:
                raise UsageError("give --lengths or --max-context (the server reports no context)")
            steps = default_lengths(top, osl)
        fc = FloodConfig(load=cfg, lengths=steps, concurrencies=concs, requests=requests,
                         osl=osl, server_pid=pid, metrics=list(metric), gpu=cfg.telemetry)  # fmt: skip
        res = run_flood(fc, path, log=_log)
    if not quiet:
        for st in res.steps:
            t = st["ttft_ms"] or {}
            typer.echo(
                f"input {st['input_tokens']:>7} c={st['concurrency']}: ok {st['ok']}/{st['requests']}"
                f"  TTFT p50 {t.get('p50', float('nan')):,.0f} ms  prefill "
                f"{st['prefill_tok_per_s_p50'] or 0:,.0f} tok/s  errors {st['errors'] or '-'}"
            )
        f = res.fit
        if "c" in f:
            typer.echo(
                f"TTFT(L) = {f['a']['estimate']:.3g} + {f['b']['estimate']:.3g} L + "
                f"{f['c']['estimate']:.3g} L^2 ms (c in [{f['c']['ci_low']:.3g}, "
                f"{f['c']['ci_high']:.3g}], R^2 {f['r2']:.4f})"
            )
    _finish("flood", res.verdicts, res.status, path, quiet)


ENDPOINT_KEYS = {"isl": int, "osl": int, "concurrency": int, "rate": float, "model": str}


def _endpoint_cfg(spec: str, base: BenchmarkConfig) -> BenchmarkConfig:
    """``URL[,key=value...]`` -> that endpoint's config (keys: isl, osl, concurrency,
    rate, model)."""
    from dataclasses import replace

    url, *pairs = spec.split(",")
    kw: dict[str, Any] = {}
    wl: dict[str, Any] = {}
    for p in pairs:
        k, sep, val = p.partition("=")
        if not sep or k not in ENDPOINT_KEYS:
            raise UsageError(
                f"--url {spec!r}: use URL[,key=value...] with keys {', '.join(ENDPOINT_KEYS)}"
            )
        try:
            v = ENDPOINT_KEYS[k](val)
        except ValueError:
            raise UsageError(f"--url {spec!r}: {k}={val!r} is not a number") from None
        (wl if k in ("isl", "osl") else kw)[k] = v
    if "rate" in kw:
        kw.setdefault("concurrency", None)
    cfg = replace(base, url=url, **kw)
    cfg.workload = replace(base.workload, **wl)
    return cfg


@stress_app.command("mixed")
@load_options(exclude=("url", "num_requests", "label", "duration"))
def mixed(
    url: list[str] = typer.Option(
        [],
        "--url",
        "-u",
        help="Endpoint, repeated: URL[,isl=N,osl=N,concurrency=N,rate=R,model=M].",
    ),
    duration: float = typer.Option(30.0, "--duration", "-d", help="Seconds per phase."),
    rounds: int = typer.Option(1, "--rounds", help="Repeat solo / together this many times."),
    window: float = typer.Option(5.0, "--window", help="Window for the jitter of p99 (s)."),
    matrix: bool = typer.Option(False, "--matrix", help="Also all-but-one phases (3+ endpoints)."),
    claim: float = typer.Option(None, "--claim", help="Claim: latency fluctuation under this %."),
    claim_stat: str = typer.Option("jitter", "--claim-stat", help="jitter | change"),
    warn_pct: float = typer.Option(10.0, "--warn", help="Interference warn threshold (%)."),
    fail_pct: float = typer.Option(50.0, "--fail", help="Interference fail threshold (%)."),
    embedded: int = typer.Option(3, "--embedded", help="Without --url: start this many engines."),
    stagger: float = typer.Option(
        3.0, "--stagger", help="Concurrent runs last this much longer (their starts differ)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No verdict table."),
    load: dict[str, Any] | None = None,
) -> None:
    """Interference between endpoints sharing a machine: each alone, then all together
    (and all but one with --matrix); change of latency percentiles vs solo and jitter,
    with 95 % intervals (docs/STRESS.md)."""
    from accelbench.stress.common import stress_dir
    from accelbench.stress.mixed import MixedConfig, run_mixed

    load = load or {}
    base = config_from_options(load)
    _check(base)
    path = stress_dir(load.get("out"), load.get("results_root") or "results", "mixed")
    with contextlib.ExitStack() as stack:
        specs = list(url)
        if not specs:
            from accelbench.servers.embedded import running_engine

            for _ in range(embedded):
                s = stack.enter_context(running_engine(
                    base.embedded_engine, base.embedded_model,
                    parallel=base.embedded_parallel, log=_log))  # fmt: skip
                specs.append(s.url)
        loads = [_endpoint_cfg(sp, base) for sp in specs]
        mc = MixedConfig(loads=loads, duration_s=duration, rounds=rounds, window_s=window,
                         matrix=matrix, claim_pct=claim, claim_stat=claim_stat,
                         warn_pct=warn_pct, fail_pct=fail_pct, stagger_s=stagger)  # fmt: skip
        res = run_mixed(mc, path, log=_log)
    if not quiet and res.matrix:
        typer.echo("interference matrix (% change of row's TTFT p50 caused by column):")
        for i, row in enumerate(res.matrix):
            cells = [
                "-" if c is None or c["estimate"] is None else f"{c['estimate']:+.1f}" for c in row
            ]
            typer.echo(f"  ep{i}: " + "  ".join(f"{c:>7}" for c in cells))
    _finish("mixed", res.verdicts, res.status, path, quiet)


def register(app: typer.Typer) -> None:
    app.add_typer(stress_app, name="stress")
