"""Run a recovery action when chosen health rules fire, with guard rails.

The action is an argument list (never a shell), run by
:func:`accelbench.health.monitor.run_alert_command` with the event as JSON on stdin.
Guards: a cool-down after each action, a limit of actions in any 3600 s, and a dry-run
mode that logs what would run. Every decision that runs (or would run) the action, and the
first one suppressed after it, is appended to a JSONL log with the exit status.

The clock is injected (``clock=time.time`` by default) so the cool-down and hourly limit
are tested exactly with a fake clock.
"""

from __future__ import annotations

import json
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.health.monitor import run_alert_command
from accelbench.health.rules import SEVERITY_ORDER

HOUR_S = 3600.0
RULE_NAMES = ("temperature", "throttle", "ecc", "pcie", "interconnect", "memory_growth", "power")


@dataclass
class RecoveryPolicy:
    argv: list[str]
    rules: list[str] = field(default_factory=lambda: ["ecc"])
    min_severity: str = "fail"
    cooldown_s: float = 600.0
    max_per_hour: int = 3
    dry_run: bool = False
    log_path: Path | None = None
    timeout_s: float = 300.0

    def validate(self) -> None:
        if not self.argv:
            raise AccelbenchError("--recover-cmd is empty")
        unknown = [r for r in self.rules if r not in RULE_NAMES and r != "any"]
        if unknown:
            raise AccelbenchError(
                f"--recover-on: unknown rule(s) {', '.join(unknown)}; "
                f"choose from any, {', '.join(RULE_NAMES)}"
            )
        if self.min_severity not in ("warn", "fail"):
            raise AccelbenchError(
                f"--recover-severity must be warn or fail (got {self.min_severity})"
            )
        if self.cooldown_s < 0:
            raise AccelbenchError(f"--recover-cooldown must be >= 0 (got {self.cooldown_s})")
        if self.max_per_hour < 1:
            raise AccelbenchError(f"--recover-max-per-hour must be >= 1 (got {self.max_per_hour})")


Runner = Callable[[list[str], dict[str, Any], float], "int | None"]


class Recovery:
    """Decides, per health evaluation, whether to run the recovery action."""

    def __init__(
        self,
        policy: RecoveryPolicy,
        clock: Callable[[], float] = time.time,
        runner: Runner = run_alert_command,
    ) -> None:
        policy.validate()
        self.policy = policy
        self.clock = clock
        self.runner = runner
        self.actions: deque[float] = deque()  # times of actions in the last hour
        self.log: list[dict[str, Any]] = []
        self._suppressed_logged = False

    def matching(self, health: dict[str, Any]) -> list[dict[str, Any]]:
        floor = SEVERITY_ORDER[self.policy.min_severity]
        return [
            f
            for f in health.get("findings", [])
            if ("any" in self.policy.rules or f.get("rule") in self.policy.rules)
            and SEVERITY_ORDER.get(f.get("severity", ""), 0) >= floor
        ]

    def _blocked(self, now: float) -> str | None:
        while self.actions and now - self.actions[0] >= HOUR_S:
            self.actions.popleft()
        if self.actions and now - self.actions[-1] < self.policy.cooldown_s:
            left = self.policy.cooldown_s - (now - self.actions[-1])
            return f"cool-down ({left:.0f} s left)"
        if len(self.actions) >= self.policy.max_per_hour:
            return f"limit of {self.policy.max_per_hour} actions per hour reached"
        return None

    def consider(self, health: dict[str, Any]) -> dict[str, Any] | None:
        """Run (or dry-run) the action if a chosen rule fires and the guards allow it.
        Returns the log entry written, or None."""
        found = self.matching(health)
        if not found:
            return None
        now = self.clock()
        entry: dict[str, Any] = {
            "time": now,
            "host": socket.gethostname(),
            "argv": self.policy.argv,
            "rules": sorted({f["rule"] for f in found}),
            "findings": [f"{f['device']}: {f['message']}" for f in found],
        }
        reason = self._blocked(now)
        if reason is not None:
            if self._suppressed_logged:
                return None
            self._suppressed_logged = True
            entry.update(action="suppressed", reason=reason, exit_status=None)
            return self._write(entry)
        self._suppressed_logged = False
        self.actions.append(now)
        if self.policy.dry_run:
            entry.update(action="dry-run", exit_status=None)
        else:
            event = {"verdict": health.get("verdict"), "findings": found, "previous": None}
            status = self.runner(self.policy.argv, event, self.policy.timeout_s)
            entry.update(action="ran", exit_status=status)
        return self._write(entry)

    def _write(self, entry: dict[str, Any]) -> dict[str, Any]:
        self.log.append(entry)
        if self.policy.log_path is not None:
            with open(self.policy.log_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, default=str) + "\n")
        return entry
