"""`accelbench serve reference` (the client-measuring server), `accelbench serve llama`
(the embedded llama.cpp engine, built once and cached) and `accelbench serve vllm`
(vLLM's CPU build, installed once into a cached virtualenv); `accelbench serve emulated`
(hardware the user does not own, in real time: predict/emulate.py)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from accelbench.errors import AccelbenchError

if TYPE_CHECKING:  # the engines are imported when a command needs them
    from accelbench.engines.llamacpp import LlamaServer

serve_app = typer.Typer(
    help="Start a server: the reference server or the embedded engine.", no_args_is_help=True
)


@serve_app.command("reference")
def reference(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8000, help="Port."),
    model: str = typer.Option("reference", help="Model name it serves."),
    ttft_ms: str = typer.Option(
        "50", help="TTFT: N, uniform:LO:HI, normal:MEAN:STD or exp:MEAN (ms)."
    ),
    itl_ms: str = typer.Option("10", help="Gap between tokens, same forms (ms)."),
    osl: str = typer.Option(
        None, help="Output length distribution (capped by max_tokens); default: max_tokens."
    ),
    max_throughput: bool = typer.Option(
        False, help="No delays: write each response at once (client ceiling)."
    ),
    fault: list[str] = typer.Option(
        [],
        help="Inject a fault with a probability, KIND:P; KIND: 429, 500, 503, "
        "disconnect, malformed, stall, slow_headers.",
    ),
    stall_s: float = typer.Option(2.0, help="Length of a stall fault (s)."),
    slow_headers_s: float = typer.Option(1.0, help="Header delay of a slow_headers fault (s)."),
    drop_keepalive: float = typer.Option(
        0.0, help="Probability of closing a kept-alive connection when the next request arrives."
    ),
    ground_truth: Path = typer.Option(
        None, help="JSONL file: when each token was actually written."
    ),
    seed: int = typer.Option(
        0, help="Seed for drawn delays and lengths, faults and dropped connections."
    ),
    leak_bytes_per_request: int = typer.Option(
        0, help="Known-truth leak: keep this many bytes per request (RSS grows)."
    ),
    device_memory_rate: float = typer.Option(
        0.0, help="/metrics reference_device_memory_used_bytes grows this many bytes/s."
    ),
    device_memory_warmup: float = typer.Option(
        0.0, help="... after a warm-up ramp of this many bytes (a pool filling)."
    ),
    device_memory_warmup_s: float = typer.Option(0.0, help="Length of that ramp (s)."),
    device_memory_total: float = typer.Option(
        80 * 2**30, help="reference_device_memory_total_bytes (the device's total)."
    ),
    ttft_drift_ms_per_min: float = typer.Option(
        0.0, help="Known-truth latency drift: TTFT grows this much per minute of uptime."
    ),
    deterministic: bool = typer.Option(
        False, help="Output depends on the prompt only (for consistency tests)."
    ),
    diverge: float = typer.Option(
        0.0, help="With --deterministic: this fraction of requests differ in one token."
    ),
    prefix_block_size: int = typer.Option(
        16, help="Prefix cache: tokens (bytes) per block; a block is cached whole or not at all."
    ),
    prefix_cache_blocks: int = typer.Option(
        0, help="Prefix cache: capacity in blocks, least recently used evicted; 0: no cache."
    ),
    prefill_ms_per_token: float = typer.Option(
        0.0, help="TTFT grows by this much per prompt token not served from the cache (ms)."
    ),
    prefix_cache_outputs: bool = typer.Option(
        True, help="On completion, cache the blocks of prompt + output (the next turn's history)."
    ),
) -> None:
    """An OpenAI-compatible streaming server with known timings, for measuring clients.
    Not an inference engine."""
    from accelbench.cli.options import given_options, refuse_unmet
    from accelbench.reference.server import Dist, ReferenceConfig, StressKnobs, run_reference

    kinds = {f.rpartition(":")[0] for f in fault}
    delays = not max_throughput or bool(fault)  # --max-throughput writes at once, faults aside
    cache = prefix_cache_blocks > 0
    # what the seed draws: delays and lengths of a distribution, faults, dropped connections
    spread = [Dist.parse(d).kind != "fixed" for d in (ttft_ms, itl_ms) if delays]
    drawn = any(spread) or (osl is not None and Dist.parse(osl).kind != "fixed")
    drawn = drawn or bool(fault) or drop_keepalive > 0
    refuse_unmet(given_options(ctx), [
        ("--diverge", deterministic, "with --deterministic"),
        ("--stall-s", "stall" in kinds, "with --fault stall:P"),
        ("--device-memory-warmup-s", device_memory_warmup > 0,
         "with --device-memory-warmup BYTES above 0 (the length of that ramp)"),
        ("--slow-headers-s", "slow_headers" in kinds, "with --fault slow_headers:P"),
        ("--prefix-block-size", cache, "with --prefix-cache-blocks N (N > 0)"),
        ("--prefix-cache-outputs", cache, "with --prefix-cache-blocks N (N > 0)"),
        *((o, delays, "without --max-throughput (it writes each response at once)")
          for o in ("--ttft-ms", "--itl-ms", "--prefill-ms-per-token", "--ttft-drift-ms-per-min")),
        ("--seed", drawn, "where something is drawn: a --ttft-ms or --itl-ms distribution "
         "(not with --max-throughput), an --osl one (uniform:, normal:, exp:), a --fault or "
         "--drop-keepalive above 0"),
    ])  # fmt: skip
    from accelbench.validate import bind_host

    bind_host("--host", host, port)
    faults = {}
    for f in fault:
        kind, sep, p = f.rpartition(":")
        if not sep:
            raise AccelbenchError(f"--fault must be KIND:PROBABILITY (got {f!r})")
        try:
            faults[kind] = float(p)
        except ValueError:
            raise AccelbenchError(f"--fault {f!r}: {p!r} is not a probability") from None
    cfg = ReferenceConfig(
        host=host, port=port, model=model, ttft_ms=Dist.parse(ttft_ms), itl_ms=Dist.parse(itl_ms),
        osl=Dist.parse(osl) if osl else None, max_throughput=max_throughput, faults=faults,
        stall_s=stall_s, slow_headers_s=slow_headers_s, drop_keepalive=drop_keepalive,
        ground_truth=ground_truth, seed=seed,
        stress=StressKnobs(
            leak_bytes_per_request=leak_bytes_per_request, device_memory_rate=device_memory_rate,
            device_memory_warmup_bytes=device_memory_warmup,
            device_memory_warmup_s=device_memory_warmup_s,
            device_memory_total_bytes=device_memory_total,
            ttft_drift_ms_per_min=ttft_drift_ms_per_min, deterministic=deterministic,
            diverge=diverge,
        ),
        prefix_block_size=prefix_block_size, prefix_cache_blocks=prefix_cache_blocks,
        prefill_ms_per_token=prefill_ms_per_token, prefix_cache_outputs=prefix_cache_outputs,
    )  # fmt: skip

    def ready(p: int) -> None:
        typer.echo(
            f"reference server on http://{host}:{p} (model {model}); Ctrl-C stops it", err=True
        )

    cfg.validate()  # before the port is taken
    run_reference(cfg, ready)


@serve_app.command("emulated")
def emulated(
    accelerator: str = typer.Option(
        ..., help="Accelerator to emulate (catalog id: mi355x, b200, ...)."
    ),
    model: str = typer.Option(
        ..., help="Catalog model (llama-3.1-70b, deepseek-r1, ...) or config.json."
    ),
    tp: int = typer.Option(1, help="Tensor-parallel size (GPUs)."),
    precision: str = typer.Option("bf16", help="Weight precision (bf16, fp8, fp4, ...)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8000, help="Port."),
    ground_truth: Path = typer.Option(
        None, help="JSONL file: each token's due time and when it was actually written."
    ),
    speed: float = typer.Option(1.0, help="Run the emulated hardware this many times faster."),
    max_num_batched_tokens: int = typer.Option(8192, help="Token budget of one engine step."),
    prefix_cache: bool = typer.Option(
        True, help="Keep earlier prompts' KV blocks and skip their prefill (engines' default)."
    ),
) -> None:
    """An OpenAI-compatible server that streams each token when the predicted hardware
    would produce it (continuous batching in real time). Results are labelled emulated."""
    from accelbench.cli.options import check_precision
    from accelbench.predict.emulate import EmulatedConfig, emulated_label, run_emulated
    from accelbench.validate import bind_host

    check_precision(precision)
    bind_host("--host", host, port)
    cfg = EmulatedConfig(
        accelerator=accelerator, model=model, tp=tp, precision=precision, host=host, port=port,
        ground_truth=ground_truth, speed=speed, max_num_batched_tokens=max_num_batched_tokens,
        prefix_cache=prefix_cache,
    )  # fmt: skip
    cfg.validate()  # before the port is taken
    label = emulated_label(accelerator, model)

    def ready(p: int) -> None:
        typer.echo(
            f"emulated server on http://{host}:{p} (model {label}); Ctrl-C stops it", err=True
        )

    run_emulated(cfg, ready)


@serve_app.command("llama")
def llama(
    ctx: typer.Context,
    model: str = typer.Option(
        "smollm2",
        help="smollm2 (SmolLM2-135M-Instruct from PyPI), tiny (generated), or a .gguf path.",
    ),
    port: int = typer.Option(8080, help="Port on 127.0.0.1."),
    parallel: int = typer.Option(8, help="Parallel slots (continuous batching)."),
    ctx_per_slot: int = typer.Option(2048, help="Context per slot."),
    build_only: bool = typer.Option(False, help="Only build (and cache) llama-server, then exit."),
) -> None:
    """Build (once, cached) and run llama.cpp's llama-server on loopback."""
    from accelbench.engines.llamacpp import (
        build_llama_server,
        check_server_options,
        start_llama_server,
    )

    if build_only:
        _refuse_beside(ctx, "--build-only", "it builds llama-server and exits")
    check_server_options(parallel, ctx_per_slot, port)
    if build_only:
        typer.echo(str(build_llama_server(lambda m: typer.echo(m, err=True))))
        return
    _serve_until_interrupted(
        lambda: start_llama_server(
            model, parallel=parallel, ctx_per_slot=ctx_per_slot, port=port,
            log=lambda m: typer.echo(m, err=True), announce=False,
        ),
        "llama-server",
    )  # fmt: skip


@serve_app.command("vllm")
def vllm(
    ctx: typer.Context,
    model: str = typer.Option(
        "tiny", help="tiny (generated) or a Hugging Face model directory (config.json, ...)."
    ),
    port: int = typer.Option(8000, help="Port on 127.0.0.1."),
    max_model_len: int = typer.Option(2048, help="Longest sequence (prompt + output), tokens."),
    kv_cache_gib: float = typer.Option(
        1.0, help="Memory for the KV cache (VLLM_CPU_KVCACHE_SPACE)."
    ),
    dummy_weights: bool = typer.Option(
        False, help="Random weights (--load-format dummy): the directory needs no weight files."
    ),
    install_only: bool = typer.Option(
        False, help="Only install (and cache) vLLM, print its Python, then exit."
    ),
    prefix_caching: bool = typer.Option(
        True, help="vLLM's automatic prefix caching (its default: on)."
    ),
) -> None:
    """Install (once, cached) and run vLLM's CPU build on loopback."""
    from accelbench.engines.vllm import check_vllm_options, install_vllm, start_vllm_server

    if install_only:
        _refuse_beside(ctx, "--install-only", "it installs vLLM and exits")
    check_vllm_options(max_model_len, kv_cache_gib, port)
    log = lambda m: typer.echo(m, err=True)  # noqa: E731
    if install_only:
        typer.echo(str(install_vllm(log)))
        return
    _serve_until_interrupted(
        lambda: start_vllm_server(
            model, port=port, max_model_len=max_model_len, kv_cache_gib=kv_cache_gib,
            dummy_weights=dummy_weights, log=log, prefix_caching=prefix_caching, announce=False,
        ),
        "vLLM",
    )  # fmt: skip


def _refuse_beside(ctx: typer.Context, only: str, why: str) -> None:
    """``--build-only`` / ``--install-only`` start no server: its options are refused."""
    from accelbench.cli.options import given_options, refuse_unused

    refuse_unused(given_options(ctx), (only,), f"{only} ({why})")


def _serve_until_interrupted(start: Callable[[], LlamaServer], name: str) -> None:
    """Start the engine, announce it, then wait until Ctrl-C, SIGTERM or SIGHUP (cli/main.py
    turns each into KeyboardInterrupt; all stop the engine) or until the engine exits.

    A stop is the normal end (exit 0) from the moment either line below starts to be
    written: a reader may signal on seeing one, before it returns. So the engine is started
    with announce=False and its ready line is written here, and the server is held from the
    instant ``start`` returns it, with no statement between (a stop while it starts is
    handled by ``start`` itself: the engine stopped, exit 130)."""
    server: LlamaServer | None = None
    try:
        server = start()
        with contextlib.suppress(KeyboardInterrupt):
            typer.echo(server.ready_line, err=True)
            typer.echo(
                f"serving at {server.url} as model {server.alias!r}; Ctrl-C stops it", err=True
            )
            while server.proc.poll() is None:
                time.sleep(0.5)
            raise AccelbenchError(
                f"{name} exited with {server.proc.returncode}; log: {server.log_path}"
            )
    finally:
        if server is not None:
            server.stop()


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")
