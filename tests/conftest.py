"""Shared fixtures: the reference server (ground truth, faults) and the real llama.cpp
engine (built once and cached by accelbench itself; the first build takes minutes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from accelbench.ports import free_port

# no per-example deadline: a busy 2-core CI host can stall any one example past
# Hypothesis's default 200 ms, which says nothing about the code under test
settings.register_profile("accelbench", deadline=None)
settings.load_profile("accelbench")

# A suite started as a background job of a non-interactive shell (`cmd &`, nohup)
# inherits SIGINT ignored, and so would every accelbench process the tests start: those
# that send it Ctrl-C would see the signal ignored (exit 0, not 130) whatever the code
# does. The tests start their processes as a terminal would: SIGINT delivered.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def _stop_signals_restored() -> Iterator[None]:
    """A command run in this process (CliRunner, the Python API) may leave the stop
    signals ignored, as its process would be about to exit (``ignore_stop_signals``);
    restored after each test, else every process a later test starts inherits SIGINT
    ignored and a Ctrl-C it sends does nothing."""
    before = {s: signal.getsignal(s) for s in _STOP_SIGNALS}
    yield
    for s, h in before.items():
        if h is not None and signal.getsignal(s) != h:
            signal.signal(s, h)


def fixture_file(kind: str, name: str) -> Path:
    """A captured GPU-tool output shipped in tests/fixtures/<kind>/ (provenance in its
    SOURCES.md). The repository carries every one, so a missing file fails, never skips."""
    path = FIXTURES / kind / name
    if not path.is_file():
        pytest.fail(f"test fixture missing: {path} (see {FIXTURES / kind / 'SOURCES.md'})", False)
    return path


def wait_http(url: str, timeout: float = 20.0, proc: subprocess.Popen | None = None) -> None:
    """Until ``url`` answers 200; fails at once if ``proc`` (the server) has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
            raise RuntimeError(f"the server for {url} exited ({proc.returncode}): {err}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


class RefServer:
    """``accelbench serve KIND`` (reference, or emulated) as a process on a free port,
    logging its ground truth beside the test."""

    def __init__(self, args: list[str], tmp: Path, kind: str = "reference") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ground_truth = tmp / f"gt-{self.port}.jsonl"
        cmd = [sys.executable, "-m", "accelbench", "serve", kind, "--port", str(self.port),
               "--ground-truth", str(self.ground_truth), *args]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_http(self.url + "/health", proc=self.proc)

    def truth(self) -> list[dict]:
        """The ground-truth log's lines so far."""
        return [json.loads(x) for x in self.ground_truth.read_text().splitlines()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def reference_server(tmp_path: Path) -> Iterator[Callable[..., RefServer]]:
    """Factory: ``reference_server("--ttft-ms", "20", ...)`` starts one on a free port."""
    started: list[RefServer] = []

    def make(*args: str) -> RefServer:
        s = RefServer(list(args), tmp_path)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def llama_server_handle():
    """A real llama-server on SmolLM2-135M (or ACCELBENCH_TEST_MODEL), 4 slots."""
    from accelbench.engines.llamacpp import start_llama_server

    model = os.environ.get("ACCELBENCH_TEST_MODEL", "smollm2")
    server = start_llama_server(model, parallel=4, ctx_per_slot=1024, log=lambda m: print(m))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_server(llama_server_handle) -> str:
    """URL of the real llama-server."""
    return llama_server_handle.url
