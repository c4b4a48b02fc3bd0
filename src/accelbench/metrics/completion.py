"""A journal row completed into a request record: token counts with their sources, then
the derived figures. Used when a run is finalised (runner/finalize.py) and when a run
killed before its summary is read (store/reader.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from accelbench.metrics.records import (
    FIELD_NAMES,
    SOURCE_CHUNKS,
    SOURCE_PLANNED,
    SOURCE_SERVER,
    SOURCE_TOKENIZER,
    RequestRecord,
    RequestRow,
)


class Encoder(Protocol):
    """What counting tokens needs of a tokenizer (accelbench.workload.tokenizer)."""

    def encode(self, text: str) -> list[int]: ...


def complete_row(row: Mapping[str, object], tok: Encoder | None, save_text: bool) -> RequestRow:
    """Token counts with their sources, then the derived figures (METRICS.md order of
    preference: server usage, client tokenizer, chunk count). A journal line's values are
    as the JSON held them: a wrong type raises here or in Arrow (``records_to_table``),
    and the caller counts the line as bad."""
    fields: dict[str, Any] = {k: row.get(k) for k in FIELD_NAMES if k in row}
    rec = RequestRecord(**fields)
    rec.chunk_times = rec.chunk_times or []
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
    if rec.isl is None and rec.isl_planned is not None:
        rec.isl, rec.isl_source = rec.isl_planned, SOURCE_PLANNED
    if not save_text:
        rec.output_text = None
    rec.derive()
    return rec.to_row()
