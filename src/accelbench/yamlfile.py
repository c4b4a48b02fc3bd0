"""YAML as accelbench reads it: PyYAML's safe loader, except that a key given twice in
one mapping is an error (PyYAML keeps the last one without a word, so a TCO file or a
catalog with ``usd_per_gpu_hour`` twice silently used the second)."""

from __future__ import annotations

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


def load_yaml(text: str) -> Any:
    """The document in ``text``, as :func:`yaml.safe_load` reads it, but a key given
    twice in a mapping raises :class:`DuplicateKeyError` (a :class:`yaml.YAMLError`)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
