"""Import a module of benchmarks/ (side_by_side.py's sections) into a test without
leaving its side effects behind: benchmarks/ taken off sys.path again, and PYTHONPATH
(which sbs_common points at this tree for the tools it starts) as it was."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def import_benchmark(name: str) -> ModuleType:
    saved_env, saved_path = os.environ.get("PYTHONPATH"), list(sys.path)
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path[:] = saved_path
        if saved_env is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_env
