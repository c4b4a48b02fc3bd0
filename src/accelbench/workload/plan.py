"""The request plan: which prompt, how many output tokens, and (open loop) when.

Same seed, same plan: prompts, lengths and arrival offsets are all drawn from
generators seeded by ``WorkloadConfig.seed``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelbench.errors import AccelbenchError
from accelbench.workload.config import WorkloadConfig
from accelbench.workload.datasets import load_dataset
from accelbench.workload.lengths import sample_lengths
from accelbench.workload.requests import PlannedRequest, arrival_offsets
from accelbench.workload.synthetic import SyntheticPrompts
from accelbench.workload.tokenizer import Tokenizer
from accelbench.workload.traces import load_trace, trace_plan

__all__ = ["PlannedRequest", "arrival_offsets", "build_plan"]


def build_plan(
    wl: WorkloadConfig,
    n: int,
    tok: Tokenizer | None,
    *,
    special_tokens: int = 0,
    progress: Any = None,
) -> list[PlannedRequest]:
    """``n`` planned requests. ``special_tokens`` is what the server adds to each prompt
    (BOS, chat template), measured by calibration, so a synthetic prompt of ISL L gets
    L - special_tokens text tokens and the server counts exactly L."""
    rng = np.random.default_rng(wl.seed)
    if wl.trace:
        trace = load_trace(wl.trace, seed=wl.seed, limit=n)
        return trace_plan(trace, tok, special_tokens=special_tokens, seed=wl.seed,
                          default_osl=wl.osl, progress=progress)  # fmt: skip
    if wl.dataset:
        return _dataset_plan(wl, n, tok, rng)
    if tok is None:
        raise AccelbenchError(
            "synthetic prompts need a tokenizer: the server has no /tokenize; "
            "give --tokenizer PATH (tokenizer.json or a Hugging Face model directory)"
        )
    isls = sample_lengths(
        n, wl.isl, wl.isl_dist, rng, range_ratio=wl.range_ratio,
        convention=wl.range_convention, std=wl.isl_std,
    )  # fmt: skip
    osls = sample_lengths(
        n, wl.osl, wl.osl_dist, rng, range_ratio=wl.range_ratio,
        convention=wl.range_convention, std=wl.osl_std,
    )  # fmt: skip
    text_lens = np.maximum(isls - special_tokens, 1)
    gen = SyntheticPrompts(tok, wl.seed, int(text_lens.max()))
    plan = []
    for i in range(n):
        text, got = gen.make(int(text_lens[i]))
        plan.append(PlannedRequest(text, int(osls[i]), got + special_tokens))
        if progress:
            progress(i + 1, n)
    return plan


def _dataset_plan(
    wl: WorkloadConfig, n: int, tok: Tokenizer | None, rng: np.random.Generator
) -> list[PlannedRequest]:
    items = load_dataset(wl.dataset or "", wl.dataset_format)
    order = rng.permutation(len(items))
    plan = []
    for k in range(n):
        item = items[int(order[k % len(items)])]
        out = item.output_tokens
        if out is None and item.reference_output is not None and tok is not None:
            out = max(1, len(tok.encode(item.reference_output)))
        if out is None:
            out = wl.osl
        isl = None
        if tok is not None and isinstance(item.prompt, str):
            isl = len(tok.encode(item.prompt))
        plan.append(PlannedRequest(item.prompt, int(out), isl))
    return plan
