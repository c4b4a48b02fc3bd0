"""Which accelerators are there, and do the sources agree on them."""

from __future__ import annotations

from accelbench.doctor.checks.common import vendor_counts
from accelbench.doctor.model import Check, Facts, Status


def check_inventory(facts: Facts) -> list[Check]:
    counts = vendor_counts(facts)
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
    elif total_pci == 0 and total_rt == 0 and pci is None and not facts.get("live"):
        # Captures without any inventory (or only ones that were not understood): that
        # is not a CPU-only machine, it is a machine we know nothing about.
        kl = facts.get("kernel_log")
        kl_devs = sorted({d for e in (kl.get("events", []) if kl else []) for d in e.devices})
        why = [f"{src}: {what}" for src, what in facts.get("lost", [])]
        if kl_devs:
            why.append(f"the kernel log names GPU device(s) {', '.join(kl_devs)}")
        checks.append(
            Check(
                "inventory.accelerators",
                "Accelerators",
                Status.UNKNOWN,
                "Accelerators unknown: no inventory among the captures"
                + (f" ({'; '.join(why)})" if why else ""),
                ev + why,
                "Capture an inventory: lspci -vvv, nvidia-smi, amd-smi static --json, "
                "rocm-smi or rocminfo (or run the doctor on the machine).",
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
        from_sysfs = pci is not None and pci["source"].startswith("sysfs")
        missing_driver = [
            g["bdf"]
            for g in (pci or {}).get("gpus", [])
            if from_sysfs and "driver" in g and g.get("driver") is None
        ]
        st = Status.FAIL if missing_driver else Status.PASS
        summary = f"{', '.join(parts)} accelerator(s)"
        remedy = ""
        cut = [f"{src}: {what}" for src, what in facts.get("lost", [])]
        if cut and st == Status.PASS:
            # A capture cut short may hold fewer GPUs than the machine: the count is a floor.
            st = Status.UNKNOWN
            summary = f"at least {summary}; " + "; ".join(cut)
            ev = ev + cut
            remedy = "Capture the tool output again in full."
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
