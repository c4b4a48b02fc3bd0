"""Format detection for captured files by content signatures, and parsing a file by its
format with what was lost on the way (:class:`Capture`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.errors import AccelbenchError
from accelbench.telemetry.parsers.amd_smi import parse_amd_smi_json
from accelbench.telemetry.parsers.dcgm import parse_dcgm_prometheus
from accelbench.telemetry.parsers.nvidia_smi import (
    csv_header_line,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
)
from accelbench.telemetry.parsers.prometheus import SAMPLE_LINE
from accelbench.telemetry.parsers.rocm_exporter import parse_rocm_exporter_prometheus
from accelbench.telemetry.parsers.rocm_smi import parse_rocm_smi_json
from accelbench.telemetry.parsers.server import parse_server_metrics
from accelbench.telemetry.parsers.text import clean, find_json
from accelbench.telemetry.schema import Row

Parser = Callable[..., list[Row]]

FORMATS: dict[str, Parser] = {
    "nvidia-smi-xml": parse_nvidia_smi_xml,
    "nvidia-smi-csv": parse_nvidia_smi_csv,
    "rocm-smi": parse_rocm_smi_json,
    "amd-smi": parse_amd_smi_json,
    "dcgm": parse_dcgm_prometheus,
    "rocm-exporter": parse_rocm_exporter_prometheus,
    "server": parse_server_metrics,
}

_SERVER_PREFIXES = ("vllm:", "sglang:", "llamacpp:", "tgi_")

# What a file that is none of FORMATS looks like: (signature, description). Checked in
# order; the first that matches names the file in the error.
_LOOKS_LIKE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^\|\s*NVIDIA-SMI \d", re.M), "the plain `nvidia-smi` table"),
    (re.compile(r"^==+ NVSMI LOG ==+", re.M), "`nvidia-smi -q` text (capture `-q -x` instead)"),
    (re.compile(r"^\s*GPU0\s.*CPU Affinity", re.M), "`nvidia-smi topo -m`"),
    (re.compile(r"ROCm System Management Interface"), "`rocm-smi` text (add --json)"),
    (re.compile(r"^GPU: \d+\s*$", re.M), "`amd-smi` text (add --json)"),
    (re.compile(r"NVRM: |amdgpu[: ]|\[\s*\d+\.\d+\] "), "a kernel log (use `doctor --kernel-log`)"),
    (re.compile(r"ROCk module|HSA System Attributes"), "`rocminfo` (use `doctor --rocminfo`)"),
    (re.compile(r"^PyTorch version:", re.M), "collect_env (use `doctor --collect-env`)"),
    (re.compile(r"LnkSta:"), "`lspci -vvv` (use `doctor --lspci`)"),
]


@dataclass
class Capture:
    """A parsed capture: its format, the schema rows, and what could not be read
    (``lost``: truncation, unreadable values, skipped rows); ``notes`` are harmless
    remarks (a warning line skipped, several tables found)."""

    format: str
    rows: list[Row]
    lost: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _prometheus_kind(text: str) -> str | None:
    """dcgm / server / rocm-exporter when most sample lines are Prometheus samples."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    samples = [ln for ln in lines if not ln.startswith("#")]
    if not samples:
        return None
    good = [ln for ln in samples if SAMPLE_LINE.match(ln)]
    typed = any(ln.startswith(("# TYPE", "# HELP")) for ln in lines)
    if len(good) < max(1, len(samples) // 2) and not (typed and good):
        return None
    names = [ln.split("{", 1)[0].split(None, 1)[0] for ln in good]
    if any(n.startswith("DCGM_FI_") for n in names):
        return "dcgm"
    if any(n.startswith(_SERVER_PREFIXES) for n in names):
        return "server"
    if any(n.lower().startswith(("gpu_", "pcie_")) for n in names):
        return "rocm-exporter"
    return None


def looks_like(text: str) -> str:
    """A short description of what an unrecognised capture appears to be."""
    text = clean(text)
    found = [desc for rx, desc in _LOOKS_LIKE if rx.search(text)]
    if len(found) > 1:
        return "several tool outputs: " + "; ".join(found)
    if found:
        return found[0]
    s = text.strip()
    if not s:
        return "an empty file"
    if s.startswith(("{", "[")):
        return "JSON of another tool"
    first = s.splitlines()[0]
    return f"unknown text starting with {first[:60]!r}"


def detect_format(text: str) -> str:
    """The format of a captured tool output, by content signature. Raises
    AccelbenchError saying what the text looks like when it is none of :data:`FORMATS`."""
    s = clean(text).strip()
    if "<nvidia_smi_log" in s[:2000]:
        return "nvidia-smi-xml"
    if "{" in s[:4000] or "[" in s[:4000]:
        try:
            data, _ = find_json(s, "telemetry")
        except AccelbenchError:
            data = None
        if isinstance(data, dict) and any(str(k).startswith("card") for k in data):
            return "rocm-smi"
        if isinstance(data, dict) and "gpu_data" in data:
            return "amd-smi"
        if isinstance(data, list) and data and all(isinstance(g, dict) for g in data):
            if any("gpu" in g or "bdf" in g for g in data):
                return "amd-smi"
    kind = _prometheus_kind(s)
    if kind:
        return kind
    if csv_header_line(s.splitlines()) is not None:
        return "nvidia-smi-csv"
    if s.startswith(("{", "[")):
        # JSON that parsed as neither tool, or did not parse: say which.
        try:
            find_json(s, "rocm-smi / amd-smi")
        except AccelbenchError as exc:
            raise AccelbenchError(f"looks like JSON but {exc}") from None
    raise AccelbenchError(
        f"unknown telemetry format: this looks like {looks_like(s)}; expected nvidia-smi "
        "-q -x XML, nvidia-smi --query-gpu CSV, rocm-smi / amd-smi --json, or a dcgm-exporter"
        " / ROCm exporter / inference-server Prometheus scrape"
    )


def parse_capture(text: str, fmt: str | None = None) -> Capture:
    """Parse captured text (format guessed unless ``fmt`` names one of :data:`FORMATS`)."""
    fmt = detect_format(text) if fmt is None else fmt  # "" is a (wrong) format, not "guess"
    if fmt not in FORMATS:
        raise AccelbenchError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    lost: list[str] = []
    notes: list[str] = []
    rows = FORMATS[fmt](text, lost=lost, notes=notes)
    return Capture(fmt, rows, lost, notes)


def read_text(path: Path) -> str:
    p = Path(path)
    if p.exists() and not p.is_file() and not p.is_dir():  # a FIFO blocks, a device never ends
        raise AccelbenchError(f"cannot read {path}: not a regular file (a FIFO or device)")
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise AccelbenchError(f"cannot read {path}: file not found") from None
    except IsADirectoryError:
        raise AccelbenchError(f"{path} is a directory, not a captured file") from None
    except OSError as exc:
        raise AccelbenchError(f"cannot read {path}: {exc.strerror}") from exc


def read_capture(path: Path, fmt: str | None = None) -> Capture:
    """Parse a captured file: :func:`parse_capture` on its text."""
    return parse_capture(read_text(path), fmt)


def parse_file(path: Path, fmt: str | None = None) -> list[Row]:
    """The rows of a captured file (see :func:`read_capture` for what was lost)."""
    return read_capture(path, fmt).rows
