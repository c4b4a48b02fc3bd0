"""What every section of ``side_by_side.py`` shares: the machine's load, the peers'
virtualenvs, the rounds' table and its refusal rule, the reference server."""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
os.environ["PYTHONPATH"] = str(ROOT / "src")  # accelbench (and client_ceiling) from this tree
sys.path.insert(0, str(ROOT / "src"))

import client_ceiling as cc  # noqa: E402

CACHE = Path(os.environ.get("ACCELBENCH_CACHE", Path.home() / ".cache" / "accelbench"))
PEERS_DIR = CACHE / "peers"
VLLM_VENV = CACHE / "vllm-0.32.0"
PEERS = {"aiperf": "0.13.0", "guidellm": "0.8.1"}  # PyPI name: version
MIN_ROUNDS = 3


def log(msg: str) -> None:
    print(f"{datetime.now().strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


# -- how busy the machine was ---------------------------------------------------------------
def machine_state() -> dict[str, Any]:
    """The load averages and /proc/stat's aggregate CPU jiffies, now."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    j = [int(x) for x in fields]
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {
        "t": time.time(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "jiffies": dict(zip(names, j, strict=False)),
    }


def busy_between(s0: dict[str, Any], s1: dict[str, Any]) -> dict[str, Any]:
    """Between two states: the share of all CPUs' time that was busy (not idle or
    iowait) and the share the hypervisor stole, and the load averages at both ends."""
    d = {k: s1["jiffies"][k] - s0["jiffies"][k] for k in s0["jiffies"]}
    total = sum(d.values()) or 1
    return {
        "busy_share": round(1 - (d["idle"] + d["iowait"]) / total, 3),
        "steal_share": round(d.get("steal", 0) / total, 4),
        "loadavg_before": s0["loadavg"],
        "loadavg_after": s1["loadavg"],
        "seconds": round(s1["t"] - s0["t"], 1),
    }


# -- peers ----------------------------------------------------------------------------------
def ensure_peer(name: str, version: str, timeout_s: float) -> tuple[Path | None, str]:
    """The virtualenv of a peer, installed on first use; (venv, "") or (None, why)."""
    venv = PEERS_DIR / f"{name}-{version}"
    marker = venv / ".accelbench-installed"
    if marker.exists():
        return venv, ""
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    logf = PEERS_DIR / f"{name}-{version}.install.log"
    log(f"installing {name}=={version} into {venv} (log {logf})")
    t0 = time.monotonic()
    try:
        with open(logf, "ab") as f:
            if not (venv / "bin" / "pip").exists():
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                               stdout=f, stderr=subprocess.STDOUT, timeout=300)  # fmt: skip
            p = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"{name}=={version}"],
                               stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"pip install {name}=={version} took over {timeout_s:.0f} s"
    except (OSError, subprocess.CalledProcessError) as exc:
        return None, f"no virtualenv for {name}: {exc}"
    if p.returncode != 0:
        tail = [ln for ln in logf.read_text(errors="replace").splitlines() if "ERROR" in ln]
        return None, f"pip install {name}=={version} failed: {(tail or ['see ' + str(logf)])[-1]}"
    marker.write_text(f"installed in {time.monotonic() - t0:.0f} s\n")
    return venv, ""


# -- the table ------------------------------------------------------------------------------
@dataclass
class Row:
    """One contender in one comparison: its per-round figures and accelbench's."""

    contender: str
    figures: list[float | None] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    note: str = ""


def spread(vals: list[float]) -> float:
    return max(vals) / min(vals) if vals and min(vals) > 0 else float("inf")


def cell(vals: list[float], spec: str) -> str:
    if not vals:
        return "-"
    med = statistics.median(vals)
    if len(vals) == 1:
        return format(med, spec)
    return f"{format(med, spec)} ({format(min(vals), spec)}-{format(max(vals), spec)})"


def ratio_cell(mine: Row, other: Row, max_spread: float, spec: str = ".2f") -> tuple[str, dict]:
    """accelbench / contender, per round (rounds where both have a figure), or why not.

    Printed when there are ``MIN_ROUNDS`` rounds with both figures and either
    - the per-round ratios agree (max/min <= ``max_spread``): the rounds are interleaved,
      so what the machine does to both alike cancels in each round's ratio, or
    - the two contenders' rounds do not overlap (the worst round of one is better than
      the best of the other): the order holds whatever moved between rounds, and the
      ratio's min-max says by how much at least and at most.
    Refused otherwise: the difference is within what the rounds' own spread allows."""
    pairs = [(a, b) for a, b in zip(mine.figures, other.figures, strict=False)
             if a is not None and b is not None and b > 0]  # fmt: skip
    ratios = [a / b for a, b in pairs]
    info: dict[str, Any] = {"ratios": ratios}
    good_a = [f for f in mine.figures if f is not None]
    good_b = [f for f in other.figures if f is not None]
    if len(pairs) < MIN_ROUNDS:
        info["refused"] = f"{len(pairs)} rounds with both figures (< {MIN_ROUNDS})"
    elif spread(ratios) <= max_spread:
        info["basis"] = f"per-round ratios agree (max/min {spread(ratios):.2f})"
    elif max(good_a) < min(good_b) or max(good_b) < min(good_a):
        info["basis"] = "the rounds do not overlap"
    else:
        info["refused"] = (
            f"per-round ratios disagree (max/min {spread(ratios):.2f} > {max_spread:g}) and "
            f"the rounds overlap ({mine.contender} {min(good_a):{spec}}-{max(good_a):{spec}}, "
            f"{other.contender} {min(good_b):{spec}}-{max(good_b):{spec}})"
        )
    if "refused" in info:
        return f"refused: {info['refused']}", info
    return cell(ratios, spec), info


def section_table(title: str, unit: str, rows: list[Row], mine: str, max_spread: float,
                  spec: str) -> tuple[str, list[dict]]:  # fmt: skip
    ref = next(r for r in rows if r.contender == mine)
    out = [f"**{title}**", "",
           f"| contender | {unit}: median (min-max) | good rounds | accelbench / contender | note |",
           "|---|---|---|---|---|"]  # fmt: skip
    raw = []
    for r in rows:
        good = [f for f in r.figures if f is not None]
        if r is ref:
            ratio, info = "(itself)", {}
        elif not good:
            ratio, info = "-", {}
        else:
            ratio, info = ratio_cell(ref, r, max_spread, ".2g")
        bad = sorted({s for s in r.statuses if s != "ok"})
        note = "; ".join(filter(None, [r.note, *bad]))
        out.append(f"| {r.contender} | {cell(good, spec)} | {len(good)}/{len(r.figures)} "
                   f"| {ratio} | {note} |")  # fmt: skip
        raw.append({"contender": r.contender, "figures": r.figures, "statuses": r.statuses,
                    "note": r.note, **info})  # fmt: skip
    return "\n".join(out), raw


def load_line(states: list[dict[str, Any]]) -> str:
    if not states:
        return ""
    la = [s["loadavg_before"][0] for s in states] + [s["loadavg_after"][0] for s in states]
    busy = [s["busy_share"] for s in states]
    steal = [s["steal_share"] for s in states]
    return (f"Machine during the runs: 1-minute load {min(la):.1f}-{max(la):.1f}, "
            f"busy {100 * min(busy):.0f}-{100 * max(busy):.0f} % of all CPUs, "
            f"steal {100 * min(steal):.1f}-{100 * max(steal):.1f} % (per run).")  # fmt: skip


def on_cpus(cpus: set[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that keeps a child (and every process it starts) on ``cpus``;
    None leaves it where the scheduler puts it."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def start_reference(port: int, gt: Path, wd: Path,
                    extra: tuple[str, ...] = ("--ttft-ms", "20", "--itl-ms", "5"),
                    cpus: set[int] | None = None) -> subprocess.Popen:  # fmt: skip
    """The reference server on ``port``, its ground truth in ``gt``, up and answering
    (on ``cpus`` if given)."""
    logf = open(wd / "server.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "serve", "reference", "--port", str(port),
         "--ground-truth", str(gt), *extra],
        stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=on_cpus(cpus),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError(f"reference server exited with {proc.returncode}")
        with contextlib.suppress(OSError):
            cc.http_get(base + "/health", timeout=1)
            return proc
        time.sleep(0.1)
    raise RuntimeError("reference server did not come up")
