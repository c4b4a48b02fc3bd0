"""`accelbench predict`: throughput/GPU, TTFT and TPOT of hardware the user does not own,
with intervals, beside the physical limit and the cost (docs/PREDICT.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import typer

from accelbench.errors import UsageError
from accelbench.predict.stepmodel import Layout

DOC_BEGIN = "<!-- validation table: begin (accelbench predict --validate --write-docs) -->"
DOC_END = "<!-- validation table: end -->"


def _cost(pred: object) -> dict[str, float | None]:
    from accelbench.cost.costing import Throughput, cost_of
    from accelbench.cost.tco import resolve_tco
    from accelbench.hardware.catalog import find_accelerator

    acc = find_accelerator(pred.accelerator)  # type: ignore[attr-defined]
    thr = Throughput(
        total=pred.throughput_per_gpu.value,  # type: ignore[attr-defined]
        output=pred.output_per_gpu.value,  # type: ignore[attr-defined]
        origin="predicted",
    )
    c = cost_of("predicted", acc, thr, resolve_tco(acc))
    return {
        "usd_per_gpu_hour": c.tco.usd_per_gpu_hour,
        "usd_per_m_total_tokens": c.usd_per_m_total,
        "usd_per_m_output_tokens": c.usd_per_m_output,
        "j_per_token_provisioned": c.j_per_token,
        "j_per_output_token_provisioned": c.j_per_output_token,
    }


def _write_docs(path: Path, table: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{DOC_BEGIN}\n{table}\n{DOC_END}"
    if DOC_BEGIN in text and DOC_END in text:
        text = re.sub(
            re.escape(DOC_BEGIN) + ".*?" + re.escape(DOC_END), lambda _: block, text, flags=re.S
        )
    else:
        text = text + ("\n" if text else "") + block + "\n"
    path.write_text(text, encoding="utf-8")


def predict_command(
    model: str = typer.Option(
        None, "--model", help="Catalog model (accelbench catalog models) or config.json."
    ),
    accelerator: str = typer.Option(
        None,
        "--accelerator",
        help="Catalog accelerator (h100, h200, b200, mi300x, mi325x, mi355x, ...).",
    ),
    tp: int = typer.Option(8, "--tp", help="Tensor-parallel GPUs (the layout's GPU count)."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel size (divides --tp)."),
    dp_attention: bool = typer.Option(
        False, "--dp-attention", help="Attention data-parallel (one KV copy)."
    ),
    isl: int = typer.Option(1024, "--isl", help="Input tokens per request."),
    osl: int = typer.Option(1024, "--osl", help="Output tokens per request."),
    concurrency: int = typer.Option(None, "--concurrency", help="Users in a closed loop."),
    interactivity: float = typer.Option(
        None, "--interactivity", help="Target tok/s per user (at least): search the concurrency."
    ),
    ttft_slo: float = typer.Option(
        None, "--ttft-slo", help="TTFT SLO in seconds (at most): search the concurrency."
    ),
    tpot_slo: float = typer.Option(
        None, "--tpot-slo", help="TPOT SLO in seconds (at most): search the concurrency."
    ),
    engine: str = typer.Option(
        "sglang", "--engine", help="Engine whose fitted factors to use (sglang, trt-llm, atom)."
    ),
    precision: str = typer.Option(
        "fp8", "--precision", help="Weight precision (fp8, fp4, bf16, ...)."
    ),
    kv_precision: str = typer.Option("bf16", "--kv-precision", help="KV-cache precision."),
    max_batch: int = typer.Option(
        1024, "--max-batch", help="The engine's cap on running sequences."
    ),
    explain: bool = typer.Option(
        False, "--explain", help="Print the bound of each phase and the factors."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    validate: bool = typer.Option(
        False, "--validate", help="Cross-validate on the calibration set and print the error table."
    ),
    write_docs: Path = typer.Option(
        None,
        "--write-docs",
        help="With --validate: write the table into this Markdown file (docs/PREDICT.md).",
    ),
    refit: bool = typer.Option(
        False,
        "--refit",
        help="Refit the shipped factors and intervals (maintainers: after rebuilding the calibration table).",
    ),
) -> None:
    """Predict throughput per GPU, TTFT and TPOT on hardware you do not own, with intervals
    from how wrong the model has been on public measurements (docs/PREDICT.md)."""
    if validate or refit:
        _validate(refit, write_docs, as_json)
        return
    from accelbench.predict.point import Target, predict_point

    if model is None or accelerator is None:
        raise UsageError("give --model and --accelerator (or --validate)")
    pred = predict_point(
        model,
        accelerator,
        Layout(tp, ep, dp_attention),
        isl,
        osl,
        Target(concurrency, interactivity, ttft_slo, tpot_slo),
        engine=engine,
        precision=precision,
        kv_precision=kv_precision,
        max_batch=max_batch,
    )
    cost = _cost(pred)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "schema": "accelbench.prediction/1",
                    "predicted": True,
                    **pred.as_dict(),
                    "cost": cost,
                },
                indent=2,
                default=str,
            )
        )
        return
    e = pred
    typer.echo(
        f"{e.model} on {e.layout.gpus} x {e.accelerator} ({e.layout.text()}), {e.engine} {e.precision}, "
        f"ISL {e.isl:,} / OSL {e.osl:,}, concurrency {e.concurrency} (PREDICTED, not measured)"
    )
    t, f, p, lim = e.throughput_per_gpu, e.ttft_s, e.tpot_s, e.limit
    typer.echo(
        f"  throughput/GPU  {t.value:,.0f} tok/s  [{t.low:,.0f} - {t.high:,.0f}]   "
        f"physical limit {lim.throughput_per_gpu:,.0f}"
    )
    typer.echo(
        f"  TTFT (median)   {f.value * 1e3:,.0f} ms  [{f.low * 1e3:,.0f} - {f.high * 1e3:,.0f}]   "
        f"physical limit {lim.ttft_s * 1e3:,.1f}"
    )
    typer.echo(
        f"  TPOT (median)   {p.value * 1e3:,.1f} ms  [{p.low * 1e3:,.1f} - {p.high * 1e3:,.1f}]   physical limit "
        f"{lim.tpot_s * 1e3:,.2f}  ({e.interactivity:,.1f} tok/s/user)"
    )
    usd, j = cost["usd_per_m_total_tokens"], cost["j_per_token_provisioned"]
    typer.echo(
        f"  cost            ${usd:,.3f} per M tokens (${cost['usd_per_m_output_tokens'] or 0:,.3f} per M output), "
        f"{j if j is not None else float('nan'):,.3f} J/token provisioned"
    )
    typer.echo("  interval: 10th-90th percentile of the cross-validated errors (docs/PREDICT.md)")
    for cap in e.capped:
        typer.echo(f"  held at the physical limit: {cap}")
    for x in e.extrapolation:
        typer.echo(f"  EXTRAPOLATION: {x}")
    for n in e.notes:
        typer.echo(f"  note: {n}")
    if explain:
        ff = e.factors
        typer.echo(
            f"  bound: {e.bound} (decode step: {e.decode_bound}; prefill: {e.prefill_bound}); "
            f"{e.running} sequences running"
        )
        typer.echo(
            f"  factors from {e.factors_from}, {e.factors_points} points: compute {ff.compute:.3f} of peak, "
            f"bandwidth {ff.bandwidth:.3f} of peak, {ff.overhead_s * 1e3:.2f} ms per step, "
            f"{ff.request_s * 1e3:.1f} ms per request"
        )


def _validate(refit: bool, write_docs: Path | None, as_json: bool) -> None:
    from accelbench.predict.calibration import load_calibration
    from accelbench.predict.fit import write_factors
    from accelbench.predict.validate import refit as do_refit
    from accelbench.predict.validate import table_markdown
    from accelbench.predict.validate import validate as run_validation

    points = load_calibration()
    if refit:
        factors, v = do_refit(points)
        typer.echo(f"wrote {write_factors(factors)}", err=True)
    else:
        v = run_validation(points)
    table = table_markdown(v)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "schema": "accelbench.predict-validation/1",
                    "points": v.n_points,
                    "systems": v.n_systems,
                    "rows": [r.__dict__ for r in v.rows],
                },
                indent=2,
            )
        )
    else:
        typer.echo(f"{v.n_points} points, {v.n_systems} systems (docs/PREDICT.md)")
        typer.echo(table)
    if write_docs is not None:
        _write_docs(write_docs, table)


def register(app: typer.Typer) -> None:
    """Add `predict` to the accelbench app."""
    app.command("predict")(predict_command)


__all__ = ["register"]
