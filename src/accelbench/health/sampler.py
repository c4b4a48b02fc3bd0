"""The sampler a benchmark run uses: telemetry beside the run, judged by the health rules
when it stops (``result["health"]``). The glue lives here, above telemetry, so that
telemetry never imports health."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from accelbench.health.rules import HealthConfig, evaluate
from accelbench.telemetry.sampler import TelemetrySampler


class HealthSampler(TelemetrySampler):
    """A :class:`TelemetrySampler` whose result carries the health verdict of the run."""

    def __init__(
        self, run_dir: Path, *, health_config: HealthConfig | None = None, **kwargs: Any
    ) -> None:
        judge = partial(evaluate, config=health_config or HealthConfig())
        super().__init__(run_dir, judge=judge, **kwargs)
