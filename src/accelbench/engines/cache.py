"""The one folder where engine builds, virtualenvs and models are kept."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where builds and models are kept: $ACCELBENCH_CACHE or ~/.cache/accelbench."""
    root = os.environ.get("ACCELBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "accelbench"
    )
    p = Path(root)
    p.mkdir(parents=True, exist_ok=True)
    return p
