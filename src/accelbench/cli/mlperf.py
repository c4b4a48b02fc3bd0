"""`accelbench mlperf offline | server | interactive | single-stream`: MLPerf scenarios
on MLCommons LoadGen with accelbench as the system under test (docs/MLPERF.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from accelbench.cli.options import (
    SESSION_OPTIONS,
    config_from_options,
    load_options,
    refuse_unused,
)
from accelbench.lifetime import exit_now

# accelbench run's options that mean nothing here: LoadGen decides when queries go out
# and how many; --dataset is declared below with the MLPerf dataset shape added.
EXCLUDE = (
    "concurrency", "rate", "arrival", "burstiness", "num_requests", "duration", "warmup",
    "drain_timeout", "workers", "telemetry", "telemetry_interval", "dataset", "dataset_format",
    *SESSION_OPTIONS, "block_size",
    "ray",  # one LoadGen process sends every query: listed in --help, it was always refused
)  # fmt: skip

HELP = {
    "offline": "Offline: every sample in one query (at most 512 in flight unless "
    "--max-concurrency says otherwise); the result is throughput.",
    "server": "Server: Poisson arrivals at --target-qps, held to the p99 TTFT / TPOT limits.",
    "interactive": "Interactive: the Server scenario with the benchmark's interactive limits.",
    "single-stream": "SingleStream: one query at a time; the result is the latency.",
}


def _log(msg: str) -> None:
    from accelbench.console import console, esc

    console(stderr=True).print(f"[dim]{esc(msg)}[/dim]")


def _command(scenario: str) -> Callable[..., None]:
    @load_options(exclude=EXCLUDE)
    def command(
        benchmark: str = typer.Option(
            "llama2-70b",
            "--benchmark",
            "-b",
            help="mlperf.conf model whose rules apply: llama2-70b, llama3_1-405b, llama3_1-8b, "
            "llama3_1-8b-edge, mixtral-8x7b, deepseek-r1, gpt-oss-120b.",
        ),
        user_conf: str = typer.Option(
            None, "--user-conf", help="LoadGen user.conf applied over the benchmark's mlperf.conf."
        ),
        target_qps: float = typer.Option(
            None, "--target-qps", help="Server: the arrival rate; Offline: the expected QPS."
        ),
        min_duration: float = typer.Option(
            None,
            "--min-duration",
            help="Override the minimum duration (s); below the "
            "benchmark's, the run is labelled non-compliant.",
        ),
        min_query_count: int = typer.Option(
            None, "--min-query-count", help="Override the minimum query (Offline: sample) count."
        ),
        find_peak: bool = typer.Option(
            False,
            "--find-peak",
            help="Server / interactive: LoadGen's search for the highest "
            "valid QPS (FindPeakPerformance), starting at --target-qps.",
        ),
        trace: bool = typer.Option(
            False,
            "--trace",
            help="Keep LoadGen's trace (mlperf_log_trace.json, for chrome://tracing; "
            "~1.6 kB a query) and record from it how late queries reached the SUT "
            "(mlperf.json's sut.loadgen_issue_*).",
        ),
        samples: int = typer.Option(
            None,
            "--samples",
            help="Sample set size: synthetic (exact --isl / --osl lengths; default 1024) or "
            "drawn from an accelbench --dataset; an MLPerf dataset's records are its samples.",
        ),
        dataset: str = typer.Option(
            None,
            "--dataset",
            help="MLPerf LLM set (JSON / JSONL records with input, "
            "tok_input, output...; a .pkl with --allow-pickle) or an accelbench dataset.",
        ),
        dataset_format: str = typer.Option(
            "auto", "--dataset-format", help="auto | mlperf | sharegpt | prompts | chat"
        ),
        allow_pickle: bool = typer.Option(
            False,
            "--allow-pickle",
            help="Read a pickled dataset (runs code from the file: only files you trust).",
        ),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the result line."),
        load: dict[str, Any] | None = None,
    ) -> None:
        from accelbench.suites.mlperf.run import QslOptions, loadgen_parked, run_mlperf
        from accelbench.suites.mlperf.settings import MlperfSettings

        if dataset is None:  # typed at their defaults, still unused
            unused = {"--dataset-format", "--allow-pickle"} & getattr(load, "given", frozenset())
            refuse_unused(unused, (), "mlperf without --dataset")
        cfg = config_from_options(load or {}, telemetry=False)
        ms = MlperfSettings(
            scenario=scenario, benchmark=benchmark, user_conf=user_conf, target_qps=target_qps,
            min_duration_s=min_duration, min_query_count=min_query_count, find_peak=find_peak,
            trace=trace,
        )  # fmt: skip
        qsl = QslOptions(
            samples=samples, dataset=dataset, dataset_format=dataset_format,
            allow_pickle=allow_pickle,
        )  # fmt: skip
        try:
            res = run_mlperf(cfg, ms, qsl, log=None if quiet else _log)
            show_result(res, quiet=quiet)
        except Exception as exc:
            if loadgen_parked():
                typer.secho(f"error: {type(exc).__name__}: {exc}", fg="red", err=True)
                exit_now(70)
            raise
        if res.loadgen_running or res.status == "interrupted":
            # stopped: every file is written; LoadGen's parked thread crashes a teardown
            exit_now(1)
        if not res.ok:
            raise typer.Exit(1)

    command.__doc__ = (
        f"{HELP[scenario]}\n\nMLCommons LoadGen drives accelbench's client; writes an "
        "accelbench run directory plus LoadGen's mlperf_log_summary.txt / "
        "mlperf_log_detail.txt and mlperf.json. Exit 0 when LoadGen says VALID and every "
        "sample succeeded, 1 when INVALID, a sample failed or the run did not complete "
        "(Ctrl-C, SIGTERM, SIGHUP: records kept), 2 for bad options."
    )
    return command


def show_result(res: Any, *, quiet: bool = False) -> None:
    """LoadGen's verdict, the compliance label and accelbench's own summary."""
    from accelbench.console import console as make_console
    from accelbench.console import esc as escape

    console = make_console()
    if not quiet:
        from accelbench.report.terminal import print_run_dir

        print_run_dir(res.run_dir, console)  # MlperfResult holds the directory only
    verdict = res.result or "no result"
    lg_said = res.doc.loadgen_result if res.doc is not None else None
    if lg_said and lg_said != res.result:
        verdict = f"{verdict} (LoadGen said {lg_said})"
    from accelbench.metrics.verdict import Status
    from accelbench.report.verdicts import COLOUR

    # a pass only when ok (VALID, every sample succeeded, completed); no result: unknown
    shown = Status.PASS if res.ok else Status.FAIL if res.result else Status.UNKNOWN
    colour = COLOUR[shown]
    if res.doc is not None and res.doc.find_peak:
        found = f"{res.peak_qps:g} QPS" if res.peak_qps is not None else "no peak found"
        verdict = f"peak {found} (last step {verdict})"
    fig = res.figures
    parts = []
    for key, name in (
        # the rate of samples that succeeded first; LoadGen's counts failed ones too
        ("ok_samples_per_s", "samples/s completed OK"),
        ("completed_samples_per_s", "samples/s LoadGen"),
        ("tokens_per_s", "tokens/s"),
        ("completed_tokens_per_s", "tokens/s"),
        ("ttft_p99_ms", "ms TTFT p99"),
        ("tpot_p99_ms", "ms TPOT p99"),
        ("latency_p90_ms", "ms latency p90"),
    ):
        if fig.get(key) is not None:
            parts.append(f"{fig[key]:,.4g} {name}")
    console.print(
        f"[bold {colour}]MLPerf: {escape(verdict)}[/]  " + escape("  ".join(parts)),
        highlight=False,
    )
    for r in res.reasons:
        console.print(f"  [red]-[/] {escape(r)}", highlight=False)
    if not res.compliant:
        console.print("[bold yellow]NON-COMPLIANT[/] (not an MLPerf result):", highlight=False)
        for r in res.noncompliance:
            console.print(f"  [yellow]-[/] {escape(r)}", highlight=False)
    if res.status != "completed":
        console.print(f"[yellow]run {res.status}[/]", highlight=False)
    console.print(f"[dim]{escape(str(res.run_dir))} ({res.wall_s:.1f} s)[/dim]", highlight=False)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="MLPerf Inference scenarios on MLCommons LoadGen (docs/MLPERF.md).",
        no_args_is_help=True,
    )
    for scenario in HELP:
        sub.command(scenario, help=_command(scenario).__doc__)(_command(scenario))
    app.add_typer(sub, name="mlperf")
