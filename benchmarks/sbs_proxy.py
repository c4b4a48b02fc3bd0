"""Section 2 of side_by_side.py: not measured yet."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

TODO: str | None = (
    "2. Shadow proxy intrusion (accelbench's proxy against nginx's mirror and haproxy, 64"
    " and 256 streams, identical / 10x slower / dead candidate): TODO, not measured by "
    "this harness yet (shadow_overhead.py measures accelbench's proxy alone)."
)


def run(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    raise NotImplementedError(TODO)
