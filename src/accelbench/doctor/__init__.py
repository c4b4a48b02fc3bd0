"""`accelbench doctor`: is this machine ready to serve and benchmark LLMs (ROCm or CUDA)?

Public entry points:
- `run_doctor(DoctorInputs(...))` -> `Report` (all checks; captured outputs accepted)
- `quick_summary()` -> dict for run.json (fast: files only, no subprocess)
- `write_manifest()` / `verify_manifest()` for model file integrity

Modules: `inputs` (what to look at), `gather` (facts from the machine or captures),
`checks` (one module per area, judging the facts), `run` (both, and the quick summary).
"""

from accelbench.doctor.checks import evaluate
from accelbench.doctor.gather import gather
from accelbench.doctor.inputs import DoctorInputs
from accelbench.doctor.manifest import verify_manifest, write_manifest
from accelbench.doctor.model import Check, Report, Status
from accelbench.doctor.run import quick_summary, run_doctor

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
