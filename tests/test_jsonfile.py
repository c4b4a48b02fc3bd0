"""A key given twice in one JSON object is refused, by both readers (jsonfile.py): the
standard library's for small documents, orjson's with a count check for data sets and
traces. Property: over documents written with any spacing and any strings (quotes,
backslashes and ``":`` inside them), each refuses exactly the documents with a repeat
and otherwise reads what ``json.loads`` reads."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.jsonfile import DuplicateKeyError, loads_unique, orjson_unique

KEYS = st.sampled_from(["a", "b", 'q"', "c\\", "k:", '":', '\\":'])
TEXT = st.text(alphabet='ab":\\ {}', max_size=8)


class Obj:
    """An object as pairs in their written order: a key may repeat."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


VALUES = st.recursive(
    st.integers(-5, 5) | TEXT | st.none(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.builds(Obj, st.lists(st.tuples(KEYS, inner), max_size=4))
    ),
    max_leaves=12,
)


def write(v: Any, colon: str, comma: str) -> str:
    if isinstance(v, Obj):
        return (
            "{"
            + comma.join(json.dumps(k) + colon + write(x, colon, comma) for k, x in v.pairs)
            + "}"
        )
    if isinstance(v, list):
        return "[" + comma.join(write(x, colon, comma) for x in v) + "]"
    return json.dumps(v)


def repeats(v: Any) -> bool:
    if isinstance(v, Obj):
        keys = [k for k, _ in v.pairs]
        return len(set(keys)) < len(keys) or any(repeats(x) for _, x in v.pairs)
    if isinstance(v, list):
        return any(repeats(x) for x in v)
    return False


@settings(max_examples=400, deadline=None)
@given(
    VALUES,
    st.sampled_from([":", " :", ": ", "\n:", "\t: "]),
    st.sampled_from([",", ", ", ",\n"]),
)
def test_a_repeated_key_is_refused_by_both_readers(doc: Any, colon: str, comma: str) -> None:
    text = write(doc, colon, comma)
    for read in (loads_unique, lambda t: orjson_unique(t.encode())):
        if repeats(doc):
            with pytest.raises(DuplicateKeyError):
                read(text)
        else:
            assert read(text) == json.loads(text)


def test_the_message_names_the_key() -> None:
    with pytest.raises(DuplicateKeyError, match="key 'max_tokens' given twice"):
        orjson_unique(b'{"model":"m","max_tokens":8,"max_tokens":64}')
    with pytest.raises(orjson.JSONDecodeError):  # not JSON: orjson's own error
        orjson_unique(b'{"a":')


def test_a_document_with_a_key_twice_is_unreadable(tmp_path) -> None:
    """accelbench's own documents (run.json, summary.json, ...) read back the same way: a
    hand-edited one with a key twice is one DocumentError line naming it."""
    from accelbench.documents import load_json
    from accelbench.errors import DocumentError

    p = tmp_path / "run.json"
    p.write_text('{"schema": "x", "label": "a", "label": "b"}')
    with pytest.raises(DocumentError, match=r"run.json unreadable \(key 'label' given twice"):
        load_json(p)
