"""Asking the installed runtimes: vendor tools (nvidia-smi, rocm-smi, amd-smi, rocminfo,
dmesg / journalctl), NVML, amdsmi and PyTorch. Every call is bounded by a timeout and
turns a missing tool, a permission error or a crash into a `ToolResult` with `problem`
set, never an exception.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any


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
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, errors="replace")
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


def nvml_inventory() -> dict[str, Any]:
    """NVIDIA GPUs through NVML, with ECC and retired page counters where supported."""
    try:
        import pynvml  # nvidia-ml-py
    except Exception as exc:  # noqa: BLE001 - any import failure means "not available"
        return {"available": False, "problem": f"nvidia-ml-py not importable: {exc}"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return {"available": False, "problem": f"NVML: {exc}"}
    out: dict[str, Any] = {"available": True, "gpus": []}
    try:
        out["driver_version"] = _s(pynvml.nvmlSystemGetDriverVersion())
        with contextlib.suppress(Exception):
            v = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            out["cuda_version"] = f"{v // 1000}.{(v % 1000) // 10}"
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            g: dict[str, Any] = {"index": i, "name": _s(pynvml.nvmlDeviceGetName(h))}
            with contextlib.suppress(Exception):
                g["bdf"] = _s(pynvml.nvmlDeviceGetPciInfo(h).busId).lower()[-12:]
            for key, fn in (
                (
                    "ecc_uncorrected",
                    lambda h=h: pynvml.nvmlDeviceGetTotalEccErrors(
                        h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
                    ),
                ),
                (
                    "ecc_corrected",
                    lambda h=h: pynvml.nvmlDeviceGetTotalEccErrors(
                        h, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC
                    ),
                ),
                (
                    "retired_pages_dbe",
                    lambda h=h: len(
                        pynvml.nvmlDeviceGetRetiredPages(
                            h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
                        )
                    ),
                ),
                (
                    "retired_pages_pending",
                    lambda h=h: pynvml.nvmlDeviceGetRetiredPagesPendingStatus(h),
                ),
                ("remapped_rows", lambda h=h: list(pynvml.nvmlDeviceGetRemappedRows(h))),
                ("pcie_gen", lambda h=h: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h)),
                ("pcie_gen_max", lambda h=h: pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h)),
                ("pcie_width", lambda h=h: pynvml.nvmlDeviceGetCurrPcieLinkWidth(h)),
                ("pcie_width_max", lambda h=h: pynvml.nvmlDeviceGetMaxPcieLinkWidth(h)),
            ):
                with contextlib.suppress(Exception):  # NotSupported on many boards
                    g[key] = fn()
            out["gpus"].append(g)
    except Exception as exc:  # noqa: BLE001
        out["problem"] = f"NVML query failed: {exc}"
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return out


def amdsmi_inventory() -> dict[str, Any]:
    """AMD GPUs through the amdsmi Python library (guarded broadly: without ROCm its
    import raises KeyError, not ImportError)."""
    try:
        # Without ROCm the import prints a library-not-found message; keep it off our output.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            import amdsmi  # type: ignore[import-not-found]
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "problem": f"amdsmi not importable: {type(exc).__name__}"}
    try:
        amdsmi.amdsmi_init()
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "problem": f"amdsmi_init: {exc}"}
    out: dict[str, Any] = {"available": True, "gpus": []}
    try:
        for i, h in enumerate(amdsmi.amdsmi_get_processor_handles()):
            g: dict[str, Any] = {"index": i}
            with contextlib.suppress(Exception):
                g["bdf"] = str(amdsmi.amdsmi_get_gpu_device_bdf(h)).lower()
            with contextlib.suppress(Exception):
                info = amdsmi.amdsmi_get_gpu_asic_info(h)
                g["name"] = info.get("market_name")
                g["arch"] = info.get("target_graphics_version")
            with contextlib.suppress(Exception):
                ecc = amdsmi.amdsmi_get_gpu_total_ecc_count(h)
                g["ecc_uncorrected"] = ecc.get("uncorrectable_count")
                g["ecc_corrected"] = ecc.get("correctable_count")
            out["gpus"].append(g)
    except Exception as exc:  # noqa: BLE001
        out["problem"] = f"amdsmi query failed: {exc}"
    finally:
        with contextlib.suppress(Exception):
            amdsmi.amdsmi_shut_down()
    return out


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


def torch_info(timeout: float = 60.0) -> dict[str, Any]:
    """PyTorch build and device visibility, probed in a child interpreter so that a broken
    CUDA / ROCm install cannot hang or crash the doctor. ROCm builds set torch.version.hip
    and reuse torch.cuda (there is no torch.rocm)."""
    try:
        p = subprocess.run(
            [sys.executable, "-c", _TORCH_PROBE], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"installed": None, "problem": f"importing torch timed out after {timeout:.0f}s"}
    except OSError as exc:
        return {"installed": None, "problem": str(exc)}
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"installed": None, "problem": (p.stderr.strip().splitlines() or ["no output"])[-1]}


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
