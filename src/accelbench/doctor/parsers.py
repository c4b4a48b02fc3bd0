"""Parsers for the text that GPU tools print: nvidia-smi, nvidia-smi topo -m, rocm-smi,
amd-smi (list / static / version, text and JSON), rocminfo, lspci -vvv and vLLM's
collect_env. Each takes the captured text and returns plain dicts and lists; none
runs a tool. They accept the variants found in real captures (see
tests/fixtures/doctor/SOURCES.md): trailing blanks trimmed or kept, Markdown
indentation, tabs expanded to spaces, ANSI escapes.
"""

from __future__ import annotations

import re
from typing import TypedDict

from accelbench.errors import AccelbenchError
from accelbench.gpu.busid import bus_id_from_bdfid, normalize_bus_id
from accelbench.gpu.values import to_int
from accelbench.telemetry.parsers.text import clean, find_json, strip_ansi


def dedent_common(text: str) -> str:
    """Remove the indentation common to all non-blank lines (Markdown pastes add 4 spaces)."""
    lines = text.splitlines()
    indents = [len(ln) - len(ln.lstrip(" ")) for ln in lines if ln.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(ln[cut:] if len(ln) >= cut else ln.lstrip(" ") for ln in lines)


# --------------------------------------------------------------------------- nvidia-smi


class NvidiaSmiGpu(TypedDict, total=False):
    index: int
    name: str
    persistence: str
    bdf: str
    ecc_uncorrected: str | None
    memory_used_mib: int
    memory_total_mib: int
    utilization_pct: int | None


class NvidiaSmi(TypedDict, total=False):
    driver_version: str | None
    cuda_version: str | None
    gpus: list[NvidiaSmiGpu]
    tables: int  # tables in the capture (the last one is judged)
    processes: int
    truncated: str | None


def parse_nvidia_smi(text: str) -> NvidiaSmi:
    """Plain `nvidia-smi` table: driver and CUDA versions, one entry per GPU."""
    text = strip_ansi(clean(text))
    out: NvidiaSmi = {"driver_version": None, "cuda_version": None, "gpus": []}
    # A saved session may hold several tables (idle, then under load): judge the last one.
    heads = [m.start() for m in re.finditer(r"^\|\s*NVIDIA-SMI \d", text, re.M)]
    out["tables"] = len(heads)
    if len(heads) > 1:
        text = text[text.rfind("\n", 0, heads[-1]) + 1 :]
    m = re.search(r"Driver Version:\s*([\d.]+)", text)
    if m:
        out["driver_version"] = m.group(1)
    m = re.search(r"CUDA Version:\s*([\d.]+)", text)
    if m:
        out["cuda_version"] = m.group(1)
    lines = text.splitlines()
    for ln in lines:
        cells = ln.split("|")
        if len(cells) < 4:
            continue
        m = re.match(r"^\s*(\d+)\s+(.*?)\s+(On|Off)\s*$", cells[1])
        bus = re.match(r"^\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s", cells[2])
        if m and bus:
            out["gpus"].append(
                {
                    "index": int(m.group(1)),
                    "name": m.group(2).strip(),
                    "persistence": m.group(3),
                    "bdf": normalize_bus_id(bus.group(1)) or bus.group(1),
                    "ecc_uncorrected": cells[3].strip() or None,
                }
            )
            continue
        # Second line of a GPU row: fan, temp, perf, power | memory used / total | util
        mem = re.search(r"(\d+)MiB\s*/\s*(\d+)MiB", cells[2])
        util = re.search(r"(\d+)%", cells[3])
        if mem and out["gpus"] and "memory_used_mib" not in out["gpus"][-1]:
            g = out["gpus"][-1]
            g["memory_used_mib"], g["memory_total_mib"] = int(mem.group(1)), int(mem.group(2))
            g["utilization_pct"] = int(util.group(1)) if util else None
    procs = 0
    in_procs = False
    for ln in lines:
        if "Processes:" in ln:
            in_procs = True
            continue
        if in_procs and re.match(r"^\|\s+\d+\s+\S+\s+\S+\s+\d+\s+\S+\s+", ln):
            procs += 1
    out["processes"] = procs
    # A whole table ends with the border under its process list.
    tail = [ln.strip() for ln in lines if ln.strip()]
    complete = in_procs and bool(tail) and re.fullmatch(r"\+[-=+]+\+", tail[-1]) is not None
    out["truncated"] = (
        None
        if complete or not out["gpus"]
        else "the nvidia-smi table ends before its process list is closed"
    )
    return out


class TopoGpu(TypedDict):
    name: str
    links: dict[str, str]  # GPUn / NICn -> the link (NV12, SYS, PIX ...)
    cpu_affinity: str | None
    numa_affinity: str | None


class NvidiaTopo(TypedDict):
    gpus: list[TopoGpu]
    truncated: str | None


def parse_nvidia_topo(text: str) -> NvidiaTopo:
    """`nvidia-smi topo -m` matrix (tab separated or tabs expanded): per GPU its links,
    CPU affinity and NUMA affinity."""
    text = dedent_common(strip_ansi(clean(text)))
    lines = text.splitlines()
    header: list[str] | None = None
    gpus: list[TopoGpu] = []
    for ln in lines:
        if header is None:
            toks = [c.strip() for c in re.split(r"\t+| {2,}", ln.strip()) if c.strip()]
            # "CPU Affinity": not another GPU matrix (rocm-smi --showtopo's weights)
            if "GPU0" in toks and "X" not in toks and "CPU Affinity" in toks:
                header = toks
            continue
        if not ln.strip() or ln.startswith("Legend"):
            if gpus:
                break
            continue
        cells = [c.strip() for c in re.split(r"\t+| {2,}", ln.strip()) if c.strip()]
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        values = dict(zip(header, cells[1:], strict=False))
        gpus.append(
            {
                "name": cells[0],
                "links": {k: v for k, v in values.items() if re.fullmatch(r"(GPU|NIC)\d+", k)},
                "cpu_affinity": values.get("CPU Affinity"),
                "numa_affinity": values.get("NUMA Affinity"),
            }
        )
    # The header names every GPU column: fewer rows (or a short last row) means a cut.
    n_cols = sum(1 for h in header or [] if re.fullmatch(r"GPU\d+", h))
    short = bool(gpus) and header is not None and len(gpus[-1]["links"]) < n_cols
    truncated = None
    if gpus and (len(gpus) < n_cols or short):
        truncated = f"the topo -m matrix has {len(gpus)} complete row(s) of {n_cols}"
    return {"gpus": gpus, "truncated": truncated}


# --------------------------------------------------------------------------- AMD tools


# AMD Instinct PCI device ids -> names, as `rocm-smi -i` / `rocm-smi --showproductname`
# print them (ROCm/ROCm#4750, ROCm/legacy-rocm-build#4759; see tests/fixtures/doctor/
# SOURCES.md). The newer concise `rocm-smi` table shows only the id.
AMD_DEVICE_NAMES = {
    "0x74a0": "AMD Instinct MI300A",
    "0x74a1": "AMD Instinct MI300X",
    "0x74a5": "AMD Instinct MI325X",
    "0x74b5": "AMD Instinct MI300X VF",
}


class RocmSmiGpu(TypedDict, total=False):
    index: int
    row: str  # the concise table's row, as printed
    device_id: str
    node_id: int
    guid: str
    name: str
    name_from: str  # "device id": the name was looked up, not printed
    vram_pct: float
    utilization_pct: float
    memory_partition: str
    compute_partition: str
    sku: str
    vbios: str
    pcie_replay_count: int | None
    bdf: str | None
    numa_node: int | None


class RocmSmi(TypedDict):
    driver_version: str | None
    gpus: list[RocmSmiGpu]
    layout: str | None  # concise | all
    truncated: str | None


def parse_rocm_smi(text: str) -> RocmSmi:
    """Plain `rocm-smi` (Concise Info: the older layout with `[Model : Revision]` and a
    name line, or the newer one with `Node  IDs (DID, GUID)`) or `rocm-smi -a`.
    ``truncated`` says when the output stops before rocm-smi's closing line."""
    text = strip_ansi(clean(text))
    out: RocmSmi = {"driver_version": None, "gpus": [], "layout": None, "truncated": None}
    if "ROCm System Management Interface" in text and "End of ROCm SMI Log" not in text:
        out["truncated"] = "the output ends before rocm-smi's 'End of ROCm SMI Log' line"
    m = re.search(r"Driver version:\s*(\S+)", text)
    if m:
        out["driver_version"] = m.group(1)
    if "Concise Info" in text:
        out["layout"] = "concise"
        lines = text.splitlines()
        seps = [i for i, ln in enumerate(lines) if re.match(r"^=+\s*$", ln.strip() + " ")]
        body = lines[seps[0] + 1 : seps[1]] if len(seps) >= 2 else lines
        cur: RocmSmiGpu | None = None
        for ln in body:
            m = re.match(r"^(\d+)\s+(.*)$", ln)
            if m:
                cur = {"index": int(m.group(1)), "row": m.group(2).strip()}
                pm = re.search(r"\[(0x[0-9a-fA-F]+)\s*:", ln)
                nm = re.match(r"^\d+\s+(\d+)\s+(0x[0-9a-fA-F]+),\s*(\d+)\b", ln)
                if pm:
                    cur["device_id"] = pm.group(1).lower()
                elif nm:  # newer layout: Node, (DID, GUID); no name line
                    cur["node_id"], cur["guid"] = int(nm.group(1)), nm.group(3)
                    cur["device_id"] = nm.group(2).lower()
                    if cur["device_id"] in AMD_DEVICE_NAMES:
                        cur["name"] = AMD_DEVICE_NAMES[cur["device_id"]]
                        cur["name_from"] = "device id"
                pct = re.findall(r"(\d+(?:\.\d+)?)%", ln)
                if len(pct) >= 2:  # the last two columns are VRAM% and GPU%
                    cur["vram_pct"], cur["utilization_pct"] = float(pct[-2]), float(pct[-1])
                part = re.search(r"\b(NPS\d),\s*(SPX|DPX|TPX|QPX|CPX)\b", ln)
                if part:
                    cur["memory_partition"], cur["compute_partition"] = part.groups()
                out["gpus"].append(cur)
            elif cur is not None and ln.strip() and ln.startswith(" ") and "name" not in cur:
                cur["name"] = ln.strip()
        return out
    # rocm-smi -a / other per-GPU line formats: "GPU[3]		: key: value"
    gpus: dict[int, RocmSmiGpu] = {}
    for m in re.finditer(r"^GPU\[(\d+)\]\s*:\s*(.*?)\s*$", text, re.M):
        idx = int(m.group(1))
        g = gpus.setdefault(idx, {"index": idx})
        kv = m.group(2)
        if ":" in kv:
            k, _, v = kv.partition(":")
            k, v = k.strip(), v.strip()
            if k == "Device ID":
                g["device_id"] = v.lower()
            elif k == "Card SKU":
                g["sku"] = v
            elif k == "VBIOS version":
                g["vbios"] = v
            elif k == "PCIe Replay Count":
                g["pcie_replay_count"] = to_int(v)
            elif k == "PCI Bus":
                g["bdf"] = normalize_bus_id(v)
            elif k == "Card Series" or k == "Card series":
                g["name"] = v
            elif k in ("(Topology) Numa Node", "Numa Node"):
                g["numa_node"] = to_int(v)
    if gpus:
        out["layout"] = "all"
        out["gpus"] = [gpus[i] for i in sorted(gpus)]
    return out


# amd-smi's text output as a tree: KEY -> value, or KEY -> the indented lines under it.
Tree = dict[str, "str | Tree"]


def _indent_tree(text: str) -> list[tuple[str, Tree]]:
    """amd-smi's human-readable output: top-level 'GPU: n' blocks of indented 'KEY: value'
    lines. Returns [(header, nested dict)]; repeated keys keep the last value."""
    blocks: list[tuple[str, Tree]] = []
    stack: list[tuple[int, Tree]] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        key, sep, val = raw.strip().partition(":")
        if not sep:
            continue
        val = val.strip()
        if indent == 0:
            root: Tree = {}
            blocks.append((f"{key.strip()}: {val}", root))
            stack = [(0, root)]
            continue
        while stack and stack[-1][0] >= indent and len(stack) > 1:
            stack.pop()
        parent: Tree = stack[-1][1] if stack else {}
        if val:
            parent[key.strip()] = val
        else:
            child: Tree = {}
            parent[key.strip()] = child
            stack.append((indent, child))
    return blocks


def _leaf_count(tree: Tree) -> int:
    return sum(_leaf_count(v) if isinstance(v, dict) else 1 for v in tree.values())


class AmdSmiGpu(TypedDict, total=False):
    index: int
    bdf: str | None
    uuid: str | None
    partition_id: int | None
    name: str | None  # static only, from here on
    device_id: str | None
    arch: str | None
    max_pcie_width: int | None
    max_pcie_speed: str | None
    driver_name: str | None
    driver_version: str | None
    ecc_blocks_disabled: list[str]
    bad_page_threshold_exceeded: str | None
    numa_node: int | None
    compute_partition: str | None
    memory_partition: str | None
    firmware_name: str | None


class AmdSmi(TypedDict, total=False):
    """`amd-smi list` / `static` (``gpus``) or `version` (the versions, ``errors``)."""

    kind: str  # list | static | version
    gpus: list[AmdSmiGpu]
    skipped: list[str]  # lines before the JSON (a tool's warnings: find_json)
    truncated: str | None
    errors: list[str]
    rocm_version: str | None
    amdgpu_version: str | None
    amdsmi_library_version: str | None
    version: str | None


def parse_amd_smi_list(text: str) -> AmdSmi:
    gpus: list[AmdSmiGpu] = []
    for head, body in _indent_tree(text):
        m = re.match(r"GPU: (\d+)", head)
        if m:
            bdf, uuid = _vu(body.get("BDF")), _vu(body.get("UUID"))
            gpus.append(
                {
                    "index": int(m.group(1)),
                    "bdf": normalize_bus_id(bdf) if bdf else None,
                    "uuid": uuid,
                    "partition_id": to_int(body.get("PARTITION_ID")),
                }
            )
    return {"kind": "list", "gpus": gpus}


def _vu(v: object) -> str | None:
    """amd-smi JSON values are either plain or {"value", "unit"}; 'N/A' means unknown."""
    if isinstance(v, dict) and "value" in v:
        v = f"{v['value']} {v.get('unit', '')}".strip()
    if v is None or v == "N/A":
        return None
    return str(v)


def _index(value: object, default: int) -> int:
    n = to_int(value)
    return default if n is None or n < 0 else n


def _amd_static_gpu(index: int, raw: object) -> AmdSmiGpu:
    """One GPU of `amd-smi static` (JSON, or the text form's tree)."""

    def low(dd: object) -> dict[str, object]:
        return {str(k).lower(): v for k, v in dd.items()} if isinstance(dd, dict) else {}

    d = low(raw)
    asic, bus, drv, ras = (
        low(d.get("asic")),
        low(d.get("bus")),
        low(d.get("driver")),
        low(d.get("ras")),
    )
    board, numa, part = low(d.get("board")), low(d.get("numa")), low(d.get("partition"))
    ecc_state = low(ras.get("ecc_block_state"))
    return {
        "index": index,
        "name": _vu(asic.get("market_name")) or _vu(board.get("product_name")),
        "device_id": (_vu(asic.get("device_id")) or "").lower() or None,
        "arch": _vu(asic.get("target_graphics_version")),
        "bdf": normalize_bus_id(str(bus["bdf"])) if _vu(bus.get("bdf")) else None,
        "max_pcie_width": to_int(_vu(bus.get("max_pcie_width"))),
        "max_pcie_speed": _vu(bus.get("max_pcie_speed")),
        "driver_name": _vu(drv.get("name")),
        "driver_version": _vu(drv.get("version")),
        "ecc_blocks_disabled": sorted(k for k, v in ecc_state.items() if v == "DISABLED"),
        "bad_page_threshold_exceeded": _vu(ras.get("bad_page_threshold_exceeded")),
        "numa_node": to_int(_vu(numa.get("node"))),
        "compute_partition": _vu(part.get("compute_partition")),
        "memory_partition": _vu(part.get("memory_partition")),
        "firmware_name": _vu(low(d.get("ifwi")).get("name")),
    }


_JSON_START = re.compile(r"^\s*[\[{]", re.M)


def has_json_start(text: str) -> bool:
    """Whether a line of ``text`` starts (after blanks) a JSON object or array: amd-smi
    --json output, possibly after a warning line, possibly cut short."""
    return _JSON_START.search(text) is not None


def parse_amd_smi(text: str) -> AmdSmi:
    """Any of `amd-smi list`, `amd-smi static`, `amd-smi version`, text or --json."""
    text = clean(text)
    stripped = text.strip()
    if has_json_start(stripped) and not re.match(r"GPU: \d", stripped):
        try:
            data, skipped = find_json(stripped, "amd-smi")
        except AccelbenchError as exc:
            raise ValueError(str(exc)) from None
        if isinstance(data, list) and data and isinstance(data[0], dict) and "tool" in data[0]:
            v = data[0]
            errors: list[str] = []
            found: dict[str, str | None] = {}
            for key in ("rocm_version", "amdgpu_version", "amdsmi_library_version", "version"):
                val = v.get(key)
                if isinstance(val, str) and ("STATUS" in val or "Error" in val):
                    errors.append(f"{key}: {val}")
                    val = None
                found[key] = None if val in (None, "N/A") else str(val)
            return {
                "kind": "version", "errors": errors, "skipped": skipped,
                "rocm_version": found["rocm_version"], "amdgpu_version": found["amdgpu_version"],
                "amdsmi_library_version": found["amdsmi_library_version"],
                "version": found["version"],
            }  # fmt: skip
        if isinstance(data, dict) and "gpu_data" in data:
            data = data["gpu_data"]
        if isinstance(data, list) and all(isinstance(g, dict) for g in data):
            gpus = [
                _amd_static_gpu(_index(g.get("gpu"), i), g)
                for i, g in enumerate(data)
                if isinstance(g, dict)
            ]
            if gpus and any(g["name"] or g["bdf"] for g in gpus):
                return {"kind": "static", "gpus": gpus, "skipped": skipped}
            return {
                "kind": "list",
                "gpus": [{"index": g["index"], "bdf": g["bdf"]} for g in gpus],
                "skipped": skipped,
            }
        raise ValueError("unrecognised amd-smi JSON")
    blocks = _indent_tree(text)
    gpu_blocks = [(h, b) for h, b in blocks if h.startswith("GPU:")]
    # The text form has no end marker: a capture cut short shows as a last line without
    # its line end, or a last GPU block with fewer fields than the first.
    truncated = None
    if gpu_blocks and (
        not text.endswith("\n") or _leaf_count(gpu_blocks[-1][1]) < _leaf_count(gpu_blocks[0][1])
    ):
        truncated = "the amd-smi output ends inside a GPU block"
    if any("ASIC" in b or "DRIVER" in b or "BUS" in b for _, b in gpu_blocks):
        gpus = [
            _amd_static_gpu(_index(h.split(":")[1], i), b) for i, (h, b) in enumerate(gpu_blocks)
        ]
        return {"kind": "static", "gpus": gpus, "truncated": truncated}
    if any("BDF" in b for _, b in gpu_blocks):
        return parse_amd_smi_list(text) | {"truncated": truncated}
    m = re.search(r"ROCm version:\s*(\S+)", text)
    if m:
        return {"kind": "version", "rocm_version": m.group(1), "errors": []}
    raise ValueError("unrecognised amd-smi output")


class RocminfoGpu(TypedDict):
    index: int
    arch: str | None
    name: str | None
    bdf: str | None
    device_id: str | None
    compute_units: int | None


class Rocminfo(TypedDict):
    truncated: str | None
    rock_loaded: bool
    runtime_version: str | None
    gpus: list[RocminfoGpu]


def parse_rocminfo(text: str) -> Rocminfo:
    """`rocminfo`: whether the ROCk (KFD) module is loaded, and the GPU agents."""
    text = clean(text)
    out: Rocminfo = {
        "truncated": None
        if "*** Done ***" in text
        else "rocminfo output ends before '*** Done ***'",
        "rock_loaded": "ROCk module is loaded" in text,
        "runtime_version": None,
        "gpus": [],
    }
    m = re.search(r"Runtime Version:\s*(\S+)", text)
    if m:
        out["runtime_version"] = m.group(1)
    for chunk in re.split(r"\n\*+\s*\nAgent \d+\s*\n\*+\s*\n", text)[1:]:
        fields: dict[str, str] = {}
        for ln in chunk.splitlines():
            if ln.startswith("  ") and not ln.startswith("    ") and ":" in ln:
                k, _, v = ln.strip().partition(":")
                fields.setdefault(k.strip(), v.strip())
        if fields.get("Device Type") != "GPU":
            continue
        bdfid = to_int(fields.get("BDFID"))
        bdf = None if bdfid is None else bus_id_from_bdfid(bdfid)
        chip = re.search(r"\((0x[0-9a-fA-F]+)\)", fields.get("Chip ID", ""))
        out["gpus"].append(
            {
                "index": len(out["gpus"]),
                "arch": fields.get("Name"),
                "name": fields.get("Marketing Name"),
                "bdf": bdf,
                "device_id": chip.group(1).lower() if chip else None,
                "compute_units": to_int(fields.get("Compute Unit")),
            }
        )
    return out


# --------------------------------------------------------------------------- lspci

_STANZA = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (.+?): (.*)$")
_LNK = re.compile(
    r"Speed ([\d.]+)GT/s(?: \((ok|downgraded)\))?, Width x(\d+)(?: \((ok|downgraded)\))?"
)

GPU_CLASSES = (
    "3D controller",
    "VGA compatible controller",
    "Display controller",
    "Processing accelerators",
)


class Link(TypedDict):
    """A bridge above a device (switch port, root port) and its link."""

    bdf: str
    description: str
    sta_speed: float | None  # GT/s and lanes it runs at, and what it can do
    cap_speed: float | None
    sta_width: int | None
    cap_width: int | None


# amdgpu RAS: each block's uncorrected / corrected error counts ("ue", "ce"), and
# "bad_pages": the count of retired VRAM pages.
Ras = dict[str, dict[str, int | None] | int]

# One PCI function, as `lspci -vvv` shows it or sysfs (doctor.system.scan_pci) reads it:
# the same names either way, so the checks judge both alike ("class" is a Python
# keyword: the functional form).
PciDevice = TypedDict(
    "PciDevice",
    {
        "bdf": str,
        "vendor": str,  # nvidia | amd (the GPUs only)
        "class": str,
        "description": str,
        "vendor_id": str | None,
        "device_id": str | None,
        "cap_speed": float | None,  # GT/s and lanes the link can do, and what it runs at
        "cap_width": int | None,
        "sta_speed": float | None,
        "sta_width": int | None,
        "sta_speed_flag": str | None,  # lspci: ok | downgraded
        "sta_width_flag": str | None,
        "numa_node": int | None,
        "driver": str | None,
        "secondary_bus": int,  # lspci, a bridge: the buses below it
        "subordinate_bus": int,
        "is_gpu": bool,
        "iommu_group_type": str | None,  # sysfs only from here on
        "upstream": list[Link],
        "ras": Ras,
    },
    total=False,
)


def parse_lspci(text: str) -> list[PciDevice]:
    """`lspci -vvv` (with or without -nn / -D): one dict per PCI function with its
    class, vendor, link capability and status, NUMA node, driver and bridge buses."""
    devices: list[PciDevice] = []
    cur: PciDevice | None = None
    for ln in clean(text).splitlines():
        m = _STANZA.match(ln)
        if m:
            desc = m.group(3)
            cls = re.sub(r"\s*\[[0-9a-f]{4}\]$", "", m.group(2))
            ids = re.search(r"\[([0-9a-f]{4}):([0-9a-f]{4})\]", desc)
            vendor_id = ids.group(1) if ids else None
            if vendor_id is None:
                if desc.startswith("NVIDIA"):
                    vendor_id = "10de"
                elif (
                    desc.startswith("Advanced Micro Devices, Inc. [AMD/ATI]") or "[AMD/ATI]" in desc
                ):
                    vendor_id = "1002"
            dev: PciDevice = {
                "bdf": normalize_bus_id(m.group(1)) or m.group(1),
                "class": cls,
                "description": desc,
                "vendor_id": vendor_id,
                "device_id": ids.group(2) if ids else None,
            }
            devices.append(dev)
            cur = dev
            continue
        if cur is None:
            continue
        s = ln.strip()
        if s.startswith("LnkCap:"):
            lm = _LNK.search(s)
            if lm:
                cur["cap_speed"], cur["cap_width"] = float(lm.group(1)), int(lm.group(3))
        elif s.startswith("LnkSta:"):
            lm = _LNK.search(s)
            if lm:
                cur["sta_speed"], cur["sta_width"] = float(lm.group(1)), int(lm.group(3))
                cur["sta_speed_flag"], cur["sta_width_flag"] = lm.group(2), lm.group(4)
        elif s.startswith("NUMA node:"):
            cur["numa_node"] = to_int(s.split(":", 1)[1])
        elif s.startswith("Kernel driver in use:"):
            cur["driver"] = s.split(":", 1)[1].strip()
        elif s.startswith("Bus: primary="):
            bm = re.search(r"secondary=([0-9a-f]+), subordinate=([0-9a-f]+)", s)
            if bm:
                cur["secondary_bus"] = int(bm.group(1), 16)
                cur["subordinate_bus"] = int(bm.group(2), 16)
    for d in devices:
        d["is_gpu"] = d["vendor_id"] in ("10de", "1002") and d["class"] in GPU_CLASSES
    return devices


# --------------------------------------------------------------------------- collect_env


class CollectEnv(TypedDict, total=False):
    torch_version: str | None
    torch_cuda: str | None
    torch_hip: str | None
    os: str | None
    python_platform: str | None
    cuda_available: str | None
    cuda_runtime: str | None
    nvidia_driver: str | None
    hip_runtime: str | None
    rocm_version: str | None
    vllm_version: str | None
    gpu_models: list[str]
    truncated: str
    kernel: str
    amd_numa: dict[int, int]  # GPU index -> NUMA node
    nvidia_topo: NvidiaTopo


def parse_collect_env(text: str) -> CollectEnv:
    """PyTorch / vLLM `collect_env` output: torch build, versions, GPUs, topology (a field
    the capture lacks is None)."""
    text = dedent_common(clean(text))
    found: dict[str, str | None] = {}
    keys = {
        "PyTorch version": "torch_version",
        "CUDA used to build PyTorch": "torch_cuda",
        "ROCM used to build PyTorch": "torch_hip",
        "OS": "os",
        "Python platform": "python_platform",
        "Is CUDA available": "cuda_available",
        "CUDA runtime version": "cuda_runtime",
        "Nvidia driver version": "nvidia_driver",
        "HIP runtime version": "hip_runtime",
        "ROCM Version": "rocm_version",
        "vLLM Version": "vllm_version",
    }
    g = found.get
    extra: CollectEnv = {}
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        k, sep, v = ln.partition(":")
        if sep and k.strip() in keys:
            v = v.strip()
            found[keys[k.strip()]] = None if v in ("N/A", "Could not collect", "") else v
        if k.strip() == "GPU models and configuration":
            gpus = []
            if v.strip() and v.strip() not in ("Could not collect",):
                gpus.append(v.strip())
            for nxt in lines[i + 1 :]:
                gm = re.match(r"^GPU (\d+): (.+)$", nxt.strip())
                if not gm:
                    break
                gpus.append(gm.group(2).strip())
            else:  # the GPU list runs to the end of the capture
                if len(gpus) > 1 or not text.endswith("\n"):
                    extra["truncated"] = "the capture ends inside the GPU list"
            extra["gpu_models"] = gpus
    platform = g("python_platform")
    if platform:
        km = re.match(r"Linux-(.+?)-(x86_64|aarch64)", platform)
        if km:
            extra["kernel"] = km.group(1)
    if "GPU Topology:" in text:
        topo = text.split("GPU Topology:", 1)[1]
        if "Weight between two GPUs" in topo or "Numa Node" in topo:
            numa = {
                int(m.group(1)): int(m.group(2))
                for m in re.finditer(r"GPU\[(\d+)\]\s*: \(Topology\) Numa Node: (-?\d+)", topo)
            }
            extra["amd_numa"] = numa
        else:
            extra["nvidia_topo"] = parse_nvidia_topo(topo)
    return {
        "torch_version": g("torch_version"), "torch_cuda": g("torch_cuda"),
        "torch_hip": g("torch_hip"), "os": g("os"), "python_platform": platform,
        "cuda_available": g("cuda_available"), "cuda_runtime": g("cuda_runtime"),
        "nvidia_driver": g("nvidia_driver"), "hip_runtime": g("hip_runtime"),
        "rocm_version": g("rocm_version"), "vllm_version": g("vllm_version"), **extra,
    }  # fmt: skip
