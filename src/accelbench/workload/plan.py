"""The request plan: which prompt, how many output tokens, and (open loop) when.

Same seed, same plan: prompts, lengths and arrival offsets are all drawn from
generators seeded by ``WorkloadConfig.seed``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelbench.errors import AccelbenchError
from accelbench.workload.config import WorkloadConfig
from accelbench.workload.datasets import counted_reply_length, load_conversations, load_dataset
from accelbench.workload.lengths import sample_lengths
from accelbench.workload.requests import PlannedRequest, arrival_offsets
from accelbench.workload.sessions import (
    MAX_THINK_S,
    MAX_TURNS,
    parse_span,
    session_plan,
    shared_prefix_plan,
)
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
    chat: bool = False,
    notes: list[str] | None = None,
) -> list[PlannedRequest]:
    """``n`` planned requests (with ``--sessions``: the turns of ``n`` sessions).
    ``special_tokens`` is what the server adds to each prompt (BOS, chat template),
    measured by calibration, so a synthetic prompt of ISL L gets L - special_tokens
    text tokens and the server counts exactly L. ``notes`` gets what the dataset or
    trace loader had to say (records left out, a cut last line), one line each, for the
    run to print and record."""
    notes = [] if notes is None else notes
    if wl.sessions is not None:
        return _session_plan(wl, n, tok, special_tokens, progress, chat, notes)
    plan = _independent_plan(
        wl, n, tok, special_tokens=special_tokens, progress=progress, notes=notes
    )
    if wl.shared_prefixes:
        if tok is None:
            raise AccelbenchError("--shared-prefixes needs a tokenizer (the server's /tokenize)")
        shared_prefix_plan(plan, tok=tok, chat=chat, shared_prefixes=wl.shared_prefixes,
                           prefix_tokens=wl.prefix_tokens, seed=wl.seed)  # fmt: skip
    return plan


def _session_plan(
    wl: WorkloadConfig,
    n: int,
    tok: Tokenizer | None,
    special: int,
    progress: Any,
    chat: bool,
    notes: list[str],
) -> list[PlannedRequest]:
    if wl.dataset:
        return _conversation_plan(wl, n, tok, chat, notes)
    if tok is None:
        raise AccelbenchError(
            "sessions need a tokenizer: the server has no /tokenize; give --tokenizer PATH"
        )
    rng = np.random.default_rng(wl.seed)

    def lengths(mean: int, dist: str, std: float | None, name: str) -> Any:
        # the turns' lengths (drawn once for all turns): a clamped tail is said, as for runs
        return lambda k: sample_lengths(k, mean, dist, rng, range_ratio=wl.range_ratio,
                                        convention=wl.range_convention, std=std, notes=notes,
                                        name=name)  # fmt: skip

    return session_plan(
        n_sessions=n,
        turns=parse_span("--turns", wl.turns, 1, MAX_TURNS, integer=True),
        think_s=parse_span("--think-time", wl.think_time_s, 0, MAX_THINK_S, integer=False),
        isl=lengths(wl.isl, wl.isl_dist, wl.isl_std, "--isl-dist"),
        osl=lengths(wl.osl, wl.osl_dist, wl.osl_std, "--osl-dist"),
        tok=tok, chat=chat, shared_prefixes=wl.shared_prefixes, prefix_tokens=wl.prefix_tokens,
        special_tokens=special, seed=wl.seed, progress=progress,
    )  # fmt: skip


def _conversation_plan(
    wl: WorkloadConfig, n: int, tok: Tokenizer | None, chat: bool, notes: list[str]
) -> list[PlannedRequest]:
    """ShareGPT conversations as sessions, keeping their turns: each turn sends the
    history and the recorded user message, and asks for as many tokens as the recorded
    reply had (``--osl`` where the file does not say and no tokenizer can count it)."""
    convs = load_conversations(wl.dataset or "", tok)
    if convs.note:
        notes.append(convs.note)
    if n > len(convs):
        raise AccelbenchError(
            f"--sessions {n:,} (with the warm-up) is more than the {len(convs):,} "
            f"conversations in {wl.dataset}"
        )
    order = np.random.default_rng(wl.seed).permutation(len(convs))[:n]
    plan: list[PlannedRequest] = []
    for s, k in enumerate(order):
        conv = convs[int(k)]
        for t, (user, reply_len) in enumerate(conv.turns):
            prompt: str | list[dict[str, Any]] = user
            if t == 0 and conv.system is not None:
                prompt = ([{"role": "system", "content": conv.system},
                           {"role": "user", "content": user}] if chat
                          else conv.system + "\n\n" + user)  # fmt: skip
            plan.append(PlannedRequest(
                prompt, reply_len or wl.osl, None, session=s, turn=t, history=t > 0,
                turn_tokens=len(tok.encode(user)) if tok is not None and t else None,
            ))  # fmt: skip
    return plan


def _independent_plan(
    wl: WorkloadConfig,
    n: int,
    tok: Tokenizer | None,
    *,
    special_tokens: int = 0,
    progress: Any = None,
    notes: list[str],
) -> list[PlannedRequest]:
    rng = np.random.default_rng(wl.seed)
    if wl.trace:
        trace = load_trace(wl.trace, seed=wl.seed, limit=n, block_size=wl.trace_block_size)
        notes.extend(trace.notes)
        return trace_plan(trace, tok, special_tokens=special_tokens, seed=wl.seed,
                          default_osl=wl.osl, progress=progress)  # fmt: skip
    if wl.dataset:
        return _dataset_plan(wl, n, tok, rng, notes)
    if tok is None:
        raise AccelbenchError(
            "synthetic prompts need a tokenizer: the server has no /tokenize; "
            "give --tokenizer PATH (tokenizer.json or a Hugging Face model directory)"
        )
    isls = sample_lengths(
        n, wl.isl, wl.isl_dist, rng, range_ratio=wl.range_ratio,
        convention=wl.range_convention, std=wl.isl_std, notes=notes, name="--isl-dist",
    )  # fmt: skip
    osls = sample_lengths(
        n, wl.osl, wl.osl_dist, rng, range_ratio=wl.range_ratio,
        convention=wl.range_convention, std=wl.osl_std, notes=notes, name="--osl-dist",
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
    wl: WorkloadConfig,
    n: int,
    tok: Tokenizer | None,
    rng: np.random.Generator,
    notes: list[str],
) -> list[PlannedRequest]:
    items = load_dataset(wl.dataset or "", wl.dataset_format)
    if items.note:
        notes.append(items.note)
    order = rng.permutation(len(items))
    plan = []
    for k in range(n):
        item = items[int(order[k % len(items)])]
        out = item.output_tokens
        try:  # the server's /tokenize may fail on a record (a 100 MB prompt: reset)
            if out is None and item.reference_output is not None and tok is not None:
                out = counted_reply_length(item.reference_output, tok, item.where)
            isl = None
            if tok is not None and isinstance(item.prompt, str):
                isl = len(tok.encode(item.prompt))
        except AccelbenchError as exc:
            if str(exc).startswith(item.where):
                raise
            raise AccelbenchError(f"{item.where}: counting its tokens failed: {exc}") from None
        if out is None:
            out = wl.osl
        plan.append(PlannedRequest(item.prompt, int(out), isl))
    return plan
