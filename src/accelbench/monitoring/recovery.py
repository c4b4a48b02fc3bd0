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
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Required, TypedDict

from accelbench.errors import UsageError
from accelbench.health.monitor import Dispatcher, run_alert_command
from accelbench.health.rules import SEVERITY_ORDER, Finding, Health

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
    inputs: list[Path] = field(default_factory=list)  # files the monitor reads (--replay)

    def validate(self) -> None:
        """Every field checked before the monitor starts (a bad --recover-log used to
        surface only when the first recovery fired, and a NaN cool-down meant none)."""
        from accelbench import validate as v

        if not self.argv:
            raise UsageError("--recover-cmd is empty; give a command")
        unknown = [r for r in self.rules if r not in RULE_NAMES and r != "any"]
        if unknown or not self.rules:
            raise UsageError(
                f"--recover-on: unknown rule(s) {', '.join(map(repr, unknown)) or '(none given)'}; "
                f"choose from any, {', '.join(RULE_NAMES)}"
            )
        v.choice("--recover-severity", self.min_severity, ("warn", "fail"))
        v.number("--recover-cooldown", self.cooldown_s, 0, 30 * 86400.0, unit="s")
        v.integer("--recover-max-per-hour", self.max_per_hour, 1, 3600)
        v.number("--recover-timeout", self.timeout_s, 0, 86400.0, lo_open=True, unit="s")
        if self.log_path is not None:
            v.output_file("--recover-log", self.log_path, self.inputs, mkdir=False)


class RecoveryEntry(TypedDict, total=False):
    """One line of the recovery log (``--recover-log``, JSON Lines)."""

    time: Required[float]
    host: Required[str]
    argv: Required[list[str]]
    rules: Required[list[str]]
    findings: Required[list[str]]  # "device: message" of each finding that matched
    action: str  # suppressed | dry-run | ran | started
    reason: str  # why suppressed
    exit_status: int | None


class RecoveryEvent(TypedDict):
    """What the recovery command gets on stdin."""

    verdict: str
    findings: list[Finding]
    previous: None


Runner = Callable[[list[str], RecoveryEvent, float], "int | None"]


class Recovery:
    """Decides, per health evaluation, whether to run the recovery action."""

    def __init__(
        self,
        policy: RecoveryPolicy,
        clock: Callable[[], float] = time.time,
        runner: Runner | None = None,
        dispatcher: Dispatcher | None = None,
        on_done: Callable[[RecoveryEntry], None] | None = None,
    ) -> None:
        policy.validate()
        self.policy = policy
        self.clock = clock
        self.dispatcher = dispatcher
        self.on_done = on_done
        if runner is None:  # stoppable by the dispatcher when the monitor stops
            children = dispatcher.children if dispatcher is not None else None

            def runner(argv: list[str], event: RecoveryEvent, timeout_s: float) -> int | None:
                return run_alert_command(argv, event, timeout_s, children)

        self.runner = runner
        self.actions: deque[float] = deque()  # times of actions in the last hour
        self.log: list[RecoveryEntry] = []
        self._suppressed_logged = False
        self._lock = threading.Lock()

    def matching(self, health: Health) -> list[Finding]:
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

    def consider(self, health: Health) -> RecoveryEntry | None:
        """Run (or dry-run) the action if a chosen rule fires and the guards allow it.
        Returns the log entry written, or None. With a ``dispatcher`` the action runs off
        the sampling path: the entry returned says ``started``, and the ``ran`` entry with
        the exit status is logged (and given to ``on_done``) when it ends."""
        found = self.matching(health)
        if not found:
            return None
        now = self.clock()
        entry: RecoveryEntry = {
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
            entry.update({"action": "suppressed", "reason": reason, "exit_status": None})
            return self._write(entry)
        self._suppressed_logged = False
        self.actions.append(now)
        if self.policy.dry_run:
            entry.update({"action": "dry-run", "exit_status": None})
            return self._write(entry)
        event: RecoveryEvent = {"verdict": health["verdict"], "findings": found, "previous": None}
        if self.dispatcher is None:
            status = self.runner(self.policy.argv, event, self.policy.timeout_s)
            entry.update({"action": "ran", "exit_status": status})
            return self._write(entry)

        def job() -> None:  # off the sampling path; logged when it ends
            status = self.runner(self.policy.argv, event, self.policy.timeout_s)
            entry.update({"action": "ran", "exit_status": status})
            self._write(entry)
            if self.on_done is not None:
                self.on_done(entry)

        if not self.dispatcher.submit(job, "recovery action"):
            entry.update(
                {"action": "suppressed", "reason": "alert queue full", "exit_status": None}
            )
            return self._write(entry)
        return {**entry, "action": "started", "exit_status": None}

    def _write(self, entry: RecoveryEntry) -> RecoveryEntry:
        with self._lock:  # the sampling thread and the dispatcher's both write
            self.log.append(entry)
            if self.policy.log_path is not None:
                self.policy.log_path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.policy.log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry, default=str) + "\n")
        return entry
