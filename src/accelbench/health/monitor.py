"""``accelbench monitor``: a long-running sampler that evaluates the health rules over a
sliding window, alerts on state changes (pass / warn / fail / unknown) and feeds the
exporter.

The window is kept per device between ticks (:class:`~accelbench.health.window.RollingWindow`),
so a tick costs the new rows plus a few numpy operations per device, not a pass over the
whole window. Unknown is never healthy: a tick with no samples, a source that raised or
returned nothing, a GPU missing from the latest sample, or a GPU without temperature or
memory-error counters makes the verdict ``unknown`` (unless a rule fails), with the
reasons in ``health["unknown"]`` and each source's state in ``health["sources"]``.

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
from collections.abc import Callable
from typing import Any

from accelbench import lifetime
from accelbench.health.rules import HealthConfig, mark_unknown
from accelbench.health.window import RollingWindow
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
        proc = lifetime.run(argv, input=json.dumps(event), env=env, timeout_s=timeout_s)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("alert command %s failed: %s", argv, exc)
        return None
    if proc.returncode != 0:
        log.warning("alert command %s exited %d: %s", argv, proc.returncode, proc.stderr.strip())
    return proc.returncode


def post_webhook(url: str, event: dict[str, Any], timeout_s: float = 10.0) -> int | None:
    """POST the event as JSON; returns the HTTP status or None on failure. Credentials
    in the URL go as Basic auth and are never logged."""
    from accelbench.client.session import redact_url, split_credentials

    shown = redact_url(url)
    url, auth = split_credentials(url)
    req = urllib.request.Request(
        url,
        data=json.dumps(event).encode(),
        headers={"Content-Type": "application/json"} | ({"Authorization": auth} if auth else {}),
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        log.warning("webhook %s answered %s", shown, exc.code)
        return int(exc.code)
    except (OSError, ValueError) as exc:
        log.warning("webhook %s failed: %s", shown, exc)
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
        self.check(interval_s, window_s, config)
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
        self.events: list[dict[str, Any]] = []
        self.errors: dict[str, dict[str, Any]] = {}
        self.window = RollingWindow(window_s, self.config)

    @staticmethod
    def check(interval_s: float, window_s: float, config: HealthConfig | None = None) -> None:
        """One line on an interval, window or threshold no monitor can use."""
        from accelbench import validate as v

        # 1 ms here, for scripted sources and tests; the CLI's --interval starts at 50 ms,
        # below which real samplers dominate (docs/LIMITS.md)
        v.number("--interval", interval_s, 0.001, 86400.0, unit="s")
        v.number("--window", window_s, 0, 30 * 86400.0, unit="s")  # 0: each sample alone
        (config or HealthConfig()).validate()

    @property
    def baseline(self) -> list[dict[str, Any]]:
        """The first non-empty sample: the start of counter deltas (ECC, replays)."""
        return self.window.baseline

    def sample(self) -> tuple[int, list[dict[str, Any]], dict[str, str]]:
        """One sample of every source, all rows stamped with one time. Returns (time,
        rows, each source's state: ``ok`` or why it gave nothing)."""
        t_ns = time.monotonic_ns()
        rows: list[dict[str, Any]] = []
        state: dict[str, str] = {}
        for src in self.sources:
            failed = self.errors.get(src.name, {}).get("count", 0)
            got = collect([src], None, self.errors)
            err = self.errors.get(src.name)
            if err is not None and err["count"] > failed:
                state[src.name] = f"stopped answering ({err['last']})"
            elif not got:
                state[src.name] = "returned no samples"
            else:
                state[src.name] = "ok"
            for r in got:
                r["t_ns"] = t_ns
            rows.extend(got)
        return t_ns, rows, state

    def tick(self) -> dict[str, Any]:
        """One sample, one evaluation, alerts if the verdict changed. Returns the health."""
        t_ns, rows, state = self.sample()
        self.window.add(rows, t_ns)
        health = self.window.evaluate()
        reasons = []
        if not rows:
            reasons.append("no samples in the latest tick: no source answered")
        reasons += [f"source {name} {st}" for name, st in state.items() if st != "ok"]
        if rows:
            reasons += self.window.absent(rows)
        reasons += self.window.missing_signals()
        mark_unknown(health, reasons)
        health["sources"] = state
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
            "unknown": health.get("unknown", []),
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
