"""One lifetime rule for every process accelbench starts: it stops when accelbench stops,
whichever way accelbench stops (docs/PROCESSES.md).

- Child programs (engines, build steps, telemetry and alert helpers) start through
  :func:`spawn`: own session and process group, and on Linux a parent-death signal set
  in the child before it execs, so a SIGKILL of accelbench still ends them.
  :meth:`Child.stop` asks the whole group to stop (SIGTERM), waits a grace period,
  then SIGKILLs the group and reaps the leader. :func:`run` is ``subprocess.run`` for
  short helpers, killed on timeout or on any exception. :func:`guard` starts a small
  watcher that ends a group, listed processes or all descendants once accelbench has
  died (what the parent-death signal cannot reach: a group's other members, daemons a
  library started).
- Python children (load workers) call :func:`die_with_parent` first thing: the
  parent-death signal plus a watchdog thread that exits when the parent pid changes
  (the parent-death signal follows the *thread* that forked the child, and is not
  there on other systems).
- The CLI turns SIGTERM and SIGHUP into the same KeyboardInterrupt as Ctrl-C
  (:func:`interrupt_on_termination`), so every ``finally`` that stops a child runs.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import asyncio

_PR_SET_PDEATHSIG = 1
_LINUX = sys.platform.startswith("linux")
_prctl: Any = None
if _LINUX:  # resolved once here: the child between fork and exec only makes the call
    with contextlib.suppress(OSError, AttributeError):
        _prctl = ctypes.CDLL(None, use_errno=True).prctl

# the signals that stop accelbench in an orderly way (Ctrl-C, kill/systemd/containers,
# a closed terminal)
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Linux: ask the kernel to send ``sig`` to this process when the thread that
    created it exits (no-op elsewhere)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def die_with_parent(parent_pid: int, *, watchdog_s: float | None = 0.2) -> Callable[[], bool]:
    """For a Python child: die when ``parent_pid`` dies. Sets the parent-death signal
    (SIGKILL) and, unless ``watchdog_s`` is None, starts a daemon thread that calls
    ``os._exit(1)`` within ``watchdog_s`` once the parent pid changes (a dead parent's
    children are re-parented). Returns the check itself; exits at once if the parent
    already died."""
    set_parent_death_signal(signal.SIGKILL)

    def parent_alive() -> bool:
        return os.getppid() == parent_pid

    if not parent_alive():
        os._exit(1)
    if watchdog_s is not None:

        def watch() -> None:
            while parent_alive():
                time.sleep(watchdog_s)
            os._exit(1)

        threading.Thread(target=watch, name="accelbench-parent-watch", daemon=True).start()
    return parent_alive


def reap_resource_tracker_at_exit() -> None:
    """multiprocessing's resource tracker exits when the last holder of its pipe closes
    it, which is this process at exit: it would end just *after* accelbench, orphaned.
    Close the pipe and wait for it as the very last exit step (after the finalizers that
    unregister the semaphores it tracks). Private API, so best effort."""
    from multiprocessing import resource_tracker, util

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    stop = getattr(tracker, "_stop", None)
    if stop is not None and not getattr(reap_resource_tracker_at_exit, "armed", False):
        reap_resource_tracker_at_exit.armed = True  # type: ignore[attr-defined]

        def reap() -> None:
            with contextlib.suppress(Exception):
                stop()

        util.Finalize(None, reap, exitpriority=-100)


def _child_setup(death_signal: int, parent_pid: int) -> Callable[[], None]:
    def setup() -> None:  # runs in the child between fork and exec: one call, no locks
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before the call above
            os._exit(1)

    return setup


_spawner: concurrent.futures.ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def _in_long_lived_thread(fn: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """The parent-death signal fires when the *thread* that forked the child exits: fork
    from the main thread, or from one spawner thread that lives as long as the process."""
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return fn()
    with _spawner_lock:
        if _spawner is None:
            _spawner = concurrent.futures.ThreadPoolExecutor(1, "accelbench-spawner")
    return _spawner.submit(fn).result()


# The guard: a small process that ends a child's whole group, and/or listed processes,
# once accelbench dies (the parent-death signal reaches only the group leader; an
# engine's own worker processes, or the daemons a library started, would survive it).
# Polls, so it needs nothing set up between fork and exec. argv: pgid (0: none), parent
# pid, grace (s), "track" or "list", then PID:STARTTIME of each listed process (/proc
# starttime: a reused pid is not someone else's process to kill). "track" re-lists all
# the parent's descendants at every poll, so processes started later are covered too.
_GUARD = """
import os, signal, sys, time
pgid, parent, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
track = sys.argv[4] == "track"
listed = [tuple(map(int, a.split(":"))) for a in sys.argv[5:]]
for s in (signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
def stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()
def start_time(pid):
    try:
        return int(stat(pid)[19])
    except (OSError, ValueError, IndexError):
        return None
def descendants():
    kids = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                f = stat(int(e))
                kids.setdefault(int(f[1]), []).append((int(e), int(f[19])))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [parent]
    while todo:
        for p, t in kids.get(todo.pop(), []):
            if p != os.getpid():
                out.append((p, t))
                todo.append(p)
    return out
def alive():
    procs = [p for p, t in listed if start_time(p) == t]
    if pgid:
        try:
            os.killpg(pgid, 0)
            return True, procs
        except OSError:
            pass
    return False, procs
def send(sig):
    group, procs = alive()
    if group:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    for p in procs:
        try:
            os.kill(p, sig)
        except OSError:
            pass
while os.getppid() == parent:
    if track:
        # keep what was seen and still runs: a poll taken while the parent is dying can
        # find its children already gone and their children moved to another parent
        seen = [(p, t) for p, t in listed if start_time(p) == t]
        listed = list(dict.fromkeys(seen + descendants()))
    else:
        group, procs = alive()
        if not group and not procs:
            sys.exit(0)
    time.sleep(0.2)
send(signal.SIGTERM)
deadline = time.monotonic() + grace
while any(alive()) and time.monotonic() < deadline:
    time.sleep(0.05)
send(signal.SIGKILL)
"""


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def descendants(pid: int | None = None) -> list[int]:
    """The pids of every descendant of ``pid`` (default: this process), from /proc."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def guard(
    pids: Sequence[int] = (),
    *,
    pgid: int = 0,
    grace_s: float = 5.0,
    all_descendants: bool = False,
) -> subprocess.Popen:
    """Start a guard that, once this process dies (any way, SIGKILL included), sends
    SIGTERM to process group ``pgid`` and to ``pids`` (those still the same processes),
    or with ``all_descendants`` to every process that was a descendant of this one at
    any poll (every 0.2 s) and still runs, reparented or not; waits ``grace_s`` and
    SIGKILLs what is left. Without ``all_descendants`` it exits by itself once they all
    have. Kill and reap it (``Child.stop`` does) when
    they are stopped in order."""
    listed = [f"{p}:{t}" for p in pids if (t := _start_time(p)) is not None]
    mode = "track" if all_descendants else "list"
    argv = [
        sys.executable,
        "-I",
        "-S",
        "-c",
        _GUARD,
        str(pgid),
        str(os.getpid()),
        str(grace_s),
        mode,
    ]
    return _in_long_lived_thread(
        lambda: subprocess.Popen([*argv, *listed], stdin=subprocess.DEVNULL)
    )


class Child:
    """A child program in its own process group; :meth:`stop` ends the whole group."""

    def __init__(
        self,
        popen: subprocess.Popen,
        log_path: Path | None = None,
        guard: subprocess.Popen | None = None,
    ) -> None:
        self.popen = popen
        self.log_path = log_path
        self.guard = guard

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.popen.wait(timeout)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # the group id went to someone else's process
            return False
        return True

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM the group, wait up to ``grace_s`` for the leader and every other member
        to exit, SIGKILL what is left, reap the leader. Idempotent; signals that would
        interrupt it (Ctrl-C, SIGTERM, SIGHUP) are held until it is done."""
        with deferred_stop_signals():
            self.popen.poll()
            if self.popen.returncode is None or self._group_alive():
                self._signal_group(signal.SIGTERM)
                deadline = time.monotonic() + grace_s
                while time.monotonic() < deadline:
                    if self.popen.poll() is not None and not self._group_alive():
                        break
                    time.sleep(0.02)
                self._signal_group(signal.SIGKILL)
            self.popen.wait()
            if self.guard is not None:  # its group is gone: it has nothing left to do
                if self.guard.poll() is None:
                    self.guard.kill()
                self.guard.wait()
            for f in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()
        return self.popen.returncode

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def spawn(
    argv: Sequence[str],
    *,
    log_path: Path | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    death_signal: int = signal.SIGKILL,
    text: bool = False,
    errors: str | None = None,
    pass_fds: Sequence[int] = (),
    guard_grace_s: float | None = None,
) -> Child:
    """Start ``argv`` under the lifetime rule: own session and process group, and on
    Linux ``death_signal`` sent to it when accelbench dies (SIGKILL by default; an
    engine that must clean up its own children may ask for SIGTERM). With
    ``guard_grace_s`` a guard process also ends the whole group within 0.2 s of
    accelbench's death (SIGTERM, that grace, SIGKILL): for programs that start their own
    processes. With ``log_path`` stdout and stderr go to that file (appended); else to
    ``stdout``/``stderr`` (decoded with ``text``, ``errors`` as for ``open``).
    ``pass_fds`` stay open in the child (a socket to talk to it)."""
    setup = _child_setup(int(death_signal), os.getpid())

    def start() -> subprocess.Popen:
        if log_path is not None:
            with open(log_path, "ab") as logf:  # the child keeps its own descriptor
                return subprocess.Popen(
                    list(argv), stdin=stdin, stdout=logf, stderr=subprocess.STDOUT, env=env,
                    cwd=cwd, start_new_session=True, preexec_fn=setup, pass_fds=pass_fds,
                )  # fmt: skip
        return subprocess.Popen(
            list(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd,
            start_new_session=True, preexec_fn=setup, text=text, errors=errors,
            pass_fds=pass_fds,
        )  # fmt: skip

    popen = _in_long_lived_thread(start)
    guard_proc = None
    if guard_grace_s is not None:
        try:
            guard_proc = guard(pgid=popen.pid, grace_s=guard_grace_s)
        except BaseException:
            Child(popen, log_path).stop(grace_s=0)
            raise
    return Child(popen, log_path, guard_proc)


def run(
    argv: Sequence[str],
    *,
    timeout_s: float,
    input: str | None = None,
    env: dict[str, str] | None = None,
    errors: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=...)`` under the
    lifetime rule: the helper's group is killed on timeout and on any exception
    (including Ctrl-C); raises ``subprocess.TimeoutExpired`` on timeout, ``OSError``
    when ``argv`` cannot start. ``errors="replace"`` reads output that is not UTF-8."""
    child = spawn(
        argv,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        errors=errors,
    )
    try:
        out, err = child.popen.communicate(input, timeout=timeout_s)
    except BaseException:
        child.stop(grace_s=0)
        raise
    child.stop(grace_s=0)  # a member left behind by a helper that forked
    return subprocess.CompletedProcess(list(argv), child.popen.returncode, out, err)


@contextlib.contextmanager
def deferred_stop_signals() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP while a cleanup runs (main thread only: other
    threads never receive Python's signal handlers); they are delivered afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


# every stop signal noted_stops has noted in this process (names): a step compares the
# count before and after an inner step that noted a stop and went on to its end
_stops_noted: list[str] = []
_on_stop: list[Callable[[str], None] | None] = []  # the innermost noted_stops' callback


def stops_noted() -> int:
    """How many stop signals :func:`noted_stops` has noted in this process so far. A
    step that runs another compares it before and after: a sweep learns that its point's
    run was asked to stop while it finished its files (the run completed all the same)."""
    return len(_stops_noted)


def _note_stop(signum: int, frame: Any) -> None:
    name = signal.Signals(signum).name
    _stops_noted.append(name)
    if _on_stop and (on_stop := _on_stop[-1]) is not None:
        on_stop(name)


def _swap_stop_handlers(handlers: dict[signal.Signals, Any]) -> dict[signal.Signals, Any]:
    """Install ``handlers`` with the stop signals blocked meanwhile (one that comes then
    is delivered to the new handler, never to none); return the ones replaced."""
    with deferred_stop_signals():
        old = {s: signal.getsignal(s) for s in handlers}
        for s, h in handlers.items():
            if h is not None:  # None: a handler not set from Python, left as it is
                signal.signal(s, h)
    return old


@contextlib.contextmanager
def noted_stops(on_stop: Callable[[str], None] | None = None) -> Iterator[None]:
    """While inside (main thread; elsewhere nothing changes): SIGINT, SIGTERM and SIGHUP
    raise no KeyboardInterrupt; each is noted (:func:`stops_noted`) and ``on_stop(name)``
    is called (from the main thread, between two statements), so that what runs inside
    is never cut short: a run's load (``on_stop`` asks the workers to finish, a second
    stop kills them) and the writing of its files (a stop there used to leave run.json
    ``running`` without its summary, exit 130). Nested, the innermost ``on_stop`` is
    called. The handlers in place before come back on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _on_stop.append(on_stop)
    old = _swap_stop_handlers(dict.fromkeys(STOP_SIGNALS, _note_stop))
    try:
        yield
    finally:
        with deferred_stop_signals():
            _swap_stop_handlers(old)
            _on_stop.pop()


@contextlib.contextmanager
def raised_stops() -> Iterator[None]:
    """Inside :func:`noted_stops`: the stop signals raise KeyboardInterrupt again (as
    :func:`interrupt_on_termination` makes them), for a step that a stop must cut short
    and that handles it itself: a sweep's point, whose run may still be planning (its
    own ``noted_stops`` takes over once it has files to finish)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = _swap_stop_handlers(dict.fromkeys(STOP_SIGNALS, _raise_interrupt))
    try:
        yield
    finally:
        _swap_stop_handlers(old)


def ignore_stop_signals() -> None:
    """The command has done its work (its files written, its exit code known): from now
    on SIGINT, SIGTERM and SIGHUP are ignored (main thread only), so the exit itself
    cannot be cut short. A KeyboardInterrupt in multiprocessing's exit hook printed a
    traceback and left its resource tracker unreaped; and the interpreter's teardown
    resets a Python handler to the default action (a late SIGINT killed accelbench with
    its files written: exit -2), while it keeps SIG_IGN.

    Also clears CPython's mark of an "unhandled" KeyboardInterrupt: 3.11 sets it when
    one goes through code run from a string (the methods dataclasses generate while a
    module is imported), even when it is then caught, and at exit kills the process by
    SIGINT, whatever exit code it was given (exit -2, not 130). Running a string resets
    the mark, and no stop can raise from here on."""
    if threading.current_thread() is threading.main_thread():
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        exec("")  # resets the mark (pythonrun.c, run_eval_code_obj)


def interrupt_on_termination() -> None:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, as Ctrl-C does,
    so one orderly shutdown path (``finally`` blocks, results kept) serves all three."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _raise_interrupt)


@contextlib.contextmanager
def loop_stop_signals(
    loop: asyncio.AbstractEventLoop, on_stop: Callable[[str], None]
) -> Iterator[None]:
    """For a command on an event loop: SIGINT, SIGTERM and SIGHUP each call
    ``on_stop(name)`` from the loop, between callbacks, instead of raising
    KeyboardInterrupt wherever the main thread happens to be (inside a journal write, a
    parser, asyncio.run's own teardown). The command's one stop path: set its stop
    event, cancel what is in flight (recorded as ``interrupted``), finish the files. A
    second signal during that calls ``on_stop`` again. Afterwards the handlers in place
    before (interrupt_on_termination's, asyncio.run's) come back, swapped with the
    signals blocked (asyncio's removal leaves the default action for a moment: a SIGTERM
    then killed the process); once a signal has stopped the command, later ones are
    ignored for the rest of the process instead: the stop is under way, and one raised
    as KeyboardInterrupt in the files' finishing lost the status (exit 130)."""
    old = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    installed = []
    stopped: list[str] = []

    def stop(name: str) -> None:
        stopped.append(name)
        on_stop(name)

    try:
        for s in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(s, stop, s.name)
                installed.append(s)
        yield
    finally:
        with deferred_stop_signals():
            for s in installed:
                loop.remove_signal_handler(s)
                with contextlib.suppress(TypeError, ValueError, OSError):
                    signal.signal(s, _already_stopping if stopped else old[s])


def _already_stopping(signum: int, frame: Any) -> None:
    """A stop signal after a signalled stop: that stop goes on; nothing more to do."""


def exit_now(code: int) -> NoReturn:
    """Leave at once after a signalled stop, every file written: flush and ``os._exit``.
    The interpreter's teardown is no place for a stop: it resets the signal handlers, so
    a later SIGTERM killed a shadow proxy whose files were done (exit -15 for 1); under
    LoadGen's parked issue thread it crashed (SIGSEGV / SIGABRT); on a large MLPerf run
    it took 0.6 s, past the second a stop may take."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
