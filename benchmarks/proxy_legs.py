"""Where section 2's added TTFT goes (side_by_side.py, `proxy`): the caller's request and
its first chunk, leg by leg, through accelbench's proxy and nginx's mirror (identical
candidate) against direct, on the section's own stack (sbs_proxy.Stack), 64 streams.

Per round and contender: the first chunk's hop (the caller's stamp - the primary's
write), the later chunks' hop, and the request's way in (the primary's receipt - the
caller's send); through accelbench also that way in split at the proxy, from its
baseline journal (the caller's send -> the proxy's receipt -> its forward's write -> the
primary's receipt; requests matched in time order).

    python benchmarks/proxy_legs.py --rounds 3 --out /tmp/legs
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import sbs_proxy as P  # noqa: E402

CONTENDERS = ("direct", "accelbench (a)", "nginx (a)")


def q(a: list[float]) -> str:
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return f"p50 {p50:.2f} p90 {p90:.2f} p99 {p99:.2f}"


def _rows(out: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows = pq.read_table(next(out.rglob("requests.parquet"))).to_pylist()
    return [r for r in rows if r["ok"] and not r["warmup"]]


def _truth(gt: Path, offset: int) -> dict[str, dict[str, Any]]:
    with open(gt, "rb") as f:
        f.seek(offset)
        lines = f.read().splitlines()
    return {d["request_id"]: d for d in map(json.loads, lines) if d.get("token_times")}


def legs(rows: list[dict[str, Any]], truth: dict[str, dict[str, Any]]) -> dict[str, list[float]]:
    """ms per request (first chunk, way in) and per later chunk."""
    out: dict[str, list[float]] = {"first": [], "later": [], "way_in": []}
    for r in rows:
        d = truth.get(r["request_id"])
        if not d or len(r["chunk_times"]) != len(d["token_times"]):
            continue
        ct, tt = r["chunk_times"], d["token_times"]
        out["first"].append((ct[0] - tt[0]) / 1e6)
        out["later"] += [(c - t) / 1e6 for c, t in zip(ct[1:], tt[1:], strict=True)]
        out["way_in"].append((d["t_recv"] - r["t_send"]) / 1e6)
    return out


def at_the_proxy(rows: list[dict[str, Any]], truth: dict[str, dict[str, Any]],
                 journal: Path) -> dict[str, list[float]]:  # fmt: skip
    """The way in split at the proxy: its baseline records' t_sched (its receipt of the
    caller's request) and t_send (its forward's write), matched to the caller's
    requests as the first receipt after each send (within 50 ms)."""
    base = [json.loads(line) for line in journal.read_text().splitlines()]
    fwd = {b["t_sched"]: b["t_send"] for b in base if b.get("t_sched") and b.get("t_send")}
    keys = np.array(sorted(fwd))
    out: dict[str, list[float]] = {"to_proxy": [], "in_proxy": [], "to_primary": []}
    for r in rows:
        i = int(np.searchsorted(keys, r["t_send"]))
        d = truth.get(r["request_id"])
        if i >= keys.size or keys[i] - r["t_send"] > 50e6 or d is None:
            continue
        got = int(keys[i])
        out["to_proxy"].append((got - r["t_send"]) / 1e6)
        out["in_proxy"].append((fwd[got] - got) / 1e6)
        out["to_primary"].append((d["t_recv"] - fwd[got]) / 1e6)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--streams", type=int, default=64)
    p.add_argument("--requests", type=int, default=320)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    shutil.rmtree(a.out, ignore_errors=True)
    a.out.mkdir(parents=True)
    st = P.Stack(a.out, 600.0)
    st.start()
    missing = [c for c in CONTENDERS if c not in st.urls]
    if missing:
        st.stop()
        raise SystemExit(f"not up: {missing} ({st.why_not})")
    try:
        for rnd in range(a.rounds):
            for name in CONTENDERS:
                out = a.out / f"{name.split()[0]}-{rnd}"
                start_at = st.gt.stat().st_size
                journal = a.out / "shadow-a" / "baseline.jsonl"
                subprocess.run(
                    [sys.executable, "-m", "accelbench", "run", "--url", st.urls[name],
                     "-c", str(a.streams), "-n", str(a.requests), "--warmup", str(a.streams),
                     "--isl", str(P.ISL), "--osl", str(P.OSL), "--seed", str(rnd),
                     "--workers", "1", "--quiet", "--no-telemetry",
                     "--tokenizer", str(st.tokenizer), "-o", str(out)],
                    check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                rows, truth = _rows(out), _truth(st.gt, start_at)
                g = legs(rows, truth)
                line = (f"round {rnd} {name:15} first chunk hop {q(g['first'])} | later chunks "
                        f"{q(g['later'])} | way in {q(g['way_in'])}")  # fmt: skip
                if name.startswith("accelbench"):
                    s = at_the_proxy(rows, truth, journal)
                    line += (f"\n    through the proxy: caller -> proxy {q(s['to_proxy'])} | "
                             f"in the proxy {q(s['in_proxy'])} | proxy -> primary's receipt "
                             f"{q(s['to_primary'])}")  # fmt: skip
                print(line, flush=True)
    finally:
        st.stop()


if __name__ == "__main__":
    main()
