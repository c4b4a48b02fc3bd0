"""A generated tiny model: a random-weight Llama with a byte-level BPE vocabulary.

Written both as GGUF (for llama-server) and as a Hugging Face directory (config.json,
model.safetensors, tokenizer.json, ...). Nothing is downloaded: the tokenizer is trained
with `tokenizers` on a corpus produced here from a seeded RNG, and the weights come from
a seeded RNG too, so two generations give the same bytes.

The weights are random but not arbitrary; they are shaped so that a benchmark can rely on
the model:

* hidden dimension 0 is a constant channel: every token embedding holds ``C`` there and
  no layer writes to it (row 0 of every attention-output and FFN-down matrix is zero), so
  after the final RMS norm it is bounded away from zero whatever the input;
* the output row of each token that must never be sampled (EOS and the other control
  tokens, and every token that is not valid UTF-8 on its own, e.g. lone bytes >= 0x80 or
  half of an emoji) is ``-M`` on that channel and zero elsewhere, while every other row is
  zero there. ``M`` comes from a worst-case bound on the residual stream
  (:func:`_bounds`), so their logits lie more than ``MIN_GAP`` below every other logit
  for *any* input (checked by :func:`_check_margins`): every request runs to
  ``max_tokens`` and every generated piece decodes as UTF-8 (tokens may also contain no
  control character other than newline and tab);
* the ``eos-first`` variant instead gives EOS ``+M``: it wins at every step (the greedy
  first token is EOS, and so is the sampled one), which tests ``ignore_eos``.

The HF directory holds the same function as the GGUF file (q/k rows permuted the way
llama.cpp's converter does), stored as F16.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelbench.engines.cache import cache_dir
from accelbench.errors import AccelbenchError

Log = Callable[[str], None]

GENERATOR_VERSION = 2
VARIANTS = ("default", "eos-first")
SEED = 20240607

# Architecture.
N_LAYER = 4
N_EMBD = 256
N_HEAD = 4
N_HEAD_KV = 2
HEAD_DIM = N_EMBD // N_HEAD
N_FF = 688  # 8/3 * 256 rounded up to a multiple of 16
N_VOCAB = 4096
N_CTX = 8192
ROPE_THETA = 10000.0
RMS_EPS = 1e-5

# Logit shaping (see the module docstring).
CONST = 16.0  # value of the constant channel in every embedding
LOGIT_STD = 0.15  # std of the output-matrix entries of ordinary tokens
MIN_GAP = 100.0  # guaranteed logit gap between suppressed and ordinary tokens

EOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [EOS, IM_START, IM_END]
EOS_ID = 0
IM_END_ID = 2

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

MARKER = "accelbench-tiny.json"


@dataclass
class TinyModel:
    gguf: Path  # GGUF file llama-server can load
    hf_dir: Path  # config.json + model.safetensors + tokenizer.json (+ configs)


def tiny_model(variant: str = "default", log: Log = print, root: Path | None = None) -> TinyModel:
    """The tiny model ``variant`` (``default`` or ``eos-first``), generated once and cached.

    Kept in ``root / f"tiny-{variant}"``; ``root`` defaults to the ``models`` folder of
    :func:`accelbench.engines.cache.cache_dir`. Generation takes a few seconds; it is
    built in a temporary folder beside the destination and renamed into place, so a
    reader never sees a half-written model and concurrent generators do not clash.
    """
    if variant not in VARIANTS:
        raise AccelbenchError(
            f"unknown tiny-model variant {variant!r}: use one of {', '.join(VARIANTS)}"
        )
    if root is None:
        root = cache_dir() / "models"
    root = Path(root)
    dest = root / f"tiny-{variant}"
    model = _layout(dest, variant)
    if _is_current(dest):
        return model
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    log(f"generating the tiny model ({variant}), done once")
    tmp = Path(tempfile.mkdtemp(prefix=f".tiny-{variant}-", dir=root))
    try:
        _generate(tmp, variant)
        if dest.exists() and not _is_current(dest):
            # stale (older generator): move it aside, then take its place
            old = Path(tempfile.mkdtemp(prefix=f".old-tiny-{variant}-", dir=root))
            with contextlib.suppress(OSError):
                dest.rename(old / "x")
            shutil.rmtree(old, ignore_errors=True)
        try:
            tmp.rename(dest)
        except OSError:
            if not _is_current(dest):  # not simply another process winning the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"tiny model ready in {time.monotonic() - t0:.1f} s: {dest}")
    return model


def _layout(dest: Path, variant: str) -> TinyModel:
    return TinyModel(gguf=dest / f"tiny-{variant}.gguf", hf_dir=dest / "hf")


def _is_current(dest: Path) -> bool:
    try:
        meta = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if meta.get("generator_version") != GENERATOR_VERSION:
        return False
    return all((dest / name).is_file() for name in meta.get("sha256", {}))


# --------------------------------------------------------------------------- corpus

_WORDS = """
the of and to a in is it you that he was for on are with as I his they be at one have
this from or had by hot word but what some we can out other were all there when up use
your how said an each she which do their time if will way about many then them write
would like so these her long make thing see him two has look more day could go come did
number sound no most people my over know water than call first who may down side been
now find any new work part take get place made live where after back little only round
man year came show every good me give our under name very through just form sentence
great think say help low line differ turn cause much mean before move right boy old too
same tell does set three want air well also play small end put home read hand port large
spell add even land here must big high such follow act why ask men change went light kind
off need house picture try us again animal point mother world near build self earth father
head stand own page should country found answer school grow study still learn plant cover
food sun four between state keep eye never last let thought city tree cross farm hard
start might story saw far sea draw left late run don't while press close night real life
few north open seem together next white children begin got walk example ease paper group
always music those both mark often letter until mile river car feet care second book
carry took science eat room friend began idea fish mountain stop once base hear horse cut
sure watch color face wood main enough plain girl usual young ready above ever red list
though feel talk bird soon body dog family direct pose leave song measure door product
black short numeral class wind question happen complete ship area half rock order fire
south problem piece told knew pass since top whole king space heard best hour better true
during hundred five remember step early hold west ground interest reach fast verb sing
listen six table travel less morning ten simple several vowel toward war lay against
pattern slow center love person money serve appear road map rain rule govern pull cold
notice voice unit power town fine certain fly fall lead cry dark machine note wait plan
figure star box noun field rest correct able pound done beauty drive stood contain front
teach week final gave green oh quick develop ocean warm free minute strong special mind
behind clear tail produce fact street inch multiply nothing course stay wheel full force
blue object decide surface deep moon island foot system busy test record boat common
gold possible plane stead dry wonder laugh thousand ago ran check game shape equate miss
brought heat snow tire bring yes distant fill east paint language among server token
latency throughput request benchmark model stream batch queue cache memory kernel tensor
"""

_FOREIGN = """
café naïve façade über straße niño señor año smörgåsbord crème brûlée déjà vu fiancé
jalapeño mañana Zürich München São Paulo Kraków Ελλάδα καλημέρα Москва привет
日本語 東京 中文 北京 한국어 서울 → ← — … € £ ¥ °C ½ × ÷ ✓ ★ 🙂 🚀 🎉 👍 🔥
"""

_ONSETS = [
    "",
    *"b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl pr sh sl st th tr".split(),
]
_VOWELS = "a e i o u ai ea ee oo ou y io".split()
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "ck", "rt", "x"]


def _corpus(rng: np.random.Generator) -> list[str]:
    """Deterministic pseudo-text: Zipf-distributed words, punctuation, numbers, lines."""
    lexicon = list(dict.fromkeys(_WORDS.split()))
    seen = set(lexicon)
    while len(lexicon) < 7000:
        n = int(rng.integers(1, 5))
        w = "".join(
            _ONSETS[rng.integers(len(_ONSETS))]
            + _VOWELS[rng.integers(len(_VOWELS))]
            + _CODAS[rng.integers(len(_CODAS))]
            for _ in range(n)
        )
        if w not in seen:
            seen.add(w)
            lexicon.append(w)
    foreign = _FOREIGN.split()
    ranks = np.arange(len(lexicon), dtype=np.float64)
    p = 1.0 / (ranks + 2.7)
    p /= p.sum()
    n_sent = 40000
    lengths = rng.integers(3, 18, size=n_sent)
    words = rng.choice(len(lexicon), size=int(lengths.sum()), p=p)
    kind = rng.random(size=words.size)
    nums = rng.integers(0, 100000, size=words.size)
    fsel = rng.integers(0, len(foreign), size=words.size)
    ends = rng.choice([". ", "? ", "! ", ".\n", ".\n\n", "; ", ": "], size=n_sent,
                      p=[0.55, 0.08, 0.05, 0.15, 0.1, 0.04, 0.03])  # fmt: skip
    lines: list[str] = []
    cur: list[str] = []
    pos = 0
    for s in range(n_sent):
        sent: list[str] = []
        for j in range(int(lengths[s])):
            k = pos + j
            if kind[k] < 0.03:
                w = str(int(nums[k]))
            elif kind[k] < 0.045:
                w = foreign[fsel[k]]
            elif kind[k] < 0.06:
                w = f"({lexicon[words[k]]})"
            else:
                w = lexicon[words[k]]
            if j == 0:
                w = w[:1].upper() + w[1:]
            elif kind[k] > 0.93:
                w += ","
            elif kind[k] > 0.925:
                w = f'"{w}"'
            sent.append(w)
        pos += int(lengths[s])
        cur.append(" ".join(sent) + str(ends[s]))
        if "\n" in cur[-1]:
            lines.append("".join(cur))
            cur = []
    if cur:
        lines.append("".join(cur))
    return lines


# ------------------------------------------------------------------------ tokenizer


def _train_tokenizer(rng: np.random.Generator):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=N_VOCAB,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(rng), trainer=trainer)
    if tok.get_vocab_size() != N_VOCAB:
        raise AccelbenchError(
            f"tiny model: the tokenizer has {tok.get_vocab_size()} tokens, not {N_VOCAB}"
        )
    return tok


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, inverted."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def _samplable(tokens: list[str], special: set[str]) -> np.ndarray:
    """True for tokens that may be generated: not control, valid UTF-8 on their own and
    free of control characters other than newline and tab."""
    dec = _byte_decoder()
    ok = np.zeros(len(tokens), dtype=bool)
    for i, t in enumerate(tokens):
        if t in special:
            continue
        try:
            text = bytes(dec[c] for c in t).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            continue
        ok[i] = all(c in "\n\t" or (c >= " " and c != "\x7f") for c in text)
    return ok


# -------------------------------------------------------------------------- weights


def _weights(rng: np.random.Generator, samplable: np.ndarray, variant: str) -> tuple[dict, float]:
    """Weights in Hugging Face layout and names, rounded to float16, and the lower bound
    of the constant channel after the final norm (see :func:`_bounds`)."""
    d, f, v = N_EMBD, N_FF, N_VOCAB
    kv = N_HEAD_KV * HEAD_DIM

    def normal(shape, std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    w: dict[str, np.ndarray] = {}
    emb = normal((v, d), 1.0)
    emb[:, 0] = CONST
    w["model.embed_tokens.weight"] = emb
    for i in range(N_LAYER):
        p = f"model.layers.{i}."
        o = normal((d, d), 0.5 / np.sqrt(d))
        o[0] = 0.0
        down = normal((d, f), 0.25 / np.sqrt(f))
        down[0] = 0.0
        w[p + "input_layernorm.weight"] = np.ones(d, np.float32)
        w[p + "self_attn.q_proj.weight"] = normal((d, d), 1 / np.sqrt(d))
        w[p + "self_attn.k_proj.weight"] = normal((kv, d), 1 / np.sqrt(d))
        w[p + "self_attn.v_proj.weight"] = normal((kv, d), 1 / np.sqrt(d))
        w[p + "self_attn.o_proj.weight"] = o
        w[p + "post_attention_layernorm.weight"] = np.ones(d, np.float32)
        w[p + "mlp.gate_proj.weight"] = normal((f, d), 1 / np.sqrt(d))
        w[p + "mlp.up_proj.weight"] = normal((f, d), 1 / np.sqrt(d))
        w[p + "mlp.down_proj.weight"] = down
    w["model.norm.weight"] = np.ones(d, np.float32)
    head = normal((v, d), LOGIT_STD)
    head[:, 0] = 0.0
    w = {k: a.astype(np.float16) for k, a in w.items()}
    a_min = _bounds(w)
    m = _suppression_weight(w, head.astype(np.float16), a_min)
    head[~samplable] = 0.0
    head[~samplable, 0] = -m
    if variant == "eos-first":
        head[EOS_ID, 0] = m
    w["lm_head.weight"] = head.astype(np.float16)
    return w, a_min


def _bounds(w: dict) -> float:
    """A lower bound, for any input, of the constant channel after the final norm.

    It follows from an upper bound of the norm of the rest of the residual stream:
    what the embeddings put there plus what each layer can add at most."""
    f32 = {k: a.astype(np.float32) for k, a in w.items()}
    d = N_EMBD
    needed = ("v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    spec = {k: _spectral_norm(a) for k, a in f32.items() if k.split(".")[-2] in needed}
    # a normalised vector has norm <= sqrt(d); weighted by a norm gain g: <= sqrt(d)*max|g|
    bound = float(np.linalg.norm(f32["model.embed_tokens.weight"][:, 1:], axis=1).max())
    for i in range(N_LAYER):
        p = f"model.layers.{i}."
        xa = np.sqrt(d) * float(np.abs(f32[p + "input_layernorm.weight"]).max())
        # attention output: o @ (a convex combination of v vectors)
        bound += spec[p + "self_attn.o_proj.weight"] * spec[p + "self_attn.v_proj.weight"] * xa
        xf = np.sqrt(d) * float(np.abs(f32[p + "post_attention_layernorm.weight"]).max())
        # hidden = silu(a) * b with a = gate @ x, b = up @ x; |silu(a)| <= |a|, so
        # ||hidden||_2 <= ||a||_2 ||b||_2 and <= ||a||_inf ||b||_2 (and the mirror)
        gate, up = f32[p + "mlp.gate_proj.weight"], f32[p + "mlp.up_proj.weight"]
        g, u = spec[p + "mlp.gate_proj.weight"], spec[p + "mlp.up_proj.weight"]
        g_inf = float(np.linalg.norm(gate, axis=1).max())
        u_inf = float(np.linalg.norm(up, axis=1).max())
        hidden = xf * xf * min(g * u, g_inf * u, g * u_inf)
        bound += spec[p + "mlp.down_proj.weight"] * hidden
    const = float(f32["model.embed_tokens.weight"][0, 0])
    a_min = const / np.sqrt((const**2 + bound**2) / d + RMS_EPS)
    return a_min * float(f32["model.norm.weight"][0])


def _spectral_norm(a: np.ndarray) -> float:
    """Largest singular value (from the smaller Gram matrix), rounded up a little."""
    if a.ndim != 2:
        return 0.0
    a = a.astype(np.float64)
    gram = a.T @ a if a.shape[0] >= a.shape[1] else a @ a.T
    return float(np.sqrt(np.linalg.eigvalsh(gram)[-1])) * (1 + 1e-6)


def _suppression_weight(w: dict, head: np.ndarray, a_min: float) -> float:
    """The output weight M on the constant channel that puts suppressed tokens MIN_GAP
    below (or, for eos-first, above) every ordinary token for any input."""
    g = w["model.norm.weight"].astype(np.float32)
    ordinary = float(np.linalg.norm(head.astype(np.float32)[:, 1:] * g[1:], axis=1).max())
    max_logit = ordinary * np.sqrt(N_EMBD)
    # a multiple of 64 (exact in float16): immune to last-bit differences between BLASes
    m = float(np.ceil((max_logit + MIN_GAP) / a_min * 1.25 / 64) * 64)
    # |logit| <= m * sqrt(d): keep it well inside float16 range for engines that use it
    if not np.isfinite(m) or m * np.sqrt(N_EMBD) * float(g[0]) > 30000:
        raise AccelbenchError("tiny model: the logit bound is too loose (weights too large)")
    return m


def _check_margins(w: dict, samplable: np.ndarray, variant: str, a_min: float) -> float:
    """Verify the guarantee on the final weights; return the guaranteed gap."""
    head = w["lm_head.weight"].astype(np.float32)
    g = w["model.norm.weight"].astype(np.float32)
    if np.any(head[samplable, 0] != 0.0):
        raise AccelbenchError("tiny model: an ordinary token uses the constant channel")
    if np.any(head[~samplable, 1:] != 0.0):
        raise AccelbenchError("tiny model: a suppressed token has non-zero weights")
    max_ordinary = float(np.linalg.norm(head[samplable, 1:] * g[1:], axis=1).max())
    max_ordinary *= np.sqrt(N_EMBD)
    sup = ~samplable
    if variant == "eos-first":
        sup[EOS_ID] = False
        gap_eos = float(head[EOS_ID, 0]) * a_min - max_ordinary
        if gap_eos < MIN_GAP:
            raise AccelbenchError(f"tiny model: EOS is only {gap_eos:.0f} above the others")
    gap = float(-head[sup, 0].max()) * a_min - max_ordinary
    if gap < MIN_GAP:
        raise AccelbenchError(f"tiny model: suppressed tokens only {gap:.0f} below the others")
    return gap


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF (rotate-half) q/k rows to llama.cpp's interleaved RoPE layout."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


# -------------------------------------------------------------------------- writing


def _write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    names = sorted(tensors)
    header: dict = {"__metadata__": {"format": "pt"}}
    off = 0
    for n in names:
        a = tensors[n]
        dtype = {np.float16: "F16", np.float32: "F32"}[a.dtype.type]
        header[n] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hb)))
        fh.write(hb)
        for n in names:
            fh.write(
                np.ascontiguousarray(tensors[n]).astype("<" + tensors[n].dtype.str[1:]).tobytes()
            )


def _write_gguf(path: Path, w: dict, tok_json: dict, tokens: list[str], variant: str) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"accelbench tiny ({variant})")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_freq_base(ROPE_THETA)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_vocab_size(N_VOCAB)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    types = [
        gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL for t in tokens
    ]
    writer.add_token_types(types)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok_json["model"]["merges"]]
    writer.add_token_merges(merges)
    writer.add_bos_token_id(EOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_eot_token_id(IM_END_ID)
    writer.add_pad_token_id(EOS_ID)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    def f(name):
        return w[name]

    writer.add_tensor("token_embd.weight", f("model.embed_tokens.weight"))
    for i in range(N_LAYER):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        writer.add_tensor(
            b + "attn_norm.weight", f(p + "input_layernorm.weight").astype(np.float32)
        )
        writer.add_tensor(b + "attn_q.weight", _permute(f(p + "self_attn.q_proj.weight"), N_HEAD))
        writer.add_tensor(
            b + "attn_k.weight", _permute(f(p + "self_attn.k_proj.weight"), N_HEAD_KV)
        )
        writer.add_tensor(b + "attn_v.weight", f(p + "self_attn.v_proj.weight"))
        writer.add_tensor(b + "attn_output.weight", f(p + "self_attn.o_proj.weight"))
        writer.add_tensor(
            b + "ffn_norm.weight", f(p + "post_attention_layernorm.weight").astype(np.float32)
        )
        writer.add_tensor(b + "ffn_gate.weight", f(p + "mlp.gate_proj.weight"))
        writer.add_tensor(b + "ffn_up.weight", f(p + "mlp.up_proj.weight"))
        writer.add_tensor(b + "ffn_down.weight", f(p + "mlp.down_proj.weight"))
    writer.add_tensor("output_norm.weight", f("model.norm.weight").astype(np.float32))
    writer.add_tensor("output.weight", f("lm_head.weight"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _hf_files(hf: Path, tok, w: dict) -> None:
    hf.mkdir()
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": N_EMBD,
        "intermediate_size": N_FF,
        "num_hidden_layers": N_LAYER,
        "num_attention_heads": N_HEAD,
        "num_key_value_heads": N_HEAD_KV,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": N_CTX,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA,
        "rope_scaling": None,
        "vocab_size": N_VOCAB,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "pretraining_tp": 1,
        "use_cache": True,
        "bos_token_id": EOS_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": EOS_ID,
        "torch_dtype": "float16",
    }
    gen = {"bos_token_id": EOS_ID, "eos_token_id": EOS_ID, "pad_token_id": EOS_ID}
    tok_cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": EOS,
        "eos_token": EOS,
        "pad_token": EOS,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": N_CTX,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(i): {
                "content": t,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }  # fmt: skip
            for i, t in enumerate(SPECIAL_TOKENS)
        },
    }
    for name, obj in (
        ("config.json", config),
        ("generation_config.json", gen),
        ("tokenizer_config.json", tok_cfg),
    ):
        (hf / name).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    tok.save(str(hf / "tokenizer.json"))
    _write_safetensors(hf / "model.safetensors", w)


def _generate(out: Path, variant: str) -> None:
    rng = np.random.default_rng(SEED)
    tok = _train_tokenizer(rng)
    tok_json = json.loads(tok.to_str())
    vocab = tok.get_vocab()
    tokens = [""] * N_VOCAB
    for t, i in vocab.items():
        tokens[i] = t
    if tokens[EOS_ID] != EOS or tokens[IM_END_ID] != IM_END:
        raise AccelbenchError("tiny model: special tokens did not get the expected ids")
    samplable = _samplable(tokens, set(SPECIAL_TOKENS))
    w, a_min = _weights(np.random.default_rng(SEED + 1), samplable, variant)
    gap = _check_margins(w, samplable, variant, a_min)
    _hf_files(out / "hf", tok, w)
    layout = _layout(out, variant)
    _write_gguf(layout.gguf, w, tok_json, tokens, variant)
    meta = {
        "generator_version": GENERATOR_VERSION,
        "variant": variant,
        "seed": SEED,
        "suppressed_tokens": int((~samplable).sum()),
        "guaranteed_logit_gap": round(gap, 1),
        "sha256": {
            p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*"))
            if p.is_file()
        },
    }
    (out / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
    os.chmod(out, 0o755)  # mkdtemp makes it 0700
