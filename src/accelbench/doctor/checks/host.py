"""The host around the GPUs: IOMMU, huge pages, NUMA placement, readable files."""

from __future__ import annotations

from typing import Any

from accelbench.doctor.model import Check, Facts, Status
from accelbench.gpu.values import to_int


def check_iommu(facts: Facts) -> Check:
    title = "IOMMU mode"
    io = facts.get("iommu")
    if io is None:
        return Check("system.iommu", title, Status.NA, "Not captured")
    pci = facts.get("pci")
    gpus = pci.get("gpus", []) if pci else []
    types = sorted({t for g in gpus if (t := g.get("iommu_group_type"))})
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


def check_hugepages(facts: Facts) -> Check:
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


def check_numa(facts: Facts) -> Check:
    title = "NUMA placement"
    ev: list[str] = []
    nodes = facts.get("numa_nodes") or []
    pci = facts.get("pci")
    gpus = pci.get("gpus", []) if pci else []
    placement: dict[str, int | None] = {}
    for g in gpus:
        if "numa_node" in g:
            placement[g["bdf"]] = g["numa_node"]
    topo = facts.get("topo")
    for t in topo["gpus"] if topo else []:
        ev.append(f"{t['name']}: NUMA affinity {t['numa_affinity']}, CPUs {t['cpu_affinity']}")
        placement.setdefault(t["name"], to_int(t["numa_affinity"]))
    for i, n in (facts.get("amd_numa") or {}).items():
        placement.setdefault(f"GPU[{i}]", n)
    for a in facts.get("amd_smi_static") or []:
        if a.get("numa_node") is not None:
            placement.setdefault(f"GPU {a['index']} ({a.get('bdf')})", a.get("numa_node"))
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


def check_problems(facts: Facts) -> Check:
    probs = [p for p in facts["problems"] if p]
    probs += [f"{src} capture: {what}" for src, what in facts.get("lost", [])]
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
        f"{len(probs)} file(s) or tool(s) could not be read, were not understood or were "
        "cut short; some checks saw less",
        probs,
        "Run as root or with the needed groups (video, render, adm) to see everything.",
    )
