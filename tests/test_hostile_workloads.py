"""Hostile workload inputs, by class (what a user feeds the load: `--dataset`, `--trace`,
`--sessions` and its shapes, sweeps' points): each class ends in one clear line naming
the file:line or the option, exit 2, nothing written; or is honoured. One Hypothesis
property per class, and the concrete example that was found.

The CLI runs in-process (tests/cli_inprocess.py); where a run must start, against the
reference server (conftest's ``reference_server``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelbench.errors import UsageError
from accelbench.runner.config import BenchmarkConfig
from accelbench.workload.config import WorkloadConfig
from test_hostile_inputs import CLOSED, assert_clean, invoke

HYP = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MAX_REQUESTS = 10_000_000


def run_args(*extra: str) -> list[str]:
    return ["run", "--url", CLOSED, "--results-root", "res", "-q", "--no-telemetry", *extra]


# -- huge counts: the plan's size bounded before anything is drawn --------------------------
def test_sessions_times_turns_is_bounded_before_the_plan(tmp_path: Path) -> None:
    """`--sessions 10000000 --turns 10000` asked numpy for 745 GiB: MemoryError, exit 70."""
    code, text = invoke(run_args("--sessions", "10000000", "--turns", "10000"), tmp_path)
    assert_clean(code, text, wrong=True, option="--sessions")
    assert code == 2 and "more than 10,000,000" in text, text
    assert not list(tmp_path.iterdir())


@HYP
@given(
    sessions=st.integers(1, MAX_REQUESTS),
    lo=st.integers(1, 10_000),
    hi=st.integers(1, 10_000),
    warmup=st.integers(0, 1000),
)
def test_planned_turns_are_within_the_requests_limit(
    sessions: int, lo: int, hi: int, warmup: int
) -> None:
    lo, hi = min(lo, hi), max(lo, hi)
    turns = str(hi) if lo == hi else f"{lo}:{hi}"
    wl = WorkloadConfig(sessions=sessions, turns=turns)
    cfg = BenchmarkConfig(url="http://127.0.0.1:9", workload=wl, warmup_requests=warmup)
    if (sessions + warmup) * hi > MAX_REQUESTS:
        with pytest.raises(UsageError, match=r"^--sessions .* more than 10,000,000"):
            cfg.validate()
    else:
        cfg.validate()
