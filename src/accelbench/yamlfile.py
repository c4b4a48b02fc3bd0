"""YAML as accelbench reads it: PyYAML's safe loader, except that a key given twice in
one mapping is an error (PyYAML keeps the last one without a word, so a TCO file or a
catalog with ``usd_per_gpu_hour`` twice silently used the second), and a number in
YAML 1.2's float forms is a float (PyYAML follows YAML 1.1, whose floats need a dot and
a signed exponent: ``1e10``, ``1.0e10``, ``1e-300``, ``-.5`` and Python's own ``repr``
of ``1e+16`` were strings, refused as "must be a number (got '1.0e10')")."""

from __future__ import annotations

import re
import sys
from typing import Any

import yaml

_MERGE = "tag:yaml.org,2002:merge"


class DuplicateKeyError(yaml.YAMLError):
    """A key given twice in one mapping; the message names it and both lines."""


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:  # `<<: *base`: its keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # unhashable: the safe loader's own error says so
                continue
            if first is not None:
                raise DuplicateKeyError(
                    f"line {line}: key {key!r} given twice (first on line {first})"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


class NumberRangeError(yaml.YAMLError):
    """An integer past the float range; the message names its line."""


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """The safe loader's integer, refused past the float range (1.8e308): every reader
    compares numbers as floats, and `value: 1000...0` (400 digits) stopped a catalog or a
    TCO file with OverflowError, exit 70."""
    value: int = yaml.SafeLoader.construct_yaml_int(loader, node)
    if abs(value) > _FLOAT_MAX:
        raise NumberRangeError(
            f"line {node.start_mark.line + 1}: the integer {node.value[:20]}... "
            f"({len(node.value)} characters) is past the float range (about 1.8e308)"
        )
    return value


_FLOAT_MAX = int(sys.float_info.max)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)

# YAML 1.2 (core schema) floats that YAML 1.1 leaves as strings: a dot or an exponent
# (whose sign is optional), no underscores. Plain integers keep the int resolver, and
# `.inf`/`.nan` keep theirs (each reader refuses them where it refuses NaN and infinity).
# safe_load's float constructor reads these forms as Python's float() does.
_FLOAT_12 = re.compile(
    r"""^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9]+[eE][-+]?[0-9]+)$""",
    re.VERBOSE,
)
_FIRST = list("-+.0123456789")
_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, _FIRST)


class _Dumper(yaml.SafeDumper):
    """safe_dump's writer, which quotes a string that :func:`load_yaml` would read as a
    float (safe_dump wrote the text '1e5' bare, to be read back as 100000.0)."""


_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, _FIRST)


def load_yaml(text: str) -> Any:
    """The document in ``text``, as :func:`yaml.safe_load` reads it, but a key given
    twice in a mapping raises :class:`DuplicateKeyError` (a :class:`yaml.YAMLError`), and
    YAML 1.2's float forms (``1e10``, ``1.0e10``, ``-1E-3``, ``.5e3``) are floats."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def dump_yaml(data: Any, **options: Any) -> str:
    """``data`` as :func:`yaml.safe_dump` writes it (``options`` passed on), with every
    string that :func:`load_yaml` would read as a number quoted: it reads back as ``data``."""
    text: str = yaml.dump(data, Dumper=_Dumper, **options)
    return text
