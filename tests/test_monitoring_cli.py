"""`accelbench monitor rules` / `monitor dashboard` and the replay source; the dashboard
JSON is checked against the Grafana Foundation SDK's models (it must round-trip)."""

from __future__ import annotations

import json
import re
import signal
import subprocess

import pytest
import typer
import yaml
from typer.testing import CliRunner

from accelbench.cli.monitor import register
from accelbench.errors import AccelbenchError
from accelbench.monitoring.dashboard import build_dashboard
from accelbench.monitoring.replay import ReplaySource
from conftest import fixture_file
from monitoring_stack import binary

L4 = fixture_file("telemetry", "dcgm-exporter_metrics__l4__drv580.105.08__default-counters.prom")
runner = CliRunner()


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()

    @a.callback()
    def _root() -> None:
        pass

    register(a)
    return a


def test_rules_command_writes_a_file_promtool_accepts(app, tmp_path):
    out = tmp_path / "r.yml"
    res = runner.invoke(
        app, ["monitor", "rules", "--out", str(out), "--flavour", "dcgm", "--window", "120"]
    )
    assert res.exit_code == 0, res.output
    rules = yaml.safe_load(out.read_text())
    names = [g["name"] for g in rules["groups"]]
    assert names == [
        "accelbench-dcgm-records",
        "accelbench-dcgm-alerts",
        "accelbench-engine-records",
        "accelbench-engine-alerts",
    ]
    chk = subprocess.run([binary("promtool"), "check", "rules", str(out)], capture_output=True)
    assert chk.returncode == 0, chk.stdout


def test_rules_command_bad_flavour_is_an_error(app):
    res = runner.invoke(app, ["monitor", "rules", "--flavour", "nvml"])
    assert isinstance(res.exception, AccelbenchError)


def test_dashboard_round_trips_through_the_grafana_sdk(app, tmp_path):
    import grafana_foundation_sdk as sdk  # in the [test] extra: missing is a failure
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import prometheus
    from grafana_foundation_sdk.models.dashboard import Dashboard

    assert sdk
    out = tmp_path / "d.json"
    res = runner.invoke(app, ["monitor", "dashboard", "--out", str(out), "--uid", "x1"])
    assert res.exit_code == 0, res.output
    d = json.loads(out.read_text())
    back = json.loads(JSONEncoder().encode(Dashboard.from_json(d)))

    def same(a, b, path="") -> None:  # every field we write is one the SDK model knows
        if isinstance(a, dict):
            for k, v in a.items():
                if k == "targets":  # typed by the data source plugin: checked below
                    continue
                assert k in b, f"{path}/{k} is not in Grafana's dashboard schema"
                same(v, b[k], f"{path}/{k}")
        elif isinstance(a, list):
            assert len(a) == len(b), path
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                same(x, y, f"{path}[{i}]")
        else:
            assert a == b, path

    same(d, back)
    targets = [t for p in d["panels"] for t in p.get("targets", [])]
    for t in targets:
        assert json.loads(JSONEncoder().encode(prometheus.Dataquery.from_json(t))) == t
    assert d["uid"] == "x1"
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["gpu"]["multi"] is True
    exprs = " ".join(t["expr"] for t in targets)
    for name in ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_processing",
                 "llamacpp:tokens_predicted_total", "accelbench:gpu_temperature_celsius"):  # fmt: skip
        assert name in exprs


def test_dashboard_gpu_panels_use_recorded_series_the_rules_define():
    from accelbench.monitoring.rules import build_rules

    recorded = {r["record"] for g in build_rules()["groups"] for r in g["rules"] if "record" in r}
    used = {
        t["expr"].split("{")[0]
        for p in build_dashboard()["panels"]
        for t in p.get("targets", [])
        if t["expr"].startswith("accelbench:")
    }
    assert used and used <= recorded


def test_replay_source_steps_through_files_then_holds_the_last(tmp_path):
    text = L4.read_text()
    hot = tmp_path / "hot.prom"
    hot_text = re.sub(r"(DCGM_FI_DEV_GPU_TEMP\{[^}]*\}) 31\b", r"\1 97", text)
    assert hot_text != text
    hot.write_text(hot_text)
    src = ReplaySource([L4, L4, hot])
    assert src.probe() is None
    temps = [src.sample(i)[0]["temp_gpu_c"] for i in range(5)]
    assert temps == [31.0, 31.0, 97.0, 97.0, 97.0]
    assert [src.sample(9)[0]["t_ns"]] == [9]


def test_replay_source_reports_unreadable_files(tmp_path):
    bad = tmp_path / "x.txt"
    bad.write_text("hello\n")
    reason = ReplaySource([bad]).probe()
    assert reason is not None and str(bad) in reason
    with pytest.raises(AccelbenchError, match="--replay"):
        ReplaySource([])


def test_monitor_replay_bad_file_is_a_one_line_error(app, tmp_path):
    bad = tmp_path / "x.txt"
    bad.write_text("hello\n")
    res = runner.invoke(app, ["monitor", "--replay", str(bad), "--duration", "0"])
    assert isinstance(res.exception, AccelbenchError)
    assert "--replay" in str(res.exception)


CSV = fixture_file("telemetry", "nvidia-smi_query-gpu_csv__h100-80gb-hbm3__drv590.48.01__idle.csv")


TICK = ["--duration", "0.3", "--interval", "0.1"]  # a tick or more (--duration 0: none)


def _short_csv(tmp_path):
    """The H100 capture with its row cut short by its last field (a line end kept)."""
    header, row = CSV.read_text().splitlines()[:2]
    short = tmp_path / "short.csv"
    short.write_text(f"{header}\n{row.rsplit(',', 1)[0]}\n")
    return short


def test_replay_reads_captures_as_health_file_does(tmp_path):
    """What a replayed capture lost is the monitor's `data lost` reason, from the code
    `health --file` judges with: the verdict is unknown, never a clean one."""
    from accelbench.health.check import check_file
    from accelbench.health.monitor import Monitor

    short = _short_csv(tmp_path)
    src = ReplaySource([CSV, short])
    assert src.probe() is None
    lost = []
    for t in range(3):  # the cut file is the second sample, then repeats
        src.sample(t)
        lost.append(src.lost())
    health = check_file(short)
    cut = [f"{short}: {x}" for x in health["lost"]]
    assert cut and lost == [[], cut, cut]
    mon = Monitor([ReplaySource([short])], interval_s=0.001, window_s=0)
    got = mon.tick()
    assert health["health"]["verdict"] == got["verdict"] == "unknown"
    assert f"data lost: {short}: {health['lost'][0]}" in got["unknown"]
    assert "data lost: " + health["lost"][0] in health["health"]["unknown"]


def test_monitor_replay_prints_what_a_capture_lost_and_its_notes(app, tmp_path):
    short = _short_csv(tmp_path)
    res = runner.invoke(app, ["monitor", "--replay", str(short), "--no-exporter", *TICK])
    assert res.exit_code == 0, res.output
    assert "verdict None -> unknown" in res.output
    assert f"[unknown] data lost: {short}: row 1 has " in res.output
    header, row = CSV.read_text().splitlines()[:2]
    warned = tmp_path / "warned.csv"  # nvidia-smi's warning between header and row
    warned.write_text(f"{header}\nWARNING: infoROM is corrupted at gpu 0000:19:00.0\n{row}\n")
    res = runner.invoke(app, ["monitor", "--replay", str(warned), "--no-exporter", *TICK])
    assert f"note: {warned}: skipped 1 line(s) between the CSV rows" in res.output, res.output
    assert "data lost" not in res.output


def test_monitor_rejects_bad_recovery_options(app):
    res = runner.invoke(
        app, ["monitor", "--no-exporter", "--recover-cmd", "true", "--recover-on", "nope"]
    )
    assert isinstance(res.exception, AccelbenchError)


# -- hostile numbers: one line, exit 2, before any source is opened or port is taken -----
@pytest.mark.parametrize(
    "args",
    [
        ["monitor", "--interval", "inf"],
        ["monitor", "--interval", "1e308"],
        ["monitor", "--window", "nan"],
        ["monitor", "--window", "inf"],
        ["monitor", "--window", " -1"],
        ["monitor", "--duration", "inf"],
        ["monitor", "--duration", "nan"],
        ["monitor", "--duration", " -1"],
        ["monitor", "rules", "--window", "inf"],
        ["monitor", "rules", "--for", "nan"],
        ["monitor", "rules", "--for", "1e308"],
        ["monitor", "rules", "--temp-margin", "nan"],
        ["monitor", "rules", "--queue-max", "inf"],
        ["monitor", "rules", "--amd-temp-limit", "nan"],
        ["health", "--source", "host", "--duration", "inf"],
        ["health", "--source", "host", "--interval", "1e308"],
        ["health", "--file", str(L4), "--temp-margin", "nan"],
    ],
)
def test_bad_numbers_are_one_line_exit_2(tmp_path, args):
    from test_hostile_inputs import assert_clean, invoke

    if args[0] == "monitor" and args[1] != "rules":
        args = [*args, "--replay", str(L4), "--no-exporter"]
    code, text = invoke(args, tmp_path)
    assert_clean(code, text, wrong=True, option=args[-2] if args[0] == "health" else None)
    assert code == 2, text


# -- an option the command line would not use is refused, never silently ignored --------
# (docs/LIMITS.md "Suites"); each typed at its default value too, where it has one
MON = ["monitor", "--replay", str(L4), "--no-exporter", "--duration", "0"]
MON_LIVE = ["monitor", "--no-exporter", "--duration", "0"]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        # health: a file is parsed, live sources are not sampled
        (["health", "--file", str(L4), "--source", "nvml"], "--source"),
        (["health", "--file", str(L4), "--server-url", "http://127.0.0.1:9"], "--server-url"),
        (["health", "--file", str(L4), "--pid", "1"], "--pid"),
        (["health", "--file", str(L4), "--duration", "60"], "--duration"),
        (["health", "--file", str(L4), "--duration", "3"], "--duration"),  # the default
        (["health", "--file", str(L4), "--interval", "5"], "--interval"),
        (["health", "--file", str(L4), "--interval", "1"], "--interval"),  # the default
        (["health", "--duration", "0", "--format", "nvidia-smi-xml"], "--format"),
        (["health", "--duration", "0", "--source", "host", "--server-url", "http://127.0.0.1:9"],
         "--server-url"),  # no server source reads it
        (["health", "--duration", "0", "--source", "server", "--pid", "1"], "--pid"),
        # monitor: the group's options before a subcommand
        (["monitor", "--window", "10", "rules"], "--window"),
        (["monitor", "--window", "300", "rules"], "--window"),  # the default
        (["monitor", "--interval", "1", "dashboard"], "--interval"),
        (["monitor", "--no-exporter", "rules"], "--no-exporter"),
        # recovery options without --recover-cmd
        (MON + ["--recover-on", "any"], "--recover-on"),
        (MON + ["--recover-on", "ecc"], "--recover-on"),  # the default
        (MON + ["--recover-severity", "warn"], "--recover-severity"),
        (MON + ["--recover-severity", "fail"], "--recover-severity"),  # the default
        (MON + ["--recover-cooldown", "1"], "--recover-cooldown"),
        (MON + ["--recover-cooldown", "600"], "--recover-cooldown"),  # the default
        (MON + ["--recover-max-per-hour", "50"], "--recover-max-per-hour"),
        (MON + ["--recover-max-per-hour", "3"], "--recover-max-per-hour"),  # the default
        (MON + ["--recover-dry-run"], "--recover-dry-run"),
        (MON + ["--recover-log", "r.jsonl"], "--recover-log"),
        # --replay-format without --replay
        (MON_LIVE + ["--source", "host", "--replay-format", "dcgm"], "--replay-format"),
        # live-source options with --replay and no --source (or no source that reads them)
        (MON + ["--server-url", "http://127.0.0.1:9"], "--server-url"),
        (MON + ["--pid", "1"], "--pid"),
        (MON + ["--source", "host", "--server-url", "http://127.0.0.1:9"], "--server-url"),
        (MON + ["--source", "server", "--pid", "1"], "--pid"),
        (MON_LIVE + ["--source", "host", "--server-url", "http://127.0.0.1:9"], "--server-url"),
        # exporter options with --no-exporter
        (MON + ["--port", "1", "--host", "x"], "--port"),  # the first one named
        (MON + ["--port", "1"], "--port"),
        (MON + ["--port", "9464"], "--port"),  # the default
        (MON + ["--host", "127.0.0.1"], "--host"),  # the default
        # monitor rules: the AMD options without the amd flavour
        (["monitor", "rules", "--flavour", "dcgm", "--amd-prefix", "foo_"], "--amd-prefix"),
        (["monitor", "rules", "--flavour", "dcgm", "--amd-prefix", ""], "--amd-prefix"),
        (["monitor", "rules", "--flavour", "accelbench,dcgm", "--amd-temp-limit", "90"],
         "--amd-temp-limit"),
        # amd alone: the margin is used only against --amd-temp-limit
        (["monitor", "rules", "--flavour", "amd", "--temp-margin", "3"], "--temp-margin"),
        (["monitor", "rules", "--flavour", "amd", "--temp-margin", "5"], "--temp-margin"),
    ],
)  # fmt: skip
def test_unused_option_is_refused(tmp_path, args, option):
    from cli_inprocess import run_cli

    code, out, err, _ = run_cli(args, tmp_path)
    lines = err.strip("\n").splitlines()
    assert code == 2, (args, out, err)
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert option in lines[0], lines[0]
    assert out == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["health", "--file", str(L4), "--format", "dcgm", "--temp-margin", "5", "--json"],
        ["health", "--duration", "0.2", "--source", "host", "--pid", "1", "--interval", "0.1"],
        ["health", "--duration", "0", "--source", "host,server", "--server-url",
         "http://127.0.0.1:9", "--pid", "1"],
        MON + ["--replay-format", "dcgm", "--source", "host", "--pid", "1"],
        MON + ["--recover-cmd", "true", "--recover-on", "any", "--recover-severity", "warn",
               "--recover-cooldown", "1", "--recover-max-per-hour", "50", "--recover-dry-run"],
        ["monitor", "--replay", str(L4), "--port", "0", "--host", "127.0.0.1", "--duration", "0"],
        ["monitor", "rules", "--window", "10"],
        ["monitor", "rules", "--flavour", "amd", "--amd-temp-limit", "90", "--temp-margin", "3",
         "--amd-prefix", "amd_"],
        ["monitor", "rules", "--flavour", "dcgm,amd", "--temp-margin", "3"],
        ["monitor", "rules", "--temp-margin", "3", "--amd-prefix", "amd_"],
    ],
)  # fmt: skip
def test_used_options_are_accepted(tmp_path, args):
    from cli_inprocess import run_cli

    code, out, err, _ = run_cli(args, tmp_path)
    assert code == 0 or (args[0] == "health" and "error:" not in err), (args, out, err)
    assert "error:" not in err, err


def test_monitor_rules_window_after_the_subcommand_is_used(tmp_path):
    from cli_inprocess import run_cli

    code, out, _, _ = run_cli(["monitor", "rules", "--window", "10"], tmp_path)
    assert code == 0 and "window 10s" in out


@pytest.mark.parametrize(
    ("sig", "second"),
    [(signal.SIGINT, None), (signal.SIGTERM, 0.02), (signal.SIGHUP, 0.05), (signal.SIGINT, 0.1),
     (signal.SIGTERM, 0.2), (signal.SIGINT, 0.3)],
)  # fmt: skip
def test_a_stop_and_a_second_one_while_the_monitor_stops_exit_0(tmp_path, sig, second):
    """Ctrl-C, SIGTERM and SIGHUP are the monitor's normal way out (exit 0). A second one
    while it stops (the exporter's shutdown, the sources closed) used to raise
    KeyboardInterrupt there: exit 130, the stop cut short."""
    import os
    import sys
    import time

    p = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "monitor", "--replay", str(_short_csv(tmp_path)),
         "--port", "0", "--interval", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "120"},
    )  # fmt: skip
    assert p.stdout is not None
    seen = []
    for line in p.stdout:  # the exporter is up, then the first tick's verdict
        seen.append(line)
        if "verdict" in line:
            break
    assert any("serving Prometheus metrics" in x for x in seen), seen
    t0 = time.monotonic()
    p.send_signal(sig)
    if second is not None:
        time.sleep(second)
        p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    assert "Traceback" not in err and "interrupted" not in err, err
    assert time.monotonic() - t0 < 5
