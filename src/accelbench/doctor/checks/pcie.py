"""The GPUs' PCIe links and the bridges above them."""

from __future__ import annotations

from accelbench.doctor.model import Check, Facts, Status
from accelbench.doctor.parsers import Link, PciDevice


def _link_finding(
    label: str, d: PciDevice | Link, limit: PciDevice | None = None
) -> tuple[str, str] | None:
    """Judge one link. `limit` is the GPU below an upstream bridge: a bridge only has to
    run as fast and as wide as the GPU can (a Gen5 switch port feeding a Gen4 device
    shows "downgraded" and is fine)."""
    cs, ss, cw, sw = d.get("cap_speed"), d.get("sta_speed"), d.get("cap_width"), d.get("sta_width")
    if cs is None or ss is None or cw is None or sw is None:
        return None
    if limit is not None:
        cs = min(cs, limit.get("cap_speed") or cs)
        cw = min(cw, limit.get("cap_width") or cw)
    if sw < cw:
        return "fail", f"{label} x{sw} of x{cw} at {ss:g} GT/s (max {cs:g} GT/s)"
    if ss < cs:
        return "warn", f"{label} {ss:g} GT/s of {cs:g} GT/s, x{sw}"
    return "pass", f"{label} {ss:g} GT/s x{sw} (max {cs:g} GT/s x{cw})"


def check_pcie(facts: Facts) -> Check:
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
    smi = facts.get("nvidia_smi")
    util = {
        s["bdf"]: u
        for s in (smi.get("gpus", []) if smi else [])
        if (u := s.get("utilization_pct")) is not None
    }

    def judged(f: tuple[str, str] | None, g: PciDevice) -> tuple[str, str] | None:
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
    rs = facts.get("rocm_smi")
    replay = [
        (r["index"], n) for r in (rs["gpus"] if rs else []) if (n := r.get("pcie_replay_count"))
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
