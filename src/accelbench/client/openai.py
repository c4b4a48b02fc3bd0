"""OpenAI-compatible request bodies and response handling, independent of the transport.

A ``ResponseHandler`` receives the status, de-framed body bytes with their arrival
times, and the end of the body; it fills a ``RequestRecord`` with every timeline mark.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import EllipsisType
from typing import Any

import orjson

from accelbench.client.sse import MAX_EVENT_BYTES, SSEError, SSEParser
from accelbench.metrics.records import SOURCE_SERVER, ErrorKind, RequestRecord


def build_body(
    *,
    endpoint: str,
    model: str,
    prompt: str | list[dict[str, Any]],
    max_tokens: int | None,
    stream: bool,
    ignore_eos: bool,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body for /v1/completions or /v1/chat/completions."""
    body: dict[str, Any] = {"model": model}
    if endpoint == "chat":
        body["messages"] = (
            prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        )
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else flatten_chat(prompt)
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
    if extra:
        body.update(extra)
    return body


def flatten_chat(messages: list[dict[str, Any]]) -> str:
    """A chat's messages as one completions prompt: their contents, a content of text
    parts joined (the data set's reader holds them to a string or text parts)."""
    return "\n".join(_content_text(m.get("content", "")) for m in messages)


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def endpoint_path(endpoint: str) -> str:
    return "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"


# How servers word a request beyond the context: vLLM ("This model's maximum context
# length is N tokens"), llama-server ("exceeds the available context size",
# exceed_context_size_error), OpenAI (context_length_exceeded), SGLang ("longer than the
# model's context length"), others ("prompt is too long").
_CONTEXT = re.compile(r"context|exceed|too long|maximum", re.IGNORECASE)


def says_context_exceeded(message: str) -> bool:
    """Whether a 4xx's message (or raw body) names the context as the reason."""
    return bool(_CONTEXT.search(message))


def classify_failure(status: int, body: bytes) -> tuple[ErrorKind, str]:
    """The error kind and message of a final status other than 200 and its body: a 4xx
    that names the context is ``context_exceeded``."""
    msg = error_message_from_body(body)
    kind = classify_status(status)
    if kind is ErrorKind.HTTP_4XX and says_context_exceeded(body[:4096].decode("utf-8", "replace")):
        return ErrorKind.CONTEXT_EXCEEDED, msg
    return kind, msg


def classify_status(status: int) -> ErrorKind:
    """The error kind of a final status other than 200: a redirect (never followed: the
    benchmark measures the URL it was given), another 2xx, 101 or 600+ is ``http_other``."""
    if status == 429:
        return ErrorKind.HTTP_429
    if 400 <= status < 500:
        return ErrorKind.HTTP_4XX
    if 500 <= status < 600:
        return ErrorKind.HTTP_5XX
    return ErrorKind.HTTP_OTHER


def error_message_from_body(body: bytes, limit: int = 300) -> str:
    """The server's error message, from an OpenAI-style JSON error or the raw text."""
    try:
        obj = orjson.loads(body)
        err = obj.get("error", obj) if isinstance(obj, dict) else obj
        msg = err.get("message") if isinstance(err, dict) else None
        text = str(msg if msg else err)
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        text = body.decode("utf-8", "replace")
    text = " ".join(text.split())
    return text[:limit]


_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError

# Token counts a server may report: anything else is ``malformed_usage``.
MAX_TOKEN_COUNT = 2**31 - 1
# Content chunks one response may have: a server that keeps streaming past max_tokens
# (or without end) fails the request here instead of growing the record until the
# timeout (measured: 230,000 chunks a second from one hostile 127.0.0.1 stream).
# Generous: a chunk is at least one token on every engine this was written against.
MAX_CHUNKS = 1 << 20
MAX_CHUNKS_PER_TOKEN = 16
MAX_CHUNKS_SLACK = 1024
# Generated text one response may carry (every event is also under max_event_bytes).
MAX_OUTPUT_CHARS = 64 << 20


# A server's prompt_tokens above this many times the planned prompt (the client's count,
# or the server's own /tokenize), plus what a chat template adds, cannot be this prompt's
# count: another tokenizer splits text at most a few times finer, a template adds tens to
# hundreds of tokens. Below that, far from the plan is only a warning (summary): a server
# that truncates the prompt counts what it read.
PROMPT_TOKENS_RATIO = 8
PROMPT_TOKENS_SLACK = 4096


def sent_max_tokens(body: Mapping[str, object]) -> int | None:
    """The most tokens a request body asks for (``max_tokens``, or OpenAI's
    ``max_completion_tokens``, the larger where both: a caller's body through the shadow
    proxy, or a trace's, may set either);
    None where it sets neither as a whole number."""
    limits = [
        v for v in (body.get("max_tokens"), body.get("max_completion_tokens"))
        if type(v) is int and v > 0
    ]  # fmt: skip
    return max(limits) if limits else None


def chunk_limit(max_tokens: int | None) -> int:
    """The most content chunks a response asked for ``max_tokens`` tokens may have."""
    if max_tokens is None or max_tokens <= 0:
        return MAX_CHUNKS
    return min(MAX_CHUNKS, MAX_CHUNKS_PER_TOKEN * max_tokens + MAX_CHUNKS_SLACK)


def _is_json(content_type: str | None) -> bool:
    """application/json, or a +json type (application/problem+json)."""
    ct = (content_type or "").split(";", 1)[0].strip().lower()
    return ct == "application/json" or ct.endswith("+json")


def _is_sse(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


class _Malformed(Exception):
    """A field of the wrong type or shape: the response is ``malformed_stream``."""


class _BadUsage(Exception):
    """A token count that is no count: the response is ``malformed_usage``."""


def _head(payload: bytes, n: int = 120) -> str:
    """The first bytes of an offending event, for the error message."""
    return repr(payload[:n]) + (f" (+{len(payload) - n} bytes)" if len(payload) > n else "")


def _raw(value: Any) -> str:
    """A server value as it came (JSON), shortened."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= 100 else text[:100] + "..."


def _first_choice(choices: object) -> dict[str, object] | None:
    if choices is None:
        return None
    if not isinstance(choices, list):
        raise _Malformed("choices is not a list")
    if not choices:
        return None
    c = choices[0]
    if not isinstance(c, dict):
        raise _Malformed("choices[0] is not an object")
    return c


def _text(obj: dict[str, object], key: str) -> str:
    v = obj.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise _Malformed(f"{key} is not a string")
    return v


def _finish_reason(c: dict[str, object]) -> str | None:
    fr = c.get("finish_reason")
    if fr is None or isinstance(fr, str):
        return fr[:100] if fr else None
    raise _Malformed("finish_reason is not a string")


def _count(usage: dict[str, object], key: str) -> int | None:
    """A token count from ``usage``: None if absent; _BadUsage unless an integer in
    [0, MAX_TOKEN_COUNT] (a string, a float, 10**30, a negative number)."""
    v = usage.get(key)
    if v is None:
        return None
    if type(v) is not int or not 0 <= v <= MAX_TOKEN_COUNT:
        raise _BadUsage(f"usage.{key} is not a token count in [0, {MAX_TOKEN_COUNT}]: {_raw(v)}")
    return v


class ResponseHandler:
    """Turns one HTTP response into the record's marks. Transport-agnostic."""

    __slots__ = (
        "rec",
        "chat",
        "stream",
        "keep_text",
        "status",
        "parser",
        "texts",
        "usage_marks",
        "done",
        "failed",
        "_err_body",
        "_body",
        "_body_len",
        "max_chunks",
        "text_len",
        "max_tokens",
        "content_type",
        "location",
        "reset",
        "asked_stream",
    )

    def __init__(
        self,
        rec: RequestRecord,
        *,
        chat: bool,
        stream: bool,
        keep_text: bool,
        max_event_bytes: int = MAX_EVENT_BYTES,
        max_tokens: int | None | EllipsisType = ...,
    ) -> None:
        """``max_tokens``: what the request sent (``sent_max_tokens``), which bounds the
        server's ``completion_tokens``; the record's ``max_tokens`` where not given."""
        self.rec = rec
        self.max_tokens = rec.max_tokens if max_tokens is ... else max_tokens
        self.chat = chat
        self.stream = stream
        self.keep_text = keep_text
        self.status = 0
        self.parser = SSEParser(max_event_bytes)
        self.texts: list[str] = []
        # running completion_tokens on every content chunk (vLLM continuous_usage_stats)
        self.usage_marks: list[int] | None = []
        self.done = False
        self.failed = False
        self._err_body = b""
        self._body: list[bytes] = []
        self._body_len = 0
        self.max_chunks = chunk_limit(rec.max_tokens)
        self.text_len = 0
        self.content_type: str | None = None  # where the transport said
        self.location: str | None = None
        self.reset: str | None = None  # the connection was reset (not closed) at the end
        self.asked_stream = stream

    # -- transport callbacks -------------------------------------------------------
    def on_headers(self, status: int, t_ns: int) -> None:
        self.status = status
        self.rec.t_headers = t_ns
        self.rec.http_status = status

    def on_head_info(self, content_type: str | None, location: str | None) -> None:
        """The response's Content-Type and Location (``transport.head_info``). A 200 to a
        streamed request that is JSON, not an event stream, is read as JSON: an error
        object is the server's error, anything else is named with its type."""
        self.content_type = content_type
        self.location = location
        if self.status == 200 and self.stream and _is_json(content_type):
            self.stream = False  # read whole; on_end names what it was

    def on_reset(self, why: str) -> None:
        """The connection was reset (not closed by the server) where its close would have
        ended the body: a response that is not whole by then is ``disconnect``."""
        self.reset = why

    def on_data(self, data: bytes, t_ns: int) -> bool:
        """Returns False when the response is broken and the connection should be dropped."""
        if self.failed:
            return False
        if self.status != 200:
            if len(self._err_body) < 65536:
                self._err_body += data
            return True
        if not self.stream:
            self._body.append(data)
            self._body_len += len(data)
            if self._body_len > self.parser.max_event_bytes:
                self.fail(
                    ErrorKind.MALFORMED_STREAM,
                    f"response body larger than {self.parser.max_event_bytes} bytes",
                )
                return False
            return True
        payload = self.parser.single(data)
        if payload is not None:
            return self._token(payload, t_ns)
        try:
            events = self.parser.feed(data)
        except SSEError as exc:
            self.fail(ErrorKind.MALFORMED_STREAM, str(exc))
            return False
        for event, payload in events:  # several events in one read (a client running late)
            if not (
                self._token(payload, t_ns)
                if event == "message"
                else self._events([(event, payload)], t_ns)
            ):
                return False
        return True

    def _token(self, payload: bytes, t: int) -> bool:
        """One event alone in a read (a paced stream's token). The usual shape, a content
        chunk with text and nothing else to note, is taken here with the same checks;
        any other event (usage, finish_reason, errors, odd types) goes through
        ``_event``, which decides the same as if this path did not exist."""
        if payload != b"[DONE]":
            try:
                obj = _loads(payload)
            except _JSONDecodeError:
                obj = None
            if type(obj) is dict and "error" not in obj and obj.get("usage") is None:
                choices = obj.get("choices")
                if type(choices) is list and choices:
                    c = choices[0]
                    if type(c) is dict and c.get("finish_reason") is None:
                        if self.chat:
                            d = c.get("delta")
                            text = (
                                d.get("content")
                                if type(d) is dict
                                and d.get("reasoning_content") is None
                                and d.get("reasoning") is None
                                else None
                            )
                        else:
                            text = c.get("text")
                        if (
                            type(text) is str
                            and text
                            and not self.done
                            and self.rec.finish_reason is None
                        ):
                            rec = self.rec
                            times = rec.chunk_times
                            if not times:
                                rec.t_first = t
                            times.append(t)
                            rec.t_last = t
                            self.texts.append(text)
                            self.usage_marks = None  # a content chunk without usage
                            self.text_len += len(text)
                            if len(times) > self.max_chunks or self.text_len > MAX_OUTPUT_CHARS:
                                self._too_long()
                                return False
                            return True
        return self._events([("message", payload)], t)

    def c_fields(
        self,
    ) -> tuple[ResponseHandler, RequestRecord, list[int], list[str], bool, int, int] | None:
        """What the compiled per-chunk path (client/_recvstamp.c, through
        ``http1.ReceiveHub.fast``) needs to take this response's next content chunks
        itself, exactly as ``_token`` would: None unless that is possible now (a 200
        event stream, not failed, not ended, the SSE parser between events)."""
        if self.status != 200 or not self.stream or self.failed or self.done:
            return None
        if self.rec.finish_reason is not None:  # content now is refused (``_event``)
            return None
        if not self.parser.idle:
            return None
        rec = self.rec
        return (self, rec, rec.chunk_times, self.texts, self.chat, self.max_chunks,
                MAX_OUTPUT_CHARS)  # fmt: skip

    def _too_long(self) -> None:
        rec = self.rec
        self.fail(
            ErrorKind.MALFORMED_STREAM,
            f"the server kept streaming: more than {self.max_chunks} content chunks "
            f"or {MAX_OUTPUT_CHARS} characters (max_tokens {rec.max_tokens}); "
            f"stopped reading after {len(rec.chunk_times)} chunks",
        )

    def _events(self, events: list[tuple[str, bytes]], t_ns: int) -> bool:
        for event, payload in events:
            try:
                self._event(event, payload, t_ns)
            except Exception as exc:  # noqa: BLE001 - a parser bug must not kill the stream
                self.fail(
                    ErrorKind.MALFORMED_STREAM, f"{type(exc).__name__} {exc}: {_head(payload)}"
                )
            if self.failed:
                return False
        return True

    def on_end(self, t_ns: int) -> None:
        rec = self.rec
        if self.failed:
            return
        if self.status != 200:
            kind, msg = classify_failure(self.status, self._err_body)
            if kind is ErrorKind.HTTP_OTHER:
                msg = self._other_status(msg)
            self.fail(kind, msg)
            rec.t_done = t_ns
            return
        if not self.stream:
            body = b"".join(self._body)
            try:
                if self.content_type is not None and self.asked_stream:
                    self._json_for_stream(body)
                else:
                    self._non_stream(body, t_ns)
            except Exception as exc:  # noqa: BLE001 - a parser bug must not kill the run
                self.fail(ErrorKind.MALFORMED_STREAM, f"{type(exc).__name__} {exc}: {_head(body)}")
            return
        if not self._events(self.parser.flush(), t_ns):
            return
        if rec.t_done is None:
            rec.t_done = t_ns
        if not self.done and self.reset is not None and rec.finish_reason is None:
            self.fail(ErrorKind.DISCONNECT, f"connection reset mid-stream ({self.reset})")
            return
        if not self.done:
            if self.parser.pending.strip():
                self.fail(ErrorKind.MALFORMED_STREAM, "stream ended inside an event (truncated)")
                return
            if rec.finish_reason is None:
                self.fail(
                    ErrorKind.MALFORMED_STREAM, "stream ended without [DONE] or a finish_reason"
                )
                return
        self._finish()

    def fail(self, kind: ErrorKind, message: str) -> None:
        ct = self.content_type
        if kind is ErrorKind.MALFORMED_STREAM and ct and self.asked_stream and not _is_sse(ct):
            message = f"the response is {ct}, not text/event-stream: {message}"
        self.failed = True
        self.rec.ok = False
        self.rec.error_kind = kind
        self.rec.error = message[:500]

    # -- parsing ----------------------------------------------------------------
    def _event(self, event: str, payload: bytes, t: int) -> None:
        """One SSE event. Every field is the server's word and is checked: a wrong type
        is ``malformed_stream`` (with the event's first bytes), a token count out of
        range is ``malformed_usage`` (with the raw value); nothing raises."""
        if self.done:  # the stream had ended: any later event would move its marks
            self.fail(ErrorKind.MALFORMED_STREAM, f"data after [DONE]: {_head(payload)}")
            return
        if payload == b"[DONE]":
            self.done = True
            self.rec.t_done = t
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self.fail(ErrorKind.MALFORMED_STREAM, f"invalid JSON in SSE data: {_head(payload)}")
            return
        if not isinstance(obj, dict):
            self.fail(
                ErrorKind.MALFORMED_STREAM, f"SSE data is not a JSON object: {_head(payload)}"
            )
            return
        if event == "error" or "error" in obj:
            err = obj.get("error", obj)
            msg = err.get("message") if isinstance(err, dict) else err
            self.fail(ErrorKind.SERVER_ERROR_EVENT, f"server sent an error event: {str(msg)[:300]}")
            return
        rec = self.rec
        # Hot path: the checks are inlined (this runs for every streamed token).
        try:
            usage = obj.get("usage")
            if usage is not None and type(usage) is not dict:
                raise _BadUsage(f"usage is not an object: {_raw(usage)}")
            choices = obj.get("choices")
            if choices:
                if type(choices) is not list:
                    raise _Malformed("choices is not a list")
                c = choices[0]
                if type(c) is not dict:
                    raise _Malformed("choices[0] is not an object")
                if self.chat:
                    delta = c.get("delta")
                    if delta is None:
                        delta = {}
                    elif type(delta) is not dict:
                        raise _Malformed("choices[0].delta is not an object")
                    text: Any = _text(delta, "content")
                    rtext = _text(delta, "reasoning_content") or _text(delta, "reasoning")
                else:
                    text = c.get("text")
                    if text is None:
                        text = ""
                    elif type(text) is not str:
                        raise _Malformed("text is not a string")
                    rtext = ""
                if (text or rtext) and rec.finish_reason is not None:
                    # the server said the output had ended: more of it would move the
                    # marks past that end, as after [DONE]
                    raise _Malformed(f"content after finish_reason {rec.finish_reason!r}")
                if text or rtext:
                    if rec.t_first is None:
                        rec.t_first = t
                    rec.chunk_times.append(t)
                    rec.t_last = t
                    self.texts.append(rtext + text)
                    self.text_len += len(rtext) + len(text)
                    if self.usage_marks is not None:
                        self._usage_mark(usage)
                    if len(rec.chunk_times) > self.max_chunks or self.text_len > MAX_OUTPUT_CHARS:
                        self._too_long()
                        return
                fr = c.get("finish_reason")
                if fr is not None:
                    if type(fr) is not str:
                        raise _Malformed("finish_reason is not a string")
                    if fr:
                        rec.finish_reason = fr[:100]
            elif choices is not None and type(choices) is not list:
                raise _Malformed("choices is not a list")
            self._server_counts(obj, usage)
        except _Malformed as exc:
            self.fail(ErrorKind.MALFORMED_STREAM, f"{exc}: {_head(payload)}")
        except _BadUsage as exc:
            self.fail(ErrorKind.MALFORMED_USAGE, str(exc))

    def _usage_mark(self, usage: dict[str, object] | None) -> None:
        """Running completion_tokens on a content chunk (vLLM continuous_usage_stats)."""
        marks = self.usage_marks
        assert marks is not None
        mark = _count(usage, "completion_tokens") if usage else None
        if mark is None:
            self.usage_marks = None  # not every chunk says: no per-chunk counts
            return
        if marks and mark < marks[-1]:
            raise _BadUsage(f"usage.completion_tokens went down from {marks[-1]} to {mark}")
        marks.append(mark)

    def _server_counts(self, obj: dict[str, object], usage: dict[str, object] | None) -> None:
        """What an event or a body says the server counted: its ``usage`` (when not
        empty), else llama-server's ``timings`` for the cached prompt tokens."""
        if usage:
            self._usage(usage)
        timings = obj.get("timings")
        if timings is not None and self.rec.cached_tokens is None:
            self._timings(timings)

    def _usage(self, usage: dict[str, object]) -> None:
        rec = self.rec
        out = _count(usage, "completion_tokens")
        if out is not None:
            rec.osl_server = out
        inp = _count(usage, "prompt_tokens")
        if inp is not None:
            rec.isl = inp
            rec.isl_source = "server_usage"
        details = usage.get("prompt_tokens_details")
        if details is not None:  # vLLM, llama-server, OpenAI: prompt tokens from the cache
            if type(details) is not dict:
                raise _BadUsage(f"usage.prompt_tokens_details is not an object: {_raw(details)}")
            self._cached(_count(details, "cached_tokens"), "usage.prompt_tokens_details")

    def _timings(self, timings: object) -> None:
        """llama-server's ``timings.cache_n`` (prompt tokens reused from the slot), where
        the usage does not say."""
        if type(timings) is not dict:
            raise _Malformed("timings is not an object")
        self._cached(_count(timings, "cache_n"), "timings")

    def _cached(self, cached: int | None, where: str) -> None:
        rec = self.rec
        if cached is None:
            return
        if rec.isl is not None and cached > rec.isl:
            raise _BadUsage(
                f"{where}: {cached} cached tokens is more than the {rec.isl} prompt tokens"
            )
        rec.cached_tokens = cached

    def _non_stream(self, body: bytes, t: int) -> None:
        rec = self.rec
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            if self.reset is not None:
                self.fail(ErrorKind.DISCONNECT, f"connection reset mid-response ({self.reset})")
                return
            self.fail(ErrorKind.MALFORMED_STREAM, f"response is not JSON: {_head(body)}")
            return
        if not isinstance(obj, dict) or "error" in obj:
            self.fail(ErrorKind.SERVER_ERROR_EVENT, error_message_from_body(body))
            return
        text = ""
        try:
            usage = obj.get("usage")
            if usage is not None and not isinstance(usage, dict):
                raise _BadUsage(f"usage is not an object: {_raw(usage)}")
            c = _first_choice(obj.get("choices"))
            if c is not None:
                if self.chat:
                    msg = c.get("message")
                    if msg is None:
                        msg = {}
                    elif not isinstance(msg, dict):
                        raise _Malformed("choices[0].message is not an object")
                    text = _text(msg, "reasoning_content") + _text(msg, "content")
                else:
                    text = _text(c, "text")
                rec.finish_reason = _finish_reason(c)
            self._server_counts(obj, usage)
        except _Malformed as exc:
            self.fail(ErrorKind.MALFORMED_STREAM, f"{exc}: {_head(body)}")
            return
        except _BadUsage as exc:
            self.fail(ErrorKind.MALFORMED_USAGE, str(exc))
            return
        if text:
            rec.t_first = rec.t_last = t
            rec.chunk_times.append(t)
            self.texts.append(text)
        rec.t_done = t
        self._finish()

    def _json_for_stream(self, body: bytes) -> None:
        """A JSON body where an event stream was asked for: the server's error where it
        is one, else a failure that names what came."""
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and "error" in obj:
            self.fail(ErrorKind.SERVER_ERROR_EVENT, error_message_from_body(body))
            return
        self.fail(ErrorKind.MALFORMED_STREAM, _head(body))

    def _other_status(self, msg: str) -> str:
        """The reason of a final status that is neither 200 nor an error (a redirect, a
        204): the status, and where a redirect pointed (never followed)."""
        status = self.status
        if 300 <= status < 400:
            where = f"to {self.location}" if self.location else "without a Location"
            head = f"HTTP {status} redirect {where} (not followed)"
        else:
            head = f"HTTP {status}"
        return f"{head}: {msg}" if msg else head

    def _finish(self) -> None:
        rec = self.rec
        if not rec.chunk_times:
            said = rec.osl_server
            self.fail(
                ErrorKind.EMPTY_RESPONSE,
                "the server returned no generated content"
                + (f" (its usage says {said} completion tokens)" if said else ""),
            )
            return
        rec.ok = True
        rejected = self._implausible_usage()
        marks = self.usage_marks
        if marks and len(marks) == len(rec.chunk_times) and not rejected:
            prev = 0
            counts = []
            for m in marks:
                counts.append(int(m) - prev)
                prev = int(m)
            rec.chunk_tokens = counts
        rec.output_text = "".join(self.texts)

    def _implausible_usage(self) -> bool:
        """The server's token counts that cannot be true of this request (METRICS.md
        "Token counts the server cannot have"): ``completion_tokens`` above the
        ``max_tokens`` sent, or 0 with content received; ``prompt_tokens`` 0, or above
        ``PROMPT_TOKENS_RATIO`` x the planned prompt + ``PROMPT_TOKENS_SLACK``. Such a
        count is not used: the client's own count stands in (the tokenizer's or the
        chunks' for the output, the planned one for the prompt; cached tokens above the
        planned prompt go with it), and ``usage_rejected`` says what the server said.
        True where the output count was rejected."""
        rec = self.rec
        notes = []
        out = rec.osl_server
        limit = self.max_tokens
        if out is not None and limit is not None and out > limit:
            notes.append(f"usage.completion_tokens {out} is more than the max_tokens {limit} sent")
        elif out == 0:
            notes.append(f"usage.completion_tokens 0 with {len(rec.chunk_times)} content chunks")
        out_rejected = bool(notes)
        if out_rejected:
            rec.osl_server = None
        planned, inp = rec.isl_planned, rec.isl
        if rec.isl_source == SOURCE_SERVER and inp is not None and planned:
            if inp == 0 or inp > PROMPT_TOKENS_RATIO * planned + PROMPT_TOKENS_SLACK:
                notes.append(f"usage.prompt_tokens {inp} for a prompt of {planned} planned tokens")
                rec.isl = rec.isl_source = None
                if rec.cached_tokens is not None and rec.cached_tokens > planned:
                    rec.cached_tokens = None
        if notes:
            rec.usage_rejected = "; ".join(notes)[:300]
        return out_rejected
