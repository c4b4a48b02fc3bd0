"""MLPerf Inference scenarios on MLCommons' real LoadGen, with accelbench as the system
under test (docs/MLPERF.md). ``mlperf_loadgen`` (PyPI ``mlcommons-loadgen``, the extra
``accelbench[mlperf]``) is imported lazily, only by what needs it."""

from __future__ import annotations

from typing import Any

from accelbench.errors import AccelbenchError


def loadgen() -> Any:
    """The ``mlperf_loadgen`` module, or one clear line on how to install it."""
    try:
        import mlperf_loadgen
    except ImportError:
        raise AccelbenchError(
            "accelbench mlperf needs MLCommons LoadGen: pip install 'accelbench[mlperf]' "
            "(PyPI mlcommons-loadgen)"
        ) from None
    return mlperf_loadgen
