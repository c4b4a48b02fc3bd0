"""`--help` explains every command and option: each command and sub-command answers
``--help`` (exit 0) with its own description, and no option goes without a help text."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from accelbench.cli.main import app


def _commands() -> list[tuple[str, Any]]:
    """(name, command) for the whole tree; typer's commands (its own click)."""
    root = typer.main.get_command(app)
    out: list[tuple[str, Any]] = []

    def walk(prefix: str, cmd: Any) -> None:
        out.append((prefix, cmd))
        if isinstance(cmd, typer.core.TyperGroup):
            for name, sub in cmd.commands.items():
                walk(f"{prefix} {name}".strip(), sub)

    walk("", root)
    return out


COMMANDS = _commands()


def test_the_command_tree_is_whole():
    names = {n for n, _ in COMMANDS}
    assert {"run", "sweep", "stress soak", "shadow proxy", "mlperf server", "monitor"} <= names
    assert len(COMMANDS) > 40


@pytest.mark.parametrize("name", [n for n, _ in COMMANDS], ids=lambda n: n or "accelbench")
def test_help_explains(name: str) -> None:
    cmd = dict(COMMANDS)[name]
    r = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert (cmd.help or "").strip(), f"{name or 'accelbench'} has no description"
    first = " ".join(cmd.help.split("\n\n")[0].split())  # its first paragraph, one line
    assert first[:60] in " ".join(r.output.split())
    missing = [
        p.opts[0] for p in cmd.params
        if isinstance(p, typer.core.TyperOption) and not p.hidden and not (p.help or "").strip()
    ]  # fmt: skip
    assert not missing, f"{name}: options without help: {missing}"
    # the help is rendered as markdown: nothing in it may be taken for markup and dropped
    # (an unquoted "<time>" was an HTML tag and vanished)
    shown = set(re.findall(r"[A-Za-z0-9]{3,}", r.output))
    for what, text in [("", cmd.help)] + [
        (p.opts[0] if p.opts else p.name, getattr(p, "help", None)) for p in cmd.params
    ]:
        words = set(re.findall(r"[A-Za-z0-9]{3,}", text or ""))
        assert words <= shown, f"{name} {what}: {words - shown}"


def test_command_list_keeps_each_description_on_joined_lines():
    """Docstrings are wrapped in the source; the list shows them as paragraphs, not with
    the source's line breaks (it read "tokens per" / "GPU)" on two lines)."""
    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    line = next(x for x in r.output.splitlines() if " frontier " in x)
    assert "total tokens per GPU), values at a target interactivity" in line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "-n", "nan"], "Invalid value for '--num-requests'"),
        (["runz"], "No such command 'runz'"),
        (["sweep"], "Missing option '--out'"),
        (["run", "--no-such-flag"], "No such option"),
    ],
)
def test_a_usage_error_is_one_line_with_exit_2(args: list[str], says: str) -> None:
    """Options click itself refuses read like the rest of accelbench's errors: one line
    naming the problem and where help is, exit 2 (was a boxed block)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                       text=True, timeout=60, env={**__import__("os").environ, "COLUMNS": "80"})  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], r.stderr
    assert "--help'" in lines[0] and "Traceback" not in r.stderr
