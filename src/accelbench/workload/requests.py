"""A planned request, and when an arrival process sends it: what the plan builders
(``plan.py`` for synthetic prompts and datasets, ``traces.py`` for traces) both make."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.errors import AccelbenchError


@dataclass(slots=True)
class PlannedRequest:
    prompt: str | list[dict[str, Any]]
    max_tokens: int
    isl_planned: int | None  # prompt tokens the server should count (client tokenizer)
    offset_s: float | None = None  # --trace: seconds after the start at which to send it
    body: dict[str, Any] | None = None  # --trace of recorded requests: sent as recorded
    endpoint: str | None = None  # the recorded request's endpoint
    # -- sessions and shared prefixes (docs/WORKLOADS.md) --------------------------
    # The turns of one session are consecutive in the plan, in turn order, and are sent
    # one after the other on one worker: turn k > 0 goes ``think_s`` after turn k-1's
    # reply ended (and not before ``offset_s`` when a trace gives one).
    session: int | None = None  # the session (conversation) this request is a turn of
    turn: int = 0  # its position in the session, from 0
    think_s: float = 0.0  # turns after the first: the wait after the previous reply
    # True: ``prompt`` is only the new user message; what is sent is the session's
    # history (the earlier turns' prompts and the server's actual replies) followed by it
    history: bool = False
    turn_tokens: int | None = None  # tokens a history turn adds: its new message
    prefix_group: int | None = None  # the shared system prompt the request starts with
    prefix_tokens: int = 0  # that system prompt's length in the server's tokens
    # block identities of the prompt (Mooncake ``hash_ids``: equal id, equal content and
    # prefix), one per ``block_size`` tokens: the ideal cache hit rate's input
    blocks: tuple[int, ...] | None = None


def arrival_offsets(n: int, rate: float, arrival: str, burstiness: float, seed: int) -> np.ndarray:
    """Seconds from the start at which each of ``n`` requests should be sent."""
    rng = np.random.default_rng(seed + 104729)
    if arrival == "constant":
        gaps = np.full(n, 1.0 / rate)
    elif arrival == "poisson":
        gaps = rng.exponential(1.0 / rate, size=n)
    elif arrival == "gamma":
        gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), size=n)
    else:
        raise AccelbenchError(f"unknown arrival process {arrival!r}: poisson, constant, gamma")
    offsets = np.cumsum(gaps) - gaps[0]  # the first request goes at once
    return offsets
