"""The one-shot health check behind ``accelbench health``.

Unknown is never healthy: the verdict is ``unknown`` (not ``pass``) when there are no
samples, when a capture lost data (cut short, values that are not numbers), or when a GPU
reports no temperature or no memory-error counters (ECC / row remapping) - without them
the rules cannot say the GPU is fine. ``fail`` findings still win over ``unknown``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import NotRequired, TypedDict

from accelbench.health.rules import (
    Health,
    HealthConfig,
    evaluate,
    lost_reasons,
    mark_unknown,
    missing_signals,
)
from accelbench.lifetime import noted_stops
from accelbench.telemetry.parsers import read_capture
from accelbench.telemetry.sampler import SourceErrors, collect
from accelbench.telemetry.schema import Row
from accelbench.telemetry.sources import close_sources, open_sources


class HealthCheck(TypedDict):
    """What ``accelbench health`` prints (``--json``) and judges its exit status by."""

    sources: dict[str, str]  # each source and its state (or a capture's format)
    samples: int
    errors: dict[str, SourceErrors]  # a source that raised: its count and last error
    health: Health
    format: NotRequired[str]  # a capture: its format, the data lost and the parser's notes
    lost: NotRequired[list[str]]
    notes: NotRequired[list[str]]
    interrupted: NotRequired[str]  # live: a stop signal ended the sampling (what it got)


def judge(rows: list[Row], lost: list[str], config: HealthConfig | None = None) -> Health:
    """:func:`evaluate` plus what could not be judged: the verdict becomes ``unknown``
    (unless a rule failed) when there are no samples, data was lost, or a GPU lacks a
    required signal. ``health["unknown"]`` lists why."""
    unknown = []
    if not rows:
        unknown.append("no samples: nothing was measured")
    unknown += lost_reasons(lost)
    unknown += missing_signals(rows)
    return mark_unknown(evaluate(rows, None, None, config), unknown)


def check_live(
    sources: list[str] | None = None,
    server_url: str | None = None,
    server_pid: int | None = None,
    duration_s: float = 3.0,
    interval_s: float = 1.0,
    config: HealthConfig | None = None,
) -> HealthCheck:
    """Sample the available sources for ``duration_s`` and evaluate the rules.

    Returns ``{"sources": {...}, "samples": n, "health": {...}}``.
    """
    from accelbench import validate as v

    v.number("--duration", duration_s, 0, 86400.0, unit="s")
    v.number("--interval", interval_s, 0.05, 3600.0, unit="s")
    (config or HealthConfig()).validate()
    if server_url is not None:
        from accelbench.validate import check_url

        check_url(server_url, "--server-url")
    v.optional_integer("--pid", server_pid, 1, 1 << 22)  # Linux's largest pid_max
    active, status = open_sources(sources, server_url, server_pid)
    rows: list[Row] = []
    lost: list[str] = []  # what a source could not read (a tool's damaged reading)
    errors: dict[str, SourceErrors] = {}
    start = time.monotonic()
    stopped: str | None = None
    try:
        deadline = start + max(duration_s, 0.0)
        while True:
            got = collect(active, None, errors)
            with noted_stops():  # a sample is kept whole, or not at all
                rows.extend(got)
                lost += [x for src in active for x in src.lost() if x not in lost]
            if time.monotonic() + interval_s > deadline:
                break
            time.sleep(interval_s)
    except KeyboardInterrupt as exc:  # a stop: the samples taken so far are judged
        if not rows:
            raise  # nothing to keep (exit 130)
        stopped = (
            f"{str(exc) or 'SIGINT'} after {time.monotonic() - start:.1f} s of {duration_s:g} s"
        )
    finally:
        with noted_stops():  # a second stop does not cut the sources' closing short
            close_sources(active)
    with noted_stops():  # nor the judging of what was sampled
        health = judge(rows, lost, config)
    out: HealthCheck = {"sources": status, "samples": len(rows), "errors": errors,
                        "health": health}  # fmt: skip
    if stopped is not None:
        out["interrupted"] = stopped
    return out


def check_file(
    path: Path, fmt: str | None = None, config: HealthConfig | None = None
) -> HealthCheck:
    """Evaluate the rules on a captured tool output (one sample per device)."""
    (config or HealthConfig()).validate()
    cap = read_capture(path, fmt)
    for r in cap.rows:
        r["t_ns"] = 0
    health = judge(cap.rows, cap.lost, config)
    return {
        "sources": {str(path): cap.format},
        "format": cap.format,
        "samples": len(cap.rows),
        "lost": cap.lost,
        "notes": cap.notes,
        "errors": {},
        "health": health,
    }
