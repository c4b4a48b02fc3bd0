"""Prompt datasets: ShareGPT JSON/JSONL, JSONL of prompts, JSONL of chat messages.

Formats (``auto`` picks by the first record):
  * sharegpt: ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}``;
    the first human turn is the prompt, the reply's token count the output length.
  * prompts:  ``{"prompt": "...", "output_tokens": 128}`` (``max_tokens`` also accepted;
    the output length is optional: the run's --osl is used without it).
  * chat:     ``{"messages": [{"role": "user", "content": "..."}], "max_tokens": 64}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from accelbench.errors import AccelbenchError


@dataclass
class DatasetItem:
    prompt: str | list[dict[str, Any]]
    output_tokens: int | None = None
    reference_output: str | None = None  # ShareGPT reply, for counting its tokens


def _records(path: Path) -> list[tuple[int, Any]]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AccelbenchError(f"cannot read dataset {path}: {exc.strerror}") from None
    stripped = raw.lstrip()
    if not stripped:
        raise AccelbenchError(f"dataset {path} is empty")
    if stripped[:1] == b"[":
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise AccelbenchError(f"dataset {path} is not valid JSON: {exc}") from None
        return list(enumerate(data, 1))
    out = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((lineno, orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            raise AccelbenchError(f"{path}:{lineno}: not valid JSON ({exc})") from None
    return out


def detect_format(obj: Any) -> str:
    if isinstance(obj, dict):
        if "conversations" in obj:
            return "sharegpt"
        if "messages" in obj:
            return "chat"
        if "prompt" in obj:
            return "prompts"
    raise AccelbenchError(
        "cannot tell the dataset format from its first record: expected a "
        "`conversations`, `messages` or `prompt` key"
    )


def load_dataset(path: str, fmt: str = "auto") -> list[DatasetItem]:
    p = Path(path)
    recs = _records(p)
    if not recs:
        raise AccelbenchError(f"dataset {path} holds no records")
    if fmt == "auto":
        fmt = detect_format(recs[0][1])
    items: list[DatasetItem] = []
    for where, obj in recs:
        loc = f"{path}:{where}"
        if not isinstance(obj, dict):
            raise AccelbenchError(f"{loc}: a record must be a JSON object")
        if fmt == "sharegpt":
            conv = obj.get("conversations")
            if not isinstance(conv, list):
                raise AccelbenchError(f"{loc}: `conversations` must be a list")
            item = _sharegpt_item(conv)
            if item is not None:
                items.append(item)
        elif fmt == "prompts":
            prompt = obj.get("prompt")
            if not isinstance(prompt, str) or not prompt:
                raise AccelbenchError(f"{loc}: `prompt` must be a non-empty string")
            items.append(DatasetItem(prompt, _out_len(obj, loc)))
        elif fmt == "chat":
            msgs = obj.get("messages")
            if (
                not isinstance(msgs, list)
                or not msgs
                or not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs)
            ):
                raise AccelbenchError(
                    f"{loc}: `messages` must be a non-empty list of {{role, content}} objects"
                )
            items.append(DatasetItem(msgs, _out_len(obj, loc)))
        else:
            raise AccelbenchError(f"unknown dataset format {fmt!r}: sharegpt, prompts or chat")
    if not items:
        raise AccelbenchError(f"dataset {path} has no usable conversations")
    return items


def _out_len(obj: dict, loc: str) -> int | None:
    for key in ("output_tokens", "max_tokens", "output_len"):
        if key in obj and obj[key] is not None:
            v = obj[key]
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise AccelbenchError(f"{loc}: `{key}` must be a positive integer")
            return v
    return None


def _sharegpt_item(conv: list) -> DatasetItem | None:
    for i, turn in enumerate(conv[:-1]):
        if not isinstance(turn, dict):
            continue
        if turn.get("from") in ("human", "user") and isinstance(turn.get("value"), str):
            reply = conv[i + 1]
            if isinstance(reply, dict) and reply.get("from") in ("gpt", "assistant"):
                if turn["value"].strip() and isinstance(reply.get("value"), str):
                    return DatasetItem(turn["value"], None, reply["value"])
            return None
    return None
