"""Whether the GPUs are idle before a benchmark."""

from __future__ import annotations

from accelbench.doctor.checks.common import from_findings
from accelbench.doctor.model import Check, Facts


def check_idle(facts: Facts) -> Check:
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
    rs = facts.get("rocm_smi")
    for r in rs["gpus"] if rs else []:
        if "vram_pct" not in r:
            continue
        vram, gpu = r["vram_pct"], r.get("utilization_pct", 0.0)
        busy = vram > 5 or gpu > 10
        f.append(
            (
                "warn" if busy else "pass",
                f"GPU[{r['index']}]: VRAM {vram:g}% used, {gpu:g}% busy",
                remedy if busy else "",
            )
        )
    return from_findings(
        "gpu.idle", title, f, "No utilisation information (no GPU, or not captured)"
    )
