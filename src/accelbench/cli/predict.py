"""`accelbench predict`: throughput/GPU, TTFT and TPOT of hardware the user does not own,
with intervals, beside the physical limit and the cost (docs/PREDICT.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from accelbench.errors import UsageError
from accelbench.predict.stepmodel import Layout

if TYPE_CHECKING:
    from accelbench.predict.point import Prediction, Target

DOC_BEGIN = "<!-- validation table: begin (accelbench predict --validate --write-docs) -->"
DOC_END = "<!-- validation table: end -->"


def _cost(pred: object) -> dict[str, float | None]:
    from accelbench.cost.costing import Throughput, cost_of
    from accelbench.cost.tco import resolve_tco
    from accelbench.errors import AccelbenchError
    from accelbench.hardware.catalog import find_accelerator

    try:
        acc = find_accelerator(pred.accelerator)  # type: ignore[attr-defined]
    except AccelbenchError:  # hardware given by its figures (--host-spec): no price
        return dict.fromkeys(COST_KEYS)
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


COST_KEYS = (
    "usd_per_gpu_hour",
    "usd_per_m_total_tokens",
    "usd_per_m_output_tokens",
    "j_per_token_provisioned",
    "j_per_output_token_provisioned",
)


def _doc_text(path: Path) -> str:
    """The Markdown file --write-docs rewrites in place ("" where there is none yet); one
    that is not UTF-8 text is refused (it was exit 70, after the validation's work)."""
    if not path.exists():
        return ""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(
            f"--write-docs {path}: not UTF-8 text (the tables are written into a Markdown file)"
        ) from None
    except OSError as exc:
        raise UsageError(f"--write-docs {path}: cannot read it: {exc.strerror or exc}") from None


def _write_docs(path: Path, table: str) -> None:
    text = _doc_text(path)
    block = f"{DOC_BEGIN}\n{table}\n{DOC_END}"
    if DOC_BEGIN in text and DOC_END in text:
        text = re.sub(
            re.escape(DOC_BEGIN) + ".*?" + re.escape(DOC_END), lambda _: block, text, flags=re.S
        )
    else:
        text = text + ("\n" if text else "") + block + "\n"
    from accelbench.store.rundir import write_text_atomic  # here: a point reads no run store

    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)


# the options each mode of `predict` uses; any other given is refused (docs/LIMITS.md)
_POINT = ("--model", "--accelerator", "--tp", "--ep", "--dp-attention", "--isl", "--osl",
          "--concurrency", "--interactivity", "--ttft-slo", "--tpot-slo", "--precision",
          "--kv-precision", "--max-batch", "--json", "--explain")  # fmt: skip
_MODES = {
    "--validate": ("--validate", "--refit", "--write-docs", "--whatif", "--json"),
    "--claims": ("--claims", "--write-docs"),
    "--calibrate": (*_POINT, "--calibrate", "--host", "--host-spec", "--target-spec",
                    "--calibrate-model", "--calibrate-engine", "--calibrate-precision"),
    "a point's prediction": (*_POINT, "--engine", "--schedule"),
}  # fmt: skip


def _mode(given: frozenset[str]) -> str:
    """The mode the options ask for, refusing those it would ignore."""
    from accelbench.cli.options import refuse_unused

    asked = [m for m in ("--validate", "--claims", "--calibrate") if m in given]
    if len(asked) > 1:  # was "--claims does not apply to predict --validate (--claims goes
        # with --claims)"
        raise UsageError(f"{' and '.join(asked)} are different modes of predict; give one")
    # --refit validates the refitted factors
    mode: str = (
        asked[0] if asked else "--validate" if "--refit" in given else "a point's prediction"
    )
    homes = {m: opts for m, opts in _MODES.items() if m != mode}
    refuse_unused(given, _MODES[mode], mode if mode[0] != "-" else f"predict {mode}", homes)
    if "--explain" in given and "--json" in given:
        raise UsageError("--explain adds the bounds and factors to the text; --json holds them")
    return mode


def predict_command(
    ctx: typer.Context,
    model: str = typer.Option(
        None, "--model", help="Catalog model (accelbench catalog models) or config.json."
    ),
    accelerator: str = typer.Option(
        None,
        "--accelerator",
        help="Catalog accelerator (h100, h200, b200, mi300x, mi325x, mi355x, ...).",
    ),
    tp: int = typer.Option(
        None,
        "--tp",
        help="Tensor-parallel GPUs (the layout's GPU count); default 8, or 1 with --calibrate "
        "predicting the sweeps' own hardware or a --target-spec.",
    ),
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
        None,
        "--precision",
        help="Weight precision (fp8, fp4, bf16, ...); default fp8, or with --calibrate the "
        "sweeps' (--calibrate-precision).",
    ),
    kv_precision: str = typer.Option(
        None, "--kv-precision", help="KV-cache precision; default bf16 (fp16 with --calibrate)."
    ),
    max_batch: int = typer.Option(
        1024, "--max-batch", help="The engine's cap on running sequences."
    ),
    schedule: bool = typer.Option(
        False,
        "--schedule",
        help=(
            "Also run the point through the event-driven continuous-batching scheduler "
            "(queueing and TTFT out of the schedule; its cross-validated error is in "
            "--validate's table, predictor 'scheduler')."
        ),
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
    whatif: bool = typer.Option(
        False,
        "--whatif",
        help="With --validate: AIConfigurator's error on the same NVIDIA points beside "
        "accelbench's (pip install 'accelbench[whatif]').",
    ),
    refit: bool = typer.Option(
        False,
        "--refit",
        help="Refit the shipped factors and intervals (maintainers: after rebuilding the calibration table).",
    ),
    calibrate: list[Path] = typer.Option(
        None,
        "--calibrate",
        help="Your own sweep directories (accelbench sweep; repeat for several): refit the "
        "factors on them and predict from those (docs/PREDICT.md).",
    ),
    host: str = typer.Option(
        None, "--host", help="With --calibrate: the catalog accelerator the sweeps ran on."
    ),
    host_spec: str = typer.Option(
        None,
        "--host-spec",
        help="With --calibrate: what the sweeps ran on, by its figures: tflops=X,bw_tbs=Y"
        "[,memory_gib=Z] (peak dense TFLOPS, memory TB/s).",
    ),
    target_spec: str = typer.Option(
        None,
        "--target-spec",
        help="With --calibrate: predict hardware given by its figures (as --host-spec) "
        "instead of --accelerator; neither: the sweeps' own hardware.",
    ),
    calibrate_model: str = typer.Option(
        None,
        "--calibrate-model",
        help="With --calibrate: the sweeps' model (catalog id or config.json), where the "
        "name they recorded is not in the catalog.",
    ),
    calibrate_engine: str = typer.Option(
        None,
        "--calibrate-engine",
        help="With --calibrate: the engine, where the runs do not say (they usually do).",
    ),
    calibrate_precision: str = typer.Option(
        None,
        "--calibrate-precision",
        help="With --calibrate: the sweeps' weight precision (default: --precision, else fp16).",
    ),
    claims: bool = typer.Option(
        False, "--claims", help="Check the published claims of docs/CLAIMS.md and print the page."
    ),
) -> None:
    """Predict throughput per GPU, TTFT and TPOT on hardware you do not own, with intervals
    from how wrong the model has been on public measurements (docs/PREDICT.md)."""
    from accelbench.cli.options import check_kv_precision, check_precision, given_options

    _mode(given_options(ctx))
    check_precision(precision)
    check_precision(calibrate_precision, "--calibrate-precision")
    check_kv_precision(kv_precision)
    if write_docs is not None:  # before the ~13 s of validation, naming the option
        from accelbench.validate import output_file

        output_file("--write-docs", write_docs, mkdir=False)
        if (validate or refit) and write_docs.is_file():
            _doc_text(write_docs)  # rewritten in place: a file it cannot read, before the work
    if whatif:
        from accelbench.predict.whatif import installed_version, whatif_report

        if not validate or as_json:
            raise UsageError("--whatif goes with --validate (Markdown, not --json)")
        installed_version()  # the missing extra's one line before any work
    if validate or refit:
        _validate(refit, write_docs, as_json)
        if whatif:
            typer.echo("\nAIConfigurator on the same points (docs/PREDICT.md):")
            typer.echo(whatif_report())
        return
    if claims:
        from accelbench.predict.claims import claims_page
        from accelbench.store.rundir import write_text_atomic

        page = claims_page()
        if write_docs is not None:
            write_docs.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(write_docs, page)
        typer.echo(page, nl=False)
        return
    from accelbench.predict.point import Target, predict_point

    target = Target(concurrency, interactivity, ttft_slo, tpot_slo)
    host_like = calibrate and accelerator is None
    layout = Layout(tp if tp is not None else (1 if host_like else 8), ep, dp_attention)
    if calibrate:
        pred = _calibrated(
            calibrate, host, host_spec, target_spec, calibrate_model, calibrate_engine,
            calibrate_precision or precision or "fp16", model, accelerator, layout, isl, osl,
            target, precision, kv_precision or "fp16", max_batch,
        )  # fmt: skip
    else:
        if model is None or accelerator is None:
            raise UsageError("give --model and --accelerator (or --validate, or --calibrate)")
        pred = predict_point(
            model, accelerator, layout, isl, osl, target, engine=engine,
            precision=precision or "fp8", kv_precision=kv_precision or "bf16", max_batch=max_batch,
            schedule=schedule,
        )  # fmt: skip
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
        f"physical limit {lim.throughput_per_gpu:,.0f} tok/s"
    )
    typer.echo(
        f"  TTFT (median)   {f.value * 1e3:,.0f} ms  [{f.low * 1e3:,.0f} - {f.high * 1e3:,.0f}]   "
        f"physical limit {lim.ttft_s * 1e3:,.1f} ms"
    )
    typer.echo(
        f"  TPOT (median)   {p.value * 1e3:,.1f} ms  [{p.low * 1e3:,.1f} - {p.high * 1e3:,.1f}]   physical limit "
        f"{lim.tpot_s * 1e3:,.2f} ms  ({e.interactivity:,.1f} tok/s/user)"
    )
    usd, j = cost["usd_per_m_total_tokens"], cost["j_per_token_provisioned"]
    if usd is None:
        typer.echo("  cost            n/a (hardware given by its figures: no price)")
    else:
        typer.echo(
            f"  cost            ${usd:,.3f} per M tokens (${cost['usd_per_m_output_tokens'] or 0:,.3f} per M output), "
            f"{j if j is not None else float('nan'):,.3f} J/token provisioned"
        )
    if not calibrate:
        typer.echo(
            "  interval: 10th-90th percentile of the cross-validated errors (docs/PREDICT.md)"
        )
    if (sc := e.schedule) is not None:
        sc_tpot = "n/a (no request had a second token)" if sc.tpot_s is None else (
            f"{sc.tpot_s * 1e3:,.1f} ms")  # fmt: skip
        typer.echo(
            f"  scheduled ({sc.requests:,} requests, closed loop): throughput/GPU "
            f"{sc.throughput_per_gpu:,.0f} tok/s, TTFT {sc.ttft_s * 1e3:,.0f} ms (queue "
            f"{sc.queue_s * 1e3:,.0f} ms), TPOT {sc_tpot} (the event-driven "
            "scheduler over the same step model and factors; the values above are the "
            "closed form's, the default: docs/PREDICT.md)"
        )
        if explain:
            shares = ", ".join(f"{k} {100 * v:.0f}%" for k, v in sc.bound_shares.items())
            typer.echo(f"  scheduled steps' bounds (share of busy time): {shares}")
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


def _calibrated(
    sweeps: list[Path],
    host: str | None,
    host_spec: str | None,
    target_spec: str | None,
    sweep_model: str | None,
    sweep_engine: str | None,
    sweep_precision: str,
    model: str | None,
    accelerator: str | None,
    layout: Layout,
    isl: int,
    osl: int,
    target: Target,
    precision: str | None,
    kv_precision: str,
    max_batch: int,
) -> Prediction:
    from accelbench.predict.calibrate import (
        calibrate,
        host_accelerator,
        predict_calibrated,
        resolve_host,
    )
    from accelbench.predict.fit import catalog_accelerator

    hw = resolve_host(host, host_spec)
    if accelerator is not None and target_spec is not None:
        raise UsageError("give --accelerator or --target-spec, not both")
    if target_spec is not None:
        acc = host_accelerator(target_spec, "target", "--target-spec")
    else:
        acc = catalog_accelerator(accelerator) if accelerator is not None else hw
    cal = calibrate(
        sweeps, hw, model=sweep_model, engine=sweep_engine, precision=sweep_precision,
        kv_precision=kv_precision,
    )  # fmt: skip
    typer.echo(
        f"calibrated on {len(cal.points)} points of {len(cal.sweeps)} sweep(s), {cal.engine} on "
        f"{hw.name}: compute {cal.eff.compute:.3f} of peak, bandwidth {cal.eff.bandwidth:.3f}, "
        f"{cal.eff.overhead_s * 1e3:.2f} ms per step, {cal.eff.request_s * 1e3:.2f} ms per request",
        err=True,
    )
    for why in cal.left_out:
        typer.echo(f"  left out: {why}", err=True)
    for note in cal.notes:
        typer.echo(f"  note: {note}", err=True)
    for why in cal.beyond_limit:
        typer.echo(f"  faster than the host's figures allow: {why}", err=True)
    if cal.beyond_limit:
        typer.echo(
            "  (the host's figures understate it, or its engine skips work the model counts: "
            "prefix caching, speculative decoding; the fit holds its shares at 100 % of peak)",
            err=True,
        )
    return predict_calibrated(
        cal, model, acc, layout, isl, osl, target,
        precision=precision or sweep_precision,
        kv_precision=kv_precision, max_batch=max_batch,
    )  # fmt: skip


def _validate(refit: bool, write_docs: Path | None, as_json: bool) -> None:
    from accelbench.predict.calibration import load_calibration
    from accelbench.predict.fit import write_factors
    from accelbench.predict.validate import floor_markdown, load_cache, table_markdown, write_cache
    from accelbench.predict.validate import refit as do_refit
    from accelbench.predict.validate import validate as run_validation

    points = load_calibration()
    cache = load_cache()
    if refit:
        factors, v = do_refit(points, cache)
        typer.echo(f"wrote {write_factors(factors)}", err=True)
        typer.echo(f"wrote {write_cache(cache)}", err=True)
    else:
        v = run_validation(points, cache=cache)
    typer.echo(
        f"scheduler: {len(cache.used) - cache.misses} simulations from the shipped cache, "
        f"{cache.misses} run now",
        err=True,
    )
    table = table_markdown(v)
    floor = (
        "\n\nThe time split's floor: a configuration's own last run before 2026 taken as "
        "the prediction of its later run\n\n" + floor_markdown(v)
    )
    from accelbench.predict import mlperf_check  # other models: MLPerf Inference

    mlperf = mlperf_check.check()
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "schema": "accelbench.predict-validation/2",
                    "points": v.n_points,
                    "systems": v.n_systems,
                    "rows": [r.__dict__ for r in v.rows],
                    "time_split_floor": [r.__dict__ for r in v.floor],
                    "mlperf": mlperf_check.as_json(mlperf),
                },
                indent=2,
            )
        )
    else:
        typer.echo(f"{v.n_points} points, {v.n_systems} systems (docs/PREDICT.md)")
        typer.echo(table + floor)
        typer.echo("\nOther models, MLPerf Inference (predicted / measured - 1; docs/PREDICT.md)")
        typer.echo(mlperf_check.markdown(mlperf))
    if write_docs is not None:
        _write_docs(write_docs, table + floor)
        mlperf_check.write_docs(write_docs, mlperf_check.markdown(mlperf))


def register(app: typer.Typer) -> None:
    """Add `predict` to the accelbench app."""
    app.command("predict")(predict_command)


__all__ = ["register"]
