"""Input / output length distributions.

Uniform has two conventions, both named because peers disagree:
  * ``vllm``: integers in ``[L(1-r), L(1+r)]`` (vLLM's random dataset ``--random-range-ratio``)
  * ``inferencex``: integers in ``[rL, L]`` (InferenceX / SGLang ``--random-range-ratio``)
Normal and lognormal take a mean and a standard deviation in tokens (default 10% of
the mean); lognormal's parameters are derived so the sample mean and std match.

And the one check of a length in tokens read from a user's file (a trace's, a data
set's): :func:`token_length`, bounded by :data:`MAX_TRACE_TOKENS` (docs/LIMITS.md).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from accelbench.errors import AccelbenchError, UsageError

MAX_TRACE_TOKENS = 1 << 20  # as workload.config.MAX_TOKENS


def uniform_bounds(mean: int, ratio: float, convention: str) -> tuple[int, int]:
    if convention == "vllm":
        lo, hi = math.floor(mean * (1 - ratio)), math.ceil(mean * (1 + ratio))
    elif convention == "inferencex":
        lo, hi = math.floor(mean * ratio), mean
    else:
        raise AccelbenchError(f"unknown range convention {convention!r}: vllm or inferencex")
    return max(1, lo), max(1, hi)


def sample_lengths(
    n: int,
    mean: int,
    dist: str,
    rng: np.random.Generator,
    *,
    range_ratio: float = 0.0,
    convention: str = "vllm",
    std: float | None = None,
    notes: list[str] | None = None,
    name: str = "length",
) -> np.ndarray:
    """``n`` integer lengths, each in [1, :data:`MAX_TRACE_TOKENS`] (the options' limit):
    a normal or lognormal tail beyond it is clamped, and ``notes`` gets how many of
    ``name`` were, with the mean that resulted (clamping moves it)."""
    if mean < 1:
        raise AccelbenchError(f"a length must be at least 1 (got {mean})")
    if dist == "fixed":
        out = np.full(n, mean, dtype=np.int64)
    elif dist == "uniform":
        lo, hi = uniform_bounds(mean, range_ratio, convention)
        out = rng.integers(lo, hi + 1, size=n, dtype=np.int64)
    elif dist == "normal":
        s = 0.1 * mean if std is None else std
        out = np.rint(rng.normal(mean, s, size=n)).astype(np.int64)
    elif dist == "lognormal":
        s = 0.1 * mean if std is None else std
        sigma2 = math.log(1 + (s * s) / (mean * mean))
        mu = math.log(mean) - sigma2 / 2
        out = np.rint(rng.lognormal(mu, math.sqrt(sigma2), size=n)).astype(np.int64)
    else:
        raise AccelbenchError(
            f"unknown length distribution {dist!r}: fixed, uniform, normal or lognormal"
        )
    clamped = int(np.count_nonzero((out < 1) | (out > MAX_TRACE_TOKENS)))
    out = np.clip(out, 1, MAX_TRACE_TOKENS)
    if clamped and notes is not None:
        notes.append(
            f"{name}: {clamped:,} of {n:,} lengths drawn from {dist} (mean {mean:,}) fell "
            f"outside [1, {MAX_TRACE_TOKENS:,}] and were clamped to it: mean {out.mean():,.1f}"
        )
    return out


def token_length(v: Any, where: str, name: str, lo: int = 1) -> int:
    """A length in tokens read from a file (a trace's, a dataset's): a whole number in
    [lo, :data:`MAX_TRACE_TOKENS`], else one line naming ``where`` and ``name``."""
    if (
        isinstance(v, bool)
        or not isinstance(v, int | float)
        or (isinstance(v, float) and not np.isfinite(v))
        or v != int(v)
    ):
        raise UsageError(f"{where}: {name} must be a whole number (got {short(v)})")
    n = int(v)
    if not lo <= n <= MAX_TRACE_TOKENS:
        raise UsageError(f"{where}: {name} must be in [{lo}, {MAX_TRACE_TOKENS}] (got {short(v)})")
    return n


def short(v: Any) -> str:
    """A value from the file, quoted for a one-line message (at most 60 characters)."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."
