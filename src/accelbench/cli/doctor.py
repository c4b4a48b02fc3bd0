"""`accelbench doctor`: machine readiness checks, and `doctor weights` for model files."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from accelbench.cli.options import given_options, refuse_unmet
from accelbench.doctor import DoctorInputs, Report, Status, run_doctor
from accelbench.doctor.manifest import (
    MANIFEST_NAME,
    Verification,
    load_manifest,
    verify_manifest,
    write_manifest,
)
from accelbench.errors import AccelbenchError, UsageError

doctor_app = typer.Typer(
    help="Is this machine ready to serve and benchmark LLMs? (NVIDIA / AMD)",
    invoke_without_command=True,
    no_args_is_help=False,
)


def console(stderr: bool = False) -> Console:
    """A console that prints data as it is: no emoji codes (``0000:cd:00.0`` must not
    become a CD emoji), no highlighting. Data also goes through :class:`Text`, never
    through markup."""
    from accelbench.console import console as safe_console

    return safe_console(stderr=stderr)  # also no control characters (accelbench.console)


def _status(status: Status) -> Text:
    from accelbench.report.verdicts import COLOUR

    return Text(str(status), style=COLOUR[status])


def render_report(report: Report, console: Console, verbose: bool = False) -> None:
    """A table of checks (status, finding, what to do), then the evidence of every check
    that did not pass (of every check with verbose). Every piece of data is a Text object:
    bus ids, model names and log lines are never read as Rich markup or emoji codes."""
    table = Table(show_lines=False, expand=True)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("finding", ratio=3)
    table.add_column("what to do", ratio=2)
    for c in report.checks:
        table.add_row(
            _status(c.status),
            Text(c.title),
            Text(c.summary),
            Text(c.remedy),
            style="dim" if c.status == Status.NA else None,
        )
    console.print(table)
    shown = (Status.FAIL, Status.WARN, Status.UNKNOWN)
    for c in report.checks:
        if not c.evidence or (not verbose and c.status not in shown):
            continue
        ev = c.evidence if verbose else c.evidence[:12]
        console.print(
            Text.assemble(_status(c.status), " ", (c.title, "bold"), f" ({c.id}) evidence:")
        )
        for line in ev:
            console.print(Text(f"  {line}"))
        if len(c.evidence) > len(ev):
            console.print(Text(f"  (+{len(c.evidence) - len(ev)} more: --verbose or --json)"))
    n = report.counts()
    line = (
        f"doctor: {n['pass']} pass, {n['warn']} warn, {n['fail']} fail, "
        f"{n['unknown']} unknown, {n['n/a']} not applicable"
    )
    acc = report.get("inventory.accelerators")
    if acc.status == Status.NA:
        line += " - no NVIDIA or AMD accelerator found, GPU checks not applicable"
    elif acc.status == Status.UNKNOWN:
        line += " - accelerators unknown: the captures do not show them all"
    if report.failed:
        failing = ", ".join(c.id for c in report.checks if c.status == Status.FAIL)
        console.print(Text(f"{line}\nfailing: {failing}", style="bold red"))
    elif n["warn"] or n["unknown"]:
        console.print(Text(line, style="yellow"))
    else:
        console.print(Text(line, style="green"))


@doctor_app.callback()
def doctor(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show all evidence lines."),
    kernel_log: Path | None = typer.Option(
        None,
        "--kernel-log",
        help="Scan this saved kernel log (dmesg / journalctl -k) instead of the live one.",
    ),
    lspci: Path | None = typer.Option(
        None, "--lspci", help="Saved `lspci -vvv` output (PCI inventory and link checks)."
    ),
    nvidia_smi: Path | None = typer.Option(None, "--nvidia-smi", help="Saved `nvidia-smi` output."),
    nvidia_topo: Path | None = typer.Option(
        None, "--nvidia-topo", help="Saved `nvidia-smi topo -m` output."
    ),
    rocm_smi: Path | None = typer.Option(
        None, "--rocm-smi", help="Saved `rocm-smi` or `rocm-smi -a` output."
    ),
    amd_smi: list[Path] = typer.Option(
        [],
        "--amd-smi",
        help="Saved `amd-smi list|static|version` output, text or --json (repeatable).",
    ),
    rocminfo: Path | None = typer.Option(None, "--rocminfo", help="Saved `rocminfo` output."),
    collect_env: Path | None = typer.Option(
        None, "--collect-env", help="Saved PyTorch / vLLM collect_env output."
    ),
    sysfs_root: Path | None = typer.Option(
        None,
        "--sysfs-root",
        help="Directory standing in for / (holding sys/, proc/, etc/, opt/) "
        "to read instead of this machine.",
    ),
    live: bool | None = typer.Option(
        None,
        "--live/--no-live",
        help="Also query this machine when captures are given (default: only without captures).",
    ),
    no_kernel_log: bool = typer.Option(
        False, "--no-kernel-log", help="Skip reading the live kernel log."
    ),
) -> None:
    """Check accelerators, drivers, CUDA / ROCm / PyTorch, the kernel log, PCIe links, ECC,
    IOMMU, huge pages and NUMA. Exit code 1 if any check fails."""
    given = given_options(ctx)
    if ctx.invoked_subcommand is not None:
        # the checks' options mean nothing to a subcommand: never silently dropped
        if given:
            opts = sorted(given)
            verb = "does" if len(opts) == 1 else "do"
            hint = f", its own --json after it (doctor {ctx.invoked_subcommand} --json)"
            raise UsageError(
                f"{', '.join(opts)} {verb} not apply to doctor {ctx.invoked_subcommand}: "
                "they go with `accelbench doctor` alone" + (hint if "--json" in given else "")
            )
        return
    inputs = DoctorInputs(
        sysfs_root=sysfs_root,
        kernel_log=kernel_log,
        lspci=lspci,
        nvidia_smi=nvidia_smi,
        nvidia_topo=nvidia_topo,
        rocm_smi=rocm_smi,
        amd_smi=list(amd_smi),
        rocminfo=rocminfo,
        collect_env=collect_env,
        live=live,
        scan_kernel_log=not no_kernel_log,
    )
    if "--live" in given and not inputs.captures():  # the flag pair, either way
        raise UsageError(
            f"{'--live' if live else '--no-live'} applies only with captures (--lspci, "
            "--sysfs-root and the like): without any the doctor queries this machine"
        )
    # The live kernel log is read only where the doctor queries this machine (no capture,
    # or --live) and no --kernel-log replaces it (doctor.gather).
    refuse_unmet(given, [
        ("--verbose", not as_json, "without --json (the JSON holds every evidence line)"),
        ("--no-kernel-log", inputs.is_live and kernel_log is None,
         "where the live kernel log would be read: without --kernel-log, and without "
         "captures (--lspci, --sysfs-root and the like) unless --live is given"),
    ])  # fmt: skip
    report = run_doctor(inputs)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=1, default=str))
    else:
        render_report(report, console(), verbose)
    if report.failed:
        raise typer.Exit(1)


@doctor_app.command("weights")
def weights(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="The model directory."),
    write: bool = typer.Option(
        False,
        "--write-manifest",
        help=f"Hash every file and write a manifest (default {MANIFEST_NAME} inside PATH).",
    ),
    verify: Path | None = typer.Option(None, "--verify", help="Check PATH against this manifest."),
    manifest: Path | None = typer.Option(
        None, "--manifest", "-o", help="Where --write-manifest writes (default: inside PATH)."
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="Files hashed in parallel (default: CPUs, at most 8)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Write or verify SHA-256 hashes of a model directory's files, so a tampered or
    half-copied model is caught before serving. Exit code 1 if verification fails."""
    if write == (verify is not None):
        raise AccelbenchError("give exactly one of --write-manifest or --verify MANIFEST")
    refuse_unmet(given_options(ctx), [
        ("--manifest", write, "with --write-manifest (--verify names the manifest it reads)"),
    ])  # fmt: skip
    # Validate before the progress bar starts, so an error is one clean line.
    if not path.is_dir():
        raise AccelbenchError(f"model directory not found (or not a directory): {path}")
    if verify is not None:  # the manifest's errors name the option
        from accelbench.validate import input_file

        input_file("--verify", verify)
        try:
            load_manifest(verify)
        except AccelbenchError as exc:
            raise UsageError(f"--verify: {exc}") from None
    if write and manifest is not None and manifest.resolve() != (path / MANIFEST_NAME).resolve():
        from accelbench.validate import output_file

        # never over a file of the model it hashes (`-o MODEL/model.safetensors`)
        output_file("--manifest", manifest, [path], mkdir=False)
    err = console(stderr=True)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=as_json,
    ) as prog:
        task = prog.add_task("hashing", total=None)

        def total(n: int) -> None:
            prog.update(task, total=n)

        def advance(n: int) -> None:
            prog.update(task, advance=n)

        if write:
            written = write_manifest(path, manifest, workers, advance, total)
        else:
            assert verify is not None  # one of the two was given (checked above)
            result = verify_manifest(path, verify, workers, advance, total)
    if write:
        if as_json:
            count = {"count": len(written["files"])}
            typer.echo(json.dumps({k: v for k, v in written.items() if k != "files"} | count,
                                  indent=1))  # fmt: skip
        else:
            size = sum(f["size"] for f in written["files"].values())
            typer.echo(
                f"wrote {written.get('path')}: {len(written['files'])} files, "
                f"{size / 1e9:.2f} GB hashed in {written.get('seconds', 0.0):.1f}s"
            )
        return
    if as_json:
        typer.echo(json.dumps(result, indent=1))
    else:
        _render_verify(result, console())
    if not result["ok"]:
        raise typer.Exit(1)


def _render_verify(r: Verification, con: Console) -> None:
    fail = Text("fail", style="bold red")

    def say(head: Text, msg: str) -> None:
        con.print(Text.assemble(head, " ", msg))

    for rel in r["missing"]:
        say(fail, f"missing: {rel}")
    for m in r["size_mismatch"]:
        say(
            fail,
            f"size differs (truncated / half-copied?): {m['file']} "
            f"expected {m['expected']} bytes, found {m['found']}",
        )
    for rel in r["hash_mismatch"]:
        say(fail, f"content differs (altered / corrupted): {rel}")
    for u in r["unreadable"]:
        say(fail, f"unreadable: {u['file']} ({u['error']})")
    for rel in r["extra"]:
        say(Text("warn", style="yellow"), f"not in the manifest: {rel}")
    if r["ok"]:
        con.print(
            Text.assemble(
                ("ok", "green"),
                f": {r['checked']} of {r['expected']} files match {r['manifest']}"
                f" ({r['seconds']:.1f}s)",
            )
        )
    else:
        bad = (
            len(r["missing"])
            + len(r["size_mismatch"])
            + len(r["hash_mismatch"])
            + len(r["unreadable"])
        )
        con.print(
            Text.assemble(
                ("FAILED", "bold red"),
                f": {bad} of {r['expected']} files do not match {r['manifest']}",
            )
        )


def register(app: typer.Typer) -> None:
    app.add_typer(doctor_app, name="doctor")
