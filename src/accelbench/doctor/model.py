"""The doctor's result types: one `Check` per question asked of the machine.

A check's status is the one status vocabulary (:class:`accelbench.metrics.verdict.Status`):
``n/a`` is "not present / not applicable" (no GPU of that vendor), ``unknown`` "could not
be judged" (the data was missing, cut short or not understood: never a pass, and never
"not present" either). The doctor uses neither ``inconclusive`` nor any suite's words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Required, TypedDict

from accelbench.metrics.verdict import Status

if TYPE_CHECKING:
    from accelbench.doctor.kernel_log import Event
    from accelbench.doctor.parsers import (
        AmdSmi,
        AmdSmiGpu,
        CollectEnv,
        NvidiaSmi,
        NvidiaTopo,
        PciDevice,
        Rocminfo,
        RocmSmi,
    )
    from accelbench.doctor.system import Hugepages, Iommu
    from accelbench.gpu.amdsmi import AmdsmiInventory
    from accelbench.gpu.nvml import NvmlInventory

__all__ = ["STATUSES", "Check", "Facts", "Report", "Status"]

# The statuses a check can have, in the order the summary line counts them.
STATUSES = (Status.PASS, Status.WARN, Status.FAIL, Status.NA, Status.UNKNOWN)


class PciFacts(TypedDict, total=False):
    source: str  # sysfs (root) or lspci (file)
    gpus: list[PciDevice]
    other: list[PciDevice]
    all: list[PciDevice]  # lspci: every function (bridges included)


class KernelLogFacts(TypedDict, total=False):
    source: Required[str]
    events: list[Event]
    lines: int
    driver_banners: list[str]  # NVIDIA module versions the log shows loading
    problem: str  # why there is no log


class TorchInfo(TypedDict, total=False):
    """PyTorch as the doctor saw it: the JSON line of the child probe
    (:func:`accelbench.doctor.runtimes.torch_info`), or read from a collect_env capture
    (``source`` "collect_env"). ``installed`` None: the probe itself failed."""

    installed: Required[bool | None]
    source: str
    version: str | None
    cuda: str | None  # torch.version.cuda
    hip: str | None  # torch.version.hip (ROCm builds)
    available: bool  # torch.cuda.is_available()
    device_count: int | None
    devices: list[str]
    problem: str


class RuntimeNote(TypedDict):
    """How one live runtime answered (no runtime, or a runtime that sees no GPU)."""

    tool: str
    problem: str | None
    missing: bool


class Facts(TypedDict, total=False):
    """What :func:`accelbench.doctor.gather.gather` collected, for the checks to judge
    (from the machine or from captures; a key is absent when its source was not read)."""

    live: Required[bool]
    quick: Required[bool]
    problems: Required[list[str]]
    lost: Required[list[tuple[str, str]]]  # captures cut short: (source, what was lost)
    notes: Required[list[str]]
    # each runtime's GPU list (nvidia-smi, nvml, rocm-smi, amd-smi ...): read alike
    sources: Required[dict[str, Sequence[Mapping[str, Any]]]]
    versions: Required[dict[str, str | None]]  # driver, CUDA, ROCm ... and their evidence
    system_read: bool
    pci: PciFacts
    iommu: Iommu
    hugepages: Hugepages
    numa_nodes: list[int]
    collect_env: CollectEnv
    torch: TorchInfo
    kernel_log: KernelLogFacts
    nvidia_smi: NvidiaSmi
    topo: NvidiaTopo
    nvml: NvmlInventory
    rocm_smi: RocmSmi
    rocminfo: Rocminfo
    amd_smi_static: list[AmdSmiGpu]
    amd_smi_version: AmdSmi
    amdsmi: AmdsmiInventory
    amd_numa: dict[int, int]
    amd_archs: list[str]
    runtimes: dict[str, list[RuntimeNote]]


class CheckJSON(TypedDict):
    id: str
    title: str
    status: str
    summary: str
    evidence: list[str]
    remedy: str
    data: dict[str, Any]  # each check's own numbers (counts, devices, versions ...)


class ReportJSON(TypedDict):
    """``accelbench doctor --json``."""

    ok: bool
    counts: dict[str, int]
    duration_s: float
    inputs: dict[str, str]
    checks: list[CheckJSON]


@dataclass
class Check:
    """One check: what was asked, the verdict, the evidence for it, what to do."""

    id: str
    title: str
    status: Status
    summary: str
    evidence: list[str] = field(default_factory=list)
    remedy: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> CheckJSON:
        return {
            "id": self.id,
            "title": self.title,
            "status": str(self.status),
            "summary": self.summary,
            "evidence": list(self.evidence),
            "remedy": self.remedy,
            "data": dict(self.data),
        }


@dataclass
class Report:
    checks: list[Check]
    inputs: dict[str, str] = field(default_factory=dict)
    duration_s: float = 0.0

    def counts(self) -> dict[str, int]:
        out = {str(s): 0 for s in STATUSES}
        for c in self.checks:
            out[str(c.status)] += 1
        return out

    @property
    def failed(self) -> bool:
        return any(c.status == Status.FAIL for c in self.checks)

    def get(self, check_id: str) -> Check:
        for c in self.checks:
            if c.id == check_id:
                return c
        raise KeyError(check_id)

    def to_dict(self) -> ReportJSON:
        return {
            "ok": not self.failed,
            "counts": self.counts(),
            "duration_s": round(self.duration_s, 3),
            "inputs": self.inputs,
            "checks": [c.to_dict() for c in self.checks],
        }
