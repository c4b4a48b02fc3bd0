"""Total cost of ownership per GPU-hour, and the provisioned power per GPU.

Three ways to a $/GPU-hour figure, in order of precedence:

1. ``usd_per_gpu_hour`` given outright;
2. a build-up (any of ``capex_usd``, ``life_years``, ``cost_of_capital``,
   ``usd_per_kwh`` given, or ``mode: buildup``)::

       capex * CRF(rate, years) / 8760 / utilisation + kW * PUE * usd_per_kWh + other_opex

   with ``CRF(r, n) = r (1 + r)^n / ((1 + r)^n - 1)`` (``1 / n`` when ``r = 0``);
3. a published rate: a rate set (cost/data/tco_rates.yaml) and a tier (owned, rental).

Power follows the source's definition: a rate set's kW is InferenceX's "all-in kW per GPU
(chip + host/NIC share)" and is used as is (FACTS.md, "Power convention"). PUE is a named
option only: given, it multiplies that kW (InferenceX's utility-modelled view) and the
assumptions say so. The user's ``kw_per_gpu`` replaces the rate set's kW.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from accelbench.errors import AccelbenchError, UsageError
from accelbench.hardware.catalog import Accelerator
from accelbench.yamlfile import load_yaml

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
        """Raise AccelbenchError naming the first impossible field, its option and range."""
        for key, (lo, lo_open, hi) in LIMITS.items():
            v = getattr(self, key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise AccelbenchError(f"{_name(key)} must be a number (got {v!r})")
            ok = math.isfinite(v) and (v > lo if lo_open else v >= lo) and v <= hi
            if not ok:
                rng = f"({lo:g}, {hi:g}]" if lo_open else f"[{lo:g}, {hi:g}]"
                raise AccelbenchError(f"{_name(key)} must be in {rng} (got {v!r})")
        if self.mode is not None and self.mode not in ("rate", "buildup"):
            raise AccelbenchError(f"mode must be 'rate' or 'buildup' (got {self.mode!r})")


# Accepted ranges (low, low end open?, high): what a real deployment could need and no more.
LIMITS: dict[str, tuple[float, bool, float]] = {
    "usd_per_gpu_hour": (0.0, False, 1000.0),
    # 1 W: below it no accelerator runs, and the energy figures fall to nothing
    "kw_per_gpu": (0.001, False, 100.0),
    "capex_usd": (0.0, False, 1e8),
    # about five weeks: a shorter life repays capex at absurd rates ($3.6e12/GPU-hour at 1e-12)
    "life_years": (0.1, False, 50.0),
    "cost_of_capital": (0.0, False, 1.0),
    # 1 %: capital is divided by it, so anything below is a figure no fleet pays
    "utilisation": (0.01, False, 1.0),
    "it_kw_per_gpu": (0.001, False, 100.0),
    "pue": (1.0, False, 3.0),
    "usd_per_kwh": (0.0, False, 100.0),
    "other_opex_usd_per_gpu_hour": (0.0, False, 1000.0),
}
# The command-line option of each field (``mode`` has none: it is a file's), named in errors.
OPTIONS = {
    "rate_set": "--rates",
    "tier": "--tier",
    "usd_per_gpu_hour": "--usd-per-gpu-hour",
    "kw_per_gpu": "--kw-per-gpu",
    "capex_usd": "--capex",
    "life_years": "--life-years",
    "cost_of_capital": "--cost-of-capital",
    "utilisation": "--utilisation",
    "it_kw_per_gpu": "--it-kw-per-gpu",
    "pue": "--pue",
    "usd_per_kwh": "--usd-per-kwh",
    "other_opex_usd_per_gpu_hour": "--other-opex",
}


def _name(key: str) -> str:
    return f"{key} ({OPTIONS[key]})" if key in OPTIONS else key


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
        data = load_yaml(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise AccelbenchError(f"cannot read TCO file {p}: {exc}") from None
    if data is None:  # a 0-byte file, only comments, or `null`: never "no inputs" unsaid
        raise AccelbenchError(
            f"TCO file {p} holds no fields (empty, or only comments or null); give "
            "field: value lines, or leave out --tco"
        )
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
        if key in ("rate_set", "tier", "mode"):
            if not isinstance(value, str):
                raise AccelbenchError(f"TCO file {p}: field {key} must be text (got {value!r})")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise AccelbenchError(f"TCO file {p}: field {key} must be a number (got {value!r})")
    inputs = TcoInputs(**data)
    try:
        inputs.validate()
    except AccelbenchError as exc:
        raise AccelbenchError(f"TCO file {p}: {exc}") from None
    return inputs


@dataclass(frozen=True)
class Rate:
    """One accelerator's entry in a rate set."""

    usd_per_gpu_hour: dict[str, float]  # tier -> rate
    kw: float | None = None  # all-in kW per GPU (chip + host/NIC share)
    tdp_w: float | None = None
    placeholder: tuple[str, ...] = ()  # tiers the source marks as placeholders
    note: str = ""

    def to_json(self) -> dict[str, float | str | list[str]]:
        """The entry as tco_rates.yaml writes it: tiers, then kw, tdp_w, placeholder, note."""
        out: dict[str, float | str | list[str]] = dict(self.usd_per_gpu_hour)
        if self.tdp_w is not None:
            out["tdp_w"] = self.tdp_w
        if self.kw is not None:
            out["kw"] = self.kw
        if self.placeholder:
            out["placeholder"] = list(self.placeholder)
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class RateSet:
    name: str
    title: str
    source: str  # a key of RateData.sources
    tiers: dict[str, str]  # tier -> what it means
    rates: dict[str, Rate]  # accelerator id -> its rates
    valid_from: str = "?"
    valid_to: str | None = None
    kw_basis: str = "all_in"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"title": self.title, "valid_from": self.valid_from}
        if self.valid_to is not None:
            out["valid_to"] = self.valid_to
        out |= {"source": self.source, "kw_basis": self.kw_basis, "tiers": dict(self.tiers),
                "rates": {k: r.to_json() for k, r in self.rates.items()}}  # fmt: skip
        return out


@dataclass(frozen=True)
class RateSource:
    title: str
    date: str = ""


@dataclass(frozen=True)
class RateData:
    """cost/data/tco_rates.yaml (schema accelbench.tco_rates/1)."""

    default: str  # the default rate set
    default_tier: str
    sources: dict[str, RateSource]
    rate_sets: dict[str, RateSet]

    def to_json(self) -> dict[str, object]:
        """The document as shipped (``accelbench catalog rates --json``)."""
        return {
            "schema": RATES_SCHEMA,
            "default": self.default,
            "default_tier": self.default_tier,
            "sources": {k: dataclasses.asdict(v) for k, v in self.sources.items()},
            "rate_sets": {k: v.to_json() for k, v in self.rate_sets.items()},
        }


RATES_SCHEMA = "accelbench.tco_rates/1"
_RATE_FIELDS = ("kw", "tdp_w", "placeholder", "note")


def _rate_data(doc: Any) -> RateData:
    def fail(where: str) -> AccelbenchError:
        return AccelbenchError(f"cost/data/tco_rates.yaml: {where}")

    if not isinstance(doc, dict) or doc.get("schema") != RATES_SCHEMA:
        raise fail(f"not an {RATES_SCHEMA} document")
    try:
        sources = {
            str(k): RateSource(" ".join(str(v["title"]).split()), str(v.get("date", "")))
            for k, v in doc["sources"].items()
        }
        sets = {}
        for name, rs in doc["rate_sets"].items():
            tiers = {str(t): str(d) for t, d in rs["tiers"].items()}
            rates = {}
            for aid, e in rs["rates"].items():
                unknown = set(e) - set(tiers) - set(_RATE_FIELDS)
                if unknown:
                    raise fail(f"{name}: {aid}: unknown fields {', '.join(sorted(unknown))}")
                rates[str(aid)] = Rate(
                    {t: float(e[t]) for t in tiers if t in e},
                    float(e["kw"]) if "kw" in e else None,
                    float(e["tdp_w"]) if "tdp_w" in e else None,
                    tuple(str(t) for t in e.get("placeholder") or ()),
                    str(e.get("note", "")),
                )
            valid_to = rs.get("valid_to")
            sets[str(name)] = RateSet(
                str(name), str(rs["title"]), str(rs["source"]), tiers, rates,
                str(rs.get("valid_from", "?")), None if valid_to is None else str(valid_to),
                str(rs.get("kw_basis", "all_in")),
            )  # fmt: skip
            if sets[name].source not in sources:
                raise fail(f"{name}: unknown source {sets[name].source!r}")
        data = RateData(str(doc["default"]), str(doc["default_tier"]), sources, sets)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise fail(f"malformed ({type(exc).__name__}: {exc})") from None
    if data.default not in sets:
        raise fail(f"the default rate set {data.default!r} is not there")
    return data


@lru_cache(maxsize=1)
def rate_data() -> RateData:
    """The shipped TCO rate sets (cost/data/tco_rates.yaml)."""
    text = resources.files("accelbench.cost").joinpath("data/tco_rates.yaml").read_text()
    return _rate_data(load_yaml(text))


def rate_set(name: str | None) -> RateSet:
    """A rate set by name; the default when ``name`` is None."""
    data = rate_data()
    key = name or data.default
    if key not in data.rate_sets:
        raise AccelbenchError(f"unknown rate set {key!r} (known: {', '.join(data.rate_sets)})")
    return data.rate_sets[key]


def crf(rate: float, years: float) -> float:
    """Capital recovery factor: the yearly payment that repays 1 over ``years`` at ``rate``."""
    if not years > 0 or not math.isfinite(years):
        raise AccelbenchError(f"life_years must be > 0 (got {years:g})")
    if not 0 <= rate < math.inf:
        raise AccelbenchError(f"cost_of_capital must be >= 0 (got {rate:g})")
    if rate * years < 1e-9:
        # rate / (1 - (1+rate)^-years) -> 1/years as rate -> 0; the next term of its series
        # is rate/2, the one after ~ years*rate^2/12, below a double's precision here
        return 1.0 / years + rate / 2.0
    # rate * g / (g - 1) with g = (1+rate)^years, without the cancellation of g - 1 (it
    # was 0.0 for a rate of 1e-17: ZeroDivisionError)
    return rate / -math.expm1(-years * math.log1p(rate))


def tco_mode(inp: TcoInputs) -> str:
    """Which way :func:`resolve_tco` takes to the $/GPU-hour: ``given``
    (``usd_per_gpu_hour``), ``buildup`` or ``rate`` (a rate set's tier)."""
    if inp.usd_per_gpu_hour is not None and inp.mode != "buildup":
        return "given"
    if inp.mode == "buildup" or (
        inp.mode is None and any(getattr(inp, k) is not None for k in BUILDUP_FIELDS)
    ):
        return "buildup"
    return "rate"


def resolve_tco(acc: Accelerator, inputs: TcoInputs | None = None) -> Tco:
    """Resolve the $/GPU-hour and all-in kW per GPU for ``acc`` from ``inputs``."""
    inp = inputs or TcoInputs()
    inp.validate()
    assumptions: list[str] = []
    rs = rate_set(inp.rate_set)
    set_name = rs.name
    entry = rs.rates.get(acc.id) or Rate({})
    src_title = rate_data().sources[rs.source].title

    # all-in kW per GPU (chip + host/NIC share) from the rate set, or given
    kw_all_in: float | None = None
    kw_note = ""
    if inp.kw_per_gpu is not None:
        kw_all_in = inp.kw_per_gpu
        kw_note = f"{kw_all_in:g} kW per GPU all-in (given)"
    elif entry.kw is not None:
        kw_all_in = entry.kw
        kw_note = (
            f"{kw_all_in:g} kW per GPU all-in (chip + host/NIC share; {set_name}), as the "
            "source uses it (utility provisioned)"
        )
    mode = tco_mode(inp)
    if kw_all_in is not None and inp.pue is not None and inp.pue != 1.0:
        kw_all_in *= inp.pue
        kw_note += (
            f" x PUE {inp.pue:g} (given; InferenceX's utility-modelled view) = {kw_all_in:.4g} kW"
        )

    if mode == "given":
        assert inp.usd_per_gpu_hour is not None
        _check_pue_applies(inp, kw_all_in, acc, set_name)
        assumptions.append(f"TCO ${inp.usd_per_gpu_hour:g}/GPU-hour (given)")
        if kw_note:
            assumptions.append(kw_note)
        return Tco(inp.usd_per_gpu_hour, kw_all_in, "given", assumptions)

    if mode == "buildup":
        return _buildup(acc, inp)

    tier = inp.tier or rate_data().default_tier
    tiers = rs.tiers
    if tier not in tiers:
        raise AccelbenchError(f"unknown tier {tier!r} for {set_name} (known: {', '.join(tiers)})")
    if tier not in entry.usd_per_gpu_hour:
        raise AccelbenchError(
            f"rate set {set_name} has no {tier} rate for {acc.id} (has: "
            f"{', '.join(sorted(rs.rates))}); give --usd-per-gpu-hour or a build-up "
            "(--capex, --life-years, --cost-of-capital, --usd-per-kwh)"
        )
    usd = entry.usd_per_gpu_hour[tier]
    valid = f"{rs.valid_from} to {rs.valid_to}" if rs.valid_to else f"from {rs.valid_from}"
    placeholder = tier in entry.placeholder
    assumptions.append(
        f"TCO ${usd:g}/GPU-hour{' [placeholder]' if placeholder else ''}: {set_name} {tier} "
        f"tier ({tiers[tier]}), valid {valid}; source: {src_title}"
    )
    _check_pue_applies(inp, kw_all_in, acc, set_name)
    if entry.note:
        assumptions.append(f"{acc.id} rate note: {entry.note}")
    if kw_note:
        assumptions.append(kw_note)
    return Tco(usd, kw_all_in, "rate", assumptions, {"rate_usd_per_gpu_hour": usd})


def _check_pue_applies(
    inp: TcoInputs, kw_all_in: float | None, acc: Accelerator, set_name: str
) -> None:
    """A PUE multiplies a power figure: refuse it where there is none (a rate given or
    published, with no kW given and none in the rate set), rather than ignore it."""
    if inp.pue is not None and kw_all_in is None:
        raise UsageError(
            f"pue (--pue) multiplies a power figure and there is none for {acc.id}: give "
            f"kw_per_gpu (--kw-per-gpu), or a rate set with one ({set_name} has none)"
        )


def _buildup(acc: Accelerator, inp: TcoInputs) -> Tco:
    assumptions: list[str] = []
    capex = inp.capex_usd
    if capex is None:
        price = acc.figure("price_usd")
        if price.value is None:
            raise AccelbenchError(
                f"build-up TCO needs capex_usd (--capex): the catalog has no price for {acc.id}"
            )
        capex = float(price.value)
        assumptions.append(
            f"capex ${capex:,.0f} per GPU: catalog price [{price.status}] "
            f"({acc.source_title('price_usd')}, {price.date})"
        )
    else:
        assumptions.append(f"capex ${capex:,.0f} per GPU (given)")
    life, rate, price_kwh = inp.life_years, inp.cost_of_capital, inp.usd_per_kwh
    if life is None or rate is None or price_kwh is None:
        missing = [
            f"{k} ({OPTIONS[k]})"
            for k in ("life_years", "cost_of_capital", "usd_per_kwh")
            if getattr(inp, k) is None
        ]
        raise AccelbenchError(f"build-up TCO needs {', '.join(missing)} (no sourced default)")
    util = inp.utilisation if inp.utilisation is not None else 1.0
    other = inp.other_opex_usd_per_gpu_hour or 0.0
    pue = inp.pue if inp.pue is not None else 1.0

    kw = inp.it_kw_per_gpu
    if kw is not None:
        assumptions.append(f"power {kw:g} kW per GPU (given)")
    elif inp.kw_per_gpu is not None:
        kw = inp.kw_per_gpu
        assumptions.append(f"power {kw:g} kW per GPU all-in (given)")
    else:
        cur_entry = rate_set("inferencex-2026-07").rates.get(acc.id)
        if cur_entry is not None and cur_entry.kw is not None:
            kw = cur_entry.kw
            assumptions.append(
                f"power {kw:g} kW per GPU all-in (chip + host/NIC share; inferencex-2026-07)"
            )
        else:
            tdp = acc.figure("tdp_w").value
            if tdp is None:
                raise AccelbenchError(
                    f"build-up TCO needs it_kw_per_gpu (--it-kw-per-gpu): no power figure "
                    f"for {acc.id}"
                )
            kw = tdp / 1000.0
            assumptions.append(f"power {kw:g} kW per GPU = catalog TDP only (no host share)")
    capital = capex * crf(rate, life) / HOURS_PER_YEAR / util
    energy = kw * pue * price_kwh
    total = capital + energy + other
    assumptions.append(
        f"TCO ${total:.4g}/GPU-hour = capital ${capital:.4g} (CRF {rate:g}, {life:g} y, "
        f"utilisation {util:g}) + energy ${energy:.4g} ({kw:g} kW x PUE {pue:g} x "
        f"${price_kwh:g}/kWh) + other ${other:g}"
    )
    kw_all_in = kw * pue
    assumptions.append(
        f"{kw_all_in:.4g} kW per GPU" + (f" (x PUE {pue:g}, given)" if pue != 1.0 else "")
    )
    return Tco(
        total,
        kw_all_in,
        "buildup",
        assumptions,
        {"capital": capital, "energy": energy, "other": other},
    )
