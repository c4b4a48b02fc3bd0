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
