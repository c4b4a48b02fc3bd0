"""The KV-capacity knee of a session sweep: where the measured hit rate breaks (from each
point's per-session totals, ``metrics.knee``), beside the knee the server's published
capacity predicts for the sessions the sweep actually sent (``plan.knee``), and whether
they agree (docs/WORKLOADS.md "The knee")."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.metrics.knee import (
    CapacityKnee,
    KneePoint,
    MeasuredKnee,
    SessionMix,
    capacity_knee,
    find_knee,
    knee_agrees,
)
from accelbench.metrics.values import finite_number
from accelbench.metrics.verdict import Interval, Verdict
from accelbench.store.reader import RunInfo, dig, load_run

__all__ = ["SweepKnee", "sweep_knee"]

_COLUMNS = ("session", "turn", "isl", "osl", "cached_tokens", "turn_tokens", "prefix_tokens",
            "ok", "ttft_ms")  # fmt: skip


def _ends(iv: Interval) -> tuple[str, str]:
    """A bracket's two ends in words ("-": open)."""
    lo, hi = ("-" if x is None else f"{x:g}" for x in (iv.low, iv.high))
    return lo, hi


@dataclass(frozen=True)
class SweepKnee:
    measured: MeasuredKnee
    predicted: CapacityKnee | None  # None: the server did not say its capacity
    agreement: Verdict | None
    mix: SessionMix | None
    points: list[KneePoint]
    # the bracket an LRU of the server's capacity finds replaying each point's requests in
    # their arrival order (None: a point without that replay)
    replayed: MeasuredKnee | None = None

    def lines(self) -> list[str]:
        """The knee in words, with its evidence."""
        lo, hi = _ends(self.measured.interval)
        pl = self.measured.plateau
        why = self.measured.note or (
            f"hit rate below the plateau {100 * (pl or 0):.1f}% less "
            f"{100 * self.measured.tolerance:g} points"
        )
        rates = ", ".join(f"{p.sessions}: {100 * p.hit_rate:.1f}%" for p in self.points)
        out = [f"KV-capacity knee, measured: between {lo} and {hi} concurrent sessions ({why}; "
               f"hit rate by sessions {rates})"]  # fmt: skip
        if self.predicted is not None:
            p = self.predicted
            iv = p.interval
            out.append(
                f"predicted from the server's capacity: {p.knee_sessions:.2f} sessions "
                f"[{iv.low:.2f}, {iv.high:.2f}] ({p.capacity_tokens:,} tokens = "
                f"{p.capacity_blocks:,} blocks of {p.block_size}; {p.shared_blocks} shared "
                f"+ {p.session_blocks} per session)"
            )
        if self.replayed is not None:
            r_lo, r_hi = _ends(self.replayed.interval)
            out.append(
                "an LRU of that capacity replaying the requests as they arrived: between "
                f"{r_lo} and {r_hi} sessions"
            )
        if self.agreement is not None:
            out.append(f"agreement: {self.agreement.status} ({self.agreement.note})")
        return out


def _point(c: int, run: RunInfo) -> tuple[KneePoint, dict[str, list[float]]] | None:
    t = run.read_requests(list(_COLUMNS)).to_pylist()
    cached: dict[int, float] = defaultdict(float)
    prompt: dict[int, float] = defaultdict(float)
    ttft = []
    shape: dict[str, list[float]] = defaultdict(list)
    by: dict[int, list[dict]] = defaultdict(list)
    for r in t:
        if r["session"] is None or not r["ok"] or r["cached_tokens"] is None or not r["isl"]:
            continue
        cached[r["session"]] += r["cached_tokens"]
        prompt[r["session"]] += r["isl"]
        by[r["session"]].append(r)
        if r["ttft_ms"] is not None:
            ttft.append(r["ttft_ms"] / 1000)
    if not prompt:
        return None
    for rs in by.values():  # the sessions' shape as sent: turns, message and reply tokens
        rs.sort(key=lambda r: r["turn"])
        shape["turns"].append(len(rs))
        shape["system"].append(rs[0]["prefix_tokens"] or 0)
        for a, b in zip(rs, rs[1:], strict=False):
            if b["turn_tokens"] is not None:
                shape["user"].append(b["turn_tokens"])
                shape["reply"].append(b["isl"] - a["isl"] - b["turn_tokens"])
        shape["first_user"].append(rs[0]["isl"] - (rs[0]["prefix_tokens"] or 0))
    ids = sorted(prompt)
    # judged against the sweep's own plateau (its smallest c), not each point's ideal: on
    # an engine the history's seams (a reply re-tokenized, a chat template) keep every
    # point below the ideal by the same few blocks, which is no knee
    p = KneePoint.from_sessions(c, [cached[i] for i in ids], [prompt[i] for i in ids],
                                float(np.median(ttft)) if ttft else None)  # fmt: skip
    return p, shape


def _sd(xs: list[float]) -> float:
    return statistics.pstdev(xs) if len(xs) > 1 else 0.0


def sweep_knee(points: list[tuple[int, RunInfo]]) -> SweepKnee | None:
    """The knee of a concurrency sweep of sessions, or None when it has no session points
    whose responses said what was cached."""
    got = [(run, x) for c, run in points if (x := _point(c, run)) is not None]
    if len(got) < 2:
        return None
    kps = [p for _, (p, _) in got]
    measured = find_knee(kps)
    shape: dict[str, list[float]] = defaultdict(list)
    for _, (_, s) in got:
        for k, v in s.items():
            shape[k] += v
    mix = None
    if shape["user"] and shape["reply"]:
        users = shape["user"] + shape["first_user"]
        mix = SessionMix(
            turns=statistics.fmean(shape["turns"]), turns_sd=_sd(shape["turns"]),
            user_tokens=statistics.fmean(users), user_tokens_sd=_sd(users),
            output_tokens=max(0.0, statistics.fmean(shape["reply"])),
            output_tokens_sd=_sd(shape["reply"]),
            system_tokens=int(statistics.fmean(shape["system"])),
        )  # fmt: skip
    found = dig(points[-1][1].summary, "client", "server_cache")
    sc: dict[str, Any] = found if isinstance(found, dict) else {}
    cap, block = sc.get("capacity_tokens"), sc.get("server_block_size") or sc.get("block_size")
    predicted = None
    if mix is not None and cap and block and not math.isnan(mix.user_tokens):
        # the reference server's cache keeps full blocks only (the ideal rule); an engine
        # also holds a running prompt's partial last block
        predicted = capacity_knee(int(cap), mix, block_size=int(block),
                                  ideal_cache=sc.get("output_lag") == 0)  # fmt: skip
    lru = [finite_number(dig(run.summary, "cache", "ideal_lru")) for run, _ in got]
    replayed = None
    if all(x is not None and 0 <= x <= 1 for x in lru):
        replayed = find_knee(
            [KneePoint(p.sessions, float(x or 0)) for p, x in zip(kps, lru, strict=True)]
        )
    agreement = knee_agrees(predicted, measured, replayed) if predicted is not None else None
    return SweepKnee(measured, predicted, agreement, mix, kps, replayed)


def set_knee(runs: list[RunInfo]) -> SweepKnee | None:
    """:func:`sweep_knee` of a set's runs (closed-loop points: their concurrency)."""
    pts = [(c, r) for r in runs if (c := r.concurrency) is not None and r.rate is None]
    if len({c for c, _ in pts}) != len(pts):
        return None  # repeated points: not one sweep
    return sweep_knee(sorted(pts, key=lambda x: x[0]))


def sweep_dir_knee(sweep_dir: Path) -> SweepKnee | None:
    """The knee of a sweep directory's point runs (None: not a session sweep)."""
    runs = [load_run(p) for p in sorted(sweep_dir.iterdir()) if (p / "summary.json").is_file()]
    return set_knee(runs)
