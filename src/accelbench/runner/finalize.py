"""From the journal to requests.parquet and summary.json. Used at the end of a run and
by ``accelbench summarize`` to rebuild a run that was killed or to recompute it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from accelbench.metrics.completion import complete_row
from accelbench.metrics.records import records_to_table
from accelbench.metrics.summary import summarize
from accelbench.store.rundir import (
    JOURNAL,
    PARQUET,
    RUN_JSON,
    SUMMARY,
    read_journal,
    read_json,
    write_json_atomic,
    write_parquet_atomic,
)
from accelbench.workload.tokenizer import Tokenizer


def finalize_run(
    run_dir: Path,
    *,
    tok: Tokenizer | None = None,
    status: str | None = None,
    client: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    gpus: int | None = None,
    slo: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Write requests.parquet and summary.json from the journal; update run.json."""
    run_dir = Path(run_dir)
    meta = read_json(run_dir / RUN_JSON)
    cfg = meta.get("config", {})
    rows, bad = read_journal(run_dir / JOURNAL)
    save_text = bool(cfg.get("save_text"))
    done = [complete_row(r, tok, save_text) for r in rows]
    table = records_to_table(done)
    write_parquet_atomic(run_dir / PARQUET, table)
    status = status or meta.get("status") or "completed"
    if status == "running":
        status = "interrupted"  # the client died before it could say
    client = dict(client if client is not None else meta.get("client") or {})
    # the summary as a plain document: finalize adds sections the model leaves open
    summary: dict[str, Any] = dict(summarize(
        table,
        gpus=gpus or cfg.get("gpus") or 1,
        slo=slo if slo is not None else (cfg.get("slo") or None),
        mode="rate" if cfg.get("rate") else "concurrency",
        target_concurrency=cfg.get("concurrency") or cfg.get("max_concurrency"),
        requested_rate=cfg.get("rate"),
        client=client,
        status=status,
        planned=meta.get("planned_requests"),
    ))  # fmt: skip
    _client_health(summary, cfg)
    if bad:
        summary["journal_unreadable_lines"] = bad
    if (run_dir / SUMMARY).is_file():
        # recomputing: keep what only the live run could measure (telemetry, energy, health)
        try:
            old = read_json(run_dir / SUMMARY)
        except Exception:  # noqa: BLE001 - an unreadable old summary is simply replaced
            old = {}
        for key in ("telemetry", "energy", "health"):
            if key in old:
                summary[key] = old[key]
    if extra:
        summary.update(extra)
    write_json_atomic(run_dir / SUMMARY, summary)
    meta["status"] = status
    meta.setdefault("finished_at", datetime.now(UTC).isoformat())
    if client:
        meta["client"] = client
    write_json_atomic(run_dir / RUN_JSON, meta)
    return summary


def _client_health(summary: dict[str, Any], cfg: dict[str, Any]) -> None:
    """Achieved vs requested rate, schedule lag, CPU: say so when the client, not the
    server, was the bottleneck."""
    c = summary["client"]
    warnings: list[str] = list(c.get("warnings") or [])
    lag = summary["latency"]["schedule_lag_ms"]
    lag_p99 = lag.get("p99")
    c["schedule_lag_ms_p99"] = lag_p99
    c["mode"] = "rate" if cfg.get("rate") else "concurrency"
    c["requested_rate"] = cfg.get("rate")
    c["target_concurrency"] = cfg.get("concurrency")
    window = summary["window"]["duration_s"] or 0
    n_sent = summary["counts"]["completed"] + summary["counts"]["failed"]
    # offered rate: requests sent over the span of sends (n - 1 gaps), so long outputs
    # finishing after the last send do not make the client look slow
    span = summary["window"].get("send_span_s")
    if span:
        c["achieved_rate"] = (n_sent - 1) / span
    else:
        c["achieved_rate"] = (n_sent / window) if window > 0 else None
    bottleneck = False
    rate = cfg.get("rate")
    if rate and c["achieved_rate"] is not None and c["achieved_rate"] < 0.95 * rate:
        if not cfg.get("max_concurrency"):
            warnings.append(
                f"achieved {c['achieved_rate']:.2f} req/s of the requested {rate:g} req/s"
            )
            bottleneck = True
    if rate and lag_p99 is not None and lag_p99 > 10 and not cfg.get("max_concurrency"):
        warnings.append(f"schedule lag p99 {lag_p99:.1f} ms: requests went out late")
        bottleneck = True
    for w in c.get("workers", []):
        util = w["cpu_s"] / w["wall_s"] if w.get("wall_s") else 0
        lag = w.get("loop_lag_ms_p99", 0)
        if util > 0.9:
            warnings.append(
                f"load worker {w['worker']} used {100 * util:.0f}% of a core: "
                "add --workers or the client may be the limit"
            )
            bottleneck = True
        if lag > 5:
            # A busy worker lags because of its own work; an idle one because the OS did
            # not run it (the server or something else holds the cores).
            cause = (
                "it was busy"
                if util > 0.5
                else f"it used only {100 * util:.0f}% of a core, so other processes (the "
                "server on the same cores?) kept it waiting"
            )
            warnings.append(
                f"load worker {w['worker']} event loop lagged (p99 {lag:.1f} ms; {cause}): "
                "timestamps may be late by that much"
            )
            bottleneck = bottleneck or util > 0.5
    c["bottleneck"] = bottleneck
    c["warnings"] = warnings
