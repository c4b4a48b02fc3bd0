"""`accelbench run` and `accelbench summarize`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from accelbench.errors import AccelbenchError
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig


def _parse_kv_floats(items: list[str], what: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            raise AccelbenchError(f"{what} must be KEY=VALUE (got {item!r})")
        try:
            out[key.strip()] = float(val)
        except ValueError:
            raise AccelbenchError(f"{what} {key}: {val!r} is not a number") from None
    return out


def _parse_extra(extra: str | None) -> dict:
    if not extra:
        return {}
    try:
        if extra.startswith("@"):
            doc = json.loads(Path(extra[1:]).read_text())
        else:
            doc = json.loads(extra)
    except (OSError, json.JSONDecodeError) as exc:
        raise AccelbenchError(f"--extra-body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise AccelbenchError("--extra-body must be a JSON object")
    return doc


def run(
    url: str = typer.Option(
        None,
        "--url",
        "-u",
        help="Base URL of an OpenAI-compatible server (http://host:port). Without it, "
        "accelbench builds (once) and starts llama.cpp's llama-server on SmolLM2-135M.",
    ),
    model: str = typer.Option(
        None, "--model", "-m", help="Model name; default: the first the server lists."
    ),
    endpoint: str = typer.Option("completions", help="completions | chat"),
    stream: bool = typer.Option(True, "--stream/--no-stream", help="Stream tokens (SSE)."),
    concurrency: int = typer.Option(
        None, "--concurrency", "-c", help="Closed loop: requests in flight (default 1)."
    ),
    rate: float = typer.Option(None, "--rate", "-r", help="Open loop: requests per second."),
    arrival: str = typer.Option("poisson", help="Open-loop arrivals: poisson | constant | gamma."),
    burstiness: float = typer.Option(1.0, help="Gamma shape (1 = Poisson; <1 burstier)."),
    max_concurrency: int = typer.Option(None, help="Open loop: cap on requests in flight."),
    num_requests: int = typer.Option(
        None, "--num-requests", "-n", help="Measured requests (default 10 x concurrency)."
    ),
    duration: float = typer.Option(
        None, "--duration", "-d", help="Stop issuing after this many seconds."
    ),
    warmup: int = typer.Option(
        0, "--warmup", help="Warm-up requests, run first and excluded from metrics."
    ),
    drain_timeout: float = typer.Option(
        None, help="Seconds to let in-flight requests finish after the stop; default: all."
    ),
    isl: int = typer.Option(128, help="Input length in the server's tokens (synthetic prompts)."),
    osl: int = typer.Option(128, help="Output length (max_tokens, forced with ignore_eos)."),
    isl_dist: str = typer.Option("fixed", help="fixed | uniform | normal | lognormal"),
    osl_dist: str = typer.Option("fixed", help="fixed | uniform | normal | lognormal"),
    range_ratio: float = typer.Option(0.0, help="Uniform range ratio r (see --range-convention)."),
    range_convention: str = typer.Option(
        "vllm", help="vllm: from L(1-r) to L(1+r); inferencex: from rL to L."
    ),
    isl_std: float = typer.Option(None, help="Std dev for normal/lognormal ISL (default 10%)."),
    osl_std: float = typer.Option(None, help="Std dev for normal/lognormal OSL (default 10%)."),
    dataset: str = typer.Option(None, help="ShareGPT JSON/JSONL, prompts JSONL or chat JSONL."),
    dataset_format: str = typer.Option("auto", help="auto | sharegpt | prompts | chat"),
    tokenizer: str = typer.Option(
        None, help="tokenizer.json or HF directory (default: server /tokenize)."
    ),
    seed: int = typer.Option(0, help="Seed for prompts, lengths and arrivals."),
    ignore_eos: bool = typer.Option(
        True, "--ignore-eos/--no-ignore-eos", help="Force the full output length."
    ),
    extra_body: str = typer.Option(
        None,
        help="JSON merged into every request body, or @file.json (e.g. '{\"temperature\":0}').",
    ),
    api_key_env: str = typer.Option(
        "OPENAI_API_KEY", help="Environment variable holding the API key."
    ),
    api_key_file: str = typer.Option(None, help="File whose first line is the API key."),
    timeout: float = typer.Option(600.0, help="Per-request timeout in seconds."),
    workers: int = typer.Option(None, help="Load worker processes (default: from load and cores)."),
    transport: str = typer.Option(
        "auto",
        help="auto (own HTTP/1.1 client for http://, aiohttp for https://) | http1 | aiohttp",
    ),
    out: str = typer.Option(
        None, "--out", "-o", help="Run directory (default results/<time>-<id>)."
    ),
    results_root: str = typer.Option("results", help="Where run directories go."),
    gpus: int = typer.Option(1, help="Accelerators behind the endpoint (for per-GPU figures)."),
    slo: list[str] = typer.Option(
        [], help="SLO for goodput, e.g. --slo ttft_ms=500 --slo tpot_ms=50."
    ),
    save_text: bool = typer.Option(False, help="Keep generated text in requests.parquet."),
    label: str = typer.Option(None, help="Name for the run directory."),
    telemetry: bool = typer.Option(
        True, "--telemetry/--no-telemetry", help="Sample telemetry beside the run."
    ),
    telemetry_interval: float = typer.Option(1.0, help="Telemetry sampling interval (s)."),
    embedded_model: str = typer.Option(
        "smollm2", help="Embedded engine model: smollm2 | tiny | path.gguf."
    ),
    embedded_parallel: int = typer.Option(8, help="Embedded engine parallel slots."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or summary."),
) -> None:
    """Benchmark an OpenAI-compatible server (or the embedded llama.cpp engine).

    Writes a run directory: run.json, requests.jsonl (journal), requests.parquet,
    summary.json. Ctrl-C stops the run and keeps every finished record.
    """  # noqa: D401
    from accelbench.runner.benchmark import run_benchmark

    wl = WorkloadConfig(
        isl=isl, osl=osl, isl_dist=isl_dist, osl_dist=osl_dist, range_ratio=range_ratio,  # type: ignore[arg-type]
        range_convention=range_convention, isl_std=isl_std, osl_std=osl_std,  # type: ignore[arg-type]
        dataset=dataset, dataset_format=dataset_format, tokenizer=tokenizer, seed=seed,
    )  # fmt: skip
    if endpoint not in ("completions", "chat"):
        raise AccelbenchError("--endpoint must be completions or chat")
    cfg = BenchmarkConfig(
        url=url, model=model, endpoint=endpoint, stream=stream,  # type: ignore[arg-type]
        api_key_env=api_key_env, api_key_file=api_key_file, concurrency=concurrency,
        rate=rate, arrival=arrival, burstiness=burstiness,  # type: ignore[arg-type]
        max_concurrency=max_concurrency, num_requests=num_requests, duration_s=duration,
        warmup_requests=warmup, drain_timeout_s=drain_timeout, workload=wl,
        ignore_eos=ignore_eos, extra_body=_parse_extra(extra_body), timeout_s=timeout,
        workers=workers, transport=transport, results_root=results_root, out_dir=out, gpus=gpus,
        slo=_parse_kv_floats(slo, "--slo"), save_text=save_text, label=label,
        telemetry=telemetry, telemetry_interval_s=telemetry_interval,
        embedded_model=embedded_model, embedded_parallel=embedded_parallel,
    )  # fmt: skip
    run_benchmark(cfg, progress=not quiet, show_summary=not quiet)


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
    from accelbench.report.terminal import print_summary
    from accelbench.runner.finalize import finalize_run, journal_problem
    from accelbench.workload.tokenizer import LocalTokenizer

    if not run_dir.is_dir():
        raise AccelbenchError(f"{run_dir} is not a directory")
    tok = LocalTokenizer(tokenizer) if tokenizer else None
    summary = finalize_run(run_dir, tok=tok, gpus=gpus, slo=_parse_kv_floats(slo, "--slo") or None)
    print_summary(run_dir)
    if problem := journal_problem(summary):  # records were lost: say which, exit 1
        typer.echo(f"{run_dir}: {problem}", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("summarize")(summarize_cmd)
