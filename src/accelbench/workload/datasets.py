"""Prompt datasets: ShareGPT JSON/JSONL, JSONL of prompts, JSONL of chat messages.

Formats (``auto`` picks by the first record):
  * sharegpt: ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}``;
    the first turn (as :func:`load_conversations` reads turns) is the prompt; the reply's
    recorded ``output_tokens`` (or its token count) the output length. A record with no
    human turn and a reply is left out and counted (:attr:`Records.left_out`).
  * prompts:  ``{"prompt": "...", "output_tokens": 128}`` (or ``max_tokens`` or
    ``output_len``: one of them; the output length is optional: the run's --osl is used
    without it).
  * chat:     ``{"messages": [{"role": "user", "content": "..."}], "max_tokens": 64}``.

:func:`load_conversations` keeps a ShareGPT conversation's turns (for sessions): each
human turn with the reply recorded after it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

from accelbench.errors import AccelbenchError
from accelbench.jsonfile import DuplicateKeyError, orjson_unique, utf8_json_bytes
from accelbench.workload.lengths import MAX_TRACE_TOKENS, token_length
from accelbench.workload.lengths import short as _short
from accelbench.workload.tokenizer import Tokenizer

__all__ = [
    "Conversation",
    "DatasetItem",
    "Records",
    "detect_format",
    "load_conversations",
    "lengths_recorded",
    "load_dataset",
]

USER_ROLES = ("human", "user")
REPLY_ROLES = ("gpt", "assistant", "chatgpt", "bard", "model")
SYSTEM_ROLE = "system"  # only before the first turn: the session's system prompt
KNOWN_ROLES = (*USER_ROLES, *REPLY_ROLES, SYSTEM_ROLE)
REPLY_LENGTH_KEYS = ("output_tokens", "num_tokens", "tokens")
# max_completion_tokens: OpenAI's chat name for max_tokens (a chat record may carry it)
OUTPUT_LENGTH_KEYS = ("output_tokens", "max_tokens", "output_len", "max_completion_tokens")
# fields of an OpenAI request that a prompts or chat record may carry: accelbench sends the
# prompt (or messages) and the length, never a record's own sampling or tool fields, so a
# record holding one is counted and the run says so (--extra-body sets a field for all)
REQUEST_FIELDS = frozenset({
    "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids", "seed", "n",
    "best_of", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias",
    "logprobs", "top_logprobs", "min_tokens", "ignore_eos", "tools", "tool_choice",
    "parallel_tool_calls", "functions", "function_call", "response_format", "suffix",
    "echo", "stream", "stream_options", "model", "user", "reasoning_effort",
})  # fmt: skip

_T = TypeVar("_T")
# a data set's records are all read (and held) before the plan: as many as a run's requests
# (docs/LIMITS.md), so a file of a billion lines is refused at the first line past them
MAX_RECORDS = 10_000_000


NO_TURN = "without a human turn and a reply"
LATE_SYSTEM = "with a system message after the first turn"
UNKNOWN_ROLE = "with a role not known"


class Records(list[_T]):
    """A loader's result: the items, and the file's ``records`` left out, counted by why
    (``why``: ShareGPT records with no human turn and a reply, a role not known, a
    system message after the first turn: nothing to send, or no way to read it as
    turns). :attr:`note` says so in one line for the run to print and record."""

    def __init__(
        self,
        items: list[_T],
        path: str,
        records: int,
        why: dict[str, int] | None = None,
        roles: dict[str, int] | None = None,
        unsent: dict[str, int] | None = None,
    ) -> None:
        super().__init__(items)
        self.path = path
        self.records = records
        self.why = dict(why or {})
        self.roles = dict(roles or {})  # role not known (its repr) -> records
        self.unsent = dict(unsent or {})  # a request field records carry, not sent -> records

    @property
    def left_out(self) -> int:
        return sum(self.why.values())

    @property
    def reasons(self) -> str:
        """Why records were left out: ``3 without a human turn and a reply, ...``."""
        parts = []
        for why, n in self.why.items():
            if why == UNKNOWN_ROLE:  # the most frequent five, by their repr
                top = sorted(self.roles.items(), key=lambda kv: -kv[1])
                shown = ", ".join(f"{r} x{k:,}" for r, k in top[:5])
                more = f" and {len(top) - 5:,} more" if len(top) > 5 else ""
                why = f"{why}: {shown}{more}; known: {', '.join(KNOWN_ROLES)}"
            parts.append(f"{n:,} {why}")
        return ", ".join(parts)

    @property
    def note(self) -> str | None:
        """``N of M records used (K without a human turn and a reply, ...)``; None: all
        used."""
        parts = []
        if self.left_out:
            parts.append(
                f"{self.records - self.left_out:,} of {self.records:,} records used "
                f"({self.reasons})"
            )
        if self.unsent:
            top = sorted(self.unsent.items(), key=lambda kv: (-kv[1], kv[0]))
            fields = ", ".join(f"{k} x{n:,}" for k, n in top)
            parts.append(
                f"request fields in records are not sent ({fields}): each request carries "
                "the prompt and its length only; --extra-body sets a field for every request"
            )
        return f"{self.path}: {'; '.join(parts)}" if parts else None


class _LeftOut(Exception):
    """A ShareGPT record that cannot be read as turns: left out, counted by ``why``
    (and ``role``, the role not known, as the note shows it)."""

    def __init__(self, why: str, role: str | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.role = role


def _none_used(path: str, records: int, why: dict[str, int], roles: dict[str, int]) -> str:
    """The error for a file none of whose records can be used, saying why."""
    reasons = Records([], path, records, why, roles).reasons
    return (
        f"dataset {path} has no conversation with a human turn and a reply (none of its "
        f"{records:,} records: {reasons})"
    )


def _count(why: dict[str, int], roles: dict[str, int], exc: _LeftOut | None) -> None:
    reason = NO_TURN if exc is None else exc.why
    why[reason] = why.get(reason, 0) + 1
    if exc is not None and exc.role is not None:
        roles[exc.role] = roles.get(exc.role, 0) + 1


@dataclass
class DatasetItem:
    prompt: str | list[dict[str, Any]]
    output_tokens: int | None = None
    reference_output: str | None = None  # ShareGPT reply, for counting its tokens
    where: str = ""  # FILE:LINE of its record, named where the reply's count is refused


def counted_reply_length(reply: str, tok: Tokenizer, where: str) -> int:
    """A reply's length counted with the server's tokenizer (the file records none): as
    many tokens as the reply had, at least 1, held to a recorded length's range (it is
    sent as max_tokens: one past MAX_TRACE_TOKENS failed every request with HTTP 400)."""
    n = max(1, len(tok.encode(reply)))
    return token_length(n, where, "a reply's length counted with the tokenizer (none recorded)")


def _records(path: Path) -> list[tuple[int, Any]]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AccelbenchError(f"cannot read dataset {path}: {exc.strerror}") from None
    raw = utf8_json_bytes(raw, f"dataset {path}")
    stripped = raw.lstrip()
    if not stripped:
        raise AccelbenchError(f"dataset {path} is empty")
    if stripped[:1] == b"[":
        try:
            data = orjson_unique(raw)
        except orjson.JSONDecodeError as exc:
            raise AccelbenchError(f"dataset {path} is not valid JSON: {exc}") from None
        except DuplicateKeyError as exc:
            raise AccelbenchError(f"dataset {path}: {exc}") from None
        if isinstance(data, list) and len(data) > MAX_RECORDS:
            raise _too_many(path, f"it holds {len(data):,}")
        return list(enumerate(data, 1))
    out: list[tuple[int, Any]] = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        if len(out) >= MAX_RECORDS:
            raise _too_many(path, f"line {lineno:,} is past them")
        try:
            out.append((lineno, orjson_unique(line)))
        except orjson.JSONDecodeError as exc:
            raise AccelbenchError(f"{path}:{lineno}: not valid JSON ({exc})") from None
        except DuplicateKeyError as exc:
            raise AccelbenchError(f"{path}:{lineno}: {exc}") from None
    return out


def _too_many(path: Path, where: str) -> AccelbenchError:
    """A data set past :data:`MAX_RECORDS`, refused where its reading gets there."""
    return AccelbenchError(
        f"dataset {path} has more than {MAX_RECORDS:,} records ({where}): every record is "
        "held in memory"
    )


def detect_format(obj: Any, where: str = "") -> str:
    """The data set's format from its first record (``where``: its FILE:LINE, named in
    the error; a file whose first record has none of the keys was not named)."""
    if isinstance(obj, dict):
        if "conversations" in obj:
            return "sharegpt"
        if "messages" in obj:
            return "chat"
        if "prompt" in obj:
            return "prompts"
    keys = f" (its keys: {', '.join(map(repr, list(obj)[:5]))})" if isinstance(obj, dict) else ""
    raise AccelbenchError(
        f"{where + ': ' if where else ''}cannot tell the dataset format from its first "
        f"record{keys}: expected a `conversations`, `messages` or `prompt` key"
    )


def load_dataset(path: str, fmt: str = "auto") -> Records[DatasetItem]:
    """The file's prompts, in file order. A ShareGPT record gives its first turn (read
    as :func:`load_conversations` reads turns); one with none is left out and counted in
    the result's ``left_out``; none at all: one clear error."""
    p = Path(path)
    recs = _records(p)
    if not recs:
        raise AccelbenchError(f"dataset {path} holds no records")
    if fmt == "auto":
        fmt = detect_format(recs[0][1], f"{path}:{recs[0][0]}")
    if fmt not in ("sharegpt", "prompts", "chat"):
        raise AccelbenchError(f"unknown dataset format {fmt!r}: sharegpt, prompts or chat")
    items: list[DatasetItem] = []
    why: dict[str, int] = {}
    roles: dict[str, int] = {}
    unsent: dict[str, int] = {}
    for where, obj in recs:
        loc = f"{path}:{where}"
        if not isinstance(obj, dict):
            raise AccelbenchError(f"{loc}: a record must be a JSON object")
        if fmt == "sharegpt":
            try:
                conv = _conversation(_messages(obj, loc), loc, None, first_turn=True)
            except _LeftOut as exc:
                _count(why, roles, exc)
                continue
            if conv is None:
                _count(why, roles, None)
                continue
            (user, n), reply = conv.turns[0], conv.replies[0]
            items.append(DatasetItem(user, n, reply, loc))
        elif fmt == "prompts":
            prompt = obj.get("prompt")
            if not isinstance(prompt, str) or not prompt:
                raise AccelbenchError(f"{loc}: `prompt` must be a non-empty string")
            items.append(DatasetItem(prompt, _out_len(obj, loc), where=loc))
            _count_unsent(obj, unsent)
        else:
            msgs = _chat_messages(obj.get("messages"), loc)
            items.append(DatasetItem(msgs, _out_len(obj, loc), where=loc))
            _count_unsent(obj, unsent)
    if not items:
        raise AccelbenchError(_none_used(path, len(recs), why, roles))
    return Records(items, path, len(recs), why, roles, unsent)


def _chat_messages(msgs: Any, loc: str) -> list[dict[str, Any]]:
    """A chat record's ``messages``: a non-empty list of objects, each with a ``role``
    (a non-empty string) and a ``content`` that is text: a string, or a list of
    ``{"type": "text", "text": "..."}`` parts (OpenAI's form). Anything else is refused
    naming the message: ``content: 5`` was sent as the text ``5`` on completions (and
    as a number on chat), ``null`` as ``None``, a part list as its Python ``repr``."""
    if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) for m in msgs):
        raise AccelbenchError(
            f"{loc}: `messages` must be a non-empty list of {{role, content}} objects"
        )
    for i, m in enumerate(msgs):
        role, content = m.get("role"), m.get("content")
        if not isinstance(role, str) or not role.strip():
            raise AccelbenchError(
                f"{loc}: messages[{i}].role must be a non-empty string (got {_short(role)})"
            )
        if not isinstance(content, str) and not (
            isinstance(content, list)
            and all(
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
                for part in content
            )
        ):
            raise AccelbenchError(
                f"{loc}: messages[{i}].content must be a string or a list of "
                f'{{"type": "text", "text": ...}} parts (got {_short(content)})'
            )
    return msgs


def lengths_recorded(path: str, fmt: str = "auto", *, sessions: bool = False) -> bool:
    """Whether every entry the file gives records its output length, so that no request
    takes ``--osl``: a prompts or chat record's length key, a ShareGPT reply's (its first
    turn's; with ``sessions``, every turn's). A reply with none would be counted with the
    server's tokenizer, or take ``--osl`` where there is none: not recorded."""
    if sessions:
        return all(n is not None for c in load_conversations(path) for _, n in c.turns)
    return all(item.output_tokens is not None for item in load_dataset(path, fmt))


def _count_unsent(obj: dict, unsent: dict[str, int]) -> None:
    for k in obj.keys() & REQUEST_FIELDS:
        unsent[k] = unsent.get(k, 0) + 1


def _out_len(obj: dict, loc: str) -> int | None:
    """A prompt's output length: its ``output_tokens``, ``max_tokens``, ``output_len`` or
    ``max_completion_tokens``."""
    return _one_length(obj, OUTPUT_LENGTH_KEYS, loc, "")


# (length keys, a record's key) seen not to be a misspelling (each compared once)
_NOT_NEAR: set[tuple[tuple[str, ...], str]] = set()


def _one_length(obj: dict, keys: tuple[str, ...], loc: str, what: str) -> int | None:
    """The one of ``keys`` that ``obj`` sets (not null), a whole number of tokens in
    [1, :data:`MAX_TRACE_TOKENS`] (as a trace's lengths: --osl's bounds); None: none
    is set; more than one: refused (which one was meant?). A key spelt nearly as one of
    them (``max_token``, ``output_tokens `` with a space) is refused too: read as no
    length, the run's --osl was used in its place without a word."""
    given = [k for k in keys if obj.get(k) is not None]
    for k in obj:
        if k not in keys and (keys, k) not in _NOT_NEAR:
            near = difflib.get_close_matches(k.strip().lower(), keys, n=1, cutoff=0.85)
            if near:
                raise AccelbenchError(
                    f"{loc}: {what}key {k!r} is not read: did you mean `{near[0]}`?"
                )
            _NOT_NEAR.add((keys, k))
    if not given:
        return None
    if len(given) > 1:
        named = [f"`{k}`" for k in given]
        both = " and ".join(named) if len(named) == 2 else ", ".join(named)
        raise AccelbenchError(
            f"{loc}: {what}{both} are {'both' if len(named) == 2 else 'all'} set: give "
            f"one of {', '.join(keys)}"
        )
    key = given[0]
    return token_length(obj[key], loc, f"{what}`{key}`")


@dataclass
class Conversation:
    """One ShareGPT conversation as a session: ``turns[k]`` = (the k-th user message, the
    recorded reply's length in tokens when the file gives one, else None: the caller
    counts ``replies[k]`` with the server's tokenizer)."""

    turns: list[tuple[str, int | None]]
    replies: list[str]  # the recorded reply texts, one per turn
    system: str | None = None  # a leading system message, if the conversation has one
    id: str | None = None  # the record's ``id``, if any


def load_conversations(path: str, tok: Tokenizer | None = None) -> Records[Conversation]:
    """The ShareGPT file's conversations with their turns, in file order.

    A turn is a human (``human``/``user``) message and the reply (``gpt``/``assistant``/
    ``chatgpt``/``bard``/``model``) that follows it; consecutive messages of one side are
    joined with a blank line; a leading reply, and a last human message that got no
    reply, are left out (there is no reply length to send it with); messages whose value
    is not a non-empty string are skipped; a ``system`` message is the system prompt
    before the first turn; a record with one after it, or with any other role (``Human``,
    ``bing``, ``tool``), cannot be read as turns: it is left out and counted by why
    (:attr:`Records.why`, the roles in :attr:`Records.roles`). A reply's length in tokens is the message's
    ``output_tokens``, ``num_tokens`` or ``tokens`` (one of them) when given, else
    counted with ``tok`` when given, else None. A conversation with no complete turn is
    left out and counted in the result's ``left_out``; none at all: one clear error."""
    p = Path(path)
    out: list[Conversation] = []
    why: dict[str, int] = {}
    roles: dict[str, int] = {}
    recs = _records(p)
    for where, obj in recs:
        loc = f"{path}:{where}"
        if not isinstance(obj, dict):
            raise AccelbenchError(f"{loc}: a record must be a JSON object")
        try:
            c = _conversation(_messages(obj, loc), loc, tok)
        except _LeftOut as exc:
            _count(why, roles, exc)
            continue
        if c is None:
            _count(why, roles, None)
        else:
            rid = obj.get("id")
            c.id = rid if isinstance(rid, str) else None
            out.append(c)
    if not out:
        raise AccelbenchError(_none_used(path, len(recs), why, roles))
    return Records(out, path, len(recs), why, roles)


def _messages(obj: dict, loc: str) -> list:
    conv = obj.get("conversations")
    if conv is None and ("prompt" in obj or "messages" in obj):
        # --sessions (or sharegpt) on a prompts or chat file: "must be a list" said of a
        # key the file never had
        kind = "a prompts" if "prompt" in obj else "a chat"
        raise AccelbenchError(
            f"{loc}: {kind} record, not a ShareGPT conversation (`conversations`), which "
            "--sessions and --dataset-format sharegpt read"
        )
    if not isinstance(conv, list):
        raise AccelbenchError(f"{loc}: `conversations` must be a list")
    return conv


def _conversation(
    conv: list, loc: str, tok: Tokenizer | None, *, first_turn: bool = False
) -> Conversation | None:
    """The record's turns (``first_turn``: only the first; every message's role is
    checked all the same), or None where it has no complete turn."""
    # (side, text, recorded length) with one side's consecutive messages joined
    msgs: list[tuple[str, str, int | None]] = []
    system = None
    for m in conv:
        if not isinstance(m, dict):
            continue
        role = m.get("from")
        if role in USER_ROLES:
            side = "user"
        elif role in REPLY_ROLES:
            side = "reply"
        elif role == SYSTEM_ROLE:
            if msgs or system is not None:
                raise _LeftOut(LATE_SYSTEM)
            side = SYSTEM_ROLE
        else:  # `Human`, `bing`, `tool`: counted, never read as a turn
            raise _LeftOut(UNKNOWN_ROLE, repr(role)[:40])
        text = m.get("value")
        if not isinstance(text, str) or not text.strip():
            continue
        if side == SYSTEM_ROLE:
            system = text
            continue
        n = _one_length(m, REPLY_LENGTH_KEYS, loc, "a reply's ") if side == "reply" else None
        if msgs and msgs[-1][0] == side:
            _, prev, pn = msgs[-1]
            both = pn + n if pn is not None and n is not None else None
            if both is not None and both > MAX_TRACE_TOKENS:  # one reply, sent as one
                token_length(both, loc, f"consecutive replies' lengths ({pn} + {n})")
            msgs[-1] = (side, f"{prev}\n\n{text}", both)
        else:
            msgs.append((side, text, n))
    if msgs and msgs[0][0] == "reply":
        msgs = msgs[1:]
    turns: list[tuple[str, int | None]] = []
    replies: list[str] = []
    for (_, user, _), (_, reply, n) in zip(msgs[0::2], msgs[1::2], strict=False):
        if n is None and tok is not None:
            n = counted_reply_length(reply, tok, loc)
        turns.append((user, n))
        replies.append(reply)
        if first_turn:
            break
    return Conversation(turns, replies, system) if turns else None
