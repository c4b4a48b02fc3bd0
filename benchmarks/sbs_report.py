"""Section 5 of side_by_side.py: not measured yet."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

TODO: str | None = (
    "5. Report and analysis scale (a 13-million-request soak into verdicts and a report, "
    "peak memory and time, against GuideLLM's and AIPerf's report step): TODO, not "
    "measured by this harness yet (report_1m.py measures accelbench alone)."
)


def run(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    raise NotImplementedError(TODO)
