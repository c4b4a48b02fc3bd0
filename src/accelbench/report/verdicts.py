"""How a verdict is drawn: one function per renderer for the one
:class:`~accelbench.metrics.verdict.Verdict` record (stress, shadow gates, claims, health).

- :func:`cells`: plain-text table cells under :data:`HEAD` (the report's tables, both
  Markdown and HTML);
- :func:`terminal_cells` / :func:`terminal_line`: Rich markup (escaped) for the CLI;
- :func:`markdown_line`: one Markdown list item;
- :func:`html_line`: one HTML paragraph with the status badge.

Every renderer says the same things in the same order: the status in its suite's word,
the name, the estimate in its unit, the interval, the thresholds, and the note.
"""

from __future__ import annotations

import html as _html

from accelbench.console import printable
from accelbench.metrics.format import sig, with_unit
from accelbench.metrics.verdict import Status, Verdict

HEAD = ["verdict", "statistic", "unit", "estimate", "95% interval", "thresholds", "result",
        "note", "evidence"]  # fmt: skip

# Rich colours and CSS classes by status (never by a suite's word).
COLOUR = {
    Status.PASS: "green",
    Status.WARN: "yellow",
    Status.FAIL: "red",
    Status.INCONCLUSIVE: "yellow",
    Status.UNKNOWN: "magenta",
    Status.NA: "dim",
}


def interval_text(v: Verdict, fmt: str = "plain") -> str:
    """``lo to hi`` (plain) or ``[lo, hi]`` (in the unit, for lines); ``—`` / ``-``
    without one."""
    lo, hi = v.low, v.high
    if lo is None or hi is None:
        return "—" if fmt == "plain" else "-"
    if fmt == "plain":
        return f"{sig(lo)} to {sig(hi)}"
    return f"[{with_unit(lo, v.unit)}, {with_unit(hi, v.unit)}]"


def thresholds_text(v: Verdict, fmt: str = "plain") -> str:
    """``warn 5; fail 20`` (plain) or in the unit (lines); ``—`` without any."""
    shown = [(k, x) for k, x in v.thresholds.items() if x is not None]
    if not shown:
        return "—" if fmt == "plain" else "-"
    num = sig if fmt == "plain" else (lambda x: with_unit(x, v.unit))
    return "; ".join(f"{k.replace('_', ' ')} {num(x)}" for k, x in shown)


def evidence_text(v: Verdict) -> str:
    """The evidence as ``key=value; ...`` (numbers to four significant digits)."""
    out = []
    for k, x in v.evidence.items():
        if x is None:
            continue
        out.append(f"{k}={sig(x) if isinstance(x, int | float) else x}")
    return "; ".join(out)


def cells(v: Verdict) -> list[str]:
    """Plain-text cells under :data:`HEAD` (escape them for the medium)."""
    return [
        v.name,
        v.statistic,
        v.unit,
        sig(v.estimate),
        interval_text(v),
        thresholds_text(v),
        v.word,
        v.note or "—",
        evidence_text(v),
    ]


def _esc(text: str) -> str:
    from accelbench.console import esc

    return esc(text)


def terminal_word(v: Verdict) -> str:
    """The status in its suite's word, coloured (Rich markup)."""
    c = COLOUR.get(v.status, "white")
    return f"[{c}]{_esc(v.word)}[/{c}]"


TERMINAL_HEAD = ["verdict", "check", "estimate", "95% interval", "thresholds"]


def terminal_cells(v: Verdict) -> list[str]:
    """Rich-markup cells under :data:`TERMINAL_HEAD` for a CLI table."""
    return [
        terminal_word(v),
        _esc(v.name),
        _esc(with_unit(v.estimate, v.unit)),
        _esc(interval_text(v, "line")),
        _esc(thresholds_text(v, "line")),
    ]


def _line_parts(v: Verdict) -> str:
    est = with_unit(v.estimate, v.unit)
    parts = [] if v.estimate is None else [est + " " + interval_text(v, "line")]
    th = thresholds_text(v, "line")
    if th != "-":
        parts.append(th)
    if v.note:
        parts.append(v.note)
    return "; ".join(parts)


def terminal_line(v: Verdict) -> str:
    """``<word> <name>: <estimate> [lo, hi]; thresholds; note`` in Rich markup."""
    rest = _line_parts(v)
    return f"{terminal_word(v)} {_esc(v.name)}" + (f": {_esc(rest)}" if rest else "")


def md_cell(x: object) -> str:
    """Text safe in Markdown (a table cell or a list item): no pipes, no HTML, one line,
    no control character (a CR ends a Markdown line as LF does; an ESC would recolour the
    terminal that shows the file): those are written as escapes (``console.printable``)."""
    s = printable(x).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def html_text(x: object) -> str:
    """Text safe in HTML (an element's text or an attribute's value): markup escaped and
    control characters written as escapes, as in Markdown and on the terminal."""
    return _html.escape(printable(x), quote=True)


def markdown_line(v: Verdict) -> str:
    """One Markdown list item: ``- **word** `name`: estimate [lo, hi]; ...``."""
    rest = _line_parts(v)
    return f"- **{v.word}** `{md_cell(v.name)}`" + (f": {md_cell(rest)}" if rest else "")


def html_badge(v: Verdict) -> str:
    """The status in its suite's word, in a badge whose CSS class is the status."""
    css = {Status.NA: "na", Status.WARN: "warn-v"}.get(v.status, str(v.status))
    return f'<span class="verdict {css}">{html_text(v.word)}</span>'


def html_line(v: Verdict) -> str:
    """One HTML fragment: the badge, the name, the rest (wrap it in a paragraph)."""
    rest = _line_parts(v)
    e = html_text
    return f"{html_badge(v)} <code>{e(v.name)}</code>" + (f" — {e(rest)}" if rest else "")
