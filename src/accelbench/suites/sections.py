"""The suites as the report and the runs store see them, wired together by the CLI:
each suite's report section (its ``view``) and the suite label of a run directory.

The report and the store import no suite (the layers contract,
tests/test_architecture.py): the CLI hands them :data:`SECTIONS` and :func:`suite_of`."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from accelbench.report.sections import SuiteSection
from accelbench.suites.mlperf.document import run_label
from accelbench.suites.mlperf.view import MlperfSection
from accelbench.suites.shadow.view import ShadowSection
from accelbench.suites.stress.document import STRESS_JSON, stress_label
from accelbench.suites.stress.view import StressSection

SECTIONS: tuple[SuiteSection, ...] = (StressSection(), ShadowSection(), MlperfSection())


def suite_of(run_dir: Path, run: Mapping[str, object]) -> tuple[str | None, str | None]:
    """(suite, verdict) of a run directory for ``runs list``: an MLPerf run (run.json's
    ``mlperf`` block) or a stress suite's step (``<stress dir>/runs/<step>/``, beside
    stress.json); (None, None) for a plain run. Never raises: a damaged suite file
    reads as ``stress ?`` and why."""
    ml = run.get("mlperf")
    if isinstance(ml, Mapping):
        scenario = ml.get("scenario")
        return f"mlperf {scenario or '?'}", run_label(ml)
    if run_dir.parent.name == "runs":
        try:
            st = (run_dir.parent.parent / STRESS_JSON).stat()
        except OSError:
            return None, None
        return _stress_label(str(run_dir.parent.parent), st.st_mtime_ns)
    return None, None


@lru_cache(maxsize=256)
def _stress_label(path: str, mtime_ns: int) -> tuple[str, str]:
    """Once per stress directory and version of its stress.json (every step asks)."""
    return stress_label(Path(path))
