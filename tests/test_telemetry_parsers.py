"""Every parser against every captured fixture, values checked by hand against the files.

Fixtures: tests/fixtures/telemetry (provenance in its SOURCES.md). Where no real
capture exists (amd-smi JSON, ROCm Device Metrics Exporter, server /metrics) the input
is written here in the documented layout and says so.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.gpu.values import parse_quantity
from accelbench.telemetry.parsers import (
    FORMATS,
    detect_format,
    parse_amd_smi_json,
    parse_capture,
    parse_dcgm_prometheus,
    parse_file,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
    parse_rocm_exporter_prometheus,
    parse_rocm_smi_json,
    parse_server_metrics,
)
from accelbench.telemetry.schema import COLUMNS, pcie_gen_from_speed, rows_to_table
from conftest import fixture_file

MiB = 1024**2


def one(rows):
    assert len(rows) == 1
    return rows[0]


def read(name: str) -> str:
    return fixture_file("telemetry", name).read_text()


# ---------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    "text,expected",
    [
        ("23028 MiB", 23028 * MiB),
        ("25.58 W", 25.58),
        ("17 C", 17.0),
        ("37 %", 0.37),
        ("(800Mhz)", 800e6),
        ("4251825415 us", 4251.825415),
        ("N/A", None),
        ("[N/A]", None),
        ("[Requested functionality has been deprecated]", None),
        ("16x", 16.0),
        ("2.5GT/s", 2500.0),
    ],
)
def test_parse_quantity(text, expected):
    got = parse_quantity(text)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


def test_pcie_gen_from_speed():
    assert [pcie_gen_from_speed(x) for x in (2500, 5000, 8000, 16000, 32000, 64000)] == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]


# ---------------------------------------------------------------------------- nvidia-smi -q -x


def test_nvidia_smi_xml_v11_a10g():
    r = one(parse_nvidia_smi_xml(read("nvidia-smi_q_x__a10g__drv515.105.01__dtd-v11.xml")))
    assert r["vendor"] == "nvidia" and r["model"] == "NVIDIA A10G"
    assert r["bus_id"] == "0000:00:1e.0"
    assert r["uuid"] == "GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94"
    assert r["serial"] == "0000000000000"
    assert r["driver_version"] == "515.105.01"
    assert r["util_gpu"] == 0.0 and r["util_mem"] == 0.0
    assert r["mem_used_bytes"] == 22 * MiB
    assert r["mem_total_bytes"] == 23028 * MiB
    assert r["power_w"] == pytest.approx(25.58)  # <power_readings>/<power_draw> (v11)
    assert r["power_limit_w"] == pytest.approx(300.0)
    assert r["temp_gpu_c"] == 17.0
    assert r["temp_mem_c"] is None  # N/A
    assert r["temp_slowdown_c"] == 95.0 and r["temp_shutdown_c"] == 98.0
    assert r["clock_sm_hz"] == 210e6 and r["clock_mem_hz"] == 405e6
    assert r["clock_sm_max_hz"] == 1710e6 and r["clock_mem_max_hz"] == 6251e6
    assert r["throttle_mask"] == 0x1  # gpu_idle Active (v11 clocks_throttle_reasons)
    assert r["throttle_reasons"] == ""  # idle is not a health problem
    assert r["ecc_corrected_volatile"] == 0 and r["ecc_uncorrected_aggregate"] == 0
    assert r["remapped_rows_corr"] == 0 and r["remapped_rows_unc"] == 0
    assert r["remapped_rows_pending"] is False and r["remapped_rows_failure"] is False
    assert (r["pcie_gen"], r["pcie_gen_max"]) == (1, 4)
    assert (r["pcie_width"], r["pcie_width_max"]) == (8, 16)
    assert r["pcie_replay"] == 0


def test_nvidia_smi_xml_v12_a100_mig():
    r = one(
        parse_nvidia_smi_xml(read("nvidia-smi_q_x__a100-sxm4-80gb_mig__drv535.54.03__dtd-v12.xml"))
    )
    assert r["model"] == "NVIDIA A100-SXM4-80GB"
    assert r["bus_id"] == "0000:01:00.0"
    assert r["serial"] == "1650522003820"
    assert r["util_gpu"] is None and r["util_mem"] is None  # N/A under MIG
    assert r["mem_used_bytes"] == 50 * MiB and r["mem_total_bytes"] == 81920 * MiB
    assert r["power_w"] == pytest.approx(67.03)  # <gpu_power_readings>/<power_draw> (v12)
    assert r["power_limit_w"] == pytest.approx(500.0)  # current_power_limit
    assert r["temp_gpu_c"] == 27.0 and r["temp_mem_c"] == 44.0
    assert (r["temp_slowdown_c"], r["temp_shutdown_c"], r["temp_mem_max_c"]) == (89, 92, 95)
    assert r["clock_sm_hz"] == 1275e6 and r["clock_mem_hz"] == 1593e6
    assert r["clock_sm_max_hz"] == 1410e6
    assert r["throttle_mask"] == 0  # clocks_event_reasons, all Not Active
    assert r["remapped_rows_corr"] is None  # <remapped_rows>N/A</remapped_rows>
    assert (r["pcie_gen"], r["pcie_gen_max"], r["pcie_width"], r["pcie_width_max"]) == (
        4,
        4,
        16,
        16,
    )


def test_nvidia_smi_xml_v13_rtx4000():
    r = one(parse_nvidia_smi_xml(read("nvidia-smi_q_x__rtx-4000-sff-ada__drv595.84__dtd-v13.xml")))
    assert r["model"] == "NVIDIA RTX 4000 SFF Ada Generation"
    assert r["driver_version"] == "595.84"
    assert r["util_gpu"] == 0.0 and r["util_mem"] == pytest.approx(0.37)
    assert r["mem_used_bytes"] == 3534 * MiB and r["mem_total_bytes"] == 20475 * MiB
    assert r["power_w"] == pytest.approx(8.81)  # <average_power_draw> (v13)
    assert r["power_limit_w"] == pytest.approx(70.0)
    assert r["temp_gpu_c"] == 38.0
    # v13 gives only thresholds relative to T.Limit: no absolute slowdown threshold.
    assert r["temp_slowdown_c"] is None
    assert r["clock_sm_max_hz"] == 3105e6 and r["clock_mem_max_hz"] == 7001e6
    assert r["throttle_mask"] == 0x1
    # clocks_event_reasons_counters_sw_power_cap 4251825415 us, thermal counters 0 us
    assert r["throttle_power_s"] == pytest.approx(4251.825415)
    assert r["throttle_thermal_s"] == 0.0
    assert r["ecc_corrected_volatile"] is None  # ECC disabled, all N/A
    assert r["remapped_rows_corr"] == 0 and r["remapped_rows_unc"] == 0
    assert (r["pcie_gen"], r["pcie_gen_max"]) == (1, 4)


H200_XML_IDLE = "nvidia-smi_q_x__h200__drv580.159.04__dtd-v13__idle.xml"
H200_XML_LOAD = "nvidia-smi_q_x__h200__drv580.159.04__dtd-v13__load.xml"


def test_nvidia_smi_xml_v13_h200_load():
    """Our own capture on an H200 under a bf16 matmul load (SOURCES.md)."""
    r = one(parse_nvidia_smi_xml(read(H200_XML_LOAD)))
    assert r["vendor"] == "nvidia" and r["model"] == "NVIDIA H200"
    assert r["bus_id"] == "0000:00:06.0"  # <gpu id="00000000:00:06.0">
    assert r["uuid"] == "GPU-addd9b9c-0396-0079-2ec6-9e9082673995"
    assert r["serial"] == "1652826072046"
    assert r["driver_version"] == "580.159.04"
    assert r["util_gpu"] == pytest.approx(0.99) and r["util_mem"] == pytest.approx(0.24)
    assert r["mem_used_bytes"] == 1011 * MiB
    assert r["mem_total_bytes"] == 143771 * MiB == 150754820096
    # <average_power_draw>692.49 W (not <instant_power_draw>709.22 W), limit 700.00 W
    assert r["power_w"] == pytest.approx(692.49)
    assert r["power_limit_w"] == pytest.approx(700.0)
    assert r["temp_gpu_c"] == 56.0 and r["temp_mem_c"] == 48.0
    # v13: thresholds only relative to T.Limit (slow -2 C, max -8 C), no absolute one
    assert r["temp_slowdown_c"] is None and r["temp_shutdown_c"] is None
    assert r["clock_sm_hz"] == 1425e6 and r["clock_mem_hz"] == 3201e6
    assert r["clock_sm_max_hz"] == 1980e6 and r["clock_mem_max_hz"] == 3201e6
    assert r["throttle_mask"] == 0x4  # sw_power_cap Active, gpu_idle Not Active
    assert r["throttle_reasons"] == "sw_power_cap"
    # clocks_event_reasons_counters_sw_power_cap 4379180 us; the thermal ones 0 us
    assert r["throttle_power_s"] == pytest.approx(4.37918)
    assert r["throttle_thermal_s"] == 0.0
    for col in (
        "ecc_corrected_volatile",
        "ecc_uncorrected_volatile",
        "ecc_corrected_aggregate",
        "ecc_uncorrected_aggregate",
        "remapped_rows_corr",
        "remapped_rows_unc",
        "pcie_replay",
    ):
        assert r[col] == 0, col
    assert r["remapped_rows_pending"] is False and r["remapped_rows_failure"] is False
    assert (r["pcie_gen"], r["pcie_gen_max"], r["pcie_width"], r["pcie_width_max"]) == (
        5,
        5,
        16,
        16,
    )


def test_nvidia_smi_xml_v13_h200_idle():
    r = one(parse_nvidia_smi_xml(read(H200_XML_IDLE)))
    assert r["model"] == "NVIDIA H200" and r["serial"] == "1652826072046"
    assert r["util_gpu"] == 0.0 and r["util_mem"] == 0.0
    assert r["mem_used_bytes"] == 0 and r["mem_total_bytes"] == 143771 * MiB
    assert r["power_w"] == pytest.approx(82.02) and r["power_limit_w"] == pytest.approx(700.0)
    assert r["temp_gpu_c"] == 36.0 and r["temp_mem_c"] == 38.0
    assert r["clock_sm_hz"] == 345e6 and r["clock_mem_hz"] == 3201e6
    assert r["throttle_mask"] == 0x1 and r["throttle_reasons"] == ""  # gpu_idle only
    assert r["throttle_power_s"] == 0.0 and r["throttle_thermal_s"] == 0.0
    assert r["ecc_uncorrected_aggregate"] == 0 and r["pcie_replay"] == 0


def test_nvidia_smi_xml_rejects_other_xml():
    with pytest.raises(AccelbenchError):
        parse_nvidia_smi_xml("<foo/>")
    with pytest.raises(AccelbenchError):
        parse_nvidia_smi_xml("<nvidia_smi_log>")


# ---------------------------------------------------------------------------- --query-gpu CSV

CSV_IDLE = "nvidia-smi_query-gpu_csv__h100-80gb-hbm3__drv590.48.01__idle.csv"
CSV_LOAD = "nvidia-smi_query-gpu_csv__h100-80gb-hbm3__drv590.48.01__load.csv"


def test_nvidia_smi_csv_idle():
    r = one(parse_nvidia_smi_csv(read(CSV_IDLE)))
    assert r["model"] == "NVIDIA H100 80GB HBM3"
    assert r["bus_id"] == "0000:00:09.0"
    assert r["driver_version"] == "590.48.01"
    assert r["util_gpu"] == 0.0
    assert r["mem_used_bytes"] == 0 and r["mem_total_bytes"] == 81559 * MiB
    assert r["power_w"] == pytest.approx(69.85) and r["power_limit_w"] == pytest.approx(700.0)
    assert r["temp_gpu_c"] == 41.0 and r["temp_mem_c"] == 48.0
    assert r["clock_sm_hz"] == 345e6 and r["clock_mem_hz"] == 2619e6
    assert r["clock_sm_max_hz"] == 1980e6
    assert r["throttle_mask"] == 0x1 and r["throttle_reasons"] == ""
    assert r["throttle_power_s"] == 0.0
    assert r["ecc_corrected_volatile"] == 0 and r["ecc_uncorrected_aggregate"] == 0
    assert r["remapped_rows_pending"] is False
    assert (r["pcie_gen"], r["pcie_gen_max"], r["pcie_width"], r["pcie_width_max"]) == (
        5,
        5,
        16,
        16,
    )


def test_nvidia_smi_csv_load():
    r = one(parse_nvidia_smi_csv(read(CSV_LOAD)))
    assert r["util_gpu"] == 1.0 and r["util_mem"] == pytest.approx(0.11)
    assert r["mem_used_bytes"] == 19818 * MiB
    assert r["power_w"] == pytest.approx(631.95)
    assert r["temp_gpu_c"] == 59.0 and r["temp_mem_c"] == 54.0
    assert r["clock_sm_hz"] == 1980e6
    assert r["throttle_mask"] == 0


H200_CSV_IDLE = "nvidia-smi_query-gpu_csv__h200__drv580.159.04__idle.csv"
H200_CSV_LOAD = "nvidia-smi_query-gpu_csv__h200__drv580.159.04__load.csv"


def test_nvidia_smi_csv_h200_idle():
    """Our own capture on an H200, all 198 fields (SOURCES.md)."""
    r = one(parse_nvidia_smi_csv(read(H200_CSV_IDLE)))
    assert r["model"] == "NVIDIA H200" and r["bus_id"] == "0000:00:06.0"
    assert r["uuid"] == "GPU-addd9b9c-0396-0079-2ec6-9e9082673995"
    assert r["driver_version"] == "580.159.04"
    assert r["util_gpu"] == 0.0 and r["util_mem"] == 0.0
    assert r["mem_used_bytes"] == 0 and r["mem_total_bytes"] == 143771 * MiB == 150754820096
    assert r["power_w"] == pytest.approx(82.02) and r["power_limit_w"] == pytest.approx(700.0)
    assert r["temp_gpu_c"] == 36.0 and r["temp_mem_c"] == 39.0
    assert r["clock_sm_hz"] == 345e6 and r["clock_mem_hz"] == 3201e6
    assert r["clock_sm_max_hz"] == 1980e6 and r["clock_mem_max_hz"] == 3201e6
    assert r["throttle_mask"] == 0x1 and r["throttle_reasons"] == ""
    assert r["throttle_power_s"] == 0.0 and r["throttle_thermal_s"] == 0.0
    assert r["ecc_corrected_volatile"] == 0 and r["ecc_uncorrected_aggregate"] == 0
    assert r["remapped_rows_corr"] == 0 and r["remapped_rows_pending"] is False
    assert (r["pcie_gen"], r["pcie_gen_max"], r["pcie_width"], r["pcie_width_max"]) == (
        5,
        5,
        16,
        16,
    )
    assert r["pcie_replay"] is None  # --query-gpu has no replay counter field


def test_nvidia_smi_csv_h200_load():
    r = one(parse_nvidia_smi_csv(read(H200_CSV_LOAD)))
    assert r["util_gpu"] == 1.0 and r["util_mem"] == pytest.approx(0.24)
    assert r["mem_used_bytes"] == 1011 * MiB
    # power.draw [W] 691.30 W (= power.draw.average; power.draw.instant was 680.15 W)
    assert r["power_w"] == pytest.approx(691.30) and r["power_limit_w"] == pytest.approx(700.0)
    assert r["temp_gpu_c"] == 56.0 and r["temp_mem_c"] == 47.0
    assert r["clock_sm_hz"] == 1410e6 and r["clock_mem_hz"] == 3201e6
    assert r["throttle_mask"] == 0x4 and r["throttle_reasons"] == "sw_power_cap"
    assert r["throttle_power_s"] == pytest.approx(4.579188)  # 4579188 us
    assert r["throttle_thermal_s"] == 0.0
    assert r["ecc_uncorrected_volatile"] == 0 and r["ecc_corrected_aggregate"] == 0


def test_nvidia_smi_csv_nounits_gives_same_values():
    """The same capture with the units stripped from the values (as ``nounits`` prints
    them) must parse to the same numbers, the units coming from the header."""
    text = read(CSV_LOAD)
    header, row = text.splitlines()[:2]
    stripped = ", ".join(
        re.sub(r"^(-?[\d.]+) (MiB|W|MHz|%|us)$", r"\1", v.strip()) for v in row.split(", ")
    )
    assert "MiB" not in stripped
    a = one(parse_nvidia_smi_csv(text))
    b = one(parse_nvidia_smi_csv(header + "\n" + stripped + "\n"))
    for col in ("mem_used_bytes", "power_w", "clock_sm_hz", "util_gpu", "throttle_power_s"):
        assert a[col] == pytest.approx(b[col]), col


def test_nvidia_smi_csv_slices_match_the_capture_session():
    """The CSV fixtures are lines 1740-1741 and 2104-2105 of the capture session."""
    lines = read("nvidia-smi_capture__h100-80gb-hbm3__drv590.48.01.txt").splitlines()
    assert parse_nvidia_smi_csv("\n".join(lines[1739:1741])) == parse_nvidia_smi_csv(read(CSV_IDLE))
    assert parse_nvidia_smi_csv("\n".join(lines[2103:2105])) == parse_nvidia_smi_csv(read(CSV_LOAD))


def test_nvidia_smi_csv_without_header_is_a_clear_error():
    row = read(CSV_IDLE).splitlines()[1]
    with pytest.raises(AccelbenchError, match="header"):
        parse_nvidia_smi_csv(row)


def _two_samples() -> tuple[str, list[str]]:
    """The header and the idle and load rows of the H100 session (one GPU, two samples:
    what ``--query-gpu ... -l 1`` prints)."""
    header, idle = read(CSV_IDLE).splitlines()[:2]
    return header, [idle, read(CSV_LOAD).splitlines()[1]]


# nvidia-smi's own words, printed between rows on a GPU with a bad infoROM
INFOROM = "WARNING: infoROM is corrupted at gpu 0000:19:00.0"


def _csv(header: str, rows: list[str]) -> tuple[list[dict], list[str], list[str]]:
    lost: list[str] = []
    notes: list[str] = []
    got = parse_nvidia_smi_csv("\n".join([header, *rows]) + "\n", lost=lost, notes=notes)
    return got, lost, notes


def test_nvidia_smi_csv_warning_between_rows_is_skipped_with_a_note():
    header, rows = _two_samples()
    full, full_lost, full_notes = _csv(header, rows)
    assert len(full) == 2 and not full_lost and not full_notes
    got, lost, notes = _csv(header, [rows[0], INFOROM, rows[1]])
    assert got == full and not lost  # the row after the warning is read
    assert notes == [
        f"skipped 1 line(s) between the CSV rows (no comma: not a row): line 3: {INFOROM}"
    ]


def test_nvidia_smi_csv_row_cut_inside_its_first_value_is_lost():
    header, rows = _two_samples()
    lost: list[str] = []
    got = parse_nvidia_smi_csv(f"{header}\n{rows[0]}\n2026/07", lost=lost)
    assert got == _csv(header, rows[:1])[0]  # the whole first row, its last value too
    assert lost == [
        "the capture ends without a line end inside line 3 ('2026/07'): cut short there; "
        "a row there or after it is not read"
    ]


def test_nvidia_smi_csv_comment_ends_the_table_and_names_rows_after_it():
    header, rows = _two_samples()
    got, lost, _ = _csv(header, [rows[0], "# load", rows[1]])
    assert len(got) == 1
    assert lost == [
        "the CSV ends at the comment on line 3 ('# load'): "
        f"1 later line(s) with the table's {len(header.split(','))} fields are not read"
    ]
    # a session log's next section (another query's table) is not this table's rows
    session = read("nvidia-smi_capture__h100-80gb-hbm3__drv590.48.01.txt")
    lost = []
    assert len(parse_nvidia_smi_csv(session, lost=lost)) == 1 and not lost


_STRAY = st.text(
    st.characters(blacklist_characters=",\n\r\ufeff", blacklist_categories=("Cs",)), min_size=1
).filter(lambda s: s.strip() and not s.lstrip().startswith("#"))


@settings(max_examples=60, deadline=None)
@given(stray=_STRAY, at=st.integers(0, 2))
def test_nvidia_smi_csv_any_stray_line_loses_no_row(stray: str, at: int):
    """Any line that is not a row (no comma), anywhere among the rows: every row is read,
    nothing is lost, and one note names the line."""
    header, rows = _two_samples()
    full = _csv(header, rows)[0]
    got, lost, notes = _csv(header, [*rows[:at], stray, *rows[at:]])
    assert got == full and not lost
    assert len(notes) == 1 and f"line {at + 2}: {stray.strip()[:120]}" in notes[0]


# ---------------------------------------------------------------------------- dcgm-exporter


def test_dcgm_l4():
    r = one(
        parse_dcgm_prometheus(
            read("dcgm-exporter_metrics__l4__drv580.105.08__default-counters.prom")
        )
    )
    assert r["model"] == "NVIDIA L4"
    assert r["uuid"] == "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
    assert r["bus_id"] == "0000:31:00.0"
    assert r["driver_version"] == "580.105.08"
    assert r["clock_sm_hz"] == 210e6 and r["clock_mem_hz"] == 405e6
    assert r["temp_gpu_c"] == 31.0
    assert r["temp_mem_c"] == 0.0  # exported as 0 by dcgm-exporter
    assert r["power_w"] == pytest.approx(16.365)  # DCGM_FI_DEV_POWER_USAGE in W
    assert r["energy_j"] == pytest.approx(4742.776)  # 4742776 mJ (counter without _total)
    assert r["pcie_replay"] == 0
    assert r["util_gpu"] == 0.0 and r["util_mem"] == 0.0
    assert r["mem_used_bytes"] == 0
    assert r["mem_total_bytes"] == (22563 + 0 + 470) * MiB  # free + used + reserved
    assert r["remapped_rows_unc"] == 0 and r["remapped_rows_corr"] == 0
    assert r["remapped_rows_failure"] is False


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
@pytest.mark.parametrize("field", ["DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"])
def test_dcgm_non_finite_sample_is_no_reading(field, value):
    """NaN and +-Inf are valid Prometheus values: that field stays null, the rest is read
    (was an internal error: int(NaN) for the memory total or an integer counter). NaN is
    the format's "no reading"; +-Inf is no reading a GPU gives: named in ``lost``."""
    text = read("dcgm-exporter_metrics__l4__drv580.105.08__default-counters.prom")
    lines = [
        (ln.rsplit(" ", 1)[0] + " " + value) if ln.startswith(field + "{") else ln
        for ln in text.splitlines()
    ]
    assert lines != text.splitlines()
    lost: list[str] = []
    r = one(parse_dcgm_prometheus("\n".join(lines) + "\n", lost=lost))
    assert r["temp_gpu_c"] == 31.0
    assert [x.split(" (")[0] for x in lost] == ([] if value == "NaN" else [field])
    col = "mem_total_bytes" if field.endswith("FB_FREE") else "pcie_replay"
    assert r[col] is None


def test_dcgm_vgpu_partial_support():
    r = one(
        parse_dcgm_prometheus(
            read("dcgm-exporter_metrics__grid-a100-40c-vgpu__drv580.126.09__default-counters.prom")
        )
    )
    assert r["model"] == "GRID A100-40C"
    assert r["clock_sm_hz"] == 1410e6 and r["clock_mem_hz"] == 1215e6
    assert r["mem_total_bytes"] == (37739 + 0 + 3220) * MiB
    # a vGPU guest exports no power, energy, GPU temperature or PCIe counters
    for col in ("power_w", "energy_j", "temp_gpu_c", "pcie_replay", "remapped_rows_unc"):
        assert r[col] is None, col


# ---------------------------------------------------------------------------- rocm-smi --json


def test_rocm_smi_rocm5_mi250():
    r = one(parse_rocm_smi_json(read("rocm-smi_a_json__mi250-oam-1gcd__rocm5.x-drv6.2.4.json")))
    assert r["vendor"] == "amd" and r["model"] == "AMD INSTINCT MI250 (MCM) OAM AC MBA"
    assert r["bus_id"] == "0000:2f:00.0"
    assert r["serial"] == "PCB052715-0065" and r["uuid"] == "0x719d230578348e8c"
    assert r["driver_version"] == "6.2.4"
    assert r["util_gpu"] == 0.0 and r["util_mem"] == 0.0
    assert r["power_w"] == 89.0 and r["power_limit_w"] == 560.0
    assert r["energy_j"] == pytest.approx(962825096.2974429)  # "Accumulated Energy (uJ)"
    assert (r["temp_gpu_c"], r["temp_hotspot_c"], r["temp_mem_c"]) == (32.0, 35.0, 43.0)
    assert r["clock_sm_hz"] == 800e6 and r["clock_mem_hz"] == 1600e6  # "(800Mhz)"
    assert r["pcie_replay"] == 147
    assert r["mem_used_bytes"] is None  # -a without --showmeminfo: no VRAM bytes


def test_rocm_smi_rocm6_mi250():
    r = one(parse_rocm_smi_json(read("rocm-smi_a_json__mi250-oam-1gcd__rocm6.x-drv6.2.4.json")))
    assert r["model"] == "AMD INSTINCT MI250 (MCM) OAM AC MBA"  # "Card Series" (ROCm 6)
    assert r["bus_id"] == "0000:29:00.0"
    assert r["power_w"] == 91.0
    assert r["energy_j"] == pytest.approx(4275228873.2992185)
    assert (r["temp_gpu_c"], r["temp_hotspot_c"], r["temp_mem_c"]) == (43.0, 44.0, 53.0)
    assert (r["pcie_gen"], r["pcie_width"]) == (1, 8)  # "3 (2.5GT/s x8)"
    assert r["pcie_replay"] == 3824
    assert r["util_mem"] == 0.0  # "GPU Memory Read/Write Activity (%)"


def test_rocm_smi_mi100x4():
    rows = parse_rocm_smi_json(read("rocm-smi_json__mi100x4__rocm6.0.2.json"))
    assert [r["device_index"] for r in rows] == [0, 1, 2, 3]
    assert [r["bus_id"] for r in rows] == [
        "0000:83:00.0",
        "0000:a3:00.0",
        "0000:c3:00.0",
        "0000:e3:00.0",
    ]
    assert [r["power_w"] for r in rows] == [36.0, 44.0, 43.0, 39.0]
    assert [r["temp_hotspot_c"] for r in rows] == [55.0, 58.0, 57.0, 53.0]
    r = rows[0]
    assert r["model"] == "Arcturus GL-XL [Instinct MI100]"
    assert r["serial"] is None  # "N/A"
    assert r["driver_version"] == "6.3.6"
    assert r["mem_total_bytes"] == 34342961152 and r["mem_used_bytes"] == 6750208
    assert r["power_limit_w"] == 290.0
    assert r["clock_sm_hz"] == 300e6 and r["clock_mem_hz"] == 1200e6
    assert (r["pcie_gen"], r["pcie_width"]) == (4, 16)  # "0 (16.0GT/s x16)"
    assert r["energy_j"] is None


# ---------------------------------------------------------------------------- amd-smi --json

# No real capture exists (see SOURCES.md): this follows the documented layout, leaves
# as {"value","unit"} pairs and "N/A" strings. ROCm 6.2-6.3 print a list; ROCm 7 wraps
# it in {"gpu_data": [...]}.
AMD_SMI_GPU = {
    "gpu": 0,
    "usage": {
        "gfx_activity": {"value": 87, "unit": "%"},
        "umc_activity": {"value": 41, "unit": "%"},
        "mm_activity": "N/A",
    },
    "power": {
        "socket_power": {"value": 612, "unit": "W"},
        "gfx_voltage": "N/A",
        "throttle_status": "N/A",
    },
    "clock": {
        "gfx_0": {
            "clk": {"value": 2100, "unit": "MHz"},
            "max_clk": {"value": 2100, "unit": "MHz"},
        },
        "mem_0": {"clk": {"value": 1300, "unit": "MHz"}, "max_clk": {"value": 1300, "unit": "MHz"}},
    },
    "temperature": {
        "edge": "N/A",
        "hotspot": {"value": 71, "unit": "C"},
        "mem": {"value": 58, "unit": "C"},
    },
    "pcie": {
        "width": 16,
        "speed": {"value": 32, "unit": "GT/s"},
        "replay_count": 2,
    },
    "ecc": {
        "total_correctable_count": 3,
        "total_uncorrectable_count": 0,
        "total_deferred_count": 0,
    },
    "mem_usage": {
        "total_vram": {"value": 196592, "unit": "MB"},
        "used_vram": {"value": 180000, "unit": "MB"},
    },
    "energy": {"total_energy_consumption": {"value": 123456.5, "unit": "J"}},
}


@pytest.mark.parametrize("wrap", ["list", "gpu_data"])
def test_amd_smi_metric_json(wrap):
    doc = [AMD_SMI_GPU] if wrap == "list" else {"gpu_data": [AMD_SMI_GPU]}
    r = one(parse_amd_smi_json(json.dumps(doc)))
    assert r["vendor"] == "amd" and r["device_index"] == 0
    assert r["util_gpu"] == pytest.approx(0.87) and r["util_mem"] == pytest.approx(0.41)
    assert r["power_w"] == 612.0
    assert r["clock_sm_hz"] == 2100e6 and r["clock_mem_hz"] == 1300e6
    assert r["temp_gpu_c"] is None  # "N/A"
    assert r["temp_hotspot_c"] == 71.0 and r["temp_mem_c"] == 58.0
    assert (r["pcie_gen"], r["pcie_width"], r["pcie_replay"]) == (5, 16, 2)
    assert r["ecc_corrected_aggregate"] == 3 and r["ecc_uncorrected_aggregate"] == 0
    assert r["mem_total_bytes"] == 196592 * MiB  # amd-smi "MB" are MiB
    assert r["mem_used_bytes"] == 180000 * MiB
    assert r["energy_j"] == pytest.approx(123456.5)
    assert r["throttle_mask"] is None


def test_amd_smi_entry_that_is_not_an_object_is_lost():
    """amd-smi prints "N/A" for a GPU it could not read: the others are read and the
    skipped entry is named in ``lost``, as rocm-smi's ``cardN`` is."""
    text = json.dumps([AMD_SMI_GPU, "N/A", {**AMD_SMI_GPU, "gpu": 2}])
    assert detect_format(text) == "amd-smi"
    lost: list[str] = []
    rows = parse_amd_smi_json(text, lost=lost)
    assert [r["device_index"] for r in rows] == [0, 2]
    assert lost == ['GPU entry 1: not an object ("N/A"), skipped']
    lost = []
    parse_rocm_smi_json(json.dumps({"card0": "N/A"}), lost=lost)
    assert lost == ['card0: not an object ("N/A"), skipped']  # one wording for both


_NOT_OBJECT = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=60),
    st.lists(st.integers(), max_size=3),
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(layout=st.lists(st.one_of(st.just(None), _NOT_OBJECT.map(lambda v: [v])), max_size=6))
def test_amd_smi_any_non_object_entry_is_lost_never_silent(layout):
    """Any mix of GPU objects and entries that are not objects: each object gives a row,
    each other entry one ``lost`` line naming its place."""
    doc = [{**AMD_SMI_GPU, "gpu": n} if e is None else e[0] for n, e in enumerate(layout)]
    for wrap in (doc, {"gpu_data": doc}):
        lost: list[str] = []
        rows = parse_amd_smi_json(json.dumps(wrap), lost=lost)
        assert [r["device_index"] for r in rows] == [n for n, e in enumerate(layout) if e is None]
        bad = [n for n, e in enumerate(layout) if e is not None]
        assert [x.split(":")[0] for x in lost] == [f"GPU entry {n}" for n in bad]


def test_amd_smi_rejects_unknown_json():
    with pytest.raises(AccelbenchError):
        parse_amd_smi_json('{"foo": 1}')


# ---------------------------------------------------------------------------- ROCm exporter

# No complete real scrape exists (SOURCES.md); names and units are those of the exporter's
# docs/configuration/metricslist.md, label names as in its gpu_clock example.
ROCM_EXPORTER = """\
# HELP gpu_gfx_activity Graphics engine usage
# TYPE gpu_gfx_activity gauge
gpu_gfx_activity{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 93
gpu_gfx_activity{card_model="MI300X",gpu_id="1",gpu_partition_id="0",serial_number="S1"} 0
# TYPE gpu_package_power gauge
gpu_package_power{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 701
# TYPE gpu_energy_consumed counter
gpu_energy_consumed{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 2.5e+12
# TYPE gpu_junction_temperature gauge
gpu_junction_temperature{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 82
# TYPE gpu_memory_temperature gauge
gpu_memory_temperature{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 70
# TYPE gpu_used_vram gauge
gpu_used_vram{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 150000
# TYPE gpu_total_vram gauge
gpu_total_vram{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 196592
# TYPE gpu_clock gauge
gpu_clock{clock_index="2",clock_type="system",gpu_id="0",gpu_partition_id="0"} 2100
gpu_clock{clock_index="8",clock_type="memory",gpu_id="0",gpu_partition_id="0"} 1300
# TYPE pcie_speed gauge
pcie_speed{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 32
# TYPE pcie_max_speed gauge
pcie_max_speed{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 32
# TYPE gpu_ecc_uncorrect_total gauge
gpu_ecc_uncorrect_total{card_model="MI300X",gpu_id="0",gpu_partition_id="0",serial_number="S0"} 0
"""


def test_rocm_device_metrics_exporter():
    rows = parse_rocm_exporter_prometheus(ROCM_EXPORTER)
    assert len(rows) == 2
    r = rows[0]
    assert r["model"] == "MI300X" and r["serial"] == "S0"
    assert r["util_gpu"] == pytest.approx(0.93)
    assert r["power_w"] == 701.0
    assert r["energy_j"] == pytest.approx(2.5e6)  # uJ -> J
    assert r["temp_hotspot_c"] == 82.0 and r["temp_mem_c"] == 70.0
    assert r["mem_used_bytes"] == 150000 * MiB and r["mem_total_bytes"] == 196592 * MiB
    assert r["clock_sm_hz"] == 2100e6 and r["clock_mem_hz"] == 1300e6
    assert r["pcie_gen"] == 5 and r["pcie_gen_max"] == 5
    assert r["ecc_uncorrected_aggregate"] == 0
    assert rows[1]["util_gpu"] == 0.0 and rows[1]["power_w"] is None


# ---------------------------------------------------------------------------- server /metrics

# The llama-server --metrics layout (HELP/TYPE lines, llamacpp: prefix, counters ending
# in _total), as printed by its handle_metrics.
LLAMACPP_METRICS = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 1234
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 1.5
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 5678
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.25
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 3
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
"""

VLLM_METRICS = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 8.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.42
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 500.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 4.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 64.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 128.0
"""

SGLANG_METRICS = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 5.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 7.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.28
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} 8.128902e+06
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 7.557572e+06
"""

TGI_METRICS = """\
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 4
# TYPE tgi_queue_size gauge
tgi_queue_size 9
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="+Inf"} 10
tgi_request_generated_tokens_sum 2560
tgi_request_generated_tokens_count 10
"""


@pytest.mark.parametrize(
    "text,engine,expected",
    [
        (
            LLAMACPP_METRICS,
            "llamacpp",
            {
                "srv_requests_running": 3,
                "srv_requests_waiting": 1,
                "srv_kv_cache_usage": 0.25,
                "srv_prompt_tokens_total": 1234,
                "srv_generation_tokens_total": 5678,
            },
        ),
        (
            VLLM_METRICS,
            "vllm",
            {
                "srv_requests_running": 8,
                "srv_requests_waiting": 2,
                "srv_kv_cache_usage": 0.42,
                "srv_prompt_tokens_total": 1000,
                "srv_generation_tokens_total": 500,
                "srv_preemptions_total": 4,
                "srv_prefix_cache_hits_total": 64,
                "srv_prefix_cache_queries_total": 128,
            },
        ),
        (
            SGLANG_METRICS,
            "sglang",
            {
                "srv_requests_running": 5,
                "srv_requests_waiting": 7,
                "srv_kv_cache_usage": 0.28,
                "srv_prompt_tokens_total": 8128902,
                "srv_generation_tokens_total": 7557572,
            },
        ),
        (
            TGI_METRICS,
            "tgi",
            {
                "srv_requests_running": 4,
                "srv_requests_waiting": 9,
                "srv_generation_tokens_total": 2560,
            },
        ),
    ],
)
def test_server_metrics(text, engine, expected):
    r = one(parse_server_metrics(text, t_ns=42))
    assert r["engine"] == engine and r["kind"] == "server" and r["t_ns"] == 42
    for col, val in expected.items():
        assert r[col] == pytest.approx(val), col


def test_server_metrics_unknown_engine_gives_no_row():
    assert parse_server_metrics("# TYPE foo gauge\nfoo 1\n") == []
    assert parse_server_metrics("# TYPE foo gauge\nfoo 1\n", read_only=True) == []


VLLM_LOAD = "vllm_metrics__cpu-tiny-model__vllm0.32.0__load.prom"


def test_vllm_0_32_scrape_under_load():
    """vLLM 0.32.0's CPU build serving the tiny model, scraped while 2 of 4 streams ran
    (tests/fixtures/telemetry/SOURCES.md); the values as its own lines give them."""
    text = read(VLLM_LOAD)
    r = one(parse_server_metrics(text))
    assert r["engine"] == "vllm"
    assert (r["srv_requests_running"], r["srv_requests_waiting"]) == (2.0, 0.0)
    assert r["srv_kv_cache_usage"] == 0.0009770395701026446  # kv_cache_usage_perc, 0-1
    assert (r["srv_prompt_tokens_total"], r["srv_generation_tokens_total"]) == (732, 216019)
    assert (r["srv_prefix_cache_queries_total"], r["srv_prefix_cache_hits_total"]) == (732, 0)
    assert r["srv_preemptions_total"] == 0
    # the live sample parses only these lines: the same row
    assert parse_server_metrics(text, read_only=True) == [r]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_read_only_parse_is_the_whole_parse(data):
    """Property: whatever lines of a real scrape a server gives (any subset, in order),
    the live sample's parse of only the lines it reads gives the row the whole parse
    gives, where the whole parse gives one (a damaged line it refuses may be one the
    live parse never reads)."""
    name = data.draw(st.sampled_from([VLLM_LOAD]))
    lines = read(name).split("\n")
    keep = data.draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines)))
    text = "\n".join(ln for ln, k in zip(lines, keep, strict=True) if k) + "\n"
    try:
        whole = parse_server_metrics(text, t_ns=7)
    except AccelbenchError:
        return
    assert parse_server_metrics(text, t_ns=7, read_only=True) == whole


_SCRAPES = [
    VLLM_LOAD,
    "dcgm-exporter_metrics__l4__drv580.105.08__default-counters.prom",
    "dcgm-exporter_metrics__grid-a100-40c-vgpu__drv580.126.09__default-counters.prom",
    "accelbench-monitor_metrics__h200__drv580.159.04__load.prom",
]


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_series_given_twice_is_refused_never_summed(data):
    """Property: a scrape holds each series once (Prometheus refuses a second sample of
    one). Any of a real scrape's samples given again (two scrapes joined end to end, in
    part) is refused naming the series; it was summed (a vLLM scrape read twice said 4
    requests running where it had 2) or the last value kept, without a word."""
    name = data.draw(st.sampled_from(_SCRAPES))
    text = read(name)
    whole = parse_capture(text)
    assert whole.rows  # the scrape alone is read
    samples = [ln for ln in text.split("\n") if ln.strip() and not ln.startswith("#")]
    again = data.draw(st.lists(st.sampled_from(samples), min_size=1, max_size=5))
    header = data.draw(st.booleans())  # the second scrape's comments too, or not
    tail = [ln for ln in text.split("\n") if ln.startswith("#")] if header else []
    with pytest.raises(AccelbenchError, match="appears twice"):
        parse_capture(text + "\n".join([*tail, *again]) + "\n", whole.format)


_CAPTURES = sorted(
    p.name for p in fixture_file("telemetry", VLLM_LOAD).parent.iterdir() if p.suffix != ".md"
)


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(_CAPTURES), fmt=st.sampled_from(sorted(FORMATS)))
def test_a_format_named_for_another_tools_capture_says_what_it_looks_like(name, fmt):
    """Property: any real capture read with any --format is read, or refused in one line
    that, where the format is not the capture's, says what the capture looks like, and
    never blames a cut (a --query-gpu CSV read as nvidia-smi XML was "no closing
    </nvidia_smi_log>: the capture was cut short")."""
    text = read(name)
    own = detect_format(text)
    try:
        parse_capture(text, fmt)
    except AccelbenchError as exc:
        msg = str(exc)
        assert fmt != own, msg  # its own format reads it
        assert "it looks like" in msg and "cut short" not in msg, msg
        assert "\n" not in msg


# ---------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    "name,fmt,count",
    [
        ("nvidia-smi_q_x__a10g__drv515.105.01__dtd-v11.xml", "nvidia-smi-xml", 1),
        ("nvidia-smi_q_x__a100-sxm4-80gb_mig__drv535.54.03__dtd-v12.xml", "nvidia-smi-xml", 1),
        ("nvidia-smi_q_x__rtx-4000-sff-ada__drv595.84__dtd-v13.xml", "nvidia-smi-xml", 1),
        (CSV_IDLE, "nvidia-smi-csv", 1),
        (CSV_LOAD, "nvidia-smi-csv", 1),
        (H200_XML_IDLE, "nvidia-smi-xml", 1),
        (H200_XML_LOAD, "nvidia-smi-xml", 1),
        (H200_CSV_IDLE, "nvidia-smi-csv", 1),
        (H200_CSV_LOAD, "nvidia-smi-csv", 1),
        ("dcgm-exporter_metrics__l4__drv580.105.08__default-counters.prom", "dcgm", 1),
        (
            "dcgm-exporter_metrics__grid-a100-40c-vgpu__drv580.126.09__default-counters.prom",
            "dcgm",
            1,
        ),
        ("rocm-smi_a_json__mi250-oam-1gcd__rocm5.x-drv6.2.4.json", "rocm-smi", 1),
        ("rocm-smi_a_json__mi250-oam-1gcd__rocm6.x-drv6.2.4.json", "rocm-smi", 1),
        ("rocm-smi_json__mi100x4__rocm6.0.2.json", "rocm-smi", 4),
        (VLLM_LOAD, "server", 1),
    ],
)
def test_every_fixture_detected_and_written_to_arrow(name, fmt, count):
    assert detect_format(read(name)) == fmt
    rows = parse_file(fixture_file("telemetry", name))
    assert len(rows) == count
    table = rows_to_table(rows)  # every value fits its schema column
    assert table.num_rows == count and table.column_names == list(COLUMNS)


def test_detect_other_formats():
    assert detect_format(json.dumps({"gpu_data": [AMD_SMI_GPU]})) == "amd-smi"
    assert detect_format(LLAMACPP_METRICS) == "server"
    assert detect_format(ROCM_EXPORTER) == "rocm-exporter"
    with pytest.raises(AccelbenchError):
        detect_format("hello world")


def test_parse_file_missing(tmp_path):
    with pytest.raises(AccelbenchError, match="cannot read"):
        parse_file(tmp_path / "nope.xml")


# ---------------------------------------------------------------------------- damaged readings

# (format, field as the tool names it, its column, the tool's unit, base units per tool unit)
_H200_CSV = "nvidia-smi_query-gpu_csv__h200__drv580.159.04__load.csv"
_A10G_XML = "nvidia-smi_q_x__a10g__drv515.105.01__dtd-v11.xml"
_MI100 = "rocm-smi_json__mi100x4__rocm6.0.2.json"
_DCGM_L4 = "dcgm-exporter_metrics__l4__drv580.105.08__default-counters.prom"
FIELDS = [
    ("csv", "power.draw [W]", "power_w", "W", 1.0),
    ("csv", "utilization.gpu [%]", "util_gpu", "%", 0.01),
    ("csv", "memory.total [MiB]", "mem_total_bytes", "MiB", MiB),
    ("csv", "temperature.gpu", "temp_gpu_c", "", 1.0),
    ("csv", "clocks.current.sm [MHz]", "clock_sm_hz", "MHz", 1e6),
    ("csv", "pcie.link.width.current", "pcie_width", "", 1.0),
    ("csv", "ecc.errors.uncorrected.volatile.total", "ecc_uncorrected_volatile", "", 1.0),
    ("xml", "power_draw", "power_w", "W", 1.0),
    ("xml", "gpu_util", "util_gpu", "%", 0.01),
    ("xml", "gpu_temp", "temp_gpu_c", "C", 1.0),
    ("rocm-smi", "Average Graphics Package Power (W)", "power_w", "", 1.0),
    ("rocm-smi", "GPU use (%)", "util_gpu", "", 0.01),
    ("rocm-smi", "Temperature (Sensor edge) (C)", "temp_gpu_c", "", 1.0),
    ("rocm-smi", "VRAM Total Memory (B)", "mem_total_bytes", "", 1.0),
    ("amd-smi", "power/socket_power", "power_w", "W", 1.0),
    ("amd-smi", "usage/gfx_activity", "util_gpu", "%", 0.01),
    ("amd-smi", "temperature/hotspot", "temp_hotspot_c", "C", 1.0),
    ("amd-smi", "mem_usage/total_vram", "mem_total_bytes", "MB", MiB),
    ("dcgm", "DCGM_FI_DEV_POWER_USAGE", "power_w", "", 1.0),
    ("dcgm", "DCGM_FI_DEV_GPU_UTIL", "util_gpu", "", 0.01),
    ("dcgm", "DCGM_FI_DEV_GPU_TEMP", "temp_gpu_c", "", 1.0),
]


def _with(fmt: str, field: str, unit: str, raw: object) -> tuple[str, object]:
    """A capture of ``fmt`` with ``field`` of its first GPU given as ``raw`` (a number in
    the tool's unit, or anything else), and its parser."""
    if fmt == "csv":
        header, row = read(_H200_CSV).split("\n")[:2]
        at = [c.strip() for c in header.split(",")].index(field)
        cells = row.split(", ")
        cells[at] = f"{raw} {unit}".strip()
        return f"{header}\n{', '.join(cells)}\n", parse_nvidia_smi_csv
    if fmt == "xml":
        text = read(_A10G_XML)
        new, n = re.subn(
            rf"<{field}>[^<]*</{field}>", f"<{field}>{raw} {unit}</{field}>", text, count=1
        )
        assert n == 1
        return new, parse_nvidia_smi_xml
    if fmt == "rocm-smi":
        doc = json.loads(read(_MI100))
        doc["card0"][field] = raw
        return json.dumps(doc), parse_rocm_smi_json
    if fmt == "amd-smi":
        gpu = json.loads(json.dumps(AMD_SMI_GPU))
        group, leaf = field.split("/")
        gpu[group][leaf] = {"value": raw, "unit": unit}
        return json.dumps([gpu]), parse_amd_smi_json
    text = read(_DCGM_L4)
    lines = [
        ln.rsplit(" ", 1)[0] + f" {raw}" if ln.startswith(field + "{") else ln
        for ln in text.splitlines()
    ]
    return "\n".join(lines) + "\n", parse_dcgm_prometheus


_WORD = st.text(st.sampled_from("abcxyzQ!?_"), min_size=1, max_size=12)
_JSON_JUNK = st.one_of(
    _WORD, st.booleans(), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from("xyz"), st.integers(), min_size=1, max_size=2),
)  # fmt: skip


@settings(max_examples=120, deadline=None)
@given(case=st.sampled_from(FIELDS), data=st.data())
def test_any_reading_not_a_number_or_implausible_is_left_out_and_said(case, data):
    """Any numeric field of any format replaced by a value that is not a number, or by a
    number outside its plausible range (BOUNDS; negative, huge, 1e308): that column of
    that row is null, one ``lost`` line names it, and every other value is as before."""
    from accelbench.telemetry.schema import BOUNDS

    fmt, field, col, unit, per_unit = case
    lo, hi = BOUNDS[col]
    factor = data.draw(st.floats(1.01, 1e6))
    out = data.draw(st.sampled_from([lo - (abs(lo) + 1) * factor, hi * factor + 1, 1e308]))
    bad = data.draw(
        st.one_of(
            st.just(out / per_unit).map(lambda v: int(v) if col.startswith(("pcie", "ecc")) else v),
            _JSON_JUNK if fmt in ("rocm-smi", "amd-smi") else _WORD,
        )
    )
    good_text, parser = _with(fmt, field, unit, "N/A")
    good = parser(good_text)[0]
    text, parser = _with(fmt, field, unit, bad)
    lost: list[str] = []
    rows = parser(text, lost=lost)
    r = rows[0]
    assert r[col] is None, (bad, r[col])
    assert {k: v for k, v in r.items() if k != col} == {k: v for k, v in good.items() if k != col}
    said = [x for x in lost if col in x or field.split(" [")[0].split("/")[-1] in x]
    assert len(said) == 1 and len(lost) == 1, (bad, lost)


def test_the_audit_damaged_readings_are_said_and_left_out():
    """The audit's cases: "abc W" in a --query-gpu CSV, "abc" and {"x": 1} in rocm-smi
    JSON are named in ``lost`` (they were null without a word); 12345 % utilisation,
    -691.3 W, -5 MiB of memory and 1e308 W are left out and named (they were read as
    real: 123.45, -691.3 W, ..., a 309-digit power in health --file)."""
    header, row = read(_H200_CSV).split("\n")[:2]
    lost: list[str] = []
    r = one(parse_nvidia_smi_csv(f"{header}\n{row.replace(' 691.30 W', ' abc W')}\n", lost=lost))
    assert r["power_w"] is None
    assert lost == ['row 1: power.draw: value "abc W" is not a number; that field is unknown']
    damaged = row.replace(" 691.30 W", " -691.30 W").replace("143771 MiB", "-5 MiB")
    lost = []
    r = one(parse_nvidia_smi_csv(f"{header}\n{damaged}\n", lost=lost))
    assert r["power_w"] is None and r["mem_total_bytes"] is None
    assert lost == [
        "GPU 0 (0000:00:06.0): mem_total_bytes -5.24288e+06 B is outside 0 B to "
        "1.1259e+15 B; that field is unknown",
        "GPU 0 (0000:00:06.0): power_w -691.3 W is outside 0 W to 10000 W; that field is unknown",
    ]
    lost = []
    r = one(parse_nvidia_smi_csv(f"{header}\n{row.replace('691.30 W', '1e308 W')}\n", lost=lost))
    assert r["power_w"] is None and lost == [
        "GPU 0 (0000:00:06.0): power_w 1e+308 W is outside 0 W to 10000 W; that field is unknown"
    ]
    doc = json.loads(read(_MI100))
    doc["card0"]["Average Graphics Package Power (W)"] = "abc"
    doc["card1"]["Temperature (Sensor edge) (C)"] = {"x": 1}
    doc["card3"]["GPU use (%)"] = 12345
    lost = []
    rows = parse_rocm_smi_json(json.dumps(doc), lost=lost)
    assert rows[0]["power_w"] is None and rows[1]["temp_gpu_c"] is None
    assert rows[3]["util_gpu"] is None
    assert lost == [
        'card0: Average Graphics Package Power (W): value "abc" is not a number; that field '
        "is unknown",
        'card1: Temperature (Sensor edge) (C): value {"x": 1} is not a number; that field '
        "is unknown",
        "GPU 3 (0000:e3:00.0): util_gpu 12345 % is outside 0 % to 100 %; that field is unknown",
    ]


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (parse_rocm_smi_json, '{"card0": {"VRAM Total Memory (B)": 1e999}}'),
        (parse_amd_smi_json, '[{"gpu": "\\u00b2", "power": {"throttle_status": 1e999}}]'),
        (parse_rocm_exporter_prometheus, 'pcie_replay_count{gpu_id="0"} +Inf\n'),
        (parse_dcgm_prometheus, 'DCGM_FI_DEV_FB_USED{gpu="0"} 1e999\n'),
    ],
)
def test_an_infinite_reading_is_lost_not_an_internal_error(parser, text):
    """1e999 in JSON, +Inf in a scrape: was int(inf) (exit 70); now that field is named in
    ``lost`` and the row kept."""
    lost: list[str] = []
    rows = parser(text, lost=lost)
    assert len(rows) == 1 and len(lost) == 1 and "not a" in lost[0], lost
    rows_to_table(rows)


def test_looks_like_names_binary_data_and_never_quotes_its_bytes():
    """doctor's "is not `lspci -vvv`: it looks like unknown text starting with '...'"
    quoted the U+FFFD that undecodable bytes were read as, raw, in the error line."""
    from accelbench.telemetry.parsers import looks_like
    from accelbench.telemetry.parsers.text import not_text, quote

    garbage = bytes(range(256)).decode("utf-8", errors="replace") * 4
    assert looks_like(garbage).startswith("binary data, not text")
    stray = "~\ufffdU a line of text with one stray byte"  # text, a byte not UTF-8 in it
    assert not_text(stray) is None
    said = looks_like(stray)
    assert "\ufffd" not in said and "\\ufffd" in said and said.startswith("unknown text")
    assert quote("a\x00b\ufffd") == "'a\\x00b\\ufffd'"


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=400), junk=st.binary(max_size=400))
def test_property_not_text_is_a_share_of_undecodable_or_control_characters(text, junk):
    """Text a tool prints (no control characters but tab, line ends, form feed, ESC) is
    never binary; the same with a ninth as many bytes that are not UTF-8 appended is binary."""
    from accelbench.telemetry.parsers.text import not_text

    # (U+FFFD is what a byte that is not UTF-8 reads as: counted with them, as it must be)
    printed = "".join(c for c in text if (c.isprintable() and c != "\ufffd") or c in "\t\n\x0c\x1b")
    assert not_text(printed) is None
    n = len(printed) + len(junk)
    mixed = (printed.encode() + junk + b"\xff" * (n // 8 + 1)).decode("utf-8", "replace")
    assert not_text(mixed)


# A unit of every quantity the tools print, and a number in it.
_UNITS = ["B", "MiB", "GiB", "W", "mW", "J", "mJ", "uJ", "Hz", "MHz", "s", "us", "C", "%"]
_QUANTITY = {
    **dict.fromkeys(["B", "MiB", "GiB", "MB"], "size"),
    **dict.fromkeys(["W", "mW"], "power"),
    **dict.fromkeys(["J", "mJ", "uJ"], "energy"),
    **dict.fromkeys(["Hz", "MHz"], "frequency"),
    **dict.fromkeys(["s", "us"], "time"),
    "C": "temperature",
    "%": "ratio",
    "": "count",
}
# The unit each field is read in where FIELDS gives none (a bare number).
_READ_IN = {"temperature.gpu": "C", "DCGM_FI_DEV_GPU_TEMP": "C"}


@settings(max_examples=120, deadline=None)
@given(
    case=st.sampled_from([c for c in FIELDS if c[0] in ("csv", "xml", "amd-smi")]), data=st.data()
)
def test_a_reading_in_a_unit_of_another_quantity_is_left_out_and_said(case, data):
    """A value carrying a unit of another quantity than its field's ("56 %" for a
    temperature, "1011 W" for memory, "3 MiB" for a lane count) is no reading of that
    field: that column is null, one ``lost`` line names the field, the rest as before.
    (It was converted without a word: 56 % read as 0.56 C, 1011 W as 1011 bytes.)"""
    fmt, field, col, unit, _ = case
    quantity = (
        _QUANTITY[unit or _READ_IN.get(field, "")] if (unit or field in _READ_IN) else "count"
    )
    wrong = data.draw(st.sampled_from([u for u in _UNITS if _QUANTITY[u] != quantity]))
    number = data.draw(st.sampled_from(["1", "56", "0.5"]))
    good_text, parser = _with(fmt, field, unit, "N/A")
    good = parser(good_text)[0]
    text, parser = _with(fmt, field, wrong, number)
    lost: list[str] = []
    r = parser(text, lost=lost)[0]
    assert r[col] is None, (number, wrong, r[col])
    assert {k: v for k, v in r.items() if k != col} == {k: v for k, v in good.items() if k != col}
    assert len(lost) == 1 and field.split(" [")[0].split("/")[-1] in lost[0], lost


def test_the_audit_wrong_unit_readings_are_said_and_left_out():
    """The audit's case: the H200 load capture with its GPU temperature "56 %", memory
    used "1011 W" and average power "692.49 mJ" gave 0.56 C, 1011 bytes and 0.69 W."""
    text = read("nvidia-smi_q_x__h200__drv580.159.04__dtd-v13__load.xml")
    text = text.replace("<gpu_temp>56 C", "<gpu_temp>56 %").replace(
        "<used>1011 MiB", "<used>1011 W"
    )
    text = text.replace("<average_power_draw>692.49 W", "<average_power_draw>692.49 mJ")
    lost: list[str] = []
    r = parse_nvidia_smi_xml(text, lost=lost)[0]
    assert (r["temp_gpu_c"], r["mem_used_bytes"], r["power_w"]) == (None, None, None)
    assert lost == [
        'GPU 0: average_power_draw: value "692.49 mJ" is not in a unit of the field\'s '
        "quantity (W); that field is unknown",
        'GPU 0: fb_memory_usage/used: value "1011 W" is not in a unit of the field\'s '
        "quantity (MiB); that field is unknown",
        'GPU 0: temperature/gpu_temp: value "56 %" is not in a unit of the field\'s '
        "quantity (C); that field is unknown",
    ]


@settings(max_examples=60, deadline=None)
@given(used=st.integers(0, 300_000), total=st.integers(1, 300_000))
def test_memory_used_above_total_is_said_and_left_out(used, total):
    """memory.used above memory.total of the same GPU (each within its own range) was
    read as it came: both are null now, in one ``lost`` line; used <= total is kept."""
    header, row = read(_H200_CSV).split("\n")[:2]
    names = [c.strip() for c in header.split(",")]
    cells = row.split(", ")
    cells[names.index("memory.used [MiB]")] = f"{used} MiB"
    cells[names.index("memory.total [MiB]")] = f"{total} MiB"
    lost: list[str] = []
    r = one(parse_nvidia_smi_csv(f"{header}\n{', '.join(cells)}\n", lost=lost))
    if used > total:
        assert r["mem_used_bytes"] is None and r["mem_total_bytes"] is None
        assert (
            len(lost) == 1 and "mem_used_bytes" in lost[0] and "is above mem_total_bytes" in lost[0]
        )
    else:
        assert (r["mem_used_bytes"], r["mem_total_bytes"]) == (used * 2**20, total * 2**20)
        assert lost == []
