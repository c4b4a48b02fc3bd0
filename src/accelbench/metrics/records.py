"""One request's record: every timeline mark of docs/METRICS.md plus what is needed to
recompute any metric later (every content chunk's arrival time and token count).

Times are client-monotonic nanoseconds (``time.monotonic_ns()``, one clock for every
process on the machine). Derived per-request figures (ttft_ms, ...) are stored too so
that queries over Parquet need no arithmetic, but they are always recomputable from the
marks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypedDict

# A kernel receive stamp is on the wall clock: one converted across a step of that clock
# is off by the step (docs/METRICS.md "Arrival"). The client takes a stamp only within this
# of its read (client/http1.py), so a chunk's time is never earlier than the truth by more:
# a record's marks out of order by more than this cannot come from a run (completion.py).
MAX_STAMP_AGE_NS = 60_000_000_000

# Where a token count came from.
SOURCE_SERVER = "server_usage"
SOURCE_TOKENIZER = "client_tokenizer"
SOURCE_CHUNKS = "chunk_count"
SOURCE_PLANNED = "planned"


class ErrorKind(StrEnum):
    """Why a request failed (docs/METRICS.md "Errors"). A ``StrEnum``: each member is its
    value, so a record's ``error_kind`` is stored and read back as the same string, and
    code compares with the members (checked by mypy) instead of string literals."""

    HTTP_429 = "http_429"
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    HTTP_OTHER = "http_other"
    TIMEOUT = "timeout"
    DISCONNECT = "disconnect"
    MALFORMED_STREAM = "malformed_stream"
    MALFORMED_USAGE = "malformed_usage"
    SERVER_ERROR_EVENT = "server_error_event"
    EMPTY_RESPONSE = "empty_response"
    CONNECT_ERROR = "connect_error"
    CLIENT_EXCEPTION = "client_exception"
    INTERRUPTED = "interrupted"
    # a 4xx whose message says the prompt and max_tokens exceed the model's context
    # (a session's history grown too long): counted apart from other 4xx
    CONTEXT_EXCEEDED = "context_exceeded"


# Every error kind's value, in the order of docs/METRICS.md.
ERROR_KINDS: tuple[str, ...] = tuple(k.value for k in ErrorKind)


@dataclass(slots=True)
class RequestRecord:
    """Everything measured about one request. ``None`` means "not observed"."""

    idx: int  # position in the run's request plan
    worker: int = 0
    warmup: bool = False
    request_id: str = ""
    t_sched: int = 0
    t_send: int = 0
    t_headers: int | None = None  # response status line and headers received
    t_first: int | None = None
    t_last: int | None = None
    t_done: int | None = None
    chunk_times: list[int] = field(default_factory=list)  # arrival of every content chunk
    chunk_tokens: list[int] | None = None  # tokens per content chunk where the server says
    n_chunks: int = 0
    isl: int | None = None
    isl_source: str | None = None
    isl_planned: int | None = None  # what the workload asked for (client tokenizer)
    osl: int | None = None
    osl_source: str | None = None
    osl_server: int | None = None
    osl_client: int | None = None  # client tokenizer count of the output text, else chunks
    osl_mismatch: int | None = None  # osl_server - osl_client, where both exist
    max_tokens: int | None = None
    ok: bool = False
    error_kind: ErrorKind | None = None
    http_status: int | None = None
    error: str | None = None
    finish_reason: str | None = None
    retries: int = 0
    output_text: str | None = None
    # derived, milliseconds
    schedule_lag_ms: float | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    tail_ms: float | None = None
    tpot_ms: float | None = None
    ntpot_ms: float | None = None
    # sessions and prefix caching (docs/WORKLOADS.md); appended last: older journals
    # and tables without them read as None
    session: int | None = None  # the session this request is a turn of
    turn: int | None = None  # its turn in the session, from 0
    cached_tokens: int | None = None  # prompt tokens the server served from its cache
    turn_tokens: int | None = None  # tokens a history turn adds (the rest is history)
    prefix_group: int | None = None  # the shared system prompt it starts with
    prefix_tokens: int | None = None  # that prompt's length in the server's tokens
    blocks: list[int] | None = None  # the prompt's block identities (trace hash_ids)
    # a server token count that cannot be true (METRICS.md): what it said, not used
    usage_rejected: str | None = None
    # the turns its session was planned with: a session the run stopped before its last
    # turn has fewer records (neither completed nor ended early)
    session_turns: int | None = None

    def interrupt(self, why: str) -> None:
        """Stopped before it finished (a stop signal, a caller gone): an interrupted
        record, unless it had already failed some other way (that error stands)."""
        if self.error_kind is None:
            self.ok = False
            self.error_kind = ErrorKind.INTERRUPTED
            self.error = why

    def derive(self) -> RequestRecord:
        """Fill the derived millisecond fields from the marks (METRICS.md formulas)."""
        self.n_chunks = len(self.chunk_times)
        self.schedule_lag_ms = (self.t_send - self.t_sched) / 1e6
        if self.t_first is not None:
            self.ttft_ms = (self.t_first - self.t_send) / 1e6
        if self.t_last is not None:
            self.e2e_ms = (self.t_last - self.t_send) / 1e6
            if self.t_done is not None:
                self.tail_ms = (self.t_done - self.t_last) / 1e6
        if self.ok and self.osl and self.e2e_ms is not None and self.ttft_ms is not None:
            self.ntpot_ms = self.e2e_ms / self.osl
            if self.osl >= 2:
                self.tpot_ms = (self.e2e_ms - self.ttft_ms) / (self.osl - 1)
        return self

    def to_row(self) -> RequestRow:
        return record_row(self)  # type: ignore[return-value]  # every field, in order


class RequestRow(TypedDict):
    """A record as one journal line and one requests.parquet row: the fields of
    :class:`RequestRecord`, in its order (``FIELD_NAMES``; a test holds them equal)."""

    idx: int
    worker: int
    warmup: bool
    request_id: str
    t_sched: int
    t_send: int
    t_headers: int | None
    t_first: int | None
    t_last: int | None
    t_done: int | None
    chunk_times: list[int]
    chunk_tokens: list[int] | None
    n_chunks: int
    isl: int | None
    isl_source: str | None
    isl_planned: int | None
    osl: int | None
    osl_source: str | None
    osl_server: int | None
    osl_client: int | None
    osl_mismatch: int | None
    max_tokens: int | None
    ok: bool
    error_kind: str | None
    http_status: int | None
    error: str | None
    finish_reason: str | None
    retries: int
    output_text: str | None
    schedule_lag_ms: float | None
    ttft_ms: float | None
    e2e_ms: float | None
    tail_ms: float | None
    tpot_ms: float | None
    ntpot_ms: float | None
    session: int | None
    turn: int | None
    cached_tokens: int | None
    turn_tokens: int | None
    prefix_group: int | None
    prefix_tokens: int | None
    blocks: list[int] | None
    usage_rejected: str | None
    session_turns: int | None


def _schema():
    import pyarrow as pa

    i64, f64, txt = pa.int64(), pa.float64(), pa.string()
    types = {
        "idx": i64, "worker": pa.int32(), "warmup": pa.bool_(), "request_id": txt,
        "t_sched": i64, "t_send": i64, "t_headers": i64, "t_first": i64, "t_last": i64,
        "t_done": i64, "chunk_times": pa.list_(i64), "chunk_tokens": pa.list_(pa.int32()),
        "n_chunks": pa.int32(), "isl": i64, "isl_source": txt, "isl_planned": i64, "osl": i64,
        "osl_source": txt, "osl_server": i64, "osl_client": i64, "osl_mismatch": i64,
        "max_tokens": i64, "ok": pa.bool_(), "error_kind": txt, "http_status": pa.int32(),
        "error": txt, "finish_reason": txt, "retries": pa.int32(), "output_text": txt,
        "schedule_lag_ms": f64, "ttft_ms": f64, "e2e_ms": f64, "tail_ms": f64, "tpot_ms": f64,
        "ntpot_ms": f64, "session": i64, "turn": pa.int32(), "cached_tokens": i64,
        "turn_tokens": i64, "prefix_group": pa.int32(), "prefix_tokens": i64, "blocks": pa.list_(i64),
        "usage_rejected": txt, "session_turns": pa.int32(),
    }  # fmt: skip
    return pa.schema([(name, types[name]) for name in FIELD_NAMES])


# Column order = dataclass field order. pyarrow is imported lazily (load workers stay light).
FIELD_NAMES = tuple(RequestRecord.__dataclass_fields__)


def __getattr__(name: str):
    if name == "REQUEST_SCHEMA":
        return _schema()
    raise AttributeError(name)


def record_row(rec: RequestRecord) -> dict[str, Any]:
    """A plain dict of the record (cheaper than dataclasses.asdict): what the load
    workers journal, in their hot path (``RequestRecord.to_row`` is the typed row)."""
    return {f: getattr(rec, f) for f in FIELD_NAMES}


def records_to_table(rows: Sequence[Mapping[str, object]]):
    """Rows (``record_row`` dicts, or journal lines as read) to an Arrow table with the
    fixed schema: Arrow refuses a value of the wrong type."""
    import pyarrow as pa

    schema = _schema()
    cols = {name: [r.get(name) for r in rows] for name in FIELD_NAMES}
    return pa.Table.from_pydict(cols, schema=schema)
