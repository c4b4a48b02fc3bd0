"""nvidia-smi captures.

- ``nvidia-smi -q -x`` (DTD v11 ``<clocks_throttle_reasons>`` / ``<power_readings>``,
  v12 ``<clocks_event_reasons>`` / ``<gpu_power_readings>``, v13 ``<average_power_draw>``
  / ``<instant_power_draw>`` and ``<clocks_event_reasons_counters>`` in microseconds)
- ``nvidia-smi --query-gpu=... --format=csv`` with or without ``nounits``
"""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import TypeVar

from accelbench.errors import AccelbenchError
from accelbench.gpu.busid import normalize_bus_id
from accelbench.gpu.nvml import NV_THROTTLE_BITS, nv_throttle_names
from accelbench.gpu.values import is_na, to_int, whole
from accelbench.telemetry.parsers.text import clean, reading, reading_int
from accelbench.telemetry.schema import KIND_GPU, Row, new_row, plausible


def _note(notes: list[str] | None, msg: str) -> None:
    if notes is not None:
        notes.append(msg)


# ----------------------------------------------------------------------------
# nvidia-smi -q -x


def _text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    found = el.find(path)
    if found is None or found.text is None:
        return None
    t = found.text.strip()
    return None if is_na(t) else t


def _first(el: ET.Element | None, *paths: str) -> str | None:
    for p in paths:
        t = _text(el, p)
        if t is not None:
            return t
    return None


def _yes(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("yes", "true", "1", "active")


_N = TypeVar("_N", int, float)


def _sum_or_none(values: Iterable[_N | None]) -> _N | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def _nv_xml_ecc(
    block: ET.Element | None, lost: list[str] | None, where: str
) -> tuple[int | None, int | None]:
    """(corrected, uncorrected) from an ``<ecc_errors>/<volatile|aggregate>`` block.

    DTD v11+: ``sram_correctable``, ``sram_uncorrectable`` (v13: ``_parity``/``_secded``),
    ``dram_*``. Older drivers: ``single_bit/total`` and ``double_bit/total``. A value
    that is not a number is named in ``lost`` (``where``: the GPU and the block).
    """
    if block is None:
        return None, None
    if block.find("single_bit") is not None:
        return (
            reading_int(_text(block, "single_bit/total"), lost, f"{where}/single_bit/total"),
            reading_int(_text(block, "double_bit/total"), lost, f"{where}/double_bit/total"),
        )
    corr: list[int | None] = []
    unc: list[int | None] = []
    for child in block:
        tag = child.tag
        if "correctable" not in tag:  # sram_threshold_exceeded: Yes / No
            continue
        val = reading_int((child.text or "").strip(), lost, f"{where}/{tag}")
        if "uncorrectable" in tag:
            unc.append(val)
        else:
            corr.append(val)
    return _sum_or_none(corr), _sum_or_none(unc)


def parse_nvidia_smi_xml(
    text: str,
    t_ns: int | None = None,
    lost: list[str] | None = None,
    notes: list[str] | None = None,
) -> list[Row]:
    """``nvidia-smi -q -x`` output -> one row per ``<gpu>``. Text before the XML
    declaration (a shell prompt, a warning) is skipped."""
    text = clean(text)
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    if start > 0:
        _note(notes, f"skipped text before the XML: {text[:start].strip()[:120]}")
        text = text[start:]
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        cut = "<nvidia_smi_log" in text and "</nvidia_smi_log>" not in text  # begun, not ended
        raise AccelbenchError(
            f"not valid nvidia-smi XML: {exc}"
            + (" (no closing </nvidia_smi_log>: the capture was cut short)" if cut else "")
        ) from exc
    if root.tag != "nvidia_smi_log":
        raise AccelbenchError(f"not nvidia-smi -q -x output (root <{root.tag}>)")
    driver = _text(root, "driver_version")
    attached = to_int(_text(root, "attached_gpus"))
    found = root.findall("gpu")
    if attached is not None and attached > len(found):
        _note(lost, f"attached_gpus is {attached} but {len(found)} <gpu> element(s) are present")
    rows = []
    for idx, gpu in enumerate(found):
        at = f"GPU {idx}: "

        def num(
            el: ET.Element | None, *paths: str, unit: str | None = None, _at: str = at
        ) -> float | None:
            """The first of ``paths`` under ``el`` that is given, as a number (one that is
            not is named in ``lost``)."""
            for path in paths:
                t = _text(el, path)
                if t is not None:
                    return reading(t, unit, lost, _at + path)
            return None

        def count(el: ET.Element | None, path: str, _at: str = at) -> int | None:
            return reading_int(_text(el, path), lost, _at + path)

        # Power: v11 <power_readings>, v12+ <gpu_power_readings>; v13 average/instant.
        pw = gpu.find("gpu_power_readings")
        if pw is None:
            pw = gpu.find("power_readings")
        power = num(pw, "power_draw", "average_power_draw", "instant_power_draw", unit="W")
        limit = num(pw, "enforced_power_limit", "current_power_limit", "power_limit", unit="W")
        # Throttle reasons: v11 clocks_throttle_reasons, v12+ clocks_event_reasons.
        mask = None
        reasons = gpu.find("clocks_event_reasons")
        prefix = "clocks_event_reason_"
        if reasons is None:
            reasons = gpu.find("clocks_throttle_reasons")
            prefix = "clocks_throttle_reason_"
        if reasons is not None:
            mask = 0
            seen = False
            for child in reasons:
                name = child.tag.removeprefix(prefix)
                bit = NV_THROTTLE_BITS.get(name)
                state = (child.text or "").strip().lower()
                if bit is None or is_na(state):
                    continue
                seen = True
                if state == "active":
                    mask |= bit
            if not seen:
                mask = None
        counters = gpu.find("clocks_event_reasons_counters")
        power_s = thermal_s = None
        if counters is not None:
            cp = "clocks_event_reasons_counters_"
            vals = {
                c.tag.removeprefix(cp): reading(c.text, "us", lost, f"{at}{c.tag}")
                for c in counters
            }
            power_s = _sum_or_none([vals.get("sw_power_cap"), vals.get("hw_power_brake")])
            thermal_s = _sum_or_none([vals.get("sw_therm_slowdown"), vals.get("hw_therm_slowdown")])
        ecc_on = _text(gpu, "ecc_mode/current_ecc")
        vc, vu = _nv_xml_ecc(gpu.find("ecc_errors/volatile"), lost, at + "ecc_errors/volatile")
        ac, au = _nv_xml_ecc(gpu.find("ecc_errors/aggregate"), lost, at + "ecc_errors/aggregate")
        if ecc_on is not None and ecc_on.lower() == "disabled":
            vc = vu = ac = au = None
        link = gpu.find("pci/pci_gpu_link_info")
        row = new_row(
            t_ns=t_ns,
            source="nvidia-smi-xml",
            kind=KIND_GPU,
            vendor="nvidia",
            model=_text(gpu, "product_name"),
            device_index=idx,
            bus_id=normalize_bus_id(gpu.get("id") or _text(gpu, "pci/pci_bus_id")),
            uuid=_text(gpu, "uuid"),
            serial=_text(gpu, "serial"),
            driver_version=driver,
            util_gpu=num(gpu, "utilization/gpu_util", unit="%"),
            util_mem=num(gpu, "utilization/memory_util", unit="%"),
            mem_used_bytes=whole(num(gpu, "fb_memory_usage/used", unit="MiB")),
            mem_total_bytes=whole(num(gpu, "fb_memory_usage/total", unit="MiB")),
            power_w=power,
            power_limit_w=limit,
            temp_gpu_c=num(gpu, "temperature/gpu_temp", unit="C"),
            temp_mem_c=num(gpu, "temperature/memory_temp", unit="C"),
            temp_slowdown_c=num(gpu, "temperature/gpu_temp_slow_threshold", unit="C"),
            temp_shutdown_c=num(gpu, "temperature/gpu_temp_max_threshold", unit="C"),
            temp_mem_max_c=num(gpu, "temperature/gpu_temp_max_mem_threshold", unit="C"),
            clock_sm_hz=num(gpu, "clocks/sm_clock", unit="MHz"),
            clock_mem_hz=num(gpu, "clocks/mem_clock", unit="MHz"),
            clock_sm_max_hz=num(gpu, "max_clocks/sm_clock", unit="MHz"),
            clock_mem_max_hz=num(gpu, "max_clocks/mem_clock", unit="MHz"),
            throttle_mask=mask,
            throttle_reasons=nv_throttle_names(mask),
            throttle_power_s=power_s,
            throttle_thermal_s=thermal_s,
            ecc_corrected_volatile=vc,
            ecc_uncorrected_volatile=vu,
            ecc_corrected_aggregate=ac,
            ecc_uncorrected_aggregate=au,
            remapped_rows_corr=count(gpu, "remapped_rows/remapped_row_corr"),
            remapped_rows_unc=count(gpu, "remapped_rows/remapped_row_unc"),
            remapped_rows_pending=_yes(_text(gpu, "remapped_rows/remapped_row_pending")),
            remapped_rows_failure=_yes(_text(gpu, "remapped_rows/remapped_row_failure")),
            pcie_gen=count(link, "pcie_gen/current_link_gen"),
            pcie_gen_max=count(link, "pcie_gen/max_link_gen"),
            pcie_width=count(link, "link_widths/current_link_width"),
            pcie_width_max=count(link, "link_widths/max_link_width"),
            pcie_replay=count(gpu, "pci/replay_counter"),
        )
        rows.append(row)
    return plausible(rows, lost)


# ----------------------------------------------------------------------------
# nvidia-smi --query-gpu --format=csv


def _csv_header(name: str) -> tuple[str, str | None]:
    """ "memory.used [MiB]" -> ("memory.used", "MiB")."""
    name = name.strip()
    if name.endswith("]") and " [" in name:
        base, unit = name[:-1].split(" [", 1)
        return base.strip(), unit.strip()
    return name, None


# Fields of --query-gpu that identify a GPU; a header line holds at least one of them.
_CSV_KEYS = ("name", "uuid", "pci.bus_id", "index")


def _csv_cells(line: str) -> list[str]:
    """The cells of one CSV line. Raises ``csv.Error`` for a line the csv module cannot
    read (a field over its limit of 131,072 characters: a line a capture ran into)."""
    return next(csv.reader([line], skipinitialspace=True), [])


def _csv_unread(exc: csv.Error) -> str:
    """Why the csv module could not read a line, in one short clause."""
    return str(exc).split(";")[0]


def csv_header_line(lines: list[str]) -> int | None:
    """Index of the last ``--query-gpu`` CSV header line in ``lines`` (a capture may hold
    several tables, and other text before them), or None."""
    found = None
    for n, line in enumerate(lines):
        if line.count(",") < 1 or line.lstrip().startswith("#"):
            continue
        try:
            names = {_csv_header(c)[0] for c in _csv_cells(line)}
        except csv.Error:  # a line csv cannot read is no header
            continue
        if names & set(_CSV_KEYS) and all(re.fullmatch(r"[\w.]+", x) for x in names if x):
            found = n
    return found


def _lost_after(lines: list[str], at: int, width: int, lost: list[str] | None) -> None:
    """A comment line ends the table (a session log's next section starts with one);
    rows of the table's width after it are not read: say so in ``lost``."""

    def of_width(ln: str) -> bool:
        try:
            return len(_csv_cells(ln)) == width
        except csv.Error:  # unreadable: not counted as a row of the table
            return False

    rows = sum(
        1
        for ln in lines[at + 1 :]
        if ln.strip() and not ln.lstrip().startswith("#") and of_width(ln)
    )
    if rows:
        _note(
            lost,
            f"the CSV ends at the comment on line {at + 1} ({lines[at].strip()[:60]!r}): "
            f"{rows} later line(s) with the table's {width} fields are not read",
        )


def parse_nvidia_smi_csv(
    text: str,
    t_ns: int | None = None,
    lost: list[str] | None = None,
    notes: list[str] | None = None,
) -> list[Row]:
    """``nvidia-smi --query-gpu=... --format=csv[,nounits]`` -> one row per data line.

    Needs the header line (``noheader`` output cannot be mapped to fields). Units come
    from each value ("81559 MiB") or, with ``nounits``, from the header ("[MiB]").
    Text before the header (a session log, a shell prompt) is skipped; of several tables
    the last is read. A line among the rows that is not a row (no comma: nvidia-smi's
    ``WARNING: infoROM is corrupted at gpu ...``) is skipped and named in ``notes``, and
    the rows after it are read. A comment line (``#``, a session log's next section) ends
    the table; rows of the table's width after it are named in ``lost``. A data row with
    fewer fields than the header (a cut capture) keeps what it has and names the missing
    fields in ``lost``; so does a last line without its line end, whose last value may be
    cut (a last line without a comma and without its line end is a row cut inside its
    first value: ``lost``, not read). A line the csv module cannot read (a field over its
    131,072-character limit: a capture that ran into other output) is left out and named
    in ``lost``; the rows after it are read.
    """
    text = clean(text)
    all_lines = text.split("\n")
    head = csv_header_line(all_lines)
    if head is None:
        if text.strip() and "," not in text.strip().split("\n")[0]:
            raise AccelbenchError("not nvidia-smi --query-gpu CSV (no comma-separated header)")
        raise AccelbenchError(
            "nvidia-smi CSV without a header (or without name/uuid/pci.bus_id/index): "
            "capture it without 'noheader'; or the capture was cut inside its header"
        )
    before = [ln for ln in all_lines[:head] if ln.strip()]
    if before and notes is not None:
        tables = sum(1 for n in range(head) if csv_header_line([all_lines[n]]) is not None)
        notes.append(
            f"skipped {len(before)} line(s) before the CSV header"
            + (f" ({tables} earlier --query-gpu table(s); the last one is read)" if tables else "")
        )
    header_cells = _csv_cells(all_lines[head])
    header = [_csv_header(h) for h in header_cells]
    ended = text.endswith("\n")
    body: list[list[str]] = []
    last = len(all_lines) - 1
    cut = not ended and all_lines[last].strip() != ""  # no line end: the capture was cut
    body_end = -1  # the line of the last row
    stray: list[str] = []
    unread: list[int] = []  # lines the csv module could not read (lost)
    for n in range(head + 1, len(all_lines)):
        line = all_lines[n]
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):  # a comment: the next section of a session log
            _lost_after(all_lines, n, len(header), lost)
            break
        if "," not in line:  # a tool's warning between rows: skipped, the rows after it read
            if not (cut and n == last):  # (a cut last line may be a row: lost, below)
                stray.append(f"line {n + 1}: {line.strip()[:120]}")
            continue
        try:
            body.append(_csv_cells(line))
        except csv.Error as exc:  # a line csv cannot read: lost, the rows after it read
            unread.append(n)
            _note(lost, f"line {n + 1} is not a row csv can read ({_csv_unread(exc)}): left out")
            continue
        body_end = n
    if stray:
        _note(
            notes,
            f"skipped {len(stray)} line(s) between the CSV rows (no comma: not a row): "
            + "; ".join(stray[:3])
            + (" ..." if len(stray) > 3 else ""),
        )
    if cut and head != last and body_end != last and last not in unread:
        _note(
            lost,
            f"the capture ends without a line end inside line {last + 1} "
            f"({all_lines[last].strip()[:60]!r}): cut short there; a row there or after "
            "it is not read",
        )
    last_line_cut = bool(body) and cut and body_end == last
    if head == len(all_lines) - 1 and not ended:
        _note(lost, "the capture ends inside the CSV header: no data rows")
    elif not body and not unread:
        _note(lost, "the CSV has a header but no data rows")
    lines = [header_cells, *body]
    rows = []
    for line_no, values in enumerate(lines[1:]):
        rec: dict[str, tuple[str, str | None]] = {}
        if len(values) < len(header):
            missing = [h[0] for h in header[len(values) :]]
            _note(
                lost,
                f"row {line_no + 1} has {len(values)} of {len(header)} fields (cut short?): "
                f"{len(missing)} unknown: {', '.join(missing[:8])}"
                + (" ..." if len(missing) > 8 else ""),
            )
        elif len(values) > len(header):
            _note(lost, f"row {line_no + 1} has {len(values)} fields for {len(header)} names")
        if line_no == len(lines) - 2 and last_line_cut and values:
            _note(
                lost,
                f"row {line_no + 1} ends the file without a line end: its last value "
                f"{values[-1].strip()!r} may be cut and is not used",
            )
            values = values[:-1]
        for (name, unit), val in zip(header, values, strict=False):
            rec[name] = (val.strip(), unit)

        def field(*keys: str, _rec: dict = rec) -> tuple[str | None, str | None, str]:
            """(value, unit, name) of the first of ``keys`` the row gives."""
            for k in keys:
                if k in _rec and not is_na(_rec[k][0]):
                    return (*_rec[k], k)
            return None, None, keys[0]

        def get(*keys: str) -> tuple[str | None, str | None]:
            return field(*keys)[:2]

        def q(*keys: str, default: str | None = None, _row: int = line_no) -> float | None:
            val, unit, k = field(*keys)
            return reading(val, unit or default, lost, f"row {_row + 1}: {k}")

        def i(*keys: str, _row: int = line_no) -> int | None:
            val, _, k = field(*keys)
            return reading_int(val, lost, f"row {_row + 1}: {k}")

        mask = i("clocks_event_reasons.active", "clocks_throttle_reasons.active")
        power_s = _sum_or_none(
            [
                q("clocks_event_reasons_counters.sw_power_cap", default="us"),
                q("clocks_event_reasons_counters.hw_power_brake_slowdown", default="us"),
            ]
        )
        thermal_s = _sum_or_none(
            [
                q("clocks_event_reasons_counters.sw_thermal_slowdown", default="us"),
                q("clocks_event_reasons_counters.hw_thermal_slowdown", default="us"),
            ]
        )
        pend, _ = get("remapped_rows.pending")
        fail, _ = get("remapped_rows.failure")
        idx = i("index")
        rows.append(
            new_row(
                t_ns=t_ns,
                source="nvidia-smi-csv",
                kind=KIND_GPU,
                vendor="nvidia",
                model=get("name", "gpu_name")[0],
                device_index=idx if idx is not None else line_no,
                bus_id=normalize_bus_id(get("pci.bus_id", "gpu_bus_id")[0]),
                uuid=get("uuid", "gpu_uuid")[0],
                serial=get("serial", "gpu_serial")[0],
                driver_version=get("driver_version")[0],
                util_gpu=q("utilization.gpu", default="%"),
                util_mem=q("utilization.memory", default="%"),
                mem_used_bytes=whole(q("memory.used", default="MiB")),
                mem_total_bytes=whole(q("memory.total", default="MiB")),
                power_w=q("power.draw", "power.draw.average", "power.draw.instant", default="W"),
                power_limit_w=q("enforced.power.limit", "power.limit", default="W"),
                energy_j=q("total_energy_consumption", default="mJ"),
                temp_gpu_c=q("temperature.gpu", default="C"),
                temp_mem_c=q("temperature.memory", default="C"),
                clock_sm_hz=q("clocks.current.sm", "clocks.sm", default="MHz"),
                clock_mem_hz=q("clocks.current.memory", "clocks.mem", default="MHz"),
                clock_sm_max_hz=q("clocks.max.sm", default="MHz"),
                clock_mem_max_hz=q("clocks.max.memory", "clocks.max.mem", default="MHz"),
                throttle_mask=mask,
                throttle_reasons=nv_throttle_names(mask),
                throttle_power_s=power_s,
                throttle_thermal_s=thermal_s,
                ecc_corrected_volatile=i("ecc.errors.corrected.volatile.total"),
                ecc_uncorrected_volatile=i("ecc.errors.uncorrected.volatile.total"),
                ecc_corrected_aggregate=i("ecc.errors.corrected.aggregate.total"),
                ecc_uncorrected_aggregate=i("ecc.errors.uncorrected.aggregate.total"),
                remapped_rows_corr=i("remapped_rows.correctable"),
                remapped_rows_unc=i("remapped_rows.uncorrectable"),
                remapped_rows_pending=_yes(pend),
                remapped_rows_failure=_yes(fail),
                pcie_gen=i("pcie.link.gen.current", "pcie.link.gen.gpucurrent"),
                pcie_gen_max=i("pcie.link.gen.max"),
                pcie_width=i("pcie.link.width.current"),
                pcie_width_max=i("pcie.link.width.max"),
            )
        )
    return plausible(rows, lost)
