"""Reading accelbench's own documents back into their types (docs/RESULTS.md).

Every file accelbench writes has one typed document class with a ``schema`` (name and
version), one writer and one validating reader. The readers are built from
:class:`Fields`: typed access to one JSON object where every wrong type, missing field or
unknown version is one :class:`~accelbench.errors.DocumentError` line naming the file and
the field (``stress.json: steps[2].requests: expected an integer, got 'x'``), never a
``KeyError`` or ``TypeError`` later, in whoever reads the value.

Pure: no accelbench import but the errors (every layer may read documents).
"""

from __future__ import annotations

import builtins
import json
import math
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from accelbench.errors import DocumentError
from accelbench.jsonfile import DuplicateKeyError, loads_unique

# A JSON value as it is read (the part of a document that is the user's own, e.g. a
# configuration that its class checks, or a server's answer kept verbatim).
Json = None | bool | int | float | str | list["Json"] | dict[str, "Json"]
JsonObject = dict[str, Json]

_MISSING = object()


def not_a_file(path: Path) -> builtins.str | None:
    """Why ``path`` cannot be read as a file (None: a regular file, or a link to one):
    missing, a directory, a FIFO, socket or device (whose read would block or never
    end), or the OS's word (a symbolic link to itself, no permission). Never opens it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return _kind_problem(mode)


def _kind_problem(mode: builtins.int) -> builtins.str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file")  # fmt: skip
    return f"is {kind}, not a file" if kind.startswith("a ") else f"is {kind}"


def open_file(path: Path) -> BinaryIO:
    """A regular file opened for reading. Opened without waiting (a FIFO's open and read
    would wait for a writer for ever) and refused unless it is a regular file:
    ``OSError`` with errno 0 whose ``strerror`` is the words (``is a FIFO, not a
    file``); the OS's own errors as they come (``FileNotFoundError``, a link loop)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        why = _kind_problem(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if why is not None:
        os.close(fd)
        raise OSError(0, why)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_file(path: Path) -> bytes:
    """The bytes of a regular file (``open_file``)."""
    with open_file(path) as f:
        return f.read()


def load_json(path: Path, name: str | None = None) -> object:
    """The JSON of a document; missing, not a file or unreadable is one DocumentError
    line naming the file and what is wrong (the line and column of bad JSON, the byte
    that is not UTF-8, the OS's error)."""
    what = name or path.name
    try:
        return loads_unique(read_file(path))
    except FileNotFoundError:
        raise DocumentError(f"{what} missing") from None
    except DuplicateKeyError as exc:  # a hand-edited document: which value was meant?
        raise DocumentError(f"{what} unreadable ({exc})") from None
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"{what} unreadable (not JSON at line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{what} unreadable (not UTF-8 text at byte {exc.start})") from None
    except RecursionError:
        raise DocumentError(f"{what} unreadable (nested too deeply)") from None
    except OSError as exc:
        why = exc.strerror if exc.errno == 0 else f"cannot be read ({exc.strerror or exc})"
        raise DocumentError(f"{what} {why}") from None
    except ValueError as exc:  # any other refusal of the parser
        raise DocumentError(f"{what} unreadable ({type(exc).__name__})") from None


def _type(x: object) -> str:
    return "null" if x is None else type(x).__name__


def _show(x: object) -> str:
    r = repr(x)
    return r if len(r) <= 40 else r[:37] + "..."


def as_number(x: object, where: str) -> float | None:
    """A finite number, ``"inf"`` / ``"-inf"`` (the writer's infinities: JSON has none)
    or null; NaN reads as null (the writer writes NaN as null)."""
    if x is None:
        return None
    if isinstance(x, str) and x in ("inf", "-inf"):
        return float(x)
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise DocumentError(f"{where}: expected a number, got {_show(x)}")
    v = float(x)
    return None if math.isnan(v) else v


def as_json(x: object, where: str, depth: int = 0) -> Json:
    """A JSON value as such (checked to be one: the parser gives nothing else)."""
    if depth > 64:
        raise DocumentError(f"{where}: nested too deeply")
    if x is None or isinstance(x, bool | int | float | str):
        return x
    if isinstance(x, list):
        return [as_json(y, where, depth + 1) for y in x]
    if isinstance(x, Mapping):
        return {str(k): as_json(y, where, depth + 1) for k, y in x.items()}
    raise DocumentError(f"{where}: not a JSON value ({_type(x)})")


def as_json_object(x: object, where: str) -> JsonObject:
    """A JSON object as such (an object of JSON values)."""
    if not isinstance(x, Mapping):
        raise DocumentError(f"{where}: expected an object, got {_type(x)}")
    return {str(k): as_json(y, f"{where}.{k}") for k, y in x.items()}


def to_json_object(d: Mapping[str, object], where: str) -> JsonObject:
    """A dataclass's dict (``asdict``: tuples, numpy numbers, paths) as the JSON object it
    is written as."""
    import orjson

    opts = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    return as_json_object(orjson.loads(orjson.dumps(d, option=opts, default=str)), where)


class Fields:
    """Typed access to one JSON object of a document; ``where`` names it in errors
    (``"stress.json"``, ``"stress.json: steps[2]"``)."""

    def __init__(self, doc: object, where: builtins.str) -> None:
        if not isinstance(doc, Mapping):
            raise DocumentError(f"{where}: expected an object, got {_type(doc)}")
        self.doc: Mapping[builtins.str, object] = doc
        self.where = where

    def at(self, key: builtins.str) -> builtins.str:
        sep = "." if ": " in self.where else ": "
        return f"{self.where}{sep}{key}"

    def has(self, key: builtins.str) -> builtins.bool:
        return self.doc.get(key) is not None

    def raw(self, key: builtins.str) -> object:
        return self.doc.get(key)

    def _get(self, key: builtins.str, default: object) -> object:
        x = self.doc.get(key, _MISSING)
        if x is _MISSING or (x is None and default is not _MISSING):
            if default is _MISSING:
                raise DocumentError(f"{self.at(key)}: missing")
            return default
        return x

    def str(self, key: builtins.str, default: object = _MISSING) -> builtins.str:
        x = self._get(key, default)
        if not isinstance(x, builtins.str):
            raise DocumentError(f"{self.at(key)}: expected a string, got {_show(x)}")
        return x

    def opt_str(self, key: builtins.str) -> builtins.str | None:
        x = self.doc.get(key)
        if x is not None and not isinstance(x, builtins.str):
            raise DocumentError(f"{self.at(key)}: expected a string, got {_show(x)}")
        return x

    def num(self, key: builtins.str) -> float | None:
        """An optional number (absent or null: None)."""
        return as_number(self.doc.get(key), self.at(key))

    def req_num(self, key: builtins.str) -> float:
        v = self.num(key)
        if v is None:
            raise DocumentError(f"{self.at(key)}: missing")
        return v

    def int(self, key: builtins.str, default: object = _MISSING) -> builtins.int:
        x = self._get(key, default)
        if isinstance(x, bool) or not isinstance(x, int):
            raise DocumentError(f"{self.at(key)}: expected an integer, got {_show(x)}")
        return x

    def opt_int(self, key: builtins.str) -> builtins.int | None:
        return None if self.doc.get(key) is None else self.int(key)

    def opt_count(self, key: builtins.str) -> builtins.int | None:
        """An optional whole number that counts something (not negative)."""
        v = self.opt_int(key)
        if v is not None and v < 0:
            raise DocumentError(f"{self.at(key)}: expected a whole number >= 0, got {v}")
        return v

    def opt_json_obj(self, key: builtins.str) -> JsonObject | None:
        """An optional object kept as JSON (shown, or checked by its own reader)."""
        x = self.doc.get(key)
        return None if x is None else as_json_object(x, self.at(key))

    def bool(self, key: builtins.str, default: object = _MISSING) -> builtins.bool:
        x = self._get(key, default)
        if not isinstance(x, bool):
            raise DocumentError(f"{self.at(key)}: expected true or false, got {_show(x)}")
        return x

    def opt_bool(self, key: builtins.str) -> builtins.bool | None:
        return None if self.doc.get(key) is None else self.bool(key)

    def obj(self, key: builtins.str) -> Fields:
        return Fields(self._get(key, _MISSING), self.at(key))

    def opt_obj(self, key: builtins.str) -> Fields | None:
        x = self.doc.get(key)
        return None if x is None else Fields(x, self.at(key))

    def list(self, key: builtins.str, default: object = _MISSING) -> Sequence[object]:
        x = self._get(key, default)
        if not isinstance(x, list):
            raise DocumentError(f"{self.at(key)}: expected a list, got {_type(x)}")
        return x

    def objects(self, key: builtins.str, default: object = _MISSING) -> Iterator[Fields]:
        """Each element of a list of objects, as Fields (``key[i]`` in errors)."""
        for i, x in enumerate(self.list(key, default)):
            yield Fields(x, f"{self.at(key)}[{i}]")

    def strs(self, key: builtins.str, default: object = _MISSING) -> builtins.list[builtins.str]:
        out = []
        for i, x in enumerate(self.list(key, default)):
            if not isinstance(x, builtins.str):
                raise DocumentError(f"{self.at(key)}[{i}]: expected a string, got {_show(x)}")
            out.append(x)
        return out

    def numbers(self, key: builtins.str) -> builtins.dict[builtins.str, float | None]:
        """An optional object of numbers (absent: empty)."""
        o = self.opt_obj(key)
        return {} if o is None else {k: o.num(k) for k in o.doc}

    def counts(self, key: builtins.str) -> builtins.dict[builtins.str, builtins.int]:
        """An optional object of integers (absent: empty), e.g. errors by kind."""
        o = self.opt_obj(key)
        return {} if o is None else {k: o.int(k) for k in o.doc}

    def json(self, key: builtins.str) -> Json:
        return as_json(self.doc.get(key), self.at(key))

    def json_obj(self, key: builtins.str) -> JsonObject:
        """An object kept as JSON (its own class checks it); absent: empty."""
        x = self.doc.get(key)
        return {} if x is None else as_json_object(x, self.at(key))

    def schema(
        self,
        current: builtins.str,
        older: Sequence[builtins.str] = (),
        absent: builtins.str | None = None,
    ) -> builtins.str:
        """The document's ``schema``: ``current`` or one of ``older`` (still read), else
        one line saying what this file is not. ``absent``: what a file without the field
        is (one written before it existed); without it, no schema is not this file."""
        s = self.doc.get("schema")
        if s is None and absent is not None:
            return absent
        if s == current or s in older:
            return str(s)
        name = current.rsplit("/", 1)[0]
        if isinstance(s, builtins.str) and s.startswith(name + "/"):
            known = ", ".join(dict.fromkeys((current, *older)))  # each once
            raise DocumentError(
                f"{self.where}: version {s!r} is not one this accelbench reads ({known}): "
                "a newer accelbench wrote it"
            )
        raise DocumentError(
            f"{self.where}: not an {current.split('/')[0]} file (schema {_show(s)})"
        )
