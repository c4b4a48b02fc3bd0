"""accelbench's YAML loader: safe_load's documents, but a key given twice is an error
(PyYAML keeps the last without a word: a TCO file's second usd_per_gpu_hour won)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.yamlfile import DuplicateKeyError, load_yaml


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("usd_per_gpu_hour: 2.0\nusd_per_gpu_hour: 4.0\n",
         "line 2: key 'usd_per_gpu_hour' given twice (first on line 1)"),
        ("a:\n  x: 1\n  y: 2\n  x: 3\n", "line 4: key 'x' given twice (first on line 2)"),
        ("{a: 1, a: 2}\n", "line 1: key 'a' given twice (first on line 1)"),
        ("- {k: 1}\n- {k: 1, k: 1}\n", "key 'k' given twice"),
        ("1: a\n1: b\n", "key 1 given twice"),
    ],
)  # fmt: skip
def test_a_key_given_twice_is_refused(text, message):
    assert yaml.safe_load(text) is not None  # PyYAML alone: no error, the last one wins
    with pytest.raises(DuplicateKeyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_yaml(text)


def test_merge_keys_may_be_overridden():
    text = "base: &b {x: 1, y: 2}\nmine:\n  <<: *b\n  x: 3\n"
    assert (
        load_yaml(text)
        == yaml.safe_load(text)
        == {
            "base": {"x": 1, "y": 2},
            "mine": {"x": 3, "y": 2},
        }
    )


_KEYS = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans())
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(doc=st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=5), flow=st.booleans())
def test_property_documents_read_as_safe_load_and_a_repeated_key_is_named(doc, flow):
    """Without a repeated key, the same document as yaml.safe_load; with the first key
    written again at the end, DuplicateKeyError naming it."""
    text = yaml.safe_dump(doc, default_flow_style=flow)
    assert load_yaml(text) == yaml.safe_load(text)
    key = next(iter(doc))
    again = yaml.safe_dump({key: doc[key]}, default_flow_style=False)
    if flow:  # a flow mapping on one line: add the pair inside its braces
        twice = text.rstrip()[:-1] + ", " + again.strip().replace("\n", " ") + "}\n"
        if "\n" in again.strip():
            return  # a nested block value cannot join a flow mapping
    else:
        twice = text + again
    with pytest.raises(DuplicateKeyError) as exc:
        load_yaml(twice)
    assert f"key {key!r} given twice" in str(exc.value)
