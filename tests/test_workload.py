"""Length distributions, datasets (including malformed ones), exact synthetic prompts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.runner.config import WorkloadConfig
from accelbench.workload.datasets import load_dataset
from accelbench.workload.lengths import sample_lengths, uniform_bounds
from accelbench.workload.plan import arrival_offsets, build_plan
from accelbench.workload.synthetic import SyntheticPrompts


class ByteTok:
    """One token per UTF-8 byte: exact and invertible (the reference server's tokenizer)."""

    name = "bytes"

    def encode(self, text):
        return list(text.encode())

    def decode(self, ids):
        return bytes(ids).decode("utf-8", "replace")


def test_uniform_conventions():
    assert uniform_bounds(1000, 0.8, "inferencex") == (800, 1000)
    assert uniform_bounds(1000, 0.2, "vllm") == (800, 1200)
    rng = np.random.default_rng(0)
    x = sample_lengths(5000, 1000, "uniform", rng, range_ratio=0.8, convention="inferencex")
    assert x.min() >= 800 and x.max() <= 1000 and abs(x.mean() - 900) < 5


def test_normal_and_lognormal_moments():
    rng = np.random.default_rng(1)
    n = sample_lengths(20000, 500, "normal", rng, std=50)
    assert abs(n.mean() - 500) < 2 and abs(n.std() - 50) < 2
    ln = sample_lengths(20000, 500, "lognormal", rng, std=100)
    assert abs(ln.mean() - 500) < 5 and abs(ln.std() - 100) < 5
    assert ln.min() >= 1


def test_lengths_never_exceed_the_limit_and_clamping_is_said():
    """lognormal mean 2^20 std 2^20 used to ask up to 9.5M tokens (max_tokens above the
    1,048,576 limit); normal mean 100 std 1000 clamped 46 % to 1 (mean 457), silently."""
    from accelbench.workload.lengths import MAX_TRACE_TOKENS

    notes: list[str] = []
    x = sample_lengths(1000, 1 << 20, "lognormal", np.random.default_rng(0), std=1 << 20,
                       notes=notes, name="--osl-dist")  # fmt: skip
    assert x.max() == MAX_TRACE_TOKENS and len(notes) == 1 and notes[0].startswith("--osl-dist")
    notes.clear()
    y = sample_lengths(10000, 100, "normal", np.random.default_rng(0), std=1000, notes=notes)
    assert y.min() == 1 and "clamped" in notes[0] and "4,639 of 10,000" in notes[0]
    with pytest.raises(AccelbenchError, match="--osl 1,048,576 with --range-ratio 0.5 draws up to"):
        WorkloadConfig(osl=1 << 20, osl_dist="uniform", range_ratio=0.5).validate()


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 1 << 20),
    st.sampled_from(["fixed", "uniform", "normal", "lognormal"]),
    st.floats(0, 0.99),
    st.sampled_from(["vllm", "inferencex"]),
    st.one_of(st.none(), st.floats(0, 1 << 20)),
)
def test_lengths_within_limits_property(mean, dist, ratio, conv, std):
    """Any length options validate() accepts: every drawn length in [1, 1,048,576], and a
    note exactly when one was clamped."""
    from accelbench.workload.lengths import MAX_TRACE_TOKENS

    wl = WorkloadConfig(isl=mean, isl_dist=dist, range_ratio=ratio if dist == "uniform" else 0,
                        range_convention=conv if dist == "uniform" else "vllm",
                        isl_std=std if dist in ("normal", "lognormal") else None)  # fmt: skip
    try:
        wl.validate()
    except AccelbenchError:
        return
    notes: list[str] = []
    x = sample_lengths(200, wl.isl, dist, np.random.default_rng(0), range_ratio=wl.range_ratio,
                       convention=wl.range_convention, std=wl.isl_std, notes=notes)  # fmt: skip
    assert x.min() >= 1 and x.max() <= MAX_TRACE_TOKENS
    assert len(notes) <= 1


def test_bad_length_inputs():
    rng = np.random.default_rng(0)
    with pytest.raises(AccelbenchError):
        sample_lengths(3, 0, "fixed", rng)
    with pytest.raises(AccelbenchError, match="unknown length distribution"):
        sample_lengths(3, 10, "zipf", rng)


def test_arrivals():
    c = arrival_offsets(5, 10.0, "constant", 1.0, 0)
    assert np.allclose(c, [0, 0.1, 0.2, 0.3, 0.4])
    p = arrival_offsets(20000, 50.0, "poisson", 1.0, 0)
    assert abs(np.diff(p).mean() - 0.02) < 0.001
    g = arrival_offsets(20000, 50.0, "gamma", 0.5, 0)
    gaps = np.diff(g)
    assert abs(gaps.mean() - 0.02) < 0.001
    assert gaps.std() / gaps.mean() == pytest.approx(np.sqrt(2), rel=0.1)  # CV = 1/sqrt(shape)


def test_synthetic_prompts_exact_and_seeded():
    tok = ByteTok()
    gen = SyntheticPrompts(tok, seed=3, max_len=300)
    for n in (1, 17, 300):
        text, got = gen.make(n)
        assert got == n == len(tok.encode(text))
    wl = WorkloadConfig(isl=50, osl=8, isl_dist="uniform", range_ratio=0.5, seed=11)
    a = build_plan(wl, 10, tok, special_tokens=1)
    b = build_plan(wl, 10, tok, special_tokens=1)
    assert [r.prompt for r in a] == [r.prompt for r in b]
    assert all(r.isl_planned == len(r.prompt.encode()) + 1 for r in a)
    assert len({r.prompt for r in a}) == 10


def test_hf_tokenizer_exact(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE(unk_token=None))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    from tokenizers import decoders

    tk.decoder = decoders.ByteLevel()
    from accelbench.workload.synthetic import base_text

    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tk.train_from_iterator([base_text(i, 400) for i in range(20)], trainer)
    path = tmp_path / "tokenizer.json"
    tk.save(str(path))
    from accelbench.workload.tokenizer import LocalTokenizer

    tok = LocalTokenizer(str(path))
    gen = SyntheticPrompts(tok, seed=0, max_len=512)
    for n in (10, 128, 512):
        text, got = gen.make(n)
        assert got == n == len(tok.encode(text))


def test_datasets(tmp_path):
    sg = tmp_path / "sg.json"
    sg.write_text('[{"conversations": [{"from": "human", "value": "hi there"}, {"from": "gpt", "value": "hello you"}]},'
                  ' {"conversations": [{"from": "gpt", "value": "orphan"}]}]')  # fmt: skip
    items = load_dataset(str(sg))
    assert (
        len(items) == 1
        and items[0].prompt == "hi there"
        and items[0].reference_output == "hello you"
    )
    pj = tmp_path / "p.jsonl"
    pj.write_text('{"prompt": "a", "output_tokens": 5}\n\n{"prompt": "b"}\n')
    items = load_dataset(str(pj))
    assert [(i.prompt, i.output_tokens) for i in items] == [("a", 5), ("b", None)]
    cj = tmp_path / "c.jsonl"
    cj.write_text('{"messages": [{"role": "user", "content": "x"}], "max_tokens": 3}\n')
    assert load_dataset(str(cj))[0].output_tokens == 3
    plan = build_plan(WorkloadConfig(dataset=str(pj), osl=9), 4, ByteTok())
    assert sorted(r.max_tokens for r in plan) == [5, 5, 9, 9]


@pytest.mark.parametrize(
    "content, msg",
    [
        ("", "empty"),
        ('{"prompt": "a"}\n{"prompt": ', ":2: not valid JSON"),
        ('{"prompt": ""}\n', "non-empty string"),
        ('{"prompt": "a", "output_tokens": -1}\n', r"must be in \[1, 1048576\]"),
        ('{"text": "a"}\n', "cannot tell the dataset format"),
        ('[{"conversations": "x"}]', "must be a list"),
        ('{"messages": [{"content": "x"}]}\n', r"messages\[0\]\.role must be a non-empty"),
    ],
)
def test_malformed_datasets(tmp_path, content, msg):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(AccelbenchError, match=msg):
        load_dataset(str(p))


def test_missing_dataset():
    with pytest.raises(AccelbenchError, match="cannot read dataset"):
        load_dataset("/nonexistent/file.jsonl")
