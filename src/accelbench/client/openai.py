"""OpenAI-compatible request bodies and response handling, independent of the transport.

A ``ResponseHandler`` receives the status, de-framed body bytes with their arrival
times, and the end of the body; it fills a ``RequestRecord`` with every timeline mark.
"""

from __future__ import annotations

from typing import Any

import orjson

from accelbench.client.sse import SSEParser
from accelbench.metrics.records import RequestRecord


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
        body["prompt"] = prompt if isinstance(prompt, str) else _flatten_chat(prompt)
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


def _flatten_chat(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


def endpoint_path(endpoint: str) -> str:
    return "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"


def classify_status(status: int) -> str:
    if status == 429:
        return "http_429"
    if 400 <= status < 500:
        return "http_4xx"
    return "http_5xx"


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
    )

    def __init__(self, rec: RequestRecord, *, chat: bool, stream: bool, keep_text: bool) -> None:
        self.rec = rec
        self.chat = chat
        self.stream = stream
        self.keep_text = keep_text
        self.status = 0
        self.parser = SSEParser()
        self.texts: list[str] = []
        # running completion_tokens on every content chunk (vLLM continuous_usage_stats)
        self.usage_marks: list[int] | None = []
        self.done = False
        self.failed = False
        self._err_body = b""
        self._body: list[bytes] = []

    # -- transport callbacks -------------------------------------------------------
    def on_headers(self, status: int, t_ns: int) -> None:
        self.status = status
        self.rec.t_headers = t_ns
        self.rec.http_status = status

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
            return True
        for event, payload in self.parser.feed(data):
            self._event(event, payload, t_ns)
            if self.failed:
                return False
        return True

    def on_end(self, t_ns: int) -> None:
        rec = self.rec
        if self.failed:
            return
        if self.status != 200:
            self.fail(classify_status(self.status), error_message_from_body(self._err_body))
            rec.t_done = t_ns
            return
        if not self.stream:
            self._non_stream(b"".join(self._body), t_ns)
            return
        for event, payload in self.parser.flush():
            self._event(event, payload, t_ns)
        if self.failed:
            return
        if rec.t_done is None:
            rec.t_done = t_ns
        if not self.done:
            if self.parser.pending.strip():
                self.fail("malformed_stream", "stream ended inside an event (truncated)")
                return
            if rec.finish_reason is None:
                self.fail("malformed_stream", "stream ended without [DONE] or a finish_reason")
                return
        self._finish()

    def fail(self, kind: str, message: str) -> None:
        self.failed = True
        self.rec.ok = False
        self.rec.error_kind = kind
        self.rec.error = message[:500]

    # -- parsing ----------------------------------------------------------------
    def _event(self, event: str, payload: bytes, t: int) -> None:
        rec = self.rec
        if payload == b"[DONE]":
            self.done = True
            rec.t_done = t
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self.fail("malformed_stream", f"invalid JSON in SSE data: {payload[:80]!r}")
            return
        if not isinstance(obj, dict):
            self.fail("malformed_stream", f"SSE data is not a JSON object: {payload[:80]!r}")
            return
        if event == "error" or "error" in obj:
            err = obj.get("error", obj)
            msg = err.get("message") if isinstance(err, dict) else err
            self.fail("server_error_event", f"server sent an error event: {msg}")
            return
        choices = obj.get("choices")
        usage = obj.get("usage")
        if choices:
            c = choices[0]
            if self.chat:
                delta = c.get("delta") or {}
                text = delta.get("content") or ""
                rtext = delta.get("reasoning_content") or delta.get("reasoning") or ""
            else:
                text = c.get("text") or ""
                rtext = ""
            if text or rtext:
                if rec.t_first is None:
                    rec.t_first = t
                rec.chunk_times.append(t)
                rec.t_last = t
                self.texts.append(rtext + text)
                if self.usage_marks is not None:
                    mark = usage.get("completion_tokens") if isinstance(usage, dict) else None
                    if mark is None:
                        self.usage_marks = None  # not every chunk says: no per-chunk counts
                    else:
                        self.usage_marks.append(mark)
            fr = c.get("finish_reason")
            if fr:
                rec.finish_reason = fr
        if isinstance(usage, dict):
            if usage.get("completion_tokens") is not None:
                rec.osl_server = usage["completion_tokens"]
            if usage.get("prompt_tokens") is not None:
                rec.isl = usage["prompt_tokens"]
                rec.isl_source = "server_usage"

    def _non_stream(self, body: bytes, t: int) -> None:
        rec = self.rec
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            self.fail("malformed_stream", f"response is not JSON: {body[:80]!r}")
            return
        if not isinstance(obj, dict) or "error" in obj:
            self.fail("server_error_event", error_message_from_body(body))
            return
        choices = obj.get("choices") or []
        text = ""
        if choices:
            c = choices[0]
            if self.chat:
                msg = c.get("message") or {}
                text = (msg.get("reasoning_content") or "") + (msg.get("content") or "")
            else:
                text = c.get("text") or ""
            rec.finish_reason = c.get("finish_reason")
        if text:
            rec.t_first = rec.t_last = t
            rec.chunk_times.append(t)
            self.texts.append(text)
        usage = obj.get("usage") or {}
        if usage.get("completion_tokens") is not None:
            rec.osl_server = usage["completion_tokens"]
        if usage.get("prompt_tokens") is not None:
            rec.isl = usage["prompt_tokens"]
            rec.isl_source = "server_usage"
        rec.t_done = t
        self._finish()

    def _finish(self) -> None:
        rec = self.rec
        if not rec.chunk_times and not rec.osl_server:
            self.fail("empty_response", "the server returned no generated content")
            return
        rec.ok = True
        marks = self.usage_marks
        if marks and len(marks) == len(rec.chunk_times):
            prev = 0
            counts = []
            for m in marks:
                counts.append(int(m) - prev)
                prev = int(m)
            rec.chunk_tokens = counts
        rec.output_text = "".join(self.texts)
