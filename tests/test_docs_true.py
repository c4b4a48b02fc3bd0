"""The docs are the reference and must be true (README.md, docs/*.md): every option an
example command shows exists on that command, and every field of a fresh run's run.json
and summary.json is named in docs/RESULTS.md."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import typer

from accelbench.cli.main import app
from accelbench.runner.benchmark import run_benchmark
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _example_commands(text: str) -> list[str]:
    """The ``accelbench ...`` lines of a Markdown text's code blocks, continuation lines
    (a trailing backslash, a quoted argument over several lines) joined, comments cut."""
    out: list[str] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        lines = block.replace("\\\n", " ").splitlines()
        i = 0
        while i < len(lines):
            line = lines[i].strip().removeprefix("$ ")
            i += 1
            if not line.startswith("accelbench "):
                continue
            while True:
                try:
                    shlex.split(line.split(" #")[0])
                    break
                except ValueError:  # a quoted argument goes on on the next line
                    if i >= len(lines):
                        raise
                    line += " " + lines[i].strip()
                    i += 1
            out.append(line.split(" #")[0].split(" && ")[0].split(" | ")[0].rstrip(" &"))
    return out


def _options_unknown(line: str) -> list[str]:
    """The options of one example command that its command does not have."""
    root = typer.main.get_command(app)
    words = shlex.split(line)[1:]
    cmd: Any = root
    n = 0
    for w in words:
        if not isinstance(cmd, typer.core.TyperGroup):
            break
        if w not in cmd.commands:
            if cmd.name == "plan":  # `plan MODEL ...` is `plan fit MODEL ...`
                cmd = cmd.commands["fit"]
            break
        cmd, n = cmd.commands[w], n + 1
    known = {"--help"}
    for p in cmd.params:
        known |= {*p.opts, *getattr(p, "secondary_opts", [])}
    return [
        w.split("=")[0] for w in words[n:]
        if w.startswith("-") and not re.fullmatch(r"-[\d.]+", w) and w.split("=")[0] not in known
    ]  # fmt: skip


def test_every_option_an_example_shows_exists() -> None:
    found = {str(p.relative_to(ROOT)): _example_commands(p.read_text()) for p in DOCS}
    assert sum(map(len, found.values())) > 100  # the parser sees the examples
    bad = [(f, line, _options_unknown(line)) for f, lines in found.items() for line in lines]
    assert not [b for b in bad if b[2]]


def test_the_example_parser_joins_and_flags() -> None:
    text = '```\naccelbench runs query --root r \\\n  "SELECT 1\n   FROM runs"  # c\n```\n'
    (line,) = _example_commands(text)
    assert shlex.split(line) == ["accelbench", "runs", "query", "--root", "r", "SELECT 1 FROM runs"]
    assert _options_unknown("accelbench run --url x --no-such-option 3 -c 2") == [
        "--no-such-option"
    ]
    assert _options_unknown("accelbench plan llama-3.1-8b -a h200 -n 2") == []


# -- every field of a fresh run's documents is documented ---------------------------------

# objects whose keys are data (an error kind, an HTTP status, a source's name), not fields
_DATA_KEYED = {
    "isl_source", "osl_source", "by_kind", "by_status", "sources", "devices", "by_turn",
    "by_cached_share", "slo", "errors", "definitions", "packages",
}  # fmt: skip


def _field_names(doc: object, under: str = "") -> set[str]:
    names: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            names.add(k)
            if k not in _DATA_KEYED or (k == "errors" and under == ""):
                names |= _field_names(v, k)
    elif isinstance(doc, list):
        for v in doc:
            names |= _field_names(v, under)
    return names


def _section(text: str, title: str) -> str:
    """A Markdown section's text, from its heading to the next heading of its level."""
    start = text.index(title)
    level = title.split(" ")[0]
    nxt = text.find("\n" + level + " ", start + len(title))
    return text[start : nxt if nxt > 0 else len(text)]


def test_a_fresh_runs_fields_are_all_in_results_md(reference_server, tmp_path: Path) -> None:
    srv = reference_server("--ttft-ms", "2", "--itl-ms", "1", "--prefix-cache-blocks", "256")
    cfg = BenchmarkConfig(
        url=srv.url, out_dir=str(tmp_path / "run"), concurrency=2, num_requests=8,
        warmup_requests=2, slo={"ttft_ms": 500.0, "tpot_ms": 50.0},
        workload=WorkloadConfig(isl=40, osl=6, shared_prefixes=2, prefix_tokens=32),
    )  # fmt: skip
    run_dir = run_benchmark(cfg, progress=False).directory
    text = (ROOT / "docs" / "RESULTS.md").read_text()
    words = set(re.findall(r"[A-Za-z0-9_.]+", text))
    summary = json.loads((run_dir / "summary.json").read_text())
    for key in ("goodput", "cache", "telemetry", "health"):  # the sections tried here
        assert summary.get(key), key
    undocumented = _field_names(summary) - set(
        re.findall(r"[A-Za-z0-9_.]+", _section(text, "## summary.json"))
    )
    assert not undocumented, f"summary.json fields not in docs/RESULTS.md: {undocumented}"
    run = json.loads((run_dir / "run.json").read_text())
    # run.json's own sections and their fields; config is BenchmarkConfig's (run --help)
    top = set(run) | _field_names(run["schedule"]) | _field_names(run["client"])
    assert not top - words, f"run.json fields not in docs/RESULTS.md: {top - words}"
