"""Dividing one run's request plan among load workers on many hosts.

``runner.benchmark._worker_specs`` already partitions the plan for local workers: an
open-loop run gets its one arrival schedule dealt out round robin (worker k issues
arrivals k, k+n, ...; each keeps its planned offset from the common phase start), so the
union is exactly the schedule one host would issue. A closed-loop run splits the
concurrency, and local workers take the next request from a counter in shared memory.
Hosts share no memory, so here each worker takes a fixed share of the plan instead
(requests k, k+n, ... with concurrency/n slots): the union is still the whole plan,
each request sent once; the cost is that a worker may run dry a little before another
(at most one request's time, as shares differ by at most one request per slot).
"""

from __future__ import annotations

from dataclasses import replace

from accelbench.runner.loadgen import PhaseSpec, WorkerSpec


def shares_closed_loop(specs: list[WorkerSpec]) -> bool:
    """True where the local pool would give the workers one shared counter."""
    return len(specs) > 1 and all(p.offsets is None for s in specs for p in s.phases)


def fixed_shares(specs: list[WorkerSpec]) -> list[WorkerSpec]:
    """The specs with every closed-loop worker given its own fixed share of each phase
    (open-loop specs are returned unchanged: already partitioned)."""
    if not shares_closed_loop(specs):
        return specs
    n = len(specs)
    out = []
    for k, s in enumerate(specs):
        out.append(replace(s, phases=[_share(p, k, n) for p in s.phases]))
    return out


def _share(p: PhaseSpec, k: int, n: int) -> PhaseSpec:
    items = p.items[k::n]
    # an empty share is kept (every worker meets every phase barrier) but must not
    # cycle nothing for a duration
    return replace(p, items=items, duration_s=p.duration_s if items else None)
