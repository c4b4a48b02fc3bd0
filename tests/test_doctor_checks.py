"""Doctor rules: the findings each real capture must produce, and the PCI / link / ECC /
IOMMU / NUMA checks on a fake sysfs tree built in a temporary directory."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from accelbench.doctor import DoctorInputs, Status, quick_summary, run_doctor
from accelbench.doctor import compat as cp
from accelbench.errors import AccelbenchError
from conftest import fixture_file

XID_LOG = fixture_file(
    "doctor",
    "kernel-log__nvidia-hgx-dell-xe9680__xid119-gsp-rpc-timeout__kernel5.15__dmesg-ctime.log",
)
CLEAN_LOG = fixture_file(
    "doctor",
    "kernel-log__nvidia-1gpu__clean-driver-load-unload-reload__"
    "proprietary550.144.03__dmesg-raw-level-prefix.log",
)
H200_BOOT_LOG = fixture_file(
    "doctor",
    "kernel-log__nvidia-h200-x1__fbhub-poison-clear-at-init__drv580.159.04__dmesg-raw.log",
)
HGX_LSPCI = fixture_file("doctor", "lspci_vvv__nvidia-h100-sxm5-x8-hgx__full-host.txt")
GPU_LSPCI = fixture_file("doctor", "lspci_vvv__nvidia-h100-sxm5__gpu-19-00.0-gen5x16-ok.txt")
SWITCH_LSPCI = fixture_file(
    "doctor", "lspci_vvv__broadcom-pex890xx-switch-port__lnksta-downgraded-16gts.txt"
)
NV_CE = fixture_file(
    "doctor",
    "vllm-collect-env__nvidia-h100-x8__cu124_drv550.90.12_vllm0.6.3_with-topo__indented4.txt",
)
AMD_CE = fixture_file(
    "doctor",
    "vllm-collect-env__amd-mi300x-x8__rocm6.2_vllm0.6.4_with-rocm-smi-showtopo__indented4.txt",
)
H100_BUSY = fixture_file(
    "doctor", "nvidia-smi__nvidia-h100-80gb-hbm3-x8__drv550.90.12__under-load-container.txt"
)
H100_IDLE = fixture_file(
    "doctor", "nvidia-smi__nvidia-h100-sxm5-80gb-x8__drv565.57.01_cuda12.7.txt"
)
H200 = fixture_file(
    "doctor", "nvidia-smi__nvidia-h200-x1__drv590.48.01_cuda13.1__under-load-with-processes.txt"
)
A100 = fixture_file("doctor", "nvidia-smi__nvidia-a100-sxm4-80gb-x4__drv555.42.02_cuda12.5.txt")
ROCM_SMI_8 = fixture_file(
    "doctor", "rocm-smi__amd-mi300x-x8__concise_pasted-whitespace-trimmed.txt"
)
ROCM_SMI_A = fixture_file("doctor", "rocm-smi_a__amd-mi300x-x4-sriov__showallinfo_drv6.7.0.txt")
ROCMINFO = fixture_file("doctor", "rocminfo__amd-mi300x-x4__gfx942_runtime1.1.txt")
AMD_STATIC_TXT = fixture_file(
    "doctor", "amd-smi_static__amd-mi300a-x4__amdsmi-rocm6.2-era_drv6.9.0-rc5.txt"
)
AMD_STATIC_JSON = fixture_file(
    "doctor", "amd-smi_static_json__amd-mi300x-oam-x8-sriov-vf__rocm7.2.1_amdgpu6.16.13__root.json"
)
AMD_VERSION_USER = fixture_file(
    "doctor",
    "amd-smi_version_json__amdsmi26.2.2_rocm7.2.1__non-root-amdgpu-version-file-error.json",
)
AMD_VERSION_ROOT = fixture_file(
    "doctor", "amd-smi_version_json__amdsmi26.2.2_rocm7.2.1_amdgpu6.16.13__root.json"
)


def doctor(**kw):
    return run_doctor(DoctorInputs(**kw))


# ------------------------------------------------------------------ captures


def test_xid119_log_fails_with_the_xid_first():
    r = doctor(kernel_log=XID_LOG)
    c = r.get("kernel.log")
    assert c.status == Status.FAIL
    assert c.summary.startswith("Xid 119: GSP RPC timeout x5 (critical)")
    assert "0000:9b:00" in c.evidence[0] and "first Sun Feb 23 16:24:18 2025" in c.evidence[0]
    assert c.data["events"][0]["code"] == 119
    assert "reset the GPU" in c.remedy
    assert r.failed


def test_clean_driver_load_passes_and_reports_the_module():
    r = doctor(kernel_log=CLEAN_LOG)
    assert r.get("kernel.log").status == Status.PASS
    drv = r.get("versions.driver")
    assert drv.status == Status.PASS and "550.144.03" in drv.summary
    assert not r.failed


def test_h200_boot_with_the_fbhub_poison_clear_passes_and_lists_it():
    # The real boot of a healthy H200: NVIDIA's driver clears a stale FBHUB poison
    # interrupt at GPU init. That is no memory error (it once failed as "RAS: poison").
    c = doctor(kernel_log=H200_BOOT_LOG).get("kernel.log")
    assert c.status == Status.PASS, c.summary
    assert c.summary.startswith("No GPU error signatures in 5 lines ")  # 5, not 6: a file
    # ending in a line end has as many lines as line ends
    assert "known benign: NVIDIA driver cleared a stale FBHUB poison interrupt" in c.summary
    (ev,) = c.data["events"]
    assert (ev["key"], ev["severity"], ev["count"]) == (
        "nvidia.fbhub_poison_cleared_at_init",
        "info",
        1,
    )
    assert ev["first"] == "1.119338" and "FBHUB Interrupt detected" in ev["example"]
    assert c.evidence[0].startswith("[info] ") and c.remedy == ""


def test_open_kernel_module_banner_is_read_and_a_stale_module_warns():
    # The open kernel module's banner ("... Open Kernel Module for x86_64  580.159.04 ...")
    # was not read, so a driver updated without a reload went unnoticed on such hosts.
    drv = doctor(kernel_log=H200_BOOT_LOG).get("versions.driver")
    assert drv.status == Status.PASS and "580.159.04" in drv.summary, drv.summary
    # the same boot with user space at 590.48.01 (another H200's nvidia-smi): stale module
    drv = doctor(kernel_log=H200_BOOT_LOG, nvidia_smi=H200).get("versions.driver")
    assert drv.status == Status.WARN, drv.summary
    assert "kernel log loaded module 580.159.04 but user space reports 590.48.01" in " ".join(
        [drv.summary, *drv.evidence]
    )


def test_hgx_lspci_links_ok_and_non_gpu_downgrades_not_judged():
    r = doctor(lspci=HGX_LSPCI)
    inv = r.get("inventory.accelerators")
    assert inv.status == Status.PASS and inv.summary.startswith("8 NVIDIA")
    link = r.get("pcie.links")
    assert link.status == Status.PASS
    assert link.summary == "8 GPU link(s) at full speed and width"
    assert len(link.data["non_gpu_downgraded"]) == 16
    numa = r.get("system.numa")
    assert numa.status == Status.PASS and numa.summary == "GPUs per NUMA node: node 0: 4, node 1: 4"


def test_switch_port_downgrade_alone_is_not_a_finding():
    r = doctor(lspci=SWITCH_LSPCI)
    link = r.get("pcie.links")
    assert link.status == Status.NA
    assert link.data["non_gpu_downgraded"] == ["0000:17:03.0"]
    assert not r.failed and r.counts()["warn"] == 0


def _downgrade(text: str, lnksta: str) -> str:
    return text.replace("LnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)", lnksta)


def test_downgraded_gpu_link_from_lspci(tmp_path):
    text = GPU_LSPCI.read_text()
    assert "LnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)" in text
    narrow = tmp_path / "narrow.txt"
    narrow.write_text(_downgrade(text, "LnkSta:\tSpeed 32GT/s (ok), Width x8 (downgraded)"))
    c = doctor(lspci=narrow).get("pcie.links")
    assert c.status == Status.FAIL and "GPU 0000:19:00.0 x8 of x16" in c.summary
    slow = tmp_path / "slow.txt"
    slow.write_text(_downgrade(text, "LnkSta:\tSpeed 16GT/s (downgraded), Width x16 (ok)"))
    c = doctor(lspci=slow).get("pcie.links")
    assert c.status == Status.WARN and "16 GT/s of 32 GT/s" in c.summary
    assert "idle" in c.remedy


def test_gpu_behind_a_narrow_switch_port_in_the_hgx_tree(tmp_path):
    # 17:01.0 is the switch port above GPU 19:00.0; train it at x4 and the GPU is slow too.
    text = HGX_LSPCI.read_text().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(text) if ln.startswith("17:01.0 "))
    for i in range(start, start + 40):
        if "LnkSta:" in text[i]:
            text[i] = text[i].replace("Width x16 (ok)", "Width x4 (downgraded)")
            break
    f = tmp_path / "lspci.txt"
    f.write_text("".join(text))
    c = doctor(lspci=f).get("pcie.links")
    assert c.status == Status.FAIL
    assert "upstream 0000:17:01.0" in c.summary and "x4 of x16" in c.summary


def test_nvidia_collect_env_and_smi_agree_and_torch_fits_the_driver():
    r = doctor(collect_env=NV_CE, nvidia_smi=H100_BUSY)
    assert r.get("inventory.agreement").status == Status.PASS
    t = r.get("torch.devices")
    assert t.status == Status.PASS and "2.5.1+cu124 (cuda build) sees 8" in t.summary
    cu = r.get("compat.cuda")
    assert cu.status == Status.PASS and "CUDA 12.4 runs on driver 550.90.12" in cu.summary
    assert (
        r.get("versions.system").summary == "Ubuntu 22.04.3 LTS (x86_64), kernel 6.8.0-47-generic"
    )
    idle = r.get("gpu.idle")
    assert idle.status == Status.WARN
    assert "72770 of 81559 MiB used, 97% busy" in idle.summary
    assert "another container" in idle.summary


def test_nvidia_count_mismatch_is_a_failure():
    # 8 GPUs on the PCI bus, the 4-GPU nvidia-smi: "seen on the PCI bus but not by nvidia-smi".
    r = doctor(lspci=HGX_LSPCI, nvidia_smi=A100)
    c = r.get("inventory.agreement")
    assert c.status == Status.FAIL
    assert "pci=8, nvidia-smi=4; seen on the PCI bus but not by nvidia-smi" in c.summary


def test_idle_and_busy_gpus():
    assert doctor(nvidia_smi=H100_IDLE).get("gpu.idle").status == Status.PASS
    c = doctor(nvidia_smi=H200).get("gpu.idle")
    assert c.status == Status.WARN and "3 process(es)" in c.summary
    c = doctor(rocm_smi=ROCM_SMI_8).get("gpu.idle")
    assert c.status == Status.WARN and c.summary == "GPU[3]: VRAM 17% used, 0% busy"


def test_amd_collect_env_rocm_checks():
    r = doctor(collect_env=AMD_CE, rocm_smi=ROCM_SMI_8)
    c = r.get("compat.rocm")
    # Ubuntu 20.04 is not listed for ROCm 6.2 in the shipped table: a warning, not a failure.
    assert c.status == Status.WARN
    assert "ROCm 6.2 lists ubuntu 22.04, 24.04; this is 20.04.6" in c.summary
    assert any("gfx942" in e and e.startswith("pass") for e in c.evidence)
    assert any("PyTorch HIP 6.2.41133-dd7f95766 matches ROCm" in e for e in c.evidence)
    t = r.get("torch.devices")
    assert t.status == Status.PASS and "rocm build" in t.summary
    assert r.get("system.numa").summary == "GPUs per NUMA node: node 0: 4, node 1: 4"
    assert not r.failed


def test_amd_rocm_smi_and_rocminfo_agree():
    r = doctor(rocm_smi=ROCM_SMI_A, rocminfo=ROCMINFO)
    assert r.get("inventory.agreement").status == Status.PASS
    drv = r.get("versions.driver")
    assert drv.status == Status.PASS and "amdgpu driver 6.7.0" in drv.summary


def test_amd_smi_non_root_version_error_is_a_warning():
    r = doctor(amd_smi=[AMD_STATIC_JSON, AMD_VERSION_USER])
    drv = r.get("versions.driver")
    assert drv.status == Status.WARN
    assert "AMDSMI_STATUS_FILE_ERROR" in drv.summary and "root" in drv.remedy
    c = r.get("compat.rocm")
    assert c.status == Status.PASS and "gfx942" in c.summary and "7.2.1" in c.summary
    mem = r.get("memory.ecc")
    assert mem.status == Status.PASS and "bad page threshold not exceeded" in mem.summary
    root = doctor(amd_smi=[AMD_STATIC_JSON, AMD_VERSION_ROOT])
    assert root.get("versions.driver").status == Status.PASS


def test_mi300a_with_hbm_ecc_disabled_warns():
    c = doctor(amd_smi=[AMD_STATIC_TXT]).get("memory.ecc")
    assert c.status == Status.WARN
    assert c.summary.count("HBM ECC (UMC block) disabled") == 4


def test_missing_capture_is_a_user_error(tmp_path):
    with pytest.raises(AccelbenchError, match="kernel log file not found"):
        doctor(kernel_log=tmp_path / "nope.log")


# ------------------------------------------------------------------ compatibility rules


def test_cuda_rules():
    assert cp.torch_cuda_from_version("2.5.1+cu124") == "12.4"
    assert cp.torch_rocm_from_version("2.5.1+rocm6.2") == "6.2"
    lvl = [f[0] for f in cp.check_cuda("550.90.12", "12.4", "12.4", None)]
    assert lvl == ["pass"]
    # torch for CUDA 13 on a CUDA 12 driver: fails
    (f,) = cp.check_cuda("550.90.12", "12.4", "13.0", None)
    assert f[0] == "fail" and "supports only CUDA 12.4" in f[1]
    # newer minor: runs through minor version compatibility, warned
    (f,) = cp.check_cuda("550.90.12", "12.4", "12.6", None)
    assert f[0] == "warn"
    # driver older than the CUDA 12 minor-compat minimum (525.60.13)
    (f,) = cp.check_cuda("520.61.05", None, "12.1", None)
    assert f[0] == "fail" and "525.60.13" in f[1]


def test_rocm_rules():
    (f,) = cp.check_rocm("6.4.1", ["gfx950"], None, None, None)
    assert f[0] == "fail" and "needs ROCm >= 7.0" in f[1]
    (f,) = cp.check_rocm("7.0.2", ["gfx950"], None, None, None)
    assert f[0] == "pass"
    (f,) = cp.check_rocm("6.2.0", ["gfx1234"], None, None, None)
    assert f[0] == "warn" and "not in the shipped" in f[1]  # unknown: warning, not failure
    (f,) = cp.check_rocm("6.9.0", [], "ubuntu", "22.04", None)
    assert f[0] == "warn"  # ROCm release not in the table
    (f,) = cp.check_rocm("6.2.4", [], None, None, "6.1.40091")
    assert f[0] == "warn" and "built for ROCm 6.1" in f[1]


# ------------------------------------------------------------------ fake sysfs


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(d: Path, speed: str, width: int, max_speed: str, max_width: int) -> None:
    _w(d / "current_link_speed", speed)
    _w(d / "current_link_width", str(width))
    _w(d / "max_link_speed", max_speed)
    _w(d / "max_link_width", str(max_width))


def make_sysfs(root: Path, gpus: list[dict], nodes: int = 2, cmdline: str = "") -> Path:
    """A / tree: PCI devices nested under their root port and switch port in /sys/devices,
    symlinked from /sys/bus/pci/devices as on a real machine, plus the proc / etc files."""
    bus = root / "sys/bus/pci/devices"
    bus.mkdir(parents=True)
    drivers = root / "sys/bus/pci/drivers"
    for i, g in enumerate(gpus):
        rp = root / f"sys/devices/pci0000:{0x10 + i:02x}/0000:{0x10 + i:02x}:01.0"
        sw = rp / f"0000:{0x20 + i:02x}:00.0"
        dev = sw / g["bdf"]
        _link(rp, "32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16)
        _link(sw, *g.get("switch", ("32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16)))
        _w(dev / "vendor", g["vendor"])
        _w(dev / "device", g.get("device", "0x2330"))
        _w(dev / "class", g.get("class", "0x030200"))
        _w(dev / "numa_node", str(g.get("numa", 0)))
        _link(dev, *g.get("link", ("32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16)))
        if g.get("driver"):
            (drivers / g["driver"]).mkdir(parents=True, exist_ok=True)
            os.symlink(drivers / g["driver"], dev / "driver")
        if g.get("iommu_type"):
            _w(dev / "iommu_group" / "type", g["iommu_type"])
        for block, counts in g.get("ras", {}).items():
            _w(dev / "ras" / f"{block}_err_count", counts)
        os.symlink(dev, bus / g["bdf"])
    # a non-GPU device (NIC) that must be ignored
    nic = root / "sys/devices/pci0000:99/0000:99:00.0"
    _w(nic / "vendor", "0x15b3")
    _w(nic / "class", "0x020000")
    os.symlink(nic, bus / "0000:99:00.0")
    for n in range(nodes):
        (root / f"sys/devices/system/node/node{n}").mkdir(parents=True)
    _w(root / "proc/sys/kernel/osrelease", "6.8.0-47-generic")
    _w(root / "etc/os-release", 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"')
    _w(root / "proc/cmdline", f"BOOT_IMAGE=/vmlinuz root=/dev/sda1 {cmdline}".strip())
    _w(root / "proc/meminfo", "MemTotal: 1000000 kB\nHugePages_Total: 0\nHugepagesize: 2048 kB")
    _w(root / "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never")
    return root


NV = {"vendor": "0x10de", "driver": "nvidia"}
AMD = {"vendor": "0x1002", "device": "0x74a1", "class": "0x120000", "driver": "amdgpu"}


def test_sysfs_inventory_links_numa(tmp_path):
    root = make_sysfs(
        tmp_path, [NV | {"bdf": "0000:19:00.0"}, NV | {"bdf": "0000:3b:00.0", "numa": 1}]
    )
    _w(root / "proc/driver/nvidia/version",
       "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.12  Thu Jun 27 2024")  # fmt: skip
    r = doctor(sysfs_root=root)
    inv = r.get("inventory.accelerators")
    assert inv.status == Status.PASS and inv.summary.startswith("2 NVIDIA")
    assert inv.data["counts"]["nvidia"]["pci"] == 2
    assert r.get("pcie.links").status == Status.PASS
    assert r.get("system.numa").summary == "GPUs per NUMA node: node 0: 1, node 1: 1"
    drv = r.get("versions.driver")
    assert drv.status == Status.PASS and "NVIDIA driver 550.90.12" in drv.summary
    assert r.get("versions.system").summary == "Ubuntu 22.04.4 LTS, kernel 6.8.0-47-generic"
    assert not r.failed


def test_sysfs_narrow_and_slow_links(tmp_path):
    root = make_sysfs(
        tmp_path,
        [
            NV | {"bdf": "0000:19:00.0", "link": ("32.0 GT/s PCIe", 8, "32.0 GT/s PCIe", 16)},
            NV | {"bdf": "0000:3b:00.0", "link": ("2.5 GT/s PCIe", 16, "32.0 GT/s PCIe", 16)},
        ],
    )
    c = doctor(sysfs_root=root).get("pcie.links")
    assert c.status == Status.FAIL
    assert "GPU 0000:19:00.0 x8 of x16" in c.summary
    assert "GPU 0000:3b:00.0 2.5 GT/s of 32 GT/s" in c.summary


def test_sysfs_slow_switch_port_above_a_gpu(tmp_path):
    root = make_sysfs(
        tmp_path,
        [NV | {"bdf": "0000:19:00.0", "switch": ("32.0 GT/s PCIe", 4, "32.0 GT/s PCIe", 16)}],
    )
    c = doctor(sysfs_root=root).get("pcie.links")
    assert (
        c.status == Status.FAIL
        and "upstream 0000:20:00.0 of GPU 0000:19:00.0 x4 of x16" in c.summary
    )


def test_sysfs_gen5_port_feeding_a_gen4_gpu_is_fine(tmp_path):
    root = make_sysfs(
        tmp_path,
        [
            NV | {
                "bdf": "0000:19:00.0",
                "link": ("16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16),
                "switch": ("16.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16),
            }
        ],
    )  # fmt: skip
    assert doctor(sysfs_root=root).get("pcie.links").status == Status.PASS


def test_sysfs_gpu_without_driver_fails(tmp_path):
    root = make_sysfs(tmp_path, [{"vendor": "0x10de", "bdf": "0000:19:00.0"}])
    c = doctor(sysfs_root=root).get("inventory.accelerators")
    assert c.status == Status.FAIL and "no kernel driver bound to 0000:19:00.0" in c.summary


def test_sysfs_amd_ras_iommu_rocm(tmp_path):
    root = make_sysfs(
        tmp_path,
        [
            AMD | {"bdf": "0000:1b:00.0", "iommu_type": "DMA-FQ",
                   "ras": {"umc": "ue: 2\nce: 7", "gfx": "ue: 0\nce: 0"}},
            AMD | {"bdf": "0000:3d:00.0", "iommu_type": "DMA-FQ", "numa": -1,
                   "ras": {"umc": "ue: 0\nce: 3"}},
        ],
    )  # fmt: skip
    (root / "sys/class/iommu/ivhd0").mkdir(parents=True)
    _w(root / "opt/rocm/.info/version", "6.2.0-66")
    r = doctor(sysfs_root=root)
    mem = r.get("memory.ecc")
    assert mem.status == Status.FAIL
    assert "0000:1b:00.0: umc 2 uncorrectable errors" in mem.summary
    assert "0000:3d:00.0: umc 3 correctable errors" in mem.summary
    io = r.get("system.iommu")
    assert io.status == Status.WARN and "iommu=pt" in io.remedy
    numa = r.get("system.numa")
    assert numa.status == Status.WARN and "NUMA node unknown for 1 GPU(s)" in numa.summary
    rocm = r.get("compat.rocm")
    assert rocm.status == Status.PASS and "ROCm 6.2 supports ubuntu 22.04" in rocm.summary


def test_sysfs_iommu_passthrough_is_fine(tmp_path):
    root = make_sysfs(tmp_path, [AMD | {"bdf": "0000:1b:00.0", "iommu_type": "identity"}],
                      cmdline="iommu=pt")  # fmt: skip
    (root / "sys/class/iommu/ivhd0").mkdir(parents=True)
    io = doctor(sysfs_root=root).get("system.iommu")
    assert io.status == Status.PASS and io.summary == "IOMMU passthrough"


def test_unreadable_sysfs_file_is_a_finding_not_a_crash(tmp_path, monkeypatch):
    root = make_sysfs(tmp_path, [NV | {"bdf": "0000:19:00.0"}])
    real_read_text = Path.read_text

    def deny(self, *a, **kw):  # chmod would not stop root, so deny the read itself
        if self.name == "current_link_speed":
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_text(self, *a, **kw)

    monkeypatch.setattr(Path, "read_text", deny)
    r = doctor(sysfs_root=root)
    acc = r.get("doctor.access")
    assert acc.status == Status.WARN
    assert any("current_link_speed" in e and "Permission denied" in e for e in acc.evidence)
    assert r.get("pcie.links").status == Status.NA  # link status not reported


def test_empty_sysfs_root_is_all_not_applicable(tmp_path):
    r = doctor(sysfs_root=tmp_path)
    assert r.get("inventory.accelerators").status == Status.NA
    assert r.counts()["fail"] == 0


# ------------------------------------------------------------------ quick summary


def test_quick_summary_on_this_machine_is_fast_and_json():
    t0 = time.perf_counter()
    s = quick_summary()
    assert time.perf_counter() - t0 < 1.0
    json.dumps(s)
    assert s["quick"] is True and s["ok"] is True
    assert set(s["counts"]) == {"pass", "warn", "fail", "n/a", "unknown"}
    assert s["failing"] == []


def test_quick_summary_lists_failures_with_evidence(tmp_path):
    root = make_sysfs(
        tmp_path,
        [NV | {"bdf": "0000:19:00.0", "link": ("32.0 GT/s PCIe", 4, "32.0 GT/s PCIe", 16)}],
    )
    s = quick_summary(root)
    assert s["ok"] is False and s["counts"]["fail"] == 1
    (f,) = s["failing"]
    assert f["id"] == "pcie.links" and "x4 of x16" in f["summary"] and f["evidence"]
    assert s["accelerators"]["nvidia"]["pci"] == 1
    json.dumps(s)


def _fake_runtimes(monkeypatch, tool_problem: str | None, missing: bool, nvml: dict) -> None:
    from accelbench.doctor import runtimes
    from accelbench.gpu import amdsmi as gpu_amdsmi
    from accelbench.gpu import nvml as gpu_nvml

    def run_tool(argv, timeout=15.0):
        return runtimes.ToolResult(" ".join(argv), problem=tool_problem, missing=missing)

    monkeypatch.setattr(runtimes, "run_tool", run_tool)
    monkeypatch.setattr(gpu_nvml, "inventory", lambda: nvml)
    monkeypatch.setattr(
        gpu_amdsmi,
        "inventory",
        lambda: {"available": False, "problem": "amdsmi not importable"},
    )
    monkeypatch.setattr(runtimes, "torch_info", lambda: {"installed": False, "problem": "none"})
    monkeypatch.setattr(runtimes, "read_kernel_log", lambda: runtimes.ToolResult("dmesg", text=""))


def test_gpus_on_pci_without_any_runtime_installed_warn(tmp_path, monkeypatch):
    _fake_runtimes(
        monkeypatch,
        "nvidia-smi not installed",
        True,
        {"available": False, "problem": "NVML: NVML Shared Library Not Found"},
    )
    root = make_sysfs(tmp_path, [NV | {"bdf": "0000:19:00.0"}])
    r = run_doctor(DoctorInputs(sysfs_root=root, live=True))
    c = r.get("inventory.runtime")
    assert c.status == Status.WARN and "no NVIDIA runtime is installed" in c.summary
    assert r.get("torch.devices").status == Status.WARN  # GPUs but no PyTorch


def test_gpus_on_pci_that_the_runtime_cannot_see_fail(tmp_path, monkeypatch):
    msg = (
        "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate "
        "with the NVIDIA driver."
    )
    _fake_runtimes(
        monkeypatch, msg, False, {"available": False, "problem": "NVML: Driver Not Loaded"}
    )
    root = make_sysfs(tmp_path, [NV | {"bdf": "0000:19:00.0"}, NV | {"bdf": "0000:3b:00.0"}])
    r = run_doctor(DoctorInputs(sysfs_root=root, live=True))
    c = r.get("inventory.runtime")
    assert c.status == Status.FAIL
    assert c.summary == "2 NVIDIA GPU(s) on the PCI bus, none seen by the runtime"
    assert any("couldn't communicate" in e for e in c.evidence)
    assert r.get("doctor.access").status == Status.WARN


def test_slow_link_on_an_idle_gpu_is_power_saving_not_a_finding(tmp_path):
    # nvidia-smi (idle H100 x8 capture) says GPU 0000:18:00.0 is 0% busy: its Gen1 link is
    # the GPU saving power. Width is still judged.
    root = make_sysfs(
        tmp_path,
        [
            NV | {"bdf": "0000:18:00.0", "link": ("2.5 GT/s PCIe", 16, "32.0 GT/s PCIe", 16),
                  "switch": ("2.5 GT/s PCIe", 16, "32.0 GT/s PCIe", 16)},
            NV | {"bdf": "0000:2a:00.0", "link": ("2.5 GT/s PCIe", 8, "32.0 GT/s PCIe", 16)},
        ],
    )  # fmt: skip
    c = run_doctor(DoctorInputs(sysfs_root=root, nvidia_smi=H100_IDLE)).get("pcie.links")
    assert c.status == Status.FAIL
    assert "GPU 0000:2a:00.0 x8 of x16" in c.summary
    assert "0000:18:00.0" not in c.summary
    assert any("0000:18:00.0" in e and "idle at 0%" in e for e in c.evidence)


def test_quick_summary_judges_link_width_not_idle_speed(tmp_path):
    root = make_sysfs(
        tmp_path,
        [NV | {"bdf": "0000:19:00.0", "link": ("2.5 GT/s PCIe", 16, "32.0 GT/s PCIe", 16)}],
    )
    s = quick_summary(root)
    assert s["ok"] is True
    assert "pcie.links" not in {c["id"] for c in s["warning"] + s["failing"]}


def test_amd_collect_env_alone():
    r = doctor(collect_env=AMD_CE)
    inv = r.get("inventory.accelerators")
    assert inv.status == Status.PASS and "AMD Instinct MI300X (gfx942" in inv.summary
    assert r.get("torch.devices").status == Status.PASS
    c = r.get("compat.rocm")
    assert c.status == Status.WARN and "ROCm 6.2 lists ubuntu" in c.summary
    assert any(e.startswith("pass: gfx942") for e in c.evidence)
