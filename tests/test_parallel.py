"""metrics.parallel.ordered_map: results in the items' order, whatever the threads' timing;
the items drawn but not handed back stay bounded; an error surfaces at its item."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.metrics.parallel import cores, ordered_map


@settings(max_examples=60, deadline=None)
@given(delays=st.lists(st.sampled_from([0.0, 0.0005, 0.002]), max_size=40),
       threads=st.integers(1, 4), ahead=st.integers(0, 3))  # fmt: skip
def test_order_is_kept(delays: list[float], threads: int, ahead: int) -> None:
    def work(k: int) -> int:
        time.sleep(delays[k])
        return k * k

    got = list(ordered_map(work, range(len(delays)), threads, ahead))
    assert got == [k * k for k in range(len(delays))]


def test_items_in_flight_are_bounded() -> None:
    lock = threading.Lock()
    drawn = [0]
    high = [0]
    handed = [0]

    def items() -> Iterator[int]:
        for k in range(200):
            with lock:
                drawn[0] += 1
                high[0] = max(high[0], drawn[0] - handed[0])
            yield k

    for _ in ordered_map(lambda k: time.sleep(0.0002), items(), threads=3, ahead=1):
        with lock:
            handed[0] += 1
    assert drawn[0] == 200
    assert high[0] <= 3 + 1 + 1  # threads + ahead, and the one drawn while handing back


def test_an_error_is_raised_at_its_item_and_stops_drawing() -> None:
    drawn: list[int] = []

    def items() -> Iterator[int]:
        for k in range(1000):
            drawn.append(k)
            yield k

    def work(k: int) -> int:
        if k == 5:
            raise RuntimeError("item 5")
        return k

    out: list[int] = []
    with pytest.raises(RuntimeError, match="item 5"):
        for r in ordered_map(work, items(), threads=2, ahead=1):
            out.append(r)
    assert out == [0, 1, 2, 3, 4]
    assert len(drawn) < 20


def test_cores_is_at_least_one() -> None:
    assert 1 <= cores() <= 8


def test_threads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.errors import AccelbenchError

    monkeypatch.setenv("ACCELBENCH_THREADS", "3")
    assert cores() == 3
    monkeypatch.setenv("ACCELBENCH_THREADS", "0")
    assert cores() == 1
    monkeypatch.setenv("ACCELBENCH_THREADS", "many")
    with pytest.raises(AccelbenchError, match="whole number"):
        cores()
