"""HTTP/1.1 request framing for accelbench's servers (RFC 9112 sections 2-7), strict:
anything a second parser could read another way is refused, never guessed at.

Why strict: the shadow proxy forwards what it parses. A request whose length two parsers
disagree on (a signed, listed or duplicated ``Content-Length``, ``Transfer-Encoding``
beside it, a folded or bare-LF line) is how requests are smuggled or, as a negative
length once did, re-read from the proxy's own buffer and sent again without end. The
rules, each a refusal with the connection closed after the answer:

- lines end in CRLF; a bare LF or a CR not followed by LF is 400; empty lines before the
  request line are skipped (section 2.2);
- request line ``method SP target SP HTTP/1.x``: one space each, a token method, a target
  of visible ASCII; another HTTP version is 505;
- field lines ``name ":" OWS value OWS``: a token name (whitespace before the colon or a
  line starting with whitespace, obs-fold, is 400), a value without control characters;
  the head is at most ``max_head`` bytes and ``max_fields`` lines (else 431);
- ``Content-Length`` is 1*DIGIT, one field, one value: a sign, an inner space, a list
  (even of identical values) or a second field is 400; above ``max_body`` it is 413;
- ``Transfer-Encoding``: never with ``Content-Length`` and never in HTTP/1.0 (400); its
  final coding must be ``chunked``, applied once (else 400); a coding before it (gzip...)
  is 501, as it is not decoded here;
- chunks: a size of 1 to 16 hex digits, extensions of tokens or quoted strings, the data
  followed by CRLF, a trailer section of field lines (discarded); else 400;
- HTTP/1.1 needs exactly one ``Host`` (section 3.2), HTTP/1.0 at most one;
- ``Expect: 100-continue`` is answered by the caller of this parser (``wants_continue``);
  any other expectation is 417.

:class:`RequestReader` is incremental: the bytes of one request are parsed once however
they arrive (a chunked body is decoded as it comes, not re-read per segment).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_HEAD = 65536  # request line + fields, and separately a trailer section
MAX_FIELDS = 100
MAX_BODY = 64 << 20
MAX_CHUNK_LINE = 4096

_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_NAME = re.compile(_TOKEN)
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
_METHOD = re.compile(_TOKEN)
_TARGET = re.compile(rb"[\x21-\x7e]+")
_VERSION = re.compile(rb"HTTP/([0-9])\.([0-9])")
_QUOTED = rb'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"'
_EXT = (
    rb"(?:[ \t]*;[ \t]*" + _TOKEN + rb"(?:[ \t]*=[ \t]*(?:" + _TOKEN + rb"|" + _QUOTED + rb"))?)*"
)
_CHUNK = re.compile(rb"([0-9A-Fa-f]{1,16})" + _EXT)
_BARE_LF = re.compile(rb"(?<!\r)\n")
_BARE_CR = re.compile(rb"\r(?=[^\n])")  # a CR last in the bytes so far may be followed yet
_DIGITS = re.compile(rb"[0-9]+")


class Reject(Exception):
    """A request that cannot be framed unambiguously: answer ``status`` and close."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class Request:
    method: bytes
    target: bytes
    version: bytes
    headers: list[tuple[bytes, bytes]]  # as received (name's spelling kept), value trimmed
    close: bool  # the caller asked to close after this one (or HTTP/1.0 without keep-alive)
    expect_continue: bool = False
    body: bytearray = field(default_factory=bytearray)


def _bare_line_ending(data: bytes | bytearray, start: int = 0) -> bool:
    return bool(_BARE_LF.search(data, start) or _BARE_CR.search(data, start))


def _fields(lines: list[bytes], what: str) -> list[tuple[bytes, bytes]]:
    out = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not _NAME.fullmatch(name) or not _VALUE.fullmatch(value):
            if line[:1] in (b" ", b"\t"):
                raise Reject(400, f"a folded {what} line (obs-fold)")
            raise Reject(400, f"a malformed {what} line")
        out.append((name, value.strip(b" \t")))
    return out


def _list(values: list[bytes]) -> list[bytes]:
    """The elements of a comma-separated field (all its lines), trimmed, lower-case."""
    return [x.strip(b" \t").lower() for v in values for x in v.split(b",")]


def parse_head(
    head: bytes, *, max_fields: int = MAX_FIELDS, max_body: int = MAX_BODY
) -> tuple[Request, int | None]:
    """The request line and fields (without the final CRLF CRLF); returns the request and
    its body length (None: chunked)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        raise Reject(400, "a malformed request line")
    method, target, version = parts
    if not _METHOD.fullmatch(method) or not _TARGET.fullmatch(target):
        raise Reject(400, "a malformed request line")
    vm = _VERSION.fullmatch(version)
    if vm is None:
        raise Reject(400, "a malformed HTTP version")
    if vm.group(1) != b"1" or vm.group(2) not in (b"0", b"1"):
        raise Reject(505, "only HTTP/1.0 and HTTP/1.1 are served")
    if len(lines) - 1 > max_fields:
        raise Reject(431, f"more than {max_fields} header fields")
    headers = _fields(lines[1:], "header")
    by: dict[bytes, list[bytes]] = {}
    for name, value in headers:
        by.setdefault(name.lower(), []).append(value)
    http10 = vm.group(2) == b"0"
    hosts = len(by.get(b"host", []))
    if hosts > 1 or (hosts == 0 and not http10):
        raise Reject(400, "an HTTP/1.1 request needs exactly one Host field")
    cl, te = by.get(b"content-length"), by.get(b"transfer-encoding")
    length: int | None = 0
    if te is not None:
        if cl is not None:
            raise Reject(400, "both Transfer-Encoding and Content-Length")
        if http10:
            raise Reject(400, "Transfer-Encoding in an HTTP/1.0 request")
        codings = _list(te)
        if codings[-1] != b"chunked" or codings.count(b"chunked") != 1:
            raise Reject(400, "Transfer-Encoding must end in chunked, applied once")
        if len(codings) > 1:
            raise Reject(501, "only the chunked transfer coding is decoded")
        length = None
    elif cl is not None:
        if len(cl) != 1 or not _DIGITS.fullmatch(cl[0]):
            raise Reject(400, "Content-Length must be one field of digits only")
        if len(cl[0]) > 19 or int(cl[0]) > max_body:
            raise Reject(413, f"request body above {max_body} bytes")
        length = int(cl[0])
    conn = _list(by.get(b"connection", []))
    close = b"close" in conn or (http10 and b"keep-alive" not in conn)
    expect = _list(by.get(b"expect", []))
    if expect and expect != [b"100-continue"]:
        raise Reject(417, "only Expect: 100-continue is understood")
    req = Request(method, target, version, headers, close, bool(expect) and not http10)
    return req, length


class RequestReader:
    """Frames requests out of one connection's bytes. ``feed(buf)`` consumes what it has
    parsed from ``buf`` and returns a whole request, or None when more bytes are needed;
    it raises :class:`Reject` for anything ambiguous (answer, then close)."""

    def __init__(
        self, max_head: int = MAX_HEAD, max_body: int = MAX_BODY, max_fields: int = MAX_FIELDS
    ) -> None:
        self.max_head, self.max_body, self.max_fields = max_head, max_body, max_fields
        self._reset()

    def _reset(self) -> None:
        self.req: Request | None = None
        self.remaining = 0  # body bytes still due (Content-Length) or of this chunk
        self.chunked = False
        self.state = "head"  # head | length | size | data | crlf | trailer

    @property
    def partial(self) -> bool:
        """Part of a request has been read (an end of input now cuts it)."""
        return self.req is not None

    @property
    def wants_continue(self) -> bool:
        """The head asked for ``100 Continue`` and its body has not fully come."""
        return self.req is not None and self.req.expect_continue

    def feed(self, buf: bytearray) -> Request | None:
        if self.state == "head":
            while buf.startswith(b"\r\n"):  # empty lines before a request line
                del buf[:2]
            end = self._block_end(buf, "a line", "request head")
            if end < 0:
                return None
            self.req, length = parse_head(
                bytes(buf[:end]), max_fields=self.max_fields, max_body=self.max_body
            )
            del buf[: end + 4]
            if length is None:
                self.chunked, self.state = True, "size"
            else:
                self.remaining, self.state = length, "length"
        req = self.req
        assert req is not None
        if self.state == "length":
            take = min(self.remaining, len(buf))
            req.body += buf[:take]
            del buf[:take]
            self.remaining -= take
            if self.remaining:
                return None
            return self._done()
        return self._chunks(buf, req)

    def _chunks(self, buf: bytearray, req: Request) -> Request | None:
        while True:
            if self.state == "size":
                end = buf.find(b"\r\n", 0, MAX_CHUNK_LINE)
                if _bare_line_ending(buf[: MAX_CHUNK_LINE if end < 0 else end + 2]):
                    raise Reject(400, "a chunk line that does not end in CRLF")
                if end < 0:
                    if len(buf) >= MAX_CHUNK_LINE:
                        raise Reject(400, "a chunk-size line too long")
                    return None
                m = _CHUNK.fullmatch(bytes(buf[:end]))
                if m is None:
                    raise Reject(400, "a malformed chunk size")
                size = int(m.group(1), 16)
                if len(req.body) + size > self.max_body:
                    raise Reject(413, f"request body above {self.max_body} bytes")
                del buf[: end + 2]
                if size == 0:
                    self.state, self.remaining = "trailer", 0
                else:
                    self.state, self.remaining = "data", size
            elif self.state == "data":
                take = min(self.remaining, len(buf))
                req.body += buf[:take]
                del buf[:take]
                self.remaining -= take
                if self.remaining:
                    return None
                self.state = "crlf"
            elif self.state == "crlf":
                if len(buf) < 2:
                    if buf[:1] not in (b"", b"\r"):
                        raise Reject(400, "chunk data not followed by CRLF")
                    return None
                if buf[:2] != b"\r\n":
                    raise Reject(400, "chunk data not followed by CRLF")
                del buf[:2]
                self.state = "size"
            else:  # trailer: field lines up to an empty line, discarded
                if buf.startswith(b"\r\n"):
                    del buf[:2]
                    return self._done()
                end = self._block_end(buf, "a trailer line", "trailer section")
                if end < 0:
                    return None
                lines = bytes(buf[:end]).split(b"\r\n")
                if len(lines) > self.max_fields:
                    raise Reject(431, f"more than {self.max_fields} trailer fields")
                _fields(lines, "trailer")
                del buf[: end + 4]
                return self._done()

    def _block_end(self, buf: bytearray, line: str, block: str) -> int:
        """Where the field block at the start of ``buf`` ends (its empty line), or -1 when
        it has not all come; a bare LF (400) or a block above ``max_head`` (431) refused."""
        end = buf.find(b"\r\n\r\n", 0, self.max_head + 4)
        if _bare_line_ending(buf[: self.max_head + 4 if end < 0 else end + 4]):
            raise Reject(400, f"{line} that does not end in CRLF")
        if end < 0 and len(buf) > self.max_head:
            raise Reject(431, f"{block} above {self.max_head} bytes")
        return end

    def _done(self) -> Request:
        req = self.req
        assert req is not None
        self._reset()
        return req
