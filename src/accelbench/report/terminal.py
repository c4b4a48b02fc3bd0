"""The summary table printed at the end of a run: of the run's result as it ended
(``print_summary``), or of a directory read back through the store's readers
(``print_run_dir``: ``summarize``, an MLPerf run)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from accelbench.console import console as make_console
from accelbench.console import esc
from accelbench.metrics.format import fixed
from accelbench.metrics.summary import Summary
from accelbench.report.cache import cache_lines
from accelbench.store.rundoc import RunDoc, read_run_doc, read_summary

if TYPE_CHECKING:
    from accelbench.runner.benchmark import RunResult


def _f(v: Any, digits: int = 2) -> str:
    return esc(v) if isinstance(v, str) else fixed(v, digits)


def summary_table(summary: Summary, title: str = "") -> Table:
    t = Table(title=title or None, show_header=True, header_style="bold")
    t.add_column("metric")
    for q in ("mean", "p50", "p90", "p99", "p99.9", "max"):
        t.add_column(q, justify="right")
    lat = summary["latency"]
    for key, label in (
        ("ttft_ms", "TTFT ms"),
        ("tpot_ms", "TPOT ms"),
        ("chunk_gap_ms", "chunk gap ms (vLLM ITL)"),
        ("e2e_ms", "E2E ms"),
        ("ntpot_ms", "NTPOT ms"),
        ("schedule_lag_ms", "schedule lag ms"),
    ):
        s = lat[key]
        t.add_row(label, *(_f(s.get(q)) for q in ("mean", "p50", "p90", "p99", "p99.9", "max")))
    return t


def _e(x: object) -> str:
    """Data as literal text: a server's or a file's words never become Rich markup."""
    return esc(x)


def _p(console: Console, *parts: object) -> None:
    console.print(*parts, emoji=False)  # ":cd:" in a bus id stays ":cd:"


def load_description(cfg: Mapping[str, Any]) -> str:
    """How the run sent its load, as run.json's config says: a trace replay is an open
    loop at the trace's own arrival times (never "concurrency 1")."""
    from accelbench.runner.config import run_mode

    mode = run_mode(cfg)
    cap = f", at most {cfg['max_concurrency']} in flight" if cfg.get("max_concurrency") else ""
    if mode == "trace":
        name = Path(str((cfg.get("workload") or {}).get("trace"))).name
        return f"trace replay {name}: open loop at its arrival times{cap}"
    if mode == "rate":
        return f"rate {cfg.get('rate')} req/s, {cfg.get('arrival')} arrivals{cap}"
    return f"concurrency {cfg.get('concurrency')}"


def print_summary(result: RunResult, console: Console | None = None) -> None:
    """The summary of a run that just ended, from its result (nothing is read back)."""
    _print(result.doc, result.summary, result.directory, console)


def print_run_dir(
    run_dir: Path, console: Console | None = None, summary: Summary | None = None
) -> None:
    """The summary of a run directory, read through the store's readers of run.json
    and summary.json (a damaged file is one DocumentError line); ``summary``: the one
    just written (``summarize``), not read back."""
    if summary is None:
        summary, _dropped = read_summary(Path(run_dir))
    _print(read_run_doc(Path(run_dir)), summary, Path(run_dir), console)


def _print(doc: RunDoc, s: Summary, run_dir: Path, console: Console | None) -> None:
    console = console or make_console()
    cfg = doc.config
    c, thr = s["counts"], s["throughput"]
    load = load_description(cfg)
    _p(
        console,
        f"[bold]{_e(doc.run_id)}[/bold]  {_e(cfg.get('model'))} @ "
        f"{_e(doc.server.get('url'))}  ({_e(load)}, status [bold]{_e(s['status'])}[/bold])",
    )
    if acc := doc.server.get("emulated"):
        _p(console, f"[bold yellow]EMULATED[/bold yellow]: {_e(acc)} as `accelbench serve "
                    "emulated` predicts it; these figures are a prediction, not a measurement")  # fmt: skip
    _p(
        console,
        f"requests: {c['completed']} ok, {c['failed']} failed, {c['warmup']} warm-up, "
        f"{c['interrupted']} interrupted;  window {_f(s['window']['duration_s'])} s",
    )
    _p(
        console,
        f"throughput: {_f(thr['requests_per_s'])} req/s, output {_f(thr['output_tokens_per_s'], 1)} tok/s, "
        f"total {_f(thr['total_tokens_per_s'], 1)} tok/s  "
        f"(per GPU x{s['gpus']}: output {_f(thr['output_tokens_per_s_per_gpu'], 1)}, "
        f"total {_f(thr['total_tokens_per_s_per_gpu'], 1)})",
    )
    inter = s["interactivity"]["tok_s_user"]
    _p(
        console,
        f"interactivity: {_f(inter, 1)} tok/s/user (1000 / median TPOT);  tokens: "
        f"{s['tokens']['input']:,} in / {s['tokens']['output']:,} out "
        f"(OSL from {_e(', '.join(s['tokens']['osl_source']) or '-')})",
    )
    _p(console, summary_table(s))
    if g := s.get("goodput"):
        _p(
            console,
            f"goodput under {_e(g['slo'])}: {_f(g['requests_per_s'])} req/s, "
            f"{_f(g['output_tokens_per_s'], 1)} tok/s ({_f(100 * (g['fraction'] or 0), 1)}% of requests)",
        )
    if s["errors"]["count"]:
        _p(
            console,
            f"[red]errors[/red]: {_e(s['errors']['by_kind'])}  HTTP {_e(s['errors']['by_status'])}",
        )
    if (cache := s.get("cache")) is not None:
        for line in cache_lines(cache):
            _p(console, _e(line))
    cl = s["client"]
    if cl.get("n_workers") is None:  # a run killed before its client said (summarize)
        _p(console, "client: not recorded (the run ended before its load workers reported)")
    else:
        _client_line(console, cl)
    for w in cl.get("warnings", []):
        _p(console, f"[yellow]warning[/yellow]: {_e(w)}")
    if s.get("health"):
        h = s["health"]
        _p(console, f"health: {_e(h.get('verdict'))}")
        for f in h.get("findings") or []:
            if f.get("severity") in ("warn", "fail"):
                _p(console, f"  {_e(f['severity'])}: {_e(f.get('message', f.get('rule')))}")
    if (e := s.get("energy")) and e.get("joules"):
        _p(
            console,
            f"energy: {_f(e['joules'], 1)} J in the window ({_e(e.get('method'))}), "
            f"{_f(e.get('j_per_output_token'), 3)} J per output token",
        )
        for w in e.get("warnings") or []:
            _p(console, f"[yellow]warning[/yellow]: energy: {_e(w)}")
    _p(console, f"results: {_e(run_dir)}")


def _client_line(console: Console, cl: Mapping[str, Any]) -> None:
    """The load client's line: workers, CPU, loop lag, where chunk times came from."""
    _p(
        console,
        f"client: {cl.get('n_workers')} worker(s), CPU {_f(cl.get('cpu_s'))} s, "
        f"{_f(cl.get('cpu_us_per_chunk'), 1)} us CPU per chunk, loop lag p99 "
        f"{_f(cl.get('loop_lag_ms_p99'))} ms"
        + (
            f", chunk times from the kernel (reads waited p99 {_f(cl.get('read_delay_ms_p99'))} ms)"
            if cl.get("arrival_stamps") == "kernel"
            else ""
        ),
    )
