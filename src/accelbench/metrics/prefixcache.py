"""Prefix-cache hit rates, three ways (docs/WORKLOADS.md): what the server's responses
said (``cached_tokens``), what its counters said, and the **ideal** the workload implies:
an infinite cache, and an LRU cache of the server's capacity where it is known. The gap
between measured and ideal is the headline of a session or shared-prefix workload: a
server whose measured rate falls short of the LRU ideal is losing cache it could have kept;
an LRU ideal far below the infinite one says the working set does not fit (thrashing).

The ideal follows one rule, the one vLLM's block cache and the reference server's follow
(docs/WORKLOADS.md "The ideal"): blocks of B tokens; a prompt of L tokens hits the longest
run of leading blocks present, at most ``(L - 1) // B`` (one token is always computed);
its full prompt blocks are then inserted (most recently used), and, where outputs are
cached, the blocks of prompt and output on completion; a full cache evicts the least
recently used block.

What a block *is* comes from the workload's structure, not from the text: block j of a
session's request is (session, j), since a session's every prompt extends the one before
it (history, reply, new message); a block entirely inside a shared system prompt is
(prompt, j); a trace's blocks are its ``hash_ids``; an independent request's blocks are its
own. Where a server's tokens at a seam differ from this (a chat template, a reply that
re-tokenizes differently), the measured rate falls short of the ideal by those blocks.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from accelbench.metrics.records import ErrorKind
from accelbench.metrics.stats import describe

__all__ = ["CacheRequest", "CacheSection", "IdealHits", "ServerCache", "cache_section",
           "ideal_hits"]  # fmt: skip

# The ideal's block size when neither the server nor --block-size says (vLLM's default).
DEFAULT_BLOCK = 16


@dataclass(slots=True)
class CacheRequest:
    """One request as the ideal cache sees it. Times are any one clock (ns)."""

    t_arrive: int
    t_done: int | None  # None: it never completed (nothing of its output is cached)
    prompt_tokens: int
    output_tokens: int  # in the tokens a later prompt counts them in (0: not cached)
    key: Hashable  # the session (or the request itself): positional block identity
    prefix_key: Hashable | None = None  # a shared system prompt...
    prefix_tokens: int = 0  # ...of this many tokens
    blocks: Sequence[int] | None = None  # trace hash_ids: the blocks themselves


@dataclass(frozen=True, slots=True)
class IdealHits:
    """Per request, the cached tokens of the ideal cache, in the input order."""

    cached: list[int]
    prompt_tokens: int
    block_size: int
    capacity_blocks: int | None  # None: infinite

    @property
    def hit_rate(self) -> float | None:
        return sum(self.cached) / self.prompt_tokens if self.prompt_tokens else None


def _block_ids(r: CacheRequest, n: int, b: int) -> list[Hashable]:
    if r.blocks is not None:
        return [("h", h) for h in r.blocks[:n]]
    out: list[Hashable] = []
    for j in range(n):
        if r.prefix_key is not None and (j + 1) * b <= r.prefix_tokens:
            out.append(("p", r.prefix_key, j))
        else:
            out.append(("s", r.key, j))
    return out


def ideal_hits(
    requests: Sequence[CacheRequest],
    block_size: int,
    capacity_blocks: int | None = None,
    *,
    cache_outputs: bool = True,
    output_lag: int = 0,
) -> IdealHits:
    """Replay the requests' arrivals and completions in time order through the ideal
    cache (``capacity_blocks`` None: infinite). At one instant, completions go first.
    ``output_lag``: output tokens at the end with no KV when a request ends (vLLM and
    llama-server never run the last sampled token through the model: 1)."""
    if block_size < 1:
        raise ValueError("block_size must be at least 1")
    b = block_size
    events: list[tuple[int, int, int]] = []  # (time, 0 completion | 1 arrival, index)
    for i, r in enumerate(requests):
        events.append((r.t_arrive, 1, i))
        if r.t_done is not None and cache_outputs and r.output_tokens > 0:
            events.append((r.t_done, 0, i))
    heapq.heapify(events)
    cache: OrderedDict[Hashable, None] = OrderedDict()
    cap = capacity_blocks

    def insert(ids: list[Hashable]) -> None:
        if cap == 0:
            return
        for k in ids:
            if k in cache:
                cache.move_to_end(k)
            else:
                cache[k] = None
                if cap is not None and len(cache) > cap:
                    cache.popitem(last=False)

    cached = [0] * len(requests)
    while events:
        _, kind, i = heapq.heappop(events)
        r = requests[i]
        if kind == 0:
            n_out = (r.prompt_tokens + max(0, r.output_tokens - output_lag)) // b
            if r.blocks is None:  # a trace's output blocks have no identity to go by
                insert(_block_ids(r, n_out, b))
            continue
        full = r.prompt_tokens // b
        ids = _block_ids(r, full, b)
        most = max(0, (r.prompt_tokens - 1) // b)
        hit = 0
        while hit < min(most, len(ids)) and ids[hit] in cache:
            hit += 1
        cached[i] = hit * b
        insert(ids)  # the hit blocks first (they lead), then the rest, in order
    total = sum(r.prompt_tokens for r in requests)
    return IdealHits(cached, total, b, cap)


# -- the run's cache section (summary.json ``cache``) ----------------------------------
class ServerCache(TypedDict, total=False):
    """What the run learnt of the server's prefix cache (run.json and summary.json
    ``client.server_cache``): counter deltas over the run (warm-up included: the cache
    carries across it), its block size and capacity where /metrics says (vLLM's
    ``cache_config_info``) or ``--kv-capacity-tokens`` does, and the block size the
    ideal used."""

    engine: str | None
    hits: float | None  # tokens served from the cache (counter delta)
    queries: float | None  # prompt tokens looked up (counter delta)
    server_block_size: int | None
    capacity_tokens: int | None
    capacity_source: str | None  # server | option
    block_size: int  # the ideal's
    cache_outputs: bool  # whether the ideal caches outputs (the server says; else yes)
    output_lag: int  # output tokens without KV at the end (engines: 1; the reference: 0)
    trace_block_size: int | None  # a trace's hash_ids' block size


def server_counter_problem(server: ServerCache | None) -> str | None:
    """Why the server's prefix-cache counters give no hit rate that can be true (None
    when they give one, or give none for want of counters): more hits than queries over
    the run (a counter that is not what its name says, or reset between the reads)."""
    if not server:
        return None
    hits, queries = server.get("hits"), server.get("queries")
    if hits is not None and queries is not None and hits > queries:
        return (
            f"the server's prefix-cache counters say {hits:,.0f} hits of {queries:,.0f} "
            "queries over the run, which cannot be: no hit rate from them (n/a)"
        )
    return None


def server_hit_rate(server: ServerCache | None) -> float | None:
    """The hit rate by the server's counters (hits / queries over the run); None without
    both counters, with no queries, or where they cannot be true (more hits than queries:
    ``server_counter_problem``)."""
    if not server or server_counter_problem(server):
        return None
    hits, queries = server.get("hits"), server.get("queries")
    return hits / queries if hits is not None and queries else None


class TurnBin(TypedDict):
    n: int
    ttft_ms_p50: float | None
    ttft_ms_p90: float | None
    hit_rate: float | None


class SessionFigures(TypedDict):
    n: int
    completed: int  # every planned turn answered
    ended_early: int  # a turn failed: the rest of the session was not sent
    # the run stopped (a stop signal) before the session's last planned turn: neither
    # completed nor ended early; absent in summaries written before it
    stopped: NotRequired[int]
    turns_mean: float | None
    time_to_finish_s: dict[str, float | int | None]  # describe(): first send to last reply


class CacheSection(TypedDict):
    """summary.json ``cache`` (docs/RESULTS.md): hit rates as shares of prompt tokens."""

    block_size: int
    capacity_tokens: int | None
    requests: int  # measured requests with a prompt length
    prompt_tokens: int
    reported: int  # of them, how many responses said how many tokens were cached
    cached_tokens: int | None
    hit_rate: float | None  # from the responses, measured requests
    hit_rate_all: float | None  # from the responses, warm-up included (as the counters)
    hit_rate_server: float | None  # from the server's counters, warm-up included
    ideal_infinite: float | None
    ideal_lru: float | None  # None: the capacity is not known
    gap_pp: float | None  # ideal (LRU where known, else infinite) - measured, in points
    by_turn: dict[str, TurnBin]  # "0", "1", "2", "3+"
    by_cached_share: dict[str, TurnBin]  # "0", "(0,0.5]", "(0.5,1]"
    sessions: SessionFigures | None


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    import numpy as np

    return float(np.percentile(np.asarray(xs, dtype=float), q))


def _bin(rows: list[dict[str, Any]]) -> TurnBin:
    ttft = [float(r["ttft_ms"]) for r in rows if r["ttft_ms"] is not None]
    p = sum(int(r["isl"] or 0) for r in rows if r["cached_tokens"] is not None)
    c = sum(int(r["cached_tokens"]) for r in rows if r["cached_tokens"] is not None)
    return TurnBin(n=len(rows), ttft_ms_p50=_pct(ttft, 50), ttft_ms_p90=_pct(ttft, 90),
                   hit_rate=c / p if p else None)  # fmt: skip


CACHE_COLUMNS = (
    "idx", "warmup", "ok", "error_kind", "t_send", "t_done", "isl", "isl_planned", "osl",
    "ttft_ms", "session", "turn", "cached_tokens", "turn_tokens", "prefix_group",
    "prefix_tokens", "blocks", "max_tokens", "session_turns",
)  # fmt: skip


def has_cache_structure(rows: Sequence[Mapping[str, Any]]) -> bool:
    return any(
        r.get("session") is not None
        or r.get("prefix_group") is not None
        or r.get("blocks") is not None
        or r.get("cached_tokens") is not None
        for r in rows
    )


def _output_as_prompt(rows: list[dict[str, Any]]) -> dict[int, int]:
    """Each session turn's output in the tokens the next turn's prompt counts it in:
    the next turn's prompt minus this one's minus the next turn's own message; a last
    turn's is its output tokens scaled by the run's median of that ratio."""
    out: dict[int, int] = {}
    ratios: list[float] = []
    by_session: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        if r["session"] is not None:
            by_session.setdefault((r["warmup"], r["session"]), []).append(r)
    lasts = []
    for turns in by_session.values():
        turns.sort(key=lambda r: r["turn"] or 0)
        for a, b in zip(turns, turns[1:], strict=False):
            if a["isl"] is not None and b["isl"] is not None and b["turn_tokens"] is not None:
                o = int(b["isl"]) - int(a["isl"]) - int(b["turn_tokens"])
                out[a["idx"]] = max(0, o)
                if a["osl"]:
                    ratios.append(max(0, o) / int(a["osl"]))
        lasts.append(turns[-1])
    ratio = _pct(ratios, 50) if ratios else 1.0
    for r in lasts:
        if r["idx"] not in out:
            out[r["idx"]] = round((r["osl"] or 0) * (ratio or 1.0))
    return out


def cache_section(rows: list[dict[str, Any]], server: ServerCache | None) -> CacheSection | None:
    """The cache section from the run's rows (``CACHE_COLUMNS``), or None when the
    workload had no structure and no response said what was cached."""
    if not has_cache_structure(rows):
        return None
    server = server or ServerCache(block_size=DEFAULT_BLOCK)
    b = int(server.get("block_size") or DEFAULT_BLOCK)
    cap_tokens = server.get("capacity_tokens")
    trace_b = server.get("trace_block_size")
    sent = [
        r for r in rows
        if r["error_kind"] != ErrorKind.CONNECT_ERROR and (r["isl"] or r["isl_planned"])
    ]  # fmt: skip
    sent.sort(key=lambda r: r["t_send"])
    out_p = _output_as_prompt(sent)
    reqs = []
    for r in sent:
        prompt = int(r["isl"] or r["isl_planned"])
        key = ("s", r["warmup"], r["session"]) if r["session"] is not None else ("r", r["idx"])
        group = r["prefix_group"]
        reqs.append(CacheRequest(
            t_arrive=int(r["t_send"]), t_done=int(r["t_done"]) if r["ok"] and r["t_done"] else None,
            prompt_tokens=prompt, output_tokens=out_p.get(r["idx"], int(r["osl"] or 0)),
            key=key, prefix_key=group, prefix_tokens=int(r["prefix_tokens"] or 0),
            blocks=r["blocks"],
        ))  # fmt: skip
    # independent prompts (no session, shared prompt or trace blocks) imply no reuse:
    # the ideal is only the server's word then, and is not shown
    structured = any(r["session"] is not None or r["prefix_group"] is not None
                     or r["blocks"] is not None for r in sent)  # fmt: skip
    traced = any(r.blocks is not None for r in reqs)
    ib = int(trace_b or 512) if traced else b
    outs = bool(server.get("cache_outputs", True))
    lag = int(server.get("output_lag", 1))
    inf: IdealHits | None = ideal_hits(reqs, ib, None, cache_outputs=outs, output_lag=lag)
    lru = (ideal_hits(reqs, ib, cap_tokens // ib, cache_outputs=outs, output_lag=lag)
           if cap_tokens else None)  # fmt: skip
    measured = [i for i, r in enumerate(sent) if not r["warmup"]]
    m_rows = [sent[i] for i in measured]
    m_prompt = sum(reqs[i].prompt_tokens for i in measured)

    def share(h: IdealHits | None) -> float | None:
        if h is None or not m_prompt:
            return None
        return sum(h.cached[i] for i in measured) / m_prompt

    rep = [r for r in m_rows if r["cached_tokens"] is not None and r["isl"] is not None]
    rep_p = sum(int(r["isl"]) for r in rep)
    cached = sum(int(r["cached_tokens"]) for r in rep) if rep else None
    hit = cached / rep_p if cached is not None and rep_p else None
    rep_all = [r for r in sent if r["cached_tokens"] is not None and r["isl"] is not None]
    p_all = sum(int(r["isl"]) for r in rep_all)
    hit_all = sum(int(r["cached_tokens"]) for r in rep_all) / p_all if p_all else None
    hit_server = server_hit_rate(server)
    ideal = share(lru) if lru is not None else share(inf)
    if not structured:
        inf = lru = None
        ideal = None
    gap = (ideal - hit) * 100 if ideal is not None and hit is not None else None
    by_turn: dict[str, list[dict[str, Any]]] = {}
    by_share: dict[str, list[dict[str, Any]]] = {"0": [], "(0,0.5]": [], "(0.5,1]": []}
    for r in m_rows:
        if not r["ok"]:
            continue
        if r["turn"] is not None:
            t = int(r["turn"])
            by_turn.setdefault(str(t) if t < 3 else "3+", []).append(r)
        if r["cached_tokens"] is not None and r["isl"]:
            s = int(r["cached_tokens"]) / int(r["isl"])
            by_share["0" if s == 0 else "(0,0.5]" if s <= 0.5 else "(0.5,1]"].append(r)
    return CacheSection(
        block_size=ib, capacity_tokens=cap_tokens, requests=len(m_rows), prompt_tokens=m_prompt,
        reported=len(rep), cached_tokens=cached, hit_rate=hit, hit_rate_all=hit_all,
        hit_rate_server=hit_server, ideal_infinite=share(inf), ideal_lru=share(lru),
        gap_pp=gap, by_turn={k: _bin(v) for k, v in sorted(by_turn.items())},
        by_cached_share={k: _bin(v) for k, v in by_share.items() if v},
        sessions=_sessions([r for r in rows if not r["warmup"]]),
    )  # fmt: skip


def _sessions(rows: list[dict[str, Any]]) -> SessionFigures | None:
    by: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if r["session"] is not None:
            by.setdefault(int(r["session"]), []).append(r)
    if not by:
        return None
    done, early, stopped, spans, turns = 0, 0, 0, [], []
    for rs in by.values():
        turns.append(len(rs))
        failed = [r for r in rs if not r["ok"]]
        planned = max((int(r.get("session_turns") or 0) for r in rs), default=0)
        if failed:
            # a turn the stop cut off is no failure of the session
            if all(r["error_kind"] == ErrorKind.INTERRUPTED for r in failed):
                stopped += 1
            else:
                early += 1
        elif len(rs) < planned:  # the stop came before its later turns were sent
            stopped += 1
        else:
            done += 1
            ends = [r["t_done"] for r in rs if r["t_done"]]
            if ends:
                spans.append((max(ends) - min(r["t_send"] for r in rs)) / 1e9)
    return SessionFigures(n=len(by), completed=done, ended_early=early, stopped=stopped,
                          turns_mean=sum(turns) / len(turns),
                          time_to_finish_s=describe(spans))  # fmt: skip
