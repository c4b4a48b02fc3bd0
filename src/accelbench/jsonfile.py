"""JSON as accelbench reads a user's document: the standard library's parser, except that
a key given twice in one object is an error. ``json.loads`` keeps the last value without a
word, so an ``--extra-body`` with ``max_tokens`` twice, or a vLLM result with ``completed``
twice, silently used the second (the same rule as yamlfile.py for YAML)."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson


class DuplicateKeyError(ValueError):
    """A key given twice in one JSON object; the message names it."""


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKeyError(f"key {k!r} given twice in one object")
        out[k] = v
    return out


def loads_unique(text: str | bytes) -> Any:
    """The document in ``text`` as :func:`json.loads` reads it, but a key given twice in an
    object raises :class:`DuplicateKeyError` (a ``ValueError``, not a ``JSONDecodeError``:
    the text is JSON, its meaning is not clear)."""
    return json.loads(text, object_pairs_hook=_unique)


# a key's closing quote, white space, then its colon: legal, but not counted below
_SPACED_COLON = re.compile(rb'"[ \t\r\n]+:')


def _n_keys(obj: Any) -> int:
    n = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            n += len(o)
            stack.extend(v for v in o.values() if isinstance(v, dict | list))
        elif isinstance(o, list):
            stack.extend(v for v in o if isinstance(v, dict | list))
    return n


def orjson_unique(raw: bytes) -> Any:
    """:func:`orjson.loads` (a data set or trace may be hundreds of MB) with
    :func:`loads_unique`'s rule. Each key is followed by ``":`` where no white space
    stands before its colon, and a string value can hold ``":`` only as ``\\":``; so
    where the text holds neither ``\\":`` nor a spaced colon, its count of ``":`` is its
    count of keys, and a parse holding fewer lost one to a repeat. Any other text is
    read again by :func:`loads_unique`, which names the key. Raises
    ``orjson.JSONDecodeError`` or :class:`DuplicateKeyError`."""
    obj = orjson.loads(raw)
    if not isinstance(obj, dict | list):
        return obj
    plain = b'\\":' not in raw and _SPACED_COLON.search(raw) is None
    if not plain or raw.count(b'":') != _n_keys(obj):
        loads_unique(raw)
    return obj
