"""Total cost of ownership per GPU-hour, and the provisioned power per GPU.

Three ways to a $/GPU-hour figure, in order of precedence:

1. ``usd_per_gpu_hour`` given outright;
2. a build-up (any of ``capex_usd``, ``life_years``, ``cost_of_capital``,
   ``usd_per_kwh`` given, or ``mode: buildup``)::

       capex * CRF(rate, years) / 8760 / utilisation + it_kW * PUE * usd_per_kWh + other_opex

   with ``CRF(r, n) = r (1 + r)^n / ((1 + r)^n - 1)`` (``1 / n`` when ``r = 0``);
3. a published rate: a rate set (cost/data/tco_rates.yaml) and a tier (owned, rental).

The all-in provisioned kW per GPU (for tokens/s per MW and J per token) is the user's
``kw_per_gpu`` if given; else the rate set's kW (times PUE where the set gives IT kW);
in a build-up, ``it_kw_per_gpu * pue``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from accelbench.cost.catalog import Accelerator
from accelbench.errors import AccelbenchError

HOURS_PER_YEAR = 8760.0
BUILDUP_FIELDS = ("capex_usd", "life_years", "cost_of_capital", "usd_per_kwh")


@dataclass
class TcoInputs:
    """Every TCO input a user can set (None: not set, use the default)."""

    usd_per_gpu_hour: float | None = None
    rate_set: str | None = None
    tier: str | None = None
    kw_per_gpu: float | None = None
    mode: str | None = None
    capex_usd: float | None = None
    life_years: float | None = None
    cost_of_capital: float | None = None
    utilisation: float | None = None
    it_kw_per_gpu: float | None = None
    pue: float | None = None
    usd_per_kwh: float | None = None
    other_opex_usd_per_gpu_hour: float | None = None

    def merged(self, override: TcoInputs) -> TcoInputs:
        """These inputs with every field ``override`` sets replacing ours."""
        values = dataclasses.asdict(self)
        for key, value in dataclasses.asdict(override).items():
            if value is not None:
                values[key] = value
        return TcoInputs(**values)

    def validate(self) -> None:
        """Raise AccelbenchError naming the first impossible field."""
        for key in (
            "usd_per_gpu_hour",
            "kw_per_gpu",
            "capex_usd",
            "it_kw_per_gpu",
            "usd_per_kwh",
            "other_opex_usd_per_gpu_hour",
            "cost_of_capital",
        ):
            v = getattr(self, key)
            if v is not None and v < 0:
                raise AccelbenchError(f"{key} must not be negative (got {v:g})")
        if self.kw_per_gpu is not None and self.kw_per_gpu == 0:
            raise AccelbenchError("kw_per_gpu must be > 0 (got 0)")
        if self.life_years is not None and self.life_years <= 0:
            raise AccelbenchError(f"life_years must be > 0 (got {self.life_years:g})")
        if self.utilisation is not None and not 0 < self.utilisation <= 1:
            raise AccelbenchError(f"utilisation must be in (0, 1] (got {self.utilisation:g})")
        if self.pue is not None and self.pue < 1:
            raise AccelbenchError(f"pue must be >= 1 (got {self.pue:g})")
        if self.mode is not None and self.mode not in ("rate", "buildup"):
            raise AccelbenchError(f"mode must be 'rate' or 'buildup' (got {self.mode!r})")


@dataclass
class Tco:
    """The resolved $/GPU-hour and all-in kW per GPU, with how they were obtained."""

    usd_per_gpu_hour: float
    kw_per_gpu: float | None
    mode: str
    assumptions: list[str] = field(default_factory=list)
    breakdown: dict[str, float] = field(default_factory=dict)


def load_tco_file(path: str | Path) -> TcoInputs:
    """Read TCO inputs from a YAML (or JSON) file of TcoInputs field names."""
    p = Path(path).expanduser()
    try:
        data = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise AccelbenchError(f"cannot read TCO file {p}: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AccelbenchError(f"TCO file {p} must hold a mapping of field: value")
    known = {f.name for f in dataclasses.fields(TcoInputs)}
    unknown = set(data) - known
    if unknown:
        raise AccelbenchError(
            f"TCO file {p}: unknown field(s) {', '.join(sorted(unknown))} "
            f"(known: {', '.join(sorted(known))})"
        )
    for key, value in data.items():
        if key not in ("rate_set", "tier", "mode") and not isinstance(value, int | float):
            raise AccelbenchError(f"TCO file {p}: field {key} must be a number (got {value!r})")
    return TcoInputs(**data)


@lru_cache(maxsize=1)
def rate_data() -> dict[str, Any]:
    """The shipped TCO rate sets (cost/data/tco_rates.yaml)."""
    text = resources.files("accelbench.cost").joinpath("data/tco_rates.yaml").read_text()
    return yaml.safe_load(text)


def rate_set(name: str | None) -> tuple[str, dict[str, Any]]:
    """(name, data) of a rate set; the default when ``name`` is None."""
    data = rate_data()
    key = name or data["default"]
    sets = data["rate_sets"]
    if key not in sets:
        raise AccelbenchError(f"unknown rate set {key!r} (known: {', '.join(sets)})")
    return key, sets[key]


def crf(rate: float, years: float) -> float:
    """Capital recovery factor: the yearly payment that repays 1 over ``years`` at ``rate``."""
    if years <= 0:
        raise AccelbenchError(f"life_years must be > 0 (got {years:g})")
    if rate == 0:
        return 1.0 / years
    g = (1.0 + rate) ** years
    return rate * g / (g - 1.0)


def _default_pue(rs: dict[str, Any], entry: dict[str, Any]) -> float:
    pues = rs.get("pue") or {}
    return float(pues.get(entry.get("cooling", "air"), 1.0))


def resolve_tco(acc: Accelerator, inputs: TcoInputs | None = None) -> Tco:
    """Resolve the $/GPU-hour and all-in kW per GPU for ``acc`` from ``inputs``."""
    inp = inputs or TcoInputs()
    inp.validate()
    assumptions: list[str] = []
    set_name, rs = rate_set(inp.rate_set)
    entry: dict[str, Any] = dict(rs["rates"].get(acc.id, {}))
    src_title = " ".join(
        str(rate_data()["sources"].get(rs.get("source", ""), {}).get("title", "")).split()
    )

    # all-in kW per GPU from the rate set (may be overridden below)
    kw_all_in: float | None = None
    kw_note = ""
    if inp.kw_per_gpu is not None:
        kw_all_in = inp.kw_per_gpu
        kw_note = f"{kw_all_in:g} kW per GPU all-in (given)"
    elif "kw" in entry:
        if rs.get("kw_basis") == "it":
            pue = inp.pue if inp.pue is not None else _default_pue(rs, entry)
            kw_all_in = float(entry["kw"]) * pue
            kw_note = (
                f"{kw_all_in:.3g} kW per GPU all-in = {entry['kw']:g} kW IT ({set_name}) "
                f"x PUE {pue:g}"
            )
        else:
            kw_all_in = float(entry["kw"])
            kw_note = f"{kw_all_in:g} kW per GPU all-in ({set_name}, includes facility overhead)"

    buildup = inp.mode == "buildup" or (
        inp.mode is None
        and inp.usd_per_gpu_hour is None
        and any(getattr(inp, k) is not None for k in BUILDUP_FIELDS)
    )
    if inp.usd_per_gpu_hour is not None and inp.mode != "buildup":
        assumptions.append(f"TCO ${inp.usd_per_gpu_hour:g}/GPU-hour (given)")
        if kw_note:
            assumptions.append(kw_note)
        return Tco(inp.usd_per_gpu_hour, kw_all_in, "given", assumptions)

    if buildup:
        return _buildup(acc, inp, entry, rs, set_name)

    tier = inp.tier or rate_data()["default_tier"]
    tiers = rs.get("tiers", {})
    if tier not in tiers:
        raise AccelbenchError(f"unknown tier {tier!r} for {set_name} (known: {', '.join(tiers)})")
    if tier not in entry:
        raise AccelbenchError(
            f"rate set {set_name} has no {tier} rate for {acc.id} (has: "
            f"{', '.join(sorted(rs['rates']))}); give --usd-per-gpu-hour or a build-up "
            "(--capex, --life-years, --cost-of-capital, --usd-per-kwh)"
        )
    usd = float(entry[tier])
    valid = (
        f"{rs.get('valid_from', '?')} to {rs['valid_to']}"
        if rs.get("valid_to")
        else f"from {rs.get('valid_from', '?')}"
    )
    assumptions.append(
        f"TCO ${usd:g}/GPU-hour: {set_name} {tier} tier ({tiers[tier]}), valid {valid}; "
        f"source: {src_title}"
    )
    if entry.get("note"):
        assumptions.append(f"{acc.id} rate note: {entry['note']}")
    if kw_note:
        assumptions.append(kw_note)
    return Tco(usd, kw_all_in, "rate", assumptions, {"rate_usd_per_gpu_hour": usd})


def _buildup(
    acc: Accelerator, inp: TcoInputs, entry: dict[str, Any], rs: dict[str, Any], set_name: str
) -> Tco:
    assumptions: list[str] = []
    capex = inp.capex_usd
    if capex is None:
        price = acc.figure("price_usd")
        if price.value is None:
            raise AccelbenchError(
                f"build-up TCO needs capex_usd: the catalog has no price for {acc.id}"
            )
        capex = float(price.value)
        assumptions.append(
            f"capex ${capex:,.0f} per GPU: catalog price [{price.status}] "
            f"({acc.source_title('price_usd')}, {price.date})"
        )
    else:
        assumptions.append(f"capex ${capex:,.0f} per GPU (given)")
    missing = [
        k for k in ("life_years", "cost_of_capital", "usd_per_kwh") if getattr(inp, k) is None
    ]
    if missing:
        raise AccelbenchError(f"build-up TCO needs {', '.join(missing)} (no sourced default)")
    life = float(inp.life_years)  # type: ignore[arg-type]
    rate = float(inp.cost_of_capital)  # type: ignore[arg-type]
    price_kwh = float(inp.usd_per_kwh)  # type: ignore[arg-type]
    util = inp.utilisation if inp.utilisation is not None else 1.0
    other = inp.other_opex_usd_per_gpu_hour or 0.0

    it_kw = inp.it_kw_per_gpu
    pue = inp.pue
    if it_kw is None and inp.kw_per_gpu is not None:
        pue = pue if pue is not None else 1.0
        it_kw = inp.kw_per_gpu / pue
        assumptions.append(
            f"IT kW per GPU {it_kw:.3g} = given all-in {inp.kw_per_gpu:g} / PUE {pue:g}"
        )
    if it_kw is None:
        _, it_set = rate_set("inferencex-2026-07")
        it_entry = it_set["rates"].get(acc.id)
        if it_entry is not None:
            it_kw = float(it_entry["kw"])
            pue = pue if pue is not None else _default_pue(it_set, it_entry)
            assumptions.append(f"IT kW per GPU {it_kw:g} (inferencex-2026-07)")
        else:
            tdp = acc.figure("tdp_w").value
            if tdp is None:
                raise AccelbenchError(
                    f"build-up TCO needs it_kw_per_gpu: no power figure for {acc.id}"
                )
            it_kw = tdp / 1000.0
            assumptions.append(f"IT kW per GPU {it_kw:g} = catalog TDP only (no server share)")
    else:
        assumptions.append(f"IT kW per GPU {it_kw:g} (given)")
    pue = pue if pue is not None else 1.0
    capital = capex * crf(rate, life) / HOURS_PER_YEAR / util
    energy = it_kw * pue * price_kwh
    total = capital + energy + other
    assumptions.append(
        f"TCO ${total:.4g}/GPU-hour = capital ${capital:.4g} (CRF {rate:g}, {life:g} y, "
        f"utilisation {util:g}) + energy ${energy:.4g} ({it_kw:g} kW x PUE {pue:g} x "
        f"${price_kwh:g}/kWh) + other ${other:g}"
    )
    kw_all_in = inp.kw_per_gpu if inp.kw_per_gpu is not None else it_kw * pue
    assumptions.append(f"{kw_all_in:.3g} kW per GPU all-in")
    return Tco(
        total,
        kw_all_in,
        "buildup",
        assumptions,
        {"capital": capital, "energy": energy, "other": other},
    )
