"""Inference-server ``/metrics`` (vLLM, SGLang, llama.cpp, TGI)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from accelbench.telemetry.parsers.prometheus import finite, prometheus_samples
from accelbench.telemetry.schema import KIND_SERVER, Row, new_row, plausible, set_column

# engine -> common column -> list of (metric name, how): how is "value", "sum" (the
# _sum of a histogram), or "bucketless" fallback names tried in order.
SERVER_METRICS: dict[str, dict[str, list[str]]] = {
    "vllm": {
        "srv_requests_running": ["vllm:num_requests_running"],
        "srv_requests_waiting": ["vllm:num_requests_waiting"],
        # vLLM V1 exports kv_cache_usage_perc, V0 gpu_cache_usage_perc; both 0-1.
        "srv_kv_cache_usage": ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        "srv_prompt_tokens_total": ["vllm:prompt_tokens_total"],
        "srv_generation_tokens_total": ["vllm:generation_tokens_total"],
        "srv_preemptions_total": ["vllm:num_preemptions_total"],
        "srv_prefix_cache_hits_total": [
            "vllm:prefix_cache_hits_total",
            "vllm:gpu_prefix_cache_hits_total",
        ],
        "srv_prefix_cache_queries_total": [
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
        ],
    },
    "sglang": {
        "srv_requests_running": ["sglang:num_running_reqs"],
        "srv_requests_waiting": ["sglang:num_queue_reqs"],
        "srv_kv_cache_usage": ["sglang:token_usage"],
        "srv_prompt_tokens_total": ["sglang:prompt_tokens_total"],
        "srv_generation_tokens_total": ["sglang:generation_tokens_total"],
        "srv_prefix_cache_hits_total": ["sglang:cached_tokens_total"],
    },
    "llamacpp": {
        "srv_requests_running": ["llamacpp:requests_processing"],
        "srv_requests_waiting": ["llamacpp:requests_deferred"],
        "srv_kv_cache_usage": ["llamacpp:kv_cache_usage_ratio"],
        "srv_prompt_tokens_total": ["llamacpp:prompt_tokens_total"],
        "srv_generation_tokens_total": ["llamacpp:tokens_predicted_total"],
    },
    # accelbench's reference server with its prefix cache on (serve reference
    # --prefix-cache-blocks N): vLLM's counters, in tokens, under its own prefix
    "reference": {
        "srv_prefix_cache_hits_total": ["reference:prefix_cache_hits_total"],
        "srv_prefix_cache_queries_total": ["reference:prefix_cache_queries_total"],
    },
    "tgi": {
        "srv_requests_running": ["tgi_batch_current_size"],
        "srv_requests_waiting": ["tgi_queue_size"],
        "srv_prompt_tokens_total": ["tgi_request_input_length_sum"],
        "srv_generation_tokens_total": ["tgi_request_generated_tokens_sum"],
    },
}
_ENGINE_PREFIX = {
    "vllm": "vllm:",
    "sglang": "sglang:",
    "llamacpp": "llamacpp:",
    "reference": "reference:",
    "tgi": "tgi_",
}


# every metric name a row reads: a live sample parses only their lines (read_only)
_PREFIXES = tuple(_ENGINE_PREFIX.values())
_READ_NAMES = tuple(
    sorted({n for cols in SERVER_METRICS.values() for ns in cols.values() for n in ns})
)


def _read_lines(text: str) -> tuple[str, list[str]]:
    """The sample lines of the metrics a row reads, the rest left out unparsed, and the
    names of every engine's other samples, for :func:`detect_engine` (one engine's
    scrape may hold none of the names read). vLLM 0.32's scrape is 51 kB, nearly all
    histogram buckets the row never reads: parsed whole, one sample cost 8 ms of the
    run's CPU (18 ms beside a busy vLLM: a fifth of a core at ``--telemetry-interval
    0.1``, on the cores the load workers share), its read lines 0.4 ms
    (benchmarks/README.md, "Telemetry cost")."""
    kept: list[str] = []
    others: list[str] = []
    for ln in text.split("\n"):
        s = ln.lstrip()
        if s.startswith(_READ_NAMES):
            kept.append(ln)
        elif s.startswith(_PREFIXES):
            others.append(s.split("{", 1)[0].split(None, 1)[0])
    return "\n".join(kept) + "\n", others


def detect_engine(names: Iterable[str]) -> str | None:
    """Which engine a set of metric names comes from (by prefix), or None."""
    names = list(names)
    for engine, prefix in _ENGINE_PREFIX.items():
        if any(n.startswith(prefix) for n in names):
            return engine
    return None


def parse_server_metrics(
    text: str,
    t_ns: int | None = None,
    lost: list[str] | None = None,
    notes: list[str] | None = None,
    *,
    read_only: bool = False,
) -> list[Row]:
    """An inference server's Prometheus ``/metrics`` -> one ``kind="server"`` row.

    Values with several label sets (e.g. one per model) are summed. Returns ``[]`` when
    no known engine's metrics are present. ``read_only``: parse only the lines of the
    metrics the row reads (a live sample; the same row, a damaged line elsewhere not
    seen), where a capture or a probe is read whole, every line checked.
    """
    others: list[str] = []
    if read_only:
        text, others = _read_lines(text)
    samples = prometheus_samples(text, lost, notes)
    totals: dict[str, float] = {}
    for name, _labels, value in samples:
        if name in _READ_NAMES and not finite(name, value, lost):
            continue  # NaN: no reading; +-Inf: lost
        if math.isnan(value):
            continue
        totals[name] = totals.get(name, 0.0) + value
    engine = detect_engine([*totals, *others])
    if engine is None:
        if lost is not None:
            lost.append("no vLLM / SGLang / llama.cpp / TGI / reference metrics in the scrape")
        return []
    row = new_row(t_ns=t_ns, source="server", kind=KIND_SERVER, engine=engine)
    for col, names in SERVER_METRICS[engine].items():
        for n in names:
            if n in totals:
                set_column(row, col, totals[n])
                break
    return plausible([row], lost)
