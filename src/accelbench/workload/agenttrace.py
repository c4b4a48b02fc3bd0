"""A seeded synthetic agent trace: sessions of tool-call turns with a growing context, as
Mooncake-style JSONL that :func:`~accelbench.workload.traces.load_trace` reads
(``accelbench trace agent``; docs/WORKLOADS.md, "Agent traces").

A session is an agent's loop: its first turn is a system prompt shared by every session
plus the session's own task (a user message); each later turn sends the whole context
again, grown by the previous reply and a tool's result, after the tool ran. So:

* input of turn 0 = ``system_tokens`` + a task of ~``user_tokens``;
* input of turn k = input of turn k-1 + output of turn k-1 + a tool result of
  ~``tool_tokens``; every output is ~``osl`` tokens ("~": uniform within
  ``spread`` of the figure, seeded; ``spread`` 0 makes them exact);
* ``hash_ids`` (one id per ``block_size`` tokens, the last block possibly partial):
  the system prompt's full blocks have the same ids in every session (0, 1, ...); turn
  k's ids begin with turn k-1's full blocks (``prev[:prev_input // block_size]``:
  its context is a prefix of this one) and continue with ids never used before (the
  block that held the previous partial block now holds other tokens too);
* sessions arrive as a Poisson process of ``rate`` sessions a second (turn 0's
  ``timestamp``, ms); a later turn carries ``delay``: the tool's run time in ms,
  exponential with mean ``tool_ms``, counted from the previous reply's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from accelbench import validate as v
from accelbench.errors import UsageError
from accelbench.workload.requests import arrival_offsets
from accelbench.workload.traces import (
    DEFAULT_BLOCK_SIZE,
    MAX_TRACE_BLOCK_IDS,
    MAX_TRACE_REQUESTS,
    MAX_TRACE_SPAN_S,
    MAX_TRACE_TOKENS,
    check_block_size,
)

__all__ = ["AgentTraceSpec", "agent_trace", "write_agent_trace"]

MAX_TURNS = 10_000
MAX_TOOL_MS = 86_400_000.0  # a tool that runs a day


@dataclass(frozen=True)
class AgentTraceSpec:
    """What ``accelbench trace agent`` makes; :meth:`checked` validates it (the CLI's
    words)."""

    sessions: int
    turns: int = 4
    system_tokens: int = 1024
    user_tokens: int = 128
    tool_tokens: int = 256
    osl: int = 128
    rate: float = 2.0  # sessions a second
    tool_ms: float = 500.0  # mean tool run time (the delay before a later turn)
    spread: float = 0.5  # lengths uniform in [x(1-spread), x(1+spread)]
    block_size: int = DEFAULT_BLOCK_SIZE
    seed: int = 0

    def checked(self) -> AgentTraceSpec:
        """The spec with every field in range, or one UsageError line naming the option."""
        spec = AgentTraceSpec(
            sessions=v.integer("--sessions", self.sessions, 1, MAX_TRACE_REQUESTS),
            turns=v.integer("--turns", self.turns, 1, MAX_TURNS),
            system_tokens=v.integer("--system-tokens", self.system_tokens, 0, MAX_TRACE_TOKENS),
            user_tokens=v.integer("--user-tokens", self.user_tokens, 1, MAX_TRACE_TOKENS),
            tool_tokens=v.integer("--tool-tokens", self.tool_tokens, 1, MAX_TRACE_TOKENS),
            osl=v.integer("--osl", self.osl, 1, MAX_TRACE_TOKENS),
            rate=v.number("--rate", self.rate, 0, 1e6, lo_open=True, unit="sessions/s"),
            tool_ms=v.number("--tool-ms", self.tool_ms, 0, MAX_TOOL_MS, unit="ms"),
            spread=v.number("--spread", self.spread, 0, 1, unit="(a fraction below 1)"),
            block_size=check_block_size(self.block_size),
            seed=v.seed("--seed", self.seed),
        )
        if spec.spread >= 1:
            raise UsageError(f"--spread must be below 1 (got {spec.spread:g})")
        if spec.sessions * spec.turns > MAX_TRACE_REQUESTS:
            raise UsageError(
                f"--sessions {spec.sessions} x --turns {spec.turns} is more than "
                f"{MAX_TRACE_REQUESTS:,} requests"
            )
        hi = 1 + spec.spread
        longest = (
            spec.system_tokens
            + spec.user_tokens * hi
            + (spec.turns - 1) * (spec.osl + spec.tool_tokens) * hi
        )
        if longest > MAX_TRACE_TOKENS:
            raise UsageError(
                f"the last turn's context can reach {longest:,.0f} tokens, more than "
                f"{MAX_TRACE_TOKENS:,}: fewer --turns or smaller --tool-tokens / --osl"
            )
        # every turn lists its whole context's blocks: the ids grow with turns squared
        # (--turns 1000 of 1,000 tokens each in blocks of 1: 5e8 ids, gigabytes; 200 such
        # turns already wrote 122 MB)
        # (an upper bound: each length at most _draw's top, each line's last block whole)
        first = spec.system_tokens + _top(spec.user_tokens, spec.spread)
        grow = _top(spec.osl, spec.spread) + _top(spec.tool_tokens, spec.spread)
        t = spec.turns
        ids = spec.sessions * ((t * first + grow * t * (t - 1) / 2) / spec.block_size + t)
        if ids > MAX_TRACE_BLOCK_IDS:
            raise UsageError(
                f"the trace's hash_ids can reach {ids:,.0f} ids (every turn lists its "
                f"context's blocks of --block-size {spec.block_size}), more than "
                f"{MAX_TRACE_BLOCK_IDS:,}: a larger --block-size, or fewer --sessions / --turns"
            )
        return spec

    def draws(self) -> bool:
        """Whether the seed changes the trace (after ``checked``): the sessions' start
        times, a length that ``spread`` varies, or tool run times between turns."""
        lengths = [self.user_tokens, self.osl, *([self.tool_tokens] * (self.turns > 1))]
        varied = any(lo < hi for lo, hi in (_bounds(x, self.spread) for x in lengths))
        return self.sessions > 1 or varied or (self.turns > 1 and self.tool_ms > 0)


def _bounds(x: int, spread: float) -> tuple[int, int]:
    lo = max(1, round(x * (1 - spread)))
    return lo, max(lo, round(x * (1 + spread)))


def _top(x: int, spread: float) -> int:
    """The largest length :func:`_draw` can give for ``x``."""
    return _bounds(x, spread)[1]


def _draw(rng: np.random.Generator, x: int, spread: float, shape: tuple[int, ...]) -> np.ndarray:
    lo, hi = _bounds(x, spread)
    return rng.integers(lo, hi + 1, size=shape)


def agent_trace(spec: AgentTraceSpec) -> list[dict[str, Any]]:
    """The trace's lines, sessions in arrival order, each session's turns in order."""
    spec = spec.checked()
    rng = np.random.default_rng(spec.seed)
    n, t, b = spec.sessions, spec.turns, spec.block_size
    users = _draw(rng, spec.user_tokens, spec.spread, (n,))
    tools = _draw(rng, spec.tool_tokens, spec.spread, (n, t))  # column 0 unused
    outs = _draw(rng, spec.osl, spec.spread, (n, t))
    delays = np.rint(rng.exponential(spec.tool_ms, size=(n, t))) if spec.tool_ms else None
    starts = arrival_offsets(n, spec.rate, "poisson", 1.0, spec.seed)
    if n > 1 and not starts[-1] <= MAX_TRACE_SPAN_S:  # what every trace reader refuses
        raise UsageError(
            f"--rate {spec.rate:g}: the {n:,} sessions' starts span {starts[-1]:.3g} s, more "
            f"than the {MAX_TRACE_SPAN_S:g} s (30 days) a trace may span"
        )
    system = list(range(spec.system_tokens // b))  # the shared system prompt's full blocks
    fresh = len(system)  # the next id never used
    width = len(str(n - 1))
    lines: list[dict[str, Any]] = []
    for s in range(n):
        sid = f"agent-{s:0{width}d}"
        ids: list[int] = system
        isl = prev_isl = 0
        for k in range(t):
            if k == 0:
                isl = spec.system_tokens + int(users[s])
                keep = len(system)
            else:
                isl = prev_isl + int(outs[s, k - 1]) + int(tools[s, k])
                keep = prev_isl // b  # the previous turn's full blocks: a prefix of this
            total = -(-isl // b)
            ids = ids[:keep] + list(range(fresh, fresh + total - keep))
            fresh += total - keep
            line: dict[str, Any] = {"session_id": sid, "turn": k}
            if k == 0:
                line["timestamp"] = round(float(starts[s]) * 1000.0, 3)
            else:
                line["delay"] = float(delays[s, k]) if delays is not None else 0.0
            line |= {"input_length": isl, "output_length": int(outs[s, k]), "hash_ids": ids}
            lines.append(line)
            prev_isl = isl
    return lines


def write_agent_trace(spec: AgentTraceSpec, path: str | Path) -> int:
    """Write the trace to ``path`` (JSONL, atomically: all of it or nothing); the number
    of lines (requests) written."""
    from accelbench.store.rundir import write_text_atomic

    out = v.output_file("-o", path)
    lines = agent_trace(spec)
    write_text_atomic(out, b"".join(orjson.dumps(x) + b"\n" for x in lines).decode())
    return len(lines)
