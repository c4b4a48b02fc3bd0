"""What the doctor is asked to look at: captured files, or the live machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from accelbench.errors import AccelbenchError
from accelbench.telemetry.parsers import DESCRIPTIONS, identify, looks_like
from accelbench.telemetry.parsers.text import clean, not_text


@dataclass
class DoctorInputs:
    """Where the doctor looks. Captured files replace the live query of the same tool;
    when any capture is given, the local machine is not queried at all (mixing a capture
    with this machine's state would report false mismatches) unless `live` is forced."""

    sysfs_root: Path | None = None
    kernel_log: Path | None = None
    lspci: Path | None = None
    nvidia_smi: Path | None = None
    nvidia_topo: Path | None = None
    rocm_smi: Path | None = None
    amd_smi: list[Path] = field(default_factory=list)
    rocminfo: Path | None = None
    collect_env: Path | None = None
    live: bool | None = None  # None: live only if no capture was given
    scan_kernel_log: bool = True

    def captures(self) -> dict[str, str]:
        out = {}
        for name in (
            "sysfs_root",
            "kernel_log",
            "lspci",
            "nvidia_smi",
            "nvidia_topo",
            "rocm_smi",
            "rocminfo",
            "collect_env",
        ):
            v = getattr(self, name)
            if v is not None:
                out[name] = str(v)
        if self.amd_smi:
            out["amd_smi"] = ", ".join(str(p) for p in self.amd_smi)
        return out

    @property
    def is_live(self) -> bool:
        return self.live if self.live is not None else not self.captures()


def read_capture(path: Path, what: str) -> str:
    """The text of a captured file, BOM removed and line ends made LF. A file that is
    binary data, not text (random bytes, a UTF-16 or compressed capture) is refused for
    every capture option, as is a FIFO or device (it may never end: /dev/urandom)."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise AccelbenchError(f"{what} file {path} is not a regular file (a FIFO or device)")
    try:
        text = clean(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        raise AccelbenchError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise AccelbenchError(f"{what} must be a file, not a directory: {path}") from None
    except OSError as exc:
        raise AccelbenchError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    why = not_text(text)
    if why:
        raise AccelbenchError(f"{what} file {path} is {why}; give the tool's text output")
    return text


@dataclass(frozen=True)
class CaptureOption:
    """A doctor option that reads one tool's saved output: the tool outputs it reads (keys
    of :data:`accelbench.telemetry.parsers.DESCRIPTIONS`) and how to save the right one."""

    option: str
    kinds: tuple[str, ...]
    save: str
    expects: str = ""  # what the option reads, when not the first kind's description


# DoctorInputs field -> its option. The kernel log is not here: any text may be a kernel
# log (one without GPU lines is a healthy log), so it is never refused.
CAPTURE_OPTIONS: dict[str, CaptureOption] = {
    "lspci": CaptureOption("--lspci", ("lspci",), "sudo lspci -vvv > FILE"),
    "nvidia_smi": CaptureOption("--nvidia-smi", ("nvidia-smi-table",), "nvidia-smi > FILE"),
    "nvidia_topo": CaptureOption(
        "--nvidia-topo", ("nvidia-smi-topo",), "nvidia-smi topo -m > FILE"
    ),
    "rocm_smi": CaptureOption("--rocm-smi", ("rocm-smi-text",), "rocm-smi > FILE (or rocm-smi -a)"),
    "amd_smi": CaptureOption(
        "--amd-smi", ("amd-smi-text", "amd-smi"), "amd-smi static --json > FILE", "`amd-smi` output"
    ),
    "rocminfo": CaptureOption("--rocminfo", ("rocminfo",), "rocminfo > FILE"),
    "collect_env": CaptureOption(
        "--collect-env", ("collect-env",), "python -m torch.utils.collect_env > FILE"
    ),
}

# Where a file of another tool belongs: "give it to --lspci".
_READ_BY = {k: f"give it to {o.option}" for o in CAPTURE_OPTIONS.values() for k in o.kinds} | {
    "kernel-log": "give it to --kernel-log"
}


def check_capture_kind(field: str, path: Path, text: str, found: bool) -> None:
    """Refuse, in one line, a capture given to the option ``field`` when its parser
    ``found`` nothing of the tool and the text does not carry the tool's signature either:
    another tool's output (the sniffer names it), or no tool's at all. A real capture cut
    short keeps its signature or some of its data and is read (its loss is reported)."""
    opt = CAPTURE_OPTIONS[field]
    if found or any(k in opt.kinds for k in identify(text)):
        return
    expects = opt.expects or DESCRIPTIONS[opt.kinds[0]]
    raise AccelbenchError(
        f"{opt.option} {path} is not {expects}: it looks like {looks_like(text, _READ_BY)}; "
        f"capture it with: {opt.save}"
    )
