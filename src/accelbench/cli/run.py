"""`accelbench run` and `accelbench summarize`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from accelbench.cli.options import config_from_options, load_options, parse_kv_floats
from accelbench.errors import AccelbenchError
from accelbench.lifetime import ignore_stop_signals


def _log(msg: str) -> None:
    from accelbench.console import console, esc

    console(stderr=True).print(f"[dim]{esc(msg)}[/dim]")


def exit_for_status(status: str, run_dir: Path) -> None:
    """Exit 1 when the run did not complete (README, exit codes)."""
    if status != "completed":
        typer.secho(f"run {status}: results so far are in {run_dir}", fg="yellow", err=True)
        raise typer.Exit(1)


@load_options()
def run(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or summary."),
    load: dict[str, Any] | None = None,
) -> None:
    """Benchmark an OpenAI-compatible server (or the embedded llama.cpp engine).

    Writes a run directory: run.json, requests.jsonl (journal), requests.parquet,
    summary.json. Ctrl-C stops the run and keeps every finished record. Exit code 0 when
    the run completed, 1 when it failed or was interrupted, 2 for bad options or input.
    """
    from accelbench.report.terminal import print_summary
    from accelbench.runner.benchmark import run_benchmark

    cfg = config_from_options(load or {})
    result = run_benchmark(cfg, progress=not quiet, log=None if quiet else _log)
    # the run's files are written: a stop signal from now on changes nothing (the exit
    # code is the run's: docs/PROCESSES.md)
    ignore_stop_signals()
    if not quiet:
        print_summary(result)
    exit_for_status(result.status, result.directory)


def summarize_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    gpus: int = typer.Option(None, help="Override the GPU count."),
    slo: list[str] = typer.Option([], help="Recompute goodput under these SLOs."),
    tokenizer: str = typer.Option(
        None, help="tokenizer.json for OSL where the server sent no usage."
    ),
) -> None:
    """Rebuild requests.parquet and summary.json from the journal (after a kill, or to
    recompute with another GPU count or SLOs)."""
    from accelbench.report.terminal import print_run_dir
    from accelbench.runner.finalize import finalize_run, journal_problem
    from accelbench.workload.tokenizer import LocalTokenizer

    if not run_dir.is_dir():
        raise AccelbenchError(f"{run_dir} is not a directory")
    tok = LocalTokenizer(tokenizer) if tokenizer else None
    summary = finalize_run(run_dir, tok=tok, gpus=gpus, slo=parse_kv_floats(slo, "--slo") or None)
    print_run_dir(run_dir, summary=summary)
    if problem := journal_problem(summary):  # records were lost: say which, exit 1
        typer.echo(f"{run_dir}: {problem}", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("summarize")(summarize_cmd)
