"""Format detection for captured files by content signatures, and parsing a file by its
format with what was lost on the way (:class:`Capture`).

:func:`identify` / :func:`looks_like` name any known tool output, also the ones telemetry
does not read (the plain `nvidia-smi` table, `-q` text, a kernel log ...): `telemetry
parse` uses them to say what a wrong file is, the doctor to refuse a capture of the
wrong tool."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.errors import AccelbenchError
from accelbench.telemetry.parsers.accelbench_exporter import (
    is_accelbench_scrape,
    parse_accelbench_prometheus,
)
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
from accelbench.telemetry.parsers.text import clean, find_json, not_text, quote, strip_ansi
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
    "accelbench": parse_accelbench_prometheus,
}

_SERVER_PREFIXES = ("vllm:", "sglang:", "llamacpp:", "tgi_")

# Tool outputs recognised by content: a key and a bare description of what it is. The
# FORMATS keys are the formats telemetry reads (found by detect_format); the others by
# the signatures below. Each reader adds its own advice: TELEMETRY_HINTS for `telemetry
# parse`; the doctor names the option that reads the file (doctor.inputs).
DESCRIPTIONS: dict[str, str] = {
    "nvidia-smi-xml": "`nvidia-smi -q -x` XML",
    "nvidia-smi-csv": "`nvidia-smi --query-gpu` CSV",
    "rocm-smi": "`rocm-smi --json`",
    "amd-smi": "`amd-smi --json`",
    "dcgm": "a dcgm-exporter scrape",
    "rocm-exporter": "a ROCm Device Metrics Exporter scrape",
    "server": "an inference server's /metrics scrape",
    "accelbench": "accelbench monitor's /metrics scrape",
    "nvidia-smi-table": "the plain `nvidia-smi` table",
    "nvidia-smi-q": "`nvidia-smi -q` text",
    "nvidia-smi-topo": "`nvidia-smi topo -m`",
    "nvidia-smi-dmon": "`nvidia-smi dmon`",
    "rocm-smi-text": "`rocm-smi` text",
    "amd-smi-text": "`amd-smi` text",
    "kernel-log": "a kernel log",
    "rocminfo": "`rocminfo`",
    "collect-env": "PyTorch / vLLM collect_env output",
    "lspci": "`lspci -vvv`",
}

# Text outputs by signature, checked in this order (ANSI escapes removed first). The
# `-q` banner is "==============NVSMI LOG==============" in real captures (no blanks).
_SIGNATURES: list[tuple[str, re.Pattern[str]]] = [
    ("nvidia-smi-table", re.compile(r"^\|\s*NVIDIA-SMI \d", re.M)),
    ("nvidia-smi-q", re.compile(r"^=+\s*NVSMI LOG\s*=+", re.M)),
    ("nvidia-smi-topo", re.compile(r"^\s*GPU0\s.*CPU Affinity", re.M)),
    ("nvidia-smi-dmon", re.compile(r"^#\s*gpu\s+pwr\b", re.M)),
    ("rocm-smi-text", re.compile(r"ROCm System Management Interface")),
    ("amd-smi-text", re.compile(r"^[GC]PU: \d+\s*$", re.M)),  # CPU: APU hosts (MI300A)
    ("kernel-log", re.compile(r"NVRM: |amdgpu[: ]|\[\s*\d+\.\d+\] ")),
    ("rocminfo", re.compile(r"ROCk module|HSA System Attributes")),
    ("collect-env", re.compile(r"^\s*PyTorch version:", re.M)),
    ("lspci", re.compile(r"LnkSta:")),
]

# Outputs that embed others: vLLM's collect_env carries `nvidia-smi topo -m` or
# `rocm-smi --showtopo`, which are then parts of it, not files of their own.
_EMBEDS = {"collect-env": ("nvidia-smi-topo", "rocm-smi-text")}

TELEMETRY_HINTS: dict[str, str] = {
    "nvidia-smi-q": "capture `-q -x` instead",
    "nvidia-smi-dmon": "capture `--query-gpu=... --format=csv` instead",
    "rocm-smi-text": "add --json",
    "amd-smi-text": "add --json",
    "kernel-log": "use `doctor --kernel-log`",
    "rocminfo": "use `doctor --rocminfo`",
    "collect-env": "use `doctor --collect-env`",
    "lspci": "use `doctor --lspci`",
}


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
    """dcgm / server / rocm-exporter / accelbench (its own monitor's exporter) when most
    sample lines are Prometheus samples."""
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
    if is_accelbench_scrape(names):
        return "accelbench"
    return None


def identify(text: str) -> list[str]:
    """The keys of :data:`DESCRIPTIONS` that ``text`` holds: its telemetry format, then
    every text output whose signature it carries (in :data:`_SIGNATURES` order; what a
    collect_env embeds is part of it, not listed apart)."""
    text = strip_ansi(clean(text))
    found = [key for key, rx in _SIGNATURES if rx.search(text)]
    for outer, inner in _EMBEDS.items():
        if outer in found:
            found = [k for k in found if k not in inner]
    fmt = _format_of(text.strip())
    return ([fmt] if fmt else []) + found


def looks_like(text: str, hints: Mapping[str, str] | None = None) -> str:
    """A short description of what a capture appears to be, each known output followed by
    its hint in ``hints`` (key -> advice) when there is one."""
    found = [
        DESCRIPTIONS[k] + (f" ({hints[k]})" if hints and k in hints else "") for k in identify(text)
    ]
    if len(found) > 1:
        return "several tool outputs: " + "; ".join(found)
    if found:
        return found[0]
    s = clean(text).strip()
    if not s:
        return "an empty file"
    binary = not_text(s)
    if binary:
        return binary
    if s.startswith(("{", "[")):
        return "JSON of another tool"
    first = s.splitlines()[0]
    return f"unknown text starting with {quote(first[:60])}"


def _format_of(s: str) -> str | None:
    """The key in :data:`FORMATS` of cleaned, stripped text, by content signature."""
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
        if isinstance(data, list):  # an entry amd-smi could not read may be "N/A"
            if any(isinstance(g, dict) and ("gpu" in g or "bdf" in g) for g in data):
                return "amd-smi"
    kind = _prometheus_kind(s)
    if kind:
        return kind
    if csv_header_line(s.splitlines()) is not None:
        return "nvidia-smi-csv"
    return None


def detect_format(text: str) -> str:
    """The format of a captured tool output, by content signature. Raises
    AccelbenchError saying what the text looks like when it is none of :data:`FORMATS`."""
    s = clean(text).strip()
    fmt = _format_of(s)
    if fmt:
        return fmt
    if s.startswith(("{", "[")):
        # JSON that parsed as neither tool, or did not parse: say which.
        try:
            find_json(s, "rocm-smi / amd-smi")
        except AccelbenchError as exc:
            raise AccelbenchError(f"looks like JSON but {exc}") from None
    raise AccelbenchError(
        f"unknown telemetry format: this looks like {looks_like(s, TELEMETRY_HINTS)}; "
        "expected nvidia-smi -q -x XML, nvidia-smi --query-gpu CSV, rocm-smi / amd-smi "
        "--json, or a dcgm-exporter / ROCm exporter / inference-server / accelbench monitor "
        "Prometheus scrape"
    )


def parse_capture(text: str, fmt: str | None = None) -> Capture:
    """Parse captured text (format guessed unless ``fmt`` names one of :data:`FORMATS`)."""
    given = fmt is not None
    fmt = detect_format(text) if fmt is None else fmt  # "" is a (wrong) format, not "guess"
    if fmt not in FORMATS:
        raise AccelbenchError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    lost: list[str] = []
    notes: list[str] = []
    try:
        rows = FORMATS[fmt](text, lost=lost, notes=notes)
    except AccelbenchError as exc:
        # a format named for a capture of another tool: say what it looks like (a CSV
        # read as nvidia-smi XML was "the capture was cut short")
        if given and fmt not in identify(text):
            raise AccelbenchError(
                f"{exc}; the capture is not {DESCRIPTIONS[fmt]}: it looks like {looks_like(text)}"
            ) from exc
        raise
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
