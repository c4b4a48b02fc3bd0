"""The monitor's sliding window, kept per device between ticks.

``accelbench monitor`` judges the last ``window_s`` seconds on every tick. Rebuilding that
window from row dicts each second cost 20-30 ms of CPU per tick with 8 GPUs and a 3,600-row
window (benchmarks/telemetry_cost.py). Here each device keeps a
:class:`~accelbench.health.series.DeviceSeries`: a tick appends its rows and drops the
expired ones, and :meth:`RollingWindow.evaluate` runs the same rules as
:func:`accelbench.health.rules.evaluate` on those series, with the baseline grouped once.
The result is identical to ``evaluate(rows in the window, None, baseline)``
(tests/test_health_rules.py replays captures and injected faults through both).
"""

from __future__ import annotations

from accelbench.health.rules import (
    Health,
    HealthConfig,
    baseline_by_device,
    device_label,
    evaluate_series,
    series_missing_signals,
)
from accelbench.health.series import DeviceSeries
from accelbench.telemetry.schema import KIND_GPU, Row, device_key


class RollingWindow:
    """Rows of the last ``window_s`` seconds, per device (see module docstring)."""

    def __init__(self, window_s: float, config: HealthConfig | None = None) -> None:
        self.window_s = window_s
        self.config = config or HealthConfig()
        self.devices: dict[str, DeviceSeries] = {}
        self.baseline: list[Row] = []
        self._base_by_dev: dict[str, Row] = {}
        self._seq = 0

    def __len__(self) -> int:
        """Rows in the window, all devices together."""
        return sum(len(s) for s in self.devices.values())

    def add(self, rows: list[Row], t_ns: int | None = None) -> None:
        """Append one tick's rows (all stamped with the same time), then drop every row
        older than ``window_s`` before that time (``t_ns`` when the tick has no rows, so
        a silent source's last samples age out). The first non-empty tick is the
        baseline of counter deltas."""
        now = rows[0]["t_ns"] if rows else t_ns
        if rows and not self.baseline:
            self.baseline = rows
            self._base_by_dev = baseline_by_device(rows)
        for r in sorted(rows, key=lambda r: r.get("t_ns") or 0):  # as group_by_device does
            key = device_key(r)
            s = self.devices.get(key)
            if s is None:
                s = self.devices[key] = DeviceSeries()
            s.append(r, self._seq)
            self._seq += 1
        if now is None:
            return
        horizon = now - int(self.window_s * 1e9)
        for key in list(self.devices):
            s = self.devices[key]
            s.drop_before(horizon)
            if not len(s):
                del self.devices[key]

    def ordered(self) -> list[DeviceSeries]:
        """Devices in the order their oldest row in the window arrived (the order
        :func:`~accelbench.health.rules.group_by_device` gives the window's rows)."""
        return sorted(self.devices.values(), key=lambda s: s.first_seq)

    def evaluate(self) -> Health:
        return evaluate_series(self.ordered(), self._base_by_dev, self.config)

    def missing_signals(self) -> list[str]:
        """One line per GPU in the window and required signal none of its rows carries."""
        return series_missing_signals(self.ordered())

    def absent(self, rows: list[Row]) -> list[str]:
        """GPUs in the window that are not among ``rows`` (the latest tick)."""
        now = {device_key(r) for r in rows}
        return [
            f"{device_label(s.rows[-1])}: not reported in the latest sample"
            for key, s in self.devices.items()
            if key not in now and s.rows[-1].get("kind") == KIND_GPU
        ]
