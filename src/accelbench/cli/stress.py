"""`accelbench stress soak | flood | mixed | consistency` (docs/STRESS.md).

Each writes a stress directory (its runs as ordinary run directories under runs/, and
stress.json with the verdicts and their evidence), prints a one-screen verdict table
and exits 1 when a verdict failed or the suite did not complete."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from accelbench.cli.options import SESSION_OPTIONS, config_from_options, load_options, refuse_unmet
from accelbench.errors import UsageError
from accelbench.metrics.verdict import Status, Verdict
from accelbench.runner.config import BenchmarkConfig
from accelbench.urls import Endpoint

if TYPE_CHECKING:
    from accelbench.suites.stress.common import WorkloadChanges
    from accelbench.suites.stress.soak import SoakConfig

stress_app = typer.Typer(
    help="Stress suites with verdicts: soak, flood, mixed, consistency.", no_args_is_help=True
)


def _log(msg: str) -> None:
    from accelbench.console import console, esc

    console(stderr=True).print(f"[dim]{esc(msg)}[/dim]")


def print_verdicts(title: str, verdicts: list[Verdict], status: str, path: Path) -> None:
    """The one-screen verdict table."""
    from rich.table import Table

    from accelbench.console import console, esc
    from accelbench.report.verdicts import TERMINAL_HEAD, terminal_cells

    t = Table(title=esc(f"{title}: {status}  ({path})"), show_lines=False)
    for c in TERMINAL_HEAD:
        t.add_column(c, overflow="fold")
    for v in verdicts:
        row = terminal_cells(v)
        row[1] = row[1].replace("metric:", "").replace("_bytes", "")
        t.add_row(*row)
    console(width=max(100, console().width)).print(t)
    typer.echo(
        "M/h = MiB per hour; %/h = % of the median per hour; pp/h = percentage points per hour"
    )


def _finish(
    title: str, verdicts: list[Verdict], status: str, path: Path, quiet: bool, reason: str | None
) -> None:
    from accelbench.lifetime import ignore_stop_signals

    # stress.json is written: a stop signal from now on changes nothing (the exit code is
    # the suite's: docs/PROCESSES.md); one while the table printed used to exit 130
    ignore_stop_signals()
    if not quiet:
        print_verdicts(title, verdicts, status, path)
    for v in verdicts:  # a --metric gauge the server never reported (leak_verdicts)
        if v.note.startswith("--metric "):
            typer.secho(f"warning: {v.note}", fg="yellow", err=True)
    bad = status != "completed" or any(v.status == Status.FAIL for v in verdicts)
    if bad:
        why = f" ({reason})" if reason else ""
        typer.secho(f"stress {title}: {status}{why}, see {path}/stress.json", fg="yellow",
                    err=True)  # fmt: skip
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
    from accelbench.engines.embedded import running_engine

    with running_engine(
        cfg.embedded_engine,
        cfg.embedded_model,
        parallel=parallel or cfg.embedded_parallel,
        log=_log,
        context=context,
    ) as s:
        # the steps' url is this engine's: the --embedded-* options were used, not replaced
        cfg.url, cfg.engine_started = Endpoint.parse(s.url), True
        cfg.model = cfg.model or s.alias
        yield s.pid


def _check(cfg: BenchmarkConfig) -> None:
    """The load options, checked before an engine is started or a directory made."""
    from accelbench.suites.stress.common import check_load

    check_load(cfg)


def _suite_dir(load: Mapping[str, object], kind: str) -> contextlib.AbstractContextManager[Path]:
    """The suite's directory: --out, or a new one under --results-root (not both); left
    as found when the suite is refused before its first run (``stress_dir``)."""
    from accelbench.suites.stress.common import stress_dir

    out, root = load.get("out"), load.get("results_root")
    if out is not None and (
        "--results-root" in getattr(load, "given", ()) or root not in (None, "results")
    ):
        raise UsageError("--results-root does not apply with --out, which names the directory")
    return stress_dir(str(out) if out is not None else None, str(root or "results"), kind)


def _mib(x: float) -> float:
    return x * 2**20


WARN_ERRORS = "Warn above this fraction of requests failed."
FAIL_ERRORS = "Fail above this fraction of requests failed."


@stress_app.command("soak")
@load_options(exclude=("num_requests", "label", *SESSION_OPTIONS, "block_size"))
def soak(
    window: float = typer.Option(60.0, "--window", help="Window length (s)."),
    segment: float = typer.Option(
        3600.0, "--segment", help="Length of each run directory (s); bounds client memory."
    ),
    sample_interval: float = typer.Option(
        5.0, "--sample-interval", help="Memory sampling (s; 0.1 to --window)."
    ),
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
    warn_errors: float = typer.Option(0.0, "--warn-errors", help=WARN_ERRORS),
    fail_errors: float = typer.Option(0.05, "--fail-errors", help=FAIL_ERRORS),
    resume: Path = typer.Option(
        None, "--resume", help="Continue an interrupted soak directory, as it was recorded."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No verdict table."),
    load: dict[str, Any] | None = None,
) -> None:
    """Steady load for --duration, judged per --window: leak verdicts for every memory
    series, drift verdicts for latency, throughput and error rate. `--resume DIR`
    continues a soak with the configuration recorded in DIR (docs/STRESS.md)."""
    from accelbench.suites.stress.soak import SoakConfig, run_soak
    from accelbench.suites.stress.verdicts import DriftThresholds, LeakThresholds

    load = load or {}
    if resume is not None:
        sc = _resumed_soak(resume, load)
        path = resume
    else:
        if load.get("duration") is None:
            raise UsageError("stress soak needs --duration (seconds)")
        cfg = config_from_options(load)
        refuse_unmet(getattr(load, "given", ()), [
            ("--server-pid", cfg.url is not None, "with --url (the embedded engine's own is watched)"),
        ])  # fmt: skip
        _check(cfg)
        sc = SoakConfig(
            load=cfg, duration_s=float(load["duration"]), window_s=window, segment_s=segment,
            sample_s=sample_interval, server_pid=server_pid, metrics=list(metric),
            leak=LeakThresholds(_mib(leak_warn), _mib(leak_fail), horizon),
            drift=DriftThresholds(drift_warn, drift_fail), warn_errors=warn_errors,
            fail_errors=fail_errors, gpu=cfg.telemetry, embedded=cfg.url is None,
        )  # fmt: skip
        sc.validate()
    with (
        contextlib.nullcontext(resume) if resume is not None else _suite_dir(load, "soak") as path,
        _server(sc.load, sc.server_pid) as pid,
    ):
        sc.server_pid = pid
        res = run_soak(sc, path, resume=resume is not None, log=_log)
    _finish("soak", res.verdicts, res.status, path, quiet, res.reason)


# what `stress soak --resume` may be given beside the directory: --duration extends (or
# ends) the soak, --url repeats the recorded server's address with the credentials that
# are never recorded; every other option is the recorded one (docs/STRESS.md)
RESUME_MAY_CHANGE = ("--resume", "--quiet", "--duration", "--url")


def _resumed_soak(resume: Path, load: dict[str, Any]) -> SoakConfig:
    from accelbench import validate as v
    from accelbench.suites.stress.soak import recorded_config
    from accelbench.validate import check_url

    given = sorted(getattr(load, "given", frozenset()) - set(RESUME_MAY_CHANGE))
    if given:
        names = ", ".join(given)
        raise UsageError(
            f"--resume continues with the configuration recorded in {resume}/stress.json: "
            f"drop {names} (only --duration, --url of the same server and --quiet may be given)"
        )
    if not resume.is_dir():
        raise UsageError(f"--resume {resume} is not a soak directory")
    sc = recorded_config(resume)
    if load.get("duration") is not None:
        sc.duration_s = v.number("--duration", load["duration"], 1.0, 30 * 86400.0, unit="s")
    url = load.get("url")
    recorded = sc.load.url  # as stress.json stores it: never the credentials
    if url is not None:
        check_url(url)
        server = Endpoint.parse(url)
        if sc.embedded or recorded is None or server.display != recorded.display:
            raise UsageError(
                f"--resume: --url {server.display} is not the server the soak ran against "
                f"({recorded or 'the embedded engine'}); one soak judges one server"
            )
        sc.load.url = server  # with its credentials, which stress.json never holds
    elif recorded is not None and recorded.needs_credentials:
        raise UsageError(
            f"--resume: the soak's server {sc.load.url} needs its credentials, which are "
            "never recorded: give --url with them again"
        )
    if sc.embedded:
        sc.load.url = None  # a fresh embedded engine, as recorded
    return sc


@stress_app.command("consistency")
@load_options(exclude=("url", "num_requests", "duration", "concurrency", "rate", "label",
                       *SESSION_OPTIONS, "block_size"))  # fmt: skip
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
    from accelbench.suites.stress.consistency import ConsistencyConfig, run_consistency

    load = load or {}
    cfg = config_from_options(load, url=url[0] if url else None)
    _check(cfg)

    def suite(urls: Sequence[str | Endpoint]) -> ConsistencyConfig:
        cc = ConsistencyConfig(
            load=cfg, urls=[Endpoint.parse(u) for u in urls], prompts=prompts, repeats=repeats,
            loaded_concurrency=loaded_concurrency or None, pause_s=pause,
            warn_divergent=warn_divergent, fail_divergent=fail_divergent,
        )  # fmt: skip
        cc.validate()
        return cc

    suite(list(url) or ["http://127.0.0.1"])  # every option before an engine starts
    with _suite_dir(load, "consistency") as path, _server(cfg, None):
        res = run_consistency(suite(list(url) or [cfg.url or ""]), path, log=_log)
    if not quiet:
        for c in res.comparisons:
            sim = "-" if c.similarity_mean is None else f"{c.similarity_mean:.4f}"
            typer.echo(
                f"{c.run}: {c.identical}/{c.compared} identical, first diff at "
                f"{c.first_diff_min}, similarity {sim}"
            )
    _finish("consistency", res.verdicts, res.status, path, quiet, res.reason)


def _ints(text: str, name: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{name} must be comma-separated integers (got {text!r})") from None


def _server_context(url: Endpoint) -> int | None:
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
    exclude=(
        "isl",
        "osl",
        "num_requests",
        "duration",
        "concurrency",
        "rate",
        "label",
        "isl_dist",
        # each step is a closed loop of --lengths-token synthetic prompts: never these
        "isl_std",
        "dataset",
        "dataset_format",
        "trace",
        "arrival",
        "burstiness",
        "max_concurrency",
        *SESSION_OPTIONS,
        "block_size",
    )
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
    warn_errors: float = typer.Option(0.0, "--warn-errors", help=WARN_ERRORS),
    fail_errors: float = typer.Option(0.05, "--fail-errors", help=FAIL_ERRORS),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No verdict table."),
    load: dict[str, Any] | None = None,
) -> None:
    """Long-context flood: TTFT and prefill throughput against input length (fitted
    a + bL + cL^2 with intervals), errors by kind, memory leak rate over the flood."""
    from accelbench import validate as v
    from accelbench.suites.stress.flood import FloodConfig, default_lengths, run_flood

    load = load or {}
    cfg = config_from_options(load)
    embedded, listed = cfg.url is None, lengths is not None
    refuse_unmet(getattr(load, "given", ()), [
        ("--server-pid", not embedded, "with --url (the embedded engine's own is watched)"),
        ("--context", embedded or not (listed or max_context),
         "for the embedded engine, or with --url as the top of the lengths"),
        ("--max-context", not listed or (embedded and context is None),
         "without --lengths (the top of the lengths), or as the embedded engine's context"),
    ])  # fmt: skip
    _check(cfg)
    concs = _ints(concurrencies, "--concurrencies")
    given = _ints(lengths, "--lengths") if lengths is not None else None
    v.optional_integer("--max-context", max_context, 1, 1 << 22, unit="tokens")
    v.optional_integer("--context", context, 1, 1 << 22, unit="tokens")
    top = max_context or context

    def suite(steps: list[int], pid: int | None) -> FloodConfig:
        fc = FloodConfig(load=cfg, lengths=steps, concurrencies=concs, requests=requests,
                         osl=osl, server_pid=pid, metrics=list(metric), gpu=cfg.telemetry,
                         warn_errors=warn_errors, fail_errors=fail_errors)  # fmt: skip
        fc.validate()
        return fc

    # every option before an engine starts; the lengths may come from the server
    suite(given if given is not None else default_lengths(top, osl) if top else [1], server_pid)
    with (
        _suite_dir(load, "flood") as path,
        _server(cfg, server_pid, context=context or max_context, parallel=max(concs or [1])) as pid,
    ):
        if given is not None:
            steps = given
        else:
            top = top or (_server_context(cfg.url) if cfg.url else None)
            if not top:
                raise UsageError("give --lengths or --max-context (the server reports no context)")
            steps = default_lengths(top, osl)
        res = run_flood(suite(steps, pid), path, log=_log)
    if not quiet:
        for st in res.steps:
            p50 = (st.ttft_ms or {}).get("p50")
            typer.echo(
                f"input {st.input_tokens:>7} c={st.concurrency}: ok {st.ok}/{st.requests}"
                f"  TTFT p50 {float('nan') if p50 is None else p50:,.0f} ms  prefill "
                f"{st.prefill_tok_per_s_p50 or 0:,.0f} tok/s  errors {st.errors or '-'}"
            )
        f = res.fit
        a, b, c = (f.coef.get(k) for k in "abc")
        if a and b and c and a.estimate is not None and b.estimate is not None:
            typer.echo(
                f"TTFT(L) = {a.estimate:.3g} + {b.estimate:.3g} L + {c.estimate or 0:.3g} L^2 ms "
                f"(c in [{c.ci_low or 0:.3g}, {c.ci_high or 0:.3g}], R^2 {f.r2 or 0:.4f})"
            )
    _finish("flood", res.verdicts, res.status, path, quiet, res.reason)


ENDPOINT_KEYS = {"isl": int, "osl": int, "concurrency": int, "rate": float, "model": str}


def _endpoint_cfg(spec: str, base: BenchmarkConfig) -> BenchmarkConfig:
    """``URL[,key=value...]`` -> that endpoint's config (keys: isl, osl, concurrency,
    rate, model)."""
    from dataclasses import replace

    from accelbench import validate
    from accelbench.urls import redact_url

    url, *pairs = spec.split(",")  # a raw spec from the command line: redact_url shows it
    where = f"--url {redact_url(spec)!r}"
    validate.distinct(where, [p.partition("=")[0] for p in pairs])  # never a silent last-wins
    given: dict[str, int | float | str] = {}
    for p in pairs:
        k, sep, val = p.partition("=")
        if not sep or k not in ENDPOINT_KEYS:
            raise UsageError(
                f"{where}: use URL[,key=value...] with keys {', '.join(ENDPOINT_KEYS)}"
            )
        if not val.strip():
            raise UsageError(f"{where}: {k}= is empty (give a value, or leave {k} out)")
        try:
            v = ENDPOINT_KEYS[k](val)
        except ValueError:
            raise UsageError(f"{where}: {k}={val!r} is not a number") from None
        given[k] = v
    cfg = replace(base, url=Endpoint.parse(url))
    if "model" in given:
        cfg.model = str(given["model"])
    if "concurrency" in given:
        cfg.concurrency = int(given["concurrency"])
    if "rate" in given:  # open loop: no concurrency unless given with it
        cfg.rate = float(given["rate"])
        cfg.concurrency = cfg.concurrency if "concurrency" in given else None
    wl: WorkloadChanges = {}
    if "isl" in given:
        wl["isl"] = int(given["isl"])
    if "osl" in given:
        wl["osl"] = int(given["osl"])
    cfg.workload = replace(base.workload, **wl)
    return cfg


@stress_app.command("mixed")
@load_options(exclude=("url", "num_requests", "label", "duration", *SESSION_OPTIONS,
                       "block_size"))  # fmt: skip
def mixed(
    url: list[str] = typer.Option(
        [],
        "--url",
        "-u",
        help="Endpoint, repeated: URL[,isl=N,osl=N,concurrency=N,rate=R,model=M].",
    ),
    duration: float = typer.Option(
        60.0,
        "--duration",
        "-d",
        help="Seconds per phase (12 windows of 5 s: the fewest a jitter interval needs).",
    ),
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
    from accelbench import validate as v
    from accelbench.suites.stress.mixed import MixedConfig, run_mixed

    load = load or {}
    base = config_from_options(load)
    endpoints = len(url) if url else embedded
    refuse_unmet(getattr(load, "given", ()), [
        ("--embedded", not url, "without --url (it starts that many engines)"),
        ("--claim-stat", claim is not None, "with --claim"),
        ("--matrix", endpoints > 2, "with 3 or more endpoints (all but one of 2 is one alone)"),
    ])  # fmt: skip
    _check(base)

    def suite(loads: list[BenchmarkConfig]) -> MixedConfig:
        mc = MixedConfig(loads=loads, duration_s=duration, rounds=rounds, window_s=window,
                         matrix=matrix, claim_pct=claim, claim_stat=claim_stat,
                         warn_pct=warn_pct, fail_pct=fail_pct, stagger_s=stagger)  # fmt: skip
        mc.validate()  # every endpoint's overrides too
        return mc

    # every option, and every endpoint's overrides, before an engine starts or ep0 runs
    if url:
        mc = suite([_endpoint_cfg(sp, base) for sp in url])
    else:
        v.integer("--embedded", embedded, 2, 64)
        suite([base] * embedded)
    with _suite_dir(load, "mixed") as path, contextlib.ExitStack() as stack:
        if not url:
            from dataclasses import replace

            from accelbench.engines.embedded import running_engine

            specs = []
            for _ in range(embedded):
                s = stack.enter_context(running_engine(
                    base.embedded_engine, base.embedded_model,
                    parallel=base.embedded_parallel, log=_log))  # fmt: skip
                specs.append(s.url)
            mc = suite([replace(_endpoint_cfg(sp, base), engine_started=True) for sp in specs])
        res = run_mixed(mc, path, log=_log)
    if not quiet and res.matrix:
        typer.echo("interference matrix (% change of row's TTFT p50 caused by column):")
        for i, row in enumerate(res.matrix):
            cells = ["-" if c is None or c.estimate is None else f"{c.estimate:+.1f}" for c in row]
            typer.echo(f"  ep{i}: " + "  ".join(f"{c:>7}" for c in cells))
    _finish("mixed", res.verdicts, res.status, path, quiet, res.reason)


def register(app: typer.Typer) -> None:
    app.add_typer(stress_app, name="stress")
