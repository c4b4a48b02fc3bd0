"""Benchmark: two git refs side by side, in one run, interleaved.

    python benchmarks/before_after.py 8e4f09d HEAD --out /tmp/before-after.json
    python benchmarks/before_after.py 8e4f09d . --quick          # the working tree as it is

Each ref gets a worktree of its own (``git worktree add`` in a temporary folder; ``.``
is this checkout, uncommitted changes included). A ref without a build of the client's
compiled read loop (``src/accelbench/client/*.so``) gets this checkout's, when its C
source is the same (else it is compiled with ``cc``, or the ref runs the Python loop,
and the table says so). Each ref runs through a wrapper that sets PYTHONPATH to its
``src`` (checked: ``accelbench.__file__`` must lie there). Then, for each repetition, every
figure is measured for the "before" ref and then for the "after" ref (A B A B ...), by
the existing scripts:

- ``ceiling``: ``client_ceiling.py`` (max-throughput reference server, 256 streams, one
  worker), tools ``baseline-w1`` (before) and ``accelbench-w1`` (after) in one round;
  sustained streamed tok/s and the client's CPU per token. The server is the "after"
  ref's for both.
- ``paced``: ``client_ceiling.py --paced 50,10`` the same way: the load process's CPU
  per chunk at 256 paced streams (one SSE event per write).
- ``report``: ``report_1m.py`` in the ref's own tree (the ref's copy of the script, and
  of ``tests/synthetic_runs.py``, so each reads its own layout): summaries, frontier and
  report of a 1,000,000-request sweep; total seconds and peak RSS. The sweep is generated
  once per ref, before the first repetition, outside the timing.
- ``run-end``: ``run_end_rss.py``: a real ``accelbench run`` with a ~138 MB journal, with
  telemetry and without; the peak RSS of the run's end, and what telemetry adds to it.

Prints a table (median and range per ref over the repetitions, after/before ratio of
the medians, and which way is better) and writes every raw result with ``--out``.
``--quick`` makes every figure small (a few minutes in all; for trying the harness, not
for quoting). Scripts run with this checkout's Python.
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCHES = ("ceiling", "paced", "report", "run-end")
SO_GLOB = "src/accelbench/client/*.so"
RECVSTAMP_C = Path("src/accelbench/client/_recvstamp.c")

# sizes: full, quick
SIZES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "ceiling": ({"requests": 30_000}, {"requests": 3_000}),
    "paced": ({"requests": 1_536}, {"requests": 768}),
    "report": ({"requests": 1_000_000, "points": 10}, {"requests": 100_000, "points": 4}),
    "run-end": ({"requests": 31_000}, {"requests": 3_000}),
}


def log(msg: str) -> None:
    print(f"{datetime.now().strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


@dataclass
class Tree:
    """One ref, checked out, with the wrapper that runs its accelbench."""

    label: str  # "before" / "after"
    ref: str
    path: Path
    commit: str
    exe: Path  # wrapper: runs `python -m accelbench` with PYTHONPATH=path/src
    temporary: bool
    notes: list[str] = field(default_factory=list)

    @property
    def src(self) -> Path:
        return self.path / "src"

    def env(self) -> dict[str, str]:
        return dict(os.environ, PYTHONPATH=str(self.src), NO_COLOR="1")


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def _build_so(tree: Tree) -> str:
    """Give the tree the compiled read loop: this checkout's when the source is the
    same, else compiled from the tree's own source; says what it did."""
    if list(tree.path.glob(SO_GLOB)) or not (tree.path / RECVSTAMP_C).exists():
        return "own build" if list(tree.path.glob(SO_GLOB)) else "no compiled read loop"
    mine = sorted(ROOT.glob(SO_GLOB))
    if mine and filecmp.cmp(ROOT / RECVSTAMP_C, tree.path / RECVSTAMP_C, shallow=False):
        for so in mine:
            shutil.copy2(so, tree.path / so.relative_to(ROOT))
        return "read loop .so copied from this checkout (same C source)"
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = tree.path / RECVSTAMP_C.parent / f"_recvstamp{suffix}"
    cc = [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O2",
          f"-I{sysconfig.get_paths()['include']}", str(tree.path / RECVSTAMP_C), "-o", str(out)]  # fmt: skip
    try:
        subprocess.run(cc, check=True, capture_output=True, timeout=300)
        return "read loop compiled from its own C source"
    except (OSError, subprocess.SubprocessError):
        return "NO compiled read loop (C source differs, cc failed): the Python loop runs"


def checkout(label: str, ref: str, tmp: Path) -> Tree:
    if ref == ".":
        path, commit, temporary = ROOT, git("rev-parse", "--short", "HEAD") + "+worktree", False
    else:
        commit = git("rev-parse", "--short", f"{ref}^{{commit}}")
        path, temporary = tmp / f"{label}-{commit}", True
        git("worktree", "add", "--detach", str(path), commit)
    exe = tmp / f"bin-{label}" / "accelbench"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(
        f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(path / 'src'))} NO_COLOR=1 "
        f'exec {shlex.quote(sys.executable)} -m accelbench "$@"\n'
    )
    exe.chmod(0o755)
    tree = Tree(label, ref, path, commit, exe, temporary)
    tree.notes.append(_build_so(tree))
    where = subprocess.run(
        [sys.executable, "-c", "import accelbench; print(accelbench.__file__)"],
        env=tree.env(), capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(where).is_relative_to(tree.src):
        raise SystemExit(f"{label} ({ref}): accelbench imports from {where}, not {tree.src}")
    return tree


# -- the figures ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Figure:
    bench: str
    name: str
    unit: str
    better: str  # "higher" or "lower"
    get: Callable[[dict[str, Any]], float | None]
    difference: bool = False  # compared as after - before (it can be 0 or negative)


def _dig(d: Any, *path: str | int) -> Any:
    for k in path:
        try:
            d = d[k]
        except (KeyError, IndexError, TypeError):
            return None
    return d


FIGURES = (
    Figure("ceiling", "client ceiling, max-throughput, 1 worker", "tok/s", "higher",
           lambda r: _dig(r, "sustained", "tokens_per_s")),
    Figure("ceiling", "client CPU per token (sustained)", "µs", "lower",
           lambda r: _dig(r, "sustained", "tool_cpu_us_per_token")),
    Figure("paced", "load CPU per chunk, 256 paced streams", "µs", "lower",
           lambda r: _dig(r, "reported", "cpu_us_per_chunk_workers")),
    Figure("paced", "paced streams sustained", "tok/s", "higher",
           lambda r: _dig(r, "sustained", "tokens_per_s")),
    Figure("report", "1M report: summaries + frontier + report", "s", "lower",
           lambda r: r.get("total_s")),
    Figure("report", "1M report: peak RSS", "MB", "lower", lambda r: r.get("peak_rss_mb")),
    Figure("run-end", "run end peak RSS, telemetry on", "MB", "lower",
           lambda r: _dig(r, "on", "end_peak_rss_mb")),
    Figure("run-end", "run end peak RSS, telemetry off", "MB", "lower",
           lambda r: _dig(r, "off", "end_peak_rss_mb")),
    Figure("run-end", "telemetry's extra at the run end (on - off; < 50 MB)", "MB", "lower",
           lambda r: r.get("telemetry_extra_mb"), difference=True),
    Figure("run-end", "run end duration, telemetry on", "s", "lower",
           lambda r: _dig(r, "on", "end_s")),
    Figure("run-end", "telemetry's extra run end time (on - off)", "s", "lower",
           lambda r: r.get("telemetry_extra_end_s"), difference=True),
)  # fmt: skip


def _run(cmd: list[str], env: dict[str, str], cwd: Path, logfile: Path, timeout: float) -> int:
    log("  $ " + " ".join(shlex.quote(c) for c in cmd))
    with open(logfile, "ab") as f:
        try:
            return subprocess.run(cmd, env=env, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            return -1


def ceiling_round(bench: str, a: argparse.Namespace, before: Tree, after: Tree, wd: Path,
                  rep: int) -> dict[str, dict[str, Any]]:  # fmt: skip
    """One round of client_ceiling.py: before (baseline-w1), then after (accelbench-w1)."""
    size = SIZES[bench][a.quick]
    out = wd / f"{bench}-{rep}.json"
    cmd = [sys.executable, str(HERE / "client_ceiling.py"),
           "--tools", "baseline-w1,accelbench-w1", "--baseline", str(before.exe),
           "--accelbench", str(after.exe), "-n", str(size["requests"]), "--repeat", "1",
           "--workdir", str(wd / f"{bench}-{rep}"), "--out", str(out)]  # fmt: skip
    if bench == "paced":
        cmd += ["--paced", "50,10"]
    # the script itself needs only accelbench.ports: this checkout's
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    _run(cmd, env, ROOT, wd / f"{bench}.log", a.timeout)
    try:
        rows = json.loads(out.read_text())["rounds"][0]["results"]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return {t.label: {"status": f"no result: {exc}"} for t in (before, after)}
    by_tool = {r["tool"]: r for r in rows}
    return {"before": by_tool.get("baseline-w1", {}), "after": by_tool.get("accelbench-w1", {})}


def report_script(tree: Tree) -> Path:
    own = tree.path / "benchmarks" / "report_1m.py"
    return own if own.exists() else HERE / "report_1m.py"


def report_generate(a: argparse.Namespace, tree: Tree, wd: Path) -> Path:
    size = SIZES["report"][a.quick]
    d = wd / f"sweep-{tree.label}"
    if not (d / "sweep.json").exists():
        cmd = [sys.executable, str(report_script(tree)), "--generate", "--dir", str(d),
               "--requests", str(size["requests"]), "--points", str(size["points"])]  # fmt: skip
        t0 = time.monotonic()
        _run(cmd, tree.env(), tree.path, wd / "report.log", a.timeout)
        log(f"  generated the {tree.label} sweep in {time.monotonic() - t0:.0f} s")
    return d


def report_once(a: argparse.Namespace, tree: Tree, d: Path, wd: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(report_script(tree)), "--dir", str(d)]
    out = wd / f"report-{tree.label}.out"
    out.unlink(missing_ok=True)
    _run(cmd, tree.env(), tree.path, out, a.timeout)
    text = out.read_text(errors="replace")
    try:  # the script prints a line or two, then one JSON object
        return json.loads(text[text.index("{") : text.rindex("}") + 1])
    except ValueError:
        return {"status": "failed: " + text[-500:]}


def run_end_once(a: argparse.Namespace, tree: Tree, server: Tree, wd: Path) -> dict[str, Any]:
    size = SIZES["run-end"][a.quick]
    out = wd / f"run-end-{tree.label}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(HERE / "run_end_rss.py"), "-n", str(size["requests"]),
           "--accelbench", str(tree.exe), "--server", str(server.exe),
           "--workdir", str(wd / f"run-end-{tree.label}"), "--out", str(out)]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    _run(cmd, env, ROOT, wd / "run-end.log", a.timeout)
    try:
        return json.loads(out.read_text())["rounds"][0]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return {"status": f"no result: {exc}"}


# -- the table -----------------------------------------------------------------------------
def summarize(results: dict[str, list[dict[str, dict[str, Any]]]]) -> list[dict[str, Any]]:
    rows = []
    for f in FIGURES:
        if f.bench not in results:
            continue
        reps = results[f.bench]
        vals = {
            side: [v for r in reps if (v := f.get(r.get(side) or {})) is not None]
            for side in ("before", "after")
        }
        med = {s: statistics.median(v) if v else None for s, v in vals.items()}
        b, af = med["before"], med["after"]
        ratio = diff = None
        if b is not None and af is not None:
            diff = af - b
            ratio = af / b if b > 0 and not f.difference else None
        # better / worse only when the ranges do not overlap; else within the spread
        verdict = None
        if len(vals["before"]) >= 2 and len(vals["after"]) >= 2:
            lo_b, hi_b = min(vals["before"]), max(vals["before"])
            lo_a, hi_a = min(vals["after"]), max(vals["after"])
            if lo_a > hi_b:
                verdict = "better" if f.better == "higher" else "worse"
            elif hi_a < lo_b:
                verdict = "worse" if f.better == "higher" else "better"
            else:
                verdict = "within the spread"
        rows.append({"bench": f.bench, "figure": f.name, "unit": f.unit, "better": f.better,
                     "before": vals["before"], "after": vals["after"],
                     "median_before": b, "median_after": af,
                     "ratio": ratio, "difference": diff, "verdict": verdict})  # fmt: skip
    return rows


def _cell(vals: list[float], med: float | None) -> str:
    if med is None:
        return "-"
    spec = ",.0f" if abs(med) >= 1000 else ".1f" if abs(med) >= 10 else ".2f"
    if len(vals) == 1:
        return format(med, spec)
    return f"{format(med, spec)} ({format(min(vals), spec)}-{format(max(vals), spec)})"


def table(rows: list[dict[str, Any]], before: Tree, after: Tree) -> str:
    out = [
        f"| figure | unit | before {before.ref} ({before.commit}) | after {after.ref} "
        f"({after.commit}) | after/before | ranges |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["ratio"] is not None:
            ratio = f"{r['ratio']:.3f}"
        elif r["difference"] is not None:
            ratio = f"{r['difference']:+.1f} {r['unit']}"
        else:
            ratio = "-"
        out.append(
            f"| {r['figure']} | {r['unit']} ({r['better']} is better) "
            f"| {_cell(r['before'], r['median_before'])} | {_cell(r['after'], r['median_after'])} "
            f"| {ratio} | {r['verdict'] or ''} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before", help="git ref (commit, branch, tag) or . for this checkout")
    p.add_argument("after", nargs="?", default="HEAD", help="git ref or . (default: HEAD)")
    p.add_argument("--repeat", type=int, default=3, help="repetitions (at least 3 to quote)")
    p.add_argument("--quick", action="store_true", help="small sizes, to try the harness")
    p.add_argument("--only", default=",".join(BENCHES), help=f"some of {', '.join(BENCHES)}")
    p.add_argument("--timeout", type=float, default=3600.0, help="per script call, seconds")
    p.add_argument("--workdir", type=Path, help="default: a temporary folder, removed after")
    p.add_argument("--keep", action="store_true", help="keep the worktrees and outputs")
    p.add_argument("--out", type=Path, help="write every result and the table as JSON")
    a = p.parse_args(argv)
    benches = [b.strip() for b in a.only.split(",") if b.strip()]
    if not benches or any(b not in BENCHES for b in benches):
        p.error(f"--only: a list of {', '.join(BENCHES)}")
    if a.repeat < 1:
        p.error("--repeat must be at least 1")
    wd = a.workdir or Path(tempfile.mkdtemp(prefix="before-after-"))
    wd.mkdir(parents=True, exist_ok=True)
    trees: list[Tree] = []
    results: dict[str, list[dict[str, dict[str, Any]]]] = {b: [] for b in benches}
    started = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        before = checkout("before", a.before, wd)
        trees.append(before)
        after = checkout("after", a.after, wd)
        trees.append(after)
        for t in trees:
            log(f"{t.label}: {t.ref} = {t.commit} at {t.path}; {'; '.join(t.notes)}")
        sweeps = {}
        if "report" in benches:
            sweeps = {t.label: report_generate(a, t, wd) for t in trees}
        for rep in range(1, a.repeat + 1):
            for bench in benches:
                log(f"repetition {rep}/{a.repeat}: {bench} (load {os.getloadavg()[0]:.2f})")
                if bench in ("ceiling", "paced"):
                    res = ceiling_round(bench, a, before, after, wd, rep)
                elif bench == "report":
                    res = {t.label: report_once(a, t, sweeps[t.label], wd) for t in trees}
                else:
                    res = {t.label: run_end_once(a, t, after, wd) for t in trees}
                results[bench].append(res)
        rows = summarize(results)
        text = table(rows, before, after)
        print(f"\n{a.repeat} repetitions{' (quick)' if a.quick else ''}, interleaved "
              f"before/after; median (range)\n\n{text}")  # fmt: skip
        for t in trees:
            print(f"\n{t.label}: {'; '.join(t.notes)}")
        if a.out:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            doc = {
                "schema": "accelbench.bench.before_after/1",
                "started": started,
                "finished": datetime.now(UTC).isoformat(timespec="seconds"),
                "quick": a.quick,
                "repeat": a.repeat,
                "sizes": {b: SIZES[b][a.quick] for b in benches},
                "refs": {
                    t.label: {"ref": t.ref, "commit": t.commit, "notes": t.notes} for t in trees
                },  # fmt: skip
                "table": rows,
                "results": results,
            }
            a.out.write_text(json.dumps(doc, indent=1))
    finally:
        if not a.keep:
            for t in trees:
                if t.temporary:
                    with contextlib.suppress(subprocess.CalledProcessError):
                        git("worktree", "remove", "--force", str(t.path))
            if a.workdir is None:
                shutil.rmtree(wd, ignore_errors=True)
            with contextlib.suppress(subprocess.CalledProcessError):
                git("worktree", "prune")
    return 0


if __name__ == "__main__":
    sys.exit(main())
