"""ECC, retired pages, row remapping and RAS counters."""

from __future__ import annotations

from accelbench.doctor.checks.common import from_findings
from accelbench.doctor.model import Check, Facts


def check_memory(facts: Facts) -> Check:
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
            # "N/A": ECC is off or not reported - nothing says the memory is fine.
            f.append(
                (
                    "unknown",
                    f"GPU {g['index']} ({g['bdf']}): uncorrected ECC errors not reported ({e})",
                    "Check nvidia-smi -q -d ECC: enable ECC (nvidia-smi -e 1, then reset) "
                    "on data-centre GPUs.",
                )
            )
    for ng in (facts.get("nvml") or {"available": False}).get("gpus", []):
        tag = f"GPU {ng['index']}"
        if ng.get("ecc_uncorrected"):
            f.append(
                (
                    "fail",
                    f"{tag}: {ng['ecc_uncorrected']} uncorrected ECC errors (NVML)",
                    "Drain and reset the GPU; service it if they recur.",
                )
            )
        if ng.get("retired_pages_dbe"):
            f.append(
                (
                    "warn",
                    f"{tag}: {ng['retired_pages_dbe']} pages retired for double-bit errors",
                    "",
                )
            )
        if ng.get("retired_pages_pending"):
            f.append(
                ("warn", f"{tag}: page retirement pending", "Reset the GPU to retire the page.")
            )
        rr = ng.get("remapped_rows")
        if rr and len(rr) >= 4:
            if rr[3]:
                f.append(("fail", f"{tag}: row remapping failed", "Contact the vendor (RMA)."))
            elif rr[2]:
                f.append(("warn", f"{tag}: row remapping pending", "Reset the GPU to apply it."))
        if "ecc_uncorrected" in ng and not ng.get("ecc_uncorrected"):
            f.append(("pass", f"{tag}: 0 uncorrected ECC errors (NVML)", ""))
    pci = facts.get("pci")
    for d in pci.get("gpus", []) if pci else []:
        ras = d.get("ras") or {}
        for block, c in ras.items():
            if isinstance(c, int):  # "bad_pages": the count of retired pages
                if c:
                    f.append(
                        (
                            "warn",
                            f"{d['bdf']}: {c} retired (bad) VRAM pages",
                            "Track with amd-smi bad-pages; replace the GPU near the threshold.",
                        )
                    )
                continue
            if c.get("ue"):
                f.append(
                    (
                        "fail",
                        f"{d['bdf']}: {block} {c['ue']} uncorrectable errors",
                        "Drain the GPU; reset it and check bad pages.",
                    )
                )
            elif c.get("ce"):
                f.append(
                    (
                        "warn",
                        f"{d['bdf']}: {block} {c['ce']} correctable errors",
                        "Watch the counter; a rising rate predicts failure.",
                    )
                )
        if ras and not any(lvl != "pass" for lvl, *_ in f):
            f.append(("pass", f"{d['bdf']}: RAS counters zero", ""))
    for a in facts.get("amd_smi_static") or []:
        tag = f"GPU {a['index']} ({a.get('bdf')})"
        if "umc" in a.get("ecc_blocks_disabled", []):
            f.append(
                (
                    "warn",
                    f"{tag}: HBM ECC (UMC block) disabled",
                    "Enable ECC for production serving (amdgpu.ras_enable / firmware setting); "
                    "without it memory errors go unnoticed.",
                )
            )
        if str(a.get("bad_page_threshold_exceeded")).lower() == "true":
            f.append(("fail", f"{tag}: bad page threshold exceeded", "Replace the GPU (RMA)."))
        elif a.get("bad_page_threshold_exceeded") is not None:
            f.append(("pass", f"{tag}: bad page threshold not exceeded", ""))
    for ag in (facts.get("amdsmi") or {"available": False}).get("gpus", []):
        if ag.get("ecc_uncorrected"):
            f.append(
                (
                    "fail",
                    f"GPU {ag['index']}: {ag['ecc_uncorrected']} uncorrectable ECC errors (amdsmi)",
                    "Drain the GPU; check bad pages.",
                )
            )
        elif ag.get("ecc_corrected"):
            f.append(
                (
                    "warn",
                    f"GPU {ag['index']}: {ag['ecc_corrected']} correctable ECC errors (amdsmi)",
                    "",
                )
            )
    return from_findings(
        "memory.ecc", title, f, "No ECC / RAS counters available (no GPU, or not reported)"
    )
