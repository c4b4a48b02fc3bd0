"""A shadow directory: what the proxy or a replay saw, journalled as it happens so that
it survives a kill (docs/SHADOW.md).

    shadow.json      what was compared (URLs, sampling, trace) and the counters
    trace.jsonl      arrivals and request bodies (accelbench trace format; replayable)
    baseline.jsonl   one RequestRecord row per request sent to the baseline
    candidate.jsonl  one RequestRecord row per copy sent to the candidate
    verdict.json     written by ``accelbench shadow verdict``

Rows of both sides carry the trace's ``idx``: a request and its copy share it. Times are
``time.monotonic_ns`` (system-wide: the proxy and its candidate process, or the one
replay process), so both sides share a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from accelbench import __version__
from accelbench.documents import JsonObject, to_json_object
from accelbench.errors import UsageError
from accelbench.metrics.records import RequestRecord, RequestRow, record_row
from accelbench.store.rundir import Journal, read_journal, write_json_atomic
from accelbench.suites.shadow.document import (
    SCHEMA,
    SHADOW_JSON,
    SIDES,
    VERDICT,
    ShadowMeta,
    read_meta,
)
from accelbench.workload.traces import TRACE_FILE, trace_header, trace_row

__all__ = ["BASELINE", "CANDIDATE", "SCHEMA", "SHADOW_JSON", "SIDES", "VERDICT", "ShadowWriter",
           "read_shadow_dir", "read_trace_bodies"]  # fmt: skip

BASELINE = "baseline.jsonl"
CANDIDATE = "candidate.jsonl"


class ShadowWriter:
    """Opens a fresh shadow directory and journals into it."""

    def __init__(
        self, out: str | Path, meta: Mapping[str, object], journals: tuple[str, ...] = SIDES
    ) -> None:
        """``meta``: the mode, both sides (``url`` redacted, ``model``) and the mode's own
        settings, as shadow.json holds them (checked by its reader: :class:`ShadowMeta`).
        ``journals``: the sides this writer records; the others' journals are only
        created (another process writes them: the proxy's candidate process)."""
        self.dir = Path(out)
        if self.dir.exists() and (not self.dir.is_dir() or any(self.dir.iterdir())):
            raise UsageError(f"--out {self.dir} exists and is not an empty directory")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--out {self.dir} cannot be created: {exc.strerror}") from None
        self.meta = replace(
            ShadowMeta.from_json(
                to_json_object({"schema": SCHEMA, **meta}, "shadow.json"), "shadow.json (as given)"
            ),
            status="running",
            started_at=datetime.now(UTC).isoformat(),
            tool_version=__version__,
        )
        self.counters: dict[str, int] = {}
        write_json_atomic(self.dir / SHADOW_JSON, self.meta.to_json())
        self.trace = Journal(self.dir / TRACE_FILE)
        self.trace.write([trace_header(started_at=self.meta.started_at)])
        files = {"baseline": BASELINE, "candidate": CANDIDATE}
        for side in SIDES:
            (self.dir / files[side]).touch()
        self.sides = {side: Journal(self.dir / files[side]) for side in journals}
        self._saver: ThreadPoolExecutor | None = None  # save_meta_soon's writer thread
        self._saving: Future | None = None

    def add_trace(self, idx: int, offset_s: float, endpoint: str, body: JsonObject) -> None:
        self.trace.write([trace_row(idx, offset_s, endpoint, body)])

    def add_record(self, side: str, rec: RequestRecord) -> None:
        self.sides[side].write([record_row(rec)])

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def tick(self) -> None:
        """Hand buffered lines to the OS (call every few hundred ms)."""
        self.trace.flush_if_due()
        for j in self.sides.values():
            j.flush_if_due()

    def save_meta(self, *, status: str | None = None, ended_at: str | None = None,
                  listen: str | None = None) -> None:  # fmt: skip
        m = self.meta
        m.status = status or m.status
        m.ended_at = ended_at or m.ended_at
        m.listen = listen or m.listen
        m.counters = dict(self.counters)
        write_json_atomic(self.dir / SHADOW_JSON, m.to_json())

    def save_meta_soon(self) -> None:
        """``save_meta`` with the counters as they are now, written (and fsynced) by a
        thread of its own: an event loop that calls this never waits on the disk. Why:
        the proxy saved shadow.json every 2 s on its loop, and each fsync (11 ms on
        average on the shared 2-core host, more when its disk is busy) stalled every
        caller's stream for as long. One save at a time; while one is under way the call
        is skipped (the next one carries the newer counters). ``close`` waits for it."""
        if self._saving is not None and not self._saving.done():
            return
        if self._saver is None:
            self._saver = ThreadPoolExecutor(1, thread_name_prefix="shadow-meta")
        self.meta.counters = dict(self.counters)
        doc = self.meta.to_json()  # built here: the thread only writes
        self._saving = self._saver.submit(write_json_atomic, self.dir / SHADOW_JSON, doc)

    def close(self, status: str) -> None:
        if self._saver is not None:  # an earlier save must not land after the last one
            self._saver.shutdown(wait=True)
            self._saver = None
        self.trace.close()
        for j in self.sides.values():
            j.close()
        self.save_meta(status=status, ended_at=datetime.now(UTC).isoformat())


def read_shadow_dir(
    path: str | Path, unreadable: dict[str, int] | None = None
) -> tuple[ShadowMeta, dict[str, list[RequestRow]]]:
    """shadow.json (typed) and both sides' completed rows (token counts and derived figures
    filled as ``accelbench summarize`` does). Lines that are not a record of the right
    shape (a torn last write, damage, wrong types, no ``idx`` or ``t_sched``, times that
    cannot be, a repeat of an earlier record's ``idx``) are skipped; their number per
    journal goes to ``unreadable`` if given."""
    from accelbench.runner.finalize import complete_table

    d = Path(path)
    if not d.is_dir():
        raise UsageError(f"{d} is not a shadow directory")
    meta = read_meta(d)
    rows: dict[str, list[RequestRow]] = {}
    for side, name in (("baseline", BASELINE), ("candidate", CANDIDATE)):
        raw, bad = read_journal(d / name)
        table, wrong, repeated, _ = complete_table(raw, None, True)  # as summarize does
        # the table has RequestRow's columns and types (records_to_table's schema)
        full = cast(list[RequestRow], table.to_pylist())
        done = [r for r in full if r["idx"] is not None and r["t_sched"] is not None]
        rows[side] = done
        lost = bad + wrong + repeated + table.num_rows - len(done)
        if unreadable is not None and lost:
            unreadable[name] = lost
    return meta, rows


def read_trace_bodies(path: str | Path) -> dict[int, JsonObject]:
    """idx -> recorded request body, from the directory's trace.jsonl."""
    p = Path(path) / TRACE_FILE
    if not p.is_file():
        return {}
    rows, _ = read_journal(p)
    return {
        r["idx"]: r["body"]
        for r in rows
        if isinstance(r.get("idx"), int) and isinstance(r.get("body"), dict)
    }
