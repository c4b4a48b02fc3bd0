"""What the server's ``/metrics`` says about its prefix cache, read at the start and the
end of a run: hit and query counters (their deltas are the server's own hit rate), and
the block size and capacity where it publishes them (vLLM's ``cache_config_info``)."""

from __future__ import annotations

import math
import urllib.error
from dataclasses import dataclass

from accelbench.errors import AccelbenchError
from accelbench.metrics.prefixcache import DEFAULT_BLOCK, ServerCache
from accelbench.telemetry.parsers.prometheus import prometheus_samples
from accelbench.telemetry.sources.server import ServerMetricsSource
from accelbench.urls import Endpoint

# counters of prompt tokens served from the cache, and looked up, per engine
_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total",
         "reference:prefix_cache_hits_total", "sglang:cached_tokens_total")  # fmt: skip
_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total",
            "reference:prefix_cache_queries_total")  # fmt: skip
_CONFIG = ("vllm:cache_config_info", "reference:cache_config_info")


@dataclass(frozen=True, slots=True)
class CacheCounters:
    engine: str | None
    hits: float | None
    queries: float | None
    block_size: int | None
    capacity_blocks: int | None
    cache_outputs: bool | None = None  # the reference server says; vLLM caches them


def _int(text: str | None) -> int | None:
    try:
        v = float(text or "")
    except ValueError:
        return None
    return int(v) if math.isfinite(v) and v >= 0 else None


def read_counters(server: Endpoint, timeout_s: float = 2.0) -> CacheCounters | None:
    """One scrape; None when the server has no /metrics or it cannot be read."""
    try:
        samples = prometheus_samples(ServerMetricsSource(server, timeout_s).fetch())
    except (urllib.error.URLError, OSError, ValueError, AccelbenchError):
        return None
    totals: dict[str, float] = {}
    block = capacity = None
    engine = None
    outputs: bool | None = None
    for name, labels, value in samples:
        if name in _CONFIG:
            block = _int(labels.get("block_size")) or block
            capacity = _int(labels.get("num_gpu_blocks")) or capacity
            engine = name.split(":")[0]
            if labels.get("cache_outputs") in ("true", "false"):
                outputs = labels["cache_outputs"] == "true"
        elif not math.isnan(value):
            totals[name] = totals.get(name, 0.0) + value
    hits = next((totals[n] for n in _HITS if n in totals), None)
    queries = next((totals[n] for n in _QUERIES if n in totals), None)
    engine = engine or next((n.split(":")[0] for n in _HITS if n in totals), None)
    return CacheCounters(engine, hits, queries, block, capacity, outputs)


def server_cache(
    before: CacheCounters | None,
    after: CacheCounters | None,
    *,
    block_size: int | None,
    capacity_tokens: int | None,
    trace_block_size: int | None,
) -> ServerCache:
    """The run's ``client.server_cache``: counter deltas, and the block size and capacity
    the ideal uses (``--block-size`` / ``--kv-capacity-tokens`` first, then the server's)."""
    srv_block = after.block_size if after else None
    cap_blocks = after.capacity_blocks if after else None
    srv_cap = cap_blocks * srv_block if cap_blocks and srv_block else None

    def delta(a: float | None, b: float | None) -> float | None:
        return b - a if a is not None and b is not None and b >= a else None

    return ServerCache(
        engine=after.engine if after else None,
        hits=delta(before.hits if before else None, after.hits if after else None),
        queries=delta(before.queries if before else None, after.queries if after else None),
        server_block_size=srv_block,
        capacity_tokens=capacity_tokens or srv_cap,
        capacity_source="option" if capacity_tokens else "server" if srv_cap else None,
        block_size=block_size or srv_block or DEFAULT_BLOCK,
        cache_outputs=after.cache_outputs if after and after.cache_outputs is not None else True,
        # the reference server (which says whether it caches outputs) caches every output
        # byte; an engine never computes the last sampled token's KV
        output_lag=0 if after and after.cache_outputs is not None else 1,
        trace_block_size=trace_block_size,
    )
