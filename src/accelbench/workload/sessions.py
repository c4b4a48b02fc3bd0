"""Multi-turn sessions and shared system prompts: workloads that use the KV cache the
way production traffic does (docs/WORKLOADS.md).

A session is a conversation of T turns. Turn 0 sends its prompt (a shared system prompt
when ``--shared-prefixes`` asks for one, then the user's message); every later turn
sends the session's real history, the earlier prompts and the server's *actual* replies,
followed by a new user message (``PlannedRequest.history``). The load worker builds that
history as the replies arrive; the plan holds only the new messages, their exact lengths
in the server's tokens, the output length of each turn and the think time between a
reply and the next turn.

Shared prefixes without sessions: K system prompts of P tokens, request i starts with
prompt ``i mod K``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench import validate as v
from accelbench.errors import AccelbenchError
from accelbench.workload.requests import PlannedRequest
from accelbench.workload.synthetic import SyntheticPrompts
from accelbench.workload.tokenizer import Tokenizer

__all__ = ["Span", "parse_span", "session_plan", "shared_prefix_plan"]

# Turns one session may have, and the longest think time (docs/LIMITS.md).
MAX_TURNS = 10_000
MAX_THINK_S = 86_400.0
MAX_SESSIONS = 10_000_000


@dataclass(frozen=True, slots=True)
class Span:
    """A value or a uniform range: ``4`` or ``2:8`` (both ends included for integers)."""

    lo: float
    hi: float

    def draw(self, rng: np.random.Generator, n: int, integer: bool) -> np.ndarray:
        if self.lo == self.hi:
            return np.full(n, self.lo)
        if integer:
            return rng.integers(int(self.lo), int(self.hi) + 1, size=n).astype(float)
        return rng.uniform(self.lo, self.hi, size=n)

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2

    def text(self) -> str:
        return f"{self.lo:g}" if self.lo == self.hi else f"{self.lo:g}:{self.hi:g}"


def parse_span(name: str, spec: str | float | int, lo: float, hi: float, *, integer: bool) -> Span:
    """``N`` or ``LO:HI``, each finite and in [lo, hi] (integers where asked); one line
    naming the option otherwise."""
    parts = str(spec).strip().split(":")
    if len(parts) not in (1, 2):
        raise v.UsageError(f"{name} must be N or LO:HI (got {str(spec)[:40]!r})")
    nums: list[float] = []
    for p in parts:
        try:
            x = float(p)
        except ValueError:
            raise v.UsageError(f"{name} must be N or LO:HI (got {str(spec)[:40]!r})") from None
        if integer:
            # a whole number as typed ("0", not "0.0") in the error line
            nums.append(float(v.integer(name, int(x) if x.is_integer() else x, int(lo), int(hi))))
        else:
            nums.append(v.number(name, x, lo, hi))
    a, b = nums[0], nums[-1]
    if b < a:
        raise v.UsageError(f"{name} LO:HI needs LO <= HI (got {a:g}:{b:g})")
    return Span(a, b)


def _prefixes(tok: Tokenizer, k: int, p: int, seed: int) -> tuple[list[str], list[int]]:
    """K system prompts of P tokens each (distinct text: no accidental sharing)."""
    if k <= 0:
        return [], []
    gen = SyntheticPrompts(tok, seed + 31337, p)
    texts, lens = [], []
    for _ in range(k):
        text, got = gen.make(p)
        texts.append(text)
        lens.append(got)
    return texts, lens


def _joined_length(tok: Tokenizer, text: str) -> int:
    """The text tokens of a concatenation, counted: a seam may merge two tokens."""
    return len(tok.encode(text))


def session_plan(
    *,
    n_sessions: int,
    turns: Span,
    think_s: Span,
    isl: np.ndarray | Callable[[int], np.ndarray],
    osl: np.ndarray | Callable[[int], np.ndarray],
    tok: Tokenizer,
    chat: bool,
    shared_prefixes: int = 0,
    prefix_tokens: int = 0,
    special_tokens: int = 0,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> list[PlannedRequest]:
    """The turns of ``n_sessions`` synthetic sessions, consecutive per session.

    ``isl``/``osl``: the user tokens and output tokens of each turn, as an array over all
    turns or a function of the number of turns. Turn 0's isl_planned is exact (system
    prompt + message + what the server adds); later turns' lengths depend on the
    server's replies and are known only from the server's usage."""
    rng = np.random.default_rng(seed + 2718)
    n_turns = turns.draw(rng, n_sessions, integer=True).astype(np.int64)
    total = int(n_turns.sum())
    users = isl(total) if callable(isl) else isl
    outs = osl(total) if callable(osl) else osl
    thinks = think_s.draw(rng, total, integer=False)
    # only the prompts a session starts with (the K's first n_sessions; the same texts)
    sys_texts, sys_lens = _prefixes(tok, min(shared_prefixes, n_sessions), prefix_tokens, seed)
    # the first turn's message carries what the server adds (BOS, template)
    gen = SyntheticPrompts(tok, seed, int(max(users.max(initial=1), 1)))
    plan: list[PlannedRequest] = []
    j = 0
    for s in range(n_sessions):
        group = s % shared_prefixes if shared_prefixes else None
        for t in range(int(n_turns[s])):
            text, got = gen.make(max(1, int(users[j]) - (special_tokens if t == 0 else 0)))
            prompt: str | list[dict[str, Any]] = text
            planned: int | None = None
            p_tokens = sys_lens[group] if group is not None else 0
            if t == 0:
                planned = got + special_tokens
                if group is not None:
                    if chat:
                        prompt = [
                            {"role": "system", "content": sys_texts[group]},
                            {"role": "user", "content": text},
                        ]
                        planned += p_tokens
                    else:
                        prompt = sys_texts[group] + text
                        planned = _joined_length(tok, prompt) + special_tokens
            plan.append(
                PlannedRequest(
                    prompt,
                    int(outs[j]),
                    planned,
                    session=s,
                    turn=t,
                    think_s=float(thinks[j]) if t else 0.0,
                    history=t > 0,
                    turn_tokens=got if t else planned,
                    prefix_group=group,
                    prefix_tokens=p_tokens,
                )  # fmt: skip
            )
            j += 1
        if progress:
            progress(j, total)
    return plan


def shared_prefix_plan(
    plan: list[PlannedRequest],
    *,
    tok: Tokenizer,
    chat: bool,
    shared_prefixes: int,
    prefix_tokens: int,
    seed: int = 0,
) -> list[PlannedRequest]:
    """Independent requests that start with one of K shared system prompts (request i:
    prompt i mod K), in place: the prompts of ``plan`` become the user messages."""
    # only the prompts a request starts with: all K of P tokens were made, whatever -n
    # (-n 2 --shared-prefixes 1048576 --prefix-tokens 1048576 began making 1e12 tokens)
    sys_texts, sys_lens = _prefixes(tok, min(shared_prefixes, len(plan)), prefix_tokens, seed)
    for i, req in enumerate(plan):
        if not isinstance(req.prompt, str):
            raise AccelbenchError("--shared-prefixes needs text prompts (synthetic or a dataset)")
        g = i % shared_prefixes
        req.prefix_group, req.prefix_tokens = g, sys_lens[g]
        if chat:
            req.prompt = [
                {"role": "system", "content": sys_texts[g]},
                {"role": "user", "content": req.prompt},
            ]
            if req.isl_planned is not None:
                req.isl_planned += sys_lens[g]
        else:
            joined = sys_texts[g] + req.prompt
            if req.isl_planned is not None:  # what the server adds stays the same
                text_tokens = len(tok.encode(req.prompt))
                req.isl_planned += _joined_length(tok, joined) - text_tokens
            req.prompt = joined
    return plan
