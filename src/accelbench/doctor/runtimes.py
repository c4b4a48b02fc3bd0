"""Asking the installed runtimes: vendor tools (nvidia-smi, rocm-smi, amd-smi, rocminfo,
dmesg / journalctl) and PyTorch. Every call is bounded by a timeout and turns a missing
tool, a permission error or a crash into a `ToolResult` with `problem` set, never an
exception. NVML and amdsmi are read through `accelbench.gpu`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass

from accelbench import lifetime
from accelbench.doctor.model import TorchInfo


@dataclass
class ToolResult:
    source: str
    text: str | None = None
    problem: str | None = None  # why there is no text (not installed, failed, timed out)
    missing: bool = False  # the tool is not installed (not a problem on a machine without GPUs)


def run_tool(argv: list[str], timeout: float = 15.0) -> ToolResult:
    src = " ".join(argv)
    if shutil.which(argv[0]) is None:
        return ToolResult(src, problem=f"{argv[0]} not installed", missing=True)
    try:
        p = lifetime.run(argv, timeout_s=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return ToolResult(
            src, problem=f"{src} timed out after {timeout:.0f}s (a hung GPU or driver?)"
        )
    except OSError as exc:
        return ToolResult(src, problem=f"{src} could not run: {exc}")
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        return ToolResult(
            src,
            text=p.stdout or None,
            problem=f"{src} exited {p.returncode}: {msg[-1] if msg else ''}".strip(),
        )
    return ToolResult(src, text=p.stdout)


def read_kernel_log(timeout: float = 15.0) -> ToolResult:
    """dmesg with human timestamps, falling back to journalctl -k (often readable by the
    adm / systemd-journal groups when dmesg is restricted)."""
    r = run_tool(["dmesg", "-T"], timeout)
    if r.text and not r.problem:
        return r
    j = run_tool(["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"], timeout)
    if j.text and not j.problem and "No entries" not in j.text[:200]:
        return j
    problems = "; ".join(x.problem for x in (r, j) if x.problem) or "kernel log empty"
    return ToolResult("dmesg / journalctl -k", problem=problems)


_TORCH_PROBE = r"""
import json
try:
    import torch
except Exception as exc:
    print(json.dumps({"installed": False, "problem": f"{type(exc).__name__}: {exc}"}))
    raise SystemExit
d = {"installed": True, "version": torch.__version__,
     "cuda": getattr(torch.version, "cuda", None), "hip": getattr(torch.version, "hip", None)}
try:
    d["available"] = bool(torch.cuda.is_available())
    d["device_count"] = torch.cuda.device_count() if d["available"] else 0
    d["devices"] = [torch.cuda.get_device_name(i) for i in range(d["device_count"])]
except Exception as exc:
    d["available"] = False
    d["problem"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(d))
"""


def torch_info(timeout: float = 60.0) -> TorchInfo:
    """PyTorch build and device visibility, probed in a child interpreter so that a broken
    CUDA / ROCm install cannot hang or crash the doctor. ROCm builds set torch.version.hip
    and reuse torch.cuda (there is no torch.rocm)."""
    try:
        p = lifetime.run([sys.executable, "-c", _TORCH_PROBE], timeout_s=timeout)
    except subprocess.TimeoutExpired:
        return {"installed": None, "problem": f"importing torch timed out after {timeout:.0f}s"}
    except OSError as exc:
        return {"installed": None, "problem": str(exc)}
    try:
        info: TorchInfo = json.loads(p.stdout.strip().splitlines()[-1])  # _TORCH_PROBE's
        return info
    except (IndexError, json.JSONDecodeError):
        return {"installed": None, "problem": (p.stderr.strip().splitlines() or ["no output"])[-1]}
