"""GPU error signatures in the kernel log."""

from __future__ import annotations

from accelbench.doctor.model import Check, Facts, Status


def check_kernel_log(facts: Facts) -> Check:
    kl = facts.get("kernel_log")
    title = "Kernel log"
    if kl is None:
        return Check(
            "kernel.log", title, Status.NA, "Not scanned (quick mode, or no --kernel-log capture)"
        )
    if kl.get("problem"):
        return Check(
            "kernel.log",
            title,
            Status.WARN,
            f"Kernel log unreadable: {kl['problem']}",
            [kl["problem"]],
            "Run as root, add the user to the adm / systemd-journal "
            "group, or pass a saved log: journalctl -k -b > k.log; "
            "accelbench doctor --kernel-log k.log",
        )
    events = kl["events"]
    data = {"source": kl["source"], "events": [e.to_dict() for e in events]}
    if not events:
        return Check(
            "kernel.log",
            title,
            Status.PASS,
            f"No GPU error signatures in {kl['lines']} lines ({kl['source']})",
            [],
            "",
            data,
        )
    worst = events[0].severity
    status = (
        Status.FAIL
        if worst in ("critical", "error")
        else (Status.WARN if worst == "warning" else Status.PASS)
    )
    ev = []
    for e in events:
        when = f", first {e.first}, last {e.last}" if e.first else ""
        devs = f" on {', '.join(sorted(e.devices))}" if e.devices else ""
        ev.append(f"[{e.severity}] {e.title}: {e.count}x{devs}{when}")
        ev.append(f"    e.g. {e.example}")
    top = events[0]
    if worst == "info":  # only known benign messages: shown, nothing to do
        summary = (
            f"No GPU error signatures in {kl['lines']} lines ({kl['source']}); known benign: "
            + "; ".join(f"{e.title} x{e.count}" for e in events)
        )
        return Check("kernel.log", title, status, summary, ev, "", data)
    summary = "; ".join(f"{e.title} x{e.count} ({e.severity})" for e in events[:3])
    return Check("kernel.log", title, status, summary, ev, top.action, data)
