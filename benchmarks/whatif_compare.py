"""Benchmark: AIConfigurator's error on the calibration set's NVIDIA points beside
accelbench's (issue 23; docs/PREDICT.md "AIConfigurator on the same points").

    python benchmarks/whatif_compare.py [--python PEER_PYTHON] [--out DIR] [--online]

AIConfigurator runs in this interpreter when the extra is installed here
(``pip install 'accelbench[whatif]'``), else from its own virtualenv,
``~/.cache/accelbench/peers/aiconfigurator-<version>`` (installed on first use with
``sbs_common.ensure_peer``), as ``python -m accelbench.predict.whatif`` with this tree on
PYTHONPATH. Unless ``--online``, that process runs with no network (``unshare -n``, where
this user may) so the table also shows it needs nothing beyond its wheel. Writes
``whatif.md`` and ``whatif.json`` to ``--out`` and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "src"))

from sbs_common import busy_between, ensure_peer, machine_state  # noqa: E402

from accelbench.errors import AccelbenchError  # noqa: E402
from accelbench.predict import whatif as wi  # noqa: E402
from accelbench.predict.calibration import load_calibration  # noqa: E402


def _can_unshare() -> bool:
    exe = shutil.which("unshare")
    if exe is None:
        return False
    return subprocess.run([exe, "-n", "true"], capture_output=True).returncode == 0


def peer_estimator(python: str, offline: bool, note: dict[str, str]) -> wi.Estimator:
    """Queries answered by ``python -m accelbench.predict.whatif`` (the peer venv)."""

    def run(queries: Sequence[wi.Query]) -> list[wi.Answer]:
        cmd = [python, "-m", "accelbench.predict.whatif"]
        if offline:
            cmd = ["unshare", "-n", *cmd]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        payload = json.dumps([q.__dict__ for q in queries])
        p = subprocess.run(
            cmd, input=payload, capture_output=True, text=True, env=env, timeout=7200
        )
        if p.returncode != 0:
            tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise AccelbenchError(f"AIConfigurator ({python}) exited {p.returncode}: {tail}")
        doc = json.loads(p.stdout)
        note["version"] = doc["version"]
        return [a if isinstance(a, str) else wi.Estimate(**a) for a in doc["answers"]]

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", help="the peer virtualenv's python (default: install/reuse it)")
    ap.add_argument("--out", type=Path, default=Path("whatif-out"))
    ap.add_argument("--online", action="store_true", help="do not cut the network off")
    ap.add_argument("--install-timeout", type=float, default=900)
    a = ap.parse_args()

    points = load_calibration()
    s0 = machine_state()
    t0 = time.monotonic()
    ab = wi.accelbench_predictions(points)
    t_ab = time.monotonic() - t0
    note: dict[str, str] = {}
    offline = not a.online and _can_unshare()
    try:
        version = wi.installed_version()
        where = f"in-process ({sys.executable})"
        estimator: wi.Estimator = wi.aiconfigurator_estimates
        offline = False  # this process needs no network either, but cannot drop it
    except AccelbenchError:
        python = a.python
        if python is None:
            venv, why = ensure_peer(wi.AIC_DIST, wi.AIC_VERSION, a.install_timeout)
            if venv is None:
                print(f"AIConfigurator could not be installed: {why}", file=sys.stderr)
                return 1
            python = str(venv / "bin" / "python")
        where = f"{python}" + (" under unshare -n (no network)" if offline else "")
        estimator = peer_estimator(python, offline, note)
        version = wi.AIC_VERSION
    t0 = time.monotonic()
    w = wi.compare(points, ab, estimator, version)
    t_aic = time.monotonic() - t0
    w.aic_version = note.get("version", w.aic_version)
    busy = busy_between(s0, machine_state())
    md = wi.table_markdown(w)
    head = (
        f"Run {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}: `python benchmarks/whatif_compare.py`; "
        f"AIConfigurator {w.aic_version} ran {where}; {len(points)} calibration points; "
        f"accelbench's leave-one-system-out took {t_ab:.0f} s, AIConfigurator's "
        f"{len(w.results) + sum(1 for _, why in w.skipped if why.startswith('AIConfigurator'))} "
        f"estimates {t_aic:.0f} s (machine {busy['busy_share']:.0%} busy, load "
        f"{busy['loadavg_before'][0]} -> {busy['loadavg_after'][0]})."
    )
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "whatif.md").write_text(f"{head}\n\n{md}\n", encoding="utf-8")
    doc = {**wi.whatif_json(w), "ran": where, "machine": busy, "accelbench_s": t_ab, "aic_s": t_aic}
    (a.out / "whatif.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"{head}\n\n{md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
