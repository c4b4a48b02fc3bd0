"""The load options that every load-generating command shares (`run`, `sweep`, and the
stress / rollout commands), declared once.

``@load_options(...)`` adds these options to a Typer command that does not declare them
itself and hands them to the command as one ``load`` dict; :func:`config_from_options`
turns that dict into a :class:`BenchmarkConfig`, whose ``validate()`` checks the values.
A command that needs another meaning or default for a name (``sweep --rate`` is a flag)
declares that parameter itself and lists it in ``exclude``.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import typer

from accelbench.errors import UsageError
from accelbench.jsonfile import DuplicateKeyError, loads_unique
from accelbench.runner.config import BenchmarkConfig
from accelbench.urls import Endpoint
from accelbench.workload.config import WorkloadConfig

F = TypeVar("F", bound=Callable[..., Any])


def _opt(default: Any, *names: str, help: str) -> Any:  # noqa: A002 - Typer's own word
    return typer.Option(default, *names, help=help)


# name -> (annotation, typer.Option). Order is the order in --help.
SHARED: dict[str, tuple[Any, Any]] = {
    "url": (str, _opt(None, "--url", "-u", help=(
        "Base URL of an OpenAI-compatible server (http://host:port). Without it, accelbench "
        "builds (once) and starts llama.cpp's llama-server on SmolLM2-135M."))),
    "model": (str, _opt(None, "--model", "-m", help="Model name; default: the first the server lists.")),
    "endpoint": (str, _opt("completions", "--endpoint", help="completions | chat")),
    "stream": (bool, _opt(True, "--stream/--no-stream", help="Stream tokens (SSE).")),
    "concurrency": (int, _opt(None, "--concurrency", "-c", help=(
        "Closed loop: requests in flight (default 1; at most 100,000)."))),
    "rate": (float, _opt(None, "--rate", "-r", help="Open loop: requests per second (0.001 to 1e6).")),
    "arrival": (str, _opt("poisson", "--arrival", help="Open-loop arrivals: poisson | constant | gamma.")),
    "burstiness": (float, _opt(1.0, "--burstiness", help="Gamma shape (1 = Poisson; <1 burstier).")),
    "max_concurrency": (int, _opt(None, "--max-concurrency", help="Open loop: cap on requests in flight.")),
    "num_requests": (int, _opt(None, "--num-requests", "-n", help=(
        "Measured requests (default: 10 x concurrency, at least 10; with --duration or a "
        "trace, until it ends; at most 10 million)."))),
    "duration": (float, _opt(None, "--duration", "-d", help="Stop issuing after this many seconds (at most 30 days).")),
    "warmup": (int, _opt(0, "--warmup", help="Warm-up requests, run first and excluded from metrics.")),
    "drain_timeout": (float, _opt(None, "--drain-timeout", help=(
        "Seconds to let in-flight requests finish after the stop (the last request "
        "issued, or the end of --duration), then cut them (interrupted); default: all."))),
    "isl": (int, _opt(128, "--isl", help="Input length in the server's tokens (synthetic prompts; 1 to 1,048,576).")),
    "osl": (int, _opt(128, "--osl", help="Output length (max_tokens, forced with ignore_eos; 1 to 1,048,576).")),
    "isl_dist": (str, _opt("fixed", "--isl-dist", help="fixed | uniform | normal | lognormal")),
    "osl_dist": (str, _opt("fixed", "--osl-dist", help="fixed | uniform | normal | lognormal")),
    "range_ratio": (float, _opt(0.0, "--range-ratio", help=(
        "Uniform range ratio r in [0, 1] (see --range-convention)."))),
    "range_convention": (str, _opt("vllm", "--range-convention", help=(
        "vllm: from L(1-r) to L(1+r); inferencex: from rL to L."))),
    "isl_std": (float, _opt(None, "--isl-std", help="Std dev for normal/lognormal ISL (default 10%).")),
    "osl_std": (float, _opt(None, "--osl-std", help="Std dev for normal/lognormal OSL (default 10%).")),
    "dataset": (str, _opt(None, "--dataset", help="ShareGPT JSON/JSONL, prompts JSONL or chat JSONL.")),
    "dataset_format": (str, _opt("auto", "--dataset-format", help="auto | sharegpt | prompts | chat")),
    "trace": (str, _opt(None, "--trace", help=(
        "Replay a trace's arrivals and lengths: accelbench trace.jsonl, Azure CSV, Mooncake JSONL."))),
    "sessions": (int, _opt(None, "--sessions", help=(
        "Multi-turn sessions instead of independent requests: each turn resends the "
        "history (earlier prompts and the server's actual replies) plus a new message of "
        "--isl tokens and asks --osl tokens. -c then bounds sessions in flight (closed "
        "loop), --rate counts sessions per second, --warmup counts sessions. See docs/WORKLOADS.md."))),
    "turns": (str, _opt("4", "--turns", help="Turns per session: N or LO:HI (uniform, 1 to 10,000).")),
    "think_time": (str, _opt("0", "--think-time", help=(
        "Seconds between a reply and the session's next turn: S or LO:HI (uniform)."))),
    "shared_prefixes": (int, _opt(0, "--shared-prefixes", help=(
        "K shared system prompts: request (or session) i starts with prompt i mod K."))),
    "prefix_tokens": (int, _opt(0, "--prefix-tokens", help=(
        "Length P of each shared system prompt, in the server's tokens."))),
    "block_size": (int, _opt(None, "--block-size", help=(
        "Tokens per cache block: a trace's hash_ids (default 512) and the ideal hit rate "
        "(default: the server's, else 16)."))),
    "kv_capacity_tokens": (int, _opt(None, "--kv-capacity-tokens", help=(
        "The server's prefix-cache capacity in tokens, for the ideal LRU hit rate, where "
        "its /metrics does not say (vLLM's and the reference server's do)."))),
    "tokenizer": (str, _opt(None, "--tokenizer", help="tokenizer.json or HF directory (default: server /tokenize).")),
    "seed": (int, _opt(0, "--seed", help="Seed for prompts, lengths and arrivals (0 to 2**32-1).")),
    "ignore_eos": (bool, _opt(True, "--ignore-eos/--no-ignore-eos", help="Force the full output length.")),
    "extra_body": (str, _opt(None, "--extra-body", help=(
        "JSON merged into every request body, or @file.json (e.g. '{\"temperature\":0}')."))),
    "api_key_env": (str, _opt("OPENAI_API_KEY", "--api-key-env", help="Environment variable holding the API key.")),
    "api_key_file": (str, _opt(None, "--api-key-file", help="File whose first line is the API key.")),
    "timeout": (float, _opt(600.0, "--timeout", help="Per-request timeout in seconds.")),
    "workers": (int, _opt(None, "--workers", help="Load worker processes (default: from load and cores).")),
    "ray": (str, _opt(None, "--ray", help=(
        "Run the load workers as Ray actors over a cluster: auto (this host's cluster or "
        "RAY_ADDRESS), local (start Ray here), host:port or ray://host:port. See docs/CLUSTER.md."))),
    "transport": (str, _opt("auto", "--transport", help=(
        "auto (own HTTP/1.1 client for http://, aiohttp for https://) | http1 | aiohttp"))),
    "out": (str, _opt(None, "--out", "-o", help="Run directory (default `results/<time>-<id>`).")),
    "results_root": (str, _opt("results", "--results-root", help="Where run directories go.")),
    "gpus": (int, _opt(1, "--gpus", help="Accelerators behind the endpoint (for per-GPU figures).")),
    "slo": (list[str], _opt([], "--slo", help="SLO for goodput, e.g. --slo ttft_ms=500 --slo tpot_ms=50.")),
    "save_text": (bool, _opt(False, "--save-text", help="Keep generated text in requests.parquet.")),
    "label": (str, _opt(None, "--label", help="Name for the run directory (letters, digits, . _ -).")),
    "telemetry": (bool, _opt(True, "--telemetry/--no-telemetry", help="Sample telemetry beside the run.")),
    "telemetry_interval": (float, _opt(1.0, "--telemetry-interval", help=(
        "Telemetry sampling interval (0.05 to 3600 s)."))),
    "embedded_engine": (str, _opt("llama", "--embedded-engine", help=(
        "Engine started when no --url is given: llama (llama.cpp's llama-server, built once) "
        "| vllm (vLLM's CPU build, installed once; models: tiny or a HF directory)."))),
    "embedded_model": (str, _opt("smollm2", "--embedded-model", help=(
        "Embedded engine model: smollm2 | tiny | path.gguf (llama) | HF directory (vllm)."))),
    "embedded_parallel": (int, _opt(8, "--embedded-parallel", help="Embedded engine parallel slots.")),
}  # fmt: skip


# The session and prefix-cache options: commands whose load is not a run's plan (MLPerf's
# LoadGen, the stress suites' own workloads, a shadow replay's trace) leave them out
SESSION_OPTIONS = ("sessions", "turns", "think_time", "shared_prefixes", "prefix_tokens",
                   "kv_capacity_tokens")  # fmt: skip


# click's ParameterSource, by name (Typer vendors click): a value that came from neither
DEFAULT_SOURCES = ("DEFAULT", "DEFAULT_MAP")
_CTX = "_accelbench_ctx"  # the Context parameter added where a command declares none


def given_options(ctx: typer.Context) -> frozenset[str]:
    """The options the command line set, by their long name (``--turns``; a flag pair by
    its first name, ``--telemetry`` for ``--no-telemetry``), whatever their value: an
    option typed at its default value is given, too (docs/LIMITS.md "Combinations")."""
    return frozenset(
        max(p.opts, key=len)
        for p in ctx.command.params
        if p.name and p.opts and p.param_type_name == "option"  # not an argument
        and getattr(ctx.get_parameter_source(p.name), "name", "DEFAULT") not in DEFAULT_SOURCES
    )  # fmt: skip


def refuse_unused(
    given: Iterable[str],
    used: Iterable[str],
    what: str,
    homes: Mapping[str, Iterable[str]] | None = None,
) -> None:
    """One line naming every option of ``given`` that ``what`` (a mode of a command)
    does not use, before anything runs: never an option silently ignored. ``homes``: the
    other modes and the options they use, to say where the first one belongs."""
    unused = sorted(set(given) - set(used))
    if unused:
        verb = "does" if len(unused) == 1 else "do"
        where = [m for m, opts in (homes or {}).items() if unused[0] in opts]
        hint = f" ({unused[0]} goes with {' or '.join(where)})" if where else ""
        raise UsageError(f"{', '.join(unused)} {verb} not apply to {what}{hint}")


def refuse_unmet(given: Iterable[str], rules: Iterable[tuple[str, bool, str]]) -> None:
    """Each rule is (option, whether it applies to this command line, when it applies):
    an option given where it does not apply is refused with one line saying when it
    does (``--diverge applies only with --deterministic``)."""
    typed = set(given)
    for opt, applies, when in rules:
        if opt in typed and not applies:
            raise UsageError(f"{opt} applies only {when}")


class LoadOptions(dict[str, object]):
    """The shared load options' values, and :attr:`given`: every option of the command
    (its own ones too) that the command line set."""

    def __init__(self, values: Mapping[str, object], given: frozenset[str] = frozenset()) -> None:
        super().__init__(values)
        self.given = given


def long_option(name: str) -> str:
    """A shared option's long name: ``--concurrency`` for ``concurrency``."""
    decls = [d.split("/")[0] for d in SHARED[name][1].param_decls]
    return max((d for d in decls if d.startswith("--")), key=len)


def load_options(exclude: Iterable[str] = ()) -> Callable[[F], F]:
    """Add the shared load options (all of :data:`SHARED` but ``exclude`` and those the
    command declares itself) to a Typer command; they arrive as ``load``, a
    :class:`LoadOptions` that also says which options the command line set."""
    skip = set(exclude)

    def deco(fn: F) -> F:
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn)  # resolve "bool" etc. (postponed annotations)
        own = [p for p in sig.parameters.values() if p.name != "load"]
        names = {p.name for p in own}
        extra = [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=ann)
            for n, (ann, opt) in SHARED.items()
            if n not in names and n not in skip
        ]
        ctx_name = next((p.name for p in own if hints.get(p.name) is typer.Context), None)
        added = [] if ctx_name else [
            inspect.Parameter(_CTX, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
        ]  # fmt: skip

        @functools.wraps(fn)
        def wrapper(**kw: Any) -> Any:
            ctx = kw.pop(_CTX) if ctx_name is None else kw[ctx_name]
            values = {p.name: kw.pop(p.name) for p in extra}
            return fn(load=LoadOptions(values, given_options(ctx)), **kw)

        own_kw = [
            p.replace(
                kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints.get(p.name, p.annotation)
            )
            for p in own
        ]
        params = own_kw + added + extra
        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper  # type: ignore[return-value]

    return deco


def parse_kv_floats(items: list[str], what: str) -> dict[str, float]:
    """``KEY=VALUE`` pairs with numeric values (range checks are the config's job)."""
    out: dict[str, float] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            raise UsageError(f"{what} must be KEY=VALUE, e.g. tpot_ms=50 (got {item!r})")
        try:
            out[key.strip()] = float(val)
        except ValueError:
            raise UsageError(f"{what} {key}: {val!r} is not a number") from None
    return out


MAX_EXTRA_BODY = 1 << 20  # bytes; a request body's extra fields, not a prompt store


def parse_extra_body(extra: str | None) -> dict[str, Any]:
    """``--extra-body``: a JSON object, inline or ``@file.json``."""
    if not extra:
        return {}
    try:
        if extra.startswith("@"):
            from accelbench import validate

            p = validate.input_file("--extra-body", extra[1:])
            if p.stat().st_size > MAX_EXTRA_BODY:
                raise UsageError(f"--extra-body file {p} is larger than 1 MiB")
            doc = loads_unique(Path(p).read_bytes())
        else:
            doc = loads_unique(extra)
    except DuplicateKeyError as exc:
        raise UsageError(f"--extra-body: {exc}") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise UsageError(f"--extra-body is not valid JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise UsageError("--extra-body must be a JSON object")
    return doc


def config_from_options(load: dict[str, Any], **overrides: Any) -> BenchmarkConfig:
    """The :class:`BenchmarkConfig` the shared options describe (not yet validated). An
    override stands for a command's own option of the same meaning (``sweep --isl``)."""
    o = {**{n: opt.default for n, (_, opt) in SHARED.items()}, **load, **overrides}
    typed: frozenset[str] = getattr(load, "given", frozenset())
    given = frozenset(long_option(n) for n in {*load, *overrides} if n in SHARED) & typed
    wl = WorkloadConfig(
        isl=o["isl"], osl=o["osl"], isl_dist=o["isl_dist"], osl_dist=o["osl_dist"],
        range_ratio=o["range_ratio"], range_convention=o["range_convention"],
        isl_std=o["isl_std"], osl_std=o["osl_std"], dataset=o["dataset"],
        dataset_format=o["dataset_format"], tokenizer=o["tokenizer"], seed=o["seed"],
        trace=o["trace"], sessions=o["sessions"], turns=o["turns"],
        think_time_s=o["think_time"], shared_prefixes=o["shared_prefixes"],
        prefix_tokens=o["prefix_tokens"], block_size=o["block_size"],
        kv_capacity_tokens=o["kv_capacity_tokens"],
    )  # fmt: skip
    return BenchmarkConfig(
        url=Endpoint.parse(o["url"]) if o["url"] else None, model=o["model"],
        endpoint=o["endpoint"], stream=o["stream"],
        api_key_env=o["api_key_env"], api_key_file=o["api_key_file"],
        concurrency=o["concurrency"], rate=o["rate"], arrival=o["arrival"],
        burstiness=o["burstiness"], max_concurrency=o["max_concurrency"],
        num_requests=o["num_requests"], duration_s=o["duration"], warmup_requests=o["warmup"],
        drain_timeout_s=o["drain_timeout"], workload=wl, ignore_eos=o["ignore_eos"],
        extra_body=parse_extra_body(o["extra_body"]), timeout_s=o["timeout"],
        workers=o["workers"], ray=o["ray"], transport=o["transport"], results_root=o["results_root"],
        out_dir=o["out"], gpus=o["gpus"], slo=parse_kv_floats(o["slo"] or [], "--slo"),
        save_text=o["save_text"], label=o["label"], telemetry=o["telemetry"],
        telemetry_interval_s=o["telemetry_interval"], embedded_model=o["embedded_model"],
        embedded_engine=o["embedded_engine"],
        embedded_parallel=o["embedded_parallel"], given=given,
    )  # fmt: skip


def check_named_choice(option: str, value: str | None, allowed: tuple[str, ...]) -> None:
    """An option that names one of ``allowed`` (any case), refused naming the option when it
    does not (the planner's own "unknown precision" errors do not say which option)."""
    from accelbench.validate import choice

    if value is not None and value.lower() not in allowed:
        choice(option, value, allowed)


def check_kv_precision(value: str | None) -> None:
    """``--kv-precision``: one of the KV-cache precisions (any case)."""
    from accelbench.plan.architecture import KV_BYTES

    check_named_choice("--kv-precision", value, tuple(KV_BYTES))


def check_precision(value: str | None, option: str = "--precision") -> None:
    """``--precision`` (or ``option``): one of the weight precisions (any case)."""
    from accelbench.plan.architecture import WEIGHT_BYTES

    check_named_choice(option, value, tuple(WEIGHT_BYTES))
