"""The shipped model catalog (plan/data/models.yaml) and model lookup by name or path."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from accelbench.errors import AccelbenchError
from accelbench.plan.architecture import ModelArch, arch_from_config, load_config_file
from accelbench.yamlfile import load_yaml


class Published(TypedDict, total=False):
    """What a model's authors state, for the tests (plan/data/models.yaml)."""

    total_b: float  # parameters, billions
    active_b: float  # active per token (MoE), billions
    active_includes_embedding: bool
    note: str


def _published(raw: Any, where: str) -> Published:
    if not isinstance(raw, dict):
        raise AccelbenchError(f"models.yaml: {where}: 'published' must be a mapping")
    out = Published()
    for key in ("total_b", "active_b"):
        if key in raw:
            out[key] = float(raw[key])
    if "active_includes_embedding" in raw:
        out["active_includes_embedding"] = bool(raw["active_includes_embedding"])
    if "note" in raw:
        out["note"] = str(raw["note"])
    return out


@dataclass(frozen=True)
class ModelEntry:
    """One catalog model: its id, architecture, source and published totals."""

    id: str
    name: str
    aliases: tuple[str, ...]
    arch: ModelArch
    source: dict[str, str]  # config (URL), checked (how), note
    published: Published


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.lower())


@lru_cache(maxsize=1)
def model_catalog() -> dict[str, ModelEntry]:
    """Load plan/data/models.yaml (cached): model id -> ModelEntry."""
    text = resources.files("accelbench.plan").joinpath("data/models.yaml").read_text()
    data = load_yaml(text)
    out: dict[str, ModelEntry] = {}
    for mid, raw in data["models"].items():
        arch = arch_from_config(raw["config"], name=raw.get("name", mid), source=raw["source"])
        out[mid] = ModelEntry(
            id=mid,
            name=raw.get("name", mid),
            aliases=tuple(raw.get("aliases", [])),
            arch=arch,
            source={str(k): str(v) for k, v in raw["source"].items()},
            published=_published(raw.get("published", {}), mid),
        )
    return out


def _lookup_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for mid, entry in model_catalog().items():
        for key in (mid, entry.name, *entry.aliases):
            table[_norm(key)] = mid
            table[_norm(key.split("/")[-1])] = mid
    return table


def find_model(name: str) -> ModelEntry:
    """A catalog model by id, display name or Hugging Face repo id (case-insensitive).

    Unknown names raise AccelbenchError with the closest names."""
    table = _lookup_table()
    key = _norm(name)
    for candidate in (key, _norm(name.split("/")[-1])):
        if candidate in table:
            return model_catalog()[table[candidate]]
    # "-instruct" variants of catalog models
    stripped = re.sub(r"(instruct|chat|hf)$", "", _norm(name.split("/")[-1]))
    if stripped in table:
        return model_catalog()[table[stripped]]
    ids = list(model_catalog())
    close = difflib.get_close_matches(name.lower(), ids, n=3, cutoff=0.5)
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    raise AccelbenchError(
        f"unknown model {name!r}{hint} (known: {', '.join(ids)}; or give a config.json path)"
    )


def resolve_model(name_or_path: str) -> ModelArch:
    """A ModelArch from a catalog name, a config.json file, or a directory holding one."""
    p = Path(name_or_path).expanduser()
    if p.suffix == ".json" or p.is_dir() or p.is_file():
        if p.exists():
            return load_config_file(p)
        if p.suffix == ".json":
            raise AccelbenchError(f"no such file: {p}")
    return find_model(name_or_path).arch
