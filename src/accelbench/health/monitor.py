"""``accelbench monitor``: a long-running sampler that evaluates the health rules over a
sliding window, alerts on state changes (pass / warn / fail) and feeds the exporter.

Alerts: a user command run with its arguments as a list (never through a shell), given
the event as JSON on stdin and ``ACCELBENCH_VERDICT`` / ``ACCELBENCH_PREVIOUS_VERDICT``
in its environment; and/or a JSON POST to a webhook.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from typing import Any

from accelbench.health.rules import HealthConfig, evaluate
from accelbench.telemetry.exporter import Exporter
from accelbench.telemetry.sampler import collect
from accelbench.telemetry.sources import Source

log = logging.getLogger(__name__)


def run_alert_command(
    argv: list[str], event: dict[str, Any], timeout_s: float = 30.0
) -> int | None:
    """Run ``argv`` (no shell) with the event on stdin; returns its exit status, or None
    when it could not be run or timed out."""
    env = dict(os.environ)
    env["ACCELBENCH_VERDICT"] = str(event.get("verdict"))
    env["ACCELBENCH_PREVIOUS_VERDICT"] = str(event.get("previous"))
    try:
        proc = subprocess.run(
            argv,
            input=json.dumps(event),
            text=True,
            env=env,
            timeout=timeout_s,
            capture_output=True,
            shell=False,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("alert command %s failed: %s", argv, exc)
        return None
    if proc.returncode != 0:
        log.warning("alert command %s exited %d: %s", argv, proc.returncode, proc.stderr.strip())
    return proc.returncode


def post_webhook(url: str, event: dict[str, Any], timeout_s: float = 10.0) -> int | None:
    """POST the event as JSON; returns the HTTP status or None on failure."""
    req = urllib.request.Request(
        url,
        data=json.dumps(event).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        log.warning("webhook %s answered %s", url, exc.code)
        return int(exc.code)
    except (OSError, ValueError) as exc:
        log.warning("webhook %s failed: %s", url, exc)
        return None


class Monitor:
    """Samples ``sources`` every ``interval_s``; see the module docstring."""

    def __init__(
        self,
        sources: list[Source],
        interval_s: float = 1.0,
        window_s: float = 300.0,
        config: HealthConfig | None = None,
        alert_cmd: list[str] | None = None,
        webhook: str | None = None,
        exporter: Exporter | None = None,
        on_tick: Callable[[list[dict[str, Any]], dict[str, Any]], None] | None = None,
    ) -> None:
        self.sources = sources
        self.interval_s = interval_s
        self.window_s = window_s
        self.config = config or HealthConfig()
        self.alert_cmd = alert_cmd
        self.webhook = webhook
        self.exporter = exporter
        self.on_tick = on_tick
        self.verdict: str | None = None
        self.health: dict[str, Any] | None = None
        self.baseline: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.errors: dict[str, dict[str, Any]] = {}
        self._window: deque[dict[str, Any]] = deque()

    def tick(self) -> dict[str, Any]:
        """One sample, one evaluation, alerts if the verdict changed. Returns the health."""
        rows = collect(self.sources, None, self.errors)
        if not self.baseline:
            self.baseline = rows
        self._window.extend(rows)
        if rows:
            horizon = rows[0]["t_ns"] - int(self.window_s * 1e9)
            while self._window and self._window[0]["t_ns"] < horizon:
                self._window.popleft()
        health = evaluate(list(self._window), None, self.baseline, self.config)
        self.health = health
        if self.exporter is not None:
            self.exporter.update(rows, health)
        previous = self.verdict
        self.verdict = health["verdict"]
        if (previous is None and self.verdict != "pass") or (
            previous is not None and previous != self.verdict
        ):
            self._alert(previous, health)
        if self.on_tick is not None:
            self.on_tick(rows, health)
        return health

    def _alert(self, previous: str | None, health: dict[str, Any]) -> None:
        event = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": socket.gethostname(),
            "previous": previous,
            "verdict": health["verdict"],
            "findings": health["findings"],
        }
        self.events.append(event)
        if self.alert_cmd:
            run_alert_command(self.alert_cmd, event)
        if self.webhook:
            post_webhook(self.webhook, event)

    def run(self, stop: threading.Event | None = None, iterations: int | None = None) -> None:
        """Tick until ``stop`` is set or ``iterations`` ticks were done."""
        stop = stop or threading.Event()
        start = time.monotonic()
        k = 0
        while not stop.is_set():
            self.tick()
            k += 1
            if iterations is not None and k >= iterations:
                break
            delay = start + k * self.interval_s - time.monotonic()
            stop.wait(max(delay, 0.0))
