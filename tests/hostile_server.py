"""A scripted, hostile OpenAI-compatible server on a real 127.0.0.1 socket.

It lists one model, answers /tokenize with one token per byte, the probe request (``X-Request-Id: probe``) with a good
stream, and every other completion request with the raw SSE body that ``respond(req_id)``
returns (or a whole raw HTTP response if it starts with ``HTTP/``). Each response ends the
connection, so both transports read it to the end. ``respond`` may instead return a
callable, which gets the connected socket and does what it likes with it (never answer,
reset, stream forever); with ``early=True`` it is called before the request body is read.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable

import orjson

GOOD = (
    b'data: {"choices":[{"text":" a","finish_reason":null}]}\n\n'
    b'data: {"choices":[{"text":" b","finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


def sse_events(*docs: object) -> bytes:
    return b"".join(b"data: " + orjson.dumps(d) + b"\n\n" for d in docs) + b"data: [DONE]\n\n"


class HostileServer:
    def __init__(
        self,
        respond: Callable[[str], bytes | Callable[[socket.socket], None]],
        probe_failures: int = 0,
        early: bool = False,
    ) -> None:
        self.respond = respond
        self.early = early
        self.requests = 0
        self.probe_failures = probe_failures  # answer this many probes with HTTP 503
        self.auth: list[str] = []  # the Authorization header of every request
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                head = b""
                while b"\r\n\r\n" not in head:
                    data = self.request.recv(65536)
                    if not data:
                        return
                    head += data
                top, _, body = head.partition(b"\r\n\r\n")
                lines = top.decode("latin-1").split("\r\n")
                hdrs = {k.strip().lower(): v.strip() for k, _, v in
                        (x.partition(":") for x in lines[1:])}  # fmt: skip
                rid = hdrs.get("x-request-id", "")
                if outer.early and rid not in ("", "probe") and b"/v1/" in head[:40]:
                    outer.requests += 1
                    act = outer.respond(rid)
                    assert callable(act)
                    act(self.request)  # before the body is read
                    return
                n = int(hdrs.get("content-length") or 0)
                while len(body) < n:
                    body += self.request.recv(65536)
                path = lines[0].split(" ")[1]
                outer.auth.append(hdrs.get("authorization", ""))
                if path.endswith("/models"):
                    doc = orjson.dumps({"object": "list", "data": [{"id": "hostile"}]})
                    self._send(b"application/json", doc)
                    return
                if path == "/tokenize":  # one token per byte, like the reference server
                    text = orjson.loads(body).get("content", "")
                    self._send(b"application/json", orjson.dumps({"tokens": list(text.encode())}))
                    return
                if path == "/detokenize":
                    ids = orjson.loads(body).get("tokens", [])
                    text = bytes(ids).decode("utf-8", "replace")
                    self._send(b"application/json", orjson.dumps({"content": text}))
                    return
                if not path.startswith("/v1/"):
                    self.request.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    return
                outer.requests += 1
                if rid == "probe" and outer.probe_failures > 0:
                    outer.probe_failures -= 1
                    self._raw(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
                    return
                payload = GOOD if rid == "probe" else outer.respond(rid)
                if callable(payload):
                    try:
                        payload(self.request)
                    except OSError:
                        pass  # the client gave up, or the script reset the connection
                elif payload.startswith(b"HTTP/"):
                    self._raw(payload)
                else:
                    self._send(b"text/event-stream", payload)

            def _send(self, ctype: bytes, body: bytes) -> None:
                self._raw(b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype + b"\r\nContent-Length: "
                          + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)  # fmt: skip

            def _raw(self, data: bytes) -> None:
                try:
                    self.request.sendall(data)
                    self.request.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # the client gave up on a hostile response: that is its right

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HostileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
