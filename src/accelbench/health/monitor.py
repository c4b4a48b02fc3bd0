"""``accelbench monitor``: a long-running sampler that evaluates the health rules over a
sliding window, alerts on state changes (pass / warn / fail / unknown) and feeds the
exporter.

The window is kept per device between ticks (:class:`~accelbench.health.window.RollingWindow`),
so a tick costs the new rows plus a few numpy operations per device, not a pass over the
whole window. Unknown is never healthy: a tick with no samples, a source that raised or
returned nothing, data a source's latest sample lost (a replayed capture cut short: a
``data lost`` reason, as ``health --file`` gives), a GPU missing from the latest sample,
or a GPU without temperature or memory-error counters makes the verdict ``unknown``
(unless a rule fails), with the reasons in ``health["unknown"]`` and each source's state
in ``health["sources"]``.

Alerts: a user command run with its arguments as a list (never through a shell), given
the event as JSON on stdin and ``ACCELBENCH_VERDICT`` / ``ACCELBENCH_PREVIOUS_VERDICT``
in its environment; and/or a JSON POST to a webhook. Both run off the sampling path, in
one :class:`Dispatcher` thread (a hung pager must not stop sampling): its queue holds at
most ``Dispatcher.MAX_PENDING`` actions (more are dropped and counted), each command has
its own timeout, and when the monitor stops, pending actions get ``drain_s`` to finish
before their commands are stopped (process group: SIGTERM, then SIGKILL) and the rest
dropped (docs/TELEMETRY.md, "Alerts").
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import TypedDict

from accelbench import lifetime
from accelbench.health.rules import Finding, Health, HealthConfig, lost_reasons, mark_unknown
from accelbench.health.window import RollingWindow
from accelbench.telemetry.exporter import Exporter
from accelbench.telemetry.sampler import SourceErrors, collect
from accelbench.telemetry.schema import Row
from accelbench.telemetry.sources import Source
from accelbench.urls import Endpoint

log = logging.getLogger(__name__)


class AlertEvent(TypedDict):
    """What an alert carries (JSON on the command's stdin, the webhook's body)."""

    time: str
    host: str
    previous: str | None
    verdict: str
    findings: list[Finding]
    unknown: list[str]


def run_alert_command(
    argv: list[str],
    event: Mapping[str, object],
    timeout_s: float = 30.0,
    children: set[lifetime.Child] | None = None,
) -> int | None:
    """Run ``argv`` (no shell) with the event on stdin; returns its exit status, or None
    when it could not be run or timed out (its process group is then killed). While it
    runs, its :class:`~accelbench.lifetime.Child` is in ``children``, so a stopping
    monitor can end it."""
    env = dict(os.environ)
    env["ACCELBENCH_VERDICT"] = str(event.get("verdict"))
    env["ACCELBENCH_PREVIOUS_VERDICT"] = str(event.get("previous"))
    try:
        child = lifetime.spawn(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, text=True,
        )  # fmt: skip
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        log.warning("alert command %s failed: %s", argv, exc)
        return None
    if children is not None:
        children.add(child)
    try:
        _out, err = child.popen.communicate(json.dumps(event), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        log.warning("alert command %s timed out after %g s: killed", argv, timeout_s)
        return None
    except (OSError, ValueError) as exc:  # stopped under us: its pipes closed
        log.warning("alert command %s failed: %s", argv, exc)
        return None
    finally:
        child.stop(grace_s=0)
        if children is not None:
            children.discard(child)
    rc = child.popen.returncode
    if rc != 0:
        log.warning("alert command %s exited %d: %s", argv, rc, (err or "").strip()[:500])
    return rc


def _deadline_opener(socks: list[socket.socket]) -> urllib.request.OpenerDirector:
    """urllib's opener (proxies from the environment and all), whose HTTP(S)
    connections put their socket in ``socks`` once connected, for a watchdog to shut."""
    import http.client

    class _Http(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            socks.append(self.sock)

    class _Https(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            socks.append(self.sock)

    class _HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(_Http, req)

    class _HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(_Https, req)

    return urllib.request.build_opener(_HttpHandler, _HttpsHandler)


def post_webhook(
    url: str | Endpoint, event: Mapping[str, object], timeout_s: float = 10.0
) -> int | None:
    """POST the event as JSON; returns the HTTP status or None on failure. Credentials
    in the URL go as Basic auth and are never logged. The whole exchange has
    ``timeout_s``: urllib's timeout bounds each read only, so a webhook that sent its
    answer's head a byte at a time held the one alert thread (every later alert, command
    and recovery queued behind it) for ever; past the deadline its socket is shut."""
    import http.client

    hook = Endpoint.parse(url)
    shown = hook.display
    req = urllib.request.Request(
        hook.url,
        data=json.dumps(event).encode(),
        headers={"Content-Type": "application/json"} | hook.headers(),
        method="POST",
    )
    socks: list[socket.socket] = []
    expired = threading.Event()

    def shut() -> None:
        expired.set()
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(timeout_s, shut)
    watchdog.daemon = True
    watchdog.start()
    try:
        with _deadline_opener(socks).open(req, timeout=timeout_s) as resp:
            status = int(resp.status)
        if expired.is_set():  # a head cut by the shut socket reads as whole: it was not
            raise TimeoutError
        return status
    except urllib.error.HTTPError as exc:
        log.warning("webhook %s answered %s", shown, exc.code)
        return int(exc.code)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        why = f"no answer within {timeout_s:g} s" if expired.is_set() else str(exc)
        log.warning("webhook %s failed: %s", shown, why)
        return None
    finally:
        watchdog.cancel()


class Dispatcher:
    """Runs alert actions one at a time in a worker thread, off the sampling path.

    ``submit`` never blocks: past ``MAX_PENDING`` queued actions the new one is dropped
    (counted in ``dropped``, logged). ``drain(timeout_s)`` waits for the queue to empty;
    past the timeout, running commands are stopped (their whole process group) and the
    queued actions dropped, so stopping the monitor takes at most about ``timeout_s``.
    The worker is started on the first ``submit`` and again after a ``drain``."""

    MAX_PENDING = 64

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self.q: queue.Queue[Callable[[], object] | None] = queue.Queue(max_pending)
        self.children: set[lifetime.Child] = set()  # alert commands running now
        self.dropped = 0
        self.done = 0
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], object], what: str = "alert") -> bool:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._cancel.clear()
                self._thread = threading.Thread(
                    target=self._loop, name="accelbench-alerts", daemon=True
                )
                self._thread.start()
        try:
            self.q.put_nowait(job)
        except queue.Full:
            self.dropped += 1
            log.warning("%s dropped: %d actions already waiting", what, self.q.maxsize)
            return False
        return True

    def _loop(self) -> None:
        while True:
            job = self.q.get()
            try:
                if job is None:
                    return
                if self._cancel.is_set():
                    self.dropped += 1
                    continue
                job()
                self.done += 1
            except Exception as exc:  # noqa: BLE001 - an alert never stops the monitor
                log.warning("alert action failed: %s: %s", type(exc).__name__, exc)
            finally:
                self.q.task_done()

    def pending(self) -> int:
        return self.q.unfinished_tasks

    def drain(self, timeout_s: float = 1.0) -> bool:
        """Wait up to ``timeout_s`` for every queued action; then stop what still runs and
        drop the rest, and end the worker. True when everything finished in time."""
        thread = self._thread
        if thread is None:
            return True
        deadline = time.monotonic() + timeout_s
        while self.q.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        clean = not self.q.unfinished_tasks
        if not clean:
            self._cancel.set()
            while True:  # what never started is dropped
                try:
                    self.q.get_nowait()
                except queue.Empty:
                    break
                self.dropped += 1
                self.q.task_done()
            for child in list(self.children):
                child.stop(grace_s=0.5)
        with contextlib.suppress(queue.Full):
            self.q.put_nowait(None)
        # a job dequeued before the stop may start its command while the stop above ran
        # (between its spawn and its entry in ``children``): stop what appears until the
        # worker ends; a webhook in its own timeout is abandoned (daemon) after 0.5 s
        end = time.monotonic() + 0.5
        while True:
            thread.join(timeout=0.02)
            if not clean:
                for child in list(self.children):
                    child.stop(grace_s=0)
            if not thread.is_alive() or time.monotonic() >= end:
                break
        with self._lock:
            self._thread = None
        return clean


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
        on_tick: Callable[[list[Row], Health], None] | None = None,
        alert_timeout_s: float = 30.0,
        drain_s: float = 1.0,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        wait: Callable[[threading.Event, float], object] | None = None,
    ) -> None:
        """``clock_ns`` stamps the samples and schedules the ticks, ``wait(stop, s)``
        waits between ticks (default ``stop.wait(s)``): a test gives a simulated clock and
        a wait that advances it, and hours of monitoring run at once."""
        self.check(interval_s, window_s, config)
        from accelbench import validate as v

        if alert_cmd is not None and not alert_cmd:
            raise v.UsageError("--alert-cmd is empty; give a command")
        if webhook is not None:
            from accelbench.validate import check_url

            check_url(webhook, "--webhook")
        v.number("alert timeout", alert_timeout_s, 0, 86400.0, lo_open=True, unit="s")
        v.number("alert drain time", drain_s, 0, 3600.0, unit="s")
        self.alert_timeout_s = alert_timeout_s
        self.drain_s = drain_s  # on stop: what pending alerts get before they are ended
        self.dispatcher = Dispatcher()
        self.sources = sources
        self.interval_s = interval_s
        self.window_s = window_s
        self.config = config or HealthConfig()
        self.alert_cmd = alert_cmd
        self.webhook = webhook
        self.exporter = exporter
        self.on_tick = on_tick
        self.verdict: str | None = None
        self.health: Health | None = None
        self.events: list[AlertEvent] = []
        self.errors: dict[str, SourceErrors] = {}
        self.window = RollingWindow(window_s, self.config)
        self.clock_ns = clock_ns
        self.wait = wait or (lambda stop, s: stop.wait(s))

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
    def baseline(self) -> list[Row]:
        """The first non-empty sample: the start of counter deltas (ECC, replays)."""
        return self.window.baseline

    def sample(self) -> tuple[int, list[Row], dict[str, str]]:
        """One sample of every source, all rows stamped with one time. Returns (time,
        rows, each source's state: ``ok`` or why it gave nothing)."""
        t_ns = self.clock_ns()
        rows: list[Row] = []
        state: dict[str, str] = {}
        for src in self.sources:
            failed = self.errors[src.name]["count"] if src.name in self.errors else 0
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

    def tick(self) -> Health:
        """One sample, one evaluation, alerts if the verdict changed. Returns the health."""
        t_ns, rows, state = self.sample()
        self.window.add(rows, t_ns)
        health = self.window.evaluate()
        reasons = []
        if not rows:
            reasons.append("no samples in the latest tick: no source answered")
        reasons += [f"source {name} {st}" for name, st in state.items() if st != "ok"]
        reasons += lost_reasons([x for src in self.sources for x in src.lost()])
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

    def _alert(self, previous: str | None, health: Health) -> None:
        event: AlertEvent = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": socket.gethostname(),
            "previous": previous,
            "verdict": health["verdict"],
            "findings": health["findings"],
            "unknown": health.get("unknown", []),
        }
        self.events.append(event)
        argv, url, timeout_s = self.alert_cmd, self.webhook, self.alert_timeout_s
        children = self.dispatcher.children
        if argv:
            self.dispatcher.submit(
                lambda: run_alert_command(argv, event, timeout_s, children), "alert command"
            )
        if url:
            self.dispatcher.submit(lambda: post_webhook(url, event), "webhook")

    def run(self, stop: threading.Event | None = None, iterations: int | None = None) -> None:
        """Tick until ``stop`` is set or ``iterations`` ticks were done; then
        :meth:`close` (pending alerts finish or are ended)."""
        stop = stop or threading.Event()
        start = self.clock_ns()
        k = 0
        try:
            while not stop.is_set():
                self.tick()
                k += 1
                if iterations is not None and k >= iterations:
                    break
                delay = (start - self.clock_ns()) / 1e9 + k * self.interval_s
                self.wait(stop, max(delay, 0.0))
        finally:
            self.close()

    def close(self) -> None:
        """Let pending alerts finish for up to ``drain_s``, then end them."""
        if not self.dispatcher.drain(self.drain_s):
            log.warning("monitor stopped: alert actions still pending were ended")
