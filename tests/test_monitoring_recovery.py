"""The recovery runner's guards with an injected clock: cool-down, hourly limit, dry run,
the JSONL log; and a real action run as an argument list (no shell)."""

from __future__ import annotations

import json
import sys

import pytest

from accelbench.errors import AccelbenchError
from accelbench.monitoring.recovery import Recovery, RecoveryPolicy

ECC_FAIL = {
    "verdict": "fail",
    "findings": [{"rule": "ecc", "severity": "fail", "device": "GPU 0", "message": "2 new"}],
}
PCIE_WARN = {
    "verdict": "warn",
    "findings": [{"rule": "pcie", "severity": "warn", "device": "GPU 0", "message": "x8"}],
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, s: float) -> None:
        self.now += s


def _recovery(clock: FakeClock, calls: list, **kw) -> Recovery:
    def runner(argv, event, timeout):
        calls.append((argv, event))
        return 0

    return Recovery(RecoveryPolicy(argv=["reset-gpu", "0"], **kw), clock=clock, runner=runner)


def test_cooldown_and_hourly_limit_exactly():
    clock, calls = FakeClock(), []
    rec = _recovery(clock, calls, cooldown_s=600, max_per_hour=3)
    assert rec.consider(ECC_FAIL)["action"] == "ran"  # t=0
    clock.advance(599.999)
    assert rec.consider(ECC_FAIL)["action"] == "suppressed"  # still cooling down
    assert rec.consider(ECC_FAIL) is None  # suppression is logged once
    clock.advance(0.001)
    assert rec.consider(ECC_FAIL)["action"] == "ran"  # t=600
    clock.advance(600)
    assert rec.consider(ECC_FAIL)["action"] == "ran"  # t=1200: third in the hour
    clock.advance(600)
    entry = rec.consider(ECC_FAIL)  # t=1800: cool-down over, but 3 in the last hour
    assert entry["action"] == "suppressed" and "3 actions per hour" in entry["reason"]
    clock.advance(1799.999)  # t=3599.999: the first action is still inside the hour
    assert rec.consider(ECC_FAIL) is None
    clock.advance(0.001)  # t=3600: it drops out
    assert rec.consider(ECC_FAIL)["action"] == "ran"
    assert len(calls) == 4
    assert calls[0][0] == ["reset-gpu", "0"]
    assert calls[0][1]["findings"][0]["rule"] == "ecc"


def test_only_chosen_rules_and_severity_trigger():
    clock, calls = FakeClock(), []
    rec = _recovery(clock, calls, rules=["ecc"])
    assert rec.consider(PCIE_WARN) is None
    assert rec.consider({"verdict": "pass", "findings": []}) is None
    warn_ecc = {"findings": [{**ECC_FAIL["findings"][0], "severity": "warn"}]}
    assert rec.consider(warn_ecc) is None  # min severity is fail
    rec_any = _recovery(clock, calls, rules=["any"], min_severity="warn")
    assert rec_any.consider(PCIE_WARN)["action"] == "ran"
    assert calls and calls[0][1]["findings"][0]["rule"] == "pcie"


def test_dry_run_logs_and_runs_nothing(tmp_path):
    clock, calls = FakeClock(), []
    log = tmp_path / "rec.jsonl"
    rec = _recovery(clock, calls, dry_run=True, log_path=log)
    assert rec.consider(ECC_FAIL)["action"] == "dry-run"
    assert rec.consider(ECC_FAIL)["action"] == "suppressed"  # the guards apply to dry runs too
    assert calls == []
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["action"] for x in lines] == ["dry-run", "suppressed"]
    assert lines[0]["argv"] == ["reset-gpu", "0"] and lines[0]["time"] == 1000.0


def test_real_action_exit_status_is_logged_and_no_shell_is_used(tmp_path):
    marker = tmp_path / "ran"
    # ";" and "$(...)" would mean something to a shell: here they are plain arguments
    argv = [sys.executable, "-c", "import sys,pathlib; pathlib.Path(sys.argv[1]).write_text(sys.argv[2]); sys.exit(4)",
            str(marker), "a;b $(x)"]  # fmt: skip
    rec = Recovery(RecoveryPolicy(argv=argv, log_path=tmp_path / "l.jsonl"), clock=FakeClock())
    entry = rec.consider(ECC_FAIL)
    assert entry["action"] == "ran" and entry["exit_status"] == 4
    assert marker.read_text() == "a;b $(x)"


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"argv": []}, "--recover-cmd"),
        ({"rules": ["bogus"]}, "--recover-on"),
        ({"min_severity": "info"}, "--recover-severity"),
        ({"cooldown_s": -1}, "--recover-cooldown"),
        ({"max_per_hour": 0}, "--recover-max-per-hour"),
    ],
)
def test_bad_policy_is_a_one_line_error(kw, match):
    args = {"argv": ["x"], **kw}
    with pytest.raises(AccelbenchError, match=match):
        Recovery(RecoveryPolicy(**args))
