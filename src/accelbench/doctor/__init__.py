"""`accelbench doctor`: is this machine ready to serve and benchmark LLMs (ROCm or CUDA)?

Public entry points:
- `run_doctor(DoctorInputs(...))` -> `Report` (all checks; captured outputs accepted)
- `quick_summary()` -> dict for run.json (fast: files only, no subprocess)
- `write_manifest()` / `verify_manifest()` for model file integrity
"""

from accelbench.doctor.checks import DoctorInputs, evaluate, gather, quick_summary, run_doctor
from accelbench.doctor.manifest import verify_manifest, write_manifest
from accelbench.doctor.model import Check, Report, Status

__all__ = [
    "Check",
    "DoctorInputs",
    "Report",
    "Status",
    "evaluate",
    "gather",
    "quick_summary",
    "run_doctor",
    "verify_manifest",
    "write_manifest",
]
