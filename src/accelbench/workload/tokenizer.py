"""Counting tokens the way the server does: through its own ``/tokenize`` (llama.cpp,
vLLM, SGLang) or a local Hugging Face ``tokenizer.json``."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Protocol

from accelbench.errors import AccelbenchError
from accelbench.urls import Endpoint


class Tokenizer(Protocol):
    name: str

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...


class LocalTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer from tokenizer.json (or a directory)."""

    def __init__(self, path: str) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        if not p.is_file():
            raise AccelbenchError(f"no tokenizer.json at {path}")
        try:
            self._tok = HFTokenizer.from_file(str(p))
        except Exception as exc:  # noqa: BLE001 - the library raises plain Exception
            raise AccelbenchError(f"cannot load tokenizer {p}: {exc}") from None
        self.name = f"local:{p}"

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=False)

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._tok.encode_batch(texts, add_special_tokens=False)]


class ServerTokenizer:
    """The server's own /tokenize and /detokenize (llama.cpp and vLLM dialects)."""

    def __init__(self, base_url: str | Endpoint, model: str, api_key: str | None = None) -> None:
        server = Endpoint.parse(base_url)
        u = server.parts
        self._conn_cls: type[http.client.HTTPConnection] = (
            http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        )
        self.host, self.port = u.hostname or "127.0.0.1", u.port
        self.prefix = u.path.rstrip("/").removesuffix("/v1")
        self.model = model
        self.headers = {"Content-Type": "application/json", **server.headers(api_key)}
        self._conn: http.client.HTTPConnection | None = None
        self.name = f"server:{server.display}/tokenize"

    def _post(self, path: str, body: dict) -> dict:
        for attempt in range(2):
            if self._conn is None:
                self._conn = self._conn_cls(self.host, self.port, timeout=30)
            try:
                self._conn.request("POST", self.prefix + path, json.dumps(body), self.headers)
                r = self._conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as exc:
                self._conn.close()
                self._conn = None
                if attempt:
                    raise AccelbenchError(f"{path} on the server failed: {exc}") from None
                continue
            if r.status != 200:
                raise AccelbenchError(f"{path} answered HTTP {r.status}: {data[:200]!r}")
            return json.loads(data)
        raise AccelbenchError(f"{path} failed")

    def encode(self, text: str) -> list[int]:
        # llama.cpp reads `content` (add_special false by default); vLLM reads `prompt`.
        out = self._post(
            "/tokenize",
            {"content": text, "prompt": text, "model": self.model, "add_special_tokens": False},
        )
        toks = out.get("tokens")
        if toks is None:
            raise AccelbenchError("the server's /tokenize returned no `tokens`")
        return [t if isinstance(t, int) else t["id"] for t in toks]

    def decode(self, ids: list[int]) -> str:
        out = self._post("/detokenize", {"tokens": ids, "model": self.model})
        text = out.get("content", out.get("prompt"))
        if text is None:
            raise AccelbenchError("the server's /detokenize returned no text")
        return text

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def server_tokenizer_if_any(
    base_url: str | Endpoint, model: str, api_key: str | None
) -> Tokenizer | None:
    """The server's tokenizer if it exposes /tokenize and /detokenize, else None."""
    tok = ServerTokenizer(base_url, model, api_key)
    try:
        ids = tok.encode("hello world")
        if not ids:
            return None
        tok.decode(ids)
    except (AccelbenchError, ValueError, KeyError, TypeError):
        return None
    return tok
