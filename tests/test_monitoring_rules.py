"""Generated Prometheus rules: `promtool check rules`, and `promtool test rules` on series
that should fire every alert and on healthy series that should fire none."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.health.rules import HealthConfig
from accelbench.monitoring.rules import (
    FLAVOURS,
    AlertSettings,
    build_rules,
    coverage,
    duration,
    rules_yaml,
)
from monitoring_stack import binary

# Short windows so the unit tests cover minutes, not hours; thresholds stay HealthConfig's.
SETTINGS = AlertSettings(window_s=60, for_s=30, amd_temp_limit_c=100, no_data_for_s=60)

ACC = (
    'vendor="nvidia",model="NVIDIA H100 80GB HBM3",device="0",bus_id="00000000:1B:00.0",'
    'uuid="GPU-1",job="accelbench",instance="127.0.0.1:9464"'
)
# Labels as dcgm-exporter writes them (from the L4 scrape in tests/fixtures/telemetry).
DCGM = (
    'gpu="0",UUID="GPU-c2f76b33-7953-256e-8f33-1343419b1a1c",pci_bus_id="00000000:31:00.0",'
    'device="nvidia0",modelName="NVIDIA L4",Hostname="node1",DCGM_FI_DRIVER_VERSION="580.105.08",'
    'job="dcgm",instance="node1:9400"'
)
AMD = 'gpu_id="0",card_model="MI300X",hostname="node2",job="amd",instance="node2:5000"'
VLLM = 'model_name="m",job="vllm",instance="127.0.0.1:8000"'

# (series, healthy values, faulty values); samples every 15 s, faults start at 240 s and
# counters that must rise inside the 60 s window at the 6 min check rise at 330 s.
SERIES: list[tuple[str, str, str]] = [
    # accelbench's exporter
    (f'accelbench_gpu_temperature_celsius{{sensor="gpu",{ACC}}}', "70x40", "70x15 90x24"),
    (f'accelbench_gpu_temperature_celsius{{sensor="memory",{ACC}}}', "60x40", "60x40"),
    (f"accelbench_gpu_temperature_slowdown_celsius{{{ACC}}}", "87x40", "87x40"),
    (f"accelbench_gpu_temperature_memory_max_celsius{{{ACC}}}", "95x40", "95x40"),
    (f'accelbench_gpu_throttle_seconds_total{{cause="power",{ACC}}}', "0+0.1x40", "0x15 0+7.5x24"),
    (f'accelbench_gpu_throttle_seconds_total{{cause="thermal",{ACC}}}', "0x40", "0x40"),
    (
        f'accelbench_gpu_ecc_errors_total{{type="uncorrected",scope="volatile",{ACC}}}',
        "3x40",
        "0x21 2x18",
    ),
    (
        f'accelbench_gpu_ecc_errors_total{{type="corrected",scope="volatile",{ACC}}}',
        "0+10x40",
        "0x15 0+60x24",
    ),
    (f'accelbench_gpu_remapped_rows_total{{type="uncorrectable",{ACC}}}', "1x40", "0x21 1x18"),
    (f"accelbench_gpu_row_remap_pending{{{ACC}}}", "0x40", "0x15 1x24"),
    (f"accelbench_gpu_row_remap_failure{{{ACC}}}", "0x40", "0x15 1x24"),
    (f'accelbench_gpu_pcie_link_width{{which="current",{ACC}}}', "16x40", "16x15 8x24"),
    (f'accelbench_gpu_pcie_link_width{{which="max",{ACC}}}', "16x40", "16x40"),
    # gen 3 of 4 while idle is normal power saving: must not fire when healthy
    (f'accelbench_gpu_pcie_link_generation{{which="current",{ACC}}}', "3x40", "3x40"),
    (f'accelbench_gpu_pcie_link_generation{{which="max",{ACC}}}', "4x40", "4x40"),
    (f"accelbench_gpu_utilization_ratio{{{ACC}}}", "0.1x40", "0.2x15 0.9x24"),
    (f"accelbench_gpu_pcie_replays_total{{{ACC}}}", "0+10x40", "0x15 0+50x24"),
    (f"accelbench_gpu_power_watts{{{ACC}}}", "690x40", "700x15 800x24"),
    (f"accelbench_gpu_power_limit_watts{{{ACC}}}", "700x40", "700x40"),
    (
        f"accelbench_gpu_memory_used_bytes{{{ACC}}}",
        "10737418240x40",
        "10737418240x15 10737418240+20971520x24",
    ),
    (
        'accelbench_server_process_resident_memory_bytes{job="accelbench",instance="127.0.0.1:9464"}',
        "1000000000+1000x40",
        "1000000000x15 1000000000+20000000x24",
    ),
    (
        'accelbench_health_findings{rule="ecc",severity="fail",job="accelbench",instance="127.0.0.1:9464"}',
        "0x40",
        "0x15 1x24",
    ),
    # the monitor could not judge (e.g. a source stopped answering) from 240 s on
    (
        'accelbench_health_verdict{verdict="unknown",job="accelbench",instance="127.0.0.1:9464"}',
        "0x40",
        "0x15 1x24",
    ),
    ('accelbench_health_status{job="accelbench",instance="127.0.0.1:9464"}', "0x40", "0x15 3x24"),
    # dcgm-exporter
    (f"DCGM_FI_DEV_GPU_TEMP{{{DCGM}}}", "60x40", "60x15 90x24"),
    (f"DCGM_FI_DEV_SLOWDOWN_TEMP{{{DCGM}}}", "88x40", "88x40"),
    (f"DCGM_FI_DEV_POWER_VIOLATION{{{DCGM}}}", "0x40", "0x15 0+7500000x24"),
    (f"DCGM_FI_DEV_THERMAL_VIOLATION{{{DCGM}}}", "0x40", "0x40"),
    (f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{DCGM}}}", "0x40", "0x21 1x18"),
    (f"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{DCGM}}}", "0+5x40", "0x15 0+60x24"),
    (f"DCGM_FI_DEV_RETIRED_DBE{{{DCGM}}}", "2x40", "0x21 1x18"),
    (f"DCGM_FI_DEV_RETIRED_PENDING{{{DCGM}}}", "0x40", "0x15 1x24"),
    (f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{DCGM}}}", "0x40", "0x21 1x18"),
    (f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{DCGM}}}", "0x40", "0x15 1x24"),
    (f"DCGM_FI_DEV_ROW_REMAP_PENDING{{{DCGM}}}", "0x40", "0x15 1x24"),
    (f"DCGM_FI_DEV_PCIE_LINK_WIDTH{{{DCGM}}}", "16x40", "16x15 8x24"),
    (f"DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH{{{DCGM}}}", "16x40", "16x40"),
    (f"DCGM_FI_DEV_PCIE_LINK_GEN{{{DCGM}}}", "4x40", "3x40"),
    (f"DCGM_FI_DEV_PCIE_MAX_LINK_GEN{{{DCGM}}}", "4x40", "4x40"),
    (f"DCGM_FI_DEV_GPU_UTIL{{{DCGM}}}", "95x40", "20x15 90x24"),
    (f"DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{DCGM}}}", "0x40", "0x15 0+50x24"),
    (f"DCGM_FI_DEV_POWER_USAGE{{{DCGM}}}", "70x40", "70x15 80x24"),
    (f"DCGM_FI_DEV_ENFORCED_POWER_LIMIT{{{DCGM}}}", "72x40", "72x40"),
    (f"DCGM_FI_DEV_FB_USED{{{DCGM}}}", "10240x40", "10240x15 10240+20x24"),
    # AMD device-metrics-exporter
    (f"gpu_junction_temperature{{{AMD}}}", "80x40", "80x15 101x24"),
    (f"gpu_violation_ppt_residency_percentage{{{AMD}}}", "1x40", "0x15 50x24"),
    (f"gpu_ecc_uncorrect_total{{{AMD}}}", "0x40", "0x21 1x18"),
    (f"gpu_ecc_correct_total{{{AMD}}}", "7x40", "0x15 0+60x24"),
    (f"pcie_speed{{{AMD}}}", "32x40", "16x40"),
    (f"pcie_max_speed{{{AMD}}}", "32x40", "32x40"),
    (f"gpu_gfx_activity{{{AMD}}}", "99x40", "10x15 90x24"),
    (f"pcie_replay_count{{{AMD}}}", "0+1x40", "0x15 0+50x24"),
    (f"gpu_used_vram{{{AMD}}}", "10240x40", "10240x15 10240+20x24"),
    # vLLM
    (f"vllm:num_requests_waiting{{{VLLM}}}", "3x40", "0x15 50x24"),
    (f"vllm:num_requests_running{{{VLLM}}}", "8x40", "8x40"),
    (
        f'http_requests_total{{handler="/v1/completions",method="POST",status="2xx",{VLLM}}}',
        "0+100x40",
        "0+100x40",
    ),
    (
        f'http_requests_total{{handler="/v1/completions",method="POST",status="5xx",{VLLM}}}',
        "0x40",
        "0x15 0+10x24",
    ),
]


def _alert_names() -> list[str]:
    return [
        r["alert"]
        for g in build_rules(None, SETTINGS)["groups"]
        for r in g["rules"]
        if "alert" in r
    ]


def _promtool_test(tmp_path: Path, column: int, checks: list[dict]) -> subprocess.CompletedProcess:
    rules = build_rules(None, SETTINGS)
    for g in rules["groups"]:
        g["interval"] = "15s"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": [{"series": s[0], "values": s[column]} for s in SERIES],
                "promql_expr_test": checks,
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    return subprocess.run(
        [binary("promtool"), "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_rule_file_passes_promtool_check(tmp_path):
    path = tmp_path / "rules.yml"
    path.write_text(rules_yaml(None, AlertSettings(amd_temp_limit_c=100)))
    res = subprocess.run(
        [binary("promtool"), "check", "rules", str(path)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_every_alert_fires_on_its_fault(tmp_path):
    names = _alert_names()
    # 17 accelbench, 16 dcgm, 9 AMD (with a temperature limit given), 2 engine alerts
    assert len(names) == len(set(names)) == 44
    # every series keeps reporting here: the no-data alerts have their own test below
    names = [n for n in names if not n.endswith("NoData")]
    firing = 'count by (alertname) (ALERTS{alertstate="firing"})'
    res = _promtool_test(
        tmp_path,
        2,
        [
            {"expr": firing, "eval_time": "2m", "exp_samples": []},
            {
                "expr": firing,
                "eval_time": "6m",
                "exp_samples": [{"labels": f'{{alertname="{n}"}}', "value": 1} for n in names],
            },
        ],
    )
    assert res.returncode == 0, res.stdout + res.stderr


NO_DATA = {
    "AccelbenchNoData": ('accelbench_health_status{job="accelbench",instance="127.0.0.1:9464"}',),
    "DCGMNoData": (f"DCGM_FI_DEV_GPU_TEMP{{{DCGM}}}",),
    "AMDNoData": (f"gpu_gfx_activity{{{AMD}}}",),
}


def test_no_data_alerts_fire_when_reporting_stops(tmp_path):
    """Each exporter's series report for 5 min, then stop (a staleness marker, as
    Prometheus writes when a scrape fails); a second GPU keeps reporting throughout. The
    no-data alert fires for the silent one only, after no_data_for_s, and names it."""
    rules = build_rules(None, SETTINGS)
    for g in rules["groups"]:
        g["interval"] = "15s"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    series = []
    for (sel,) in NO_DATA.values():
        series.append({"series": sel, "values": "1x20 stale"})
        alive = sel.replace('instance="', 'instance="alive-')
        series.append({"series": alive, "values": "1x60"})
    firing = 'ALERTS{alertstate="firing",accelbench_rule="no_data"}'
    exp = []
    for name, (sel,) in NO_DATA.items():
        labels = sel[sel.index("{") + 1 : -1]
        exp.append(
            {
                "labels": f'ALERTS{{alertname="{name}",alertstate="firing",'
                f'accelbench_rule="no_data",severity="warning",{labels}}}',
                "value": 1,
            }
        )
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": firing, "eval_time": "5m", "exp_samples": []},
                    # stale at 5m15s: pending for no_data_for_s (60 s), not yet firing
                    {"expr": firing, "eval_time": "6m", "exp_samples": []},
                    {"expr": firing, "eval_time": "7m", "exp_samples": exp},
                    {"expr": firing, "eval_time": "14m", "exp_samples": exp},
                ],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    res = subprocess.run(
        [binary("promtool"), "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_healthy_series_fire_nothing_and_records_normalise(tmp_path):
    checks = [
        {"expr": 'ALERTS{alertstate=~"pending|firing"}', "eval_time": t, "exp_samples": []}
        for t in ("1m", "3m", "6m", "9m")
    ]
    # the recorded series put every exporter on one scale with a common "gpu" label
    checks.append(
        {
            "expr": "sort(accelbench:gpu_temperature_celsius)",
            "eval_time": "5m",
            "exp_samples": [
                {
                    "labels": _rec_labels("accelbench", ACC, 'device="0",gpu="0",sensor="gpu"'),
                    "value": 70,
                },
                {"labels": _rec_labels("dcgm", DCGM, ""), "value": 60},
                {"labels": _rec_labels("amd", AMD, 'gpu="0"'), "value": 80},
            ],
        }
    )
    checks.append(
        {
            "expr": "accelbench:engine_requests_waiting",
            "eval_time": "5m",
            "exp_samples": [
                {
                    "labels": 'accelbench:engine_requests_waiting{engine="vllm",' + VLLM + "}",
                    "value": 3,
                },
            ],
        }
    )
    res = _promtool_test(tmp_path, 1, checks)
    assert res.returncode == 0, res.stdout + res.stderr


def _rec_labels(exporter: str, base: str, extra: str) -> str:
    labels = dict(kv.split("=", 1) for kv in base.split(","))
    if extra:
        labels.update(dict(kv.split("=", 1) for kv in extra.split(",")))
    labels["exporter"] = f'"{exporter}"'
    inner = ",".join(f"{k}={v}" for k, v in labels.items())
    return f"accelbench:gpu_temperature_celsius{{{inner}}}"


def test_thresholds_come_from_health_config():
    cfg = HealthConfig(temp_margin_c=7.0, ecc_correctable_burst=55, throttle_max_fraction=0.2)
    text = rules_yaml(["accelbench"], AlertSettings(health=cfg, window_s=120))
    assert "accelbench_gpu_temperature_slowdown_celsius - 7)" in text
    assert "[2m]) >= 55" not in text  # durations are written in seconds
    assert "[120s]) >= 55" in text
    assert "> 0.2" in text


def test_coverage_names_what_an_exporter_cannot_express():
    cov = coverage(AlertSettings())
    assert cov["accelbench"] == [] and cov["dcgm"] == []
    assert cov["amd"] == ["power", "temperature"]  # no limit metrics in the AMD exporter
    assert coverage(AlertSettings(amd_temp_limit_c=95))["amd"] == ["power"]


def test_bad_settings_and_flavours_are_one_line_errors():
    with pytest.raises(AccelbenchError, match="--flavour nvml"):
        build_rules(["nvml"])
    with pytest.raises(AccelbenchError, match="--window"):
        build_rules(None, AlertSettings(window_s=0))
    with pytest.raises(AccelbenchError, match="--error-rate-max"):
        build_rules(None, AlertSettings(error_rate_max=2))
    with pytest.raises(AccelbenchError, match="--no-data-for"):
        build_rules(None, AlertSettings(no_data_for_s=-1))
    with pytest.raises(AccelbenchError, match="lookback"):
        build_rules(None, AlertSettings(no_data_for_s=600, no_data_lookback_s=300))


@settings(max_examples=60, deadline=None)
@given(
    which=st.sampled_from(["for_s", "no_data_for_s"]),
    x=st.one_of(st.floats(0, 0.002), st.sampled_from([0.0, 0.0004, 0.000999, 0.001, 1.0])),
)
def test_property_a_hold_time_below_a_millisecond_is_refused(which, x):
    """`monitor rules --for 0.0004` was written `for: 0s` (the alert fires at once, the
    value lost): a positive hold time below Prometheus's 1 ms resolution is refused naming
    the option; 0 and 1 ms or more are written."""
    s = AlertSettings(**{which: x})
    name = "--for" if which == "for_s" else "--no-data-for"
    if 0 < x < 0.001:
        with pytest.raises(AccelbenchError, match=rf"^{name} .* below 1 ms"):
            build_rules(None, s)
    else:
        assert build_rules(None, s)


def test_duration_format():
    assert duration(300) == "300s"
    assert duration(0.5) == "500ms"
    assert duration(0) == "0s"
    assert set(FLAVOURS) == {"accelbench", "dcgm", "amd"}


# -- user strings that reach PromQL --------------------------------------------------------
PROM_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"


@settings(max_examples=40, deadline=None)
@given(
    prefix=st.one_of(
        st.from_regex(rf"\A{PROM_NAME[:-1]}{{0,12}}\Z"),
        st.text(min_size=1, max_size=20),
        st.sampled_from(['x"} or vector(1) #', "amd_)", "a b", "amd_\n", "é", "1amd_", "a{b}"]),
    )
)
def test_amd_prefix_is_a_metric_name_or_refused(prefix, tmp_path_factory):
    """--amd-prefix went verbatim into PromQL: now it is a metric-name prefix or refused,
    and an accepted one makes a rule file the real promtool accepts, in which the prefix
    is part of every AMD metric name and never syntax."""
    import re

    s = AlertSettings(amd_temp_limit_c=100, amd_prefix=prefix)
    if not re.fullmatch(PROM_NAME, prefix):
        with pytest.raises(AccelbenchError, match="--amd-prefix"):
            rules_yaml(["amd"], s)
        return
    path = tmp_path_factory.mktemp("prefix") / "rules.yml"
    path.write_text(rules_yaml(["amd"], s))
    res = subprocess.run(
        [binary("promtool"), "check", "rules", str(path)], capture_output=True, text=True
    )
    assert res.returncode == 0, (prefix, res.stdout + res.stderr)
    for g in build_rules(["amd"], s)["groups"]:
        if g["name"].startswith("accelbench-amd"):
            for r in g["rules"]:
                assert re.search(rf"{re.escape(prefix)}(gpu|pcie)_", r["expr"]), r["expr"]


@pytest.mark.parametrize("prefix", ['x"} or vector(1) #', "amd_)", ""])
def test_amd_prefix_on_the_command_line(prefix, tmp_path):
    from test_hostile_inputs import assert_clean, invoke

    out = tmp_path / "r.yml"
    code, text = invoke(["monitor", "rules", "--amd-prefix", prefix, "-o", str(out)], tmp_path)
    if prefix:
        assert_clean(code, text, wrong=True, option="--amd-prefix")
        assert code == 2 and not out.exists(), text
    else:
        assert code == 0 and out.exists(), text
