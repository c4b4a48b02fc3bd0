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
