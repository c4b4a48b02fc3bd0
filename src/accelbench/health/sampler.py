"""The sampler a benchmark run uses: telemetry beside the run, judged by the health rules
when it stops (``result["health"]``). The glue lives here, above telemetry, so that
telemetry never imports health."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbench.health.rules import Health, HealthConfig, evaluate, mark_unknown, missing_signals
from accelbench.telemetry.sampler import TelemetrySampler
from accelbench.telemetry.schema import Row


class HealthSampler(TelemetrySampler):
    """A :class:`TelemetrySampler` whose result carries the health verdict of the run.

    Unknown is never healthy, as in ``accelbench health`` and the monitor: the verdict is
    ``unknown`` (unless a rule failed) when nothing was sampled, a source lost samples
    during the run, or a GPU reports no temperature or memory-error counters."""

    def __init__(
        self, run_dir: Path, *, health_config: HealthConfig | None = None, **kwargs: Any
    ) -> None:
        config = health_config or HealthConfig()

        def judge(
            rows: list[Row],
            window: tuple[int, int] | None,
            baseline: list[Row] | None,
        ) -> Health:
            unknown = [] if rows else ["no samples: nothing was measured"]
            unknown += [
                f"source {name} lost {e['count']} sample(s) (last: {e['last']})"
                for name, e in sorted(self.errors.items())
                if e.get("count")
            ]
            unknown += missing_signals(rows)
            return mark_unknown(evaluate(rows, window, baseline, config), unknown)

        super().__init__(run_dir, judge=judge, **kwargs)
