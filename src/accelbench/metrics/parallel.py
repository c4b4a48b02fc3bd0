"""Threads for the analysis of long runs: numpy's and pyarrow's loops release the GIL, so
work on independent pieces of a large array or table runs on every core of the host
(docs/ANALYSIS.md "Large runs"). Results never depend on the thread count: pieces are
handed back in their order, and what is summed over them is summed in that order."""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from accelbench.errors import AccelbenchError

T = TypeVar("T")
R = TypeVar("R")

MAX_THREADS = 8  # beyond this the analysis is bound by memory bandwidth, not cores


def cores() -> int:
    """The threads the analysis uses: ``ACCELBENCH_THREADS`` where set (1: none beside
    the main one), else the cores this process may run on (its CPU affinity, as a
    container or taskset limits it), at most MAX_THREADS."""
    env = os.environ.get("ACCELBENCH_THREADS", "").strip()
    if env:
        try:
            return max(1, min(64, int(env)))
        except ValueError:
            raise AccelbenchError(
                f"ACCELBENCH_THREADS must be a whole number of threads, not {env!r}"
            ) from None
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, n))


def ordered_map(
    fn: Callable[[T], R], items: Iterable[T], threads: int | None = None, ahead: int = 1
) -> Iterator[R]:
    """``map(fn, items)`` over ``threads`` threads (``cores()`` by default), yielding the
    results in the items' order. The worker threads themselves draw the items (one at a
    time, under a lock), so that reading the next piece (a generator that decodes a row
    group) overlaps with the work on the current ones; at most ``threads + ahead`` items
    are drawn and not yet handed back, which bounds the memory held.

    An exception in ``fn`` or in ``items`` is raised here, at the item it belongs to; the
    items after it are not drawn. With one thread it is a plain loop, in this thread."""
    workers = cores() if threads is None else max(1, threads)
    if workers == 1:
        for item in items:
            yield fn(item)
        return
    it = iter(items)
    lock = threading.Lock()
    drawn = [0]
    done = object()

    def task() -> tuple[int, object]:
        with lock:
            k = drawn[0]
            try:
                item = next(it)
            except StopIteration:
                return k, done
            drawn[0] += 1
        return k, fn(item)

    results: dict[int, object] = {}
    pending: collections.deque[Future[tuple[int, object]]] = collections.deque()
    want, finished = 0, False
    with ThreadPoolExecutor(workers, thread_name_prefix="accelbench-analysis") as pool:
        try:
            for _ in range(workers + ahead):
                pending.append(pool.submit(task))
            while pending:
                k, r = pending.popleft().result()
                if r is done:
                    finished = True
                else:
                    results[k] = r
                    if not finished:
                        pending.append(pool.submit(task))
                while want in results:
                    yield results.pop(want)  # type: ignore[misc]
                    want += 1
        finally:
            for f in pending:
                f.cancel()
