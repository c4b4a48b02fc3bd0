"""Doctor parsers against the real captures in tests/fixtures/doctor (see its SOURCES.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelbench.doctor import parsers as p
from accelbench.doctor.kernel_log import SEVERITY_RANK, scan_kernel_log, xid_table
from conftest import fixture_file


def read(name: str) -> str:
    return fixture_file("doctor", name).read_text()


def test_fixture_folder_is_found():
    assert fixture_file("doctor", "SOURCES.md").is_file()


# ------------------------------------------------------------------ nvidia-smi


@pytest.mark.parametrize(
    "name, driver, cuda, n, gpu_name, first_bdf",
    [
        ("nvidia-smi__nvidia-a100-sxm4-80gb-x4__drv555.42.02_cuda12.5.txt", "555.42.02", "12.5",
         4, "NVIDIA A100-SXM4-80GB", "0000:68:00.0"),
        ("nvidia-smi__nvidia-h100-80gb-hbm3-x8__drv550.90.12__under-load-container.txt",
         "550.90.12", "12.4", 8, "NVIDIA H100 80GB HBM3", "0000:61:00.0"),
        ("nvidia-smi__nvidia-h100-sxm5-80gb-x8__drv565.57.01_cuda12.7.txt", "565.57.01", "12.7",
         8, "NVIDIA H100 80GB HBM3", "0000:18:00.0"),
        ("nvidia-smi__nvidia-h200-x1__drv590.48.01_cuda13.1__under-load-with-processes.txt",
         "590.48.01", "13.1", 1, "NVIDIA H200", "0000:83:00.0"),
    ],
)  # fmt: skip
def test_nvidia_smi(name, driver, cuda, n, gpu_name, first_bdf):
    r = p.parse_nvidia_smi(read(name))
    assert r["driver_version"] == driver
    assert r["cuda_version"] == cuda
    assert len(r["gpus"]) == n
    assert [g["index"] for g in r["gpus"]] == list(range(n))
    assert r["gpus"][0]["name"] == gpu_name
    assert r["gpus"][0]["bdf"] == first_bdf
    assert all(g["ecc_uncorrected"] == "0" for g in r["gpus"])


def test_nvidia_smi_load_and_processes():
    h200 = p.parse_nvidia_smi(
        read("nvidia-smi__nvidia-h200-x1__drv590.48.01_cuda13.1__under-load-with-processes.txt")
    )
    g = h200["gpus"][0]
    assert (g["memory_used_mib"], g["memory_total_mib"], g["utilization_pct"]) == (
        32362,
        143771,
        100,
    )
    assert h200["processes"] == 3
    busy = p.parse_nvidia_smi(
        read("nvidia-smi__nvidia-h100-80gb-hbm3-x8__drv550.90.12__under-load-container.txt")
    )
    assert busy["processes"] == 0  # hidden by the container's PID namespace
    assert busy["gpus"][0]["memory_used_mib"] == 72770
    assert busy["gpus"][0]["utilization_pct"] == 97


@pytest.mark.parametrize(
    "name, n, cpu0, numa_last",
    [
        ("nvidia-smi_topo_m__nvidia-h100-x8-nv18-nic__from-vllm-collect-env__indented4.txt", 8,
         "0-103", "1"),
        ("nvidia-smi_topo_m__nvidia-h100-x8-nv18__tabs-expanded-no-legend.txt", 8,
         "0-51,104-155", "1"),
        ("nvidia-smi_topo_m__nvidia-h200-x1__drv590.48.01__ansi-underline-header.txt", 1,
         "0-23", "0"),
    ],
)  # fmt: skip
def test_nvidia_topo(name, n, cpu0, numa_last):
    r = p.parse_nvidia_topo(read(name))
    assert len(r["gpus"]) == n
    assert r["gpus"][0]["cpu_affinity"] == cpu0
    assert r["gpus"][-1]["numa_affinity"] == numa_last
    if n == 8:
        assert r["gpus"][0]["links"]["GPU1"] == "NV18"
        assert r["gpus"][3]["links"]["GPU3"] == "X"


def test_nvidia_topo_is_not_read_from_rocm_smi_showtopo():
    # The AMD collect_env holds rocm-smi's "Weight between two GPUs" matrix (GPU0 ... GPU7
    # rows and columns, no X, no CPU Affinity): no NVIDIA topology in it.
    amd = read(
        "vllm-collect-env__amd-mi300x-x8__rocm6.2_vllm0.6.4_with-rocm-smi-showtopo__indented4.txt"
    )
    assert "Weight between two GPUs" in amd
    assert p.parse_nvidia_topo(amd) == {"gpus": [], "truncated": None}


def test_nvidia_topo_nic_column():
    r = p.parse_nvidia_topo(
        read("nvidia-smi_topo_m__nvidia-h100-x8-nv18-nic__from-vllm-collect-env__indented4.txt")
    )
    assert r["gpus"][0]["links"]["NIC0"] == "SYS"


# ------------------------------------------------------------------ AMD tools


def test_rocm_smi_concise_x4():
    r = p.parse_rocm_smi(read("rocm-smi__amd-mi300x-x4__concise_drv6.7.0.txt"))
    assert r["layout"] == "concise"
    assert len(r["gpus"]) == 4
    g = r["gpus"][0]
    assert g["name"] == "AMD Instinct MI300X"
    assert g["device_id"] == "0x74a1"
    assert (g["memory_partition"], g["compute_partition"]) == ("NPS1", "SPX")
    assert (g["vram_pct"], g["utilization_pct"]) == (0.0, 0.0)


def test_rocm_smi_concise_x8_trimmed_whitespace():
    r = p.parse_rocm_smi(read("rocm-smi__amd-mi300x-x8__concise_pasted-whitespace-trimmed.txt"))
    assert len(r["gpus"]) == 8
    assert all(g["name"] == "AMD Instinct MI300X" for g in r["gpus"])
    assert r["gpus"][3]["vram_pct"] == 17.0


def test_rocm_smi_showallinfo():
    r = p.parse_rocm_smi(read("rocm-smi_a__amd-mi300x-x4-sriov__showallinfo_drv6.7.0.txt"))
    assert r["layout"] == "all"
    assert r["driver_version"] == "6.7.0"
    assert len(r["gpus"]) == 4
    g = r["gpus"][0]
    assert g["device_id"] == "0x74a1"
    assert g["vbios"] == "113-MI3SRIOV-001"
    assert g["sku"] == "MI3SRIOV"
    assert g["pcie_replay_count"] == 0


def test_rocminfo():
    r = p.parse_rocminfo(read("rocminfo__amd-mi300x-x4__gfx942_runtime1.1.txt"))
    assert r["rock_loaded"] is True
    assert r["runtime_version"] == "1.1"
    assert len(r["gpus"]) == 4  # the 2 CPU agents are not GPUs
    assert {g["arch"] for g in r["gpus"]} == {"gfx942"}
    assert {g["name"] for g in r["gpus"]} == {"AMD Instinct MI300X"}
    # BDFID 9728 = 0x2600 -> 26:00.0
    assert [g["bdf"] for g in r["gpus"]] == [
        "0000:26:00.0", "0000:46:00.0", "0000:65:00.0", "0000:85:00.0"
    ]  # fmt: skip
    assert r["gpus"][0]["compute_units"] == 304


def test_amd_smi_list():
    r = p.parse_amd_smi(
        read("amd-smi_list__amd-mi300-series-x2-shown__kfd-node-partition_uuid-redacted.txt")
    )
    assert r["kind"] == "list"
    assert [g["bdf"] for g in r["gpus"]] == ["0000:23:00.0", "0000:26:00.0"]


def test_amd_smi_static_text_mi300a():
    r = p.parse_amd_smi(read("amd-smi_static__amd-mi300a-x4__amdsmi-rocm6.2-era_drv6.9.0-rc5.txt"))
    assert r["kind"] == "static"
    assert len(r["gpus"]) == 4  # the 4 CPU sockets are not GPUs
    g = r["gpus"][0]
    assert g["name"] == "MI300A"
    assert g["device_id"] == "0x74a0"
    assert g["bdf"] == "0000:01:00.0"
    assert g["driver_version"] == "6.9.0-rc5+"
    assert g["max_pcie_width"] == 16 and g["max_pcie_speed"] == "32 GT/s"
    assert "umc" in g["ecc_blocks_disabled"]
    assert g["numa_node"] == 0


def test_amd_smi_static_json_mi300x():
    r = p.parse_amd_smi(
        read("amd-smi_static_json__amd-mi300x-oam-x8-sriov-vf__rocm7.2.1_amdgpu6.16.13__root.json")
    )
    assert r["kind"] == "static"
    assert len(r["gpus"]) == 8
    g = r["gpus"][0]
    assert g["name"] == "AMD Instinct MI300X"
    assert g["arch"] == "gfx942"
    assert g["bdf"] == "0000:1b:00.0"
    assert g["driver_version"] == "6.16.13"
    assert g["firmware_name"] == "AMD MI300X_HW_SRIOV_CVS_1VF"
    assert g["ecc_blocks_disabled"] == ["fuse", "sem"]
    assert g["bad_page_threshold_exceeded"] == "False"


def test_amd_smi_version_root_and_non_root():
    root = p.parse_amd_smi(
        read("amd-smi_version_json__amdsmi26.2.2_rocm7.2.1_amdgpu6.16.13__root.json")
    )
    assert root["kind"] == "version"
    assert (root["rocm_version"], root["amdgpu_version"], root["errors"]) == (
        "7.2.1",
        "6.16.13",
        [],
    )
    user = p.parse_amd_smi(
        read(
            "amd-smi_version_json__amdsmi26.2.2_rocm7.2.1__non-root-amdgpu-version-file-error.json"
        )
    )
    assert user["rocm_version"] == "7.2.1"
    assert user["amdgpu_version"] is None
    assert user["errors"] == ["amdgpu_version: AMDSMI_STATUS_FILE_ERROR - Error opening file"]


def test_amd_smi_garbage_is_a_value_error():
    with pytest.raises(ValueError):
        p.parse_amd_smi("hello\nworld\n")


# ------------------------------------------------------------------ lspci


def test_lspci_single_gpu_stanza():
    (d,) = p.parse_lspci(read("lspci_vvv__nvidia-h100-sxm5__gpu-19-00.0-gen5x16-ok.txt"))
    assert d["bdf"] == "0000:19:00.0"
    assert d["is_gpu"] and d["vendor_id"] == "10de"
    assert (d["cap_speed"], d["cap_width"], d["sta_speed"], d["sta_width"]) == (32.0, 16, 32.0, 16)
    assert (d["sta_speed_flag"], d["sta_width_flag"]) == ("ok", "ok")
    assert d["driver"] == "nvidia"
    assert d["numa_node"] == 0


def test_lspci_switch_port_downgraded():
    (d,) = p.parse_lspci(
        read("lspci_vvv__broadcom-pex890xx-switch-port__lnksta-downgraded-16gts.txt")
    )
    assert d["bdf"] == "0000:17:03.0"
    assert not d["is_gpu"]
    assert (d["cap_speed"], d["sta_speed"], d["sta_speed_flag"]) == (32.0, 16.0, "downgraded")
    assert d["secondary_bus"] == 0x1B


def test_lspci_full_hgx_host():
    devs = p.parse_lspci(read("lspci_vvv__nvidia-h100-sxm5-x8-hgx__full-host.txt"))
    assert len(devs) == 517
    gpus = [d for d in devs if d["is_gpu"]]
    assert len(gpus) == 8  # the 4 NVSwitch bridges (Device 22a3) are not GPUs
    assert all(g["sta_speed"] == 32.0 and g["sta_width"] == 16 for g in gpus)
    down = [d for d in devs if "downgraded" in (d.get("sta_speed_flag"), d.get("sta_width_flag"))]
    assert len(down) == 16
    assert not any(d["is_gpu"] for d in down)


# ------------------------------------------------------------------ collect_env


def test_collect_env_nvidia():
    r = p.parse_collect_env(
        read(
            "vllm-collect-env__nvidia-h100-x8__cu124_drv550.90.12_vllm0.6.3_with-topo__indented4.txt"
        )
    )
    assert r["torch_version"] == "2.5.1+cu124"
    assert r["torch_cuda"] == "12.4" and r["torch_hip"] is None
    assert r["nvidia_driver"] == "550.90.12"
    assert r["cuda_available"] == "True"
    assert r["gpu_models"] == ["NVIDIA H100 80GB HBM3"] * 8
    assert r["kernel"] == "6.8.0-47-generic"
    assert r["os"].startswith("Ubuntu 22.04")
    assert len(r["nvidia_topo"]["gpus"]) == 8


def test_collect_env_amd():
    r = p.parse_collect_env(
        read(
            "vllm-collect-env__amd-mi300x-x8__rocm6.2_vllm0.6.4_with-rocm-smi-showtopo__indented4.txt"
        )
    )
    assert r["torch_hip"] == "6.2.41133-dd7f95766"
    assert r["torch_cuda"] is None
    assert r["rocm_version"] == "6.2.41133-dd7f95766"
    assert r["gpu_models"] == ["AMD Instinct MI300X (gfx942:sramecc+:xnack-)"]
    assert r["amd_numa"] == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}


# ------------------------------------------------------------------ kernel logs


def test_kernel_log_xid119_gsp_timeout():
    events = scan_kernel_log(
        read(
            "kernel-log__nvidia-hgx-dell-xe9680__xid119-gsp-rpc-timeout__kernel5.15__dmesg-ctime.log"
        )
    )
    xid = events[0]
    assert xid.key == "xid.119" and xid.code == 119
    assert xid.severity == "critical"
    assert xid.title == "Xid 119: GSP RPC timeout"
    assert xid.count == 5  # nvidia-smi x3, cache_mgr_main, gpud
    assert xid.first == "Sun Feb 23 16:24:18 2025"
    assert xid.last == "Sun Feb 23 16:30:13 2025"
    assert xid.devices == {"0000:9b:00"}
    reset = next(e for e in events if e.key == "nvidia.gsp_reset_needed")
    assert reset.count == 1 and reset.severity == "critical"
    assert reset.devices == {"0000:9b:00"}
    # The RPC history table, the stack dump and the clocksource line are not events.
    assert {e.key for e in events} == {"xid.119", "nvidia.gsp_reset_needed"}


def test_kernel_log_clean_driver_load_has_no_findings():
    events = scan_kernel_log(
        read(
            "kernel-log__nvidia-1gpu__clean-driver-load-unload-reload__"
            "proprietary550.144.03__dmesg-raw-level-prefix.log"
        )
    )
    assert events == []


def test_kernel_log_amd_and_ordering():
    # Hand-written lines in the formats the drivers print: the fixtures have no Instinct
    # kernel log (see "gaps" in SOURCES.md), so these only exercise the rules and ordering.
    amd = "amdgpu 0000:03:00.0: amdgpu:"
    log = "\n".join(
        [
            f"[  100.000001] {amd} 3 correctable hardware errors detected in umc block",
            "[  101.000001] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, "
            "signaled seq=1, emitted seq=3",
            f"[  101.500000] {amd} GPU reset begin!",
            f"[  102.000001] {amd} [gfxhub] page fault (src_id:0 ring:24 vmid:3 pasid:32769)",
            "[  103.000000] amdgpu 0000:03:00.0: Direct firmware load for "
            "amdgpu/psp_13_0_6_sos.bin failed with error -2",
            f"[  104.000000] {amd} ring gfx_0.0.0 timeout, signaled seq=5, emitted seq=6",
            "Feb 23 16:24:18 host kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=0, "
            "GPU has fallen off the bus.",
            "Feb 23 16:25:00 host kernel: NVRM: Xid (PCI:0000:3b:00): 999, pid=0, something new",
        ]
    )
    events = scan_kernel_log(log)
    keys = [e.key for e in events]
    by = {e.key: e for e in events}
    assert by["amdgpu.ring_timeout"].count == 2
    assert by["amdgpu.ring_timeout"].first == "101.000001"
    assert by["amdgpu.ring_timeout"].last == "104.000000"
    assert by["xid.79"].severity == "critical" and by["xid.79"].first == "Feb 23 16:24:18"
    assert by["firmware.load_failed"].severity == "critical"
    assert by["gpu.reset"].severity == "error"
    assert by["amdgpu.vm_fault"].severity == "error"
    assert by["ras.correctable"].severity == "warning"
    assert by["xid.999"].severity == "warning" and "not in the shipped table" in by["xid.999"].title
    # most severe first; within a severity the most frequent first
    assert keys[0] == "amdgpu.ring_timeout"
    ranks = [{"critical": 3, "error": 2, "warning": 1}[e.severity] for e in events]
    assert ranks == sorted(ranks, reverse=True)


# Poison events as the drivers print them (sources in kernel_log.py's ras.poison rule; the
# first two as in amd/node-scraper test/unit/plugin/test_dmesg_analyzer.py), and benign
# lines that merely hold the word: NVIDIA's FBHUB clear at GPU init (the real H200 boot
# below), amdgpu's debug option (amdgpu_device.c) and its "not a poison consumption" note
# (amdgpu_ras.c), a kernel command line.
FBHUB = "NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it."
POISON_LINES = [
    "amdgpu 0000:68:00.0: {14}poison is consumed by client 12, kick off gpu reset flow",
    "amdgpu 0000:68:00.0: {15}Poison is created",
    "amdgpu 0000:03:00.0: amdgpu: Poison is created, no user action is needed.",
    "amdgpu 0000:03:00.0: amdgpu: RAS poison consumption, fall back to gpu reset flow: client id 3",
    "amdgpu: RAS poison consumption handling: client id 3",
    "amdgpu 0000:03:00.0: amdgpu: GPU reset for umc RAS poison consumption is issued!",
    "Memory failure: 0x1b2c3d: recovery action for dirty LRU page: Recovered",
    "Memory failure: 0x1b2c3d: already hardware poisoned",
]
BENIGN_POISON_WORD = [
    FBHUB,
    "amdgpu: debug: enable mode2 reset for poison consumption recovery",
    "amdgpu 0000:03:00.0: amdgpu: No RAS poison status in umc poison IH.",
    "Kernel command line: BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/sda1 init_on_free=1 page_poison=1",
]
H200_BOOT = "kernel-log__nvidia-h200-x1__fbhub-poison-clear-at-init__drv580.159.04__dmesg-raw.log"
_MON = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


@st.composite
def stamps(draw: st.DrawFn) -> str:
    """A line prefix in one of the forms kernel_log._TS accepts."""
    sec, us = draw(st.integers(0, 99999)), draw(st.integers(0, 999999))
    mon, day = draw(st.sampled_from(_MON)), draw(st.integers(1, 28))
    hms = "{:02d}:{:02d}:{:02d}".format(*draw(st.tuples(*[st.integers(0, 59)] * 3)))
    iso = f"2026-{_MON.index(mon) + 1:02d}-{day:02d}T{hms},{us:06d}+00:00 "
    return draw(
        st.sampled_from(
            [
                f"[{sec:5d}.{us:06d}] ",
                f"<{us % 8}>[{sec:5d}.{us:06d}] ",
                f"[Fri {mon} {day:2d} {hms} 2026] ",
                iso,
                iso + "h100-node kernel: ",
                "kern  :err   : " + iso,
                f"{mon} {day:2d} {hms} h100-node kernel: ",
                f"{mon} {day:2d} {hms} h100-node kernel: [{sec:5d}.{us:06d}] ",
            ]
        )
    )


@st.composite
def fbhub_lines(draw: st.DrawFn) -> str:
    gpu = draw(st.sampled_from(["", "GPU0 ", "GPU7 "]))
    return draw(stamps()) + FBHUB.replace("NVRM: ", f"NVRM: {gpu}")


def _others(events):
    return {
        (e.key, e.severity, e.count, frozenset(e.devices))
        for e in events
        if e.key != "nvidia.fbhub_poison_cleared_at_init"
    }


def _not_fbhub(events):
    return [e for e in events if e.key != "nvidia.fbhub_poison_cleared_at_init"]


def _worst(events):
    return max((SEVERITY_RANK[e.severity] for e in events), default=-1)


def test_kernel_log_h200_boot_fbhub_clear_is_info_only():
    (ev,) = scan_kernel_log(read(H200_BOOT))
    assert (ev.key, ev.severity, ev.count) == ("nvidia.fbhub_poison_cleared_at_init", "info", 1)
    assert ev.first == ev.last == "1.119338" and ev.example == FBHUB


@pytest.mark.parametrize("line", POISON_LINES)
def test_kernel_log_real_poison_lines_are_critical(line):
    (ev,) = scan_kernel_log(f"[  12.345678] {line}\n")
    assert (ev.key, ev.severity) == ("ras.poison", "critical")


@pytest.mark.parametrize("line", BENIGN_POISON_WORD)
def test_kernel_log_the_word_poison_alone_is_no_poison_event(line):
    events = scan_kernel_log(f"[  12.345678] {line}\n")
    assert "ras.poison" not in {e.key for e in events}
    # nor any other problem: amdgpu's debug-option line was a "GPU reset" error
    assert _worst(events) <= SEVERITY_RANK["info"], [(e.key, e.severity) for e in events]


_POOL = (
    read(
        "kernel-log__nvidia-hgx-dell-xe9680__xid119-gsp-rpc-timeout__kernel5.15__dmesg-ctime.log"
    ).splitlines()[::3]
    + read(
        "kernel-log__nvidia-1gpu__clean-driver-load-unload-reload__"
        "proprietary550.144.03__dmesg-raw-level-prefix.log"
    ).splitlines()
    + read(H200_BOOT).splitlines()
    + [f"[  50.000001] {ln}" for ln in POISON_LINES + BENIGN_POISON_WORD]
    + [
        "[  101.000001] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, "
        "signaled seq=1, emitted seq=3",
        "[  100.000001] amdgpu 0000:03:00.0: amdgpu: 3 correctable hardware errors detected "
        "in umc block",
        "Feb 23 16:25:00 host kernel: NVRM: Xid (PCI:0000:3b:00): 999, pid=0, something new",
    ]
)


@given(
    base=st.lists(st.sampled_from(_POOL), max_size=25),
    extra=st.lists(st.tuples(fbhub_lines(), st.integers(0, 10**6)), max_size=8),
)
def test_kernel_log_fbhub_lines_never_change_the_other_events(base, extra):
    # Any number of the benign FBHUB lines, in any timestamp form, anywhere in a log: the
    # other events (and so the worst severity among them) stay exactly what they were.
    lines = list(base)
    for line, at in extra:
        lines.insert(at % (len(lines) + 1), line)
    before, after = scan_kernel_log("\n".join(base)), scan_kernel_log("\n".join(lines))
    assert _others(after) == _others(before)
    assert _worst(_not_fbhub(after)) == _worst(_not_fbhub(before))
    fb = [e for e in after if e.key == "nvidia.fbhub_poison_cleared_at_init"]
    n_base = sum("FBHUB Interrupt detected" in ln for ln in base)
    assert sum(e.count for e in fb) == len(extra) + n_base
    assert all(e.severity == "info" for e in fb)


@given(
    line=st.sampled_from(POISON_LINES),
    stamp=stamps(),
    around=st.lists(st.one_of(fbhub_lines(), st.sampled_from(BENIGN_POISON_WORD)), max_size=6),
    at=st.integers(0, 6),
)
def test_kernel_log_real_poison_stays_critical_among_benign_lines(line, stamp, around, at):
    lines = list(around)
    lines.insert(at % (len(lines) + 1), stamp + line)
    events = scan_kernel_log("\n".join(lines))
    assert events[0].key == "ras.poison" and events[0].severity == "critical"
    assert events[0].count == 1


def test_xid_table_is_sourced():
    table = xid_table()
    for code in (13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 154):
        assert code in table
    for code, row in table.items():
        assert row["severity"] in ("critical", "error", "warning", "info"), code
        assert row["source"] and row["action"] and isinstance(row["verified"], bool), code


def test_nvidia_smi_and_topo_inside_a_whole_capture_session():
    # The telemetry folder's H100 session holds an idle and a loaded nvidia-smi table and a
    # topo -m among many other outputs: the last table (under load) is the one judged.
    text = (
        fixture_file("telemetry", "nvidia-smi_capture__h100-80gb-hbm3__drv590.48.01.txt")
    ).read_text()
    r = p.parse_nvidia_smi(text)
    assert r["tables"] == 2
    assert (r["driver_version"], r["cuda_version"]) == ("590.48.01", "13.1")
    (g,) = r["gpus"]
    assert g["name"] == "NVIDIA H100 80GB HBM3" and g["bdf"] == "0000:00:09.0"
    assert (g["memory_used_mib"], g["utilization_pct"]) == (19818, 100)
    (t,) = p.parse_nvidia_topo(text)["gpus"]
    assert (t["cpu_affinity"], t["numa_affinity"]) == ("0-19", "0")


# ------------------------------------------------------------------ bus ids (shared with telemetry)


@pytest.mark.parametrize(
    "raw, canonical",
    [
        ("00000000:CD:00.0", "0000:cd:00.0"),  # NVML, nvidia-smi, dcgm-exporter
        ("0000:2f:00.0", "0000:2f:00.0"),  # sysfs, amdsmi, lspci -D
        ("19:00.0", "0000:19:00.0"),  # lspci without -D
        ("0001:03:1f.7", "0001:03:1f.7"),
        (" 0000:0C:00.0\n", "0000:0c:00.0"),
        ("N/A", None),
        (None, None),
        ("not a bus id", "not a bus id"),
    ],
)
def test_one_bus_id_form(raw, canonical):
    from accelbench.gpu.busid import normalize_bus_id

    assert normalize_bus_id(raw) == canonical


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFF), st.integers(0, 0x1F), st.integers(0, 7))
def test_bus_id_spellings_agree(domain, bus, dev, fn):
    from accelbench.gpu.busid import bus_id_from_bdfid, normalize_bus_id

    nvml = f"{domain:08X}:{bus:02X}:{dev:02X}.{fn}"
    sysfs = f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"
    assert normalize_bus_id(nvml) == normalize_bus_id(sysfs) == sysfs
    assert normalize_bus_id(sysfs.upper()) == sysfs
    if domain == 0:
        assert bus_id_from_bdfid(bus << 8 | dev << 3 | fn) == sysfs
