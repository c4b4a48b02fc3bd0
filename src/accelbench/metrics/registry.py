"""The one registry of run-level figures: for each, where it lives in summary.json, its
unit, whether higher is better, its label and definition, and the short names the CLI
accepts. Store, comparisons and reports read figures through it; docs/METRICS.md's alias
table (other tools' names for our metrics) is generated from :data:`TOOL_ALIASES`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.validate import MAX_DURATION_S, MAX_REQUESTS


@dataclass(frozen=True)
class Figure:
    """One run-level figure, declared once."""

    name: str
    path: tuple[str, ...]  # keys into summary.json
    unit: str
    higher_is_better: bool
    label: str  # short table heading
    description: str  # what it is, in one line
    definition: str  # how it is computed (docs/METRICS.md)
    aliases: tuple[str, ...] = ()  # short names accepted on the command line
    comparable: bool = True  # B / A comparisons exist for it (metrics/compare.py)
    frontier: bool = False  # a throughput axis of the frontier
    # compared as B - A in percentage points (a share of tokens: a hit rate), with a
    # cluster bootstrap over sessions (metrics/compare.py), never as a ratio
    difference: bool = False
    # its physical range: a value outside it (or NaN, an infinity, not a number) cannot be
    # a measurement; summary.json's reader calls such a summary damaged (metrics/summary.py)
    lo: float = 0.0
    hi: float = math.inf

    def raw(self, summary: Mapping[str, Any] | None) -> object:
        """The value at the figure's path in ``summary`` as the file holds it; ABSENT where
        a level of the path is missing (null: present, not observed)."""
        v: Any = summary
        for k in self.path:
            if not isinstance(v, Mapping) or k not in v:
                return ABSENT
            v = v[k]
        return v

    def present(self, summary: Mapping[str, Any] | None) -> bool:
        """Whether ``summary`` holds the figure's path (its value may be null)."""
        return self.raw(summary) is not ABSENT

    def value(self, summary: Mapping[str, Any] | None) -> float | None:
        """The figure in ``summary``; None where absent or not a finite number."""
        v = self.raw(summary)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return float(v) if math.isfinite(v) else None

    def damage(self, summary: Mapping[str, Any] | None) -> str | None:
        """Why the figure's value in ``summary`` cannot be a measurement (see
        :func:`out_of_range`); None where it can, or where it is null or absent."""
        v = self.raw(summary)
        if v is None or v is ABSENT:
            return None
        return out_of_range(".".join(self.path), v, self.lo, self.hi)


ABSENT = object()  # Figure.raw: a level of the path is missing

# The most a run can measure, so that an edited figure of 1e300 tok/s is damage, not a
# result a claim is judged on: every request a run may send (MAX_REQUESTS) with 10M
# tokens (a context beyond any model's) done in one tick of the client's nanosecond
# clock. Far above any real figure; it refuses what no measurement can give.
_MAX_REQUEST_TOKENS = 10_000_000
MAX_TOKENS_PER_S = MAX_REQUESTS * _MAX_REQUEST_TOKENS * 1e9
MAX_REQUESTS_PER_S = MAX_REQUESTS * 1e9
# 1000 / p50 TPOT: one request's 10M tokens in one clock tick
MAX_TOKENS_PER_S_PER_USER = _MAX_REQUEST_TOKENS * 1e9
# a request lasts at most its timeout (at most MAX_DURATION_S); twice that, in ms
MAX_LATENCY_MS = 2 * MAX_DURATION_S * 1000


def out_of_range(where: str, v: object, lo: float = 0.0, hi: float = math.inf) -> str | None:
    """What is wrong with ``v`` as a figure in [lo, hi] (``where``: its path): not a
    number, NaN, an infinity (JSON's ``NaN`` / ``Infinity`` or the writer's "inf"), or
    outside the range; None where it is a finite number in range."""
    x = float(v) if v in ("inf", "-inf") else v  # the writer's infinities
    if isinstance(x, bool) or not isinstance(x, int | float):
        shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
        return f"{where} is {shown}, not a number"
    try:
        ok = math.isfinite(x) and lo <= x <= hi
    except OverflowError:  # an integer beyond float range
        ok = False
    if ok:
        return None
    shown = f"{x:g}" if isinstance(x, float) else (str(x) if x.bit_length() < 64 else "huge")
    rng = f"{'(' if lo == -math.inf else '['}{lo:g}, {hi:g}{')' if hi == math.inf else ']'}"
    return f"{where} = {shown} is outside its physical range {rng}"


def _f(*args: Any, **kw: Any) -> Figure:
    return Figure(*args, **kw)


_ALL = (
    _f("output_tps_per_gpu", ("throughput", "output_tokens_per_s_per_gpu"), "tok/s/GPU", True,
       "Output / GPU", "output tokens/s per GPU", "sum of OSL / window / GPUs",
       ("throughput", "output"), frontier=True, hi=MAX_TOKENS_PER_S),
    _f("total_tps_per_gpu", ("throughput", "total_tokens_per_s_per_gpu"), "tok/s/GPU", True,
       "Total / GPU", "total (input + output) tokens/s per GPU",
       "sum of (ISL + OSL) / window / GPUs", ("total",), frontier=True,
       hi=MAX_TOKENS_PER_S),
    _f("output_tps", ("throughput", "output_tokens_per_s"), "tok/s", True, "Output",
       "output tokens/s", "sum of OSL / window", comparable=False, hi=MAX_TOKENS_PER_S),
    _f("total_tps", ("throughput", "total_tokens_per_s"), "tok/s", True, "Total",
       "total (input + output) tokens/s", "sum of (ISL + OSL) / window", comparable=False,
       hi=MAX_TOKENS_PER_S),
    _f("requests_per_s", ("throughput", "requests_per_s"), "req/s", True, "Requests",
       "completed requests per second", "completed measured requests / window",
       hi=MAX_REQUESTS_PER_S),
    _f("interactivity", ("interactivity", "tok_s_user"), "tok/s/user", True, "Interactivity",
       "1000 / p50 TPOT", "1000 / p50 TPOT (InferenceX convention)",
       hi=MAX_TOKENS_PER_S_PER_USER),
    _f("ttft_p50_ms", ("latency", "ttft_ms", "p50"), "ms", False, "TTFT p50",
       "median time to first token", "t_first - t_send, median", ("ttft",), hi=MAX_LATENCY_MS),
    _f("ttft_p99_ms", ("latency", "ttft_ms", "p99"), "ms", False, "TTFT p99",
       "p99 time to first token", "t_first - t_send, 99th percentile", hi=MAX_LATENCY_MS),
    _f("tpot_p50_ms", ("latency", "tpot_ms", "p50"), "ms", False, "TPOT p50",
       "median time per output token", "(E2E - TTFT) / (OSL - 1), median", ("tpot",),
       hi=MAX_LATENCY_MS),
    _f("tpot_p99_ms", ("latency", "tpot_ms", "p99"), "ms", False, "TPOT p99",
       "p99 time per output token", "(E2E - TTFT) / (OSL - 1), 99th percentile",
       comparable=False, hi=MAX_LATENCY_MS),
    _f("e2e_p50_ms", ("latency", "e2e_ms", "p50"), "ms", False, "E2E p50",
       "median end-to-end latency", "t_last - t_send, median", ("e2e",), hi=MAX_LATENCY_MS),
    _f("e2e_p99_ms", ("latency", "e2e_ms", "p99"), "ms", False, "E2E p99",
       "p99 end-to-end latency", "t_last - t_send, 99th percentile", hi=MAX_LATENCY_MS),
    _f("error_rate", ("errors", "rate"), "fraction", False, "Errors",
       "failed / measured requests", "failed / measured requests", comparable=False, hi=1.0),
    # prefix cache (summary.json ``cache``, metrics/prefixcache.py; docs/METRICS.md):
    # finite only (the server's word, cached_tokens and its counters, need not keep to
    # [0, 1], and the gap follows it)
    _f("cache_hit_rate", ("cache", "hit_rate"), "fraction", True, "Hit rate",
       "prefix-cache hit rate from the responses",
       "sum of cached_tokens / sum of prompt tokens (ISL), measured requests whose "
       "response said what was cached", ("hit_rate",),
       comparable=False, difference=True, lo=-math.inf),
    _f("cache_hit_rate_server", ("cache", "hit_rate_server"), "fraction", True, "Hit rate (server)",
       "prefix-cache hit rate from the server's counters",
       "delta of the server's cache hits / delta of its cache queries over the run, "
       "warm-up included (vllm:prefix_cache_hits / queries)", ("hit_rate_server",),
       comparable=False, lo=-math.inf),
    _f("cache_ideal_infinite", ("cache", "ideal_infinite"), "fraction", True, "Ideal (infinite)",
       "hit rate of an infinite ideal prefix cache",
       "the workload's requests replayed through an infinite block cache (the ideal rule): "
       "cached tokens / prompt tokens, measured requests", ("ideal", "ideal_infinite"),
       comparable=False, lo=-math.inf),
    _f("cache_ideal_lru", ("cache", "ideal_lru"), "fraction", True, "Ideal (LRU)",
       "hit rate of an ideal LRU prefix cache of the server's capacity",
       "as the infinite ideal, with LRU eviction at the server's KV capacity in blocks "
       "(none where the capacity is not known)", ("ideal_lru",), comparable=False, lo=-math.inf),
    _f("cache_gap_pp", ("cache", "gap_pp"), "pp", False, "Gap to ideal",
       "ideal minus measured hit rate, in percentage points",
       "100 x (ideal LRU hit rate, else the infinite one, - hit rate from the responses)",
       ("gap", "gap_pp"), comparable=False, lo=-math.inf),
)  # fmt: skip

FIGURES: dict[str, Figure] = {f.name: f for f in _ALL}
ALIASES: dict[str, str] = {a: f.name for f in _ALL for a in f.aliases}
COMPARABLE: tuple[str, ...] = tuple(f.name for f in _ALL if f.comparable)
FRONTIER: tuple[str, ...] = tuple(f.name for f in _ALL if f.frontier)
DIFFERENCE: tuple[str, ...] = tuple(f.name for f in _ALL if f.difference)
# The prefix-cache figures, in the order reports show them (a run without a ``cache``
# section has none of them).
CACHE: tuple[str, ...] = ("cache_hit_rate", "cache_hit_rate_server", "cache_ideal_infinite",
                          "cache_ideal_lru", "cache_gap_pp")  # fmt: skip


def figure(name: str) -> Figure:
    """The figure called ``name`` (or one of its aliases)."""
    f = FIGURES.get(ALIASES.get(name, name))
    if f is None:
        raise AccelbenchError(f"unknown figure {name!r}; known: {', '.join(FIGURES)}")
    return f


# ----------------------------------------------------------------------------- other tools

# Per-request quantities of docs/METRICS.md, by the name used there, and the summary.json
# block (under ``latency``) that describes their distribution; None: no block of its own.
QUANTITIES: dict[str, str | None] = {
    "TTFT": "ttft_ms",
    "TPOT": "tpot_ms",
    "NTPOT": "ntpot_ms",
    "E2E latency": "e2e_ms",
    "chunk gaps": "chunk_gap_ms",
    "interactivity": None,  # run level: interactivity.tok_s_user
    "total throughput per GPU": None,  # run level: throughput.total_tokens_per_s_per_gpu
}


@dataclass(frozen=True)
class ToolAlias:
    """``tools`` call ``theirs`` what we call ``ours`` (a QUANTITIES key); ``ours`` None
    where we have no equal, ``note`` says why."""

    tools: str
    theirs: str
    ours: str | None
    note: str = ""


TOOL_ALIASES: tuple[ToolAlias, ...] = (
    ToolAlias("vLLM bench serve, SGLang, InferenceX", "TPOT", "TPOT"),
    ToolAlias("vLLM, SGLang, inference-perf, evalscope", "ITL (pooled chunk gaps)", "chunk gaps"),
    ToolAlias("AIPerf, GenAI-Perf", "ITL", "TPOT"),
    ToolAlias("AIPerf", "ICL", "chunk gaps"),
    ToolAlias("GuideLLM", "TPOT", "NTPOT"),
    ToolAlias("GuideLLM", "ITL", "TPOT"),
    ToolAlias("inference-perf", "NTPOT", "NTPOT"),
    ToolAlias("llmperf", "ITL", None, "sum of all gaps including TTFT over chunks"),
    ToolAlias("InferenceX", "interactivity", "interactivity"),
    ToolAlias("InferenceX", "tok/s/GPU", "total throughput per GPU"),
)


def alias_table_markdown() -> str:
    """docs/METRICS.md's alias table, from TOOL_ALIASES."""
    lines = ["| tool | their name | ours |", "|---|---|---|"]
    for a in TOOL_ALIASES:
        ours = a.ours if a.ours is not None else f"none ({a.note})"
        lines.append(f"| {a.tools} | {a.theirs} | {ours} |")
    return "\n".join(lines) + "\n"
