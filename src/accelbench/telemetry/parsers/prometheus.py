"""Prometheus text scrapes: samples, and storing them into schema rows."""

from __future__ import annotations

import math
import re

from prometheus_client.parser import text_string_to_metric_families

from accelbench.errors import AccelbenchError
from accelbench.telemetry.parsers.text import clean
from accelbench.telemetry.schema import Row, numeric, set_column

# One sample line of the text exposition format: name, optional labels, a numeric value
# (or NaN / Inf) and an optional timestamp.
SAMPLE_LINE = re.compile(
    r"^[A-Za-z_:][A-Za-z0-9_:]*(?:\{[^}]*\})?\s+"
    r"(?:[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)|[-+]?Inf|NaN)(?:\s+-?\d+)?$"
)
_NAMED_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S.*)$")


def prometheus_samples(
    text: str, lost: list[str] | None = None, notes: list[str] | None = None
) -> list[tuple[str, dict[str, str], float]]:
    """All samples of a Prometheus text scrape as (name, labels, value), via
    ``prometheus_client``'s parser.

    A sample whose value is not a number (dcgm-exporter can print ``N/A``) is left out
    and named in ``lost``; so is a last line cut off without its line end. Anything else
    malformed raises AccelbenchError."""
    text = clean(text)
    kept: list[str] = []
    lines = text.split("\n")
    cut_last = bool(lines) and lines[-1].strip() != "" and not text.endswith("\n")
    for n, raw in enumerate(lines):
        line = raw.strip()
        if n == len(lines) - 1 and cut_last and line.startswith("#"):
            _note(lost, f"the scrape ends inside a comment line: cut short? ({line[:80]})")
            continue
        if not line or line.startswith("#"):
            kept.append(raw)
            continue
        if n == len(lines) - 1 and cut_last and not SAMPLE_LINE.match(line):
            _note(lost, f"last line cut short, dropped: {line[:120]}")
            continue
        if not SAMPLE_LINE.match(line):
            m = _NAMED_LINE.match(line)
            if m and len(m.group(3).split()) > 2 and not m.group(2):
                # Not a sample at all: a tool's warning or a shell prompt line.
                _note(notes, f"skipped a line that is not a sample: {line[:120]}")
                continue
            if m and "{" not in m.group(3) and "}" not in m.group(3):
                _note(
                    lost,
                    f"{m.group(1)}{m.group(2) or ''}: value {m.group(3)!r} is not a "
                    "number; that field is unknown",
                )
                continue
        kept.append(raw)
    if cut_last and lines and SAMPLE_LINE.match(lines[-1].strip()):
        _note(
            lost,
            f"the scrape ends without a line end: its last value may be cut "
            f"({lines[-1].strip()[:120]})",
        )
    text = "\n".join(kept) + "\n"
    # prometheus_client appends "_total" to counter samples whose exposed name lacks it
    # (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION -> ..._total); keep the name as exposed.
    exposed = set()
    for line in kept:
        line = line.strip()
        if line and not line.startswith("#"):
            exposed.add(line.split("{", 1)[0].split(" ", 1)[0])
    out = []
    # a scrape holds each series once (Prometheus refuses a second sample of one); two
    # scrapes joined end to end had theirs summed or overwritten without a word (a vLLM
    # scrape read twice said 4 requests running where it had 2)
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                name = s.name
                if name not in exposed and name.endswith("_total") and name[:-6] in exposed:
                    name = name[:-6]
                key = (name, tuple(sorted(s.labels.items())))
                if key in seen:
                    shown = ",".join(f'{k}="{v}"' for k, v in key[1])
                    raise AccelbenchError(
                        f"not a valid Prometheus scrape: the series {name}"
                        f"{'{' + shown + '}' if shown else ''} appears twice (a scrape holds "
                        "each series once: two scrapes joined end to end?)"
                    )
                seen.add(key)
                out.append((name, dict(s.labels), float(s.value)))
    except (ValueError, TypeError) as exc:
        raise AccelbenchError(f"not a valid Prometheus scrape: {exc}") from exc
    return out


def finite(where: str, value: float, lost: list[str] | None) -> bool:
    """Whether a sample's value is a reading. NaN is the text format's "no reading":
    left out without a word (as "N/A" is in a tool's output); +Inf / -Inf is a value
    no device reads: left out and named in ``lost`` (``where``: the metric and device)."""
    if math.isnan(value):
        return False
    if math.isinf(value):
        _note(lost, f"{where}: value {value} is not a finite reading; that field is unknown")
        return False
    return True


def _note(notes: list[str] | None, msg: str) -> None:
    if notes is not None:
        notes.append(msg)


_SUMMED = {"nvlink_errors"}
_BOOL_COLS = {"remapped_rows_failure", "remapped_rows_pending"}
_INT_COLS = {
    "pcie_replay",
    "remapped_rows_unc",
    "remapped_rows_corr",
    "ecc_corrected_volatile",
    "ecc_uncorrected_volatile",
    "ecc_corrected_aggregate",
    "ecc_uncorrected_aggregate",
    "throttle_mask",
    "pcie_gen",
    "pcie_width",
    "pcie_gen_max",
    "pcie_width_max",
    "nvlink_errors",
    "mem_used_bytes",
    "mem_total_bytes",
    "xgmi_errors",
    "ecc_deferred",
}


def store(row: Row, col: str, value: float) -> None:
    if col in _BOOL_COLS:
        set_column(row, col, bool(value))
    elif col in _INT_COLS:
        v = int(round(value))
        set_column(row, col, (numeric(row, col) or 0) + v if col in _SUMMED else v)
    else:
        set_column(row, col, value)
