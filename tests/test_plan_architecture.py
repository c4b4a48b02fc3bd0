"""Model architectures: KV bytes, parameter counts, weight bytes, config.json parsing.

Every expected number here is worked out by hand in the comments."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.plan.architecture import arch_from_config, human_bytes, load_config_file
from accelbench.plan.models import find_model, model_catalog, resolve_model

KIB = 1024


def test_kv_bytes_llama_3_1_70b_is_320_kib_bf16():
    # 2 (K and V) * 80 layers * 8 KV heads * 128 head dim * 2 bytes = 327,680 B = 320 KiB
    a = find_model("llama-3.1-70b").arch
    assert a.kv_bytes_per_token("bf16") == 2 * 80 * 8 * 128 * 2 == 320 * KIB
    assert a.kv_bytes_per_token("fp8") == 160 * KIB


def test_kv_bytes_llama_3_1_405b_is_504_kib_bf16():
    # 2 * 126 * 8 * 128 * 2 = 516,096 B = 504 KiB
    assert find_model("llama-3.1-405b").arch.kv_bytes_per_token() == 504 * KIB


def test_kv_bytes_deepseek_v3_mla_is_68_6_kib_bf16():
    # MLA: 61 layers * (kv_lora_rank 512 + rope 64) * 2 bytes = 70,272 B = 68.625 KiB
    a = find_model("deepseek-v3").arch
    assert a.is_mla
    assert a.kv_bytes_per_token("bf16") == 61 * (512 + 64) * 2 == 70272
    assert a.kv_bytes_per_token() / KIB == pytest.approx(68.6, abs=0.05)


def test_kv_bytes_gpt_oss_sliding_layers_keep_only_their_window():
    # 36 layers alternate sliding (window 128) / full; per layer 2 * 8 * 64 * 2 = 2048 B/token
    a = find_model("gpt-oss-120b").arch
    assert len(a.sliding_layers) == 18 and a.sliding_window == 128
    per_layer = 2 * 8 * 64 * 2
    assert a.kv_bytes_for_context(4096) == 18 * 4096 * per_layer + 18 * 128 * per_layer
    assert a.kv_bytes_for_context(100) == 36 * 100 * per_layer


# published totals (billions) that are exact enough to hold to 1%
@pytest.mark.parametrize(
    "model_id",
    [
        m
        for m, e in model_catalog().items()
        if "nominal" not in e.published.get("note", "") and "total_b" in e.published
    ],
)
def test_total_parameters_within_1_percent_of_published(model_id):
    e = model_catalog()[model_id]
    total_b = e.arch.total_params / 1e9
    assert total_b == pytest.approx(e.published["total_b"], rel=0.01), model_id


@pytest.mark.parametrize(
    "model_id", [m for m, e in model_catalog().items() if "active_b" in e.published]
)
def test_active_parameters_match_published_convention(model_id):
    # DeepSeek and OpenAI count active without the input embedding (a lookup); Qwen and
    # Mistral count it. Published actives are rounded (3.3B, 22B, 37B): 3% tolerance.
    e = model_catalog()[model_id]
    a = e.arch
    active = a.active_params
    if e.published.get("active_includes_embedding"):
        active += a.vocab_size * a.hidden_size
    assert active / 1e9 == pytest.approx(e.published["active_b"], rel=0.03), model_id


def test_hand_checked_parameter_counts():
    # Llama-3.1-8B: embed + head 2*128256*4096 = 1,050,673,152; per layer attention
    # 4096*4096*2 + 4096*1024*2 = 41,943,040, MLP 3*4096*14336 = 176,160,768, norms 8192;
    # 32 layers -> 6,979,584,000; final norm 4096. Total 8,030,261,248.
    assert find_model("llama-3.1-8b").arch.total_params == 8_030_261_248
    # DeepSeek-V3 main model 671.0B; MTP module 11.6B (DeepSeek: 11.5B unique)
    ds = find_model("deepseek-v3").arch
    assert ds.total_params / 1e9 == pytest.approx(671.03, abs=0.01)
    assert ds.mtp_params / 1e9 == pytest.approx(11.5, rel=0.02)
    # gpt-oss-120b: OpenAI's table: 116.83B total, 5.13B active
    g = find_model("gpt-oss-120b").arch
    assert g.total_params / 1e9 == pytest.approx(116.83, abs=0.01)
    assert g.active_params / 1e9 == pytest.approx(5.13, abs=0.01)


def test_weight_bytes_by_precision():
    a = find_model("llama-3.1-8b").arch
    b = a.breakdown()
    assert a.weight_bytes("bf16") == 2 * a.total_params
    # FP8 quantises the linear layers; embedding, lm_head and norms stay BF16
    linear = b.attention + b.dense_mlp
    kept = b.embedding + b.lm_head + b.norms
    assert a.weight_bytes("fp8") == linear * 1 + kept * 2
    # MXFP4: 4 bits + an 8-bit scale per 32 values = 0.53125 bytes per weight
    assert a.weight_bytes("mxfp4") == linear * 0.53125 + kept * 2
    with pytest.raises(AccelbenchError, match="unknown precision 'fp3'"):
        a.weight_bytes("fp3")


def test_moe_decode_touches_k_experts_at_batch_1_and_all_at_large_batch():
    a = find_model("mixtral-8x7b").arch
    one = a.decode_weight_bytes(1)
    many = a.decode_weight_bytes(10_000)
    per_expert_all_layers = 32 * a.expert_bytes()
    # batch 1: E * (1 - (1 - k/E)^1) = k = 2 experts per layer; at 10,000 all 8 are
    # touched (1 - 0.75^10000 = 1); also 9,999 more embedding rows (4096 x 2 bytes each)
    embedding_rows = 9_999 * 4096 * 2
    assert many - one == pytest.approx((8 - 2) * per_expert_all_layers + embedding_rows, rel=1e-9)


def _raw(model_id: str) -> dict:
    from importlib import resources

    import yaml

    text = resources.files("accelbench.plan").joinpath("data/models.yaml").read_text()
    return dict(yaml.safe_load(text)["models"][model_id]["config"])


def test_config_json_file_and_directory(tmp_path):
    cfg = _raw("deepseek-v3")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    from_dir = resolve_model(str(tmp_path))
    from_file = load_config_file(tmp_path / "config.json")
    ref = find_model("deepseek-v3").arch
    for a in (from_dir, from_file):
        assert a.total_params == ref.total_params
        assert a.kv_bytes_per_token() == ref.kv_bytes_per_token()


def test_config_json_multimodal_text_config():
    cfg = {"model_type": "x_vl", "text_config": _raw("llama-3.1-8b")}
    assert arch_from_config(cfg).total_params == find_model("llama-3.1-8b").arch.total_params


@pytest.mark.parametrize(
    "drop",
    ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size"],
)
def test_missing_config_field_is_named(drop):
    cfg = _raw("llama-3.1-8b")
    del cfg[drop]
    with pytest.raises(AccelbenchError, match=f"missing field '{drop}'"):
        arch_from_config(cfg, name="my-model")


def test_impossible_config_values_are_named():
    cfg = _raw("llama-3.1-8b")
    cfg["hidden_size"] = 0
    with pytest.raises(AccelbenchError, match=r"'hidden_size' must be in \[1, 16,777,216\]"):
        arch_from_config(cfg)
    cfg = _raw("llama-3.1-8b")
    cfg["num_key_value_heads"] = 5
    with pytest.raises(AccelbenchError, match="num_key_value_heads=5 does not divide"):
        arch_from_config(cfg)
    cfg = _raw("mixtral-8x7b")
    del cfg["num_experts_per_tok"]
    with pytest.raises(AccelbenchError, match="num_experts_per_tok"):
        arch_from_config(cfg)


def test_tensor_parallel_must_divide_heads():
    a = find_model("llama-3.1-70b").arch  # 64 heads, 8 KV heads
    a.check_tensor_parallel(8)
    with pytest.raises(AccelbenchError, match="3 does not divide num_attention_heads=64"):
        a.check_tensor_parallel(3)
    # GLM-4.5 has 96 heads: TP 3 divides them but not the 8 KV heads
    with pytest.raises(AccelbenchError, match="num_key_value_heads=8"):
        find_model("glm-4.5").arch.check_tensor_parallel(3)


def test_unknown_model_suggests_close_names(tmp_path):
    with pytest.raises(AccelbenchError, match="did you mean: .*llama-3.1-70b"):
        find_model("llama-3.1-7b")
    with pytest.raises(AccelbenchError, match="no such file"):
        resolve_model(str(tmp_path / "nope.json"))


def test_lookup_by_hugging_face_repo_id():
    assert find_model("meta-llama/Llama-3.3-70B-Instruct").id == "llama-3.3-70b"
    assert find_model("openai/gpt-oss-120b").id == "gpt-oss-120b"
    assert find_model("Qwen/Qwen3-235B-A22B").id == "qwen3-235b-a22b"


def test_every_catalog_model_has_a_source():
    for e in model_catalog().values():
        assert e.source.get("config", "").startswith("https://huggingface.co/"), e.id
        assert e.source.get("checked"), e.id
        assert e.published.get("note"), e.id


# ------------------------------------------------------------- hostile config.json files


def test_binary_file_as_config_is_one_line(tmp_path):
    p = tmp_path / "config.json"
    p.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(AccelbenchError, match="not a config.json .not UTF-8 text"):
        resolve_model(str(p))
    p.write_text("[1, 2, 3]")
    with pytest.raises(AccelbenchError, match="must hold a JSON object"):
        resolve_model(str(p))
    p.write_text("{" * 100_000)
    with pytest.raises(AccelbenchError, match="cannot read .* as JSON"):
        resolve_model(str(p))


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("num_local_experts", "eight", "'num_local_experts' must be an integer"),
        ("num_experts_per_tok", -2, "'num_experts_per_tok' must be in"),
        ("max_position_embeddings", 1e30, "'max_position_embeddings' must be in"),
        ("sliding_window", [4096], "'sliding_window' must be an integer"),
        ("layer_types", "full", "'layer_types' must be a list"),
        ("text_config", 5, "malformed config.json"),
    ],
)
def test_malformed_config_fields_are_named(tmp_path, field, value, message):
    cfg = _raw("mixtral-8x7b")
    if field == "text_config":
        cfg = {"text_config": value}
    else:
        cfg[field] = value
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(AccelbenchError, match=message):
        load_config_file(p)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_KEYS = st.sampled_from(
    [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "vocab_size",
        "intermediate_size",
        "head_dim",
        "num_local_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
        "kv_lora_rank",
        "q_lora_rank",
        "qk_rope_head_dim",
        "sliding_window",
        "layer_types",
        "mlp_only_layers",
        "text_config",
        "max_position_embeddings",
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(changes=st.dictionaries(_KEYS, _JSON, max_size=5), raw=st.binary(max_size=64))
def test_any_config_file_loads_or_fails_with_one_line(tmp_path, changes, raw):
    """Random field values over a real config, and random bytes: a ModelArch or an
    AccelbenchError, never another exception."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**_raw("deepseek-v3"), **changes}))
    for content in (None, raw):
        if content is not None:
            p.write_bytes(content)
        try:
            a = load_config_file(p)
        except AccelbenchError as exc:
            assert "\n" not in str(exc)
        else:
            assert a.total_params > 0


@given(st.floats(min_value=0, allow_nan=False, allow_infinity=False))
def test_human_bytes_is_total_over_every_size(n):
    # audit_opts 1c: below one byte the unit index went negative: IndexError, exit 70
    text = human_bytes(n)
    assert text.endswith("B") and "\n" not in text


def test_human_bytes_below_a_byte():
    assert human_bytes(1e-300) == "1e-300 B"
    assert human_bytes(0.5) == "0.5 B"
    assert human_bytes(2048) == "2 KiB"


_FLAGS = ("tie_word_embeddings", "attention_bias", "use_qk_norm", "use_sliding_window")


def test_a_flag_of_the_wrong_type_is_refused_naming_the_file(tmp_path):
    """ "tie_word_embeddings": "false" was read as true (8.03B -> 7.5B parameters for
    Llama-3.1-8B), by its truthiness; head_dim 0 was read as absent; and every error named
    the config's folder ("pred: field ...") rather than the file."""
    p = tmp_path / "config.json"
    for field, value, says in (
        ("tie_word_embeddings", "false", "'tie_word_embeddings' must be true or false"),
        ("head_dim", 0, "'head_dim' must be in"),
        ("hidden_size", 0, "'hidden_size' must be in"),
    ):
        p.write_text(json.dumps({**_raw("llama-3.1-8b"), field: value}))
        with pytest.raises(AccelbenchError, match=f"^{p}: field {says}"):
            load_config_file(p)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(field=st.sampled_from(_FLAGS), value=_JSON)
@example(field="use_sliding_window", value=True)  # a draw that found the base had no window
def test_property_a_flag_is_a_json_boolean_or_one_line(tmp_path, field, value):
    """Any JSON value of a true/false field: read as that boolean (absent or null: the
    default), or one line naming the file and the field; never its truthiness."""
    p = tmp_path / "config.json"
    base = {**_raw("qwen2.5-7b"), "sliding_window": 4096, "max_window_layers": 14}
    base["_name_or_path"] = "m"
    p.write_text(json.dumps({**base, field: value}))
    try:
        arch = load_config_file(p)
    except AccelbenchError as exc:
        assert not isinstance(value, bool) and value is not None
        assert str(exc).startswith(f"{p}: field '{field}' must be true or false")
        return
    assert isinstance(value, bool) or value is None
    default = load_config_file_with(tmp_path, {k: v for k, v in base.items() if k != field})
    if value is None:
        assert replace(arch, source={}) == replace(default, source={})
    elif field == "tie_word_embeddings":
        assert arch.tie_embeddings is value
    elif field == "attention_bias":
        assert arch.attention_bias is value
    elif field == "use_qk_norm":
        assert arch.qk_norm is value
    else:
        assert bool(arch.sliding_layers) is value


def load_config_file_with(tmp_path, cfg):
    q = tmp_path / "other" / "config.json"
    q.parent.mkdir(exist_ok=True)
    q.write_text(json.dumps(cfg))
    return load_config_file(q)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    first=st.integers(0, 40),
    step=st.integers(0, 40),
    mlp_only=st.lists(st.one_of(st.integers(-3, 40), st.text(max_size=3), st.floats(),
                                st.booleans()), max_size=4),
    moe_inter=st.sampled_from([None, 0, 14336]),
)  # fmt: skip
def test_where_a_moe_config_puts_its_experts_is_read_or_refused(
    tmp_path, first, step, mlp_only, moe_inter
):
    """Mixtral-8x7B (32 layers) with any first dense layers, layer step, dense-only layers
    and expert width: an architecture with at least one MoE layer, none of them listed
    dense-only, or one line naming the field. Before, a step past the layers gave experts
    on no layer, `mlp_only_layers` entries that are no layer were ignored, and
    `moe_intermediate_size: 0` was read as absent."""
    cfg = {**_raw("mixtral-8x7b"), "first_k_dense_replace": first,
           "decoder_sparse_step": step, "mlp_only_layers": mlp_only}  # fmt: skip
    if moe_inter is not None:
        cfg["moe_intermediate_size"] = moe_inter
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    layers = cfg["num_hidden_layers"]
    try:
        a = load_config_file(p)
    except AccelbenchError as exc:
        msg = str(exc)
        assert "\n" not in msg and "config.json" in msg, msg
        valid = all(type(x) is int and 0 <= x < layers for x in mlp_only)
        some = any(i >= first and (i + 1) % (step or 1) == 0 and i not in mlp_only
                   for i in range(layers))  # fmt: skip
        assert not valid or not some or moe_inter == 0, msg
        return
    assert moe_inter != 0
    assert a.moe_layers and not set(a.moe_layers) & set(mlp_only)
    assert all(type(x) is int and 0 <= x < layers for x in mlp_only)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"decoder_sparse_step": 33}, "hold no experts"),
        ({"first_k_dense_replace": 32}, "hold no experts"),
        ({"mlp_only_layers": [40]}, "must list layer numbers 0 to 31"),
        ({"mlp_only_layers": ["3"]}, "must list layer numbers"),
        ({"moe_intermediate_size": 0}, "'moe_intermediate_size' must be at least 1"),
    ],
)
def test_moe_layout_examples_are_refused(tmp_path, change, message):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**_raw("mixtral-8x7b"), **change}))
    with pytest.raises(AccelbenchError, match=message):
        load_config_file(p)


@settings(max_examples=40, deadline=None)
@given(
    key=st.sampled_from(["n_routed_experts", "num_local_experts", "num_experts"]),
    top_k=st.integers(0, 16),
)
def test_experts_per_token_of_zero_experts_is_refused(key, top_k):
    """A config with ``num_experts_per_tok`` k > 0 and an expert count of 0 was read as a
    dense model (k ignored): refused naming both fields. 0 and 0 is a dense model, as
    Granite's configs write it."""
    cfg = {**_raw("llama-3.1-8b"), key: 0, "num_experts_per_tok": top_k}
    if top_k:
        with pytest.raises(AccelbenchError, match=rf"num_experts_per_tok={top_k} .* {key}=0"):
            arch_from_config(cfg, where="x/config.json")
    else:
        a = arch_from_config(cfg, where="x/config.json")
        assert not a.is_moe and a.total_params == find_model("llama-3.1-8b").arch.total_params
