"""Finding the real Prometheus tools for the monitoring tests.

They come from Debian's ``prometheus`` and ``prometheus-alertmanager`` packages
(scripts/test.sh installs them). A missing binary fails the test; only
ACCELBENCH_NO_PROMETHEUS=<reason> turns that into a skip, with the reason printed.
"""

from __future__ import annotations

import os
import shutil

import pytest

OPT_OUT = "ACCELBENCH_NO_PROMETHEUS"


def binary(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    reason = os.environ.get(OPT_OUT, "").strip()
    msg = (
        f"{name} not found: install Debian's prometheus and prometheus-alertmanager "
        f"(scripts/test.sh does when run as root)"
    )
    if reason:
        pytest.skip(f"{msg}; SKIPPED BECAUSE {OPT_OUT}={reason!r}")
    pytest.fail(f"{msg}, or set {OPT_OUT}=<reason> to skip these tests")
    raise AssertionError  # unreachable; pytest.fail raises
