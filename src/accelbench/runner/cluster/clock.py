"""One timeline for a run on many hosts.

Every load worker stamps its records with its own ``time.monotonic_ns()``: one clock per
host (shared by the processes on it), with an unknown offset to the driver's. The driver
estimates that offset NTP-style: it reads its clock (t0), asks the worker for its clock
(t_remote), reads its clock again (t1). If the worker read its clock at some instant in
[t0, t1], the offset (remote minus driver) lies in [t_remote - t1, t_remote - t0]; the
sample with the smallest round trip gives the tightest interval, and its midpoint is
the estimate, off by at most half that round trip (the uncertainty reported beside the
run). Records are moved to the driver's timeline by subtracting the offset from every
timestamp, so windows, throughput and steady-state detection see one clock.

Where a worker reads the driver's own clock (``clock_identity``: the same boot and time
namespace, e.g. every actor of ``--ray local``), the offset is exactly zero and is not
estimated: an estimate there is only error (a Ray round trip is asymmetric by tens of
microseconds). The estimate is still made and kept beside it, as a check.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from accelbench.metrics.records import FIELD_NAMES

# the record's timestamps (nanoseconds on the worker's monotonic clock)
TIME_FIELDS = tuple(f for f in FIELD_NAMES if f.startswith("t_"))
Sample = tuple[int, int, int]  # (driver t0, remote t, driver t1), nanoseconds


class ClockJSON(TypedDict):
    """A clock offset as run.json's ``cluster`` section stores it."""

    offset_ns: int
    uncertainty_ns: int
    rtt_min_ns: int
    samples: int
    offset_ms: float
    uncertainty_ms: float
    # the worker reads the driver's own clock: offset 0 exactly; the round trips' estimate
    # (which should lie within its uncertainty of 0) kept as a check
    same_clock: NotRequired[bool]
    estimate_ms: NotRequired[float]
    estimate_uncertainty_ms: NotRequired[float]


@dataclass(frozen=True)
class ClockOffset:
    """A worker clock's offset to the driver's: ``remote = driver + offset_ns``."""

    offset_ns: int
    uncertainty_ns: int  # half the smallest round trip: |true - estimate| <= this
    rtt_min_ns: int
    samples: int
    same_clock: bool = False  # the driver's own clock: offset_ns is 0, not estimated
    estimate_ns: int | None = None  # then: what the round trips estimated
    estimate_uncertainty_ns: int | None = None

    def on_same_clock(self) -> ClockOffset:
        """This estimate, for a worker known to read the driver's own clock: offset and
        uncertainty 0, the estimate kept beside them."""
        return ClockOffset(0, 0, self.rtt_min_ns, self.samples, True,
                           self.offset_ns, self.uncertainty_ns)  # fmt: skip

    def to_json(self) -> ClockJSON:
        doc = ClockJSON(
            offset_ns=self.offset_ns,
            uncertainty_ns=self.uncertainty_ns,
            rtt_min_ns=self.rtt_min_ns,
            samples=self.samples,
            offset_ms=self.offset_ns / 1e6,
            uncertainty_ms=self.uncertainty_ns / 1e6,
        )
        if self.same_clock:
            doc["same_clock"] = True
            if self.estimate_ns is not None and self.estimate_uncertainty_ns is not None:
                doc["estimate_ms"] = self.estimate_ns / 1e6
                doc["estimate_uncertainty_ms"] = self.estimate_uncertainty_ns / 1e6
        return doc


def clock_identity() -> str | None:
    """What makes two processes' ``time.monotonic_ns()`` one clock: the same boot (Linux's
    boot_id) and the same time namespace (which may shift CLOCK_MONOTONIC, Linux 5.6+).
    None where that cannot be told (not Linux, /proc unreadable): then offsets are
    estimated."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        return None
    try:
        st = os.stat("/proc/self/ns/time")
        ns = f"{st.st_dev}:{st.st_ino}"
    except FileNotFoundError:
        if not os.path.isdir("/proc/self/ns"):
            return None
        ns = "none"  # a kernel without time namespaces: one monotonic clock per boot
    except OSError:
        return None
    return f"{boot}/{ns}" if boot else None


def offset_from_samples(samples: list[Sample]) -> ClockOffset:
    """The minimum-delay estimate from round-trip samples."""
    if not samples:
        raise ValueError("no clock samples")
    for t0, _, t1 in samples:
        if t1 < t0:
            raise ValueError(f"clock sample goes backwards: t0={t0} t1={t1}")
    t0, tr, t1 = min(samples, key=lambda s: s[2] - s[0])
    rtt = t1 - t0
    # midpoint of [tr - t1, tr - t0], rounded toward the interval's centre
    return ClockOffset(
        offset_ns=tr - (t0 + t1) // 2,
        uncertainty_ns=(rtt + 1) // 2,
        rtt_min_ns=rtt,
        samples=len(samples),
    )


def estimate_offset(read_remote: Callable[[], int], n: int = 16) -> ClockOffset:
    """Exchange ``n`` times with a remote clock (``read_remote`` returns its reading)."""
    samples: list[Sample] = []
    for _ in range(n):
        t0 = time.monotonic_ns()
        tr = read_remote()
        t1 = time.monotonic_ns()
        samples.append((t0, tr, t1))
    return offset_from_samples(samples)


def to_driver_timeline(rows: list[dict[str, Any]], offset_ns: int) -> list[dict[str, Any]]:
    """Move record rows (``record_row`` dicts) from a worker's clock to the driver's, in
    place: every timestamp minus the offset; unset marks (None, 0) stay unset."""
    if offset_ns == 0:
        return rows
    for r in rows:
        for f in TIME_FIELDS:
            t = r.get(f)
            if t:
                r[f] = t - offset_ns
        ct = r.get("chunk_times")
        if ct:
            r["chunk_times"] = [t - offset_ns for t in ct]
    return rows
