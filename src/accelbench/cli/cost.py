"""`accelbench catalog`, `accelbench cost` and `accelbench plan`: thin wrappers over
accelbench.cost and accelbench.plan (usage: docs/COST_AND_PLAN.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from accelbench.cost.catalog import FIGURES, find_accelerator, host_template, load_catalog
from accelbench.cost.costing import CostResult, cost_of, throughput_from_source
from accelbench.cost.runs import RunPoint, is_run_dir, is_sweep_dir, load_run, load_sweep
from accelbench.cost.tco import TcoInputs, load_tco_file, rate_data, resolve_tco
from accelbench.errors import AccelbenchError
from accelbench.plan.architecture import human_bytes, human_params
from accelbench.plan.models import find_model, model_catalog, resolve_model
from accelbench.plan.roofline import (
    DEFAULT_RESERVE,
    Roofline,
    Workload,
    efficiency,
    hardware_for,
    memory_fit,
)

catalog_app = typer.Typer(
    help="Accelerator and model catalogs, with the source of every figure.",
    no_args_is_help=True,
)

CatalogOpt = typer.Option(
    None, "--catalog", help="Extra accelerator catalog YAML file (repeatable)."
)
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of tables.")


def _console() -> Console:
    return Console(width=140)


def _fmt(v: float | None, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


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
    t = Table(title="Accelerators (per GPU, dense TFLOPS; [..] marks estimates and conflicts)")
    for col in ("id", "name", "HBM GB", "TB/s", "BF16", "FP8", "FP4", "TDP W", "origin"):
        t.add_column(col)
    for a in cat.values():
        t.add_row(
            a.id,
            a.name,
            *(
                escape(a.figure(k).text())
                for k in ("memory_gb", "memory_bw_tbs", "bf16_tflops", "fp8_tflops", "fp4_tflops")
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
    con.print(f"[bold]{a.name}[/bold] ({a.id}; {a.arch}; {a.memory_type}; origin: {a.origin})")
    con.print(f"scale-up: {a.scale_up}")
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
        _echo_json(data)
        return
    con = _console()
    for name, rs in data["rate_sets"].items():
        tiers = list(rs["tiers"])
        t = Table(
            title=f"{name}: {rs['title']} (kW basis: {rs['kw_basis']})"
            + (" [default]" if name == data["default"] else "")
        )
        for col in ("accelerator", *(f"{x} $/GPU-h" for x in tiers), "kW/GPU", "note"):
            t.add_column(col)
        for aid, e in rs["rates"].items():
            t.add_row(aid, *(_fmt(e.get(x)) for x in tiers), _fmt(e.get("kw")), e.get("note", ""))
        con.print(t)
        con.print(f"source: {data['sources'][rs['source']]['title']}")


@catalog_app.command("models")
def catalog_models(as_json: bool = JsonOpt) -> None:
    """List the shipped model architectures with derived sizes."""
    rows = []
    for e in model_catalog().values():
        a = e.arch
        rows.append(
            {
                "id": e.id,
                "name": e.name,
                "attention": a.attention_kind,
                "experts": f"{a.experts_per_token}/{a.num_experts}" if a.is_moe else "dense",
                "total_params": a.total_params,
                "active_params": a.active_params,
                "kv_bytes_per_token_bf16": a.kv_bytes_per_token("bf16"),
                "published": e.published,
                "source": e.source,
            }
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
    info: dict[str, Any] = {
        "name": arch.name,
        "model_type": arch.model_type,
        "attention": arch.attention_kind,
        "layers": arch.num_layers,
        "hidden_size": arch.hidden_size,
        "heads": arch.num_heads,
        "kv_heads": arch.num_kv_heads,
        "head_dim": arch.head_dim,
        "experts": arch.num_experts,
        "experts_per_token": arch.experts_per_token,
        "moe_layers": len(arch.moe_layers),
        "total_params": arch.total_params,
        "active_params": arch.active_params,
        "mtp_params": arch.mtp_params,
        "kv_bytes_per_token": {p: arch.kv_bytes_per_token(p) for p in ("bf16", "fp8")},
        "weight_bytes": {p: arch.weight_bytes(p) for p in ("bf16", "fp8", "mxfp4", "int4")},
        "sliding_window": arch.sliding_window,
        "sliding_layers": len(arch.sliding_layers),
        "source": arch.source,
    }
    if as_json:
        _echo_json(info)
        return
    t = Table(title=f"{arch.name} ({arch.model_type})")
    t.add_column("figure")
    t.add_column("value", overflow="fold")
    for k, v in info.items():
        if k in ("total_params", "active_params", "mtp_params"):
            v = f"{human_params(v)} ({v:,})"
        elif k in ("kv_bytes_per_token", "weight_bytes"):
            v = ", ".join(f"{p}: {human_bytes(b)}" for p, b in v.items())
        elif k == "source":
            v = "; ".join(f"{sk}: {sv}" for sk, sv in v.items())
        t.add_row(k, escape(str(v)))
    _console().print(t)


# ------------------------------------------------------------------------------ cost


def _split_source(text: str, default_acc: str | None, cat: dict) -> tuple[str, str]:
    if ":" in text:
        head, tail = text.split(":", 1)
        try:
            return find_accelerator(head, cat).id, tail
        except AccelbenchError:
            if default_acc is None:
                raise
    if default_acc is None:
        raise AccelbenchError(
            f"{text!r}: say which accelerator, as ACCEL:{text} or with --accelerator"
        )
    return find_accelerator(default_acc, cat).id, text


def compute_costs(
    sources: list[str],
    accelerator: str | None,
    interactivity: float | None,
    tco_inputs: TcoInputs,
    catalog_files: list[Path] | None = None,
) -> list[CostResult]:
    """Cost figures for each ``ACCEL:SOURCE`` (run dir, sweep dir or tok/s/GPU number)."""
    if not sources:
        raise AccelbenchError("give at least one SOURCE (run dir, sweep dir or tok/s/GPU)")
    cat = load_catalog(catalog_files)
    out = []
    for text in sources:
        aid, src = _split_source(text, accelerator, cat)
        acc = cat[aid]
        thr = throughput_from_source(src, interactivity)
        tco = resolve_tco(acc, tco_inputs)
        out.append(cost_of(f"{aid}: {src}", acc, thr, tco))
    return out


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
    con.print("Assumptions:")
    for r in results:
        con.print(f"  [bold]{r.label}[/bold]: {r.throughput.origin}")
        for a in r.tco.assumptions + r.throughput.notes:
            con.print(f"    - {escape(a)}")
    con.print(
        "  $/M input (output) tokens charge the whole GPU-hour to input (output) tokens; "
        "J/token provisioned = all-in kW x 1000 / tok/s per GPU."
    )


def cost_command(
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
        None, "--it-kw-per-gpu", help="Build-up: IT kW per GPU (before PUE)."
    ),
    pue: float | None = typer.Option(None, "--pue", help="Power usage effectiveness (>= 1)."),
    usd_per_kwh: float | None = typer.Option(None, "--usd-per-kwh", help="Electricity price."),
    other_opex: float | None = typer.Option(
        None, "--other-opex", help="Build-up: other opex in $ per GPU-hour."
    ),
    catalog: list[Path] = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """$ per million tokens, tokens/s per MW and J per token from runs, sweeps or numbers."""
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
    results = compute_costs(sources or [], accelerator, interactivity, base.merged(cli), catalog)
    if as_json:
        out: dict[str, Any] = {"results": [r.as_dict() for r in results]}
        if len(results) >= 2:
            base = out["results"][0]
            out["ratios_vs_first"] = [
                {"label": r["label"]}
                | {
                    k: v / base[k]
                    for k, v in r.items()
                    if isinstance(v, int | float)
                    and isinstance(base.get(k), int | float)
                    and base[k]
                }
                for r in out["results"][1:]
            ]
        _echo_json(out)
        return
    _print_costs(results)


# ------------------------------------------------------------------------------ plan


def _run_points(path: str) -> list[RunPoint]:
    if is_run_dir(path):
        return [load_run(path)]
    if is_sweep_dir(path):
        return load_sweep(path)
    raise AccelbenchError(f"{path} is neither a run directory nor a sweep directory")


def build_plan(
    model: str,
    accelerator: str,
    gpus: int | None = None,
    precision: str = "bf16",
    kv_precision: str = "bf16",
    context: float | None = None,
    isl: int | None = None,
    osl: int | None = None,
    concurrency: int = 1,
    reserve: float = DEFAULT_RESERVE,
    eff_flops: float | None = None,
    eff_bw: float | None = None,
    overhead_ms: float = 0.0,
    dp_attention: bool = False,
    interactivity: float | None = None,
    run: str | None = None,
    batch: int | None = None,
    points: int = 0,
    catalog_files: list[Path] | None = None,
) -> dict[str, Any]:
    """Everything `accelbench plan` shows, as a plain dict."""
    arch = resolve_model(model)
    acc = find_accelerator(accelerator, load_catalog(catalog_files))
    runs = _run_points(run) if run else []
    n = gpus if gpus is not None else (runs[0].gpus if runs else 1)
    if overhead_ms < 0:
        raise AccelbenchError(f"overhead must be >= 0 ms (got {overhead_ms:g})")
    hw = hardware_for(acc, n, precision, eff_flops, eff_bw)
    if context is None and isl is None and runs and runs[0].mean_isl is not None:
        isl = round(runs[0].mean_isl)
        osl = round(runs[0].mean_osl) if runs[0].mean_osl else None
    wl = Workload.of(context, isl, osl, kv_precision)
    fit = memory_fit(
        arch, hw, precision, kv_precision, wl.context, concurrency, reserve, dp_attention
    )
    roof = Roofline(arch, hw, precision, wl, overhead_ms / 1000.0, dp_attention)
    curve = roof.curve(fit.max_batch, points)
    out: dict[str, Any] = {
        "model": {
            "name": arch.name,
            "attention": arch.attention_kind,
            "total_params": arch.total_params,
            "active_params": arch.active_params,
            "kv_bytes_per_token": arch.kv_bytes_per_token(kv_precision),
            "kv_precision": kv_precision,
            "weight_bytes": arch.weight_bytes(precision),
            "precision": precision,
            "source": arch.source,
        },
        "hardware": {
            "accelerator": acc.id,
            "name": acc.name,
            "gpus": n,
            "compute_format": hw.compute_format,
            "peak_tflops_per_gpu": hw.peak_flops / 1e12,
            "bandwidth_tbs_per_gpu": hw.bandwidth / 1e12,
            "memory_gb_per_gpu": hw.memory_bytes / 1e9,
            "eff_flops": hw.eff_flops,
            "eff_bw": hw.eff_bw,
            "notes": list(hw.notes),
            "sources": {
                k: {
                    "value": acc.figure(k).text(),
                    "source": acc.figure(k).source,
                    "date": acc.figure(k).date,
                    "status": acc.figure(k).status,
                    "title": acc.source_title(k),
                }
                for k in ("memory_gb", "memory_bw_tbs", f"{hw.compute_format}_tflops")
            },
        },
        "workload": {
            "context": wl.context,
            "isl": wl.isl,
            "osl": wl.osl,
            "concurrency": concurrency,
            "overhead_ms": overhead_ms,
        },
        "fit": fit.as_dict(),
        "roofline": [s.as_dict() for s in curve],
        "prefill_s": roof.prefill_s(wl.isl) if wl.isl is not None else None,
        "at_interactivity": None,
        "efficiency": [],
    }
    if interactivity is not None:
        best = roof.best_at_interactivity(interactivity, fit.max_batch)
        out["at_interactivity"] = {
            "target_tok_s_user": interactivity,
            "step": best.as_dict() if best else None,
            "note": None if best else "even batch 1 is slower than the target",
        }
    for rp in runs:
        b = batch or (round(rp.concurrency) if rp.concurrency else None)
        if b is None:
            raise AccelbenchError(
                f"{rp.path}: summary.json has no client.target_concurrency; give --batch"
            )
        if rp.mean_isl is not None and context is None:
            rwl = Workload.of(None, round(rp.mean_isl), round(rp.mean_osl or 1) or 1, kv_precision)
        else:
            rwl = wl
        rhw = hardware_for(acc, rp.gpus, precision, eff_flops, eff_bw) if rp.gpus != n else hw
        rroof = Roofline(arch, rhw, precision, rwl, overhead_ms / 1000.0, dp_attention)
        lim = rroof.step(b)
        measured = rp.output_tok_s_per_gpu
        limit = lim.output_tok_s_per_gpu
        basis = "output"
        if measured is None:
            measured, limit, basis = rp.total_tok_s_per_gpu, lim.total_tok_s_per_gpu, "total"
        out["efficiency"].append(
            {
                "run": rp.path,
                "batch": b,
                "context": rwl.context,
                "basis": basis,
                "measured_tok_s_per_gpu": measured,
                "limit_tok_s_per_gpu": limit,
                "throughput_efficiency": efficiency(measured, limit),
                "measured_tok_s_user": rp.interactivity,
                "limit_tok_s_user": lim.tok_s_user,
                "interactivity_efficiency": efficiency(rp.interactivity, lim.tok_s_user)
                if rp.interactivity
                else None,
            }
        )
    return out


def _print_plan(p: dict[str, Any]) -> None:
    con = _console()
    m, h, w, f = p["model"], p["hardware"], p["workload"], p["fit"]
    con.print(
        f"[bold]{m['name']}[/bold]: {m['attention']}, {human_params(m['total_params'])} total / "
        f"{human_params(m['active_params'])} active parameters; weights {m['precision']} "
        f"{human_bytes(m['weight_bytes'])}; KV {human_bytes(m['kv_bytes_per_token'])}/token "
        f"({m['kv_precision']})"
    )
    con.print(
        f"[bold]{h['gpus']} x {h['name']}[/bold]: {h['peak_tflops_per_gpu']:g} TFLOPS "
        f"{h['compute_format']}, {h['bandwidth_tbs_per_gpu']:g} TB/s, "
        f"{h['memory_gb_per_gpu']:g} GB per GPU"
    )
    titles: dict[str, str] = {}
    for k, v in h["sources"].items():
        con.print(f"  {k} {escape(v['value'])}: {v['source']} ({v['date']}, {v['status']})")
        titles[v["source"]] = v["title"]
    for key, title in titles.items():
        con.print(f"  source {key}: {escape(title)}")
    for note in h["notes"]:
        con.print(f"  {escape(note)}")
    ctx = f"context {w['context']:g} tokens" + (
        f" (ISL {w['isl']}, OSL {w['osl']})" if w["isl"] is not None else ""
    )
    verdict = "[green]fits[/green]" if f["fits"] else "[red]does not fit[/red]"
    mb = "unlimited by KV" if f["max_batch"] is None else f"{f['max_batch']:,}"
    con.print(
        f"Memory: {verdict} at concurrency {f['concurrency']} and {ctx}: weights "
        f"{human_bytes(f['weights_bytes'])} + KV "
        f"{human_bytes(f['kv_bytes_per_sequence'])}/sequence "
        f"in {human_bytes(f['usable_bytes'])} usable ({f['reserve_fraction']:.0%} reserve); "
        f"largest batch {mb}"
    )
    if p["prefill_s"] is not None:
        con.print(f"Prefill of {w['isl']} tokens alone: {p['prefill_s'] * 1000:.4g} ms")
    t = Table(title="Roofline (physical limit; communication not modelled)")
    for col in ("batch", "step ms", "tok/s/user", "out tok/s/GPU", "total tok/s/GPU", "bound"):
        t.add_column(col, justify="right")
    for s in p["roofline"]:
        t.add_row(
            f"{s['batch']:,}",
            _fmt(s["step_s"] * 1000),
            _fmt(s["tok_s_user"]),
            _fmt(s["output_tok_s_per_gpu"]),
            _fmt(s["total_tok_s_per_gpu"]),
            s["bound"],
        )
    con.print(t)
    ai = p["at_interactivity"]
    if ai:
        s = ai["step"]
        if s:
            con.print(
                f"At >= {ai['target_tok_s_user']:g} tok/s/user: batch {s['batch']:,}, "
                f"{_fmt(s['output_tok_s_per_gpu'])} output / {_fmt(s['total_tok_s_per_gpu'])} "
                "total tok/s/GPU at most"
            )
        else:
            con.print(f"At >= {ai['target_tok_s_user']:g} tok/s/user: {ai['note']}")
    if p["efficiency"]:
        e = Table(title="Measured against the limit (same batch and context)")
        for col in (
            "run",
            "batch",
            "context",
            "measured tok/s/GPU",
            "limit",
            "efficiency",
            "tok/s/user",
            "limit",
            "efficiency",
        ):
            e.add_column(col, justify="right", overflow="fold")
        for r in p["efficiency"]:
            ie = r["interactivity_efficiency"]
            e.add_row(
                Path(r["run"]).name,
                f"{r['batch']:,}",
                _fmt(r["context"]),
                f"{_fmt(r['measured_tok_s_per_gpu'])} ({r['basis']})",
                _fmt(r["limit_tok_s_per_gpu"]),
                f"{r['throughput_efficiency']:.1%}",
                _fmt(r["measured_tok_s_user"]),
                _fmt(r["limit_tok_s_user"]),
                f"{ie:.1%}" if ie is not None else "n/a",
            )
        con.print(e)


def plan_command(
    model: str = typer.Argument(..., help="Model id / HF repo id, or a config.json path."),
    accelerator: str = typer.Option(..., "--accelerator", "-a", help="Accelerator id."),
    gpus: int | None = typer.Option(
        None, "--gpus", "-n", help="GPUs (tensor parallel); default 1, or the run's."
    ),
    precision: str = typer.Option(
        "bf16", "--precision", "-p", help="Weights: bf16, fp8, mxfp4, nvfp4, int4 ..."
    ),
    kv_precision: str = typer.Option("bf16", "--kv-precision", help="KV cache: bf16 or fp8."),
    context: float | None = typer.Option(None, "--context", "-c", help="Decode context tokens."),
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
    points: int = typer.Option(0, "--points", help="Show at most this many roofline rows."),
    catalog: list[Path] = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Fit, roofline and physical frontier of a model on accelerators; efficiency of runs."""
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
        _echo_json(p)
        return
    _print_plan(p)


def register(app: typer.Typer) -> None:
    """Add `catalog`, `cost` and `plan` to the accelbench app."""
    app.add_typer(catalog_app, name="catalog")
    app.command("cost")(cost_command)
    app.command("plan")(plan_command)


__all__ = ["build_plan", "compute_costs", "find_model", "register"]
