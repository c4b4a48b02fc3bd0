"""The one verdict record (metrics/verdict.py): its status vocabulary and words, its round
trip through a document, the older files' verdict entries read into it, and the one
drawing of it per renderer (report/verdicts.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from accelbench.errors import DocumentError
from accelbench.metrics.verdict import Interval, Status, Verdict, from_word, word, worst
from accelbench.report import verdicts as R


def leak() -> Verdict:
    return Verdict(
        name="leak [red]server_rss_bytes",
        status=Status.FAIL,
        statistic="Theil-Sen slope",
        unit="B/h",
        estimate=2**30,
        interval=Interval(2**29, 3 * 2**29, 0.95, "Sen"),
        thresholds={"warn": 4 * 2**20, "fail": 32 * 2**20},
        rule="fail above",
        evidence={"n": 120, "ar1_rho": 0.25, "note": None},
        kind="leak",
    )


def test_words_and_worst():
    assert word(Status.PASS, "shadow") == "go" and word(Status.FAIL, "claim") == "refuted"
    assert word(Status.FAIL, "mlperf") == "INVALID" and word(Status.WARN, "shadow") == "warn"
    assert from_word("no-go", "shadow") == Status.FAIL and from_word("n/a") == Status.NA
    with pytest.raises(DocumentError):
        from_word("maybe", "shadow")
    assert worst([Status.PASS, Status.INCONCLUSIVE, Status.WARN]) == Status.INCONCLUSIVE
    assert worst([Status.UNKNOWN, Status.FAIL]) == Status.FAIL
    assert worst([]) == Status.NA


def test_round_trip_through_json():
    v = leak()
    d = json.loads(json.dumps(v.to_json()))
    assert d["word"] == "fail" and d["interval"]["low"] == 2**29 and d["kind"] == "leak"
    assert Verdict.from_json(d) == v
    claim = Verdict("B >= 1.3 x A", Status.PASS, "ratio", "x", suite="claim", note="above")
    back = Verdict.from_json(json.loads(json.dumps(claim.to_json())))
    assert back == claim and back.word == "supported" and back.low is None


@pytest.mark.parametrize(
    "entry, where",
    [
        ("x", "expected an object"),
        ({"word": "pass", "status": "great"}, "unknown status"),
        ({"word": "pass", "status": "pass", "estimate": "12"}, "estimate"),
        ({"word": "pass", "status": "pass", "interval": [1, 2]}, "interval"),
        ({"word": "pass", "status": "pass", "thresholds": {"warn": "x"}}, "thresholds.warn"),
        ({"verdict": "sure", "ci_low": 1}, "unknown verdict"),
        ({"gate": "ttft_p99 <= +10%", "status": "pass", "lo": "a"}, ".lo"),
    ],
)
def test_a_damaged_entry_is_one_document_error(entry, where):
    with pytest.raises(DocumentError) as exc:
        Verdict.from_json(entry, "stress.json: verdicts[0]")
    assert where in str(exc.value) and "\n" not in str(exc.value)


def test_the_older_files_entries_are_read_into_the_record():
    # stress.json/1
    v = Verdict.from_json({
        "name": "drift ttft p50", "kind": "drift", "statistic": "slope", "unit": "%/h",
        "estimate": 12.0, "ci_low": 8.0, "ci_high": 16.0, "warn": 5.0, "fail": 20.0,
        "verdict": "warn", "rule": "r", "confidence": 0.95, "evidence": {"n": 80, "x": [1]},
    })  # fmt: skip
    assert (v.status, v.low, v.high, v.kind) == (Status.WARN, 8.0, 16.0, "drift")
    assert v.thresholds == {"warn": 5.0, "fail": 20.0} and v.evidence == {"n": 80}
    # verdict.json/1: a gate
    g = Verdict.from_json({
        "gate": "ttft_p99 <= +10%", "status": "fail", "statistic": 1.3, "lo": 1.2, "hi": 1.4,
        "threshold": 1.1, "unit": "ratio", "n_baseline": 600, "n_candidate": 600,
        "baseline": 100.0, "candidate": 130.0, "test": {"name": "mann-whitney-u"},
        "note": None, "details": {},
    })  # fmt: skip
    assert (g.word, g.estimate, g.high, g.thresholds["bound"]) == ("no-go", 1.3, 1.4, 1.1)
    assert g.evidence["n_baseline"] == 600 and g.unit == "ratio"
    # a compare claim before the record
    c = Verdict.from_json({
        "claim": "B >= 1.3 x A", "verdict": "refuted", "reason": "below 1.235",
        "ratio": 1.1, "ci95": [1.0, 1.2], "threshold": 1.3, "refute_at": 1.235,
    })  # fmt: skip
    assert (c.status, c.word, c.note, c.thresholds["refute_at"]) == (
        Status.FAIL, "refuted", "below 1.235", 1.235,
    )  # fmt: skip


def test_one_drawing_per_renderer():
    v = leak()
    assert R.cells(v) == [
        "leak [red]server_rss_bytes", "Theil-Sen slope", "B/h", "1,073,741,824",
        "536,870,912 to 1,610,612,736", "warn 4,194,304; fail 33,554,432", "fail", "—",
        "n=120; ar1_rho=0.25",
    ]  # fmt: skip
    line = (
        "leak [red]server_rss_bytes: +1.02e+03M/h [+512M/h, +1.54e+03M/h]; warn +4M/h; fail +32M/h"
    )
    from accelbench.console import esc

    assert R.terminal_line(v) == "[red]fail[/red] " + esc(line)  # data never read as markup
    assert R.markdown_line(v) == (
        "- **fail** `leak [red]server_rss_bytes`: +1.02e+03M/h [+512M/h, +1.54e+03M/h]; "
        "warn +4M/h; fail +32M/h"
    )
    assert R.html_line(v).startswith('<span class="verdict fail">fail</span> <code>leak')
    assert "<red>" not in R.html_line(Verdict("<red>", Status.PASS, "s"))
    # a shadow gate and a claim draw the same way, in their words
    gate = Verdict("ttft_p99 <= +10%", Status.PASS, "p99 TTFT ratio", "ratio", 1.01,
                   Interval(0.95, 1.08), {"bound": 1.1}, suite="shadow")  # fmt: skip
    assert R.terminal_line(gate) == "[green]go[/green] " + esc(
        "ttft_p99 <= +10%: 1.010x [0.950x, 1.080x]; bound 1.100x"
    )
    na = Verdict("leak x", Status.NA, "slope", "B/h", note="too few samples")
    assert R.terminal_line(na) == "[dim]n/a[/dim] leak x: too few samples"
    assert (
        R.html_badge(Verdict("w", Status.WARN, "s")) == '<span class="verdict warn-v">warn</span>'
    )


# -- outside text in the report's Markdown and HTML: never a broken row, never control ---
_CONTROL_OR_BREAK = st.lists(
    st.sampled_from(["a", "|", "<", "&", "\\", "`", "\n", "\r", "\x1b", "\x07", "\x00",
                     "\x85", "\u2028", "\u202e", "\t", "[31m"]),
).map("".join) | st.text()  # fmt: skip


def _controls(s: str) -> list[str]:
    import unicodedata

    return [c for c in s if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]


def test_the_control_class_is_every_control_format_and_separator_character() -> None:
    """console's escaped class is exactly Unicode's Cc, Cf, Zl and Zp but the newline, as
    this Python's unicodedata has them: a soft hyphen (U+00AD, Cf) went through once (CI
    drew it in the Markdown-cell property below)."""
    import sys
    import unicodedata

    from accelbench.console import _CONTROL

    want = {chr(c) for c in range(sys.maxunicode + 1)
            if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp")} - {"\n"}  # fmt: skip
    got = {chr(c) for c in range(sys.maxunicode + 1) if _CONTROL.fullmatch(chr(c))}
    assert got == want, (sorted(map(hex, map(ord, got ^ want)))[:10], unicodedata.unidata_version)


@given(_CONTROL_OR_BREAK)
@example("\xad")  # the soft hyphen CI drew
@example("\U000e0041")  # a language tag
def test_a_markdown_cell_is_one_line_without_control_characters(text: str) -> None:
    cell = R.md_cell(text)
    assert _controls(cell) == [], repr(cell)  # no CR / LF / ESC / bidi: one row, no colour
    assert "<" not in cell and ">" not in cell
    # every pipe escaped: an odd run of backslashes before each
    for i, c in enumerate(cell):
        if c == "|":
            run = len(cell[:i]) - len(cell[:i].rstrip("\\"))
            assert run % 2 == 1, repr(cell)


@given(_CONTROL_OR_BREAK)
@example("\xad")  # the soft hyphen CI drew (on the tree before the class was completed)
def test_html_text_has_no_markup_or_control_characters(text: str) -> None:
    out = R.html_text(text)
    assert [c for c in _controls(out) if c != "\n"] == [], repr(out)
    assert "<" not in out and ">" not in out and '"' not in out


def test_a_carriage_return_and_an_escape_in_a_note_stay_in_their_row():
    v = Verdict("n", Status.PASS, "s", note="a\rb|c \x1b[31mred")
    assert R.md_cell(v.note) == "a\\\\x0db\\|c \\\\x1b[31mred"
    assert "\x1b" not in R.html_line(v) and "\r" not in R.html_line(v)
