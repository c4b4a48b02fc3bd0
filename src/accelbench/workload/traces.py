"""Request traces: when each request arrived and how long it was, read from the proxy's
own recordings or from public production traces, and turned into requests to replay.

Formats (``auto`` tells them apart by content, not by file name):

* ``accelbench``: the shadow proxy's ``trace.jsonl`` (a header line with
  ``"schema": "accelbench.trace/1"``, then ``{"idx", "t", "endpoint", "body"}`` per
  request; ``t`` in seconds since the first arrival). Bodies are replayed as recorded.
  A shadow directory may be given instead of the file.
* ``azure``: the Azure LLM inference trace CSV (AzurePublicDataset,
  ``TIMESTAMP,ContextTokens,GeneratedTokens``; timestamps such as
  ``2023-11-16 18:17:03.9799600``, or plain seconds).
* ``mooncake``: Mooncake-style JSONL (``{"timestamp": ms, "input_length",
  "output_length", "hash_ids"}``; ``timestamp`` in milliseconds since the first request).
  ``hash_ids`` (prefix sharing) is not reproduced: every synthesised prompt is distinct.
* ``sharegpt``: a ShareGPT dataset (JSON or JSONL) with no times of its own; arrivals come
  from an arrival process (``rate``, ``arrival``, ``burstiness``, ``seed``).

Length-only entries (azure, mooncake) get synthetic prompts of exactly the given length
in the server's own tokens (:class:`~accelbench.workload.synthetic.SyntheticPrompts`,
minus what the server adds to every prompt), and ``max_tokens`` = the output length.
"""

from __future__ import annotations

import contextlib
import csv
import io
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from accelbench.errors import AccelbenchError, UsageError
from accelbench.workload.requests import PlannedRequest, arrival_offsets

TRACE_SCHEMA = "accelbench.trace/1"
TRACE_FILE = "trace.jsonl"
FORMATS = ("auto", "accelbench", "azure", "mooncake", "sharegpt")
MAX_TRACE_REQUESTS = 10_000_000
MAX_TRACE_TOKENS = 1 << 20  # as workload.config.MAX_TOKENS
MAX_TRACE_SPAN_S = 30 * 86400.0  # as runner.config.MAX_DURATION_S: a month-long replay

__all__ = [
    "FORMATS",
    "TRACE_FILE",
    "TRACE_SCHEMA",
    "Trace",
    "TraceEntry",
    "detect_format",
    "load_trace",
    "trace_plan",
    "trace_header",
    "trace_length",
    "trace_stats",
    "trace_row",
]


@dataclass(slots=True)
class TraceEntry:
    """One request of a trace. Either ``body`` (a recorded request, replayed as is) or
    ``prompt`` (a dataset prompt) or only lengths (a prompt is synthesised)."""

    offset_s: float  # seconds after the trace's first request
    isl: int | None = None  # input length in the server's tokens, where the trace says
    osl: int | None = None  # output length (max_tokens)
    endpoint: str | None = None  # "completions" | "chat" where the trace says
    body: dict[str, Any] | None = None
    prompt: str | list[dict[str, Any]] | None = None
    reference: str | None = None  # ShareGPT reply: its length is the output length


@dataclass
class Trace:
    format: str
    path: str
    entries: list[TraceEntry]

    @property
    def duration_s(self) -> float:
        return self.entries[-1].offset_s if self.entries else 0.0


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
        raise UsageError(f"--trace {p} does not exist")
    if not p.is_file():
        raise UsageError(f"--trace {p} is not a regular file (nor a shadow directory)")
    return p


def _first_line(raw: bytes) -> bytes:
    for line in raw.splitlines():
        if line.strip():
            return line.strip()
    return b""


def detect_format(raw: bytes) -> str:
    """The trace format from the file's content."""
    head = raw.lstrip()
    if head[:1] == b"[":
        return "sharegpt"
    first = _first_line(raw)
    if first[:1] == b"{":
        try:
            obj = orjson.loads(first)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            if obj.get("schema") == TRACE_SCHEMA:
                return "accelbench"
            if "input_length" in obj and "timestamp" in obj:
                return "mooncake"
            if "conversations" in obj:
                return "sharegpt"
    else:
        cols = [c.strip() for c in first.decode("utf-8", "replace").split(",")]
        if {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= set(cols):
            return "azure"
    raise UsageError(
        "--trace: cannot tell the trace format from its content: expected accelbench's "
        "trace.jsonl, the Azure LLM inference CSV (TIMESTAMP,ContextTokens,GeneratedTokens), "
        "Mooncake JSONL (timestamp, input_length, output_length) or ShareGPT"
    )


# -- loading ---------------------------------------------------------------------------
def load_trace(
    path: str | Path,
    fmt: str = "auto",
    *,
    rate: float | None = None,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    seed: int = 0,
    limit: int | None = None,
) -> Trace:
    """Read a trace; entries sorted by arrival, offsets from the first arrival.

    ``rate`` / ``arrival`` / ``burstiness`` / ``seed`` give ShareGPT its arrival process;
    ``limit`` keeps the first ``limit`` requests."""
    if fmt not in FORMATS:
        raise UsageError(f"--trace-format must be one of {', '.join(FORMATS)} (got {fmt!r})")
    p = _resolve(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise AccelbenchError(f"cannot read trace {p}: {exc.strerror}") from None
    if not raw.strip():
        raise UsageError(f"--trace {p} is empty")
    if fmt == "auto":
        fmt = detect_format(raw)
    if fmt == "accelbench":
        entries = _load_own(raw, p)
    elif fmt == "azure":
        entries = _load_azure(raw, p)
    elif fmt == "mooncake":
        entries = _load_mooncake(raw, p)
    else:
        if rate is None:
            raise UsageError(
                "--trace: a ShareGPT file has no arrival times: give --rate "
                "(and --arrival poisson | constant | gamma)"
            )
        entries = _load_sharegpt(p, rate, arrival, burstiness, seed, limit)
    if not entries:
        raise UsageError(f"--trace {p} holds no requests")
    entries.sort(key=lambda e: e.offset_s)
    t0 = entries[0].offset_s
    for e in entries:
        e.offset_s -= t0
    if not entries[-1].offset_s <= MAX_TRACE_SPAN_S:
        raise UsageError(
            f"--trace {p} spans {entries[-1].offset_s:g} s from its first to its last "
            f"request, more than {MAX_TRACE_SPAN_S:g} s (30 days): wrong time unit?"
        )
    if limit is not None:
        entries = entries[:limit]
    if len(entries) > MAX_TRACE_REQUESTS:
        raise UsageError(f"--trace {p} has more than {MAX_TRACE_REQUESTS:,} requests")
    return Trace(fmt, str(p), entries)


_STATS: dict[tuple[str, int, int], tuple[int, float, frozenset[str]]] = {}


def trace_length(path: str | Path) -> int:
    """How many requests a trace with its own arrival times holds (``run --trace``)."""
    return trace_stats(path)[0]


def trace_stats(path: str | Path) -> tuple[int, float, frozenset[str]]:
    """(requests, seconds from the first arrival to the last, the endpoints its recorded
    requests went to) of a trace with its own arrival times (``run --trace``), read once
    per file version. A ShareGPT file has no arrival times: refused, since ``run`` sends
    a dataset at a rate with ``--dataset FILE --rate R``."""
    p = _resolve(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _STATS:
        with p.open("rb") as f:
            head = f.read(1 << 16)
        if head.strip() and detect_format(head) == "sharegpt":
            raise UsageError(
                f"--trace {p} is a ShareGPT dataset with no arrival times: send it at a rate "
                "with --dataset FILE --rate R"
            )
        _STATS.clear()  # one trace per run: keep one entry
        trace = load_trace(p)
        endpoints = frozenset(e.endpoint for e in trace.entries if e.endpoint)
        _STATS[key] = (len(trace.entries), trace.duration_s, endpoints)
    return _STATS[key]


def _length(v: Any, where: str, name: str, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v):
        raise AccelbenchError(f"{where}: {name} must be a whole number (got {v!r})")
    n = int(v)
    if not lo <= n <= MAX_TRACE_TOKENS:
        raise AccelbenchError(f"{where}: {name} must be in [{lo}, {MAX_TRACE_TOKENS}] (got {n})")
    return n


def _time(v: Any, where: str, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or v < 0:
        raise AccelbenchError(f"{where}: {name} must be a non-negative number (got {v!r})")
    return float(v)


def _json_lines(raw: bytes, p: Path) -> list[tuple[int, Any]]:
    out = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((lineno, orjson.loads(line)))
        except orjson.JSONDecodeError:
            if lineno == len(raw.splitlines()):
                break  # a torn last line (the proxy was killed mid-write)
            raise AccelbenchError(f"{p}:{lineno}: not valid JSON") from None
    return out


def _load_own(raw: bytes, p: Path) -> list[TraceEntry]:
    entries = []
    for lineno, obj in _json_lines(raw, p):
        where = f"{p}:{lineno}"
        if not isinstance(obj, dict):
            raise AccelbenchError(f"{where}: a trace line must be a JSON object")
        if "schema" in obj:
            continue
        body = obj.get("body")
        endpoint = obj.get("endpoint")
        if not isinstance(body, dict) or endpoint not in ("completions", "chat"):
            raise AccelbenchError(
                f"{where}: needs `body` (object) and `endpoint` (completions|chat)"
            )
        mt = body.get("max_tokens", body.get("max_completion_tokens"))
        osl = _length(mt, where, "max_tokens") if mt is not None else None
        entries.append(TraceEntry(_time(obj.get("t"), where, "t"), None, osl, endpoint, body))
    return entries


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


def _load_azure(raw: bytes, p: Path) -> list[TraceEntry]:
    reader = csv.DictReader(io.StringIO(raw.decode("utf-8-sig", "replace")))
    entries = []
    for lineno, row in enumerate(reader, 2):
        where = f"{p}:{lineno}"
        try:
            ts = parse_azure_timestamp(row["TIMESTAMP"])
            isl = int(row["ContextTokens"])
            osl = int(row["GeneratedTokens"])
        except (KeyError, TypeError, ValueError, OverflowError):
            raise AccelbenchError(
                f"{where}: expected TIMESTAMP, ContextTokens, GeneratedTokens (got {row})"
            ) from None
        if not np.isfinite(ts):
            raise AccelbenchError(f"{where}: TIMESTAMP must be a finite time (got {ts!r})")
        entries.append(
            TraceEntry(
                ts, _length(isl, where, "ContextTokens"), _length(osl, where, "GeneratedTokens")
            )
        )
    return entries


def _load_mooncake(raw: bytes, p: Path) -> list[TraceEntry]:
    entries = []
    for lineno, obj in _json_lines(raw, p):
        where = f"{p}:{lineno}"
        if not isinstance(obj, dict):
            raise AccelbenchError(f"{where}: a trace line must be a JSON object")
        ts = _time(obj.get("timestamp"), where, "timestamp") / 1000.0
        isl = _length(obj.get("input_length"), where, "input_length")
        osl = _length(obj.get("output_length"), where, "output_length")
        entries.append(TraceEntry(ts, isl, osl))
    return entries


def _load_sharegpt(
    p: Path, rate: float, arrival: str, burstiness: float, seed: int, limit: int | None
) -> list[TraceEntry]:
    from accelbench.workload.datasets import load_dataset

    items = load_dataset(str(p), "sharegpt")
    if limit is not None:
        items = items[:limit]
    offs = arrival_offsets(len(items), rate, arrival, burstiness, seed)
    return [
        TraceEntry(float(o), osl=it.output_tokens, prompt=it.prompt, reference=it.reference_output)
        for it, o in zip(items, offs, strict=True)
    ]


# -- requests to send --------------------------------------------------------------
def trace_plan(
    trace: Trace,
    tok: Any,
    *,
    special_tokens: int = 0,
    seed: int = 0,
    default_osl: int = 128,
    progress: Any = None,
) -> list[PlannedRequest]:
    """The trace as :class:`~accelbench.workload.requests.PlannedRequest` s (with
    ``offset_s`` and, for recorded requests, ``body``): prompts synthesised to the
    trace's lengths, exact in ``tok``'s count plus ``special_tokens``."""
    from accelbench.workload.synthetic import SyntheticPrompts

    need = [e.isl for e in trace.entries if e.body is None and e.prompt is None and e.isl]
    gen = None
    if need:
        if tok is None:
            raise AccelbenchError(
                "a length-only trace needs a tokenizer for its prompts: the server has no "
                "/tokenize; give --tokenizer PATH"
            )
        gen = SyntheticPrompts(tok, seed, max(1, max(need) - special_tokens))
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
        else:
            assert gen is not None and e.isl is not None
            text, got = gen.make(max(1, e.isl - special_tokens))
            pr = PlannedRequest(text, e.osl or default_osl, got + special_tokens)
        pr.offset_s = e.offset_s
        plan.append(pr)
        if progress:
            progress(i + 1, n)
    return plan
