"""What several checks share: GPU counts per vendor and source, and findings -> a Check."""

from __future__ import annotations

from accelbench.doctor.model import Check, Facts, Status

NVIDIA_SOURCES = ("nvml", "nvidia-smi", "nvidia-smi topo", "collect_env")
AMD_SOURCES = ("amdsmi", "amd-smi", "rocm-smi", "rocminfo")
RUNTIME_VENDOR = {s: "nvidia" for s in NVIDIA_SOURCES} | {s: "amd" for s in AMD_SOURCES}


def vendor_counts(facts: Facts) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {"nvidia": {}, "amd": {}}
    pci = facts.get("pci")
    if pci is not None:
        for vendor in counts:
            counts[vendor]["pci"] = sum(1 for g in pci["gpus"] if g["vendor"] == vendor)
    for src, gpus in facts["sources"].items():
        counts[RUNTIME_VENDOR[src]][src] = len(gpus)
    return counts


def from_findings(cid: str, title: str, findings: list[tuple[str, str, str]], na: str) -> Check:
    if not findings:
        return Check(cid, title, Status.NA, na)
    order = {"fail": 3, "warn": 2, "unknown": 1, "pass": 0}
    worst = max(findings, key=lambda f: order[f[0]])
    status = {
        "fail": Status.FAIL,
        "warn": Status.WARN,
        "unknown": Status.UNKNOWN,
        "pass": Status.PASS,
    }[worst[0]]
    bad = [f for f in findings if f[0] != "pass"]
    summary = "; ".join(f[1] for f in bad) if bad else "; ".join(f[1] for f in findings)
    remedy = " ".join(dict.fromkeys(f[2] for f in bad if f[2]))
    return Check(cid, title, status, summary, [f"{f[0]}: {f[1]}" for f in findings], remedy)
