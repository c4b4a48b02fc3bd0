"""The one-shot health check behind ``accelbench health``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from accelbench.health.rules import HealthConfig, evaluate
from accelbench.telemetry.parsers import parse_file
from accelbench.telemetry.sampler import collect
from accelbench.telemetry.sources import close_sources, open_sources


def check_live(
    sources: list[str] | None = None,
    server_url: str | None = None,
    server_pid: int | None = None,
    duration_s: float = 3.0,
    interval_s: float = 1.0,
    config: HealthConfig | None = None,
) -> dict[str, Any]:
    """Sample the available sources for ``duration_s`` and evaluate the rules.

    Returns ``{"sources": {...}, "samples": n, "health": {...}}``.
    """
    active, status = open_sources(sources, server_url, server_pid)
    rows: list[dict[str, Any]] = []
    errors: dict[str, dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + max(duration_s, 0.0)
        while True:
            rows.extend(collect(active, None, errors))
            if time.monotonic() + interval_s > deadline:
                break
            time.sleep(interval_s)
    finally:
        close_sources(active)
    health = evaluate(rows, None, None, config)
    return {"sources": status, "samples": len(rows), "errors": errors, "health": health}


def check_file(
    path: Path, fmt: str | None = None, config: HealthConfig | None = None
) -> dict[str, Any]:
    """Evaluate the rules on a captured tool output (one sample per device)."""
    rows = parse_file(path, fmt)
    for r in rows:
        r["t_ns"] = 0
    health = evaluate(rows, None, None, config)
    return {"sources": {str(path): "ok"}, "samples": len(rows), "errors": {}, "health": health}
