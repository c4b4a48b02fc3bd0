"""Load workers as Ray actors: ``RayWorkerPool`` is the cluster twin of the local
``runner.workers.WorkerPool`` and speaks the same event protocol, so the driver
(``runner.benchmark._drive``) journals Ray records exactly like local ones.

- Placement: one actor per worker, ``num_cpus`` declared, spread over the nodes
  (``SPREAD`` strategy), at nice 0 (not Ray's 15 for workers). Each actor runs the same
  ``LoadWorker`` as a local process.
- Start together: the driver estimates every node's clock offset (``clock.py``), then
  gives every actor one start instant on its own clock; a phase barrier (a small async
  actor) releases warm-up -> measured at one instant again.
- Streaming: every actor buffers its record batches; the driver keeps one ``take`` call
  outstanding per actor (long poll, at most ``chunk_rows`` rows) and collects them with
  ``ray.wait``, so records arrive while the run goes, in bounded pieces.
- Stop: ``stop()`` asks every actor to stop (in-flight requests become ``interrupted``
  records, as locally); ``kill()`` ends them. A lost actor or node yields a ``lost``
  event: what it streamed back is kept and the run is marked partial.
- One timeline: actors move their records to the driver's clock before sending them.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import select
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

import ray
from ray.actor import ActorHandle
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from accelbench import __version__
from accelbench.errors import AccelbenchError, UsageError
from accelbench.metrics.summary import WorkerStats
from accelbench.runner.cluster.clock import (
    ClockJSON,
    ClockOffset,
    clock_identity,
    offset_from_samples,
    to_driver_timeline,
)
from accelbench.runner.cluster.partition import fixed_shares
from accelbench.runner.loadgen import LoadWorker, WorkerSpec

CHUNK_ROWS = 1024  # records per transfer from an actor: bounded objects, never one huge one
CLOCK_EXCHANGES = 16  # round trips per node for its offset
START_MARGIN_S = 0.25  # the common start instant is this far after the release
# An actor sends nothing once its driver is gone: on the driver's node it watches the
# driver's process (a pidfd: within one 50 ms flusher turn); on other nodes it needs a
# lease the driver renews every LEASE_RENEW_S, and stops when none came for LEASE_S.
LEASE_S = 1.0
RAY_CONNECT_TIMEOUT_S = 15.0  # --ray ADDRESS: nothing answering there fails within this
LEASE_RENEW_S = 0.1
ACTOR_NICENESS = 0  # what load actors run at (Ray's default for its workers is 15)


@dataclass(frozen=True)
class ActorInfo:
    """Where a load actor runs (``LoadActor.info``)."""

    worker: int
    node_id: str
    host: str
    ip: str
    pid: int
    accelbench: str  # its version: every node must run the driver's
    clock_id: str | None = None  # clock.clock_identity(): the driver's own clock where equal
    nice: int | None = None  # the actor process's niceness (ACTOR_NICENESS asked for)


@dataclass(frozen=True)
class DriverRef:
    """How an actor tells that the driver is gone: its node (None through Ray Client,
    whose driver runs elsewhere) and pid."""

    node_id: str | None
    pid: int


@dataclass
class NodeInfo:
    node_id: str
    host: str
    ip: str
    actors: list[int] = field(default_factory=list)  # the workers placed there


class ClusterNode(TypedDict):
    node_id: str
    host: str
    ip: str
    actors: list[int]
    clock: ClockJSON
    clock_end: NotRequired[ClockJSON]
    clock_drift_ms: NotRequired[float]


class ClusterActor(TypedDict):
    worker: int
    node_id: str
    host: str
    pid: int
    clock_offset_ms: float | None  # the offset its start instant was converted with
    nice: NotRequired[int]  # its process's niceness (ACTOR_NICENESS asked for)
    lost: NotRequired[str]


class ClusterInfo(TypedDict):
    """The ``cluster`` section of run.json."""

    engine: str
    ray_version: str
    address: str
    n_nodes: int
    n_actors: int
    num_cpus_per_actor: float
    start_ns: int | None
    clock_uncertainty_ms: float
    nodes: list[ClusterNode]
    actors: list[ClusterActor]


def _loop_factory() -> Any:
    """uvloop for this worker's own loop where installed, without changing the process's
    event loop policy (the actor process belongs to Ray)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


class LoadActor:
    """One load worker inside a Ray actor (threaded: ``run`` holds one thread; ``take``,
    ``stop`` and ``clock`` answer from the others while it runs)."""

    def __init__(self, spec: WorkerSpec, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self.clock_s = clock  # seconds; what the lease is kept on (a test's fake clock)
        self.buf: deque[dict[str, Any]] = deque()
        self.cond = threading.Condition()
        self.stopping = threading.Event()
        self.finished = False
        self.offset_ns = 0
        self.lease_until = float("inf")  # clock_s seconds; set by watch_driver() and renew()
        self.driver_fd: int | None = None
        self.driver_lost: str | None = None

    def info(self) -> ActorInfo:
        return ActorInfo(
            worker=self.spec.worker,
            node_id=ray.get_runtime_context().get_node_id(),
            host=socket.gethostname(),
            ip=ray.util.get_node_ip_address(),
            pid=os.getpid(),
            accelbench=__version__,
            clock_id=clock_identity(),
            nice=os.getpriority(os.PRIO_PROCESS, 0),
        )

    def clock(self) -> int:
        return time.monotonic_ns()

    def watch_driver(self, driver: DriverRef) -> None:
        """Know how to tell that the driver is gone."""
        self.lease_until = self.clock_s() + LEASE_S
        same_node = driver.node_id == ray.get_runtime_context().get_node_id()
        if same_node and driver.pid and self.driver_fd is None:
            try:
                self.driver_fd = os.pidfd_open(driver.pid)
            except ProcessLookupError:
                self.driver_lost = "the driver had exited before the run started"
            except OSError:  # no pidfd here (old kernel): the lease alone
                self.driver_fd = None

    def renew(self) -> None:
        self.lease_until = self.clock_s() + LEASE_S

    def should_stop(self) -> bool:
        """Stop when asked, and when the driver is gone: nobody would record the load."""
        if self.stopping.is_set():
            return True
        if self.driver_lost is None:
            if self.driver_fd is not None:
                if select.select([self.driver_fd], [], [], 0)[0]:
                    self.driver_lost = "the driver's process exited"
            elif self.clock_s() > self.lease_until:
                self.driver_lost = f"no word from the driver for {LEASE_S:g} s"
        if self.driver_lost is not None:
            self.stopping.set()
            return True
        return False

    def _emit(self, rows: list[dict[str, Any]]) -> None:
        to_driver_timeline(rows, self.offset_ns)
        with self.cond:
            self.buf.extend(rows)
            self.cond.notify_all()

    def run(self, start_ns: int, offset_ns: int, barrier: Any, n_phases: int) -> WorkerStats:
        """Run the worker from ``start_ns`` (driver clock); return its stats."""
        self.offset_ns = offset_ns
        try:

            def phase_barrier() -> int | None:
                # every worker meets it before each later phase; it answers with one
                # release instant on the driver's clock (None: the run was stopped)
                if barrier is None or self.stopping.is_set():
                    return None
                try:
                    at = ray.get(barrier.wait.remote(self.spec.worker), timeout=3600)
                except RayError:
                    return None
                return None if at is None else at + self.offset_ns

            worker = LoadWorker(
                self.spec,
                self._emit,
                self.should_stop,
                phase_barrier if n_phases > 1 else None,
                {},
                start_ns=start_ns + offset_ns,  # the common instant on this host's clock
            )
            with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                stats = runner.run(worker.run())
            for ph in stats["phases"]:  # back on the driver's clock, like the records
                ph["start_ns"] -= offset_ns
            if self.driver_lost:
                stats["driver_lost"] = self.driver_lost
            return stats
        finally:
            with self.cond:
                self.finished = True
                self.cond.notify_all()

    def take(self, max_rows: int, wait_s: float) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``max_rows`` records (waiting up to ``wait_s`` for one), and whether the
        worker is finished and everything has been taken."""
        with self.cond:
            if not self.buf and not self.finished:
                self.cond.wait(wait_s)
            n = min(max_rows, len(self.buf))
            rows = [self.buf.popleft() for _ in range(n)]
            return rows, self.finished and not self.buf

    def stop(self) -> None:
        self.stopping.set()


class PhaseBarrier:
    """Releases the workers into each phase together: when every live worker has
    arrived, all get the same instant (driver clock) a margin ahead."""

    def __init__(self, workers: list[int], margin_ns: int, offset_ns: int) -> None:
        self.members = set(workers)
        self.margin_ns = margin_ns
        self.offset_ns = offset_ns  # this actor's clock minus the driver's
        self.arrived: set[int] = set()
        self.event = asyncio.Event()
        self.release_at: int | None = None
        self.aborted = False

    def clock(self) -> int:
        return time.monotonic_ns()

    def set_offset(self, offset_ns: int) -> None:
        self.offset_ns = offset_ns

    async def wait(self, worker: int) -> int | None:
        if self.aborted:
            return None
        event = self.event
        self.arrived.add(worker)
        self._maybe_open()
        await event.wait()
        return None if self.aborted else self.release_at

    def _maybe_open(self) -> None:
        if self.arrived and self.members <= self.arrived:
            self.release_at = time.monotonic_ns() - self.offset_ns + self.margin_ns
            self.arrived = set()
            self.event.set()
            self.event = asyncio.Event()

    async def leave(self, worker: int) -> None:
        self.members.discard(worker)
        self.arrived.discard(worker)
        self._maybe_open()

    async def abort(self) -> None:
        self.aborted = True
        self.event.set()


def connect(address: str) -> bool:
    """Join the Ray cluster at ``address`` (``auto``: the one this host belongs to or
    RAY_ADDRESS; ``local``: start one on this host; else ``host:port`` or
    ``ray://host:port``). Reuses an existing connection. True if this call connected."""
    if ray.is_initialized():
        return False
    main = threading.current_thread() is threading.main_thread()
    on_term = signal.getsignal(signal.SIGTERM) if main else None
    if address != "local":
        _check_reachable(address)
    elif os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "disabled":
        # Ray binds its gRPC servers to every interface, with no option to keep them on
        # loopback (docs/CLUSTER.md "Network"): its token is what keeps others out
        raise UsageError(
            "--ray local starts Ray's servers on every interface (Ray cannot bind them "
            "to loopback) and needs Ray's token authentication: unset RAY_AUTH_MODE=disabled"
        )
    if address == "local":
        _tie_local_ray()
        # Ray enables its token for a new local runtime and logs "Set RAY_AUTH_MODE=
        # disabled to opt out" on every run, even under --quiet: advice --ray local
        # refuses (above). Its other warnings still show.
        logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
            logging.ERROR
        )
    try:
        if address == "local":
            # "local": a new runtime here, never one RAY_ADDRESS or `ray start` points at
            ray.init(
                address="local", include_dashboard=False, log_to_driver=False,
                configure_logging=False,
            )  # fmt: skip
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except SystemExit as exc:  # ray.init's own SIGTERM handler: stop as on Ctrl-C
        if exc.code == signal.SIGTERM:
            raise KeyboardInterrupt("SIGTERM") from None
        raise
    except (ConnectionError, RuntimeError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AccelbenchError(f"cannot join the Ray cluster at --ray {address}: {msg}") from None
    finally:
        if main:  # ray.init makes SIGTERM exit the driver at once: keep accelbench's stop
            signal.signal(signal.SIGTERM, on_term)
    return True


# An HTTP/2 client's first bytes (RFC 9113 3.4: the preface, then an empty SETTINGS
# frame); a gRPC server (Ray's GCS, or its Ray Client server) answers with a SETTINGS frame
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _check_reachable(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Fail within ``timeout_s`` unless a gRPC server answers where ray.init would
    connect (``auto`` and ``RAY_ADDRESS`` resolved, and a loopback host replaced by the
    node's address, as Ray does): ray.init itself retries a closed address, or one where
    something else listens, for minutes (20 tries of 5 s and more in Ray 2.60)."""
    if address.startswith("ray://"):
        hostport: str | None = address.removeprefix("ray://")
    else:
        try:
            from ray._private.services import canonicalize_bootstrap_address

            hostport = canonicalize_bootstrap_address(address)
        except Exception:  # noqa: BLE001 - none found, or malformed: ray.init says so at once
            return
    if not hostport:
        return
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return  # not host:port: ray.init refuses it at once
    deadline = time.monotonic() + timeout_s

    def fail(why: str) -> UsageError:
        return UsageError(
            f"cannot reach the Ray cluster at --ray {address} ({hostport}): {why} "
            f"(gave up after at most {timeout_s:g} s)"
        )

    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as sock:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            sock.sendall(_H2_PREFACE)
            head = b""
            while len(head) < 9:
                chunk = sock.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise fail(why) from None
    if len(head) < 9 or head[3] != 4:  # frame type 4: SETTINGS
        raise fail("what answers there does not speak gRPC, so it is no Ray GCS port")


def _tie_local_ray() -> None:
    """The Ray instance ``--ray local`` starts ends with accelbench (docs/PROCESSES.md):
    ray.shutdown() at exit; and if accelbench is killed, a guard started before
    ray.init ends every process it leaves (GCS and raylet die by Ray's own parent-death
    signal, but its dashboard and runtime-env agents would linger for a minute or more)."""
    from accelbench import lifetime

    guard = lifetime.guard(grace_s=2.0, all_descendants=True)

    def shutdown() -> None:  # runs before Ray's own atexit hook (registered earlier)
        with contextlib.suppress(Exception):
            ray.shutdown()
        # a stop inside ray.init leaves processes ray.shutdown() knows nothing of (the
        # agents of a node not yet registered): then the guard stays and ends them once
        # this process has exited; with nothing left it goes now
        if guard.poll() is None and not [p for p in lifetime.descendants() if p != guard.pid]:
            guard.kill()
            guard.wait()

    atexit.register(shutdown)


class RayWorkerPool:
    """Same interface as ``runner.workers.WorkerPool`` (start, release, events, stop,
    kill), plus ``cluster_info()`` for run.json and a ``lost`` event kind."""

    def __init__(
        self,
        specs: list[WorkerSpec],
        address: str = "auto",
        *,
        num_cpus: float = 1.0,
        chunk_rows: int = CHUNK_ROWS,
    ) -> None:
        self.specs = fixed_shares(specs)
        self.address = address
        self.num_cpus = num_cpus
        self.chunk_rows = chunk_rows
        self.n_phases = max(len(s.phases) for s in self.specs)
        self.actors: list[Any] = []  # ray actor handles (ray types them loosely)
        self.barrier: Any = None
        self.nodes: dict[str, NodeInfo] = {}  # node id -> where, and which actors
        self.actor_info: list[ActorInfo] = []
        self.offsets: dict[str, ClockOffset] = {}
        self.same_clock: set[str] = set()  # nodes that read the driver's own clock
        self.start_ns: int | None = None
        self.lost: dict[int, str] = {}
        self._stop_wanted = False
        self._stop_sent = False
        self._in_events = False
        self._kill_wanted = False
        self._done = threading.Event()  # ends the lease thread

    # -- set-up ---------------------------------------------------------------------
    def start(self, ready_timeout: float = 120.0) -> None:
        connect(self.address)
        if self.address == "local":  # no autoscaler: what Ray has now is all it will have
            cpus = local_cpus()
            if len(self.specs) * self.num_cpus > cpus:
                raise UsageError(
                    f"--workers {len(self.specs)} needs {len(self.specs) * self.num_cpus:g} "
                    f"CPUs ({self.num_cpus:g} per load actor) and --ray local has {cpus:g}: "
                    f"give --workers {max(1, int(cpus // self.num_cpus))} or fewer"
                )
        tag = self.specs[0].run_tag
        actor_cls = ray.remote(LoadActor)
        for s in self.specs:
            self.actors.append(
                actor_cls.options(
                    name=f"accelbench-load-{tag}-{s.worker}",
                    num_cpus=self.num_cpus,
                    max_concurrency=6,  # run, take, stop, renew, clock, spare
                    scheduling_strategy="SPREAD",
                    # Ray runs its workers at nice 15 (to keep raylet and GCS responsive);
                    # a load worker so niced reads its sockets late whenever anything at
                    # nice 0 wants the CPU (the server under test on the same host: then
                    # chunks pile up in the socket and share one time). At 0, like local
                    # workers; no privilege needed: Ray then just does not renice it.
                    runtime_env={"env_vars": {"RAY_worker_niceness": str(ACTOR_NICENESS)}},
                ).remote(s)
            )
        try:
            self.actor_info = ray.get([a.info.remote() for a in self.actors], timeout=ready_timeout)
        except GetTimeoutError:
            free = ray.available_resources().get("CPU", 0)
            self.kill()
            raise AccelbenchError(
                f"the Ray cluster did not place {len(self.actors)} load actors of "
                f"{self.num_cpus:g} CPU each within {ready_timeout:.0f} s ({free:g} CPUs "
                "free): lower --workers or add nodes"
            ) from None
        except RayError as exc:
            self.kill()
            raise AccelbenchError(f"a load actor failed to start: {_first_line(exc)}") from None
        versions = {i.accelbench for i in self.actor_info}
        if versions != {__version__}:
            self.kill()
            raise UsageError(
                f"accelbench {', '.join(sorted(versions))} on the Ray nodes, {__version__} "
                "here: install the same version everywhere"
            )
        # no load once the driver is gone (LoadActor.should_stop): its pid where an actor
        # shares its node (not through Ray Client, whose driver runs elsewhere), and leases
        client = self.address.startswith("ray://")
        driver = DriverRef(None if client else ray.get_runtime_context().get_node_id(), os.getpid())
        ray.get([a.watch_driver.remote(driver) for a in self.actors], timeout=ready_timeout)
        threading.Thread(target=self._renew_leases, daemon=True,
                         name="accelbench-ray-lease").start()  # fmt: skip
        first_on_node: dict[str, tuple[ActorHandle, ActorInfo]] = {}
        for a, info in zip(self.actors, self.actor_info, strict=True):
            first_on_node.setdefault(info.node_id, (a, info))
            self.nodes.setdefault(
                info.node_id, NodeInfo(info.node_id, info.host, info.ip)
            ).actors.append(info.worker)
        # a node whose actors read the driver's own clock (every node of --ray local, and
        # the driver's on a cluster) has offset 0 exactly; the estimate is kept as a check
        here = clock_identity()
        self.same_clock = {n for n, (_, i) in first_on_node.items()
                           if here is not None and i.clock_id == here}  # fmt: skip
        self.offsets = {}
        for n, (a, _) in first_on_node.items():
            est = self._measure(a)
            self.offsets[n] = est.on_same_clock() if n in self.same_clock else est
        if self.n_phases > 1 and len(self.actors) > 1:
            rtt = max(o.rtt_min_ns for o in self.offsets.values())
            barrier_cls = ray.remote(PhaseBarrier)
            self.barrier = barrier_cls.options(num_cpus=0, max_concurrency=1000).remote(
                [s.worker for s in self.specs], max(20_000_000, 8 * rtt), 0
            )
            self.barrier.set_offset.remote(self._measure(self.barrier).offset_ns)

    @staticmethod
    def _measure(actor: Any, n: int = CLOCK_EXCHANGES) -> ClockOffset:
        samples = []
        ray.get(actor.clock.remote())  # warm the path
        for _ in range(n):
            t0 = time.monotonic_ns()
            tr = ray.get(actor.clock.remote())
            t1 = time.monotonic_ns()
            samples.append((t0, tr, t1))
        return offset_from_samples(samples)

    def _offset_of(self, k: int) -> int:
        return self.offsets[self.actor_info[k].node_id].offset_ns

    def release(self) -> None:
        rtt = max(o.rtt_min_ns for o in self.offsets.values())
        self.start_ns = time.monotonic_ns() + max(int(START_MARGIN_S * 1e9), 8 * rtt)
        self._runs = {
            k: a.run.remote(self.start_ns, self._offset_of(k), self.barrier, self.n_phases)
            for k, a in enumerate(self.actors)
        }

    def _renew_leases(self) -> None:
        """Renew every actor's lease until the pool is done (a thread of its own: the
        event loop may be busy journalling a batch)."""
        while not self._done.wait(LEASE_RENEW_S):
            for k, a in enumerate(self.actors):
                if k not in self.lost:
                    with contextlib.suppress(Exception):
                        a.renew.remote()

    # -- control ----------------------------------------------------------------------
    def stop(self) -> None:
        """Ask every actor to stop (safe from a signal handler: the remote calls are
        made by ``events()`` at its next turn, at most ``poll_s`` later)."""
        self._stop_wanted = True
        if not self._in_events:
            self._send_stop()

    def _send_stop(self) -> None:
        if self._stop_sent:
            return
        self._stop_sent = True
        for k, a in enumerate(self.actors):
            if k not in self.lost:
                a.stop.remote()
        if self.barrier is not None:
            self.barrier.abort.remote()

    def kill(self) -> None:
        self._done.set()
        if self._in_events:
            self._kill_wanted = True
            return
        for a in [*self.actors, self.barrier]:
            if a is not None:
                with contextlib.suppress(RayError, ValueError):
                    ray.kill(a, no_restart=True)

    # -- the event stream ------------------------------------------------------------------
    def events(self, poll_s: float = 0.1) -> Iterator[tuple[str, int, Any]]:
        """Yield (kind, worker, payload): ``records`` (a batch), ``stats`` or ``crash``
        (the worker is done), ``lost`` (its actor or node died), and ("tick", -1, None)
        while idle."""
        self._in_events = True
        try:
            yield from self._events(poll_s)
        finally:
            self._in_events = False
            if self._kill_wanted:
                self.kill()

    def _events(self, poll_s: float) -> Iterator[tuple[str, int, Any]]:
        pending: dict[Any, tuple[str, int]] = {}
        for k, a in enumerate(self.actors):
            pending[a.take.remote(self.chunk_rows, 0.2)] = ("take", k)
            pending[self._runs[k]] = ("run", k)
        taken: set[int] = set()
        result: dict[int, tuple[str, Any]] = {}
        while pending:
            if self._stop_wanted:
                self._send_stop()
            if self._kill_wanted:
                self._in_events = False
                self.kill()
                self._in_events = True
            refs = list(pending)
            ready, rest = ray.wait(refs, num_returns=1, timeout=poll_s)
            if not ready:
                yield ("tick", -1, None)
                continue
            if rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                entry = pending.pop(ref, None)
                if entry is None or entry[1] in self.lost:
                    continue  # dropped with its lost actor
                what, k = entry
                try:
                    value = ray.get(ref)
                except RayActorError as exc:
                    reason = self._lose(k, exc, pending)
                    yield ("lost", k, reason)
                    continue
                except RayError as exc:  # the run raised inside the actor
                    result[k] = ("crash", f"{_first_line(exc)}\n{exc}")
                    value = None
                if what == "take":
                    rows, done = value
                    if rows:
                        yield ("records", k, rows)
                    if done:
                        taken.add(k)
                    else:
                        pending[self.actors[k].take.remote(self.chunk_rows, 0.2)] = ("take", k)
                elif k not in result:
                    result[k] = ("stats", value)
                if k in taken and k in result:
                    kind, payload = result.pop(k)
                    if kind == "stats":
                        payload["node_id"] = self.actor_info[k].node_id
                        payload["host"] = self.actor_info[k].host
                    yield (kind, k, payload)
                    taken.discard(k)
        self._end_offsets = self._remeasure()

    def _lose(self, k: int, exc: BaseException, pending: dict[Any, tuple[str, int]]) -> str:
        info = self.actor_info[k]
        self.lost[k] = (
            f"load actor {k} on {info.host} (node {info.node_id[:12]}) was lost: {_first_line(exc)}"
        )
        for ref, (_, w) in list(pending.items()):
            if w == k:
                del pending[ref]
        if self.barrier is not None:
            self.barrier.leave.remote(k)
        return self.lost[k]

    def _remeasure(self) -> dict[str, ClockOffset]:
        """The offsets again at the end (their change is the drift over the run)."""
        out = {}
        for node, info in self.nodes.items():
            alive = [k for k in info.actors if k not in self.lost]
            if not alive or node in self.same_clock:  # the driver's clock: no drift
                continue
            try:
                out[node] = self._measure(self.actors[alive[0]], 8)
            except RayError:
                continue
        return out

    def cluster_info(self) -> ClusterInfo:
        """The ``cluster`` section of run.json: nodes, actors, clock offsets."""
        end = getattr(self, "_end_offsets", {})
        nodes = []
        for node_id, info in self.nodes.items():
            off = self.offsets[node_id]
            doc = ClusterNode(
                node_id=info.node_id, host=info.host, ip=info.ip, actors=list(info.actors),
                clock=off.to_json(),
            )  # fmt: skip
            if node_id in end:
                doc["clock_end"] = end[node_id].to_json()
                doc["clock_drift_ms"] = (end[node_id].offset_ns - off.offset_ns) / 1e6
            nodes.append(doc)
        actors = []
        for k, i in enumerate(self.actor_info):
            off_i = self.offsets.get(i.node_id)
            actor = ClusterActor(
                worker=i.worker, node_id=i.node_id, host=i.host, pid=i.pid,
                clock_offset_ms=off_i.offset_ns / 1e6 if off_i is not None else None,
            )  # fmt: skip
            if i.nice is not None:
                actor["nice"] = i.nice
            if k in self.lost:
                actor["lost"] = self.lost[k]
            actors.append(actor)
        unc = max((o.uncertainty_ns for o in self.offsets.values()), default=0)
        return ClusterInfo(
            engine="ray",
            ray_version=ray.__version__,
            address=self.address,
            n_nodes=len(self.nodes),
            n_actors=len(self.actors),
            num_cpus_per_actor=self.num_cpus,
            start_ns=self.start_ns,
            clock_uncertainty_ms=unc / 1e6,
            nodes=nodes,
            actors=actors,
        )


def local_cpus() -> float:
    """The CPUs of the Ray runtime this process joined (``--ray local``: this host's, as
    Ray counts them); the load actors take one each."""
    return float(ray.cluster_resources().get("CPU", 0))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ", "ray::")):
            return line
    return type(exc).__name__


__all__ = ["LoadActor", "PhaseBarrier", "RayWorkerPool", "connect"]
