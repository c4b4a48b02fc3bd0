"""The generated tiny model: deterministic, well-formed, and it always runs to max_tokens."""

from __future__ import annotations

import hashlib
import json
import struct
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from accelbench.engines import tinymodel
from accelbench.engines.tinymodel import tiny_model
from accelbench.errors import AccelbenchError


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    quiet = lambda _msg: None  # noqa: E731
    return {v: tiny_model(v, log=quiet, root=root) for v in tinymodel.VARIANTS}


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_generation_is_deterministic(models, tmp_path):
    again = tiny_model(log=lambda _m: None, root=tmp_path)
    first = models["default"]
    assert again.gguf.name == first.gguf.name
    assert _digest(again.gguf.parent) == _digest(first.gguf.parent)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_cached_second_call_is_a_no_op(models):
    m = models["default"]
    before = m.gguf.stat().st_mtime_ns
    logged = []
    again = tiny_model(log=logged.append, root=m.gguf.parent.parent)
    assert again == m and logged == [] and m.gguf.stat().st_mtime_ns == before


def test_unknown_variant():
    with pytest.raises(AccelbenchError, match="variant"):
        tiny_model("huge")


def test_hf_config(models):
    hf = models["default"].hf_dir
    cfg = json.loads((hf / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["model_type"] == "llama"
    assert cfg["num_hidden_layers"] == 4
    assert cfg["hidden_size"] == 256
    assert cfg["num_attention_heads"] == 4 and cfg["num_key_value_heads"] == 2
    assert cfg["intermediate_size"] == 688
    assert cfg["vocab_size"] == 4096
    assert cfg["eos_token_id"] == 0 and cfg["tie_word_embeddings"] is False
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json"):  # fmt: skip
        assert (hf / name).is_file()
    tok_cfg = json.loads((hf / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in tok_cfg["chat_template"]


def test_tokenizer_round_trips(models):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(models["default"].hf_dir / "tokenizer.json"))
    assert tok.get_vocab_size() == 4096
    for text in ["Hello world, this is a benchmark.", "café 🚀 東京 12345\n\n  x"]:
        assert tok.decode(tok.encode(text).ids) == text
    assert tok.token_to_id("<|endoftext|>") == 0


def test_gguf_metadata(models):
    from gguf import GGUFReader

    r = GGUFReader(models["default"].gguf)
    val = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.ggml.t")}
    assert val["general.architecture"] == "llama"
    assert val["llama.block_count"] == 4 and val["llama.embedding_length"] == 256
    assert val["llama.attention.head_count_kv"] == 2 and val["llama.feed_forward_length"] == 688
    assert val["tokenizer.ggml.model"] == "gpt2" and val["tokenizer.ggml.eos_token_id"] == 0
    assert "tokenizer.chat_template" in val
    assert len(r.fields["tokenizer.ggml.tokens"].data) == 4096
    assert len(r.tensors) == 3 + 9 * 4


# ---------------------------------------------------- reference forward pass (numpy)


def _load_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        dt = {"F16": np.float16, "F32": np.float32}[h["dtype"]]
        out[name] = np.frombuffer(raw[8 + n + a : 8 + n + b], dt).reshape(h["shape"])
    return {k: v.astype(np.float32) for k, v in out.items()}


def _logits(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """A plain Llama forward pass (HF layout), logits of the last position."""

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + tinymodel.RMS_EPS) * g

    n, hd = len(ids), tinymodel.HEAD_DIM
    pos = np.arange(n)[:, None] / tinymodel.ROPE_THETA ** (np.arange(0, hd, 2) / hd)
    cos, sin = np.cos(np.tile(pos, 2))[:, None], np.sin(np.tile(pos, 2))[:, None]

    def rope(x):
        return x * cos + np.concatenate([-x[..., hd // 2 :], x[..., : hd // 2]], -1) * sin

    h = w["model.embed_tokens.weight"][ids]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(tinymodel.N_LAYER):
        p = f"model.layers.{i}."
        x = rms(h, w[p + "input_layernorm.weight"])
        q = rope((x @ w[p + "self_attn.q_proj.weight"].T).reshape(n, -1, hd))
        k = rope((x @ w[p + "self_attn.k_proj.weight"].T).reshape(n, -1, hd))
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(n, -1, hd)
        rep = q.shape[1] // k.shape[1]
        k, v = np.repeat(k, rep, 1), np.repeat(v, rep, 1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        h = h + np.einsum("hts,shd->thd", s, v).reshape(n, -1) @ w[p + "self_attn.o_proj.weight"].T
        x = rms(h, w[p + "post_attention_layernorm.weight"])
        g, u = x @ w[p + "mlp.gate_proj.weight"].T, x @ w[p + "mlp.up_proj.weight"].T
        h = h + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    return rms(h[-1], w["model.norm.weight"]) @ w["lm_head.weight"].T


def test_control_and_partial_utf8_tokens_are_never_chosen(models):
    from tokenizers import Tokenizer

    hf = models["default"].hf_dir
    tok = Tokenizer.from_file(str(hf / "tokenizer.json"))
    w = _load_safetensors(hf / "model.safetensors")
    inv = {i: t for t, i in tok.get_vocab().items()}
    ok = tinymodel._samplable([inv[i] for i in range(4096)], set(tinymodel.SPECIAL_TOKENS))
    assert not ok[0] and not ok[2] and ok.sum() > 3500
    rng = np.random.default_rng(1)
    ids = tok.encode("Hello world, a benchmark.").ids
    for _ in range(12):
        logits = _logits(w, ids)
        assert logits[~ok].max() < logits[ok].min() - tinymodel.MIN_GAP
        ids.append(int(rng.choice(np.flatnonzero(ok))))
    w_eos = _load_safetensors(models["eos-first"].hf_dir / "model.safetensors")
    logits = _logits(w_eos, ids)
    assert int(logits.argmax()) == 0 and logits[0] > np.sort(logits)[-2] + tinymodel.MIN_GAP


# --------------------------------------------------------------- the real server


def _stream(url: str, model: str, prompt: str, **extra) -> tuple[bytes, dict | None]:
    body = {"model": model, "prompt": prompt, "max_tokens": 64, "stream": True,
            "stream_options": {"include_usage": True}, **extra}  # fmt: skip
    req = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    text, usage = b"", None
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices", []):
                text += (choice.get("text") or "").encode()
    return text, usage


@pytest.mark.engine
def test_llama_server_runs_to_max_tokens():
    from accelbench.engines.llamacpp import llama_server_binary, start_llama_server

    if not llama_server_binary().is_file():
        pytest.skip("llama-server is not built (accelbench.engines.llamacpp.build_llama_server)")
    server = start_llama_server("tiny", parallel=4, log=lambda _m: None)
    try:
        for prompt in ["Hello world", "café 🚀 東京", "x" * 300]:
            for extra in ({}, {"temperature": 0}, {"temperature": 2.0, "top_k": 0, "top_p": 1}):
                text, usage = _stream(server.url, server.alias, prompt, **extra)
                assert usage and usage["completion_tokens"] == 64, (prompt, extra, usage)
                text.decode("utf-8")  # strict: every token is valid UTF-8 on its own
    finally:
        server.stop()
    eos_first = tiny_model("eos-first", log=lambda _m: None).gguf
    server = start_llama_server(str(eos_first), parallel=2, log=lambda _m: None)
    try:
        _, usage = _stream(server.url, server.alias, "Hello")
        assert usage and usage["completion_tokens"] <= 1
        _, usage = _stream(server.url, server.alias, "Hello", ignore_eos=True)
        assert usage and usage["completion_tokens"] == 64
    finally:
        server.stop()
