"""Section 4 of side_by_side.py: not measured yet."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

TODO: str | None = (
    "4. Timing error at scale (TTFT and chunk-gap error against the reference server's "
    "ground truth at 256 and 1,000 streams, --workers 2 and --ray local, beside vLLM's "
    "bench serve at 256): TODO, not measured by this harness yet (timing_fidelity.py "
    "measures accelbench alone)."
)


def run(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    raise NotImplementedError(TODO)
