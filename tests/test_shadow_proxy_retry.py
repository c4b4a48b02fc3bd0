"""The shadow proxy forwards through the client's one retry loop: a kept-alive connection
that the baseline closes on the next request, before any byte of a response (as
llama-server does with idle connections), is retried on a fresh one; the caller gets the
response relayed whole, and the baseline's record counts the retry."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
from pathlib import Path

from conftest import free_port, wait_http
from raw_http import RawHttpServer, read_request

EVENTS = (
    b'data: {"choices":[{"text":"hi","finish_reason":null}]}\n\n',
    b'data: {"choices":[{"text":"","finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n',
    b"data: [DONE]\n\n",
)
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + b"".join(b"%x\r\n%b\r\n" % (len(e), e) for e in EVENTS)
    + b"0\r\n\r\n"
)


class OneShotServer(RawHttpServer):
    """Answers the first request of each connection (anything else: 200 with a small JSON
    body), and closes the connection, without a byte, when a second request comes."""

    def serve(self, conn: socket.socket) -> None:
        got = read_request(conn, b"")
        if got is None:
            return
        head, _, rest = got
        if head.startswith(b"POST /v1/completions"):
            conn.sendall(RESPONSE)
        else:
            body = b'{"data":[{"id":"m"}]}'
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))
        read_request(conn, rest)  # the next request on this connection: closed unanswered


def test_a_stale_kept_alive_baseline_connection_is_retried(tmp_path: Path) -> None:
    base, cand = OneShotServer(), OneShotServer()
    port = free_port()
    out = tmp_path / "sh"
    cmd = [sys.executable, "-m", "accelbench", "shadow", "proxy", "--listen", f"127.0.0.1:{port}",
           "--baseline", base.url, "--candidate", cand.url, "--max-requests", "3",
           "--duration", "60", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc=proc)
        bodies = []
        for _ in range(3):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("POST", "/v1/completions", json.dumps({"model": "m", "prompt": "x",
                      "max_tokens": 1, "stream": True}), {"Content-Type": "application/json"})  # fmt: skip
            r = c.getresponse()
            bodies.append((r.status, r.read()))
            c.close()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()[-3000:]
    assert bodies == [(200, b"".join(EVENTS))] * 3
    rows = [json.loads(x) for x in (out / "baseline.jsonl").read_text().splitlines()]
    rows.sort(key=lambda r: r["idx"])
    assert [r["ok"] for r in rows] == [True] * 3, rows
    # the readiness check (GET /health, relayed) opened the first connection; each
    # request then found the one before it stale, and was sent again once
    assert [r["retries"] for r in rows] == [1, 1, 1]
    assert base.connections == 4
