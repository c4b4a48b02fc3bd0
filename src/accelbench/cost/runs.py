"""Read what cost and plan need from run directories (summary.json) and sweeps.

A run directory holds ``summary.json`` (docs/RESULTS.md). A sweep directory is a
directory whose subdirectories are run directories.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import AccelbenchError


@dataclass(frozen=True)
class RunPoint:
    """One run's throughput per GPU, interactivity, load and (optional) measured energy:
    ``j_per_token`` per total (input + output) token, ``j_per_output_token``; both from
    the accelerators' measured energy in the window (no facility overhead)."""

    path: str
    gpus: int
    total_tok_s_per_gpu: float
    input_tok_s_per_gpu: float | None
    output_tok_s_per_gpu: float | None
    interactivity: float | None
    concurrency: float | None
    mean_isl: float | None
    mean_osl: float | None
    j_per_token: float | None
    j_per_output_token: float | None = None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a directory holding summary.json."""
    return (Path(path) / "summary.json").is_file()


def is_sweep_dir(path: str | Path) -> bool:
    """True when ``path`` is a directory with at least one run directory inside."""
    p = Path(path)
    return p.is_dir() and not is_run_dir(p) and any(is_run_dir(c) for c in p.iterdir())


def load_run(path: str | Path) -> RunPoint:
    """Read one run's summary.json. Missing throughput raises AccelbenchError naming the
    field; a missing ``energy`` block (no telemetry) gives ``j_per_token=None``."""
    p = Path(path)
    f = p / "summary.json"
    try:
        s = json.loads(f.read_text())
    except FileNotFoundError as exc:
        raise AccelbenchError(f"{p} is not a run directory (no summary.json)") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise AccelbenchError(f"cannot read {f}: {exc}") from exc
    thr = s.get("throughput") or {}
    total = _num(thr.get("total_tokens_per_s_per_gpu"))
    if total is None:
        raise AccelbenchError(f"{f}: missing field throughput.total_tokens_per_s_per_gpu")
    gpus = s.get("gpus", 1)
    if not isinstance(gpus, int) or gpus < 1:
        raise AccelbenchError(f"{f}: field gpus must be a positive integer (got {gpus!r})")
    inter = _num((s.get("interactivity") or {}).get("tok_s_user"))
    client = s.get("client") or {}
    conc = _num(client.get("target_concurrency"))
    counts = s.get("counts") or {}
    tokens = s.get("tokens") or {}
    completed = _num(counts.get("completed"))
    isl = osl = None
    if completed and completed > 0:
        if _num(tokens.get("input")) is not None:
            isl = float(tokens["input"]) / completed
        if _num(tokens.get("output")) is not None:
            osl = float(tokens["output"]) / completed
    energy = s.get("energy") or None
    jpt = jpo = None
    if isinstance(energy, dict):
        # telemetry writes j_per_total_token / j_per_output_token (accelbench.telemetry);
        # the short form {joules, tokens, j_per_token} is read too
        jpt = _num(energy.get("j_per_total_token"))
        if jpt is None:
            jpt = _num(energy.get("j_per_token"))
        if jpt is None:
            joules, toks = _num(energy.get("joules")), _num(energy.get("tokens"))
            if joules is not None and toks:
                jpt = joules / toks
        jpo = _num(energy.get("j_per_output_token"))
    return RunPoint(
        path=str(p),
        gpus=gpus,
        total_tok_s_per_gpu=total,
        input_tok_s_per_gpu=_num(thr.get("input_tokens_per_s_per_gpu")),
        output_tok_s_per_gpu=_num(thr.get("output_tokens_per_s_per_gpu")),
        interactivity=inter,
        concurrency=conc,
        mean_isl=isl,
        mean_osl=osl,
        j_per_token=jpt,
        j_per_output_token=jpo,
    )


def load_sweep(path: str | Path) -> list[RunPoint]:
    """Every run directory directly inside ``path``, sorted by name."""
    p = Path(path)
    if not p.is_dir():
        raise AccelbenchError(f"no such directory: {p}")
    runs = [load_run(c) for c in sorted(p.iterdir()) if is_run_dir(c)]
    if not runs:
        raise AccelbenchError(f"{p} holds no run directories (subdirectories with summary.json)")
    return runs
