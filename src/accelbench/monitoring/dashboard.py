"""A Grafana dashboard (JSON model, schemaVersion 39) for accelbench's monitoring rules.

GPU panels read the recorded series of ``accelbench monitor rules`` (``accelbench:gpu_*``,
the same for accelbench's exporter, dcgm-exporter and the AMD exporter, with a common
``gpu`` label); the serving-engine panels read vLLM, SGLang, llama.cpp and TGI metrics
directly, by the names the telemetry parser knows. Variables: the Prometheus data source
and the GPU (multi-select). Built as plain JSON (no runtime dependency); the tests check it
round-trips through the Grafana Foundation SDK's dashboard model unchanged.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypedDict

from accelbench.errors import UsageError
from accelbench.telemetry.parsers import SERVER_METRICS

# The parts of Grafana's dashboard JSON model that this dashboard sets (and only those).


class DataSource(TypedDict):
    type: str
    uid: str


class GridPos(TypedDict):
    h: int
    w: int
    x: int
    y: int


class Target(TypedDict):
    refId: str
    datasource: DataSource
    expr: str
    legendFormat: str


class FieldConfig(TypedDict):
    defaults: dict[str, str]  # unit
    overrides: list[object]  # none


class Panel(TypedDict):
    id: int
    type: str  # timeseries, table
    title: str
    datasource: DataSource
    gridPos: GridPos
    fieldConfig: FieldConfig
    targets: list[Target]


class RowPanel(TypedDict):
    id: int
    type: str  # row
    title: str
    collapsed: bool
    gridPos: GridPos
    panels: list[Panel]  # none: the row is open, its panels follow it


class VariableQuery(TypedDict):
    query: str
    refId: str


class Variable(TypedDict, total=False):
    name: str
    label: str
    type: str  # datasource, query
    query: str | VariableQuery
    datasource: DataSource
    refresh: int
    multi: bool
    includeAll: bool
    current: dict[str, str]
    hide: int
    sort: int


class Dashboard(TypedDict):
    uid: str
    title: str
    tags: list[str]
    timezone: str
    editable: bool
    graphTooltip: int
    schemaVersion: int
    time: dict[str, str]  # from, to
    refresh: str
    templating: dict[str, list[Variable]]  # list
    annotations: dict[str, list[object]]  # list: none
    panels: list[Panel | RowPanel]


_UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
DS: DataSource = {"type": "prometheus", "uid": "${datasource}"}
GPU = 'gpu=~"$gpu"'


def _panel(
    pid: int,
    title: str,
    targets: list[tuple[str, str]],
    unit: str,
    x: int,
    y: int,
    w: int = 12,
    h: int = 8,
    kind: str = "timeseries",
) -> Panel:
    return {
        "id": pid,
        "type": kind,
        "title": title,
        "datasource": DS,
        "gridPos": {"h": h, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def _row(pid: int, title: str, y: int) -> RowPanel:
    return {
        "id": pid,
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
        "panels": [],
    }


def _engine_targets(col: str, rate: str | None = None) -> list[tuple[str, str]]:
    out = []
    for engine, cols in SERVER_METRICS.items():
        for name in cols.get(col, [])[:1]:
            sel = f'{{__name__="{name}"}}'
            expr = (
                f"sum by (instance) (rate({sel}[{rate}]))" if rate else f"sum by (instance) ({sel})"
            )
            out.append((expr, f"{engine} {{{{instance}}}}"))
    return out


def build_dashboard(
    title: str = "accelbench: accelerators and serving", uid: str = "accelbench-monitor"
) -> Dashboard:
    """The dashboard as a dict (Grafana's JSON model). ``uid`` is what Grafana allows
    (1-40 of letters, digits, '-', '_'); ``title`` 1-200 printable characters (JSON
    escapes it)."""
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        raise UsageError(f"--uid must be 1-40 letters, digits, '-' or '_' (got {uid!r})")
    if not title.strip() or len(title) > 200 or not title.isprintable():
        raise UsageError(f"--title must be 1-200 printable characters (got {title!r})")
    leg = "{{instance}} GPU {{gpu}}"
    panels: list[Panel | RowPanel] = [
        _row(1, "Accelerators", 0),
        _panel(2, "Temperature", [(f"accelbench:gpu_temperature_celsius{{{GPU}}}", leg)],
               "celsius", 0, 1),
        _panel(3, "Utilisation", [(f"accelbench:gpu_utilization_ratio{{{GPU}}}", leg)],
               "percentunit", 12, 1),
        _panel(4, "Memory used", [(f"accelbench:gpu_memory_used_bytes{{{GPU}}}", leg)],
               "bytes", 0, 9),
        _panel(5, "Power", [(f"accelbench:gpu_power_watts{{{GPU}}}", leg)], "watt", 12, 9),
        _panel(6, "Clocks held down (throttle ratio)",
               [(f"accelbench:gpu_throttle:ratio{{{GPU}}}", leg)], "percentunit", 0, 17),
        _panel(7, "New uncorrectable ECC errors (window)",
               [(f"accelbench:gpu_ecc_uncorrected:increase{{{GPU}}}", leg)], "short", 12, 17),
        _panel(8, "Firing accelbench alerts",
               [('sum by (alertname, severity, instance) (ALERTS{alertstate="firing", '
                 'accelbench_rule!=""})', "{{alertname}} {{instance}} ({{severity}})")],
               "short", 0, 25, w=24, h=6, kind="table"),
        _row(9, "Serving engine (vLLM, SGLang, llama.cpp, TGI)", 31),
        _panel(10, "Requests waiting", _engine_targets("srv_requests_waiting"), "short", 0, 32),
        _panel(11, "Requests running", _engine_targets("srv_requests_running"), "short", 12, 32),
        _panel(12, "Generated tokens/s", _engine_targets("srv_generation_tokens_total", "1m"),
               "short", 0, 40),
        _panel(13, "Prompt tokens/s", _engine_targets("srv_prompt_tokens_total", "1m"),
               "short", 12, 40),
        _panel(14, "KV-cache usage", _engine_targets("srv_kv_cache_usage"), "percentunit",
               0, 48, w=24),
    ]  # fmt: skip
    variables: list[Variable] = [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        },
        {
            "name": "gpu",
            "label": "GPU",
            "type": "query",
            "datasource": DS,
            "query": {
                "query": "label_values(accelbench:gpu_utilization_ratio, gpu)",
                "refId": "gpu",
            },
            "refresh": 2,
            "multi": True,
            "includeAll": True,
            "current": {},
            "hide": 0,
            "sort": 3,
        },
    ]
    return {
        "uid": uid,
        "title": title,
        "tags": ["accelbench", "gpu", "llm-serving"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": variables},
        "annotations": {"list": []},
        "panels": panels,
    }


def dashboard_json(**kw: Any) -> str:
    return json.dumps(build_dashboard(**kw), indent=2) + "\n"
