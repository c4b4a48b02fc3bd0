"""A journal row completed into a request record: token counts with their sources, then
the derived figures. Used when a run is finalised (runner/finalize.py) and when a run
killed before its summary is read (store/reader.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.metrics.records import (
    FIELD_NAMES,
    MAX_STAMP_AGE_NS,
    SOURCE_CHUNKS,
    SOURCE_PLANNED,
    SOURCE_SERVER,
    SOURCE_TOKENIZER,
    RequestRecord,
    RequestRow,
)

if TYPE_CHECKING:
    import numpy as np


class Encoder(Protocol):
    """What counting tokens needs of a tokenizer (accelbench.workload.tokenizer)."""

    def encode(self, text: str) -> list[int]: ...


def complete_row(row: Mapping[str, object], tok: Encoder | None, save_text: bool) -> RequestRow:
    """Token counts with their sources, then the derived figures (METRICS.md order of
    preference: server usage, client tokenizer, chunk count). A journal line's values are
    as the JSON held them: a wrong type raises here or in Arrow (``records_to_table``),
    and the caller counts the line as bad; so do times that cannot be (``check_marks``)."""
    fields: dict[str, Any] = {k: row.get(k) for k in FIELD_NAMES if k in row}
    rec = RequestRecord(**fields)
    check_marks(rec)
    rec.chunk_times = rec.chunk_times or []
    count_output(rec, tok)
    if rec.isl is None and rec.isl_planned is not None:
        rec.isl, rec.isl_source = rec.isl_planned, SOURCE_PLANNED
    if not save_text:
        rec.output_text = None
    rec.derive()
    return rec.to_row()


def count_output(rec: RequestRecord, tok: Encoder | None) -> None:
    """A record's output count and its source, METRICS.md's order of preference: the
    server's usage (a count the client rejected is None by now: ``usage_rejected``), else
    the client tokenizer's count of the text, else the content chunks. The one rule for
    the run's summary (``complete_row``) and a soak's windows (``stress.common.slim``)."""
    rec.n_chunks = len(rec.chunk_times)
    text = rec.output_text
    client = None
    client_src = None
    if text and tok is not None:
        try:
            client = len(tok.encode(text))
            client_src = SOURCE_TOKENIZER
        except Exception:  # noqa: BLE001 - a tokenizer failure must not lose the record
            client = None
    if client is None and rec.ok:
        client, client_src = rec.n_chunks, SOURCE_CHUNKS
    rec.osl_client = client
    if rec.osl_server is not None:
        rec.osl, rec.osl_source = int(rec.osl_server), SOURCE_SERVER
        if client is not None:
            rec.osl_mismatch = int(rec.osl_server) - int(client)
    elif client is not None:
        rec.osl, rec.osl_source = client, client_src


# A request's marks in the order of its timeline (docs/METRICS.md), each where observed.
_TIMELINE = ("t_sched", "t_send", "t_headers", "t_first", "t_last", "t_done")


def check_marks(rec: RequestRecord) -> None:
    """Raise ValueError where a record cannot be one a run wrote: an ``idx`` (its place in
    the plan, what identifies it) that is not a whole number, a time below 0 (client-
    monotonic nanoseconds count from boot), or marks out of their timeline's order
    (scheduled, sent, headers, first chunk, last chunk, done; the first and last chunk
    times at or after the send) by more than a kernel stamp can be off (``MAX_STAMP_AGE_NS``: a step of the
    wall clock). Such records gave negative TTFTs and schedule lags as measurements."""
    if type(rec.idx) is not int:
        raise ValueError(f"idx must be a whole number (got {rec.idx!r:.40})")
    if rec.t_sched < 0 or rec.t_send < 0:
        raise ValueError("t_sched and t_send must not be below 0")
    marks = (rec.t_sched, rec.t_send, rec.t_headers, rec.t_first, rec.t_last, rec.t_done)
    latest, at = marks[0], 0
    for i in range(1, 6):
        t = marks[i]
        if t is not None:
            if t < latest - MAX_STAMP_AGE_NS:
                raise ValueError(f"{_TIMELINE[i]} is before {_TIMELINE[at]}")
            if t >= latest:
                latest, at = t, i
    chunks = rec.chunk_times  # the first and last (a min over all of them: +15% CPU)
    if chunks and min(chunks[0], chunks[-1]) < rec.t_send - MAX_STAMP_AGE_NS:
        raise ValueError("a chunk time is before t_send")


def first_of_each(idx: Any) -> tuple[np.ndarray | None, int, list[int]]:
    """Where a journal repeats a record (the same ``idx``: a journal appended twice, two
    joined): the mask of each idx's first record, in the order given (None: nothing
    repeats), how many records repeat an earlier one, and the first few repeated idx.
    ``idx``: the idx column (Arrow or numpy; nulls are never repeats)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = pa.chunked_array([idx]) if isinstance(idx, pa.Array) else idx
    if isinstance(arr, pa.ChunkedArray):
        valid = np.asarray(pc.is_valid(arr), dtype=bool)
        values = np.asarray(pc.fill_null(arr, 0), dtype=np.int64)
    else:
        values = np.asarray(arr, dtype=np.int64)
        valid = np.ones(values.size, dtype=bool)
    where = np.flatnonzero(valid)
    _, first = np.unique(values[where], return_index=True)
    if first.size == where.size:
        return None, 0, []
    keep = ~valid
    keep[where[first]] = True
    repeated = values[~keep]
    return keep, int(repeated.size), [int(v) for v in dict.fromkeys(repeated[:100].tolist())][:10]
