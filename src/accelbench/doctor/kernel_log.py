"""Kernel log scan: known GPU error signatures in dmesg / journalctl -k output.

Recognised: NVIDIA Xid (meaning and severity from data/xid.yaml) and NVSwitch SXid,
"GPU has fallen off the bus", GSP reset requests, amdgpu ring timeouts, GPU resets,
RAS / ECC / poison events, VM (page) faults, firmware load failures and PCIe AER
errors. Each event is counted and dated (first and last time seen). Known benign driver
messages that look alarming (NVIDIA's FBHUB poison clear at GPU init) are listed as
``info`` events, so they are shown but never fail the check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Required, TypedDict

from accelbench.telemetry.parsers.text import clean
from accelbench.yamlfile import load_yaml

SEVERITY_RANK = {"critical": 3, "error": 2, "warning": 1, "info": 0}

# Timestamp prefixes seen in the wild, in the order they are tried.
_TS = [
    # <4>[ 1126.588387] (raw syslog level prefix, pstore dumps)
    re.compile(r"^<\d>\[\s*(?P<ts>\d+\.\d+)\]\s?"),
    # [ 1126.588387] (plain dmesg)
    re.compile(r"^\[\s*(?P<ts>\d+\.\d+)\]\s?"),
    # [Sun Feb 23 16:24:18 2025] (dmesg -T / --ctime)
    re.compile(r"^\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s?"),
    # 2025-02-23T16:24:18,123456+00:00 host kernel:
    # (dmesg --time-format iso, also after a --decode prefix; journalctl -o short-iso)
    re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[^ ]*)\s+(?:\S+\s+kernel:\s?)?"),
    # Feb 23 16:24:18 host kernel: [ 12.3] (syslog / journalctl -k)
    re.compile(
        r"^(?P<ts>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)\s+\S+\s+kernel:\s?(?:\[\s*\d+\.\d+\]\s?)?"
    ),
]


class XidInfo(TypedDict, total=False):
    """One Xid of the shipped table (doctor/data/xid.yaml)."""

    name: Required[str]
    severity: Required[str]
    action: Required[str]
    verified: bool


class EventJSON(TypedDict):
    key: str
    title: str
    severity: str
    code: int | None
    count: int
    first: str | None
    last: str | None
    devices: list[str]
    example: str
    action: str
    meaning_verified: bool | None


@lru_cache(maxsize=1)
def xid_table() -> dict[int, XidInfo]:
    text = resources.files("accelbench.doctor").joinpath("data/xid.yaml").read_text()
    return {int(k): v for k, v in load_yaml(text)["xids"].items()}


@dataclass
class Rule:
    key: str
    pattern: re.Pattern[str]
    severity: str
    title: str
    action: str


# Patterns are matched against the message with its timestamp removed.
RULES: list[Rule] = [
    Rule(
        "nvidia.fallen_off_bus",
        re.compile(r"NVRM: .*(?:GPU at \S+ has fallen off the bus)"),
        "critical",
        "NVIDIA GPU has fallen off the bus",
        "Reboot; check power, seating and the PCIe link; service if it recurs.",
    ),
    Rule(
        "nvidia.gsp_reset_needed",
        re.compile(r"NVRM: .*The GPU likely needs to be reset"),
        "critical",
        "NVIDIA driver says the GPU needs a reset",
        "Reset the GPU (nvidia-smi -r with no processes) or reboot before benchmarking.",
    ),
    Rule(
        "nvidia.rminit_failed",
        re.compile(r"NVRM: .*RmInitAdapter failed"),
        "critical",
        "NVIDIA driver failed to initialise a GPU",
        "Check that driver and firmware match; look at the lines before it; reboot.",
    ),
    Rule(
        "amdgpu.ring_timeout",
        re.compile(r"ring (\S+) timeout", re.I),
        "critical",
        "amdgpu ring timeout (GPU hang)",
        "A job hung on the GPU; the driver resets it. "
        "Repeated: update ROCm/amdgpu, check firmware.",
    ),
    # amdgpu's announcement of a debug option set with amdgpu.debug_mask at load
    # (amdgpu_init_debug_options in amdgpu_device.c: pr_info("debug: enable mode2 reset
    # for poison consumption recovery"), "debug: enable RAS ACA", ...): a setting, not an
    # event; before gpu.reset and the RAS rules, whose words it holds.
    Rule(
        "amdgpu.debug_option",
        re.compile(r"amdgpu\b.*\bdebug: enable ", re.I),
        "info",
        "amdgpu debug option enabled at load (amdgpu.debug_mask)",
        "None for health; a debug option changes the driver's behaviour: note it beside results.",
    ),
    Rule(
        "gpu.reset",
        re.compile(
            r"amdgpu.*(?:GPU reset begin|GPU reset\(\d+\)|GPU recovery|Mode\d reset|BACO reset)"
            r"|amdgpu.*reset (?:succeeded|failed)",
            re.I,
        ),
        "error",
        "GPU reset",
        "Results around the reset are suspect; find the error that caused it (lines just before).",
    ),
    Rule(
        "ras.uncorrectable",
        re.compile(
            r"(?:amdgpu|RAS|ras).*(?:uncorrectable|non-?correctable|fatal) (?:hardware )?error"
            r"|\d+ uncorrectable hardware errors",
            re.I,
        ),
        "critical",
        "RAS: uncorrectable hardware error",
        "Drain the GPU; check retired pages (amd-smi bad-pages) "
        "and contact the vendor if it recurs.",
    ),
    # NVIDIA's driver, at GPU init on GA100 and GH100 (A100, H100, H200): a poison interrupt
    # that the VBIOS left pending is cleared ("This WAR is required for Bug 2924523 as VBIOS
    # IFR causes FBHUB Poison intr": NVIDIA/open-gpu-kernel-modules at 448d5cc6 (560.28.03),
    # src/nvidia/src/kernel/gpu/arch/ampere/kern_gpu_ga100.c,
    # gpuClearFbhubPoisonIntrForBug2924523_GA100, called only from gpuPostConstruct;
    # generated/g_gpu_nvoc.c binds it to "ChipHal: GA100 | GH100"). Printed on healthy
    # machines (tests/fixtures/doctor, the H200 boot): info, and before ras.poison.
    Rule(
        "nvidia.fbhub_poison_cleared_at_init",
        re.compile(
            r"NVRM: (?:GPU\d+ )?(?:gpuClearFbhubPoisonIntrForBug2924523\w*: )?"
            r"FBHUB Interrupt detected\. Clearing it"
        ),
        "info",
        "NVIDIA driver cleared a stale FBHUB poison interrupt at GPU init",
        "None: a driver workaround (NVIDIA bug 2924523) printed on healthy A100 / H100 / "
        "H200 at driver load; it is no memory error.",
    ),
    # Poison events as the drivers print them, not any line holding the word: amdgpu
    # "{14}poison is consumed by client 12, kick off gpu reset flow" and "Poison is created"
    # (amdkfd kfd_int_process_v9.c, amdgpu_ras.c; AMD's amd/node-scraper dmesg rules match
    # the same two), older "RAS poison consumption, fall back to gpu reset flow: client id
    # 3", "RAS poison consumption handling", "GPU reset for umc RAS poison consumption is
    # issued!"; Linux's hwpoison handler (mm/memory-failure.c) "Memory failure: 0x1234:
    # recovery action for dirty LRU page: Recovered", "... already hardware poisoned".
    # NVIDIA reports contained / uncontained poison as Xid 94 / 95 (matched before RULES).
    Rule(
        "ras.poison",
        re.compile(
            r"\bpoison (?:is )?(?:consumed|created)\b"
            r"|\bRAS poison consumption(?:,| handling| is issued)"
            r"|\bhardware poisoned\b"
            r"|\bMemory failure: (?:0x)?[0-9a-f]+:",
            re.I,
        ),
        "critical",
        "RAS: poison consumed / detected",
        "Memory poison reached a consumer: drain, reset the GPU, check bad pages.",
    ),
    Rule(
        "ras.correctable",
        re.compile(r"(?:amdgpu|RAS|EDAC).*\d+ correctable (?:hardware )?errors?", re.I),
        "warning",
        "RAS: correctable errors",
        "Watch the ECC counters; a rising rate predicts failure.",
    ),
    Rule(
        "ras.bad_page",
        re.compile(r"(?:amdgpu|RAS).*(?:bad page|retired page|page retire)", re.I),
        "warning",
        "RAS: bad / retired memory pages",
        "Check amd-smi bad-pages; replace the GPU when the threshold is near.",
    ),
    Rule(
        "amdgpu.vm_fault",
        re.compile(
            r"amdgpu.*(?:\[\w+hub\] (?:no-retry )?page fault|VM_L2_PROTECTION_FAULT|VM fault)", re.I
        ),
        "error",
        "amdgpu VM (page) fault",
        "Usually an application or driver bug: note the process, update ROCm if it recurs.",
    ),
    Rule(
        "firmware.load_failed",
        re.compile(
            r"Direct firmware load for \S+ failed|failed to load (?:\S+ )?firmware"
            r"|firmware load failed|psp .*load .*failed",
            re.I,
        ),
        "critical",
        "GPU firmware failed to load",
        "Install the firmware package matching the driver (amdgpu-dkms-firmware / "
        "linux-firmware), rebuild the initramfs, reboot.",
    ),
    Rule(
        "pcie.aer_uncorrected",
        re.compile(
            r"AER: (?:Uncorrected|Multiple Uncorrected) \(Fatal|AER: Uncorrected \(Non-Fatal", re.I
        ),
        "error",
        "PCIe AER uncorrected error",
        "Check the PCIe link of the device named (seating, riser, retimer); see lspci -vvv.",
    ),
    Rule(
        "pcie.aer_corrected",
        re.compile(r"AER: (?:Corrected|Multiple Corrected) error", re.I),
        "warning",
        "PCIe AER corrected errors",
        "Occasional ones are harmless; a flood points at a marginal link.",
    ),
]

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<dev>[0-9a-fA-F:.]+)\): (?P<code>\d+),\s*(?P<msg>.*)")
_SXID = re.compile(r"SXid \((?:PCI:)?(?P<dev>[0-9a-fA-F:.]+)\): (?P<code>\d+)(?:, (?P<msg>.*))?")


@dataclass
class Event:
    key: str
    title: str
    severity: str
    action: str
    count: int = 0
    first: str | None = None
    last: str | None = None
    devices: set[str] = field(default_factory=set)
    example: str = ""
    code: int | None = None
    verified: bool | None = None

    def to_dict(self) -> EventJSON:
        return {
            "key": self.key,
            "title": self.title,
            "severity": self.severity,
            "code": self.code,
            "count": self.count,
            "first": self.first,
            "last": self.last,
            "devices": sorted(self.devices),
            "example": self.example,
            "action": self.action,
            "meaning_verified": self.verified,
        }


# `dmesg --decode` (-x) puts "facility:level:" before the time: "kern  :warn  : 2025-...".
_DECODE = re.compile(r"^[a-z]+\s*:[a-z]+\s*:\s?")


def _split_ts(line: str) -> tuple[str | None, str]:
    line = _DECODE.sub("", line, count=1)
    for rx in _TS:
        m = rx.match(line)
        if m:
            return m.group("ts"), line[m.end() :]
    return None, line


def scan_kernel_log(text: str) -> list[Event]:
    """All recognised events in a kernel log, the most severe (then most frequent) first."""
    events: dict[str, Event] = {}
    table = xid_table()

    def add(key: str, ts: str | None, msg: str, dev: str | None, **kw: Any) -> None:
        ev = events.get(key)
        if ev is None:
            ev = events[key] = Event(key=key, **kw)
            ev.example = msg.strip()[:300]
        ev.count += 1
        if ts:
            ev.first = ev.first or ts
            ev.last = ts
        if dev:
            ev.devices.add(dev)

    for raw in clean(text).splitlines():
        ts, msg = _split_ts(raw.rstrip())
        if not msg.strip():
            continue
        m = _XID.search(msg)
        if m:
            code = int(m.group("code"))
            info = table.get(code)
            if info:
                kw = {
                    "title": f"Xid {code}: {info['name']}",
                    "severity": info["severity"],
                    "action": info["action"],
                    "verified": bool(info.get("verified")),
                }
            else:
                kw = {
                    "title": f"Xid {code} (not in the shipped table)",
                    "severity": "warning",
                    "action": "Look the code up in NVIDIA's Xid catalog.",
                    "verified": None,
                }
            add(f"xid.{code}", ts, msg, m.group("dev"), code=code, **kw)
            continue
        m = _SXID.search(msg)
        if m:
            code = int(m.group("code"))
            add(
                f"sxid.{code}",
                ts,
                msg,
                m.group("dev"),
                code=code,
                title=f"NVSwitch SXid {code}",
                severity="error",
                action="Check Fabric Manager and nvidia-smi nvlink -s; "
                "see NVIDIA's NVSwitch SXid list.",
                verified=None,
            )
            continue
        for rule in RULES:
            if rule.pattern.search(msg):
                dev = re.search(
                    r"(?:PCI:|\b)([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-7])?)\b", msg
                )
                add(
                    rule.key,
                    ts,
                    msg,
                    dev.group(1) if dev else None,
                    title=rule.title,
                    severity=rule.severity,
                    action=rule.action,
                )
                break
    return sorted(events.values(), key=lambda e: (-SEVERITY_RANK[e.severity], -e.count, e.key))
