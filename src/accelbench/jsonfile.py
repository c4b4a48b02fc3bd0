"""JSON as accelbench reads a user's document: the standard library's parser, except that
a key given twice in one object is an error. ``json.loads`` keeps the last value without a
word, so an ``--extra-body`` with ``max_tokens`` twice, or a vLLM result with ``completed``
twice, silently used the second (the same rule as yamlfile.py for YAML)."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from accelbench.errors import UsageError


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


UTF8_BOM = b"\xef\xbb\xbf"
# UTF-32 first: its little-endian mark begins with UTF-16's
_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
              (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))  # fmt: skip
# JSON's first character, `{` or `[`, in UTF-32 or UTF-16 without a mark: NULs beside it
_WIDE_STARTS = (
    ((b"{\x00\x00\x00", b"[\x00\x00\x00", b"\x00\x00\x00{", b"\x00\x00\x00["), "UTF-32"),
    ((b"{\x00", b"[\x00", b"\x00{", b"\x00["), "UTF-16"),
)


def utf8_json_bytes(raw: bytes, where: str) -> bytes:
    """A user's JSON or JSON Lines file (a data set, a trace) as the UTF-8 its parsers
    read: a UTF-8 byte-order mark (Windows editors write one) is dropped, so the file
    reads as it would without it (it was "not valid JSON" on line 1, or a trace whose
    format could not be told); UTF-16 or UTF-32 text is refused in one line naming
    ``where`` and the encoding (it was "cannot tell the format" or "not valid UTF-8")."""
    if raw.startswith(UTF8_BOM):
        return raw[len(UTF8_BOM) :]
    head = raw.lstrip(b" \t\r\n")[:4]
    for bom, name in _WIDE_BOMS:
        if head.startswith(bom):
            raise UsageError(
                f"{where} is {name} text (it begins with a byte-order mark): save it as UTF-8"
            )
    for starts, name in _WIDE_STARTS:
        if head.startswith(starts):
            raise UsageError(
                f"{where} is {name} text (NULs beside its first character): save it as UTF-8"
            )
    return raw
