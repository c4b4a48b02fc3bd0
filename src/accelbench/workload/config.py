"""What prompts and output lengths a run uses. Plain dataclasses, JSON-serialisable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from accelbench import validate as v

LengthDist = Literal["fixed", "uniform", "normal", "lognormal"]
# vLLM: [L(1-r), L(1+r)];  InferenceX / SGLang: [rL, L]
RangeConvention = Literal["vllm", "inferencex"]

# Limits (docs/LIMITS.md): wide enough for any real model and run, narrow enough that a
# typo cannot allocate gigabytes. 2**20 tokens is above every served context today.
MAX_TOKENS = 1 << 20


@dataclass
class WorkloadConfig:
    """Prompts and output lengths: synthetic (exact lengths in the server's tokens) or a dataset."""

    isl: int = 128
    osl: int = 128
    isl_dist: LengthDist = "fixed"
    osl_dist: LengthDist = "fixed"
    range_ratio: float = 0.0
    range_convention: RangeConvention = "vllm"
    isl_std: float | None = None  # for normal / lognormal (tokens); default 10% of the mean
    osl_std: float | None = None
    dataset: str | None = None  # path to ShareGPT JSON/JSONL, prompts JSONL or chat JSONL
    dataset_format: str = "auto"  # auto | sharegpt | prompts | chat
    tokenizer: str | None = None  # tokenizer.json or HF directory; default: the server's /tokenize
    trace: str | None = None  # replay a request trace (workload/traces.py): arrivals and lengths
    seed: int = 0
    # sessions and shared prefixes (workload/sessions.py, docs/WORKLOADS.md)
    sessions: int | None = None  # multi-turn sessions instead of independent requests
    turns: str = "4"  # turns per session: N or LO:HI (uniform)
    think_time_s: str = "0"  # seconds between a reply and the next turn: S or LO:HI
    shared_prefixes: int = 0  # K shared system prompts...
    prefix_tokens: int = 0  # ...of P tokens each
    block_size: int | None = None  # tokens per cache block (trace hash_ids; the ideal)
    kv_capacity_tokens: int | None = None  # the server's prefix cache, when it does not say

    @property
    def trace_block_size(self) -> int:
        """Tokens per hash id of a trace: ``--block-size``, else Mooncake's 512."""
        from accelbench.workload.traces import DEFAULT_BLOCK_SIZE

        return self.block_size or DEFAULT_BLOCK_SIZE

    def validate(self) -> None:
        """Refuse values no real run needs (docs/LIMITS.md); one line naming the option."""
        self.isl = v.integer("--isl", self.isl, 1, MAX_TOKENS, unit="tokens")
        self.osl = v.integer("--osl", self.osl, 1, MAX_TOKENS, unit="tokens")
        dists = ("fixed", "uniform", "normal", "lognormal")
        v.choice("--isl-dist", self.isl_dist, dists)
        v.choice("--osl-dist", self.osl_dist, dists)
        v.choice("--range-convention", self.range_convention, ("vllm", "inferencex"))
        self.range_ratio = v.number("--range-ratio", self.range_ratio, 0, 1)
        if (
            self.range_convention == "vllm"
            and self.range_ratio >= 1
            and (self.isl_dist == "uniform" or self.osl_dist == "uniform")
        ):
            raise v.UsageError("--range-ratio must be below 1 with the vllm convention")
        from accelbench.workload.lengths import uniform_bounds

        for opt, mean, dist in (
            ("--isl", self.isl, self.isl_dist),
            ("--osl", self.osl, self.osl_dist),
        ):
            hi = uniform_bounds(mean, self.range_ratio, self.range_convention)[1]
            if dist == "uniform" and hi > MAX_TOKENS:
                raise v.UsageError(
                    f"{opt} {mean:,} with --range-ratio {self.range_ratio:g} draws up to {hi:,} "
                    f"tokens, above the limit {MAX_TOKENS:,}"
                )
        self.isl_std = v.optional_number("--isl-std", self.isl_std, 0, MAX_TOKENS)
        self.osl_std = v.optional_number("--osl-std", self.osl_std, 0, MAX_TOKENS)
        v.choice("--dataset-format", self.dataset_format, ("auto", "sharegpt", "prompts", "chat"))
        if self.dataset is not None:
            v.input_file("--dataset", self.dataset)
        if self.tokenizer is not None and not Path(self.tokenizer).is_dir():
            v.input_file("--tokenizer", self.tokenizer)
        self.seed = v.seed("--seed", self.seed)
        if self.trace is not None and not Path(self.trace).is_dir():
            v.input_file("--trace", self.trace)
        from accelbench.workload.sessions import MAX_SESSIONS, MAX_THINK_S, MAX_TURNS, parse_span

        self.sessions = v.optional_integer("--sessions", self.sessions, 1, MAX_SESSIONS)
        parse_span("--turns", self.turns, 1, MAX_TURNS, integer=True)
        parse_span("--think-time", self.think_time_s, 0, MAX_THINK_S, integer=False)
        self.shared_prefixes = v.integer("--shared-prefixes", self.shared_prefixes, 0, 1 << 20)
        self.prefix_tokens = v.integer("--prefix-tokens", self.prefix_tokens, 0, MAX_TOKENS)
        if self.shared_prefixes and not self.prefix_tokens:
            raise v.UsageError("--shared-prefixes needs --prefix-tokens P (tokens per prompt)")
        if self.prefix_tokens and not self.shared_prefixes:
            raise v.UsageError("--prefix-tokens needs --shared-prefixes K (how many prompts)")
        self.block_size = v.optional_integer("--block-size", self.block_size, 1, MAX_TOKENS)
        self.kv_capacity_tokens = v.optional_integer(
            "--kv-capacity-tokens", self.kv_capacity_tokens, 1, 1 << 40
        )
        if self.sessions is not None and (self.trace or self.dataset and self.dataset_format
                                          not in ("auto", "sharegpt")):  # fmt: skip
            raise v.UsageError("--sessions makes synthetic or ShareGPT sessions: not with --trace")
        if self.shared_prefixes and self.trace:
            raise v.UsageError("--shared-prefixes is not for --trace (a trace's hash_ids say)")
