"""The doctor: gather facts (from the machine or from captured outputs), then judge them.

`gather()` collects; `evaluate()` turns facts into `Check`s and never touches the
machine, so every rule can be tested on captured text. `run_doctor()` does both;
`quick_summary()` is the fast subset the benchmark runner stores in run.json.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.doctor import compat, parsers, runtimes, system
from accelbench.doctor.kernel_log import scan_kernel_log
from accelbench.doctor.model import Check, Report, Status
from accelbench.errors import AccelbenchError

NVIDIA_SOURCES = ("nvml", "nvidia-smi", "nvidia-smi topo", "collect_env")
AMD_SOURCES = ("amdsmi", "amd-smi", "rocm-smi", "rocminfo")
RUNTIME_VENDOR = {s: "nvidia" for s in NVIDIA_SOURCES} | {s: "amd" for s in AMD_SOURCES}


@dataclass
class DoctorInputs:
    """Where the doctor looks. Captured files replace the live query of the same tool;
    when any capture is given, the local machine is not queried at all (mixing a capture
    with this machine's state would report false mismatches) unless `live` is forced."""

    sysfs_root: Path | None = None
    kernel_log: Path | None = None
    lspci: Path | None = None
    nvidia_smi: Path | None = None
    nvidia_topo: Path | None = None
    rocm_smi: Path | None = None
    amd_smi: list[Path] = field(default_factory=list)
    rocminfo: Path | None = None
    collect_env: Path | None = None
    live: bool | None = None  # None: live only if no capture was given
    scan_kernel_log: bool = True

    def captures(self) -> dict[str, str]:
        out = {}
        for name in (
            "sysfs_root",
            "kernel_log",
            "lspci",
            "nvidia_smi",
            "nvidia_topo",
            "rocm_smi",
            "rocminfo",
            "collect_env",
        ):
            v = getattr(self, name)
            if v is not None:
                out[name] = str(v)
        if self.amd_smi:
            out["amd_smi"] = ", ".join(str(p) for p in self.amd_smi)
        return out

    @property
    def is_live(self) -> bool:
        return self.live if self.live is not None else not self.captures()


def _read_capture(path: Path, what: str) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        raise AccelbenchError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise AccelbenchError(f"{what} must be a file, not a directory: {path}") from None
    except OSError as exc:
        raise AccelbenchError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None


# ----------------------------------------------------------------------------- gather


def gather(inputs: DoctorInputs, quick: bool = False) -> dict[str, Any]:
    """Collect facts. quick=True reads only sysfs / procfs / version files (no tools,
    no NVML, no PyTorch, no kernel log): well under a second."""
    live = inputs.is_live
    facts: dict[str, Any] = {
        "live": inputs.is_live,
        "quick": quick,
        "problems": [],
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
            v, ev = fn(probe)
            if v:
                facts["versions"][key] = v
                facts["versions"][key + "_evidence"] = ev
        facts["iommu"] = system.iommu(probe)
        facts["hugepages"] = system.hugepages(probe)
        facts["numa_nodes"] = system.numa_nodes(probe)
        probs.extend(probe.problems)

    if inputs.lspci is not None:
        devs = parsers.parse_lspci(_read_capture(inputs.lspci, "lspci"))
        gpus = [
            d | {"vendor": {"10de": "nvidia", "1002": "amd"}[d["vendor_id"]]}
            for d in devs
            if d["is_gpu"]
        ]
        facts["pci"] = {"source": f"lspci ({inputs.lspci.name})", "gpus": gpus, "all": devs}

    _gather_nvidia(inputs, facts, live and not quick)
    _gather_amd(inputs, facts, live and not quick)

    if inputs.collect_env is not None:
        ce = parsers.parse_collect_env(_read_capture(inputs.collect_env, "collect_env"))
        facts["collect_env"] = ce
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
        if ce.get("os") and not v.get("os"):
            v["os"] = ce["os"]
            m = re.match(r"(\w+) ([\d.]+)", ce["os"])
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
        text = _read_capture(inputs.kernel_log, "kernel log")
        facts["kernel_log"] = {
            "source": str(inputs.kernel_log),
            "events": scan_kernel_log(text),
            "lines": text.count("\n") + 1,
            "driver_banners": _driver_banners(text),
        }
    elif live and not quick and inputs.scan_kernel_log:
        r = runtimes.read_kernel_log()
        if r.text:
            facts["kernel_log"] = {
                "source": r.source,
                "events": scan_kernel_log(r.text),
                "lines": r.text.count("\n") + 1,
                "driver_banners": _driver_banners(r.text),
            }
        else:
            facts["kernel_log"] = {"source": r.source, "problem": r.problem or "kernel log empty"}
    return facts


def _driver_banners(text: str) -> list[str]:
    out = []
    for m in re.finditer(r"NVRM: loading NVIDIA UNIX .*?Kernel Module\s+([\d.]+)", text):
        if m.group(1) not in out:
            out.append(m.group(1))
    return out


def _note_runtime(
    facts: dict[str, Any], vendor: str, tool: str, problem: str | None, missing: bool
) -> None:
    """Remember how each live runtime answered, to tell "no runtime installed" from
    "the runtime is installed but does not see the GPUs"."""
    facts.setdefault("runtimes", {}).setdefault(vendor, []).append(
        {"tool": tool, "problem": problem, "missing": bool(missing and problem)}
    )


def _lib_missing(info: dict[str, Any]) -> bool:
    """NVML / amdsmi unavailable because the library is absent (not a GPU failure)."""
    problem = str(info.get("problem") or "")
    return not info.get("available") and ("not importable" in problem or "Not Found" in problem)


def _gather_nvidia(inputs: DoctorInputs, facts: dict[str, Any], live: bool) -> None:
    v = facts["versions"]
    smi_text = None
    if inputs.nvidia_smi is not None:
        smi_text = _read_capture(inputs.nvidia_smi, "nvidia-smi")
    elif live:
        r = runtimes.run_tool(["nvidia-smi"])
        smi_text = r.text if not r.problem else None
        if r.problem and not r.missing:
            facts["problems"].append(r.problem)
        _note_runtime(facts, "nvidia", "nvidia-smi", r.problem, r.missing)
    if smi_text:
        smi = parsers.parse_nvidia_smi(smi_text)
        facts["sources"]["nvidia-smi"] = smi["gpus"]
        facts["nvidia_smi"] = smi
        if smi["driver_version"]:
            v.setdefault("nvidia_driver", smi["driver_version"])
            v.setdefault(
                "nvidia_driver_evidence", f"nvidia-smi: Driver Version: {smi['driver_version']}"
            )
        if smi["cuda_version"]:
            v["cuda_driver"] = smi["cuda_version"]
    if inputs.nvidia_topo is not None:
        topo = parsers.parse_nvidia_topo(_read_capture(inputs.nvidia_topo, "nvidia-smi topo -m"))
        facts["topo"] = topo
        facts["sources"]["nvidia-smi topo"] = topo["gpus"]
    if live:
        nv = runtimes.nvml_inventory()
        facts["nvml"] = nv
        _note_runtime(facts, "nvidia", "NVML", nv.get("problem"), _lib_missing(nv))
        if nv.get("available"):
            facts["sources"]["nvml"] = nv["gpus"]
            v.setdefault("nvidia_driver", nv.get("driver_version"))
            if nv.get("cuda_version"):
                v.setdefault("cuda_driver", nv["cuda_version"])


def _gather_amd(inputs: DoctorInputs, facts: dict[str, Any], live: bool) -> None:
    v = facts["versions"]
    archs: list[str] = facts.setdefault("amd_archs", [])
    texts: list[tuple[str, str]] = []
    for p in inputs.amd_smi:
        texts.append((p.name, _read_capture(p, "amd-smi")))
    if live and not inputs.amd_smi:
        for argv in (["amd-smi", "static", "--json"], ["amd-smi", "version", "--json"]):
            r = runtimes.run_tool(argv)
            if r.text and not r.problem:
                texts.append((" ".join(argv), r.text))
            elif not r.missing:
                facts["problems"].append(r.problem or "")
            if argv[1] == "static":
                _note_runtime(facts, "amd", "amd-smi", r.problem, r.missing)
    for name, text in texts:
        try:
            parsed = parsers.parse_amd_smi(text)
        except ValueError as exc:
            facts["problems"].append(f"amd-smi output {name} not understood: {exc}")
            continue
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
                archs.extend(g["arch"] for g in parsed["gpus"] if g.get("arch"))
                drv = next(
                    (g["driver_version"] for g in parsed["gpus"] if g.get("driver_version")), None
                )
                if drv:
                    v.setdefault("amdgpu_driver", drv)
                    v.setdefault("amdgpu_driver_evidence", f"amd-smi static: DRIVER VERSION {drv}")

    rs_text = None
    if inputs.rocm_smi is not None:
        rs_text = _read_capture(inputs.rocm_smi, "rocm-smi")
    elif live:
        r = runtimes.run_tool(["rocm-smi"])
        rs_text = r.text if not r.problem else None
        if r.problem and not r.missing:
            facts["problems"].append(r.problem)
        _note_runtime(facts, "amd", "rocm-smi", r.problem, r.missing)
    if rs_text:
        rs = parsers.parse_rocm_smi(rs_text)
        facts["rocm_smi"] = rs
        if rs["gpus"]:
            facts["sources"]["rocm-smi"] = rs["gpus"]
        if rs.get("driver_version"):
            v.setdefault("amdgpu_driver", rs["driver_version"])
            v.setdefault(
                "amdgpu_driver_evidence", f"rocm-smi: Driver version: {rs['driver_version']}"
            )

    ri_text = None
    if inputs.rocminfo is not None:
        ri_text = _read_capture(inputs.rocminfo, "rocminfo")
    elif live:
        r = runtimes.run_tool(["rocminfo"])
        ri_text = r.text if not r.problem else None
        if r.problem and not r.missing:
            facts["problems"].append(r.problem)
        _note_runtime(facts, "amd", "rocminfo", r.problem, r.missing)
    if ri_text:
        ri = parsers.parse_rocminfo(ri_text)
        facts["rocminfo"] = ri
        facts["sources"]["rocminfo"] = ri["gpus"]
        archs.extend(g["arch"] for g in ri["gpus"] if g.get("arch"))

    if live:
        am = runtimes.amdsmi_inventory()
        facts["amdsmi"] = am
        _note_runtime(facts, "amd", "amdsmi", am.get("problem"), _lib_missing(am))
        if am.get("available"):
            facts["sources"]["amdsmi"] = am["gpus"]
            archs.extend(g["arch"] for g in am["gpus"] if g.get("arch"))


# ----------------------------------------------------------------------------- evaluate


def _vendor_counts(facts: dict[str, Any]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {"nvidia": {}, "amd": {}}
    pci = facts.get("pci")
    if pci is not None:
        for vendor in counts:
            counts[vendor]["pci"] = sum(1 for g in pci["gpus"] if g["vendor"] == vendor)
    for src, gpus in facts["sources"].items():
        counts[RUNTIME_VENDOR[src]][src] = len(gpus)
    return counts


def check_inventory(facts: dict[str, Any]) -> list[Check]:
    counts = _vendor_counts(facts)
    pci = facts.get("pci")
    checks: list[Check] = []
    names = {"nvidia": "NVIDIA", "amd": "AMD"}
    ev: list[str] = []
    if pci is not None:
        for g in pci["gpus"]:
            ev.append(
                f"{g['bdf']} {names[g['vendor']]} "
                f"{g.get('description') or g.get('device_id') or ''}"
                f" driver={g.get('driver') or 'none'}".rstrip()
            )
    for src, gpus in facts["sources"].items():
        shown = ", ".join(sorted({str(g.get("name")) for g in gpus if g.get("name")})) or "-"
        ev.append(f"{src}: {len(gpus)} GPU(s) [{shown}]")
    total_pci = sum(c.get("pci", 0) for c in counts.values())
    total_rt = max([n for c in counts.values() for s, n in c.items() if s != "pci"] or [0])
    ce_models = (facts.get("collect_env") or {}).get("gpu_models") or []
    if total_pci == 0 and total_rt == 0 and ce_models:
        checks.append(
            Check(
                "inventory.accelerators",
                "Accelerators",
                Status.PASS,
                f"collect_env reports {', '.join(sorted(set(ce_models)))}; "
                "no PCI or runtime inventory captured",
                [f"collect_env: {m}" for m in ce_models],
                "",
                {"counts": counts},
            )
        )
    elif total_pci == 0 and total_rt == 0:
        where = pci["source"] if pci else "no PCI information"
        checks.append(
            Check(
                "inventory.accelerators",
                "Accelerators",
                Status.NA,
                f"No NVIDIA or AMD accelerator found ({where}); GPU checks do not apply",
                ev + [f"runtimes queried: {', '.join(facts['sources']) or 'none found'}"],
                "Nothing to do on a CPU-only machine. On a GPU machine: check that the "
                "card is seated and powered (lspci -nn | grep -Ei '10de|1002').",
                {"counts": counts},
            )
        )
    else:
        parts = [
            f"{n} {names[v]}"
            for v, c in counts.items()
            for n in [c.get("pci", max(c.values(), default=0))]
            if n
        ]
        missing_driver = [
            g["bdf"]
            for g in (pci or {}).get("gpus", [])
            if "driver" in g and g.get("driver") is None and pci["source"].startswith("sysfs")
        ]
        st = Status.FAIL if missing_driver else Status.PASS
        summary = f"{', '.join(parts)} accelerator(s)"
        remedy = ""
        if missing_driver:
            summary += f"; no kernel driver bound to {', '.join(missing_driver)}"
            remedy = (
                "Install / load the vendor driver (nvidia or amdgpu); "
                "check dmesg for why it did not bind."
            )
        checks.append(
            Check(
                "inventory.accelerators",
                "Accelerators",
                st,
                summary,
                ev,
                remedy,
                {"counts": counts},
            )
        )

    # PCI sees GPUs that no runtime answers for (live mode only: captures may omit tools).
    for vendor, c in counts.items():
        ran = (facts.get("runtimes") or {}).get(vendor)
        if not c.get("pci") or not ran or any(s != "pci" and n for s, n in c.items()):
            continue
        ev = [f"{r['tool']}: {r['problem'] or 'no GPUs reported'}" for r in ran]
        if all(r["missing"] for r in ran):
            checks.append(
                Check(
                    "inventory.runtime",
                    "Runtime sees the GPUs",
                    Status.WARN,
                    f"{c['pci']} {names[vendor]} GPU(s) on the PCI bus but no "
                    f"{names[vendor]} runtime is installed to confirm them",
                    ev,
                    "Install the driver user space (nvidia-utils / amd-smi, rocm-smi).",
                )
            )
        else:
            checks.append(
                Check(
                    "inventory.runtime",
                    "Runtime sees the GPUs",
                    Status.FAIL,
                    f"{c['pci']} {names[vendor]} GPU(s) on the PCI bus, none seen by the runtime",
                    ev,
                    "The driver is not working: check that the kernel module is loaded and "
                    "matches the user space (dmesg | grep -iE 'nvrm|amdgpu'), then reboot.",
                )
            )

    # Agreement between sources, per vendor.
    mism: list[str] = []
    soft: list[str] = []
    compared = False
    for vendor, c in counts.items():
        if len([n for n in c.values()]) < 2 or not any(c.values()):
            continue
        compared = True
        if len(set(c.values())) == 1:
            continue
        desc = ", ".join(f"{s}={n}" for s, n in c.items())
        pci_n = c.get("pci")
        partitioned = any(
            g.get("compute_partition") not in (None, "SPX")
            for src in ("rocm-smi", "amd-smi")
            for g in facts["sources"].get(src, [])
        )
        if (
            pci_n is not None
            and vendor == "amd"
            and partitioned
            and all(n >= pci_n for s, n in c.items() if s != "pci")
        ):
            soft.append(f"{names[vendor]}: {desc} (compute partitioning shows more logical GPUs)")
            continue
        lost = [s for s, n in c.items() if pci_n is not None and s != "pci" and n < pci_n]
        if lost:
            mism.append(
                f"{names[vendor]}: {desc}; seen on the PCI bus but not by {', '.join(lost)}"
            )
        else:
            mism.append(f"{names[vendor]}: {desc}")
    if not compared:
        checks.append(
            Check(
                "inventory.agreement",
                "Sources agree",
                Status.NA,
                "Fewer than two sources report accelerators; nothing to compare",
            )
        )
    elif mism:
        checks.append(
            Check(
                "inventory.agreement",
                "Sources agree",
                Status.FAIL,
                "GPU counts differ between sources: " + "; ".join(mism),
                mism + soft,
                "A GPU missing from a runtime is usually a driver that failed on it "
                "(see the kernel log: Xid 79 / RmInitAdapter / amdgpu init errors), a "
                "GPU hidden by CUDA_VISIBLE_DEVICES / a container, or a dead GPU. "
                "Reset or reboot, then service it if it stays missing.",
                {"counts": counts},
            )
        )
    else:
        checks.append(
            Check(
                "inventory.agreement",
                "Sources agree",
                Status.WARN if soft else Status.PASS,
                "All sources report the same GPU count" if not soft else soft[0],
                [
                    f"{names[v]}: " + ", ".join(f"{s}={n}" for s, n in c.items())
                    for v, c in counts.items()
                    if c and any(c.values())
                ]
                + soft,
                ""
                if not soft
                else "Expected with CPX/DPX partitioning; make sure benchmarks count logical GPUs.",
                {"counts": counts},
            )
        )
    return checks


def check_versions(facts: dict[str, Any]) -> list[Check]:
    v = facts["versions"]
    checks = []
    ev = [f"{k}: {v[k]}" for k in ("kernel", "os") if v.get(k)]
    if ev:
        checks.append(
            Check(
                "versions.system",
                "Kernel and OS",
                Status.PASS,
                f"{v.get('os') or 'OS unknown'}, kernel {v.get('kernel') or 'unknown'}",
                ev,
            )
        )
    else:
        checks.append(
            Check(
                "versions.system",
                "Kernel and OS",
                Status.NA,
                "Not captured (no --sysfs-root / collect_env given)",
            )
        )
    counts = _vendor_counts(facts)
    has = {vendor: any(c.values()) for vendor, c in counts.items()}
    drv_ev, problems = [], []
    for key, label, vendor in (
        ("nvidia_driver", "NVIDIA driver", "nvidia"),
        ("amdgpu_driver", "amdgpu driver", "amd"),
    ):
        if v.get(key):
            drv_ev.append(f"{label} {v[key]} ({v.get(key + '_evidence') or 'runtime'})")
        elif has[vendor] and facts.get("system_read"):
            problems.append(f"{label}: version not found (module not loaded or files unreadable)")
        elif has[vendor]:
            drv_ev.append(f"{label}: version not captured")
    banners = (facts.get("kernel_log") or {}).get("driver_banners") or []
    if banners:
        drv_ev.append(f"kernel log: NVIDIA kernel module {', '.join(banners)} loaded")
        if v.get("nvidia_driver") and banners[-1] != v["nvidia_driver"]:
            problems.append(
                f"kernel log loaded module {banners[-1]} but user space reports "
                f"{v['nvidia_driver']}: reboot / reload after the driver update"
            )
    amd_errs = (facts.get("amd_smi_version") or {}).get("errors") or []
    problems += [f"amd-smi version: {e}" for e in amd_errs]
    if not drv_ev and not problems:
        checks.append(
            Check(
                "versions.driver",
                "GPU drivers",
                Status.NA,
                "No NVIDIA or AMD kernel driver present",
            )
        )
    else:
        status = Status.WARN if problems else Status.PASS
        remedy = ""
        if amd_errs:
            remedy = (
                "amd-smi could not read some driver files: "
                "run it as root (or in the render/video groups)."
            )
        elif problems:
            remedy = (
                "Load the driver (modprobe nvidia / amdgpu) or run with access to "
                "/proc/driver and /sys/module."
            )
        checks.append(
            Check(
                "versions.driver",
                "GPU drivers",
                status,
                "; ".join(drv_ev + problems) if problems else "; ".join(drv_ev),
                drv_ev + problems,
                remedy,
            )
        )
    stack = []
    for key, label in (
        ("cuda_driver", "CUDA (driver supports)"),
        ("cuda_toolkit", "CUDA toolkit"),
        ("rocm", "ROCm"),
    ):
        if v.get(key):
            stack.append(
                f"{label} {v[key]}"
                + (f" ({v[key + '_evidence']})" if v.get(key + "_evidence") else "")
            )
    t = facts.get("torch") or {}
    if t.get("installed"):
        build = (
            f"ROCm {t['hip']}"
            if t.get("hip")
            else (f"CUDA {t['cuda']}" if t.get("cuda") else "CPU only")
        )
        stack.append(f"PyTorch {t.get('version')} ({build} build)")
    checks.append(
        Check(
            "versions.stack",
            "CUDA / ROCm / PyTorch",
            Status.PASS if stack else Status.NA,
            "; ".join(stack) if stack else "No CUDA, ROCm or PyTorch found",
            stack,
        )
    )
    return checks


def check_torch(facts: dict[str, Any]) -> Check:
    t = facts.get("torch")
    counts = _vendor_counts(facts)
    n_nv = max(counts["nvidia"].values(), default=0)
    n_amd = max(counts["amd"].values(), default=0)
    title = "PyTorch sees the GPUs"
    if t is None:
        return Check(
            "torch.devices",
            title,
            Status.NA,
            "Not checked (quick mode or captures without collect_env)",
        )
    if not t.get("installed"):
        st = Status.WARN if (n_nv or n_amd) else Status.NA
        return Check(
            "torch.devices",
            title,
            st,
            "PyTorch is not installed in this Python"
            + ("" if st == Status.WARN else " (not needed without GPUs)"),
            [t.get("problem") or ""],
            "Install the PyTorch build for your platform if "
            "the serving stack runs in this environment."
            if st == Status.WARN
            else "",
        )
    build = "rocm" if t.get("hip") else ("cuda" if t.get("cuda") else "cpu")
    ev = [
        f"torch {t.get('version')}: torch.version.cuda={t.get('cuda')}, "
        f"torch.version.hip={t.get('hip')}",
        f"torch.cuda.is_available()={t.get('available')}, device_count={t.get('device_count')}",
    ]
    ev += [f"  {d}" for d in t.get("devices") or []]
    if not (n_nv or n_amd):
        if t.get("available") and t.get("devices"):  # e.g. a collect_env capture alone
            return Check(
                "torch.devices",
                title,
                Status.PASS,
                f"PyTorch {t.get('version')} ({build} build) sees {', '.join(t['devices'])}",
                ev,
            )
        return Check(
            "torch.devices",
            title,
            Status.NA,
            f"PyTorch {t.get('version')} ({build} build); no GPUs to see",
            ev,
        )
    want = "cuda" if n_nv >= n_amd else "rocm"
    n_want = n_nv if want == "cuda" else n_amd
    if build != want:
        return Check(
            "torch.devices",
            title,
            Status.FAIL,
            f"PyTorch is a {build} build but the GPUs are {'NVIDIA' if want == 'cuda' else 'AMD'}",
            ev,
            f"Install the {want.upper()} build of PyTorch (pip index "
            f"https://download.pytorch.org/whl/<{'cuXXX' if want == 'cuda' else 'rocmX.Y'}>).",
        )
    if not t.get("available"):
        return Check(
            "torch.devices",
            title,
            Status.FAIL,
            "PyTorch cannot use the GPUs (torch.cuda.is_available() is False)",
            ev + [t.get("problem") or ""],
            "Usually a driver / runtime mismatch or missing device permissions "
            "(/dev/nvidia*, /dev/kfd and /dev/dri need to be accessible).",
        )
    dc = t.get("device_count")
    if dc is not None and dc < n_want:
        return Check(
            "torch.devices",
            title,
            Status.FAIL,
            f"PyTorch sees {dc} of {n_want} GPUs",
            ev,
            "Check CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES "
            "and the container's device list.",
        )
    return Check(
        "torch.devices",
        title,
        Status.PASS,
        f"PyTorch {t.get('version')} ({build} build) sees {dc if dc is not None else 'the'} GPU(s)",
        ev,
    )


def _from_findings(cid: str, title: str, findings: list[tuple[str, str, str]], na: str) -> Check:
    if not findings:
        return Check(cid, title, Status.NA, na)
    order = {"fail": 2, "warn": 1, "pass": 0}
    worst = max(findings, key=lambda f: order[f[0]])
    status = {"fail": Status.FAIL, "warn": Status.WARN, "pass": Status.PASS}[worst[0]]
    bad = [f for f in findings if f[0] != "pass"]
    summary = "; ".join(f[1] for f in bad) if bad else "; ".join(f[1] for f in findings)
    remedy = " ".join(dict.fromkeys(f[2] for f in bad if f[2]))
    return Check(cid, title, status, summary, [f"{f[0]}: {f[1]}" for f in findings], remedy)


def check_compat(facts: dict[str, Any]) -> list[Check]:
    v = facts["versions"]
    t = facts.get("torch") or {}
    counts = _vendor_counts(facts)
    nv_present = any(counts["nvidia"].values()) or bool(v.get("nvidia_driver"))
    amd_present = (
        any(counts["amd"].values())
        or bool(v.get("amdgpu_driver") and v["amdgpu_driver"] != "in-tree")
        or bool(facts.get("amd_archs"))
    )
    torch_cuda = t.get("cuda") or compat.torch_cuda_from_version(t.get("version"))
    cuda = (
        compat.check_cuda(
            v.get("nvidia_driver"),
            v.get("cuda_driver"),
            torch_cuda if nv_present else None,
            v.get("cuda_toolkit"),
        )
        if nv_present
        else []
    )
    if nv_present and not cuda and v.get("nvidia_driver"):
        cuda = [
            ("pass", f"driver {v['nvidia_driver']}; no PyTorch or CUDA toolkit to compare with", "")
        ]
    torch_hip = t.get("hip") or compat.torch_rocm_from_version(t.get("version"))
    rocm = (
        compat.check_rocm(
            v.get("rocm"),
            facts.get("amd_archs") or [],
            v.get("os_id"),
            v.get("os_version"),
            torch_hip,
        )
        if amd_present
        else []
    )
    if amd_present and not v.get("rocm") and facts.get("system_read"):
        rocm.append(
            (
                "warn",
                "ROCm version not found (/opt/rocm/.info/version, amd-smi version)",
                "Install ROCm or pass `amd-smi version --json` output with --amd-smi.",
            )
        )
    return [
        _from_findings(
            "compat.cuda",
            "CUDA driver / toolkit / PyTorch",
            cuda,
            "No NVIDIA GPU or driver, or no versions captured: not applicable",
        ),
        _from_findings(
            "compat.rocm",
            "ROCm / GPU arch / OS / PyTorch",
            rocm,
            "No AMD GPU, or no ROCm version captured: not applicable",
        ),
    ]


def check_kernel_log(facts: dict[str, Any]) -> Check:
    kl = facts.get("kernel_log")
    title = "Kernel log"
    if kl is None:
        return Check(
            "kernel.log", title, Status.NA, "Not scanned (quick mode, or no --kernel-log capture)"
        )
    if kl.get("problem"):
        return Check(
            "kernel.log",
            title,
            Status.WARN,
            f"Kernel log unreadable: {kl['problem']}",
            [kl["problem"]],
            "Run as root, add the user to the adm / systemd-journal "
            "group, or pass a saved log: journalctl -k -b > k.log; "
            "accelbench doctor --kernel-log k.log",
        )
    events = kl["events"]
    data = {"source": kl["source"], "events": [e.to_dict() for e in events]}
    if not events:
        return Check(
            "kernel.log",
            title,
            Status.PASS,
            f"No GPU error signatures in {kl['lines']} lines ({kl['source']})",
            [],
            "",
            data,
        )
    worst = events[0].severity
    status = (
        Status.FAIL
        if worst in ("critical", "error")
        else (Status.WARN if worst == "warning" else Status.PASS)
    )
    ev = []
    for e in events:
        when = f", first {e.first}, last {e.last}" if e.first else ""
        devs = f" on {', '.join(sorted(e.devices))}" if e.devices else ""
        ev.append(f"[{e.severity}] {e.title}: {e.count}x{devs}{when}")
        ev.append(f"    e.g. {e.example}")
    top = events[0]
    summary = "; ".join(f"{e.title} x{e.count} ({e.severity})" for e in events[:3])
    return Check("kernel.log", title, status, summary, ev, top.action, data)


def _link_finding(
    label: str, d: dict[str, Any], limit: dict[str, Any] | None = None
) -> tuple[str, str] | None:
    """Judge one link. `limit` is the GPU below an upstream bridge: a bridge only has to
    run as fast and as wide as the GPU can (a Gen5 switch port feeding a Gen4 device
    shows "downgraded" and is fine)."""
    cs, ss, cw, sw = d.get("cap_speed"), d.get("sta_speed"), d.get("cap_width"), d.get("sta_width")
    if None in (cs, ss, cw, sw):
        return None
    if limit is not None:
        cs = min(cs, limit.get("cap_speed") or cs)
        cw = min(cw, limit.get("cap_width") or cw)
    if sw < cw:
        return "fail", f"{label} x{sw} of x{cw} at {ss:g} GT/s (max {cs:g} GT/s)"
    if ss < cs:
        return "warn", f"{label} {ss:g} GT/s of {cs:g} GT/s, x{sw}"
    return "pass", f"{label} {ss:g} GT/s x{sw} (max {cs:g} GT/s x{cw})"


def check_pcie(facts: dict[str, Any]) -> Check:
    title = "PCIe links"
    pci = facts.get("pci")
    gpus = (pci or {}).get("gpus") or []
    findings: list[tuple[str, str]] = []
    alldevs = (pci or {}).get("all")
    by_secondary = {}
    if alldevs:
        by_secondary = {d["secondary_bus"]: d for d in alldevs if "secondary_bus" in d}
    # Utilisation by PCI address: an idle GPU lowers its link speed to save power, so a
    # slow (but full-width) link on a GPU known to be idle is not a finding.
    util = {
        g["bdf"]: g.get("utilization_pct")
        for g in (facts.get("nvidia_smi") or {}).get("gpus", [])
        if g.get("utilization_pct") is not None
    }

    def judged(f: tuple[str, str] | None, g: dict[str, Any]) -> tuple[str, str] | None:
        if f and f[0] == "warn" and util.get(g["bdf"], 100) <= 10:
            return "pass", f"{f[1]} (GPU idle at {util[g['bdf']]}%: power-saving link speed)"
        if f and f[0] == "warn" and facts.get("quick"):
            # quick mode runs before a benchmark, on idle GPUs, and cannot ask for utilisation
            return "pass", f"{f[1]} (speed not judged in quick mode: idle GPUs slow their link)"
        return f

    for g in gpus:
        f = judged(_link_finding(f"GPU {g['bdf']}", g), g)
        if f is None:
            findings.append(
                ("na", f"GPU {g['bdf']}: link status not reported (lspci shows it only to root)")
            )
            continue
        findings.append(f)
        # Walk the upstream bridges: a GPU at full link behind a slow switch port is slow too.
        bus = int(g["bdf"].split(":")[1], 16)
        seen = 0
        while bus in by_secondary and seen < 8:
            br = by_secondary[bus]
            uf = judged(
                _link_finding(f"  upstream {br['bdf']} ({br['description'][:40]})", br, g), g
            )
            if uf and uf[0] != "pass":
                findings.append(uf)
            bus = int(br["bdf"].split(":")[1], 16)
            seen += 1
    for g in gpus:
        for up in g.get("upstream", []):
            uf = judged(_link_finding(f"  upstream {up['bdf']} of GPU {g['bdf']}", up, g), g)
            if uf and uf[0] != "pass":
                findings.append(uf)
    replay = [
        (g["index"], g["pcie_replay_count"])
        for g in (facts.get("rocm_smi") or {}).get("gpus", [])
        if g.get("pcie_replay_count")
    ]
    for idx, n in replay:
        findings.append(("warn", f"GPU[{idx}] PCIe replay count {n} (link retransmissions)"))
    other_down = []
    if alldevs:
        gpu_bdfs = {g["bdf"] for g in gpus}
        other_down = [
            d
            for d in alldevs
            if d["bdf"] not in gpu_bdfs
            and "downgraded" in (d.get("sta_speed_flag"), d.get("sta_width_flag"))
        ]
    ev = [f"{lvl}: {msg}" for lvl, msg in findings]
    if other_down:
        ev.append(
            f"not judged: {len(other_down)} non-GPU link(s) below capability (NICs, NVMe, "
            "BMC bridges, switch ports feeding Gen4 devices are normally so): "
            + ", ".join(d["bdf"] for d in other_down[:8])
            + ("..." if len(other_down) > 8 else "")
        )
    if not gpus and not replay:
        return Check(
            "pcie.links",
            title,
            Status.NA,
            "No accelerator links to check"
            + (f" ({len(other_down)} non-GPU downgraded link(s) ignored)" if other_down else ""),
            ev,
            "",
            {"non_gpu_downgraded": [d["bdf"] for d in other_down]},
        )
    levels = [lvl for lvl, _ in findings]
    bad = [msg.strip() for lvl, msg in findings if lvl in ("fail", "warn")]
    if "fail" in levels:
        st = Status.FAIL
    elif "warn" in levels:
        st = Status.WARN
    elif "pass" in levels:
        st = Status.PASS
    else:
        st = Status.NA
    remedy = ""
    if "fail" in levels:
        remedy = (
            "A narrower link than the slot supports is a seating, riser, cable or BIOS "
            "bifurcation problem: reseat the GPU / check the riser, then lspci -vvv again. "
        )
    if "warn" in levels:
        remedy += (
            "GPUs lower the link speed when idle to save power: re-check under load "
            "(nvidia-smi -q -d PCIE / watch current_link_speed); if it stays low, check "
            "BIOS PCIe generation settings and retimers. On MI300X the device's own "
            "link may be internal to the OAM; judge the upstream switch port."
        )
    summary = (
        "; ".join(bad)
        if bad
        else f"{sum(1 for lvl in levels if lvl == 'pass')} GPU link(s) at full speed and width"
    )
    return Check(
        "pcie.links",
        title,
        st,
        summary,
        ev,
        remedy.strip(),
        {"non_gpu_downgraded": [d["bdf"] for d in other_down]},
    )


def check_memory(facts: dict[str, Any]) -> Check:
    title = "ECC and retired memory"
    f: list[tuple[str, str, str]] = []
    smi = facts.get("nvidia_smi")
    for g in (smi or {}).get("gpus", []):
        e = g.get("ecc_uncorrected")
        if e and e.isdigit():
            if int(e) > 0:
                f.append(
                    (
                        "fail",
                        f"GPU {g['index']} ({g['bdf']}): {e} volatile uncorrected ECC errors",
                        "Drain the GPU and reset it; check nvidia-smi -q -d ECC,ROW_REMAPPER.",
                    )
                )
            else:
                f.append(("pass", f"GPU {g['index']} ({g['bdf']}): 0 uncorrected ECC errors", ""))
        elif e:
            f.append(("pass", f"GPU {g['index']} ({g['bdf']}): ECC {e}", ""))
    for g in (facts.get("nvml") or {}).get("gpus", []):
        tag = f"GPU {g['index']}"
        if g.get("ecc_uncorrected"):
            f.append(
                (
                    "fail",
                    f"{tag}: {g['ecc_uncorrected']} uncorrected ECC errors (NVML)",
                    "Drain and reset the GPU; service it if they recur.",
                )
            )
        if g.get("retired_pages_dbe"):
            f.append(
                ("warn", f"{tag}: {g['retired_pages_dbe']} pages retired for double-bit errors", "")
            )
        if g.get("retired_pages_pending"):
            f.append(
                ("warn", f"{tag}: page retirement pending", "Reset the GPU to retire the page.")
            )
        rr = g.get("remapped_rows")
        if rr and len(rr) >= 4:
            if rr[3]:
                f.append(("fail", f"{tag}: row remapping failed", "Contact the vendor (RMA)."))
            elif rr[2]:
                f.append(("warn", f"{tag}: row remapping pending", "Reset the GPU to apply it."))
        if "ecc_uncorrected" in g and not g.get("ecc_uncorrected"):
            f.append(("pass", f"{tag}: 0 uncorrected ECC errors (NVML)", ""))
    for g in (facts.get("pci") or {}).get("gpus", []):
        ras = g.get("ras") or {}
        for block, c in ras.items():
            if block == "bad_pages":
                if c:
                    f.append(
                        (
                            "warn",
                            f"{g['bdf']}: {c} retired (bad) VRAM pages",
                            "Track with amd-smi bad-pages; replace the GPU near the threshold.",
                        )
                    )
                continue
            if c.get("ue"):
                f.append(
                    (
                        "fail",
                        f"{g['bdf']}: {block} {c['ue']} uncorrectable errors",
                        "Drain the GPU; reset it and check bad pages.",
                    )
                )
            elif c.get("ce"):
                f.append(
                    (
                        "warn",
                        f"{g['bdf']}: {block} {c['ce']} correctable errors",
                        "Watch the counter; a rising rate predicts failure.",
                    )
                )
        if ras and not any(lvl != "pass" for lvl, *_ in f):
            f.append(("pass", f"{g['bdf']}: RAS counters zero", ""))
    for g in facts.get("amd_smi_static") or []:
        tag = f"GPU {g['index']} ({g.get('bdf')})"
        if "umc" in g.get("ecc_blocks_disabled", []):
            f.append(
                (
                    "warn",
                    f"{tag}: HBM ECC (UMC block) disabled",
                    "Enable ECC for production serving (amdgpu.ras_enable / firmware setting); "
                    "without it memory errors go unnoticed.",
                )
            )
        if str(g.get("bad_page_threshold_exceeded")).lower() == "true":
            f.append(("fail", f"{tag}: bad page threshold exceeded", "Replace the GPU (RMA)."))
        elif g.get("bad_page_threshold_exceeded") is not None:
            f.append(("pass", f"{tag}: bad page threshold not exceeded", ""))
    for g in (facts.get("amdsmi") or {}).get("gpus", []):
        if g.get("ecc_uncorrected"):
            f.append(
                (
                    "fail",
                    f"GPU {g['index']}: {g['ecc_uncorrected']} uncorrectable ECC errors (amdsmi)",
                    "Drain the GPU; check bad pages.",
                )
            )
        elif g.get("ecc_corrected"):
            f.append(
                (
                    "warn",
                    f"GPU {g['index']}: {g['ecc_corrected']} correctable ECC errors (amdsmi)",
                    "",
                )
            )
    return _from_findings(
        "memory.ecc", title, f, "No ECC / RAS counters available (no GPU, or not reported)"
    )


def check_idle(facts: dict[str, Any]) -> Check:
    """GPUs already busy before a benchmark make its numbers wrong (shared memory, clocks,
    contention), so memory in use, utilisation and foreign processes are reported."""
    title = "GPUs idle"
    f: list[tuple[str, str, str]] = []
    remedy = (
        "Stop other work on these GPUs before benchmarking (or benchmark on other GPUs); "
        "results taken on busy GPUs are not comparable."
    )
    smi = facts.get("nvidia_smi")
    if smi:
        for g in smi["gpus"]:
            if "memory_used_mib" not in g:
                continue
            used, total, util = (
                g["memory_used_mib"],
                g["memory_total_mib"],
                g.get("utilization_pct"),
            )
            tag = f"GPU {g['index']} ({g['bdf']}): {used} of {total} MiB used, {util}% busy"
            busy = (total and used / total > 0.05) or (util or 0) > 10
            f.append(("warn" if busy else "pass", tag, remedy if busy else ""))
        busy_any = any(lvl == "warn" for lvl, *_ in f)
        if busy_any and smi.get("processes", 0) == 0:
            f.append(
                (
                    "warn",
                    "no processes listed although the GPUs are busy: they run in "
                    "another container / PID namespace",
                    remedy,
                )
            )
        elif smi.get("processes"):
            f.append(("warn", f"{smi['processes']} process(es) listed on the GPUs", remedy))
    for g in (facts.get("rocm_smi") or {}).get("gpus", []):
        if "vram_pct" not in g:
            continue
        busy = g["vram_pct"] > 5 or g["utilization_pct"] > 10
        f.append(
            (
                "warn" if busy else "pass",
                f"GPU[{g['index']}]: VRAM {g['vram_pct']:g}% used, {g['utilization_pct']:g}% busy",
                remedy if busy else "",
            )
        )
    return _from_findings(
        "gpu.idle", title, f, "No utilisation information (no GPU, or not captured)"
    )


def check_iommu(facts: dict[str, Any]) -> Check:
    title = "IOMMU mode"
    io = facts.get("iommu")
    if io is None:
        return Check("system.iommu", title, Status.NA, "Not captured")
    gpus = (facts.get("pci") or {}).get("gpus", [])
    types = sorted({g.get("iommu_group_type") for g in gpus if g.get("iommu_group_type")})
    ev = [
        f"IOMMU units: {len(io['units'])}",
        f"kernel command line: {' '.join(io['cmdline']) or '(no iommu options)'}",
    ]
    if types:
        ev.append(f"GPU IOMMU domain types: {', '.join(types)}")
    enabled = bool(io["units"])
    mode = (
        "passthrough"
        if "identity" in types
        or any(t in ("iommu=pt", "iommu.passthrough=1") for t in io["cmdline"])
        else "translated"
        if enabled
        else "off"
    )
    if not gpus:
        return Check("system.iommu", title, Status.NA, f"IOMMU {mode}; no accelerators", ev)
    amd = any(g["vendor"] == "amd" for g in gpus)
    if amd and mode == "translated":
        return Check(
            "system.iommu",
            title,
            Status.WARN,
            "IOMMU translates GPU DMA (not passthrough)",
            ev,
            "AMD's MI300X system-optimisation guide recommends iommu=pt on the kernel "
            "command line for peer-to-peer and RDMA performance; add it and reboot.",
        )
    return Check("system.iommu", title, Status.PASS, f"IOMMU {mode}", ev)


def check_hugepages(facts: dict[str, Any]) -> Check:
    hp = facts.get("hugepages")
    if not hp:
        return Check("system.hugepages", "Huge pages", Status.NA, "Not captured")
    ev = [f"{k}: {v}" for k, v in hp.items()]
    thp = hp.get("thp", "unknown")
    total = hp.get("HugePages_Total", 0)
    size = hp.get("Hugepagesize", 0)
    summary = f"transparent huge pages: {thp}; reserved huge pages: {total} x {size} kB"
    if total and hp.get("MemTotal") and total * size > 0.5 * hp["MemTotal"]:
        return Check(
            "system.hugepages",
            "Huge pages",
            Status.WARN,
            summary + " (over half of RAM reserved)",
            ev,
            "Reserved huge pages are not available to ordinary allocations "
            "(model loading, pinned buffers): release them unless something uses them.",
        )
    return Check("system.hugepages", "Huge pages", Status.PASS, summary, ev)


def check_numa(facts: dict[str, Any]) -> Check:
    title = "NUMA placement"
    ev: list[str] = []
    nodes = facts.get("numa_nodes") or []
    gpus = (facts.get("pci") or {}).get("gpus", [])
    placement: dict[str, Any] = {}
    for g in gpus:
        if "numa_node" in g:
            placement[g["bdf"]] = g["numa_node"]
    for g in (facts.get("topo") or {}).get("gpus", []):
        ev.append(
            f"{g['name']}: NUMA affinity {g.get('numa_affinity')}, CPUs {g.get('cpu_affinity')}"
        )
        placement.setdefault(g["name"], _int(g.get("numa_affinity")))
    for i, n in (facts.get("amd_numa") or {}).items():
        placement.setdefault(f"GPU[{i}]", n)
    for g in facts.get("amd_smi_static") or []:
        if g.get("numa_node") is not None:
            placement.setdefault(f"GPU {g['index']} ({g.get('bdf')})", g["numa_node"])
    if not placement:
        return Check("system.numa", title, Status.NA, "No accelerators with NUMA information")
    ev = [
        f"{k}: node {v}"
        for k, v in placement.items()
        if not k.startswith("GPU") or "(" in k or "[" in k
    ] + ev
    unknown = [k for k, v in placement.items() if v is None or v < 0]
    per_node: dict[Any, int] = {}
    for v in placement.values():
        per_node[v] = per_node.get(v, 0) + 1
    dist = ", ".join(f"node {k}: {n}" for k, n in sorted(per_node.items(), key=lambda x: str(x[0])))
    if unknown and len(nodes) > 1:
        return Check(
            "system.numa",
            title,
            Status.WARN,
            f"NUMA node unknown for {len(unknown)} GPU(s) on a {len(nodes)}-node machine",
            ev,
            "The firmware does not report PCI proximity (ACPI _PXM): pin serving "
            "processes with numactl using nvidia-smi topo -m / rocm-smi --showtopo.",
            {"placement": placement},
        )
    return Check(
        "system.numa",
        title,
        Status.PASS,
        f"GPUs per NUMA node: {dist}",
        ev,
        "",
        {"placement": placement},
    )


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def check_problems(facts: dict[str, Any]) -> Check:
    probs = [p for p in facts["problems"] if p]
    if not probs:
        return Check(
            "doctor.access",
            "Files and tools readable",
            Status.PASS,
            "Every file and tool the doctor needed could be read",
        )
    return Check(
        "doctor.access",
        "Files and tools readable",
        Status.WARN,
        f"{len(probs)} file(s) or tool(s) could not be read; some checks saw less",
        probs,
        "Run as root or with the needed groups (video, render, adm) to see everything.",
    )


def evaluate(facts: dict[str, Any]) -> list[Check]:
    checks = check_inventory(facts)
    checks += check_versions(facts)
    checks.append(check_torch(facts))
    checks += check_compat(facts)
    checks.append(check_kernel_log(facts))
    checks.append(check_pcie(facts))
    checks.append(check_memory(facts))
    checks.append(check_idle(facts))
    checks.append(check_iommu(facts))
    checks.append(check_hugepages(facts))
    checks.append(check_numa(facts))
    checks.append(check_problems(facts))
    return checks


def run_doctor(inputs: DoctorInputs | None = None, quick: bool = False) -> Report:
    inputs = inputs or DoctorInputs()
    t0 = time.perf_counter()
    facts = gather(inputs, quick=quick)
    report = Report(evaluate(facts), inputs.captures() or {"mode": "quick" if quick else "live"})
    report.duration_s = time.perf_counter() - t0
    return report


def quick_summary(sysfs_root: Path | str | None = None) -> dict[str, Any]:
    """Fast (sysfs / procfs / version files only, no subprocess) doctor summary for run.json:
    counts of pass / warn / fail and the failing and warning checks with their evidence."""
    inputs = DoctorInputs(
        sysfs_root=Path(sysfs_root) if sysfs_root else None, live=True, scan_kernel_log=False
    )
    try:
        report = run_doctor(inputs, quick=True)
    except Exception as exc:  # noqa: BLE001 - a run must never fail because its doctor did
        return {"version": 1, "quick": True, "ok": None, "error": f"{type(exc).__name__}: {exc}"}
    counts = report.counts()

    def brief(c: Check) -> dict[str, Any]:
        return {"id": c.id, "summary": c.summary, "evidence": c.evidence[:10], "remedy": c.remedy}

    return {
        "version": 1,
        "quick": True,
        "ok": not report.failed,
        "counts": counts,
        "duration_s": round(report.duration_s, 3),
        "accelerators": (report.get("inventory.accelerators").data.get("counts") or {}),
        "failing": [brief(c) for c in report.checks if c.status == Status.FAIL],
        "warning": [brief(c) for c in report.checks if c.status == Status.WARN],
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
