"""Calibrate on what you own: refit the step model's factors for one engine on the user's
own sweeps (``accelbench sweep`` directories, on hardware they have) and predict
hardware or configurations they do not have (``accelbench predict --calibrate``).

- **The points.** Each completed point of each sweep is one closed-loop measurement:
  its concurrency, mean ISL and OSL (the summary's token counts over its completed
  requests), total tokens/s per GPU, median TTFT and median TPOT (summary.json), the
  engine and its slots (run.json: what the server said about itself). A sweep
  directory, a run.json or a summary.json that cannot be read is refused with one line
  naming the file and the field; a point that did not complete is listed in
  ``Calibration.left_out`` (printed), never silently dropped; sweeps from two engines are
  refused.
- **The hardware** of the sweeps is a catalog accelerator (``--host``: e.g. a user
  catalog entry made with ``accelbench catalog template``) or figures given on the
  command line (``--host-spec tflops=0.2,bw_tbs=0.02``: peak FLOP/s and memory
  bandwidth, measured or from the vendor).
- **The fit** is ``predict.fit.fit_factors`` (the same four factors, the same least
  squares) on these points only.
- **The transfer's uncertainty.** The interval of a calibrated prediction is the value
  times ``exp`` of the sum of two log spreads, each widened to contain 0: the refit's own
  residuals on the user's points (the least and largest ``log(measured / predicted)``,
  in sample and with each point left out of its own refit: a handful of points has no
  honest percentiles) and the cross-accelerator
  spread of the public fit (the 10th-90th percentiles of the pooled leave-one-system-out
  residuals, ``factors.json`` "*": how far factors have been off on a system they were
  not fitted on). The value is the refit model's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from accelbench.errors import AccelbenchError, DocumentError, UsageError
from accelbench.hardware.catalog import GIB, Accelerator, Figure
from accelbench.plan.architecture import ModelArch
from accelbench.plan.models import find_model, resolve_model
from accelbench.plan.roofline import MAX_CONTEXT
from accelbench.predict.calibration import Point
from accelbench.predict.fit import (
    METRICS,
    Factors,
    Fitted,
    catalog_accelerator,
    fit_factors,
    physical_limits,
    predict_prepared,
    prepare,
    shipped_factors,
)
from accelbench.predict.point import (
    MAX_CONCURRENCY,
    Prediction,
    Target,
    model_id,
    predict_point,
)
from accelbench.predict.stepmodel import (
    DEFAULT_MAX_BATCH,
    Efficiency,
    Layout,
    RooflineStepModel,
)
from accelbench.store.rundoc import EMBEDDED_ENGINE_NAMES, RunDoc, read_run_doc, read_summary
from accelbench.store.sweepdoc import SWEEP_JSON, read_sweep
from accelbench.validate import MAX_DURATION_S

MIN_CALIBRATION_POINTS = 3  # four factors on fewer than 3 x 3 figures: not a fit
HOST_SPEC_KEYS = {
    "tflops": ("bf16_tflops", "peak dense FLOP/s, in TFLOPS", 1e-6, 1e6),
    "bw_tbs": ("memory_bw_tbs", "memory bandwidth in TB/s", 1e-6, 1e3),
    "memory_gib": ("memory_gib", "memory in GiB", 1e-3, 1e7),
}
ENGINE_ALIASES = {v: k for k, v in EMBEDDED_ENGINE_NAMES.items()} | {"llama": "llama.cpp"}


def host_accelerator(spec: str, name: str = "host", option: str = "--host-spec") -> Accelerator:
    """An accelerator described by its figures: ``tflops=X,bw_tbs=Y[,memory_gib=Z]``
    (peak dense TFLOPS, memory bandwidth in TB/s, memory in GiB: the catalog's units).
    Memory defaults to this machine's RAM. ``option`` (``--host-spec`` or ``--target-spec``)
    is what an error names; a key given twice is refused (the last one was taken)."""
    given: dict[str, float] = {}
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        key, eq, text = part.partition("=")
        key = key.strip().lower()
        if not eq or key not in HOST_SPEC_KEYS:
            raise UsageError(
                f"{option}: {part!r} is not KEY=VALUE with KEY one of "
                f"{', '.join(HOST_SPEC_KEYS)} (e.g. tflops=0.2,bw_tbs=0.02)"
            )
        _, what, lo, hi = HOST_SPEC_KEYS[key]
        try:
            v = float(text)
        except ValueError:
            raise UsageError(f"{option}: {key} must be a number (got {text.strip()!r})") from None
        if not (math.isfinite(v) and lo <= v <= hi):
            raise UsageError(f"{option}: {key} ({what}) must be in [{lo:g}, {hi:g}] (got {v:g})")
        if key in given:
            raise UsageError(
                f"{option}: {key} is given twice ({given[key]:g} and {v:g}); give it once"
            )
        given[key] = v
    for key in ("tflops", "bw_tbs"):
        if key not in given:
            raise UsageError(f"{option} needs {key} ({HOST_SPEC_KEYS[key][1]})")
    if "memory_gib" not in given:
        import psutil

        given["memory_gib"] = psutil.virtual_memory().total / GIB
    figures = {
        HOST_SPEC_KEYS[k][0]: Figure(v, source=option, date="", status="estimate")
        for k, v in given.items()
    }
    return Accelerator(
        id=name,
        name=f"{name} ({given['tflops']:g} TFLOPS, {given['bw_tbs']:g} TB/s)",
        vendor="cpu",
        kind="cpu",
        arch="",
        memory_type="DRAM",
        scale_up="none",
        aliases=(),
        figures=figures,
        origin=option,
    )


def resolve_host(host: str | None, host_spec: str | None) -> Accelerator:
    """The hardware of the sweeps: a catalog accelerator or a ``--host-spec``."""
    if (host is None) == (host_spec is None):
        raise UsageError(
            "say what the sweeps ran on: --host ACCELERATOR (a catalog entry) or "
            "--host-spec tflops=X,bw_tbs=Y (its peak FLOP/s and memory bandwidth), one of them"
        )
    return host_accelerator(host_spec) if host_spec is not None else catalog_accelerator(str(host))


def engine_of(doc: RunDoc) -> tuple[str | None, str, int | None]:
    """(engine, version, slots) of a run as its run.json records the server: the engine
    accelbench started, else what the server's own endpoints say (llama-server's /props
    has ``build_info`` and ``total_slots``; SGLang answers /server_info; vLLM /version).
    The engine is None where nothing tells."""
    srv = doc.server
    props = srv.get("props") or {}
    slots = props.get("total_slots")
    slots = slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None
    emb = srv.get("embedded")
    if emb:
        name = str(emb.get("engine"))
        return ENGINE_ALIASES.get(name, name), str(props.get("build_info", "")), slots
    if "build_info" in props or slots is not None:
        return "llama.cpp", str(props.get("build_info", "")), slots
    info, ver = srv.get("server_info") or {}, srv.get("version") or {}
    if info:
        return "sglang", str(info.get("version", "")), None
    if ver:
        return "vllm", str(ver.get("version", "")), None
    return None, "", None


@dataclass(frozen=True)
class SweepPoints:
    """The usable points of one sweep directory, and what was left out (and why)."""

    path: Path
    engine: str | None
    model: str | None  # the model name the runs recorded
    points: list[Point]
    left_out: list[str]
    # points whose run ran at another load than sweep.json's value (each fitted at its
    # run's own): store.sets.point_disagrees
    notes: list[str] = field(default_factory=list)


# The most a calibration point's figure can be: what a run can have measured (the load
# options' limits, docs/LIMITS.md), not what the fit would take without a word.
MAX_POINT_LATENCY_S = MAX_DURATION_S  # a TTFT or TPOT longer than the longest run
MAX_POINT_TOKENS = MAX_CONTEXT  # mean tokens per request (predict's --isl/--osl range)


def _figure(
    v: object, where: str, unit_scale: float = 1.0, *, hi: float = math.inf, whole: bool = False
) -> float:
    """A summary's figure: a positive finite number, at most ``hi`` after ``unit_scale``
    (and a whole number with ``whole``), else one DocumentError line naming it."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise DocumentError(f"{where}: must be a positive number (got {v!r:.40})")
    if whole and v != int(v):
        raise DocumentError(f"{where}: must be a whole number (got {v!r:.40})")
    if v * unit_scale > hi:
        limit = f"{hi / unit_scale:,.0f}"
        raise DocumentError(f"{where}: must be at most {limit} (got {v!r:.40})")
    return float(v) * unit_scale


def _stat(lat: object, key: str, where: str) -> float:
    s = lat.get(key) if isinstance(lat, dict) else None
    return _figure(
        s.get("p50") if isinstance(s, dict) else None,
        f"{where}: latency.{key}.p50",
        1e-3,
        hi=MAX_POINT_LATENCY_S,
    )


def _mean_tokens(tokens: object, key: str, done: float, where: str) -> float:
    """Mean tokens per completed request: the summary's total over its count."""
    total = _figure((tokens or {}).get(key) if isinstance(tokens, dict) else None,
                    f"{where}: tokens.{key}")  # fmt: skip
    if total / done > MAX_POINT_TOKENS:
        raise DocumentError(
            f"{where}: tokens.{key} / counts.completed = {total / done:,.3g} tokens per request; "
            f"must be at most {MAX_POINT_TOKENS:,}"
        )
    return total / done


def read_sweep_points(
    sweep_dir: Path, *, engine: str | None = None, host: str = "host", precision: str = "fp16"
) -> SweepPoints:
    """The completed points of ``sweep_dir`` as calibration points. ``engine`` overrides
    what the runs say. A damaged file is one DocumentError line (file and field)."""
    doc = read_sweep(sweep_dir, str(sweep_dir / SWEEP_JSON))
    if doc.kind != "concurrency":
        raise AccelbenchError(
            f"{sweep_dir}: a {doc.kind} sweep; calibration needs concurrency sweeps (a closed "
            "loop of users, as the step model predicts)"
        )
    from accelbench.store.reader import load_run
    from accelbench.store.sets import point_disagrees

    points, left, notes, engines, models = [], [], [], set(), set()
    for sp in doc.points:
        label = f"{sweep_dir.name}: point {sp.value:g}"
        if sp.status != "completed":
            left.append(f"{label}: {sp.status}" + (f" ({sp.reason})" if sp.reason else ""))
            continue
        rdir = sweep_dir / sp.dir
        run = read_run_doc(rdir)
        summary, _ = read_summary(rdir)
        if (said := point_disagrees(doc.kind, sp.value, sp.dir, load_run(rdir))) is not None:
            notes.append(f"{sweep_dir.name}: {said}")
        where = str(rdir / "summary.json")
        eng, version, slots = engine_of(run)
        if engine is None and eng is None:
            raise AccelbenchError(
                f"{rdir / 'run.json'}: the server does not say which engine it is: give "
                "--calibrate-engine"
            )
        eng = engine or eng
        engines.add(eng)
        model = run.config.get("model") or next(iter(run.server.get("models") or []), None)
        models.add(str(model))
        counts, tokens = summary.get("counts"), summary.get("tokens")
        done = _figure((counts or {}).get("completed"), f"{where}: counts.completed", whole=True)
        isl = _mean_tokens(tokens, "input", done, where)
        osl = _mean_tokens(tokens, "output", done, where)
        conc = run.config.get("concurrency")
        conc = (summary.get("client") or {}).get("target_concurrency") or conc
        thr = (summary.get("throughput") or {}).get("total_tokens_per_s_per_gpu")
        gpus = int(summary.get("gpus", 1))
        points.append(
            Point(
                hardware=host,
                engine=str(eng),
                engine_version=version or "not recorded",
                model=str(model),
                precision=precision,
                layout=Layout(gpus),
                isl=max(1, round(isl)),
                osl=max(1, round(osl)),
                concurrency=int(
                    _figure(
                        conc, f"{where}: client.target_concurrency", hi=MAX_CONCURRENCY, whole=True
                    )  # fmt: skip
                ),
                throughput_per_gpu=_figure(thr, f"{where}: throughput.total_tokens_per_s_per_gpu"),
                ttft_s=_stat(summary.get("latency"), "ttft_ms", where),
                tpot_s=_stat(summary.get("latency"), "tpot_ms", where),
                date=(run.started_at or "")[:10],
                source=str(rdir),
                run_url="",
                max_batch=slots or DEFAULT_MAX_BATCH,
            )
        )
    if len(engines) > 1:
        raise AccelbenchError(
            f"{sweep_dir}: runs of two engines in one sweep ({', '.join(sorted(str(e) for e in engines))})"
        )
    return SweepPoints(
        sweep_dir,
        next(iter(engines), None),
        next(iter(models), None) if len(models) == 1 else None,
        points,
        left,
        notes,
    )


def find_sweeps(path: Path) -> list[Path]:
    """``path`` if it is a sweep directory, else the sweep directories right inside it
    (``accelbench sweep --isl-osl`` writes one per pair)."""
    if not path.exists():
        raise AccelbenchError(f"{path}: no such directory")
    if not path.is_dir():
        raise AccelbenchError(f"{path}: not a sweep directory")
    if (path / SWEEP_JSON).exists():
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and (p / SWEEP_JSON).exists())
    if not found:
        raise AccelbenchError(
            f"{path}: no sweeps here (no {SWEEP_JSON} in it or in its subdirectories; "
            "make them with accelbench sweep)"
        )
    return found


@dataclass(frozen=True)
class Calibration:
    """Factors refitted on the user's own sweeps, and how far they were off there."""

    engine: str
    host: Accelerator
    model: ModelArch
    precision: str
    kv_precision: str
    points: list[Point]
    eff: Efficiency
    residuals: dict[str, tuple[float, float]]  # metric -> (least, largest) log(meas / pred)
    public_spread: dict[str, tuple[float, float, int]]  # metric -> (q10, q90, n), pooled LOSO
    sweeps: list[str]
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # SweepPoints.notes, every sweep's
    # points measured faster than the host's figures allow: the fit holds its shares at
    # 100 % of peak there, so the figures (or the model's work) are not the host's
    beyond_limit: list[str] = field(default_factory=list)

    def interval(self, metric: str) -> tuple[float, float]:
        """The transfer's log interval of ``metric``: the refit's residual range plus the
        public fit's cross-accelerator spread, each widened to contain 0."""
        r_lo, r_hi = self.residuals[metric]
        p_lo, p_hi, _ = self.public_spread[metric]
        return min(0.0, r_lo) + min(0.0, p_lo), max(0.0, r_hi) + max(0.0, p_hi)

    def factors(self, target: Accelerator, precision: str) -> Factors:
        """A ``Factors`` holding the refit (for ``predict_point``), its coverage the
        user's points, its intervals the transfer's."""
        fitted = Fitted(
            f"{self.host.id}|{self.engine}|{self.precision}",
            "calibrated on your sweeps",
            self.eff,
            len(self.points),
        )
        iv = {m: (*self.interval(m), len(self.points)) for m in METRICS}
        pts = self.points
        return Factors(
            fitted={f"{target.id}|{self.engine}|{precision.lower()}": fitted, "*": fitted},
            intervals={target.id: iv, "*": iv},
            models=(model_id(self.model),),
            precisions=(self.precision,),
            engines=(self.engine,),
            accelerators=(self.host.id,),
            isl_range=(min(p.isl for p in pts), max(p.isl for p in pts)),
            osl_range=(min(p.osl for p in pts), max(p.osl for p in pts)),
            concurrency_range=(min(p.concurrency for p in pts), max(p.concurrency for p in pts)),
            calibration_sha256="",
        )


def calibrate(
    sweep_dirs: Sequence[str | Path],
    host: Accelerator,
    *,
    model: str | ModelArch | None = None,
    engine: str | None = None,
    precision: str = "fp16",
    kv_precision: str = "fp16",
) -> Calibration:
    """Refit the four factors on every completed point of ``sweep_dirs`` (sweep
    directories, or directories holding them), measured on ``host``. ``model``: the
    sweeps' model (a catalog id or a config.json; default: the name the runs recorded,
    which must then be in the catalog); ``engine`` overrides the engine the runs say."""
    if not sweep_dirs:
        raise UsageError("give at least one sweep directory to --calibrate")
    sets: list[SweepPoints] = []
    for d in sweep_dirs:
        for s in find_sweeps(Path(d)):
            sets.append(read_sweep_points(s, engine=engine, host=host.id, precision=precision))
    engines = {s.engine for s in sets if s.engine}
    if len(engines) > 1:
        which = "; ".join(f"{s.path} ({s.engine})" for s in sets if s.engine)
        raise AccelbenchError(
            f"sweeps from two engines mixed: {which}; calibrate one engine at a time"
        )
    points = [p for s in sets for p in s.points]
    left = [x for s in sets for x in s.left_out]
    notes = [x for s in sets for x in s.notes]
    if len(points) < MIN_CALIBRATION_POINTS:
        raise AccelbenchError(
            f"{len(points)} completed point(s) in {', '.join(str(s.path) for s in sets)}: the "
            f"refit needs at least {MIN_CALIBRATION_POINTS}"
            + (f" (left out: {'; '.join(left)})" if left else "")
        )
    if model is None:
        names = {s.model for s in sets}
        if len(names) != 1 or None in names:
            raise UsageError("the sweeps name several models: give --calibrate-model")
        model = str(next(iter(names)))
    try:
        arch = model if isinstance(model, ModelArch) else resolve_model(model)
    except AccelbenchError as exc:
        raise UsageError(
            f"the sweeps' model: {exc} (give --calibrate-model: a catalog id or config.json)"
        ) from None
    for p in points:  # a point of another catalog model: not this model's data
        try:
            recorded = find_model(p.model).arch
        except AccelbenchError:
            continue  # a name the catalog does not know: --calibrate-model says what it is
        if not recorded.same_architecture(arch):
            raise UsageError(
                f"{Path(p.source) / 'run.json'}: a run of {p.model}, not of the model "
                f"calibrated ({arch.name}): calibrate one model at a time"
            )
    for p in points:  # a point the host cannot hold: name it (the fit would not)
        sm = RooflineStepModel(arch, host, p.precision, p.layout, Efficiency(1, 1, 0), kv_precision)
        if sm.kv_fit(p.isl + p.osl) < 1:
            raise AccelbenchError(
                f"{Path(p.source) / 'summary.json'}: a request of {p.isl:,} + {p.osl:,} tokens "
                f"(its mean lengths) does not fit the host: {sm.memory_arithmetic(p.isl + p.osl)}"
            )
    beyond = [b for p in points if (b := _beyond_limit(p, arch, host, kv_precision))]
    prep = prepare(points, kv_precision, resolve=lambda p: (arch, host))
    idx = np.arange(len(points))
    eff = fit_factors(prep, idx)
    # how far off the refit is: in sample, and on each point left out of its own refit
    parts = [np.log(prep.meas / predict_prepared(prep, idx, eff))]
    for i in idx:
        rest = idx[idx != i]
        held = predict_prepared(prep, np.array([i]), fit_factors(prep, rest))
        parts.append(np.log(prep.meas[[i]] / held))
    resid = np.concatenate(parts)
    residuals = {
        m: (float(resid[:, i].min()), float(resid[:, i].max())) for i, m in enumerate(METRICS)
    }
    public = shipped_factors().intervals["*"]
    return Calibration(
        engine=next(iter(engines)) if engines else str(engine),
        host=host,
        model=arch,
        precision=precision.lower(),
        kv_precision=kv_precision,
        points=points,
        eff=eff,
        residuals=residuals,
        public_spread=dict(public),
        sweeps=[str(s.path) for s in sets],
        left_out=left,
        notes=notes,
        beyond_limit=beyond,
    )


def _beyond_limit(p: Point, arch: ModelArch, host: Accelerator, kv_precision: str) -> str:
    """Why ``p`` beats the host's physical limit (its throughput above the roofline at
    the most sequences it can run, or its TPOT below one decode step of a single
    sequence at peak), or "" when it does not. Not refused: prefix caching or
    speculative decoding do legitimately beat a roofline that counts every token's
    work; but the figures then do not describe the host, and the fit cannot match them."""
    sm = RooflineStepModel(arch, host, p.precision, p.layout, Efficiency(1, 1, 0), kv_precision)
    isl, osl = max(1, round(p.isl)), max(1, round(p.osl))
    most = physical_limits(sm, isl, osl, max(1, min(p.concurrency, p.max_batch)))
    least = physical_limits(sm, isl, osl, 1)
    where = Path(p.source) / "summary.json"
    if p.throughput_per_gpu > most.throughput_per_gpu:
        return (
            f"{where}: {p.throughput_per_gpu:,.4g} tok/s per GPU, above the host's physical "
            f"limit of {most.throughput_per_gpu:,.4g} at {min(p.concurrency, p.max_batch)} "
            "running"
        )
    if p.tpot_s < least.tpot_s:
        return (
            f"{where}: TPOT {p.tpot_s * 1e3:.4g} ms, below the host's physical limit of "
            f"{least.tpot_s * 1e3:.4g} ms (one decode step of one sequence at peak)"
        )
    return ""


def predict_calibrated(
    cal: Calibration,
    model: str | ModelArch | None,
    accelerator: Accelerator,
    layout: Layout,
    isl: int,
    osl: int,
    target: Target,
    *,
    precision: str | None = None,
    kv_precision: str | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
) -> Prediction:
    """``predict_point`` with the factors of ``cal`` and the transfer's intervals.
    ``model`` defaults to the sweeps' model, the precisions to theirs."""
    prec = precision or cal.precision
    pred = predict_point(
        cal.model if model is None else model,
        accelerator,
        layout,
        isl,
        osl,
        target,
        engine=cal.engine,
        precision=prec,
        kv_precision=kv_precision or cal.kv_precision,
        max_batch=max_batch,
        factors=cal.factors(accelerator, prec),
    )
    lo = min(min(p.concurrency, p.max_batch) for p in cal.points)
    hi = max(min(p.concurrency, p.max_batch) for p in cal.points)
    extrap = list(pred.extrapolation)
    if not lo <= pred.running <= hi:
        extrap.append(f"running batch {pred.running} outside the calibrated {lo}-{hi}")
    notes = [
        f"factors refitted on {len(cal.points)} points of your sweeps on {cal.host.name} "
        f"({cal.engine}); interval: the refit's residual range plus the public fit's "
        "cross-accelerator spread (docs/PREDICT.md)",
        *pred.notes,
    ]
    return replace(pred, notes=tuple(notes), extrapolation=tuple(extrap))
