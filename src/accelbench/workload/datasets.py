"""Prompt datasets: ShareGPT JSON/JSONL, JSONL of prompts, JSONL of chat messages.

Formats (``auto`` picks by the first record):
  * sharegpt: ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}``;
    the first human turn is the prompt, the reply's token count the output length.
  * prompts:  ``{"prompt": "...", "output_tokens": 128}`` (``max_tokens`` also accepted;
    the output length is optional: the run's --osl is used without it).
  * chat:     ``{"messages": [{"role": "user", "content": "..."}], "max_tokens": 64}``.

:func:`load_conversations` keeps a ShareGPT conversation's turns (for sessions): each
human turn with the reply recorded after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from accelbench.errors import AccelbenchError
from accelbench.workload.tokenizer import Tokenizer

__all__ = ["Conversation", "DatasetItem", "detect_format", "load_conversations", "load_dataset"]

USER_ROLES = ("human", "user")
REPLY_ROLES = ("gpt", "assistant", "chatgpt", "bard", "model")
REPLY_LENGTH_KEYS = ("output_tokens", "num_tokens", "tokens")


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


@dataclass
class Conversation:
    """One ShareGPT conversation as a session: ``turns[k]`` = (the k-th user message, the
    recorded reply's length in tokens when the file gives one, else None: the caller
    counts ``replies[k]`` with the server's tokenizer)."""

    turns: list[tuple[str, int | None]]
    replies: list[str]  # the recorded reply texts, one per turn
    system: str | None = None  # a leading system message, if the conversation has one
    id: str | None = None  # the record's ``id``, if any


def load_conversations(path: str, tok: Tokenizer | None = None) -> list[Conversation]:
    """The ShareGPT file's conversations with their turns, in file order.

    A turn is a human (``human``/``user``) message and the reply (``gpt``/``assistant``)
    that follows it; consecutive messages of one side are joined with a blank line; a
    leading reply, and a last human message that got no reply, are left out (there is no
    reply length to send it with); messages whose value is not a non-empty string are
    skipped. A reply's length in tokens is the message's ``output_tokens``, ``num_tokens``
    or ``tokens`` when given, else counted with ``tok`` when given, else None. A
    conversation with no complete turn is left out; none at all: one clear error."""
    p = Path(path)
    out: list[Conversation] = []
    for where, obj in _records(p):
        loc = f"{path}:{where}"
        if not isinstance(obj, dict):
            raise AccelbenchError(f"{loc}: a record must be a JSON object")
        conv = obj.get("conversations")
        if not isinstance(conv, list):
            raise AccelbenchError(f"{loc}: `conversations` must be a list")
        c = _conversation(conv, loc, tok)
        if c is not None:
            rid = obj.get("id")
            c.id = rid if isinstance(rid, str) else None
            out.append(c)
    if not out:
        raise AccelbenchError(f"dataset {path} has no conversation with a human turn and a reply")
    return out


def _conversation(conv: list, loc: str, tok: Tokenizer | None) -> Conversation | None:
    # (side, text, recorded length) with one side's consecutive messages joined
    msgs: list[tuple[str, str, int | None]] = []
    system = None
    for m in conv:
        if not isinstance(m, dict) or not isinstance(m.get("value"), str):
            continue
        text, role = m["value"], m.get("from")
        if not text.strip():
            continue
        if role == "system" and not msgs and system is None:
            system = text
            continue
        side = "user" if role in USER_ROLES else "reply" if role in REPLY_ROLES else None
        if side is None:
            continue
        n = _reply_length(m, loc) if side == "reply" else None
        if msgs and msgs[-1][0] == side:
            _, prev, pn = msgs[-1]
            both = pn + n if pn is not None and n is not None else None
            msgs[-1] = (side, f"{prev}\n\n{text}", both)
        else:
            msgs.append((side, text, n))
    if msgs and msgs[0][0] == "reply":
        msgs = msgs[1:]
    turns: list[tuple[str, int | None]] = []
    replies: list[str] = []
    for (_, user, _), (_, reply, n) in zip(msgs[0::2], msgs[1::2], strict=False):
        if n is None and tok is not None:
            n = max(1, len(tok.encode(reply)))
        turns.append((user, n))
        replies.append(reply)
    return Conversation(turns, replies, system) if turns else None


def _reply_length(m: dict, loc: str) -> int | None:
    for key in REPLY_LENGTH_KEYS:
        if m.get(key) is not None:
            v = m[key]
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise AccelbenchError(f"{loc}: a reply's `{key}` must be a positive integer")
            return v
    return None
