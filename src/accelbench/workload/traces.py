"""Request traces: when each request arrived and how long it was, read from the proxy's
own recordings or from public production traces, and turned into requests to replay.

Formats (``auto`` tells them apart by content, not by file name):

* ``accelbench``: the shadow proxy's ``trace.jsonl`` (a header line with
  ``"schema": "accelbench.trace/1"``, then ``{"idx", "t", "endpoint", "body"}`` per
  request; ``t`` in seconds since the first arrival). Bodies are replayed as recorded.
  A last line cut short (no newline after it: the proxy stopped mid-write) is left out
  and said in :attr:`Trace.notes`; any other line that is not JSON, in every format, is
  refused (file:line).
  A shadow directory may be given instead of the file.
* ``azure``: the Azure LLM inference trace CSV (AzurePublicDataset,
  ``TIMESTAMP,ContextTokens,GeneratedTokens``; timestamps such as
  ``2023-11-16 18:17:03.9799600``, or plain seconds).
* ``mooncake``: Mooncake-style JSONL (``{"timestamp": ms, "input_length",
  "output_length", "hash_ids"}``; ``timestamp`` in milliseconds since the first request).
  ``hash_ids`` (one id per block of ``block_size`` tokens, the last block possibly
  partial) is reproduced: equal ids give identical token blocks (:class:`BlockTexts`);
  an empty list is taken as no block information (distinct prompts, as without it).
* ``sharegpt``: a ShareGPT dataset (JSON or JSONL) with no times of its own; arrivals come
  from an arrival process (``rate``, ``arrival``, ``burstiness``, ``seed``).

Sessions (accelbench and mooncake lines): ``session_id`` (string or integer) makes a line
a turn of that session; turn order is the order in the file (or an explicit ``turn``
field, 0..n-1); a later turn carries ``delay`` (milliseconds of think time after the
previous turn's reply ended) and/or its own time. The plan holds each session's turns
consecutively, sessions in the order they start (docs/WORKLOADS.md).

Length-only entries (azure, mooncake) get synthetic prompts of exactly the given length
in the server's own tokens (:class:`~accelbench.workload.synthetic.SyntheticPrompts`,
minus what the server adds to every prompt), and ``max_tokens`` = the output length.
"""

from __future__ import annotations

import contextlib
import csv
import gc
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson

from accelbench import validate as v
from accelbench.errors import AccelbenchError, UsageError
from accelbench.jsonfile import DuplicateKeyError, orjson_unique, utf8_json_bytes
from accelbench.workload.lengths import MAX_TRACE_TOKENS, token_length
from accelbench.workload.lengths import short as _short
from accelbench.workload.requests import PlannedRequest, arrival_offsets
from accelbench.workload.tokenizer import Tokenizer

TRACE_SCHEMA = "accelbench.trace/1"
TRACE_FILE = "trace.jsonl"
FORMATS = ("auto", "accelbench", "azure", "mooncake", "sharegpt")
MAX_TRACE_REQUESTS = 10_000_000
MAX_TRACE_SPAN_S = 30 * 86400.0  # as runner.config.MAX_DURATION_S: a month-long replay
DEFAULT_BLOCK_SIZE = 512  # Mooncake's hash_ids block (FAST'25 trace: 512 tokens a block)
# hash_ids of a whole trace: the plan holds every request's ids (and a block text for each
# distinct one); 1e8 ids are a file of about 1 GB, several GB once parsed (docs/LIMITS.md)
MAX_TRACE_BLOCK_IDS = 100_000_000
MAX_BLOCK_ID = (1 << 63) - 1  # RequestRecord.blocks is a parquet int64 list
SEAM_SAMPLE = 256  # prompts counted whole before trusting the sum of their pieces' counts

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "FORMATS",
    "TRACE_FILE",
    "TRACE_SCHEMA",
    "BlockTexts",
    "Trace",
    "TraceEntry",
    "detect_format",
    "load_trace",
    "trace_plan",
    "trace_header",
    "trace_length",
    "trace_stats",
    "trace_row",
    "token_length",
]


@dataclass(slots=True)
class TraceEntry:
    """One request of a trace. Either ``body`` (a recorded request, replayed as is) or
    ``prompt`` (a dataset prompt) or only lengths (a prompt is synthesised)."""

    # seconds after the trace's first request; None: a later turn of a session with no
    # time of its own (it goes ``think_s`` after the previous turn's reply)
    offset_s: float | None
    isl: int | None = None  # input length in the server's tokens, where the trace says
    osl: int | None = None  # output length (max_tokens)
    endpoint: str | None = None  # "completions" | "chat" where the trace says
    body: dict[str, Any] | None = None
    prompt: str | list[dict[str, Any]] | None = None
    reference: str | None = None  # ShareGPT reply: its length is the output length
    blocks: tuple[int, ...] | None = None  # Mooncake hash_ids: one per block_size tokens
    session: int | None = None  # dense session number, in the order sessions start
    turn: int = 0  # the turn in its session, from 0
    think_s: float = 0.0  # later turns: the wait after the previous turn's reply ended


@dataclass
class Trace:
    format: str
    path: str
    entries: list[TraceEntry]  # sessions' turns consecutive, sessions by their start
    block_size: int = DEFAULT_BLOCK_SIZE  # tokens per hash_ids block
    sessions: int = 0  # how many sessions (entries with ``session`` set)
    # what reading it left out, one line each (a cut last line of accelbench's own
    # trace; ShareGPT records with no turn): for the run to print and record
    notes: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        """Seconds from the first arrival to the last known one (a later turn without a
        time of its own is not counted: it depends on the replies)."""
        return max((e.offset_s for e in self.entries if e.offset_s is not None), default=0.0)

    @property
    def synthesised(self) -> int:
        """How many entries get a prompt made from their lengths (neither a recorded body
        nor a prompt of their own): what ``--seed`` and ``--tokenizer`` make it from."""
        return sum(1 for e in self.entries if e.body is None and e.prompt is None)


# -- the proxy's own format ----------------------------------------------------------
def trace_header(started_at: str | None = None) -> dict[str, str]:
    """The first line of trace.jsonl: its schema, and when the proxy started (ISO 8601)."""
    return {"schema": TRACE_SCHEMA} | ({"started_at": started_at} if started_at else {})


def trace_row(idx: int, offset_s: float, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"idx": idx, "t": round(offset_s, 9), "endpoint": endpoint, "body": body}


# -- detection -----------------------------------------------------------------------
def _resolve(path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir() and (p / TRACE_FILE).is_file():
        return p / TRACE_FILE
    if not p.exists():
        raise UsageError(f"--trace {p} {v.missing(p)}")
    if not p.is_file():
        raise UsageError(f"--trace {p} is not a regular file (nor a shadow directory)")
    return p


def _first_line(raw: bytes) -> bytes:
    for line in raw.splitlines():
        if line.strip():
            return line.strip()
    return b""


def detect_format(raw: bytes, where: str = "--trace") -> str:
    """The trace format from the file's content."""
    head = raw.lstrip()
    if head[:1] == b"[":
        return "sharegpt"
    first = _first_line(raw)
    if first[:1] == b"{":
        try:
            obj = orjson.loads(first)
        except orjson.JSONDecodeError as exc:  # a JSON line, torn or with NaN / 1e400
            raise UsageError(f"{where}: line 1 is not JSON ({exc})") from None
        if isinstance(obj, dict):
            if obj.get("schema") == TRACE_SCHEMA:
                return "accelbench"
            if "input_length" in obj and (
                "timestamp" in obj or "session_id" in obj or "hash_ids" in obj
            ):
                return "mooncake"
            if "conversations" in obj:
                return "sharegpt"
    else:
        cols = [c.strip() for c in first.decode("utf-8", "replace").split(",")]
        if {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= set(cols):
            return "azure"
    raise UsageError(
        f"{where}: cannot tell the trace format from its content: expected accelbench's "
        "trace.jsonl, the Azure LLM inference CSV (TIMESTAMP,ContextTokens,GeneratedTokens), "
        "Mooncake JSONL (timestamp, input_length, output_length) or ShareGPT"
    )


# -- loading ---------------------------------------------------------------------------
def check_block_size(value: Any) -> int:
    """``--block-size``: tokens per ``hash_ids`` block, a whole number >= 1."""
    return v.integer("--block-size", value, 1, MAX_TRACE_TOKENS, unit="tokens")


def load_trace(
    path: str | Path,
    fmt: str = "auto",
    *,
    rate: float | None = None,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    seed: int = 0,
    limit: int | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Trace:
    """Read a trace: each session's turns consecutive in turn order, sessions (and
    requests that belong to none) by arrival; offsets from the first arrival.

    ``rate`` / ``arrival`` / ``burstiness`` / ``seed`` give ShareGPT its arrival process;
    ``limit`` keeps the first ``limit`` requests (in that order); ``block_size`` is the
    tokens per ``hash_ids`` block (each line's ids must cover its ``input_length``).
    Bad input raises one :class:`~accelbench.errors.UsageError` line naming the file,
    line and field; nothing is returned half."""
    if fmt not in FORMATS:
        raise UsageError(f"--trace-format must be one of {', '.join(FORMATS)} (got {fmt!r})")
    block_size = check_block_size(block_size)
    p = _resolve(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise AccelbenchError(f"cannot read trace {p}: {exc.strerror}") from None
    raw = utf8_json_bytes(raw, f"--trace {p}")
    if not raw.strip():
        raise UsageError(f"--trace {p} is empty")
    if fmt == "auto":
        fmt = detect_format(raw, f"--trace {p}")
    with _no_gc():
        return _load(raw, p, fmt, rate, arrival, burstiness, seed, limit, block_size)


def _load(
    raw: bytes,
    p: Path,
    fmt: str,
    rate: float | None,
    arrival: str,
    burstiness: float,
    seed: int,
    limit: int | None,
    block_size: int,
) -> Trace:
    time_field = "t"
    notes: list[str] = []
    if fmt == "accelbench":
        lines = _load_own(raw, p, notes)
    elif fmt == "azure":
        lines, time_field = _load_azure(raw, p), "TIMESTAMP"
    elif fmt == "mooncake":
        lines, time_field = _load_mooncake(raw, p, block_size), "timestamp"
    else:
        if rate is None:
            raise UsageError(
                "--trace: a ShareGPT file has no arrival times: give --rate "
                "(and --arrival poisson | constant | gamma)"
            )
        lines = [
            _Line(str(p), e)
            for e in _load_sharegpt(p, rate, arrival, burstiness, seed, limit, notes)
        ]
    if not lines:
        raise UsageError(f"--trace {p} holds no requests")
    entries = _arrange(lines, time_field)
    last = max((e.offset_s for e in entries if e.offset_s is not None), default=0.0)
    if not last <= MAX_TRACE_SPAN_S:
        raise UsageError(
            f"--trace {p} spans {last:g} s from its first to its last "
            f"request, more than {MAX_TRACE_SPAN_S:g} s (30 days): wrong time unit?"
        )
    if limit is not None:
        entries = entries[:limit]
    if len(entries) > MAX_TRACE_REQUESTS:  # a header-less file of one line more
        raise UsageError(
            f"--trace {p} has more than {MAX_TRACE_REQUESTS:,} requests: the plan holds "
            "every request in memory"
        )
    sessions = max((e.session for e in entries if e.session is not None), default=-1) + 1
    return Trace(fmt, str(p), entries, block_size, sessions, notes)


class TraceStats(NamedTuple):
    """What ``run`` checks of a trace before it plans it."""

    requests: int
    span_s: float  # from the first arrival to the last
    endpoints: frozenset[str]  # where its recorded requests went
    without_osl: int  # entries with no output length of their own (--osl gives theirs)
    synthesised: int  # entries whose prompt is made from their lengths (--seed draws it)


_STATS: dict[tuple[str, int, int, int], TraceStats] = {}


def trace_length(path: str | Path, *, block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """How many requests a trace with its own arrival times holds (``run --trace``)."""
    return trace_stats(path, block_size=block_size).requests


def trace_stats(path: str | Path, *, block_size: int = DEFAULT_BLOCK_SIZE) -> TraceStats:
    """The requests, span, endpoints and entries without an output length of a trace
    with its own arrival times (``run --trace``), read once per file version. A ShareGPT
    file has no arrival times: refused, since ``run`` sends
    a dataset at a rate with ``--dataset FILE --rate R``."""
    p = _resolve(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, check_block_size(block_size))
    if key not in _STATS:
        with p.open("rb") as f:
            head = utf8_json_bytes(f.read(1 << 16), f"--trace {p}")
        try:  # the first 64 KiB only: a longer first line is cut here
            sharegpt = bool(head.strip()) and detect_format(head) == "sharegpt"
        except UsageError:  # load_trace reads the whole file and says what is wrong
            sharegpt = False
        if sharegpt:
            raise UsageError(
                f"--trace {p} is a ShareGPT dataset with no arrival times: send it at a rate "
                "with --dataset FILE --rate R"
            )
        _STATS.clear()  # one trace per run: keep one entry
        trace = load_trace(p, block_size=block_size)
        endpoints = frozenset(e.endpoint for e in trace.entries if e.endpoint)
        without = sum(1 for e in trace.entries if e.osl is None)
        _STATS[key] = TraceStats(
            len(trace.entries), trace.duration_s, endpoints, without, trace.synthesised
        )
    return _STATS[key]


def _time(v: Any, where: str, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or v < 0:
        raise UsageError(f"{where}: {name} must be a non-negative number (got {_short(v)})")
    return float(v)


@dataclass(slots=True)
class _Line:
    """A trace line before the sessions are put in order: ``entry.offset_s`` is still the
    file's own time (seconds), or None where the line gives none."""

    where: str  # "file:line"
    entry: TraceEntry
    session: str | None = None  # the file's session_id (7 and "7" are one session)
    turn: int | None = None  # the file's explicit turn number
    delay_s: float | None = None


def _session_fields(obj: dict[str, Any], ln: _Line) -> None:
    """``session_id``, ``turn`` and ``delay`` (ms) of a JSON line, checked, into ``ln``."""
    where = ln.where
    sid = obj.get("session_id")
    if sid is None:
        for name in ("turn", "delay"):
            if obj.get(name) is not None:
                raise UsageError(f"{where}: {name} is given but session_id is not")
        return
    if isinstance(sid, bool) or not isinstance(sid, str | int) or sid == "":
        raise UsageError(
            f"{where}: session_id must be a non-empty string or an integer (got {_short(sid)})"
        )
    ln.session = str(sid)
    if obj.get("turn") is not None:
        ln.turn = token_length(obj["turn"], where, "turn", lo=0)
    if obj.get("delay") is not None:
        delay_s = _time(obj["delay"], where, "delay") / 1000.0
        if not delay_s <= MAX_TRACE_SPAN_S:
            raise UsageError(
                f"{where}: delay {obj['delay']!r} ms is more than 30 days: wrong time unit?"
            )
        ln.delay_s = delay_s


def _hash_ids(ids: Any, isl: int, block_size: int, where: str) -> tuple[int, ...]:
    """A line's ``hash_ids``: non-negative integers, one per ``block_size`` tokens of its
    ``input_length`` (the last block may be partial)."""
    if type(ids) is not list:
        raise UsageError(
            f"{where}: hash_ids must be a list of non-negative integers (got {_short(ids)})"
        )
    if ids and not (set(map(type, ids)) == {int} and 0 <= min(ids) and max(ids) <= MAX_BLOCK_ID):
        bad = next(i for i in ids if type(i) is not int or not 0 <= i <= MAX_BLOCK_ID)
        raise UsageError(
            f"{where}: hash_ids must be a list of non-negative integers (holds {_short(bad)})"
        )
    need = -(-isl // block_size)
    if len(ids) != need:
        raise UsageError(
            f"{where}: hash_ids has {len(ids)} ids, but input_length {isl} in blocks of "
            f"{block_size} tokens needs {need} (is the trace's block size another "
            "--block-size?)"
        )
    return tuple(ids)


def _arrange(lines: list[_Line], time_field: str) -> list[TraceEntry]:
    """Sessions checked and put together: each session's turns consecutive in turn order,
    sessions and lone requests by their first arrival (ties in file order); offsets from
    the first arrival; session numbers dense in that order."""
    units: list[list[_Line]] = []
    by_sid: dict[str, list[_Line]] = {}
    for ln in lines:
        if ln.session is None:
            units.append([ln])
            continue
        turns = by_sid.get(ln.session)
        if turns is None:
            turns = by_sid[ln.session] = []
            units.append(turns)
        turns.append(ln)
    waits = {sid: _check_turns(sid, turns, time_field) for sid, turns in by_sid.items()}
    starts = [u[0].entry.offset_s for u in units]
    order = sorted(range(len(units)), key=lambda i: starts[i])  # type: ignore[arg-type,return-value]
    t0 = min(starts)  # type: ignore[type-var]
    for sid, (wait, where) in waits.items():
        # a session's last turn is sent no sooner than its delays add up to: a replay of
        # 30-day delays lasted months, each delay within its own bound
        at = (by_sid[sid][0].entry.offset_s or 0.0) - float(t0 or 0.0) + wait
        if not at <= MAX_TRACE_SPAN_S:
            raise UsageError(
                f"{where}: session {sid!r} sends this turn at least {at:.6g} s after the "
                f"trace's first arrival (its delays add up), more than {MAX_TRACE_SPAN_S:g} s "
                "(30 days): wrong time unit?"
            )
    entries: list[TraceEntry] = []
    n_sessions = 0
    for i in order:
        unit = units[i]
        session = None
        if unit[0].session is not None:
            session, n_sessions = n_sessions, n_sessions + 1
        for k, ln in enumerate(unit):
            e = ln.entry
            if e.offset_s is not None:
                e.offset_s -= t0  # type: ignore[operator]
            e.session, e.turn, e.think_s = session, k, ln.delay_s or 0.0
            entries.append(e)
    return entries


def _check_turns(sid: str, turns: list[_Line], time_field: str) -> tuple[float, str]:
    """One session's turns: explicit ``turn`` numbers 0..n-1 without gaps or repeats (then
    put in that order), a time on the first turn and no ``delay`` there, times that never
    go back. Returns the least time from the first turn's arrival to the last turn's
    send (each turn waits its delay, and for its own time), and where that turn is."""
    given = [ln for ln in turns if ln.turn is not None]
    if given:
        if len(given) != len(turns):
            ln = next(ln for ln in turns if ln.turn is None)
            raise UsageError(
                f"{ln.where}: turn is missing, while other lines of session {sid!r} number "
                "their turns"
            )
        seen: dict[int, _Line] = {}
        for ln in turns:
            assert ln.turn is not None
            if ln.turn in seen:
                raise UsageError(
                    f"{ln.where}: turn {ln.turn} of session {sid!r} is repeated (first at "
                    f"line {seen[ln.turn].where.rsplit(':', 1)[-1]})"
                )
            seen[ln.turn] = ln
        for k in range(len(turns)):
            if k not in seen:
                raise UsageError(
                    f"{turns[0].where}: turn {k} of session {sid!r} is missing (its "
                    f"{len(turns)} turns must be numbered 0..{len(turns) - 1})"
                )
        turns.sort(key=lambda ln: ln.turn or 0)
    first = turns[0]
    if first.entry.offset_s is None:
        raise UsageError(
            f"{first.where}: {time_field} is missing: the first turn of session {sid!r} "
            "needs its arrival time"
        )
    if first.delay_s:
        raise UsageError(
            f"{first.where}: delay on the first turn of session {sid!r}, which has no "
            f"previous turn to wait for (give its {time_field})"
        )
    last = first.entry.offset_s
    sent = 0.0  # the least time after the first arrival that this turn is sent
    for ln in turns[1:]:
        t = ln.entry.offset_s
        sent += ln.delay_s or 0.0
        if t is not None:
            if t < last:
                raise UsageError(
                    f"{ln.where}: {time_field} is earlier than the previous turn's in "
                    f"session {sid!r}"
                )
            last = t
            sent = max(sent, t - first.entry.offset_s)
    return sent, turns[-1].where


def _json_lines(raw: bytes, p: Path, cut: list[str] | None = None) -> Iterator[tuple[int, Any]]:
    """Each non-blank line's JSON, with its line number; a line that is not JSON is
    refused (file:line). With ``cut`` (accelbench's own trace, which a proxy killed
    mid-write leaves with a last line cut short): a last line with no newline after it
    that is not JSON is left out, and said so in ``cut``."""
    lines = raw.splitlines()
    objects = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        objects += 1
        if objects > MAX_TRACE_REQUESTS + 1:  # one more: accelbench's own header line
            raise _too_many(p, lineno)
        try:
            obj = orjson_unique(line)
        except DuplicateKeyError as exc:
            raise UsageError(f"{p}:{lineno}: {exc}") from None
        except orjson.JSONDecodeError:
            if cut is not None and lineno == len(lines) and not raw.endswith((b"\n", b"\r")):
                cut.append(
                    f"{p}:{lineno}: the last line is cut short (the proxy stopped mid-write): "
                    "left out"
                )
                return
            raise UsageError(f"{p}:{lineno}: not valid JSON") from None
        yield lineno, obj


def _too_many(p: Path, lineno: int) -> UsageError:
    """A trace past the requests' limit, refused where its reading gets there (the plan
    holds every request: a longer file had been read whole, its objects in memory, before
    its count was checked)."""
    return UsageError(
        f"--trace {p} has more than {MAX_TRACE_REQUESTS:,} requests (line {lineno:,} is "
        "past them): the plan holds every request in memory"
    )


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic collector paused: reading or planning a big trace makes millions of
    objects with no cycles, and the collector's passes over them cost more than the work
    itself (a third of a 100,000-session plan)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _load_own(raw: bytes, p: Path, notes: list[str]) -> list[_Line]:
    lines: list[_Line] = []
    first = None
    for lineno, obj in _json_lines(raw, p, notes):
        first = lineno if first is None else first
        where = f"{p}:{lineno}"
        if not isinstance(obj, dict):
            raise UsageError(f"{where}: a trace line must be a JSON object")
        if "schema" in obj:
            if lines or lineno != first:
                # `cat a/trace.jsonl b/trace.jsonl`: b's times start again at 0
                raise UsageError(
                    f"{where}: a second trace header: traces joined end to end start their "
                    "times again at 0 (replay them one at a time)"
                )
            continue
        body = obj.get("body")
        endpoint = obj.get("endpoint")
        if not isinstance(body, dict) or endpoint not in ("completions", "chat"):
            raise UsageError(f"{where}: needs `body` (object) and `endpoint` (completions|chat)")
        mt = body.get("max_tokens", body.get("max_completion_tokens"))
        osl = token_length(mt, where, "max_tokens") if mt is not None else None
        ln = _Line(where, TraceEntry(None, None, osl, endpoint, body))
        _session_fields(obj, ln)
        if ln.session is None or obj.get("t") is not None:
            ln.entry.offset_s = _time(obj.get("t"), where, "t")
        lines.append(ln)
    return lines


def parse_azure_timestamp(text: str) -> float:
    """Seconds (epoch) of ``2023-11-16 18:17:03.9799600`` (up to 9 fractional digits), or
    of a plain number of seconds."""
    s = text.strip()
    with contextlib.suppress(ValueError):
        return float(s)
    main, _, frac = s.partition(".")
    dt = datetime.fromisoformat(main)
    digits = (frac + "000000000")[:9] if frac else "0"
    if not digits.isdigit():
        raise ValueError(f"bad fraction in {text!r}")
    return dt.timestamp() + int(digits) / 1e9


def _load_azure(raw: bytes, p: Path) -> list[_Line]:
    reader = csv.DictReader(io.StringIO(raw.decode("utf-8-sig", "replace")))
    lines: list[_Line] = []
    for row in reader:
        where = f"{p}:{reader.line_num}"
        if len(lines) >= MAX_TRACE_REQUESTS:
            raise _too_many(p, reader.line_num)
        if None in row or None in row.values():  # more fields than the header, or fewer
            n_header = len(reader.fieldnames or ())
            n_row = n_header + len(row.get(None) or ()) - sum(v is None for v in row.values())
            raise UsageError(f"{where}: {n_row} fields where the header has {n_header}")
        try:
            ts = parse_azure_timestamp(row["TIMESTAMP"])
            isl = int(row["ContextTokens"])
            osl = int(row["GeneratedTokens"])
        except (KeyError, TypeError, ValueError, OverflowError):
            raise UsageError(
                f"{where}: expected TIMESTAMP, ContextTokens, GeneratedTokens (got {row})"
            ) from None
        if not np.isfinite(ts):
            raise UsageError(f"{where}: TIMESTAMP must be a finite time (got {ts!r})")
        entry = TraceEntry(
            ts,
            token_length(isl, where, "ContextTokens"),
            token_length(osl, where, "GeneratedTokens"),
        )
        lines.append(_Line(where, entry))
    return lines


def _load_mooncake(raw: bytes, p: Path, block_size: int) -> list[_Line]:
    # The checks are inline where a value is plainly good (a 100,000-session trace is
    # read in seconds: benchmarks/trace_plan_speed.py); anything else goes to the
    # helpers that word the error.
    lines = []
    top, inf, max_delay_ms = MAX_TRACE_TOKENS, np.inf, MAX_TRACE_SPAN_S * 1000.0
    ids_read = 0
    for lineno, obj in _json_lines(raw, p):
        where = f"{p}:{lineno}"
        if type(obj) is not dict:
            raise UsageError(f"{where}: a trace line must be a JSON object")
        sid = obj.get("session_id")
        session = turn = delay_s = None
        if sid is not None:
            turn, delay = obj.get("turn"), obj.get("delay")
            if (
                not ((type(sid) is str and sid) or type(sid) is int)
                or not (turn is None or (type(turn) is int and 0 <= turn <= top))
                or not (
                    delay is None
                    or ((type(delay) is int or type(delay) is float) and 0 <= delay <= max_delay_ms)
                )
            ):
                ln = _Line(where, TraceEntry(None))
                _session_fields(obj, ln)  # raises, naming the field
                session, turn, delay_s = ln.session, ln.turn, ln.delay_s
            else:
                session = str(sid)
                delay_s = None if delay is None else delay / 1000.0
        elif "turn" in obj or "delay" in obj:
            _session_fields(obj, _Line(where, TraceEntry(None)))
        ts = obj.get("timestamp")
        if ts is not None or session is None:
            if not ((type(ts) is int or type(ts) is float) and 0 <= ts < inf):
                ts = _time(ts, where, "timestamp")
            ts = ts / 1000.0
        isl = obj.get("input_length")
        if type(isl) is not int or not 0 < isl <= top:
            isl = token_length(isl, where, "input_length")
        osl = obj.get("output_length")
        if type(osl) is not int or not 0 < osl <= top:
            osl = token_length(osl, where, "output_length")
        ids = obj.get("hash_ids")  # [] says nothing of the prefixes: as if absent
        blocks = None if ids is None or ids == [] else _hash_ids(ids, isl, block_size, where)
        if blocks is not None:
            ids_read += len(blocks)
            if ids_read > MAX_TRACE_BLOCK_IDS:
                raise UsageError(
                    f"{where}: the trace's hash_ids pass {MAX_TRACE_BLOCK_IDS:,} ids here: the "
                    "plan holds every request's ids (a larger --block-size, or fewer requests)"
                )
        entry = TraceEntry(ts, isl, osl, None, None, None, None, blocks)
        lines.append(_Line(where, entry, session, turn, delay_s))
    return lines


def _load_sharegpt(
    p: Path,
    rate: float,
    arrival: str,
    burstiness: float,
    seed: int,
    limit: int | None,
    notes: list[str],
) -> list[TraceEntry]:
    from accelbench.workload.datasets import load_dataset

    loaded = load_dataset(str(p), "sharegpt")
    if loaded.note:
        notes.append(loaded.note)
    items = loaded if limit is None else loaded[:limit]
    offs = arrival_offsets(len(items), rate, arrival, burstiness, seed)
    return [
        TraceEntry(float(o), osl=it.output_tokens, prompt=it.prompt, reference=it.reference_output)
        for it, o in zip(items, offs, strict=True)
    ]


# -- prompts of a trace's blocks -------------------------------------------------------
class BlockTexts:
    """The text of each ``hash_ids`` block: ``block_size`` tokens under ``tok``, the same
    text for the same id (cached: ids repeat across a trace), distinct texts for distinct
    ids (each starts with its id written as words, then a seeded window of the
    :class:`~accelbench.workload.synthetic.SyntheticPrompts` text). A block text starts
    with a space-prefixed word, so concatenated blocks meet at word seams, where byte
    tokens (the reference server) and space-splitting BPE tokenizers cut anyway; a
    partial block (the last of a prompt) is the first tokens of its id's text.

    Counting: a block's count is its tag words' counts (each counted once with ``tok``)
    plus its pool window's length in tokens, a prompt's the sum of its blocks'. That sum
    is checked against ``tok``'s count of the whole prompt for the first
    :data:`SEAM_SAMPLE` prompts; once one differs (a tokenizer that merges across word
    seams, or whose windows do not re-encode to themselves), every window, block and
    prompt is counted whole from then on, as SyntheticPrompts does, and the count
    returned is ``tok``'s. So the counts are exact for byte tokens (the reference
    server) and for tokenizers the sample finds additive; a rare seam beyond the sample
    would make ``isl_planned`` a token off (the server's own count is what the run
    records). Counting every prompt whole costs a tokenizer call per request, which a
    100,000-session plan cannot afford (benchmarks/trace_plan_speed.py)."""

    def __init__(self, tok: Tokenizer, seed: int, block_size: int) -> None:
        from accelbench.workload.synthetic import _WORDS, SyntheticPrompts

        self.tok, self.seed, self.size = tok, seed, block_size
        # 2 x block_size + 256 of the text's tokens (SyntheticPrompts makes at least
        # 2 x + 64), each decoded once: one tokenizer call per token, which matters when
        # the tokenizer is the server's /detokenize
        ids = SyntheticPrompts(tok, seed, block_size).ids
        self.pool = pool = ids[: 2 * block_size + 256]
        pieces = [tok.decode(pool[i : i + 1]) for i in range(len(pool))]
        span = len(pool) - block_size - 32  # > 0: the pool is at least 2 x + 64
        starts = [i for i in range(span) if pieces[i].startswith(" ")]
        self.starts = starts or list(range(span))  # windows that begin with a word
        # where the tokens decode one by one to the whole (bytes, byte-level BPE), a
        # window's text is a slice of the whole: no tokenizer call per window
        whole = "".join(pieces)
        self._text: str | None = whole if whole == tok.decode(pool) else None
        self._at = [0]
        for piece in pieces:
            self._at.append(self._at[-1] + len(piece))
        self._words = [" " + w for w in _WORDS]
        self._word_n = [len(tok.encode(w)) for w in self._words]
        self._pairs = [
            (self._words[lo] + self._words[hi], self._word_n[lo] + self._word_n[hi])
            for hi in range(len(_WORDS))
            for lo in range(len(_WORDS))
        ]  # the first two words of every tag: index lo + 149 hi
        self._full: dict[int, tuple[str, int]] = {}
        self._fill: dict[tuple[int, int], tuple[str, int]] = {}
        self._checked = 0
        self.additive = True  # every prompt checked so far counted as its pieces' sum
        self.exact = True  # every text had the wanted number of tokens

    @staticmethod
    def tag(block_id: int) -> str:
        """The id in words, least significant first (base 149: the synthetic text's
        words; at least 3 words): no two ids share it, so no two share a block text."""
        from accelbench.workload.synthetic import _WORDS

        words: list[str] = []
        n = block_id
        while n or len(words) < 3:
            n, r = divmod(n, len(_WORDS))
            words.append(_WORDS[r])
        return " " + " ".join(words)

    def _tag(self, block_id: int) -> tuple[str, int]:
        """:meth:`tag` and the sum of its words' counts (its first two words from a table:
        this runs once per block of a trace)."""
        words, counts, base = self._words, self._word_n, len(self._words)
        hi, lo = divmod(block_id, base * base)
        text, n_tok = self._pairs[lo]
        while True:
            hi, r = divmod(hi, base)
            text += words[r]
            n_tok += counts[r]
            if not hi:
                return text, n_tok

    def _filler(self, start: int, n: int) -> tuple[str, int]:
        """The pool's ``n`` tokens from ``start``, as text, and its count: ``n`` while
        counts add up (a window of the pool's own tokens decodes and re-encodes to
        them: what the prompt check verifies), else ``tok``'s count."""
        key = (start, n)
        got = self._fill.get(key)
        if got is None:
            if self._text is not None:
                text = self._text[self._at[start] : self._at[min(start + n, len(self.pool))]]
            else:
                text = self.tok.decode(self.pool[start : start + n])
            if not text.startswith(" "):
                text = " " + text
            got = (text, n if self.additive else len(self.tok.encode(text)))
            if len(self._fill) < 50_000:
                self._fill[key] = got
        return got

    def _fit(self, make: Callable[[int], tuple[str, int]], n: int, target: int) -> tuple[str, int]:
        """``make(n)`` (a text and its count) with ``n`` adjusted until the count is
        ``target`` (a few tries; the closest otherwise, with its real count)."""
        best: tuple[str, int] | None = None
        for _ in range(8):
            text, got = make(max(1, n))
            if got == target:
                return text, got
            if best is None or abs(got - target) < abs(best[1] - target):
                best = (text, got)
            n += target - got
        assert best is not None
        self.exact = False
        return best

    def _make(self, block_id: int, length: int) -> tuple[str, int]:
        """The first ``length`` tokens of block ``block_id``'s text, and their count."""
        tag, tag_n = self._tag(block_id)
        start = self.starts[(block_id * 0x9E3779B1 + self.seed * 7919) % len(self.starts)]
        tok = self.tok
        if length <= tag_n + 1:  # a block too short for its whole tag: the tag cut
            ids = tok.encode(tag + self._filler(start, 8)[0])

            def cut(n: int) -> tuple[str, int]:
                text = tok.decode(ids[:n])
                return text, len(tok.encode(text))

            return self._fit(cut, length, length)
        if self.additive:

            def add(n: int) -> tuple[str, int]:
                text, got = self._filler(start, n)
                return tag + text, tag_n + got

            return self._fit(add, length - tag_n, length)

        def whole(n: int) -> tuple[str, int]:
            text = tag + self._filler(start, n)[0]
            return text, len(tok.encode(text))

        return self._fit(whole, length - tag_n, length)

    def _partial(self, block_id: int, length: int) -> tuple[str, int]:
        """:meth:`_make` for a partial block, its common case first (one window)."""
        if self.additive:
            tag, tag_n = self._tag(block_id)
            if length > tag_n + 1:
                start = self.starts[(block_id * 0x9E3779B1 + self.seed * 7919) % len(self.starts)]
                text, n = self._filler(start, length - tag_n)
                if n + tag_n == length:
                    return tag + text, length
        return self._make(block_id, length)

    def text(self, block_id: int, length: int | None = None) -> tuple[str, int]:
        """Block ``block_id``'s text (the first ``length`` tokens of it when given: a
        partial block) and its count in ``tok``'s tokens."""
        if length is None or length >= self.size:
            got = self._full.get(block_id)
            if got is None:
                got = self._full[block_id] = self._make(block_id, self.size)
            return got
        return self._partial(block_id, length)

    def prompt(self, blocks: tuple[int, ...], length: int) -> tuple[str, int]:
        """The prompt of ``length`` tokens made of ``blocks`` (full blocks, the last one
        cut to what is left), and its count."""
        parts: list[str] = []
        got = 0
        left = length
        size, full = self.size, self._full
        for block_id in blocks:
            if left >= size:
                piece = full.get(block_id)
                if piece is None:
                    piece = full[block_id] = self._make(block_id, size)
            elif left > 0:
                piece = self._partial(block_id, left)
            else:
                break
            parts.append(piece[0])
            got += piece[1]
            left -= size
        text = "".join(parts)
        if self._checked < SEAM_SAMPLE or not self.additive:
            self._checked += 1
            real = len(self.tok.encode(text))
            if real != got:
                self.additive = False
                self._fill.clear()  # counted again, by tok (block texts stay: same id, same text)
            got = real
        return text, got


# -- requests to send --------------------------------------------------------------
def trace_plan(
    trace: Trace,
    tok: Any,
    *,
    special_tokens: int = 0,
    seed: int = 0,
    default_osl: int = 128,
    progress: Any = None,
    block_size: int | None = None,
) -> list[PlannedRequest]:
    """The trace as :class:`~accelbench.workload.requests.PlannedRequest` s in the trace's
    order (sessions' turns consecutive), with ``offset_s``, the session fields and, for
    recorded requests, ``body``: prompts synthesised to the trace's lengths, exact in
    ``tok``'s count plus ``special_tokens``; a line with ``hash_ids`` gets its blocks'
    texts (:class:`BlockTexts`) and ``blocks``. ``block_size`` (default: the one the
    trace was read with) must agree with every line's ``hash_ids``."""
    with _no_gc():
        return _plan(trace, tok, special_tokens, seed, default_osl, progress, block_size)


def _plan(
    trace: Trace,
    tok: Any,
    special_tokens: int,
    seed: int,
    default_osl: int,
    progress: Any,
    block_size: int | None,
) -> list[PlannedRequest]:
    from accelbench.workload.synthetic import SyntheticPrompts

    size = trace.block_size if block_size is None else check_block_size(block_size)
    if size != trace.block_size:
        for e in trace.entries:
            if e.blocks is not None and e.isl is not None:
                _hash_ids(list(e.blocks), e.isl, size, trace.path)
    need = [
        e.isl
        for e in trace.entries
        if e.body is None and e.prompt is None and e.isl and e.blocks is None
    ]
    with_blocks = any(e.blocks is not None for e in trace.entries)
    gen = blocks = None
    if (need or with_blocks) and tok is None:
        raise AccelbenchError(
            "a length-only trace needs a tokenizer for its prompts: the server has no "
            "/tokenize; give --tokenizer PATH"
        )
    if need:
        gen = SyntheticPrompts(tok, seed, max(1, max(need) - special_tokens))
    if with_blocks:
        blocks = BlockTexts(tok, seed, size)
    plan: list[PlannedRequest] = []
    n = len(trace.entries)
    for i, e in enumerate(trace.entries):
        if e.body is not None:
            body = e.body
            prompt = body.get("messages") if e.endpoint == "chat" else body.get("prompt")
            pr = PlannedRequest(prompt or "", e.osl or default_osl, None)
            pr.body, pr.endpoint = body, e.endpoint
        elif e.prompt is not None:
            osl = e.osl
            if osl is None and e.reference and tok is not None:
                osl = max(1, len(tok.encode(e.reference)))
            isl = None
            if tok is not None and isinstance(e.prompt, str):
                isl = len(tok.encode(e.prompt)) + special_tokens
            pr = PlannedRequest(e.prompt, osl or default_osl, isl)
        elif e.blocks is not None:
            assert blocks is not None and e.isl is not None
            text, got = blocks.prompt(e.blocks, max(1, e.isl - special_tokens))
            plan.append(
                PlannedRequest(
                    text, e.osl or default_osl, got + special_tokens, e.offset_s,
                    session=e.session, turn=e.turn, think_s=e.think_s, blocks=e.blocks,
                )
            )  # fmt: skip
            if progress:
                progress(i + 1, n)
            continue  # one constructor call: 100,000 sessions are planned in seconds
        else:
            assert gen is not None and e.isl is not None
            text, got = gen.make(max(1, e.isl - special_tokens))
            pr = PlannedRequest(text, e.osl or default_osl, got + special_tokens)
        pr.offset_s = e.offset_s
        pr.session, pr.turn, pr.think_s = e.session, e.turn, e.think_s
        plan.append(pr)
        if progress:
            progress(i + 1, n)
    return plan
