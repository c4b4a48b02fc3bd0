"""Kernel, driver, CUDA / ROCm and PyTorch: their versions, and whether they fit together."""

from __future__ import annotations

from accelbench.doctor import compat
from accelbench.doctor.checks.common import from_findings, vendor_counts
from accelbench.doctor.model import Check, Facts, Status, TorchInfo


def check_versions(facts: Facts) -> list[Check]:
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
    counts = vendor_counts(facts)
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
    kl = facts.get("kernel_log")
    banners = (kl.get("driver_banners") if kl else None) or []
    if banners:
        drv_ev.append(f"kernel log: NVIDIA kernel module {', '.join(banners)} loaded")
        if v.get("nvidia_driver") and banners[-1] != v["nvidia_driver"]:
            problems.append(
                f"kernel log loaded module {banners[-1]} but user space reports "
                f"{v['nvidia_driver']}: reboot / reload after the driver update"
            )
    amd_errs = (facts.get("amd_smi_version") or {}).get("errors") or []
    problems += [f"amd-smi version: {e}" for e in amd_errs]
    if not drv_ev and not problems and not facts.get("live") and not facts.get("system_read"):
        checks.append(
            Check(
                "versions.driver",
                "GPU drivers",
                Status.UNKNOWN,
                "Driver version not captured (no sysfs root, nvidia-smi, amd-smi, rocm-smi "
                "or collect_env driver line among the captures)",
                [],
                "Capture nvidia-smi / amd-smi version, or pass --sysfs-root.",
            )
        )
    elif not drv_ev and not problems:
        checks.append(
            Check(
                "versions.driver",
                "GPU drivers",
                Status.NA,
                "No NVIDIA or AMD kernel driver present",
            )
        )
    else:
        known = [e for e in drv_ev if not e.endswith("version not captured")]
        status = Status.WARN if problems else (Status.PASS if known else Status.UNKNOWN)
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
    t = facts.get("torch") or TorchInfo(installed=None)
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


def check_torch(facts: Facts) -> Check:
    t = facts.get("torch")
    counts = vendor_counts(facts)
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


def check_compat(facts: Facts) -> list[Check]:
    v = facts["versions"]
    t = facts.get("torch") or TorchInfo(installed=None)
    counts = vendor_counts(facts)
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
        from_findings(
            "compat.cuda",
            "CUDA driver / toolkit / PyTorch",
            cuda,
            "No NVIDIA GPU or driver, or no versions captured: not applicable",
        ),
        from_findings(
            "compat.rocm",
            "ROCm / GPU arch / OS / PyTorch",
            rocm,
            "No AMD GPU, or no ROCm version captured: not applicable",
        ),
    ]
