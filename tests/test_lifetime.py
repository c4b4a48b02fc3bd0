"""Nothing accelbench starts outlives it (docs/PROCESSES.md): for each process kind and
each way accelbench stops, start ``python -m accelbench ...`` for real, record every
descendant while it runs, stop it, and check that the process table holds none of them
(not even a zombie it failed to reap) and that its port can be bound again.

The test process is a child subreaper while these tests run, so orphans come to it
instead of init: a zombie left for the test means accelbench exited without reaping it
(a failure, unless accelbench was SIGKILLed and could not)."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from accelbench import lifetime
from conftest import free_port, wait_http
from processes import STOPS, Accelbench, port_free, subreaper


@pytest.fixture(name="subreaper")
def _subreaper() -> Iterator[None]:
    with subreaper():
        yield


def expected_rc(how: str, interrupted: int) -> set[int]:
    return {"SIGKILL": {-signal.SIGKILL}, "crash": {70}}.get(how, {interrupted})


def _is_engine(p: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return "llama-server" in p.name()
    return False


def _is_worker(p: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return "spawn_main" in " ".join(p.cmdline())
    return False


def _engine_port(procs: list[psutil.Process]) -> int:
    eng = next(p for p in procs if _is_engine(p))
    argv = eng.cmdline()
    return int(argv[argv.index("--port") + 1])


# -- the reference server: accelbench itself listens ---------------------------------
@pytest.mark.parametrize("how", STOPS)
def test_serve_reference(how: str, subreaper: None) -> None:
    port = free_port()
    ab = Accelbench(["serve", "reference", "--port", str(port)])
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 30)
    except RuntimeError:
        ab.proc.kill()
        pytest.fail(f"the reference server did not come up: {ab.stderr()}")
    rc = ab.stop(how)
    assert rc in expected_rc(how, 0), (rc, ab.stderr())
    ab.assert_none_left(how)
    assert port_free(port)


# -- local load workers of `run` (and multiprocessing's resource tracker) -------------
@pytest.mark.parametrize("how", STOPS)
def test_run_workers(how: str, subreaper: None, reference_server, tmp_path: Path) -> None:
    srv = reference_server("--ttft-ms", "5", "--itl-ms", "5")
    ab = Accelbench(
        ["run", "-q", "--url", srv.url, "-c", "2", "--workers", "2", "--duration", "60",
         "--isl", "8", "--osl", "8", "--results-root", str(tmp_path)]
    )  # fmt: skip
    ab.wait_for("two load workers", lambda ps: sum(map(_is_worker, ps)) >= 2, 60)
    time.sleep(0.5)  # sending load
    rc = ab.stop(how)
    assert rc in expected_rc(how, 1), (rc, ab.stderr())
    ab.assert_none_left(how)
    if how in ("SIGINT", "SIGTERM", "SIGHUP"):  # orderly: the run is kept, as interrupted
        (run_json,) = tmp_path.glob("*/run.json")
        assert '"status": "interrupted"' in run_json.read_text()


# -- the shadow proxy's candidate process (its own session, started by lifetime.spawn) --
def _is_candidate(p: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return "accelbench.suites.shadow.candidate" in " ".join(p.cmdline())
    return False


@pytest.mark.parametrize("how", STOPS)
def test_shadow_proxy_candidate(
    how: str, subreaper: None, reference_server, tmp_path: Path
) -> None:
    base = reference_server("--ttft-ms", "5", "--itl-ms", "5")
    cand = reference_server("--ttft-ms", "5", "--itl-ms", "5")
    port = free_port()
    ab = Accelbench(
        ["shadow", "proxy", "--listen", f"127.0.0.1:{port}", "--baseline", base.url,
         "--candidate", cand.url, "--out", str(tmp_path / "sh")]
    )  # fmt: skip
    ab.wait_for("the candidate process", lambda ps: any(map(_is_candidate, ps)), 60)
    wait_http(f"http://127.0.0.1:{port}/health", 30)
    rc = ab.stop(how)
    assert rc in expected_rc(how, 1), (rc, ab.stderr())
    ab.assert_none_left(how)
    assert port_free(port)


# -- engines: `serve llama` and the embedded engine of `run` --------------------------
@pytest.mark.engine
@pytest.mark.parametrize("how", STOPS)
def test_serve_llama(how: str, subreaper: None) -> None:
    port = free_port()
    ab = Accelbench(
        ["serve", "llama", "--model", "tiny", "--port", str(port), "--parallel", "1",
         "--ctx-per-slot", "256"]
    )  # fmt: skip
    ab.wait_for("llama-server", lambda ps: any(map(_is_engine, ps)), 120)
    ab.wait_for("serving", lambda ps: any("Ctrl-C stops it" in x for x in ab.lines), 120)
    rc = ab.stop(how)
    # serving ends normally on Ctrl-C, SIGTERM, SIGHUP (exit 0)
    assert rc in expected_rc(how, 0), (rc, ab.stderr())
    ab.assert_none_left(how)
    assert port_free(port)


@pytest.mark.engine
@pytest.mark.parametrize("line", ["llama-server up at", "Ctrl-C stops it"])
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_serve_llama_stopped_the_moment_it_says_so(how: str, line: str, subreaper: None) -> None:
    """A stop signal sent the moment a line announces the engine (as a script or a person
    reacts to it) may land while accelbench is still writing that line: the engine is
    stopped in order then too (exit 0, nothing left). Before, the signal could fall
    between the line and the stop being armed: exit 130 and an engine killed only by the
    parent-death signal. That window is microseconds wide unless the host deschedules
    accelbench right after the write (CI hit it once, 2026-12-05), so accelbench is held
    1 s right after writing the line, which showed it every time."""
    port = free_port()
    ab = Accelbench(
        ["serve", "llama", "--model", "tiny", "--port", str(port), "--parallel", "1",
         "--ctx-per-slot", "256"],
        hold_after=line,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not any(line in x for x in ab.lines):
        assert time.monotonic() < deadline and ab.proc.poll() is None, ab.stderr()
        ab.descendants()
        time.sleep(0.002)
    rc = ab.stop(how)
    assert rc == 0, (rc, ab.stderr())
    ab.assert_none_left(how)
    assert port_free(port)


@pytest.mark.engine
@pytest.mark.parametrize("how", STOPS)
def test_run_embedded_engine(how: str, subreaper: None, tmp_path: Path) -> None:
    ab = Accelbench(
        ["run", "-q", "--embedded-model", "tiny", "--embedded-parallel", "1", "-c", "1",
         "--workers", "1", "--duration", "60", "--isl", "8", "--osl", "8",
         "--results-root", str(tmp_path)]
    )  # fmt: skip
    ab.wait_for(
        "llama-server and a load worker",
        lambda ps: any(map(_is_engine, ps)) and any(map(_is_worker, ps)),
        120,
    )
    port = _engine_port(ab.descendants())
    time.sleep(0.5)
    rc = ab.stop(how)
    assert rc in expected_rc(how, 1), (rc, ab.stderr())
    ab.assert_none_left(how)
    assert port_free(port)


# -- helpers (telemetry tools, alert commands, build steps) through lifetime ----------
_HELPER_PARENT = textwrap.dedent(
    """
    import sys, threading, time
    from accelbench import lifetime
    def start():  # from a thread that ends at once: the child must not die with it
        c = lifetime.spawn(["sh", "-c", "sleep 60 & sleep 60"], guard_grace_s=1.0)
        print(c.pid, flush=True)
    t = threading.Thread(target=start)
    t.start()
    t.join()
    threading.Thread(target=lifetime.run, args=(["sleep", "60"],), kwargs={"timeout_s": 60}).start()
    time.sleep(60)
    """
)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_spawned_helpers_die_with_parent(how: str, subreaper: None) -> None:
    """A group (leader and a member the leader started) and a ``run`` helper end when
    their Python parent dies, also when the thread that started them ended long before."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _HELPER_PARENT], stdout=subprocess.PIPE, start_new_session=True
    )
    ab = Accelbench.__new__(Accelbench)
    ab.proc, ab.seen, ab.lines, ab.parent, ab.cmd = parent, {}, [], {}, {}
    assert parent.stdout is not None
    leader = int(parent.stdout.readline())
    # leader sh, its sleep, the guard, and the run() helper's sleep
    ab.wait_for("four helpers", lambda ps: len(ps) >= 4, 20)
    time.sleep(0.5)
    assert psutil.Process(leader).status() != psutil.STATUS_ZOMBIE  # outlived its thread
    parent.send_signal(getattr(signal, how))
    parent.wait(10)
    ab.assert_none_left("SIGKILL", timeout=5)  # nobody reaped them: zombies are allowed


def test_child_stop_ends_the_group_and_reaps() -> None:
    """``Child.stop``: SIGTERM to the group; a member that ignores it is SIGKILLed after
    the grace period; the leader is reaped (no zombie)."""
    c = lifetime.spawn(["sh", "-c", "trap '' TERM; sleep 60 & wait"])
    time.sleep(0.3)
    members = psutil.Process(c.pid).children()
    assert members
    t0 = time.monotonic()
    c.stop(grace_s=0.5)
    took = time.monotonic() - t0
    assert 0.4 < took < 5, took  # the grace period was waited out, then SIGKILL
    assert c.returncode == -signal.SIGKILL
    with pytest.raises(psutil.NoSuchProcess):
        psutil.Process(c.pid).status()  # reaped
    for m in members:  # SIGKILLed: dead (a zombie left for init to reap, or gone) once the
        # kernel has run it, which on a busy host can take a moment after the signal
        deadline = time.monotonic() + 5
        while True:
            try:
                st = m.status()
            except psutil.NoSuchProcess:
                break
            if st == psutil.STATUS_ZOMBIE or time.monotonic() > deadline:
                assert st == psutil.STATUS_ZOMBIE, st
                break
            time.sleep(0.02)
    c.stop()  # idempotent


def test_run_reads_any_bytes_and_spawn_passes_fds() -> None:
    """``run(errors="replace")`` reads output that is not UTF-8 (a driver tool's); a
    descriptor in ``pass_fds`` reaches the child (the shadow proxy's candidate socket)."""
    out = lifetime.run(
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'ok \\xff')"],
        timeout_s=30,
        errors="replace",
    )
    assert (out.returncode, out.stdout) == (0, "ok \ufffd")
    with pytest.raises(OSError):
        lifetime.run(["/nonexistent/tool"], timeout_s=5)
    mine, theirs = socket.socketpair()
    with mine, theirs:
        c = lifetime.spawn(
            [sys.executable, "-c", f"import os; os.write({theirs.fileno()}, b'hi')"],
            pass_fds=(theirs.fileno(),),
        )
        assert c.wait(30) == 0
        assert mine.recv(2) == b"hi"
        c.stop()


# -- Ray: `run --ray local` starts a Ray instance and the load-worker actors ----------
def _is_ray_actor(p: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return "LoadActor" in p.name() or "LoadActor" in " ".join(p.cmdline())
    return False


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_run_ray_local(how: str, subreaper: None, reference_server, tmp_path: Path) -> None:
    """The Ray instance that ``--ray local`` starts (GCS, raylet, its workers) and the
    actors end with the driver: in order (ray.shutdown) on a signal, and through Ray's
    own fate sharing (parent-death signal on its processes, raylet ends its workers)
    when the driver is SIGKILLed."""
    srv = reference_server("--ttft-ms", "5", "--itl-ms", "5")
    ab = Accelbench(
        ["run", "-q", "--url", srv.url, "-c", "1", "--workers", "1", "--duration", "120",
         "--isl", "8", "--osl", "8", "--ray", "local", "--results-root", str(tmp_path)]
    )  # fmt: skip
    ab.wait_for("a load-worker actor", lambda ps: any(map(_is_ray_actor, ps)), 120)
    time.sleep(1.0)
    rc = ab.stop(how)
    assert rc in expected_rc(how, 1), (rc, ab.stderr())
    ab.assert_none_left(how, timeout=30)
