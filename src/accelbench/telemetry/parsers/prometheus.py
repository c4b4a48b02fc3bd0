"""Prometheus text scrapes: samples, and storing them into schema rows."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from accelbench.errors import AccelbenchError


def prometheus_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """All samples of a Prometheus text scrape as (name, labels, value), via
    ``prometheus_client``'s parser. Raises AccelbenchError on malformed input."""
    # prometheus_client appends "_total" to counter samples whose exposed name lacks it
    # (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION -> ..._total); keep the name as exposed.
    exposed = set()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            exposed.add(line.split("{", 1)[0].split(" ", 1)[0])
    out = []
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                name = s.name
                if name not in exposed and name.endswith("_total") and name[:-6] in exposed:
                    name = name[:-6]
                out.append((name, dict(s.labels), float(s.value)))
    except (ValueError, TypeError) as exc:
        raise AccelbenchError(f"not a valid Prometheus scrape: {exc}") from exc
    return out


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


def store(row: dict[str, Any], col: str, value: float) -> None:
    if col in _BOOL_COLS:
        row[col] = bool(value)
    elif col in _INT_COLS:
        v = int(round(value))
        row[col] = (row[col] or 0) + v if col in _SUMMED else v
    else:
        row[col] = value
