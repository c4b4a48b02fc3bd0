"""Model architectures read from a Hugging Face ``config.json``.

Derives total and active parameters, KV-cache bytes per token (GQA, MLA, sliding
windows), and weight bytes at a given precision. All counts assume the gated (SwiGLU)
feed-forward every supported family uses: three matrices ``hidden x intermediate``.

Conventions (documented in docs/COST_AND_PLAN.md):

- ``total_params``: every weight of the main model (embedding, lm_head unless tied,
  attention, MLP / experts, routers, norms, biases). Multi-token-prediction layers
  (``num_nextn_predict_layers``) are counted separately in ``mtp_params``.
- ``active_params``: the weights one token's forward pass multiplies by: everything
  except the input embedding table (a lookup) and the routed experts it does not use.
  Decode FLOPs per token are ``2 * active_params``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from accelbench.errors import AccelbenchError
from accelbench.jsonfile import DuplicateKeyError, loads_unique

# Bytes per weight for each supported weight format, including block-scale overhead.
# bf16/fp16: 2 bytes. fp8/int8: 1 byte (per-tensor or 128x128 block scales are
# negligible). mxfp4 (OCP MX): 4-bit values + one 8-bit E8M0 scale per 32 values.
# nvfp4: 4-bit values + one FP8 scale per 16 values. int4 (AWQ/GPTQ style, group 128):
# 4-bit values + FP16 scale and zero point per 128 values.
WEIGHT_BYTES: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "mxfp4": 0.5 + 1 / 32,
    "fp4": 0.5 + 1 / 32,
    "nvfp4": 0.5 + 1 / 16,
    "int4": 0.5 + 4 / 128,
}

# The compute format each weight format runs its matmuls in, in order of preference
# (first one the accelerator supports wins). int4 is weight-only (W4A16).
COMPUTE_FORMATS: dict[str, tuple[str, ...]] = {
    "bf16": ("bf16",),
    "fp16": ("bf16",),
    "fp8": ("fp8", "bf16"),
    "int8": ("fp8", "bf16"),
    "mxfp4": ("fp4", "fp8", "bf16"),
    "fp4": ("fp4", "fp8", "bf16"),
    "nvfp4": ("fp4", "fp8", "bf16"),
    "int4": ("bf16",),
}

KV_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp32": 4.0}


def weight_bytes_per_param(precision: str) -> float:
    """Bytes per weight for ``precision`` (a key of WEIGHT_BYTES); error names choices."""
    key = precision.lower()
    if key not in WEIGHT_BYTES:
        raise AccelbenchError(
            f"unknown precision {precision!r}; choose one of {', '.join(WEIGHT_BYTES)}"
        )
    return WEIGHT_BYTES[key]


def kv_bytes_per_element(kv_precision: str) -> float:
    """Bytes per KV-cache element for ``kv_precision`` (bf16, fp16, fp8, int8)."""
    key = kv_precision.lower()
    if key not in KV_BYTES:
        raise AccelbenchError(
            f"unknown KV-cache precision {kv_precision!r}; choose one of {', '.join(KV_BYTES)}"
        )
    return KV_BYTES[key]


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameter counts by part (each an absolute count of weights)."""

    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    routed_experts: int
    shared_experts: int
    routers: int
    norms: int
    mtp: int

    @property
    def total(self) -> int:
        """All main-model weights (MTP layers excluded)."""
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.dense_mlp
            + self.routed_experts
            + self.shared_experts
            + self.routers
            + self.norms
        )


@dataclass(frozen=True)
class ModelArch:
    """The figures of a decoder-only transformer that memory and roofline need."""

    name: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    tie_embeddings: bool = False
    attention_bias: bool = False
    qk_norm: bool = False
    # MLA (DeepSeek-V2/V3): latent KV cache
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    # MoE
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    moe_layers: tuple[int, ...] = ()
    expert_bias: bool = False
    # sliding-window layers (indices) and their window in tokens
    sliding_layers: tuple[int, ...] = ()
    sliding_window: int | None = None
    mtp_layers: int = 0
    max_context: int | None = None
    # where the config came from: {"file": path}, or the catalog's config URL and checks
    source: dict[str, str] = field(default_factory=dict, compare=False)

    # ---- kinds -------------------------------------------------------------------
    @property
    def is_mla(self) -> bool:
        """True when attention is multi-head latent attention (latent KV cache)."""
        return self.kv_lora_rank is not None

    @property
    def is_moe(self) -> bool:
        """True when some layers route tokens to experts."""
        return self.num_experts > 0 and bool(self.moe_layers)

    @property
    def attention_kind(self) -> str:
        """'MLA', 'MHA' or 'GQA' (with the KV head count)."""
        if self.is_mla:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return f"GQA ({self.num_kv_heads} KV heads)"

    # ---- parameters --------------------------------------------------------------
    def _attention_params_per_layer(self) -> int:
        h = self.hidden_size
        if self.is_mla:
            nope = self.qk_nope_head_dim or 0
            rope = self.qk_rope_head_dim or 0
            v = self.v_head_dim or 0
            kv = self.kv_lora_rank or 0
            if self.q_lora_rank:
                q = (
                    h * self.q_lora_rank
                    + self.q_lora_rank
                    + self.q_lora_rank * self.num_heads * (nope + rope)
                )
            else:
                q = h * self.num_heads * (nope + rope)
            kv_a = h * (kv + rope) + kv  # down-projection + latent norm
            kv_b = kv * self.num_heads * (nope + v)
            o = self.num_heads * v * h
            return q + kv_a + kv_b + o
        q_dim = self.num_heads * self.head_dim
        kv_dim = self.num_kv_heads * self.head_dim
        n = h * q_dim + 2 * h * kv_dim + q_dim * h
        if self.attention_bias:
            n += q_dim + 2 * kv_dim
        if self.qk_norm:
            n += 2 * self.head_dim
        return n

    def _expert_params(self, intermediate: int) -> int:
        n = 3 * self.hidden_size * intermediate
        if self.expert_bias:
            n += 2 * intermediate + self.hidden_size
        return n

    def breakdown(self) -> ParamBreakdown:
        """Parameter counts by part."""
        h = self.hidden_size
        n_moe = len(self.moe_layers) if self.is_moe else 0
        n_dense = self.num_layers - n_moe
        embedding = self.vocab_size * h
        lm_head = 0 if self.tie_embeddings else self.vocab_size * h
        attention = self.num_layers * self._attention_params_per_layer()
        dense_mlp = n_dense * 3 * h * self.intermediate_size
        routed = n_moe * self.num_experts * self._expert_params(self.moe_intermediate_size)
        shared = n_moe * self.num_shared_experts * 3 * h * self.shared_expert_intermediate_size
        routers = n_moe * (h * self.num_experts + (self.num_experts if self.expert_bias else 0))
        norms = self.num_layers * 2 * h + h
        per_layer = self._attention_params_per_layer() + 2 * h
        if self.is_moe:
            per_layer += (
                self.num_experts * self._expert_params(self.moe_intermediate_size)
                + self.num_shared_experts * 3 * h * self.shared_expert_intermediate_size
                + h * self.num_experts
            )
        else:
            per_layer += 3 * h * self.intermediate_size
        # an MTP module: one more layer, two norms and a 2h -> h projection
        mtp = self.mtp_layers * (per_layer + 2 * h + 2 * h * h + h)
        return ParamBreakdown(
            embedding, lm_head, attention, dense_mlp, routed, shared, routers, norms, mtp
        )

    @property
    def total_params(self) -> int:
        """All weights of the main model (MTP layers excluded)."""
        return self.breakdown().total

    @property
    def mtp_params(self) -> int:
        """Weights of the multi-token-prediction layers (0 if none)."""
        return self.breakdown().mtp

    @property
    def active_params(self) -> int:
        """Weights one token multiplies by (no input embedding, only its k experts)."""
        b = self.breakdown()
        active_routed = 0
        if self.is_moe:
            active_routed = (
                len(self.moe_layers)
                * self.experts_per_token
                * self._expert_params(self.moe_intermediate_size)
            )
        lm = b.lm_head if not self.tie_embeddings else self.vocab_size * self.hidden_size
        return (
            lm + b.attention + b.dense_mlp + active_routed + b.shared_experts + b.routers + b.norms
        )

    # ---- weight bytes ------------------------------------------------------------
    def weight_bytes(self, precision: str = "bf16") -> float:
        """Bytes of all main-model weights: linear layers (attention, MLP, experts) at
        ``precision``; embedding, lm_head, routers and norms in BF16 (as FP8 and
        MXFP4 checkpoints of these models keep them)."""
        b = self.breakdown()
        per = weight_bytes_per_param(precision)
        quantised = b.attention + b.dense_mlp + b.routed_experts + b.shared_experts
        kept = b.embedding + b.lm_head + b.routers + b.norms
        return quantised * per + kept * 2.0

    def expert_bytes(self, precision: str = "bf16") -> float:
        """Bytes of one routed expert in one layer at ``precision``."""
        return self._expert_params(self.moe_intermediate_size) * weight_bytes_per_param(precision)

    def decode_weight_bytes(self, batch: int, precision: str = "bf16") -> float:
        """Weight bytes one decode step with ``batch`` tokens reads (whole model, all GPUs).

        Dense: all weights except the embedding table (only ``batch`` rows of it).
        MoE: the non-expert weights plus the experts the batch touches in each MoE
        layer, ``E * (1 - (1 - k/E)^B)`` under uniform routing."""
        if batch < 1:
            raise AccelbenchError(f"batch must be >= 1 (got {batch})")
        b = self.breakdown()
        per = weight_bytes_per_param(precision)
        emb_rows = min(batch, self.vocab_size) * self.hidden_size * 2.0
        non_expert = (b.attention + b.dense_mlp + b.shared_experts) * per + (
            b.lm_head + b.routers + b.norms
        ) * 2.0
        if self.tie_embeddings:
            non_expert += b.embedding * 2.0
            emb_rows = 0.0
        if not self.is_moe:
            return non_expert + emb_rows
        e, k = self.num_experts, self.experts_per_token
        touched = e * (1.0 - (1.0 - k / e) ** batch)
        return non_expert + emb_rows + len(self.moe_layers) * touched * self.expert_bytes(precision)

    # ---- KV cache ----------------------------------------------------------------
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token in one layer: MLA latent + RoPE key, or K and V."""
        if self.is_mla:
            return (self.kv_lora_rank or 0) + (self.qk_rope_head_dim or 0)
        return 2 * self.num_kv_heads * self.head_dim

    def same_architecture(self, other: ModelArch) -> bool:
        """Every architecture field equal, the name and source aside (a config.json of a
        catalog model, under its own name)."""
        return replace(self, name=other.name, source=other.source) == other

    def context_warning(self, tokens: float) -> str | None:
        """What to say where a sequence of ``tokens`` is longer than the model serves
        (its max_position_embeddings); None where it is not, or the config does not say."""
        if self.max_context is None or tokens <= self.max_context:
            return None
        return (
            f"context {tokens:,.0f} tokens exceeds {self.name}'s maximum of "
            f"{self.max_context:,} (max_position_embeddings): the model cannot serve it"
        )

    def kv_bytes_per_token(self, kv_precision: str = "bf16") -> float:
        """KV-cache bytes per token over all layers, as if every layer kept every token
        (GQA: ``2 * L * n_kv * d_head * bytes``; MLA: ``L * (kv_lora_rank + rope) * bytes``)."""
        return (
            self.num_layers
            * self.kv_elements_per_token_per_layer()
            * kv_bytes_per_element(kv_precision)
        )

    def kv_bytes_for_context(self, context: float, kv_precision: str = "bf16") -> float:
        """KV-cache bytes one sequence of ``context`` tokens holds (sliding-window layers
        keep at most their window)."""
        if context < 0:
            raise AccelbenchError(f"context must be >= 0 tokens (got {context})")
        per_layer = self.kv_elements_per_token_per_layer() * kv_bytes_per_element(kv_precision)
        n_sliding = len(self.sliding_layers) if self.sliding_window else 0
        n_full = self.num_layers - n_sliding
        sliding_ctx = min(context, self.sliding_window or 0)
        return per_layer * (n_full * context + n_sliding * sliding_ctx)

    # ---- FLOPs -------------------------------------------------------------------
    def attention_flops_per_token(self, context: float) -> float:
        """Attention-score FLOPs (QK^T and AV) for one new token over ``context`` tokens.

        GQA/MHA: ``4 * L * n_heads * d_head * s``. MLA (weights absorbed, as served):
        ``2 * L * n_heads * (2 * kv_lora_rank + rope) * s``. Sliding layers see at most
        their window."""
        if self.is_mla:
            per = 2 * self.num_heads * (2 * (self.kv_lora_rank or 0) + (self.qk_rope_head_dim or 0))
        else:
            per = 4 * self.num_heads * self.head_dim
        n_sliding = len(self.sliding_layers) if self.sliding_window else 0
        n_full = self.num_layers - n_sliding
        return per * (n_full * context + n_sliding * min(context, self.sliding_window or 0))

    def prefill_flops(self, tokens: int) -> float:
        """FLOPs to prefill ``tokens`` prompt tokens (causal): ``2 * P_active * S`` plus
        attention ``sum over positions`` of the per-token attention FLOPs (~S^2/2 each
        side, computed exactly for sliding windows)."""
        if tokens < 0:
            raise AccelbenchError(f"tokens must be >= 0 (got {tokens})")
        s = float(tokens)
        if self.is_mla:
            per = (
                2
                * self.num_heads
                * (
                    (self.qk_nope_head_dim or 0)
                    + (self.qk_rope_head_dim or 0)
                    + (self.v_head_dim or 0)
                )
            )
        else:
            per = 4 * self.num_heads * self.head_dim
        n_sliding = len(self.sliding_layers) if self.sliding_window else 0
        n_full = self.num_layers - n_sliding
        full = s * s / 2.0
        w = float(self.sliding_window or 0)
        sliding = full if s <= w else w * w / 2.0 + (s - w) * w
        attn = per * (n_full * full + n_sliding * sliding)
        return 2.0 * self.active_params * s + attn

    # ---- validation --------------------------------------------------------------
    def check_tensor_parallel(self, tp: int) -> None:
        """Raise AccelbenchError unless ``tp`` divides the attention heads."""
        if tp < 1:
            raise AccelbenchError(f"tensor parallel size must be >= 1 (got {tp})")
        if self.num_heads % tp:
            raise AccelbenchError(
                f"tensor parallel size {tp} does not divide num_attention_heads="
                f"{self.num_heads} of {self.name}"
            )
        if not self.is_mla and self.num_kv_heads % tp and tp % self.num_kv_heads:
            raise AccelbenchError(
                f"tensor parallel size {tp} and num_key_value_heads={self.num_kv_heads} of "
                f"{self.name}: neither divides the other"
            )

    def dp_attention_unused(self, tp: int) -> str | None:
        """Why attention data parallelism changes nothing for the KV cache of ``tp`` GPUs
        (each already holds one copy of every sequence's KV), or None where it does."""
        if self.kv_replication(tp) > 1:
            return None
        what = "one GPU" if tp == 1 else f"{self.num_kv_heads} KV heads over TP{tp}"
        return (
            f"--dp-attention changes nothing here: {self.name} with {what} keeps one copy "
            "of each sequence's KV cache already"
        )

    def kv_replication(self, tp: int, dp_attention: bool = False) -> int:
        """How many copies of each sequence's KV cache ``tp`` GPUs hold.

        GQA with more GPUs than KV heads replicates heads (``tp / n_kv``). MLA's latent
        cache is shared by all heads, so plain tensor parallelism keeps it on every GPU
        (``tp`` copies) unless attention runs data-parallel."""
        if dp_attention:
            return 1
        if self.is_mla:
            return tp
        return max(1, tp // self.num_kv_heads) if tp > self.num_kv_heads else 1


# ---------------------------------------------------------------------------------
# config.json parsing

DP_ATTENTION_ONE_GPU = (
    "--dp-attention needs more than one GPU ({flag}): with one, attention is not split"
)
_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
MAX_CONFIG_BYTES = 16 << 20  # a config.json is a few KiB; refuse anything over 16 MiB
MAX_DIM = 1 << 24  # accepted size of any one dimension or count in a config


# a config.json as parsed: a JSON object whose fields are checked as they are read
Config = Mapping[str, object]


def _get(cfg: Config, key: str, where: str, default: object = ...) -> object:
    if key in cfg and cfg[key] is not None:
        value = cfg[key]
    elif default is not ...:
        return default
    else:
        raise AccelbenchError(f"{where}: missing field {key!r} in config.json")
    return value


def _positive_int(cfg: Config, key: str, where: str, default: object = ...) -> int:
    value = _get(cfg, key, where, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise AccelbenchError(f"{where}: field {key!r} must be an integer (got {value!r})")
    if not 0 < value <= MAX_DIM:
        raise AccelbenchError(f"{where}: field {key!r} must be in [1, {MAX_DIM:,}] (got {value!r})")
    return int(value)


def _flag(cfg: Config, key: str, where: str, default: bool) -> bool:
    """A true/false field (absent or null: ``default``); "false" or 0 is refused, not read
    by its truthiness (a string "false" was true)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise AccelbenchError(f"{where}: field {key!r} must be true or false (got {value!r:.40})")
    return value


_EXPERT_COUNTS = ("n_routed_experts", "num_local_experts", "num_experts")  # by family


def _count(cfg: Config, *keys: str, where: str) -> int:
    """The first of ``keys`` that is set, as an integer in [0, MAX_DIM] (0 if none is)."""
    for key in keys:
        value = cfg.get(key)
        if value is None or value is False or value == 0:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise AccelbenchError(f"{where}: field {key!r} must be an integer (got {value!r})")
        if not 0 <= value <= MAX_DIM:
            raise AccelbenchError(
                f"{where}: field {key!r} must be in [0, {MAX_DIM:,}] (got {value!r})"
            )
        return int(value)
    return 0


def arch_from_config(
    cfg: Config,
    name: str | None = None,
    source: Mapping[str, str] | None = None,
    where: str | None = None,
) -> ModelArch:
    """Build a ModelArch from a Hugging Face config.json dict.

    Understands Llama, Mistral/Mixtral, Qwen2/2.5, Qwen3 (dense and MoE), DeepSeek-V2/V3
    (MLA + MoE), gpt-oss and GLM-4.5 (Glm4Moe) field names. Multimodal configs with a
    ``text_config`` use that. Missing required fields raise AccelbenchError naming them,
    after ``where`` (the file; default: the model's name)."""
    if not isinstance(cfg, Mapping):
        raise AccelbenchError("config.json must hold a JSON object")
    if "text_config" in cfg and "hidden_size" not in cfg:
        text = cfg["text_config"]
        if not isinstance(text, Mapping):
            raise AccelbenchError(
                f"{name or 'config.json'}: malformed config.json ('text_config' must be an object)"
            )
        cfg = {**text, **{k: v for k, v in cfg.items() if k == "_name_or_path"}}
    where = where or name or str(cfg.get("_name_or_path") or cfg.get("model_type") or "config.json")
    for key in _REQUIRED:
        _get(cfg, key, where)
    model_type = str(cfg.get("model_type", "unknown"))
    h = _positive_int(cfg, "hidden_size", where)
    n_layers = _positive_int(cfg, "num_hidden_layers", where)
    n_heads = _positive_int(cfg, "num_attention_heads", where)
    n_kv = _positive_int(cfg, "num_key_value_heads", where, n_heads)
    if n_heads % n_kv:
        raise AccelbenchError(
            f"{where}: num_key_value_heads={n_kv} does not divide num_attention_heads={n_heads}"
        )
    head_dim = None  # absent or null: hidden_size / heads; 0 is refused, not "absent"
    if cfg.get("head_dim") is not None:
        head_dim = _positive_int(cfg, "head_dim", where)
    if head_dim is None:
        if h % n_heads:
            raise AccelbenchError(
                f"{where}: no 'head_dim' and hidden_size={h} is not a multiple of "
                f"num_attention_heads={n_heads}"
            )
        head_dim = h // n_heads
    vocab = _positive_int(cfg, "vocab_size", where)

    # MoE fields under their various names
    n_experts = _count(cfg, *_EXPERT_COUNTS, where=where)
    top_k = _count(cfg, "num_experts_per_tok", "experts_per_token", where=where)
    if n_experts and not top_k:
        raise AccelbenchError(f"{where}: MoE config without 'num_experts_per_tok'")
    zero = [k for k in _EXPERT_COUNTS if k in cfg and cfg[k] is not None and cfg[k] == 0]
    if top_k and not n_experts and zero:
        # dense configs say 0 and 0 (Granite); k of no experts was read as a dense model
        raise AccelbenchError(
            f"{where}: num_experts_per_tok={top_k} routes to experts, and {zero[0]}=0 "
            "gives none: a dense model has 0 of both"
        )
    if n_experts and top_k > n_experts:
        raise AccelbenchError(
            f"{where}: num_experts_per_tok={top_k} exceeds the number of experts {n_experts}"
        )
    moe_inter = _count(cfg, "moe_intermediate_size", where=where)
    if n_experts and cfg.get("moe_intermediate_size") is not None and not moe_inter:
        # 0 experts' width is no model (it was read as absent: intermediate_size's)
        raise AccelbenchError(f"{where}: field 'moe_intermediate_size' must be at least 1 (got 0)")
    if n_experts and not moe_inter:
        # Mixtral and gpt-oss: experts have intermediate_size
        moe_inter = _positive_int(cfg, "intermediate_size", where)
    if n_experts:  # all-MoE models may omit the dense FFN width
        intermediate = _count(cfg, "intermediate_size", where=where)
    else:
        intermediate = _positive_int(cfg, "intermediate_size", where)

    n_shared = _count(cfg, "n_shared_experts", where=where)
    shared_inter = moe_inter
    if cfg.get("shared_expert_intermediate_size"):  # Qwen2-MoE style: one shared expert
        n_shared = 1
        shared_inter = _count(cfg, "shared_expert_intermediate_size", where=where)

    moe_layers: tuple[int, ...] = ()
    if n_experts:
        first_dense = _count(cfg, "first_k_dense_replace", where=where)
        step = _count(cfg, "moe_layer_freq", "decoder_sparse_step", where=where) or 1
        mlp_only_raw = cfg.get("mlp_only_layers") or []
        if not isinstance(mlp_only_raw, list):
            raise AccelbenchError(f"{where}: field 'mlp_only_layers' must be a list")
        bad = [x for x in mlp_only_raw
               if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < n_layers]  # fmt: skip
        if bad:  # a layer that is not one was ignored in silence
            raise AccelbenchError(
                f"{where}: field 'mlp_only_layers' must list layer numbers 0 to {n_layers - 1} "
                f"(got {str(bad[0])[:40]!r})"
            )
        mlp_only = set(mlp_only_raw)
        moe_layers = tuple(
            i
            for i in range(n_layers)
            if i >= first_dense and (i + 1) % step == 0 and i not in mlp_only
        )
        if not moe_layers:  # experts on no layer: a dense model described as MoE
            raise AccelbenchError(
                f"{where}: a MoE config whose {n_layers} layers hold no experts "
                f"(first_k_dense_replace {first_dense}, every {step} layer(s), "
                f"{len(mlp_only)} mlp_only_layers)"
            )
        if moe_layers and len(moe_layers) < n_layers and intermediate <= 0:
            raise AccelbenchError(
                f"{where}: dense layers present but 'intermediate_size' is missing"
            )

    mla = cfg.get("kv_lora_rank") is not None
    kv_lora_rank = q_lora_rank = qk_nope_head_dim = qk_rope_head_dim = v_head_dim = None
    if mla:
        kv_lora_rank = _positive_int(cfg, "kv_lora_rank", where)
        qk_nope_head_dim = _positive_int(cfg, "qk_nope_head_dim", where)
        qk_rope_head_dim = _positive_int(cfg, "qk_rope_head_dim", where)
        v_head_dim = _positive_int(cfg, "v_head_dim", where)
        q_lora_rank = _count(cfg, "q_lora_rank", where=where) or None

    sliding_layers: tuple[int, ...] = ()
    window = _count(cfg, "sliding_window", where=where) or None
    layer_types = cfg.get("layer_types")
    if layer_types is not None and not isinstance(layer_types, list):
        raise AccelbenchError(f"{where}: field 'layer_types' must be a list")
    if layer_types and window:
        if len(layer_types) != n_layers:
            raise AccelbenchError(
                f"{where}: 'layer_types' has {len(layer_types)} entries for {n_layers} layers"
            )
        sliding_layers = tuple(i for i, t in enumerate(layer_types) if "sliding" in str(t))
    elif window and _flag(cfg, "use_sliding_window", where, False):
        max_window_layers = _count(cfg, "max_window_layers", where=where) or n_layers
        sliding_layers = tuple(i for i in range(n_layers) if i >= max_window_layers)

    return ModelArch(
        name=name or where,
        model_type=model_type,
        hidden_size=h,
        num_layers=n_layers,
        num_heads=n_heads,
        num_kv_heads=n_heads if mla else n_kv,
        head_dim=head_dim,
        vocab_size=vocab,
        intermediate_size=intermediate,
        tie_embeddings=_flag(cfg, "tie_word_embeddings", where, False),
        attention_bias=_flag(cfg, "attention_bias", where, model_type == "qwen2"),
        qk_norm=_flag(cfg, "use_qk_norm", where, model_type in ("qwen3", "qwen3_moe")),
        num_experts=n_experts,
        experts_per_token=top_k,
        moe_intermediate_size=moe_inter,
        num_shared_experts=n_shared,
        shared_expert_intermediate_size=shared_inter,
        moe_layers=moe_layers,
        expert_bias=model_type == "gpt_oss",
        sliding_layers=sliding_layers,
        sliding_window=int(window) if sliding_layers and window else None,
        mtp_layers=_count(cfg, "num_nextn_predict_layers", where=where),
        max_context=_count(cfg, "max_position_embeddings", where=where) or None,
        source=dict(source or {}),
        kv_lora_rank=kv_lora_rank,
        q_lora_rank=q_lora_rank,
        qk_nope_head_dim=qk_nope_head_dim,
        qk_rope_head_dim=qk_rope_head_dim,
        v_head_dim=v_head_dim,
    )


def load_config_file(path: str | Path) -> ModelArch:
    """Read a config.json (a file, or a directory holding one) into a ModelArch."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise AccelbenchError(f"no config.json at {p}")
    if p.stat().st_size > MAX_CONFIG_BYTES:
        raise AccelbenchError(f"{p}: not a config.json (larger than {MAX_CONFIG_BYTES:,} bytes)")
    try:
        cfg = loads_unique(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise AccelbenchError(f"{p}: not a config.json (not UTF-8 text)") from None
    except DuplicateKeyError as exc:
        raise AccelbenchError(f"{p}: {exc}") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise AccelbenchError(f"cannot read {p} as JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise AccelbenchError(f"{p}: config.json must hold a JSON object")
    name = cfg.get("_name_or_path") or p.parent.name or p.stem
    try:
        return arch_from_config(cfg, name=str(name), source={"file": str(p)}, where=str(p))
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
        # a field of the wrong type that the checks above did not name
        raise AccelbenchError(f"{p}: malformed config.json ({exc})") from None


def human_params(n: float) -> str:
    """1234567890 -> '1.23B'."""
    if n >= 1e12:
        return f"{n / 1e12:.3g}T"
    if n >= 1e9:
        return f"{n / 1e9:.4g}B"
    if n >= 1e6:
        return f"{n / 1e6:.4g}M"
    return f"{n:,.0f}"


def human_bytes(n: float) -> str:
    """Bytes in binary units (KiB, MiB, GiB, TiB)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    if n <= 0 or not math.isfinite(n):
        return f"{n:g} B"
    # below 1 B the log is negative: units[-99] was an IndexError (exit 70)
    i = max(0, min(int(math.log(n, 1024)), len(units) - 1))
    return f"{n / 1024**i:.4g} {units[i]}"
