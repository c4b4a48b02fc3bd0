"""The accelerator catalog: shipped data (hardware/data/accelerators.yaml) plus user files.

User catalogs (same YAML format) are read, in order, from the paths in the
``ACCELBENCH_CATALOG`` environment variable (separated by ``os.pathsep``),
``~/.config/accelbench/accelerators.yaml`` if it exists, and any ``--catalog FILE``
given on the command line. A user entry with the id of a shipped one replaces it.
"""

from __future__ import annotations

import contextlib
import datetime
import difflib
import math
import os
import platform
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from accelbench.errors import AccelbenchError
from accelbench.yamlfile import dump_yaml, load_yaml

# Figure key -> label with its unit. Memory is in GiB (2^30 bytes): vendor HBM "GB" are
# binary. Bandwidths and FLOPS are decimal (1e12 bytes/s, 1e12 FLOP/s, 1e9 bytes/s).
FIGURES: dict[str, str] = {
    "memory_gib": "HBM / memory capacity (GiB)",
    "memory_bw_tbs": "memory bandwidth (TB/s)",
    "bf16_tflops": "dense BF16 TFLOPS",
    "fp8_tflops": "dense FP8 TFLOPS",
    "fp4_tflops": "dense FP4 TFLOPS",
    "tdp_w": "TDP (W)",
    "scale_up_gbs_unidir": "scale-up bandwidth per GPU, one direction (GB/s)",
    "scale_up_size": "GPUs per scale-up domain",
    "price_usd": "price per GPU (USD)",
    "gemm_fraction": "GEMM share of peak FLOPS (expected ceiling)",
    "hbm_fraction": "share of peak bandwidth reached (expected ceiling)",
}
# The largest value each figure may take (the smallest is 0): generous physical limits,
# so that a typo (`memory_gib: 1e308`, a price in cents written as 4e12) is refused with
# the figure's name rather than carried into every plan and cost as a real part.
FIGURE_MAX: dict[str, float] = {
    "memory_gib": float(1 << 20),  # 1 PiB per GPU
    "memory_bw_tbs": 1e3,  # 1 PB/s
    "bf16_tflops": 1e6,  # 1 EFLOPS per GPU
    "fp8_tflops": 1e6,
    "fp4_tflops": 1e6,
    "tdp_w": 1e6,  # 1 MW
    "scale_up_gbs_unidir": 1e6,  # 1 PB/s
    "scale_up_size": 1e6,  # GPUs
    "price_usd": 1e9,
    "gemm_fraction": 1.0,  # shares of a peak
    "hbm_fraction": 1.0,
}
# The smallest value the figures a plan divides by may take: a bandwidth, a FLOPS rate,
# a capacity or a share of a peak of 5e-324 was read, and a plan's step time overflowed
# to Infinity in its JSON (a fraction of 0 stopped it with ZeroDivisionError, exit 70).
# A FLOPS figure may be 0, read as "no such rate" (as n/a); the others may not.
FIGURE_MIN: dict[str, float] = {
    "memory_gib": 1 / 1024,  # 1 MiB per GPU
    "memory_bw_tbs": 1e-6,  # 1 MB/s
    "bf16_tflops": 1e-6,  # 1 MFLOP/s
    "fp8_tflops": 1e-6,
    "fp4_tflops": 1e-6,
    "gemm_fraction": 1e-3,  # 0.1 % of a peak (also --eff-flops / --eff-bw)
    "hbm_fraction": 1e-3,
}
ZERO_IS_NONE = ("bf16_tflops", "fp8_tflops", "fp4_tflops")
GIB = 1 << 30
STATUSES = ("confirmed", "estimate", "conflict", "unconfirmed")
USER_CATALOG = Path("~/.config/accelbench/accelerators.yaml")


@dataclass(frozen=True)
class Figure:
    """One sourced number: a value (or None where unknown), an optional range, its
    source and date, and whether the source confirms it."""

    value: float | None
    source: str
    date: str
    status: str = "confirmed"
    min: float | None = None
    max: float | None = None
    note: str = ""

    @property
    def known(self) -> bool:
        """True when the figure has a value."""
        return self.value is not None

    @property
    def upper(self) -> float | None:
        """Upper end of the range (the value where there is no range)."""
        return self.max if self.max is not None else self.value

    @property
    def lower(self) -> float | None:
        """Lower end of the range (the value where there is no range)."""
        return self.min if self.min is not None else self.value

    def text(self) -> str:
        """The value as printed: '180 (180-192, conflict)', '~2300 (estimate)', 'n/a'."""
        if self.value is None:
            return "n/a" + (" (unconfirmed)" if self.status == "unconfirmed" else "")
        s = f"{self.value:g}"
        if self.min is not None and self.max is not None and self.min != self.max:
            s += f" ({self.min:g}-{self.max:g})"
        if self.status != "confirmed":
            s += f" [{self.status}]"
        return s


@dataclass(frozen=True)
class Accelerator:
    """One catalog entry: identity, descriptive text and sourced figures."""

    id: str
    name: str
    vendor: str
    kind: str
    arch: str
    memory_type: str
    scale_up: str
    aliases: tuple[str, ...]
    figures: dict[str, Figure]
    origin: str = "shipped"
    sources: dict[str, str] = field(default_factory=dict, compare=False)  # key -> title

    def figure(self, key: str) -> Figure:
        """The figure ``key`` (an unknown placeholder if the entry lacks it)."""
        if key in self.figures:
            return self.figures[key]
        return Figure(None, source="", date="", status="unconfirmed", note="not in catalog")

    def require(self, key: str, bound: str = "value") -> float:
        """A figure's value (``bound``: value, upper or lower), or an error naming it."""
        fig = self.figure(key)
        v = getattr(fig, bound)
        if v is None:
            raise AccelbenchError(
                f"accelerator {self.id} has no {key} ({FIGURES.get(key, key)}); set it in a "
                "user catalog file (see `accelbench catalog template`)"
            )
        return float(v)

    def memory_bytes(self, bound: str = "lower") -> float:
        """Memory capacity per GPU in bytes (``memory_gib`` x 2^30); the lower end of a
        range by default, so that a fit is never overstated."""
        return self.require("memory_gib", bound) * GIB

    def peak_tflops(self, fmt: str) -> float | None:
        """Peak dense TFLOPS for compute format ``fmt`` (bf16, fp8, fp4); upper of a range."""
        return self.figure(f"{fmt}_tflops").upper

    def source_title(self, key: str) -> str:
        """Human-readable title of the figure's source."""
        src = self.figure(key).source
        return self.sources.get(src, src).strip()


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AccelbenchError(f"{where} must be a number (got {value!r})")
    if not math.isfinite(value) or value < 0:
        raise AccelbenchError(f"{where} must be a finite number >= 0 (got {value})")
    return float(value)


def _text(value: Any, where: str, default: str = "") -> str:
    """A catalog's descriptive field as text: a string, a number or a YAML date (an
    unquoted 2026-11-29) is written as it reads; a list, a mapping or a boolean is
    refused (`name: [1, 2]` was shown as "[1, 2]", `aliases: [null]` matched "none")."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, str | int | float | datetime.date):
        raise AccelbenchError(f"{where} must be text (got {value!r})")
    return str(value)


SCHEMA = "accelbench.accelerators/1"

# the keys each level of a catalog holds: any other is refused, never dropped (a figure
# written beside `figures:` instead of under it was ignored without a word)
CATALOG_KEYS = ("schema", "sources", "accelerators")
ENTRY_KEYS = ("name", "vendor", "kind", "arch", "memory_type", "scale_up", "aliases",
              "defaults", "figures")  # fmt: skip
FIGURE_KEYS = ("value", "min", "max", "source", "date", "status", "note")
DEFAULT_KEYS = ("source", "date", "status")
SOURCE_KEYS = ("title", "date")


def _refuse_unknown_keys(where: str, raw: dict[Any, Any], known: Sequence[str]) -> None:
    """One line naming the keys of ``raw`` that are not ``known`` (and where a figure's
    name belongs), so that nothing a user wrote is silently left out."""
    unknown = sorted(str(k) for k in raw if k not in known)
    if not unknown:
        return
    hint = ""
    if known is ENTRY_KEYS and unknown[0] in FIGURES:
        hint = f"; {unknown[0]} is a figure: put it under 'figures:'"
    raise AccelbenchError(
        f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(known)}){hint}"
    )


def _parse_entry(aid: str, raw: object, sources: dict[str, str], origin: str) -> Accelerator:
    where = f"{origin}: accelerator {aid!r}"
    if not isinstance(raw, dict):
        raise AccelbenchError(f"{where}: entry must be a mapping")
    _refuse_unknown_keys(where, raw, ENTRY_KEYS)
    defaults = raw.get("defaults") or {}
    figures = raw.get("figures") or {}
    aliases = raw.get("aliases") or []
    for name, val, typ in (("defaults", defaults, dict), ("figures", figures, dict)):
        if not isinstance(val, typ):
            raise AccelbenchError(f"{where}: '{name}' must be a mapping")
    _refuse_unknown_keys(f"{where} defaults", defaults, DEFAULT_KEYS)
    if not isinstance(aliases, list):
        raise AccelbenchError(f"{where}: 'aliases' must be a list")
    figs: dict[str, Figure] = {}
    for key, fraw in figures.items():
        if key not in FIGURES:
            close = [k for k in FIGURES if k.startswith(key)] or difflib.get_close_matches(
                key, list(FIGURES), n=1
            )
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise AccelbenchError(f"{where}: unknown figure {key!r}{hint}")
        if not isinstance(fraw, dict):
            fraw = {"value": fraw}
        fwhere = f"{where} figure {key}"
        _refuse_unknown_keys(fwhere, fraw, FIGURE_KEYS)
        value = _number(fraw.get("value"), f"{fwhere} value")
        lo = _number(fraw.get("min"), f"{fwhere} min")
        hi = _number(fraw.get("max"), f"{fwhere} max")
        for part, v in (("value", value), ("min", lo), ("max", hi)):
            if v is not None and v > FIGURE_MAX[key]:
                raise AccelbenchError(
                    f"{fwhere} {part} must be in 0..{FIGURE_MAX[key]:,.0f} "
                    f"({FIGURES[key]}; got {v:g})"
                )
            floor = FIGURE_MIN.get(key)
            if v is not None and floor is not None and v < floor:
                if not (v == 0 and key in ZERO_IS_NONE):
                    zero = ", or 0 for none" if key in ZERO_IS_NONE else ""
                    raise AccelbenchError(
                        f"{fwhere} {part} must be at least {floor:g}{zero} "
                        f"({FIGURES[key]}; got {v:g})"
                    )
        if lo is not None and hi is not None and lo > hi:
            raise AccelbenchError(f"{fwhere}: min {lo:g} > max {hi:g}")
        if value is not None and not ((lo is None or lo <= value) and (hi is None or value <= hi)):
            # the value outside its own range: which end a plan or a cost reads was
            # arbitrary (memory_bytes the min, peak TFLOPS the max, the table the value)
            ends = ", ".join(f"{n} {v:g}" for n, v in (("min", lo), ("max", hi)) if v is not None)
            raise AccelbenchError(f"{fwhere} value {value:g} is outside its own range ({ends})")
        source = _text(fraw.get("source", defaults.get("source")), f"{fwhere} source")
        date = _text(fraw.get("date", defaults.get("date")), f"{fwhere} date")
        status = _text(
            fraw.get("status", defaults.get("status")), f"{fwhere} status", "unconfirmed"
        )
        if status not in STATUSES:
            raise AccelbenchError(f"{fwhere}: status must be one of {', '.join(STATUSES)}")
        if value is not None and not source:
            raise AccelbenchError(f"{fwhere}: a figure needs a 'source'")
        note = _text(fraw.get("note"), f"{fwhere} note")
        figs[key] = Figure(value, source, date, status, lo, hi, note)
    given = {"name": aid, "kind": "gpu"}  # the defaults of a field left out
    texts = {k: _text(raw.get(k), f"{where} {k}", given.get(k, "")) for k in ENTRY_KEYS[:6]}
    names = [_text(a, f"{where} alias") for a in aliases]
    if not all(_norm(a) for a in names):
        raise AccelbenchError(f"{where}: an alias must hold a letter or digit (got {aliases!r})")
    return Accelerator(
        id=aid,
        name=texts["name"],
        vendor=texts["vendor"],
        kind=texts["kind"],
        arch=texts["arch"],
        memory_type=texts["memory_type"],
        scale_up=texts["scale_up"],
        aliases=tuple(names),
        figures=figs,
        origin=origin,
        sources=sources,
    )


def parse_catalog(data: Any, origin: str) -> dict[str, Accelerator]:
    """Parse one catalog document (already loaded YAML) into id -> Accelerator."""
    if not isinstance(data, dict) or not isinstance(data.get("accelerators"), dict):
        raise AccelbenchError(f"{origin}: a catalog needs an 'accelerators:' mapping")
    _refuse_unknown_keys(origin, data, CATALOG_KEYS)
    schema = data.get("schema", SCHEMA)  # optional; another version is not this format
    if schema != SCHEMA:
        raise AccelbenchError(f"{origin}: schema {schema!r} is not {SCHEMA!r}")
    raw_sources = data.get("sources") or {}
    if not isinstance(raw_sources, dict):
        raise AccelbenchError(f"{origin}: 'sources' must be a mapping")
    sources = {}  # key -> title (a source is {title: ..., date: ...}, or just its title)
    for key, src in raw_sources.items():
        if isinstance(src, dict):
            _refuse_unknown_keys(f"{origin}: source {key!r}", src, SOURCE_KEYS)
            _text(src.get("date"), f"{origin}: source {key!r} date")
        title = src.get("title", key) if isinstance(src, dict) else src
        sources[str(key)] = " ".join(_text(title, f"{origin}: source {key!r} title").split())
    for aid in data["accelerators"]:
        if isinstance(aid, bool) or not isinstance(aid, str | int) or not _norm(str(aid)):
            raise AccelbenchError(f"{origin}: accelerator id {aid!r} must hold a letter or digit")
    return {
        str(aid).lower(): _parse_entry(str(aid).lower(), raw, sources, origin)
        for aid, raw in data["accelerators"].items()
    }


def shipped_catalog() -> dict[str, Accelerator]:
    """The catalog shipped in the package."""
    text = resources.files("accelbench.hardware").joinpath("data/accelerators.yaml").read_text()
    return parse_catalog(load_yaml(text), "shipped")


def user_catalog_paths(extra: Sequence[str | Path] | None = None) -> list[tuple[Path, str]]:
    """User catalog files in the order they are applied, each with where it was named
    (``ACCELBENCH_CATALOG``, the default file, ``--catalog``)."""
    paths: list[tuple[Path, str]] = []
    env = os.environ.get("ACCELBENCH_CATALOG", "")
    paths += [(Path(p).expanduser(), "ACCELBENCH_CATALOG") for p in env.split(os.pathsep) if p]
    default = USER_CATALOG.expanduser()
    if default.is_file():
        paths.append((default, "the user catalog"))
    paths += [(Path(p).expanduser(), "--catalog") for p in extra or []]
    return paths


def load_catalog(extra: Sequence[str | Path] | None = None) -> dict[str, Accelerator]:
    """Shipped catalog overlaid with every user catalog file (later files win)."""
    cat = shipped_catalog()
    for path, named in user_catalog_paths(extra):
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "does not exist"
            raise AccelbenchError(
                f"catalog file not found: {named} names {path}, which {what} (give YAML "
                f"files{', separated by ' + repr(os.pathsep) if named.startswith('ACC') else ''})"
            )
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise AccelbenchError(f"cannot read catalog {path}: {exc}") from None
        cat.update(parse_catalog(data, str(path)))
    _refuse_shared_names(cat)
    return cat


def _refuse_shared_names(cat: dict[str, Accelerator]) -> None:
    """One line where an id or alias of one entry is the id or alias of another: the
    name then chose whichever came first (a user entry's alias `h100` silently lost to
    the shipped H100, and `plan -a h100` planned the shipped part)."""
    owner: dict[str, Accelerator] = {}
    for acc in cat.values():
        for name in dict.fromkeys([acc.id, *acc.aliases]):
            other = owner.setdefault(_norm(name), acc)
            if other is not acc:
                raise AccelbenchError(
                    f"{acc.origin}: accelerator {acc.id!r}: {name!r} already names "
                    f"{other.id!r} ({other.origin}); give each id and alias to one entry"
                )


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def find_accelerator(name: str, catalog: dict[str, Accelerator] | None = None) -> Accelerator:
    """An accelerator by id, alias or display name (case and punctuation ignored).

    Unknown names raise AccelbenchError listing the closest ids."""
    cat = catalog if catalog is not None else load_catalog()
    key = _norm(name)
    for acc in cat.values():
        if key in {_norm(acc.id), _norm(acc.name), *(_norm(a) for a in acc.aliases)}:
            return acc
    close = difflib.get_close_matches(name.lower(), list(cat), n=3, cutoff=0.5)
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    raise AccelbenchError(f"unknown accelerator {name!r}{hint} (known: {', '.join(sorted(cat))})")


def host_template(accel_id: str = "cpu-host") -> str:
    """A user-catalog YAML entry for this CPU host: what can be read from the machine
    (CPU model, core count, memory size) is filled in and marked confirmed; bandwidth
    and FLOPS cannot be read, so they are left null and marked unconfirmed."""
    import psutil

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    cores = psutil.cpu_count(logical=False) or psutil.cpu_count() or 0
    mem_gib = round(psutil.virtual_memory().total / GIB, 1)
    today = __import__("datetime").date.today().isoformat()
    doc = {
        "schema": "accelbench.accelerators/1",
        "sources": {
            "this-host": {"title": f"read from this machine ({platform.node()})", "date": today},
            "to-measure": {
                "title": "not measurable from software metadata: measure (e.g. STREAM for "
                "bandwidth, a GEMM benchmark for FLOPS) and fill in",
                "date": today,
            },
        },
        "accelerators": {
            accel_id: {
                "name": f"{cpu} ({cores} cores)",
                "vendor": "cpu",
                "kind": "cpu",
                "arch": platform.machine(),
                "memory_type": "DRAM",
                "scale_up": "none",
                "figures": {
                    "memory_gib": {
                        "value": mem_gib,
                        "source": "this-host",
                        "date": today,
                        "status": "confirmed",
                    },
                    **{
                        k: {
                            "value": None,
                            "source": "to-measure",
                            "date": today,
                            "status": "unconfirmed",
                        }
                        for k in ("memory_bw_tbs", "bf16_tflops", "fp8_tflops", "tdp_w")
                    },
                    "scale_up_size": {
                        "value": 1,
                        "source": "this-host",
                        "date": today,
                        "status": "confirmed",
                    },
                },
            }
        },
    }
    try:  # the reader's own checks: a template it would refuse is not printed
        _refuse_shared_names({**shipped_catalog(), **parse_catalog(doc, "template")})
    except AccelbenchError as exc:
        raise AccelbenchError(f"--id {accel_id!r}: {exc}") from None
    header = (
        "# accelbench user catalog entry for this host. Fill in the null figures, then\n"
        "# save as ~/.config/accelbench/accelerators.yaml or pass --catalog FILE.\n"
    )
    return header + dump_yaml(doc, sort_keys=False)
