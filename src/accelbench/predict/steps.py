"""The contract between the step-time model and the scheduler that runs it.

A serving engine with continuous batching runs in steps: each step does the prefill of
some prompt tokens (chunked prefill) and one decode token for every running sequence.
A ``StepModel`` says how long one such step takes on a given accelerator, model and
layout, and which bound limits it; the event-driven scheduler (``predict.scheduler``)
calls it step by step, so queueing and TTFT come out of the schedule. The same
scheduler drives ``accelbench predict`` (simulated time) and ``accelbench serve
emulated`` (real time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Bound = Literal["compute", "memory", "interconnect", "scheduling"]


@dataclass(frozen=True, slots=True)
class Step:
    """One engine step's work: ``prefill_tokens`` new prompt tokens (over all the
    sequences prefilling in it, attending to ``prefill_context`` tokens already in
    their KV cache) and one token for each of ``decode_seqs`` running sequences,
    whose KV caches hold ``decode_context`` tokens in all."""

    prefill_tokens: int = 0
    prefill_context: int = 0
    decode_seqs: int = 0
    decode_context: int = 0
    prefill_seqs: int = 0  # sequences sharing the prefill tokens (0: not said, one)


@dataclass(frozen=True, slots=True)
class StepTime:
    seconds: float
    bound: Bound  # what limits this step (``--explain``)


class StepModel(Protocol):
    """How long a step takes, and what can fit."""

    def step_time(self, step: Step) -> StepTime: ...

    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache the layout holds, over every sequence (after weights)."""
        ...

    def max_batch(self) -> int:
        """The most sequences one step may run (the engine's max_num_seqs)."""
        ...
