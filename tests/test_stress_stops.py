"""A stop signal (Ctrl-C, SIGTERM, SIGHUP) at any moment of a stress suite, a second one
soon after included: once a step has begun, the suite ends ``interrupted`` (or
``completed``, when the stop came after its last step) with stress.json written and every
finished run in it; no KeyboardInterrupt leaves the suite (docs/PROCESSES.md, "A run's
stop"). Before, a second stop while the suite judged its steps, or a first one between two
steps or while it wrote stress.json, ended it with exit 130, no stress.json and its
finished runs unjudged."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accelbench.lifetime import interrupt_on_termination, noted_stops
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.suites.stress import consistency, flood
from accelbench.suites.stress.document import read_stress
from conftest import RefServer


@pytest.fixture
def cli_handlers() -> Iterator[None]:
    """The stop handlers as the CLI sets them (SIGTERM, SIGHUP raise as Ctrl-C does)."""
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupt_on_termination()
    yield
    for s, h in old.items():
        signal.signal(s, h)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    s = RefServer(["--ttft-ms", "5", "--itl-ms", "1"], tmp_path_factory.mktemp("ref"))
    yield s.url
    s.stop()


def _flood(url: str, lengths: list[int]) -> flood.FloodConfig:
    load = BenchmarkConfig(url=url, telemetry=False, workload=WorkloadConfig(isl=16, osl=2))
    return flood.FloodConfig(load=load, lengths=lengths, requests=2, osl=2, sample_s=0.2,
                             gpu=False)  # fmt: skip


def _kill(sig: signal.Signals, then: float | None = None) -> None:
    os.kill(os.getpid(), sig)
    if then is not None:
        time.sleep(then)
        os.kill(os.getpid(), sig)


def _check_kept(out: Path, statuses: set[str]) -> None:
    """stress.json is readable, has a stop's status, and lists every finished run."""
    doc = read_stress(out)
    assert doc.status in statuses, (doc.status, doc.reason)
    finished = {str(p.parent.relative_to(out)) for p in (out / "runs").glob("*/summary.json")}
    assert finished <= set(doc.runs), (finished, doc.runs)


# the moments: right after step 1 returns (between steps), while the suite judges its
# steps (suite_reason) and right before stress.json is written; each with one stop or
# a second one 0.05 s later
MOMENTS = ["after_step_1", "judging", "writing"]


# every signal, once and twice, at the two moments inside the suite's end; between
# steps one stop and two stops are enough (each case runs a real step)
CASES = [
    (moment, sig, second)
    for moment in MOMENTS[1:]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    for second in (None, 0.05)
] + [("after_step_1", signal.SIGINT, None), ("after_step_1", signal.SIGTERM, 0.05)]


@pytest.mark.parametrize(("moment", "sig", "second"), CASES)
def test_a_stop_at_each_moment_of_a_flood_keeps_its_steps(
    server: str, tmp_path: Path, cli_handlers: None, monkeypatch: pytest.MonkeyPatch,
    moment: str, sig: signal.Signals, second: float | None,
) -> None:  # fmt: skip
    out = tmp_path / "flood"
    hooks: dict[str, Callable[..., object]] = {
        "after_step_1": flood.run_step,
        "judging": flood.suite_reason,
        "writing": flood.write_stress,
    }
    real = hooks[moment]
    calls: list[int] = []

    def hooked(*a: object, **k: object) -> object:
        if moment != "after_step_1":
            _kill(sig, second)
        got = real(*a, **k)
        calls.append(1)
        if moment == "after_step_1" and len(calls) == 1:
            _kill(sig, second)
        return got

    monkeypatch.setattr(flood, {"after_step_1": "run_step", "judging": "suite_reason",
                                "writing": "write_stress"}[moment], hooked)  # fmt: skip
    res = flood.run_flood(_flood(server, [16, 32]), out)  # no KeyboardInterrupt leaves it
    expect = {"interrupted"} if moment == "after_step_1" else {"completed"}
    assert res.status in expect
    _check_kept(out, expect)
    if moment == "after_step_1":  # the second step was not begun
        assert [s.input_tokens for s in res.steps] == [16]


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.6, 0.9, 1.2, 1.6, 2.0, 2.5])
def test_a_stop_at_any_delay_into_a_flood_keeps_what_it_measured(
    server: str, tmp_path: Path, cli_handlers: None, delay: float
) -> None:
    out = tmp_path / "flood"
    t = threading.Timer(delay, _kill, (signal.SIGTERM, 0.05))
    escaped = False
    try:
        t.start()
        flood.run_flood(_flood(server, [16, 32]), out)
    except KeyboardInterrupt:  # only before its first step began: nothing of it kept
        escaped = True
    finally:
        with noted_stops():  # a signal that came after the suite ended is the test's
            if t.is_alive() or t.ident is not None:
                t.join()
    if escaped:
        assert not (out / "runs").exists() or not any((out / "runs").iterdir())
    else:
        _check_kept(out, {"interrupted", "completed"})


def test_a_second_stop_while_consistency_judges_keeps_its_document(
    server: str, tmp_path: Path, cli_handlers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = consistency.suite_reason
    monkeypatch.setattr(consistency, "suite_reason",
                        lambda *a: (_kill(signal.SIGINT, 0.05), real(*a))[1])  # fmt: skip
    load = BenchmarkConfig(url=server, telemetry=False, workload=WorkloadConfig(isl=16, osl=4))
    cfg = consistency.ConsistencyConfig(load=load, urls=[server], prompts=2, repeats=1,
                                        loaded_concurrency=None)  # fmt: skip
    out = tmp_path / "cons"
    res = consistency.run_consistency(cfg, out)
    assert res.status == "completed"
    _check_kept(out, {"completed"})


def test_a_stop_in_a_consistency_pause_ends_it_at_once(
    server: str, tmp_path: Path, cli_handlers: None
) -> None:
    load = BenchmarkConfig(url=server, telemetry=False, workload=WorkloadConfig(isl=16, osl=4))
    cfg = consistency.ConsistencyConfig(load=load, urls=[server], prompts=2, repeats=2,
                                        loaded_concurrency=None, pause_s=3600)  # fmt: skip
    out = tmp_path / "cons"
    t0 = time.monotonic()
    t = threading.Timer(2.0, _kill, (signal.SIGINT,))
    t.start()
    res = consistency.run_consistency(cfg, out)
    t.join()
    assert res.status == "interrupted" and time.monotonic() - t0 < 60
    _check_kept(out, {"interrupted"})
