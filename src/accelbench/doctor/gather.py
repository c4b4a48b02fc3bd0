"""Gathering the doctor's facts, from the machine or from captured outputs.

`gather()` collects into one facts dict; the checks (:mod:`.checks`) judge it and never
touch the machine, so every rule can be tested on captured text."""

from __future__ import annotations

import re
from pathlib import Path

from accelbench.doctor import parsers, runtimes, system
from accelbench.doctor.inputs import DoctorInputs, check_capture_kind, read_capture
from accelbench.doctor.kernel_log import scan_kernel_log
from accelbench.doctor.model import Facts, KernelLogFacts
from accelbench.errors import AccelbenchError
from accelbench.gpu import amdsmi, nvml
from accelbench.gpu.amdsmi import AmdsmiInventory
from accelbench.gpu.nvml import NvmlInventory
from accelbench.telemetry.parsers import identify


def gather(inputs: DoctorInputs, quick: bool = False) -> Facts:
    """Collect facts. quick=True reads only sysfs / procfs / version files (no tools,
    no NVML, no PyTorch, no kernel log): well under a second."""
    live = inputs.is_live
    facts: Facts = {
        "live": inputs.is_live,
        "quick": quick,
        "problems": [],
        # Captures that were cut short or not understood: (source, what was lost).
        "lost": [],
        "notes": [],
        "sources": {},
        "versions": {},
    }
    probs: list[str] = facts["problems"]

    root = inputs.sysfs_root if inputs.sysfs_root is not None else (Path("/") if live else None)
    if inputs.sysfs_root is not None and not inputs.sysfs_root.is_dir():
        raise AccelbenchError(f"--sysfs-root must be a directory: {inputs.sysfs_root}")
    facts["system_read"] = root is not None
    if root is not None:
        probe = system.Probe(root)
        pci = system.scan_pci(probe)
        facts["pci"] = {"source": f"sysfs ({root})", "gpus": pci, "other": []}
        osr = system.os_release(probe)
        facts["versions"].update(
            kernel=system.kernel_release(probe),
            os=osr.get("PRETTY_NAME"),
            os_id=osr.get("ID"),
            os_version=osr.get("VERSION_ID"),
        )
        for key, fn in (
            ("nvidia_driver", system.nvidia_driver_version),
            ("amdgpu_driver", system.amdgpu_driver_version),
            ("rocm", system.rocm_version),
            ("cuda_toolkit", system.cuda_toolkit_version),
        ):
            found, ev = fn(probe)
            if found:
                facts["versions"][key] = found
                facts["versions"][key + "_evidence"] = ev
        facts["iommu"] = system.iommu(probe)
        facts["hugepages"] = system.hugepages(probe)
        facts["numa_nodes"] = system.numa_nodes(probe)
        probs.extend(probe.problems)

    if inputs.lspci is not None:
        text = read_capture(inputs.lspci, "lspci")
        devs = parsers.parse_lspci(text)
        check_capture_kind("lspci", inputs.lspci, text, bool(devs))
        gpus = [
            d | {"vendor": {"10de": "nvidia", "1002": "amd"}[d.get("vendor_id") or ""]}
            for d in devs
            if d["is_gpu"]
        ]
        facts["pci"] = {"source": f"lspci ({inputs.lspci.name})", "gpus": gpus, "all": devs}

    _gather_nvidia(inputs, facts, live and not quick)
    _gather_amd(inputs, facts, live and not quick)

    if inputs.collect_env is not None:
        text = read_capture(inputs.collect_env, "collect_env")
        ce = parsers.parse_collect_env(text)
        # its PyTorch / vLLM lines, not a generic "OS:" line, make it a collect_env
        own = any(ce.get(k) for k in _COLLECT_ENV_OWN) or bool(ce.get("gpu_models"))
        check_capture_kind("collect_env", inputs.collect_env, text, own)
        facts["collect_env"] = ce
        if ce.get("truncated"):
            n = len(ce.get("gpu_models") or [])
            facts["lost"].append(("collect_env", f"{ce['truncated']}: {n} GPU(s) read"))
        facts["torch"] = {
            "installed": True,
            "source": "collect_env",
            "version": ce.get("torch_version"),
            "cuda": ce.get("torch_cuda"),
            "hip": ce.get("torch_hip"),
            "available": ce.get("cuda_available") == "True",
            "device_count": None,
            "devices": ce.get("gpu_models") or [],
        }
        if ce.get("torch_cuda") and ce.get("gpu_models"):
            facts["torch"]["device_count"] = len(ce["gpu_models"])
        v = facts["versions"]
        v.setdefault("kernel", ce.get("kernel"))
        os_name = ce.get("os")
        if os_name and not v.get("os"):
            v["os"] = os_name
            m = re.match(r"(\w+) ([\d.]+)", os_name)
            if m:
                v["os_id"], v["os_version"] = m.group(1).lower(), m.group(2)
        if ce.get("nvidia_driver"):
            v.setdefault("nvidia_driver", ce["nvidia_driver"])
            v.setdefault(
                "nvidia_driver_evidence",
                f"collect_env: Nvidia driver version: {ce['nvidia_driver']}",
            )
        if ce.get("rocm_version"):
            v.setdefault("rocm", ce["rocm_version"])
            v.setdefault("rocm_evidence", f"collect_env: ROCM Version: {ce['rocm_version']}")
        if ce.get("gpu_models") and ce.get("torch_cuda"):
            facts["sources"]["collect_env"] = [
                {"index": i, "name": n} for i, n in enumerate(ce["gpu_models"])
            ]
        archs = [
            m.group(1) for g in ce.get("gpu_models", []) for m in [re.search(r"\((gfx\w+)", g)] if m
        ]
        if archs:
            facts.setdefault("amd_archs", []).extend(archs)
        if ce.get("nvidia_topo"):
            facts["topo"] = ce["nvidia_topo"]
        if ce.get("amd_numa"):
            facts["amd_numa"] = ce["amd_numa"]
    elif live and not quick:
        facts["torch"] = runtimes.torch_info()

    if inputs.kernel_log is not None:
        text = read_capture(inputs.kernel_log, "kernel log")
        if not text.replace("\x00", "").strip():  # a verdict on 0 lines is no pass
            raise AccelbenchError(
                f"--kernel-log {inputs.kernel_log} is empty (no lines): capture it with "
                "sudo dmesg > FILE or journalctl -k -b > FILE (dmesg without sudo may "
                "print nothing)"
            )
        facts["kernel_log"] = _kernel_log_facts(str(inputs.kernel_log), text)
    elif live and not quick and inputs.scan_kernel_log:
        r = runtimes.read_kernel_log()
        if r.text and r.text.strip():
            facts["kernel_log"] = _kernel_log_facts(r.source, r.text)
        else:
            facts["kernel_log"] = {"source": r.source, "problem": r.problem or "kernel log empty"}
    return facts


_COLLECT_ENV_OWN = (
    "torch_version", "torch_cuda", "torch_hip", "cuda_available", "cuda_runtime",
    "nvidia_driver", "hip_runtime", "rocm_version", "vllm_version",
)  # fmt: skip


def _kernel_log_facts(source: str, text: str) -> KernelLogFacts:
    return {
        "source": source,
        "events": scan_kernel_log(text),
        "lines": len(text.splitlines()),
        "driver_banners": _driver_banners(text),
    }


def _tool_text(
    facts: Facts,
    capture: Path | None,
    argv: list[str],
    live: bool,
    vendor: str | None = None,
) -> str | None:
    """A tool's output: read from its capture file when one is given, else (live only)
    from running the tool. A failure is noted in the problems (a tool that is simply not
    installed is not a problem); with `vendor`, how the tool answered is remembered as
    one of that vendor's runtimes."""
    if capture is not None:
        return read_capture(capture, argv[0])
    if not live:
        return None
    r = runtimes.run_tool(argv)
    if r.problem and not r.missing:
        facts["problems"].append(r.problem)
    if vendor is not None:
        _note_runtime(facts, vendor, argv[0], r.problem, r.missing)
    return r.text if not r.problem else None


# "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03  <date>" (proprietary) and
# "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
_BANNER = re.compile(r"NVRM: loading NVIDIA UNIX .*?Kernel Module(?: for [\w-]+)?\s+(\d+\.[\d.]+)")


def _driver_banners(text: str) -> list[str]:
    out = []
    for m in _BANNER.finditer(text):
        if m.group(1) not in out:
            out.append(m.group(1))
    return out


def _note_runtime(facts: Facts, vendor: str, tool: str, problem: str | None, missing: bool) -> None:
    """Remember how each live runtime answered, to tell "no runtime installed" from
    "the runtime is installed but does not see the GPUs"."""
    facts.setdefault("runtimes", {}).setdefault(vendor, []).append(
        {"tool": tool, "problem": problem, "missing": bool(missing and problem)}
    )


def _lib_missing(info: NvmlInventory | AmdsmiInventory) -> bool:
    """NVML / amdsmi unavailable because the library is absent (not a GPU failure)."""
    problem = str(info.get("problem") or "")
    return not info.get("available") and ("not importable" in problem or "Not Found" in problem)


def _gather_nvidia(inputs: DoctorInputs, facts: Facts, live: bool) -> None:
    v = facts["versions"]
    smi_text = _tool_text(facts, inputs.nvidia_smi, ["nvidia-smi"], live, "nvidia")
    if smi_text is not None:
        smi = parsers.parse_nvidia_smi(smi_text)
        if inputs.nvidia_smi is not None:
            check_capture_kind("nvidia_smi", inputs.nvidia_smi, smi_text, bool(smi["gpus"]))
    if smi_text:
        facts["sources"]["nvidia-smi"] = smi["gpus"]
        if smi.get("truncated"):
            facts["lost"].append(
                ("nvidia-smi", f"{smi['truncated']}: {len(smi['gpus'])} GPU(s) read before the cut")
            )
        facts["nvidia_smi"] = smi
        if smi["driver_version"]:
            v.setdefault("nvidia_driver", smi["driver_version"])
            v.setdefault(
                "nvidia_driver_evidence", f"nvidia-smi: Driver Version: {smi['driver_version']}"
            )
        if smi["cuda_version"]:
            v["cuda_driver"] = smi["cuda_version"]
    if inputs.nvidia_topo is not None:
        text = read_capture(inputs.nvidia_topo, "nvidia-smi topo -m")
        topo = parsers.parse_nvidia_topo(text)
        check_capture_kind("nvidia_topo", inputs.nvidia_topo, text, bool(topo["gpus"]))
        facts["topo"] = topo
        facts["sources"]["nvidia-smi topo"] = topo["gpus"]
        if topo["truncated"]:
            facts["lost"].append(("nvidia-smi topo -m", topo["truncated"]))
    if live:
        nv = nvml.inventory()
        facts["nvml"] = nv
        _note_runtime(facts, "nvidia", "NVML", nv.get("problem"), _lib_missing(nv))
        if nv.get("available"):
            facts["sources"]["nvml"] = nv["gpus"]
            v.setdefault("nvidia_driver", nv.get("driver_version"))
            if nv.get("cuda_version"):
                v.setdefault("cuda_driver", nv["cuda_version"])


def _gather_amd(inputs: DoctorInputs, facts: Facts, live: bool) -> None:
    v = facts["versions"]
    archs: list[str] = facts.setdefault("amd_archs", [])
    texts: list[tuple[str, str, Path | None]] = []  # (name, text, the capture file)
    for p in inputs.amd_smi:
        texts.append((p.name, read_capture(p, "amd-smi"), p))
    if not inputs.amd_smi:
        for argv, vendor in (
            (["amd-smi", "static", "--json"], "amd"),  # the call that stands for the runtime
            (["amd-smi", "version", "--json"], None),
        ):
            text = _tool_text(facts, None, argv, live, vendor)
            if text:
                texts.append((" ".join(argv), text, None))
    for name, text, path in texts:
        try:
            parsed = parsers.parse_amd_smi(text)
        except ValueError as exc:
            if path is not None:  # a capture: another tool's is refused, a cut one is lost
                cut_json = parsers.has_json_start(text) and not identify(text)
                check_capture_kind("amd_smi", path, text, cut_json)
            facts["lost"].append(("amd-smi", f"{name} not understood: {exc}"))
            continue
        facts["notes"] += [f"amd-smi {name}: {s}" for s in parsed.get("skipped", [])]
        if parsed.get("truncated"):
            n = len(parsed.get("gpus", []))
            facts["lost"].append(("amd-smi", f"{parsed['truncated']}: {n} GPU(s) read"))
        if parsed["kind"] == "version":
            facts["amd_smi_version"] = parsed
            if parsed.get("rocm_version"):
                v.setdefault("rocm", parsed["rocm_version"])
                v.setdefault(
                    "rocm_evidence", f"amd-smi version: rocm_version {parsed['rocm_version']}"
                )
            if parsed.get("amdgpu_version"):
                v.setdefault("amdgpu_driver", parsed["amdgpu_version"])
                v.setdefault(
                    "amdgpu_driver_evidence",
                    f"amd-smi version: amdgpu_version {parsed['amdgpu_version']}",
                )
        else:
            facts["sources"]["amd-smi"] = parsed["gpus"]
            if parsed["kind"] == "static":
                facts["amd_smi_static"] = parsed["gpus"]
                archs.extend(a for g in parsed["gpus"] if (a := g.get("arch")))
                drv = next(
                    (g["driver_version"] for g in parsed["gpus"] if g.get("driver_version")), None
                )
                if drv:
                    v.setdefault("amdgpu_driver", drv)
                    v.setdefault("amdgpu_driver_evidence", f"amd-smi static: DRIVER VERSION {drv}")

    rs_text = _tool_text(facts, inputs.rocm_smi, ["rocm-smi"], live, "amd")
    if rs_text is not None:
        rs = parsers.parse_rocm_smi(rs_text)
        if inputs.rocm_smi is not None:
            found = bool(rs["gpus"] or rs["layout"] or rs["driver_version"])
            check_capture_kind("rocm_smi", inputs.rocm_smi, rs_text, found)
    if rs_text:
        facts["rocm_smi"] = rs
        if rs.get("truncated"):
            facts["lost"].append(
                ("rocm-smi", f"{rs['truncated']}: {len(rs['gpus'])} GPU(s) read before the cut")
            )
        if rs["gpus"]:
            facts["sources"]["rocm-smi"] = rs["gpus"]
        if rs.get("driver_version"):
            v.setdefault("amdgpu_driver", rs["driver_version"])
            v.setdefault(
                "amdgpu_driver_evidence", f"rocm-smi: Driver version: {rs['driver_version']}"
            )

    ri_text = _tool_text(facts, inputs.rocminfo, ["rocminfo"], live, "amd")
    if ri_text is not None:
        ri = parsers.parse_rocminfo(ri_text)
        if inputs.rocminfo is not None:
            found = bool(ri["gpus"] or ri["rock_loaded"] or ri["runtime_version"])
            check_capture_kind("rocminfo", inputs.rocminfo, ri_text, found)
    if ri_text:
        facts["rocminfo"] = ri
        if ri.get("truncated") and ri["gpus"]:
            facts["lost"].append(
                (
                    "rocminfo",
                    f"{ri['truncated']}: {len(ri['gpus'])} GPU agent(s) read before the cut",
                )
            )
        facts["sources"]["rocminfo"] = ri["gpus"]
        archs.extend(a for g in ri["gpus"] if (a := g.get("arch")))

    if live:
        am = amdsmi.inventory()
        facts["amdsmi"] = am
        _note_runtime(facts, "amd", "amdsmi", am.get("problem"), _lib_missing(am))
        if am.get("available"):
            facts["sources"]["amdsmi"] = am["gpus"]
            archs.extend(a for g in am["gpus"] if (a := g.get("arch")))
