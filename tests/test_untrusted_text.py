"""Text from outside (a server's model name, a file's fields, a query's results, an error
quoting an input) is printed as text: never parsed as Rich markup (``[/red]`` in a model
name made ``runs list`` exit 70), never passed to the terminal as control (an ESC could
move the cursor or clear the screen). The rule lives in ``accelbench.console``; these
properties drive arbitrary strings through the commands that print them.

API keys go into a header: one with a CR, LF or any other character a header value cannot
hold is one line, exit 2, and the key is never shown (issue 20)."""

from __future__ import annotations

import contextlib
import io
import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from accelbench.console import printable
from cli_inprocess import run_cli
from synthetic_runs import make_run

HYP = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# what a terminal would act on: C0 but newline, DEL, C1, bidirectional overrides
TERMINAL_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
NASTY = [
    "[/red]", "[/bold]", "[bold", "[/]", "[link=http://evil.example]x[/link]", "\\", "x\\[/x]",
    "\x1b[31m", "\x1b[2J\x1b[H", "\x1b]8;;http://evil.example\x1b\\", "\r", "\x07", "\x9b",
    "\u202e", "\u200b", ":cd:", "[", "]", "'", "\t", "\n",
]  # fmt: skip
hostile = st.lists(
    st.one_of(st.sampled_from(NASTY), st.text(max_size=20)), min_size=1, max_size=12
).map("".join)
very_long = st.text(min_size=2000, max_size=4000)


def invoke(args: list[str], cwd: Path) -> tuple[int, str]:
    """``accelbench ARGS`` in-process in ``cwd``: (exit code, stdout + stderr)."""
    code, out, err, _ = run_cli(args, cwd)
    return code, out + err


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console wide enough that no cell wraps, so a value can be found whole."""
    monkeypatch.setenv("COLUMNS", "50000")
    monkeypatch.delenv("ACCELBENCH_DEBUG", raising=False)


def assert_shown(out: str, value: str) -> None:
    """``value`` is in ``out`` as text (its control characters as escapes; spaces aside,
    as a table pads cells) and ``out`` holds nothing a terminal would act on."""
    assert not TERMINAL_CONTROL.search(out), repr(out[:2000])
    flat = "".join(out.split())
    for line in printable(value).split("\n"):
        assert "".join(line.split()) in flat, (line, out[:3000])


@HYP
@given(model=st.one_of(hostile, very_long))
@example(model="[/red]")  # the example: runs list exited 70
def test_runs_list_shows_model_names_as_text(tmp_path: Path, model: str) -> None:
    root = tmp_path / "res"
    make_run(root / "r1", n=20, model=model)
    make_run(root / "r2", n=20)
    code, out = invoke(["runs", "list", "--root", str(root)], tmp_path)
    assert code == 0, out
    assert_shown(out, model)
    assert "r2" in out  # one hostile run does not hide the others


@HYP
@given(value=st.one_of(hostile, very_long).map(lambda s: s.replace("\x00", "")))
@example(value="[/bold]")  # the example
def test_runs_query_shows_results_as_text(tmp_path: Path, value: str) -> None:
    root = tmp_path / "res"
    if not root.exists():
        make_run(root / "r1", n=5)
    lit = "'" + value.replace("'", "''") + "'"
    code, out = invoke(["runs", "query", "--root", str(root), f"SELECT {lit} AS v"], tmp_path)
    assert code == 0, out
    assert_shown(out, value)
    # unaliased, the column is named by the SQL text itself: a header is outside text too
    code, out = invoke(["runs", "query", "--root", str(root), f"SELECT {lit}"], tmp_path)
    assert code == 0, out
    assert not TERMINAL_CONTROL.search(out)


@HYP
@given(sql=hostile.map(lambda s: s.replace("\x00", "")))
def test_query_errors_quoting_the_input_are_one_safe_line(tmp_path: Path, sql: str) -> None:
    root = tmp_path / "res"
    if not root.exists():
        make_run(root / "r1", n=5)
    code, out = invoke(
        ["runs", "query", "--root", str(root), "SELECT " + sql + " FROM nowhere"], tmp_path
    )
    assert code == 2, out
    assert "internal error" not in out and "Traceback" not in out
    assert not TERMINAL_CONTROL.search(out), repr(out)


@HYP
@given(model=st.one_of(hostile, very_long), url_path=hostile)
def test_run_summary_prints_outside_text_as_text(tmp_path: Path, model: str, url_path: str) -> None:
    """The summary printed after `run` / `summarize` / `mlperf`: the model name, the
    server URL and warnings come from the server or from files."""
    import json

    from accelbench.report.terminal import print_run_dir

    d = make_run(tmp_path / "run", n=20, model=model)
    meta = json.loads((d / "run.json").read_text())
    meta["server"]["url"] = "http://127.0.0.1:1/" + url_path
    (d / "run.json").write_text(json.dumps(meta))
    s = json.loads((d / "summary.json").read_text())
    s["client"]["warnings"] = [model]
    (d / "summary.json").write_text(json.dumps(s))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_run_dir(d)
    out = buf.getvalue()
    assert_shown(out, model)
    assert_shown(out, url_path)


@HYP
@given(name=hostile.map(lambda s: s.replace("/", "_").replace("\x00", "")[:80]))
@example(name="[/red]")
def test_report_terminal_output_shows_paths_and_names_as_text(tmp_path: Path, name: str) -> None:
    if name in ("", ".", ".."):
        name = f"x{name}"
    d = make_run(tmp_path / "runs" / name, n=20, model=name)
    out_html = tmp_path / f"{name}.html"
    code, out = invoke(["report", str(d), "-o", str(out_html)], tmp_path)
    if not name.strip() or any(unicodedata.category(c) == "Cc" for c in name):
        # a path with a control character (or only blanks) is refused where the command
        # line is parsed (cli/strict.py): one line, the character shown escaped
        assert code == 2 and len(out.strip().splitlines()) == 1, out
        assert "control character" in out or "empty" in out, out
        assert not any(unicodedata.category(c) == "Cc" for c in out.strip()), out
        return
    assert code == 0, out
    assert out_html.is_file()
    assert_shown(out, str(out_html))


# -- API keys: header values -----------------------------------------------------------
CLOSED = "http://127.0.0.1:1"
VCHAR = "".join(chr(c) for c in range(0x21, 0x7F))


def _run_with_env_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> tuple[int, str]:
    monkeypatch.setenv("ACCELBENCH_TEST_KEY", key)
    return invoke(
        ["run", "--url", CLOSED, "--results-root", "res", "-q", "--no-telemetry",
         "--api-key-env", "ACCELBENCH_TEST_KEY"],
        tmp_path,
    )  # fmt: skip


bad_char = st.characters(
    blacklist_categories=("Cs",), blacklist_characters="\x00" + VCHAR + " "
)  # anything but visible ASCII (and NUL, which no environment variable can hold)
bad_key = st.tuples(st.text(VCHAR, max_size=30), bad_char, st.text(VCHAR + " \t", max_size=30)).map(
    "".join
)


@HYP
@given(key=bad_key)
@example(key="sk-abc\r\nX-Injected: 1")  # the example: CR LF was exit 70
@example(key="\n")  # a key of one newline: the line's own end is not an echo of it
def test_api_key_that_cannot_be_a_header_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    code, out = _run_with_env_key(tmp_path, monkeypatch, key)
    assert code == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the API key in $ACCELBENCH_TEST_KEY")
    assert "not allowed in an HTTP header" in out
    assert key not in out.strip(), out  # the line's own end is no echo of a key "\n"
    for part in re.split("[^!-~]+", key):
        if len(part) >= 6:  # no run of the key's visible characters is echoed
            assert part not in out, out
    assert not (tmp_path / "res").exists() or not any((tmp_path / "res").rglob("*.json"))


@HYP
@given(key=st.text(VCHAR, min_size=1, max_size=200))
def test_api_key_of_visible_ascii_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    code, out = _run_with_env_key(tmp_path, monkeypatch, key)
    assert code == 2 and "API key" not in out and "cannot reach" in out, out


@pytest.mark.parametrize("key", ["a\x00b\x1bc", "key\x7f", "ke\u00e9y"])
def test_api_key_file_with_a_control_character(tmp_path: Path, key: str) -> None:
    (tmp_path / "key").write_bytes(key.encode() + b"\r\n")
    code, out = invoke(
        ["run", "--url", CLOSED, "--results-root", "res", "-q", "--no-telemetry",
         "--api-key-file", "key"],
        tmp_path,
    )  # fmt: skip
    assert code == 2 and out.startswith("error: the API key in key has a character"), out
    assert key not in out


def test_api_key_file_ending_in_crlf_is_one_line_key(tmp_path: Path) -> None:
    """A key file written on Windows (CR LF) is a key, not a header injection."""
    (tmp_path / "key").write_bytes(b"sk-good-123\r\n")
    code, out = invoke(
        ["run", "--url", CLOSED, "--results-root", "res", "-q", "--no-telemetry",
         "--api-key-file", "key"],
        tmp_path,
    )  # fmt: skip
    assert code == 2 and "cannot reach" in out and "API key" not in out, out


def test_shadow_proxy_candidate_key_with_crlf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAND_KEY", "sk-cand\r\nX: 1")
    code, out = invoke(
        ["shadow", "proxy", "--baseline", CLOSED, "--candidate", "http://127.0.0.1:2",
         "--candidate-api-key-env", "CAND_KEY", "--duration", "1", "-o", "sh"],
        tmp_path,
    )  # fmt: skip
    assert code == 2 and out.startswith("error: the API key in $CAND_KEY"), out
    assert not (tmp_path / "sh").exists()


@settings(max_examples=2000, deadline=None)
@given(
    value=st.lists(
        st.one_of(
            st.sampled_from(["\\", "[", "]", "[/", "[b]", "[/x]", "\\[", "[bold", "[link=x]", "@"]),
            st.text(max_size=5),
        ),
        max_size=12,
    ).map("".join)
)
def test_esc_renders_back_exactly(value: str) -> None:
    """Inside a markup template, esc() text renders to exactly its printable form, also
    with backslashes before brackets and at the end (rich.markup.escape loses those)."""
    from rich.markup import render

    from accelbench.console import esc

    for tmpl in ("{}", "[dim]{}[/dim]", "x {} y", "[b]{}[/]"):
        shown = render(tmpl.format(esc(value))).plain
        assert shown == render(tmpl.format("\0")).plain.replace("\0", printable(value))


@HYP
@given(name=st.one_of(hostile, very_long), title=hostile)
def test_stress_verdict_table_shows_names_as_text(name: str, title: str) -> None:
    """The stress verdict table: a metric name (``--metric`` or a server's gauge) and the
    suite's directory are outside text."""
    from accelbench.cli.stress import print_verdicts
    from accelbench.metrics.verdict import Verdict

    v = Verdict.from_json({"name": f"metric:{name}", "unit": "M/h", "verdict": "warn",
                           "estimate": 1.0, "ci_low": 0.5, "ci_high": 1.5, "warn": 1.0,
                           "fail": 2.0})  # fmt: skip
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_verdicts(title, [v], "completed", Path("/tmp") / "x")
    out = buf.getvalue()
    assert_shown(out, name.replace("metric:", "").replace("_bytes", ""))
    assert_shown(out, title)
