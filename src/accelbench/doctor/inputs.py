"""What the doctor is asked to look at: captured files, or the live machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from accelbench.errors import AccelbenchError
from accelbench.telemetry.parsers.text import clean


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
    """The text of a captured file, BOM removed and line ends made LF."""
    try:
        return clean(path.read_text(errors="replace"))
    except FileNotFoundError:
        raise AccelbenchError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise AccelbenchError(f"{what} must be a file, not a directory: {path}") from None
    except OSError as exc:
        raise AccelbenchError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
