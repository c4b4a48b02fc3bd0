"""Telemetry sampled beside a run shows up in the report, on the run's clock."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from accelbench.report.data import build_report_data
from accelbench.report.html import render_html
from accelbench.telemetry.schema import TELEMETRY_SCHEMA
from synthetic_runs import T0, make_run


def test_report_shows_telemetry_timelines(tmp_path):
    run = make_run(tmp_path / "r", n=40, concurrency=4)
    rows = []
    for i in range(5):
        row = dict.fromkeys(TELEMETRY_SCHEMA.names)
        row.update({"t_ns": T0 + i * 1_000_000_000, "kind": "host", "cpu_util": 0.1 * i,
                    "phase": "measured", "source": "host"})  # fmt: skip
        rows.append(row)
        gpu = dict.fromkeys(TELEMETRY_SCHEMA.names)
        gpu.update({"t_ns": T0 + i * 1_000_000_000, "kind": "gpu", "device_index": 0,
                    "power_w": 300.0 + i, "source": "nvml", "phase": "measured"})  # fmt: skip
        rows.append(gpu)
    pq.write_table(pa.Table.from_pylist(rows, schema=TELEMETRY_SCHEMA), run / "telemetry.parquet")
    data = build_report_data([run])
    tel = data.sets[0].points[0].telemetry
    assert tel is not None
    cpu = tel["host CPU (%)"][0]
    assert cpu.x == [0.0, 1.0, 2.0, 3.0, 4.0] and cpu.y == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert tel["accelerator power (W)"][0].name == "gpu/0"
    html = render_html(data)
    assert "accelerator power (W)" in html and 'id="telemetry"' in html
