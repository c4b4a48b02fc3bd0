"""`accelbench catalog`, `accelbench cost` and `accelbench plan`: thin wrappers over
accelbench.cost and accelbench.plan (usage: docs/COST_AND_PLAN.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, TypedDict

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from accelbench.console import esc as escape
from accelbench.cost.costing import CostResult, compute_costs, ratios_vs_first
from accelbench.cost.tco import TcoInputs, load_tco_file, rate_data
from accelbench.errors import UsageError
from accelbench.hardware.catalog import (
    FIGURES,
    GIB,
    find_accelerator,
    host_template,
    load_catalog,
)
from accelbench.metrics.format import sig
from accelbench.plan.architecture import human_bytes, human_params
from accelbench.plan.knee import KneePrediction, SessionMix, predict_knee, predict_knees
from accelbench.plan.models import Published, model_catalog, resolve_model
from accelbench.plan.planner import Plan, build_plan
from accelbench.plan.roofline import DEFAULT_RESERVE, Step

catalog_app = typer.Typer(
    help="Accelerator and model catalogs, with the source of every figure.",
    no_args_is_help=True,
)

CatalogOpt = typer.Option(
    None, "--catalog", help="Extra accelerator catalog YAML file (repeatable)."
)
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of tables.")


def _console() -> Console:
    from accelbench.console import console

    return console(width=140)


def _fmt(v: float | None, digits: int = 4) -> str:
    return sig(v, digits, big=1000, none="n/a", inf=None)


def _echo_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, default=str))


# --------------------------------------------------------------------------- catalog


@catalog_app.command("list")
def catalog_list(catalog: list[Path] = CatalogOpt, as_json: bool = JsonOpt) -> None:
    """List accelerators with their key figures."""
    cat = load_catalog(catalog)
    if as_json:
        _echo_json(
            {
                a.id: {
                    "name": a.name,
                    "origin": a.origin,
                    **{k: a.figure(k).value for k in FIGURES},
                }
                for a in cat.values()
            }
        )
        return
    t = Table(
        title="Accelerators (per GPU: HBM GiB, TB/s, dense TFLOPS; [..] marks estimates "
        "and conflicts)"
    )
    for col in ("id", "name", "HBM GiB", "TB/s", "BF16", "FP8", "FP4", "TDP W", "origin"):
        t.add_column(col)
    for a in cat.values():
        t.add_row(
            a.id,
            a.name,
            *(
                escape(a.figure(k).text())
                for k in ("memory_gib", "memory_bw_tbs", "bf16_tflops", "fp8_tflops", "fp4_tflops")
            ),
            escape(a.figure("tdp_w").text()),
            a.origin,
        )
    _console().print(t)
    typer.echo("Details and sources: accelbench catalog show NAME")


@catalog_app.command("show")
def catalog_show(
    name: str = typer.Argument(..., help="Accelerator id, alias or name."),
    catalog: list[Path] = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Show one accelerator: every figure with its source, date and status."""
    a = find_accelerator(name, load_catalog(catalog))
    if as_json:
        _echo_json(
            {
                "id": a.id,
                "name": a.name,
                "vendor": a.vendor,
                "arch": a.arch,
                "memory_type": a.memory_type,
                "scale_up": a.scale_up,
                "origin": a.origin,
                "figures": {
                    k: {**f.__dict__, "source_title": a.source_title(k)}
                    for k, f in a.figures.items()
                },
            }
        )
        return
    con = _console()
    con.print(
        f"[bold]{escape(a.name)}[/bold] "
        + escape(f"({a.id}; {a.arch}; {a.memory_type}; origin: {a.origin})")
    )
    con.print(f"scale-up: {escape(a.scale_up)}")
    t = Table()
    for col in ("figure", "value", "status", "source", "date", "note"):
        t.add_column(col, overflow="fold")
    used: dict[str, str] = {}
    for k, label in FIGURES.items():
        f = a.figure(k)
        if f.source:
            used[f.source] = a.source_title(k)
        t.add_row(label, escape(f.text()), f.status, f.source, f.date, escape(f.note))
    con.print(t)
    con.print("Sources:")
    for key, title in used.items():
        con.print(f"  {key}: {escape(title)}")


@catalog_app.command("template")
def catalog_template(
    accel_id: str = typer.Option("cpu-host", "--id", help="Id for the new entry."),
) -> None:
    """Print a user-catalog entry for this CPU host to fill in and save."""
    typer.echo(host_template(accel_id))


@catalog_app.command("rates")
def catalog_rates(as_json: bool = JsonOpt) -> None:
    """Show the TCO rate sets ($/GPU-hour by tier, kW per GPU)."""
    data = rate_data()
    if as_json:
        _echo_json(data.to_json())
        return
    con = _console()
    for name, rs in data.rate_sets.items():
        tiers = list(rs.tiers)
        t = Table(
            title=f"{name}: {rs.title} (kW: all-in per GPU, chip + host/NIC share; "
            "[placeholder] as the source marks it)" + (" [default]" if name == data.default else "")
        )
        for col in ("accelerator", *(f"{x} $/GPU-h" for x in tiers), "kW/GPU all-in", "note"):
            t.add_column(col)
        for aid, e in rs.rates.items():
            cells = [
                _fmt(e.usd_per_gpu_hour.get(x)) + (" [placeholder]" if x in e.placeholder else "")
                for x in tiers
            ]
            t.add_row(aid, *(escape(c) for c in cells), _fmt(e.kw), e.note)
        con.print(t)
        con.print(f"source: {escape(data.sources[rs.source].title)}")


class ModelRow(TypedDict):
    """One line of ``catalog models`` (``--json``: the list of them)."""

    id: str
    name: str
    attention: str
    experts: str
    total_params: int
    active_params: int
    kv_bytes_per_token_bf16: float
    published: Published
    source: dict[str, str]


class ModelInfo(TypedDict):
    """``catalog model NAME --json``."""

    name: str
    model_type: str
    attention: str
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    experts: int
    experts_per_token: int
    moe_layers: int
    total_params: int
    active_params: int
    mtp_params: int
    kv_bytes_per_token: dict[str, float]
    weight_bytes: dict[str, float]
    sliding_window: int | None
    sliding_layers: int
    source: dict[str, str]


@catalog_app.command("models")
def catalog_models(as_json: bool = JsonOpt) -> None:
    """List the shipped model architectures with derived sizes."""
    rows: list[ModelRow] = []
    for e in model_catalog().values():
        a = e.arch
        rows.append(
            ModelRow(
                id=e.id,
                name=e.name,
                attention=a.attention_kind,
                experts=f"{a.experts_per_token}/{a.num_experts}" if a.is_moe else "dense",
                total_params=a.total_params,
                active_params=a.active_params,
                kv_bytes_per_token_bf16=a.kv_bytes_per_token("bf16"),
                published=e.published,
                source=e.source,
            )
        )
    if as_json:
        _echo_json(rows)
        return
    t = Table(title="Models (parameters derived from config.json; KV per token in BF16)")
    for col in ("id", "attention", "experts", "total", "active", "KV/token", "published"):
        t.add_column(col)
    for r in rows:
        pub = r["published"]
        t.add_row(
            r["id"],
            r["attention"],
            r["experts"],
            human_params(r["total_params"]),
            human_params(r["active_params"]),
            human_bytes(r["kv_bytes_per_token_bf16"]),
            f"{pub.get('total_b', '?')}B" + (f" / {pub['active_b']}B" if "active_b" in pub else ""),
        )
    _console().print(t)
    typer.echo("Sources: accelbench catalog model NAME")


@catalog_app.command("model")
def catalog_model(
    name: str = typer.Argument(..., help="Model id / HF repo id, or a config.json path."),
    as_json: bool = JsonOpt,
) -> None:
    """Show one model's architecture, derived sizes and source."""
    arch = resolve_model(name)
    info = ModelInfo(
        name=arch.name,
        model_type=arch.model_type,
        attention=arch.attention_kind,
        layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        heads=arch.num_heads,
        kv_heads=arch.num_kv_heads,
        head_dim=arch.head_dim,
        experts=arch.num_experts,
        experts_per_token=arch.experts_per_token,
        moe_layers=len(arch.moe_layers),
        total_params=arch.total_params,
        active_params=arch.active_params,
        mtp_params=arch.mtp_params,
        kv_bytes_per_token={p: arch.kv_bytes_per_token(p) for p in ("bf16", "fp8")},
        weight_bytes={p: arch.weight_bytes(p) for p in ("bf16", "fp8", "mxfp4", "int4")},
        sliding_window=arch.sliding_window,
        sliding_layers=len(arch.sliding_layers),
        source=arch.source,
    )
    if as_json:
        _echo_json(info)
        return
    t = Table(title=f"{arch.name} ({arch.model_type})")
    t.add_column("figure", no_wrap=True)
    t.add_column("value", overflow="fold")
    cells = {k: str(v) for k, v in info.items()}
    for k, n in (("total_params", info["total_params"]), ("active_params", info["active_params"]),
                 ("mtp_params", info["mtp_params"])):  # fmt: skip
        cells[k] = f"{human_params(n)} ({n:,})"
    for k, sizes in (("kv_bytes_per_token", info["kv_bytes_per_token"]),
                     ("weight_bytes", info["weight_bytes"])):  # fmt: skip
        cells[k] = ", ".join(f"{p}: {human_bytes(b)}" for p, b in sizes.items())
    cells["source"] = "; ".join(f"{sk}: {sv}" for sk, sv in info["source"].items())
    for k, v in cells.items():
        t.add_row(k, escape(v))
    _console().print(t)


# ------------------------------------------------------------------------------ cost


_COST_ROWS = (
    ("tok/s/GPU (total)", lambda r: r.throughput.total),
    ("tok/s/GPU (input)", lambda r: r.throughput.input),
    ("tok/s/GPU (output)", lambda r: r.throughput.output),
    ("interactivity tok/s/user", lambda r: r.throughput.interactivity),
    ("$/GPU-hour", lambda r: r.tco.usd_per_gpu_hour),
    ("$/M total tokens", lambda r: r.usd_per_m_total),
    ("$/M input tokens", lambda r: r.usd_per_m_input),
    ("$/M output tokens", lambda r: r.usd_per_m_output),
    ("kW/GPU all-in", lambda r: r.tco.kw_per_gpu),
    ("tok/s per MW", lambda r: r.tok_s_per_mw),
    ("J/token provisioned", lambda r: r.j_per_token),
    ("J/output token provisioned", lambda r: r.j_per_output_token),
    ("J/token measured (accelerators)", lambda r: r.j_per_token_measured),
    ("J/output token measured", lambda r: r.j_per_output_token_measured),
)


def _print_costs(results: list[CostResult]) -> None:
    con = _console()
    t = Table(title="Cost per token")
    t.add_column("")
    for r in results:
        t.add_column(r.accelerator, justify="right")
    ratio = len(results) >= 2
    if ratio:
        for r in results[1:]:
            t.add_column(f"{r.accelerator} / {results[0].accelerator}", justify="right")
    for label, get in _COST_ROWS:
        vals = [get(r) for r in results]
        cells = [_fmt(v) for v in vals]
        if ratio:
            base = vals[0]
            for v in vals[1:]:
                cells.append(f"{v / base:.3f}x" if v is not None and base else "")
        t.add_row(label, *cells)
    con.print(t)
    for r in results:  # what a sweep left out, named with why
        for w in r.throughput.warnings:
            con.print(f"[yellow]warning:[/yellow] {escape(r.label)}: {escape(w)}")
    con.print("Assumptions:")
    for r in results:
        con.print(f"  [bold]{escape(r.label)}[/bold]: {escape(r.throughput.origin)}")
        for a in r.tco.assumptions + r.throughput.notes:
            con.print(f"    - {escape(a)}")
    con.print(
        "  $/M input (output) tokens charge the whole GPU-hour to input (output) tokens; "
        "J/token provisioned = all-in kW (chip + host/NIC share) x 1000 / tok/s per GPU."
    )


# the options each TCO mode of `cost` uses (cost/tco.py, tco_mode); any other given is
# refused (docs/LIMITS.md, "cost"). --accelerator and --interactivity depend on the sources.
_COST_ALL = ("--accelerator", "--interactivity", "--tco", "--pue", "--catalog", "--json")
_COST_MODES = {
    "a TCO rate given outright (--usd-per-gpu-hour)": (
        *_COST_ALL, "--usd-per-gpu-hour", "--kw-per-gpu", "--rates"),
    "a build-up TCO (--capex, --life-years, --cost-of-capital, --usd-per-kwh)": (
        *_COST_ALL, "--capex", "--life-years", "--cost-of-capital", "--usd-per-kwh",
        "--utilisation", "--other-opex", "--it-kw-per-gpu", "--kw-per-gpu"),
    "a published rate (--rates, --tier)": (*_COST_ALL, "--rates", "--tier", "--kw-per-gpu"),
}  # fmt: skip
_TCO_MODE_NAMES = dict(zip(("given", "buildup", "rate"), _COST_MODES, strict=True))


# the options that only some sources use, and what the sources are when it does not apply
_SOURCE_OPTIONS = {
    "--accelerator": "sources that all have an ACCEL: prefix",
    "--interactivity": "sources with no sweep directory (a run or a number is one point)",
}


def _cost_refuse(
    given: frozenset[str],
    inputs: TcoInputs,
    tco_file: str | None = None,
    base: TcoInputs | None = None,
) -> None:
    """Refuse the options the TCO mode of ``inputs`` (options over the --tco file) does
    not use: the build-up's with a rate, the rate's with a build-up; and so the fields of
    the ``--tco`` file ``base`` (a field is its option's input: one rule for both)."""
    from accelbench.cli.options import refuse_unused
    from accelbench.cost.tco import OPTIONS, tco_mode

    key = tco_mode(inputs)
    mode = _TCO_MODE_NAMES[key]
    used = set(_COST_MODES[mode])
    if mode.startswith("a TCO rate given") and inputs.kw_per_gpu is not None:
        used.discard("--rates")  # the set's only use here is its kW, replaced
    if mode.startswith("a build-up") and inputs.it_kw_per_gpu is not None:
        used.discard("--kw-per-gpu")  # the build-up pays for --it-kw-per-gpu
    homes = {m: opts for m, opts in _COST_MODES.items() if m != mode}
    refuse_unused(given, used, mode, homes)
    if base is None:
        return
    fields = {f.name for f in dataclasses.fields(base) if getattr(base, f.name) is not None}
    if "mode" in fields and key == "given":  # a rate given outright overrides mode: rate
        raise UsageError(
            f"--tco {tco_file}: mode {base.mode} does not apply to {mode} (no mode, or "
            "mode: buildup to build the TCO up instead)"
        )
    unused = sorted(f for f in fields - {"mode"} if OPTIONS[f] not in used)
    if unused:
        verb = "does" if len(unused) == 1 else "do"
        names = ", ".join(f"{f} ({OPTIONS[f]})" for f in unused)
        raise UsageError(f"--tco {tco_file}: {names} {verb} not apply to {mode}")


def cost_command(
    ctx: typer.Context,
    sources: list[str] = typer.Argument(
        None,
        help="ACCEL:SOURCE, SOURCE a run dir, a sweep dir, or tok/s/GPU (total, or IN+OUT). "
        "Several for a side-by-side table (ratios against the first).",
    ),
    accelerator: str | None = typer.Option(
        None, "--accelerator", "-a", help="Accelerator for SOURCEs without an ACCEL: prefix."
    ),
    interactivity: float | None = typer.Option(
        None, "--interactivity", "-i", help="Target tok/s/user on a sweep's frontier."
    ),
    rates: str | None = typer.Option(
        None, "--rates", help="TCO rate set (see `accelbench catalog rates`)."
    ),
    tier: str | None = typer.Option(None, "--tier", help="Rate tier: owned or rental."),
    usd_per_gpu_hour: float | None = typer.Option(
        None, "--usd-per-gpu-hour", help="TCO rate given outright."
    ),
    kw_per_gpu: float | None = typer.Option(
        None, "--kw-per-gpu", help="All-in provisioned kW per GPU."
    ),
    tco_file: Path | None = typer.Option(
        None, "--tco", help="YAML file of TCO inputs (command-line options override it)."
    ),
    capex: float | None = typer.Option(None, "--capex", help="Build-up: $ per GPU (all-in)."),
    life_years: float | None = typer.Option(None, "--life-years", help="Build-up: economic life."),
    cost_of_capital: float | None = typer.Option(
        None, "--cost-of-capital", help="Build-up: yearly rate, e.g. 0.08."
    ),
    utilisation: float | None = typer.Option(
        None, "--utilisation", help="Build-up: share of hours in use (0-1]."
    ),
    it_kw_per_gpu: float | None = typer.Option(
        None, "--it-kw-per-gpu", help="Build-up: kW per GPU to pay for (before any --pue)."
    ),
    pue: float | None = typer.Option(
        None,
        "--pue",
        help="Multiply the all-in kW by this PUE (1-3; InferenceX's utility-modelled view). "
        "Default: none, as the source defines its kW.",
    ),
    usd_per_kwh: float | None = typer.Option(None, "--usd-per-kwh", help="Electricity price."),
    other_opex: float | None = typer.Option(
        None, "--other-opex", help="Build-up: other opex in $ per GPU-hour."
    ),
    catalog: list[Path] = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """$ per million tokens, tokens/s per MW and J per token from runs, sweeps or numbers."""
    if rates is not None:  # named here: the rate set's own error does not say --rates
        from accelbench.validate import choice

        choice("--rates", rates, tuple(rate_data().rate_sets))
    base = load_tco_file(tco_file) if tco_file else TcoInputs()
    cli = TcoInputs(
        usd_per_gpu_hour=usd_per_gpu_hour,
        rate_set=rates,
        tier=tier,
        kw_per_gpu=kw_per_gpu,
        capex_usd=capex,
        life_years=life_years,
        cost_of_capital=cost_of_capital,
        utilisation=utilisation,
        it_kw_per_gpu=it_kw_per_gpu,
        pue=pue,
        usd_per_kwh=usd_per_kwh,
        other_opex_usd_per_gpu_hour=other_opex,
    )
    from accelbench.cli.options import given_options, refuse_unused
    from accelbench.cost.costing import source_options

    given = given_options(ctx)
    inputs = base.merged(cli)
    _cost_refuse(given, inputs, str(tco_file) if tco_file else None, base if tco_file else None)
    _check_rate_tier(inputs, rates, tier, tco_file)
    if sources:  # none: compute_costs says to give one
        src_used = source_options(sources, accelerator, catalog)
        for opt, what in _SOURCE_OPTIONS.items():
            refuse_unused(given & {opt}, src_used, what)
    results = compute_costs(sources or [], accelerator, interactivity, inputs, catalog)
    if as_json:
        ratios = {"ratios_vs_first": ratios_vs_first(results)} if len(results) >= 2 else {}
        _echo_json({"results": [r.as_dict() for r in results], **ratios})
        return
    _print_costs(results)


def _check_rate_tier(
    inputs: TcoInputs, cli_rates: str | None, cli_tier: str | None, tco_file: Path | None
) -> None:
    """A published rate's set and tier, refused naming where each was given: the option,
    or the --tco file's field (the rate set's own "unknown tier" named neither)."""
    from accelbench.cost.tco import rate_set, tco_mode
    from accelbench.validate import choice

    if tco_mode(inputs) != "rate":
        return

    def where(key: str, option: str, cli_value: str | None) -> str:
        return option if cli_value is not None else f"--tco {tco_file}: {key} ({option})"

    if inputs.rate_set is not None:
        choice(
            where("rate_set", "--rates", cli_rates), inputs.rate_set, tuple(rate_data().rate_sets)
        )
    if inputs.tier is not None:
        tiers = tuple(rate_set(inputs.rate_set).tiers)
        choice(where("tier", "--tier", cli_tier), inputs.tier, tiers)


# ------------------------------------------------------------------------------ plan


def _limit_cells(s: Step | None) -> tuple[str, str, str]:
    if s is None:
        return ("n/a", "n/a", "n/a")
    return (_fmt(s.tok_s_user), _fmt(s.output_tok_s_per_gpu), s.bound)


def _print_plan(p: Plan) -> None:
    con = _console()
    a, hw, w, f = p.arch, p.hardware, p.workload, p.fit
    con.print(
        f"[bold]{escape(a.name)}[/bold]: {a.attention_kind}, {human_params(a.total_params)} "
        f"total / {human_params(a.active_params)} active parameters; weights {p.precision} "
        f"{human_bytes(a.weight_bytes(p.precision))}; KV "
        f"{human_bytes(a.kv_bytes_per_token(p.kv_precision))}/token ({p.kv_precision})"
    )
    con.print(
        f"[bold]{hw.n_gpus} x {escape(p.accelerator.name)}[/bold]: "
        f"{hw.peak_flops / 1e12:g} TFLOPS {hw.compute_format}, {hw.bandwidth / 1e12:g} TB/s, "
        f"{hw.memory_bytes / 2**30:g} GiB ({hw.memory_bytes:,.0f} bytes) per GPU"
    )
    titles: dict[str, str] = {}
    for k in ("memory_gib", "memory_bw_tbs", f"{hw.compute_format}_tflops"):
        fig = p.accelerator.figure(k)
        con.print(f"  {k} {escape(fig.text())}: {fig.source} ({fig.date}, {fig.status})")
        titles[fig.source] = p.accelerator.source_title(k)
    for key, title in titles.items():
        con.print(f"  source {key}: {escape(title)}")
    for note in hw.notes:
        con.print(f"  {escape(note)}")
    for warning in p.warnings:
        con.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    ctx = f"peak context {w.peak_context:,.0f} tokens" + (
        f" (ISL {w.isl} + OSL {w.osl}; mean decode context {w.context:,.0f})"
        if w.isl is not None
        else ""
    )
    verdict = "[green]fits[/green]" if f.fits else "[red]does not fit[/red]"
    mb = "unlimited by KV" if f.max_batch is None else f"{f.max_batch:,}"
    con.print(
        f"Memory: {verdict} at concurrency {f.concurrency} and {ctx}: weights "
        f"{human_bytes(f.weights_bytes)} + KV {human_bytes(f.kv_bytes_per_sequence)}/sequence "
        f"in {human_bytes(f.usable_bytes)} usable ({f.reserve_fraction:.0%} reserve); "
        f"largest batch {mb}"
    )
    if p.prefill_physical_s is not None and p.prefill_expected_s is not None:
        con.print(
            f"Prefill of {w.isl} tokens alone: {p.prefill_physical_s * 1000:.4g} ms physical "
            f"limit, {p.prefill_expected_s * 1000:.4g} ms expected"
        )
    t = Table(
        title="Physical roofline (peak FLOPS and bandwidth) and expected ceiling (measured "
        "efficiencies); communication not modelled"
    )
    for col in (
        "batch",
        "physical tok/s/user",
        "physical out tok/s/GPU",
        "bound",
        "expected tok/s/user",
        "expected out tok/s/GPU",
        "bound",
    ):
        t.add_column(col, justify="right")
    for r in p.rows:
        t.add_row(f"{r.batch:,}", *_limit_cells(r.physical), *_limit_cells(r.expected))
    con.print(t)
    ai = p.at_interactivity
    if ai:
        for label, s in (("physical roofline", ai.physical), ("expected ceiling", ai.expected)):
            if s:
                con.print(
                    f"At >= {ai.target_tok_s_user:g} tok/s/user ({label}): batch {s.batch:,}, "
                    f"{_fmt(s.output_tok_s_per_gpu)} output / {_fmt(s.total_tok_s_per_gpu)} "
                    "total tok/s/GPU at most"
                )
            else:  # no batch: none fits in memory (it said batch 1 was too slow at -i 1)
                why = (
                    "no batch fits in memory"
                    if p.fit.max_batch is not None and p.fit.max_batch < 1
                    else "even batch 1 is slower than the target"
                )
                con.print(f"At >= {ai.target_tok_s_user:g} tok/s/user ({label}): {why}")
    if p.runs:
        e = Table(title="Measured against the physical roofline and the expected ceiling")
        for col in (
            "run",
            "batch",
            "context",
            "measured tok/s/GPU",
            "physical",
            "of physical",
            "expected",
            "of expected",
            "tok/s/user",
        ):
            e.add_column(col, justify="right", overflow="fold")
        for er in p.runs:
            e.add_row(
                escape(Path(er.run).name),
                f"{er.batch:,}",
                _fmt(er.context),
                f"{_fmt(er.measured_tok_s_per_gpu)} ({er.basis})",
                _fmt(er.physical_tok_s_per_gpu),
                f"{er.of_physical:.1%}",
                _fmt(er.expected_tok_s_per_gpu),
                f"{er.of_expected:.1%}",
                _fmt(er.measured_tok_s_user),
            )
        con.print(e)


# the options `plan fit` uses with and without --run; any other given is refused
# (docs/LIMITS.md, "plan"). --osl goes with --isl: --context is the decode context itself.
_FIT_ALL = ("--accelerator", "--gpus", "--precision", "--kv-precision", "--context", "--isl",
            "--osl", "--concurrency", "--reserve", "--eff-flops", "--eff-bw", "--overhead-ms",
            "--dp-attention", "--interactivity", "--points", "--catalog", "--json")  # fmt: skip
_FIT_MODES = {
    "plan fit --run": (*_FIT_ALL, "--run", "--batch"),
    "plan fit without --run": _FIT_ALL,
}


def _fit_refuse(given: frozenset[str]) -> None:
    """Refuse --batch without --run and --osl without --isl (both were ignored)."""
    from accelbench.cli.options import refuse_unused

    mode = "plan fit --run" if "--run" in given else "plan fit without --run"
    homes = {m: opts for m, opts in _FIT_MODES.items() if m != mode}
    refuse_unused(given, _FIT_MODES[mode], mode, homes)
    if "--isl" not in given:
        refuse_unused(
            given & {"--osl"}, (), "plan fit without --isl", {"--isl (ISL + OSL)": ("--osl",)}
        )


def plan_command(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="Model id / HF repo id, or a config.json path."),
    accelerator: str = typer.Option(..., "--accelerator", "-a", help="Accelerator id."),
    gpus: int | None = typer.Option(
        None, "--gpus", "-n", help="GPUs (tensor parallel); default 1, or the run's."
    ),
    precision: str = typer.Option(
        "bf16", "--precision", "-p", help="Weights: bf16, fp8, mxfp4, nvfp4, int4 ..."
    ),
    kv_precision: str = typer.Option("bf16", "--kv-precision", help="KV cache: bf16 or fp8."),
    context: int | None = typer.Option(
        None, "--context", "-c", help="Decode context tokens (a whole number, at least 1)."
    ),
    isl: int | None = typer.Option(None, "--isl", help="Input tokens per request."),
    osl: int | None = typer.Option(None, "--osl", help="Output tokens per request."),
    concurrency: int = typer.Option(1, "--concurrency", help="Sequences that must fit."),
    reserve: float = typer.Option(
        DEFAULT_RESERVE, "--reserve", help="Share of memory held back (activations, runtime)."
    ),
    eff_flops: float | None = typer.Option(
        None, "--eff-flops", help="Achievable share of peak FLOPS (default: measured)."
    ),
    eff_bw: float | None = typer.Option(
        None, "--eff-bw", help="Achievable share of peak bandwidth (default: measured)."
    ),
    overhead_ms: float = typer.Option(0.0, "--overhead-ms", help="Fixed time per step."),
    dp_attention: bool = typer.Option(
        False, "--dp-attention", help="Attention data-parallel: MLA/KV not replicated."
    ),
    interactivity: float | None = typer.Option(
        None, "--interactivity", "-i", help="Best throughput at >= this tok/s/user."
    ),
    run: str | None = typer.Option(
        None, "--run", help="Run or sweep directory: efficiency = measured / limit."
    ),
    batch: int | None = typer.Option(
        None, "--batch", help="Batch of the run (default: its target concurrency)."
    ),
    points: int | None = typer.Option(
        None, "--points", help="Show at most this many roofline rows (2-1000; default all)."
    ),
    catalog: list[Path] = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Fit, physical roofline and expected ceiling of a model on accelerators; runs against
    both. `accelbench plan knee --help`: the KV-capacity knee of multi-turn sessions."""
    from accelbench.cli.options import check_kv_precision, check_precision, given_options

    _fit_refuse(given_options(ctx))
    check_precision(precision)
    check_kv_precision(kv_precision)
    p = build_plan(
        model,
        accelerator,
        gpus,
        precision,
        kv_precision,
        context,
        isl,
        osl,
        concurrency,
        reserve,
        eff_flops,
        eff_bw,
        overhead_ms,
        dp_attention,
        interactivity,
        run,
        batch,
        points,
        catalog,
    )
    if as_json:
        _echo_json(p.as_dict())
        return
    _print_plan(p)


# --------------------------------------------------------------------------- plan knee


def _gib(x: float | None) -> str:
    return "n/a" if x is None else f"{x / GIB:,.6g} GiB ({x / 1e9:,.6g} GB)"


def _knee_rows(p: KneePrediction) -> list[tuple[str, str]]:
    """The knee's arithmetic, one (figure, value) row each, in the order it is computed."""
    m, mix, b = p.memory, p.mix, p.block_size
    rows: list[tuple[str, str]] = []
    if m is not None:
        rows += [
            ("HBM per GPU (catalog, GiB = 2^30 B)", f"{m.memory_gib_per_gpu:g} GiB"),
            (
                f"usable = {m.gpus} GPUs x HBM x (1 - reserve {m.reserve_fraction:g})",
                _gib(m.usable_bytes),
            ),
            (f"weights ({p.precision})", _gib(m.weights_bytes)),
            ("KV budget = usable - weights", _gib(m.kv_budget_bytes)),
        ]
    elif p.kv_budget_bytes is not None:
        rows.append((f"KV budget (given: --kv-cache-gib x {p.tp} GPUs)", _gib(p.kv_budget_bytes)))
    rows += [
        (
            f"KV per token ({p.kv_precision}, x{p.kv_replication} copies)",
            f"{p.kv_bytes_per_token_all_gpus:,.0f} B",
        ),
        (
            "capacity (tokens)"
            + (" = KV budget / KV per token" if p.kv_budget_bytes is not None else " (given)"),
            f"{p.capacity_tokens:,}",
        ),
        (
            f"capacity (blocks of {b}) = tokens // {b}"
            + (f" - {p.reserved_blocks} reserved" if p.reserved_blocks else ""),
            f"{p.capacity_blocks:,}",
        ),
        (f"shared blocks = system prompt {mix.system_tokens:,} // {b}", f"{p.shared_blocks:,}"),
        (
            "last prompt = P + T x (U + O + template) - O",
            f"{mix.system_tokens:,} + {mix.turns:g} x ({mix.user_tokens:g} + "
            f"{mix.output_tokens:g} + {mix.template_tokens}) - {mix.output_tokens:g} = "
            f"{p.last_prompt_tokens:,.0f} tokens"
            + (f" (sd {p.last_prompt_tokens_sd:,.0f})" if p.last_prompt_tokens_sd else ""),
        ),
        (
            f"own blocks per session = {'floor' if p.ideal_cache else 'ceil'}"
            f"(last prompt / {b}) - shared",
            f"{p.session_blocks:,}"
            + (f" (sd {p.session_blocks_sd:,.1f})" if p.session_blocks_sd else ""),
        ),
        ("knee = (capacity - shared) / own", f"{p.knee_sessions:,.2f} sessions"),
        ("sessions that fit = floor(knee)", f"{p.max_sessions:,}"),
        (
            f"knee interval ({p.interval.confidence:.0%}, spread of session lengths)",
            f"{p.interval.low:,.2f} - {p.interval.high:,.2f}",
        ),
    ]
    if not p.ideal_cache:
        rows.append(
            (
                f"preemption = (capacity - shared) / (ceil(longest / {b}) - shared)",
                f"{p.preemption_sessions:,.2f} sessions",
            )
        )
    if p.slots is not None:
        rows.append(("slots (llama-server -np)", f"{p.slots:,}"))
    rows.append(("limited by", p.limited_by))
    return rows


# the options `plan knee` uses for each capacity source; any other given is refused
# (docs/LIMITS.md, "plan"): with a capacity given, the accelerator, its HBM arithmetic
# (--precision, --reserve) and, for a capacity in tokens, the KV size per token are unused
_KNEE_ALL = ("--model", "--turns", "--user-tokens", "--osl", "--system-tokens",
             "--template-tokens", "--turns-sd", "--user-tokens-sd", "--osl-sd", "--block-size",
             "--reserved-blocks", "--slots", "--ideal-cache", "--json")  # fmt: skip
_KNEE_MODES = {
    "plan knee with the HBM of --accelerator": (
        *_KNEE_ALL, "--accelerator", "--catalog", "--tp", "--precision", "--reserve",
        "--kv-precision", "--dp-attention"),
    "plan knee --kv-cache-gib": (
        *_KNEE_ALL, "--kv-cache-gib", "--tp", "--kv-precision", "--dp-attention"),
    "plan knee --context-tokens": (*_KNEE_ALL, "--context-tokens"),
}  # fmt: skip


def _knee_refuse(given: frozenset[str]) -> None:
    """Refuse the options the capacity source does not use."""
    from accelbench.cli.options import refuse_unused

    if {"--kv-cache-gib", "--context-tokens"} <= given:
        raise UsageError("give --kv-cache-gib or --context-tokens, not both")
    mode = next(
        (f"plan knee {o}" for o in ("--kv-cache-gib", "--context-tokens") if o in given),
        "plan knee with the HBM of --accelerator",
    )
    homes = {m: opts for m, opts in _KNEE_MODES.items() if m != mode}
    refuse_unused(given, _KNEE_MODES[mode], mode, homes)


def plan_knee_command(
    ctx: typer.Context,
    model: str = typer.Option(
        ..., "--model", "-m", help="Model id / HF repo id, or a config.json path."
    ),
    accelerator: list[str] = typer.Option(
        [],
        "--accelerator",
        "-a",
        help="Accelerator id; repeat to compare side by side. Not needed with "
        "--kv-cache-gib or --context-tokens.",
    ),
    tp: int = typer.Option(1, "--tp", "-n", help="GPUs (tensor parallel)."),
    turns: float = typer.Option(..., "--turns", help="Turns per session (mean)."),
    user_tokens: float = typer.Option(..., "--user-tokens", help="User tokens per turn (mean)."),
    osl: float = typer.Option(..., "--osl", help="Output tokens per turn (mean)."),
    system_tokens: int = typer.Option(
        0, "--system-tokens", help="Shared system prompt, tokens (held once for all sessions)."
    ),
    template_tokens: int = typer.Option(
        0, "--template-tokens", help="Tokens a chat template adds per turn."
    ),
    turns_sd: float = typer.Option(0.0, "--turns-sd", help="Standard deviation of turns."),
    user_tokens_sd: float = typer.Option(
        0.0, "--user-tokens-sd", help="Standard deviation of user tokens per turn."
    ),
    osl_sd: float = typer.Option(
        0.0, "--osl-sd", help="Standard deviation of output tokens per turn."
    ),
    kv_cache_gib: float | None = typer.Option(
        None, "--kv-cache-gib", help="KV budget per GPU in GiB (vLLM's KV cache space)."
    ),
    context_tokens: int | None = typer.Option(
        None, "--context-tokens", help="KV capacity in tokens (llama-server's -c, n_ctx)."
    ),
    block_size: int = typer.Option(
        16,
        "--block-size",
        help="Prefix-cache block, tokens (vLLM 16 on GPUs, 128 on CPU; llama-server 1).",
    ),
    reserved_blocks: int = typer.Option(
        0, "--reserved-blocks", help="Blocks the engine keeps out of the cache (vLLM: 1)."
    ),
    slots: int | None = typer.Option(
        None, "--slots", help="llama-server's slots (-np): at most this many sessions cached."
    ),
    precision: str = typer.Option("bf16", "--precision", "-p", help="Weights precision."),
    kv_precision: str = typer.Option("bf16", "--kv-precision", help="KV cache: bf16, fp8 or fp32."),
    reserve: float = typer.Option(
        DEFAULT_RESERVE, "--reserve", help="Share of HBM held back (activations, runtime)."
    ),
    dp_attention: bool = typer.Option(
        False, "--dp-attention", help="Attention data-parallel: MLA/KV not replicated."
    ),
    ideal_cache: bool = typer.Option(
        False,
        "--ideal-cache",
        help="The ideal prefix cache's working set (the reference server): full blocks "
        "only, no running request held.",
    ),
    catalog: list[Path] = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The KV-capacity knee: how many concurrent multi-turn sessions fit in the KV cache
    before the prefix cache evicts live history, with the memory arithmetic shown
    (docs/COST_AND_PLAN.md)."""
    from accelbench.cli.options import check_kv_precision, check_precision, given_options

    _knee_refuse(given_options(ctx))
    check_precision(precision)
    check_kv_precision(kv_precision)
    mix = SessionMix(
        turns, user_tokens, osl, system_tokens, turns_sd, user_tokens_sd, osl_sd, template_tokens
    )
    kw: dict[str, Any] = {
        "kv_cache_gib": kv_cache_gib,
        "context_tokens": context_tokens,
        "block_size": block_size,
        "reserved_blocks": reserved_blocks,
        "slots": slots,
        "precision": precision,
        "kv_precision": kv_precision,
        "reserve": reserve,
        "dp_attention": dp_attention,
        "ideal_cache": ideal_cache,
        "catalog_files": catalog,
    }
    preds = (
        predict_knees(model, accelerator, tp, mix, **kw)
        if accelerator
        else [predict_knee(model, None, tp, mix, **kw)]
    )
    if as_json:
        _echo_json({"knees": [p.as_dict() for p in preds]})
        return
    con = _console()
    first = preds[0]
    t = Table(
        title=f"KV-capacity knee: {escape(first.model)}, TP {first.tp}, "
        f"{escape(first.capacity_source)} capacity"
    )
    t.add_column("figure", no_wrap=True)
    for p in preds:
        t.add_column(escape(p.accelerator or "given capacity"), justify="right")
    table = [_knee_rows(p) for p in preds]
    for i, (label, _) in enumerate(table[0]):
        t.add_row(escape(label), *(escape(rows[i][1]) for rows in table))
    con.print(t)
    for p in preds:
        for w in p.warnings:
            con.print(f"warning ({escape(p.accelerator or 'given capacity')}): {escape(w)}")


class _PlanGroup(TyperGroup):
    """`accelbench plan MODEL ...` is `accelbench plan fit MODEL ...` (as it always was);
    `accelbench plan knee ...` the knee. Anything but a subcommand's name or a bare
    ``--help`` goes to ``fit``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["fit", *args]
        return super().parse_args(ctx, args)


PLAN_HELP = """Capacity planning: the memory fit and the two limits of a model on
accelerators (`fit`, the default: `accelbench plan MODEL -a ACC` is `accelbench plan fit
MODEL -a ACC`), and the KV-capacity knee of multi-turn sessions (`knee`)."""

plan_app = typer.Typer(cls=_PlanGroup, add_completion=False, no_args_is_help=True)
plan_app.command("fit")(plan_command)
plan_app.command("knee")(plan_knee_command)


def register(app: typer.Typer) -> None:
    """Add `catalog`, `cost` and `plan` (with `plan knee`) to the accelbench app."""
    app.add_typer(catalog_app, name="catalog")
    app.command("cost")(cost_command)
    app.add_typer(plan_app, name="plan", help=PLAN_HELP)


__all__ = ["register"]
