"""Vendor command-line tools, for machines with the tools but not the Python libraries."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable

from accelbench import lifetime
from accelbench.telemetry.parsers import (
    parse_amd_smi_json,
    parse_nvidia_smi_xml,
    parse_rocm_smi_json,
)
from accelbench.telemetry.schema import Row
from accelbench.telemetry.sources.base import Source


class SmiCommandSource(Source):
    """Runs ``nvidia-smi -q -x``, ``amd-smi metric --json`` or ``rocm-smi -a --json``."""

    COMMANDS: dict[str, tuple[list[str], Callable[..., list[Row]]]] = {
        "nvidia-smi": (["nvidia-smi", "-q", "-x"], parse_nvidia_smi_xml),
        "amd-smi": (["amd-smi", "metric", "--json"], parse_amd_smi_json),
        "rocm-smi": (["rocm-smi", "-a", "--json"], parse_rocm_smi_json),
    }

    def __init__(self, tool: str, timeout_s: float = 10.0) -> None:
        self.name = tool
        self.argv, self.parser = self.COMMANDS[tool]
        self.timeout_s = timeout_s
        self._lost: list[str] = []

    def _run(self) -> str:
        out = lifetime.run(self.argv, timeout_s=self.timeout_s)  # ends when accelbench ends
        if out.returncode != 0:
            raise subprocess.CalledProcessError(out.returncode, self.argv, out.stdout, out.stderr)
        return out.stdout

    def probe(self) -> str | None:
        if shutil.which(self.argv[0]) is None:
            return f"{self.argv[0]} not on PATH"
        try:
            rows = self.parser(self._run())
        except Exception as exc:
            return f"{' '.join(self.argv)} failed ({type(exc).__name__}: {exc})"
        if not rows:
            return f"{' '.join(self.argv)} listed no GPU"
        return None

    def sample(self, t_ns: int) -> list[Row]:
        lost: list[str] = []  # a reading that is not a number or not plausible
        rows = self.parser(self._run(), t_ns=t_ns, lost=lost)
        self._lost = [f"{self.name}: {x}" for x in lost]
        for r in rows:
            r["wall_ns"] = time.time_ns()
            r["source"] = self.name
        return rows

    def lost(self) -> list[str]:
        return list(self._lost)
