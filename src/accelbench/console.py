"""Terminal output of text that comes from outside (servers, files, queries, datasets,
traces, GPU tools, error messages quoting inputs): printed as text, never as Rich markup,
and never as terminal control.

The rule, in one place: every Rich console accelbench prints through is :func:`console`.
Outside text goes into a markup string through :func:`esc`, or as a renderable through
:func:`text`. Control characters (C0 but newline, DEL, C1, and the bidirectional
and zero-width format characters) are shown as Python-style escapes (``\\x1b``,
``\\u202e``), so a hostile server can neither move the cursor, recolour or clear the
screen, nor reorder what is read. The console itself applies the same neutralising to
everything it renders and falls back to plain text where a string is not valid markup:
a string that missed :func:`esc` is shown verbatim instead of crashing the command.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.errors import MarkupError
from rich.segment import Segment
from rich.text import Text

# Every character of Unicode's categories Cc, Cf, Zl and Zp but the newline (Unicode 14,
# Python 3.11's unicodedata; tests/test_verdict.py checks the class against it): the soft
# hyphen U+00AD, the Arabic number signs and the language tags were missing once
_CONTROL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891"
    "\u08e2\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


def _show(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def printable(value: object) -> str:
    """``str(value)`` with every control character written as its escape."""
    return _CONTROL.sub(_show, str(value))


def one_line(value: object) -> str:
    """:func:`printable` with the line break escaped too: an error line that quotes the
    user's input (a CR or LF in an option value) stays one line."""
    return printable(value).replace("\n", "\\n")


# in markup, a run of backslashes before "[" or at the end, and every "["
_MARKUP = re.compile(r"(\\+)(?=\[|$)|\[")


def _esc(m: re.Match[str]) -> str:
    if m.group(1):  # doubled and closed by an empty tag: never escapes what follows
        return m.group(1) * 2 + "[i][/i]"
    # every "[", not only one that opens a tag here: "[bold" escaped alone and "]"
    # escaped alone made a tag when a caller joined them ("[bold @ http://h/]" ate the
    # model name and the URL). An empty tag right after it keeps it from opening one
    # with whatever text follows; a "\[" before text that is no tag would show its "\".
    return "[[i][/i]"


def esc(value: object) -> str:
    """Outside text to put inside a Rich markup string: printable, and rendered back
    exactly (``rich.markup.escape`` loses a backslash before a ``[`` that opens no tag,
    and one at the end of the string unless a tag follows)."""
    return _MARKUP.sub(_esc, printable(value))


def text(value: object, style: str = "") -> Text:
    """Outside text as a Rich renderable (a table cell, a line): never parsed as markup."""
    return Text(printable(value), style=style)


class SafeConsole(Console):
    """A Rich console that never lets text become terminal control or crash on markup:
    see the module's docstring. No emoji codes (``:cd:`` in a bus id stays) and no
    automatic highlighting (it would recolour numbers in a server's words)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("emoji", False)
        kw.setdefault("highlight", False)
        super().__init__(*args, **kw)

    def render_str(self, text: str, **kw: Any) -> Text:
        text = printable(text)
        try:
            return super().render_str(text, **kw)
        except MarkupError:  # a bracket in outside text that missed esc()
            kw["markup"] = False
            return super().render_str(text, **kw)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for seg in super().render(renderable, options):
            if seg.control is None and _CONTROL.search(seg.text):
                seg = Segment(printable(seg.text), seg.style)
            yield seg


def console(stderr: bool = False, **kw: Any) -> Console:
    """The console every accelbench command prints through (see the module docstring)."""
    return SafeConsole(stderr=stderr, **kw)
