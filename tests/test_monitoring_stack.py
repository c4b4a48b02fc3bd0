"""End to end on the real stack: `accelbench monitor --replay` (captures in which ECC errors
rise and the temperature crosses its limit) -> real Prometheus scraping it with the
generated rules -> real Alertmanager -> a webhook receiver in this test; the monitor's
recovery action runs on the same fault. Everything on 127.0.0.1, 1 s intervals, configs in
a temporary directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelbench.monitoring.rules import SEVERITY, AlertSettings, rules_yaml
from conftest import REPO, fixture_file, free_port, wait_http
from monitoring_stack import binary

A10G = fixture_file("telemetry", "nvidia-smi_q_x__a10g__drv515.105.01__dtd-v11.xml")


def _fault_sequence(tmp: Path) -> list[Path]:
    """Fifteen samples of the real A10G capture, then the same GPU with 2 new volatile
    uncorrectable (DRAM) ECC errors and its temperature at 97 C (slowdown: 95 C). The ECC
    alert is an increase() over the counter: Prometheus must have scraped a good sample
    first, which on a loaded CI host can take several seconds after the monitor starts."""
    text = A10G.read_text()
    vol = re.search(r"<volatile>.*?</volatile>", text, re.S)
    assert vol is not None
    bad_vol = vol.group(0).replace(
        "<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>2</dram_uncorrectable>"
    )
    bad = text.replace(vol.group(0), bad_vol).replace(
        "<gpu_temp>17 C</gpu_temp>", "<gpu_temp>97 C</gpu_temp>"
    )
    assert bad.count("<gpu_temp>97 C</gpu_temp>") == 1
    good, fault = tmp / "good.xml", tmp / "fault.xml"
    good.write_text(text)
    fault.write_text(bad)
    return [good] * 15 + [fault]


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []
    handler = type("Hook", (_Hook,), {"received": received})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/alerts", received
    srv.shutdown()
    srv.server_close()


def _wait(what: str, fn: Callable[[], Any], timeout: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def _query(prom: str, expr: str) -> list[dict[str, Any]]:
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        data = json.load(r)
    assert data["status"] == "success", data
    return data["data"]["result"]


def _start(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)


def _prometheus(
    tmp: Path, procs: list[subprocess.Popen], rules: str, scrape_port: int, am_port: int | None
) -> str:
    """Real Prometheus with `rules`, scraping 127.0.0.1:scrape_port every second (and
    sending to Alertmanager on am_port, if given); returns its URL once ready."""
    (tmp / "rules.yml").write_text(rules)
    prom_port = free_port()
    prom_cfg: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp / "rules.yml")],
        "scrape_configs": [
            {
                "job_name": "accelbench",
                "static_configs": [{"targets": [f"127.0.0.1:{scrape_port}"]}],
            }
        ],
    }
    if am_port is not None:
        prom_cfg["alerting"] = {
            "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]
        }
    (tmp / "prom.yml").write_text(yaml.safe_dump(prom_cfg))
    argv = [
        binary("prometheus"), f"--config.file={tmp / 'prom.yml'}",
        f"--storage.tsdb.path={tmp / 'prom-data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
        "--rules.alert.resend-delay=1s",
    ]  # fmt: skip
    procs.append(_start(argv, tmp / "prometheus.log"))
    prom = f"http://127.0.0.1:{prom_port}"
    wait_http(f"{prom}/-/ready", timeout=30)
    return prom


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_replayed_fault_reaches_alertmanager_and_recovery(tmp_path, webhook):
    alertmanager = binary("prometheus-alertmanager")
    hook_url, received = webhook
    procs: list[subprocess.Popen] = []
    try:
        exp_port = free_port()  # the monitor starts last, so Prometheus sees its first sample
        # 1. Alertmanager -> the webhook
        am_port = free_port()
        am_cfg = {
            "route": {
                "receiver": "test",
                "group_by": ["alertname"],
                "group_wait": "1s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [{"name": "test", "webhook_configs": [{"url": hook_url}]}],
        }
        (tmp_path / "am.yml").write_text(yaml.safe_dump(am_cfg))
        procs.append(
            _start(
                [
                    alertmanager,
                    f"--config.file={tmp_path / 'am.yml'}",
                    f"--storage.path={tmp_path / 'am-data'}",
                    f"--web.listen-address=127.0.0.1:{am_port}",
                    "--cluster.listen-address=",
                ],
                tmp_path / "alertmanager.log",
            )
        )
        wait_http(f"http://127.0.0.1:{am_port}/-/ready", timeout=30)

        # 2. Prometheus with the generated rules, scraping the monitor every second
        prom = _prometheus(
            tmp_path, procs, rules_yaml(["accelbench"], AlertSettings(window_s=10, for_s=0)),
            exp_port, am_port,
        )  # fmt: skip
        # 3. accelbench monitor, replaying the captures, with a recovery action on "ecc"
        rec_log = tmp_path / "recovery.jsonl"
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        argv = [sys.executable, "-m", "accelbench", "monitor", "--port", str(exp_port)]
        for p in _fault_sequence(tmp_path):
            argv += ["--replay", str(p)]
        argv += [
            "--interval", "1", "--recover-cmd", f"{sys.executable} -c 'raise SystemExit(3)'",
            "--recover-on", "ecc", "--recover-log", str(rec_log),
        ]  # fmt: skip
        procs.append(_start(argv, tmp_path / "monitor.log", env))
        wait_http(f"http://127.0.0.1:{exp_port}/metrics", timeout=30)

        # PromQL over the HTTP API returns the replayed values
        slow = _wait(
            "slowdown threshold in Prometheus",
            lambda: _query(prom, "accelbench_gpu_temperature_slowdown_celsius"),
        )
        assert float(slow[0]["value"][1]) == 95.0
        assert slow[0]["metric"]["model"] == "NVIDIA A10G"
        width = _query(prom, 'accelbench_gpu_pcie_link_width{which="max"}')
        assert float(width[0]["value"][1]) == 16.0
        ecc = _wait(
            "the ECC counter to rise",
            lambda: [
                r
                for r in _query(prom, 'accelbench_gpu_ecc_errors_total{type="uncorrected"}')
                if float(r["value"][1]) == 2.0
            ],
        )
        assert ecc[0]["metric"]["scope"] == "volatile"

        # the fault fires the rules and Alertmanager delivers them to the webhook
        def delivered() -> set[str]:
            return {
                a["labels"]["alertname"]
                for msg in received
                for a in msg["alerts"]
                if a["status"] == "firing"
            }

        _wait(
            "ECC and temperature alerts at the webhook",
            lambda: {"GPUUncorrectableECCErrors", "GPUTemperatureAtLimit"} <= delivered(),
            timeout=90,
        )
        alerts = {a["labels"]["alertname"]: a for msg in received for a in msg["alerts"]}
        ecc_alert = alerts["GPUUncorrectableECCErrors"]
        assert ecc_alert["labels"]["severity"] == "critical"
        assert ecc_alert["labels"]["uuid"] == "GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94"
        temp = alerts["GPUTemperatureAtLimit"]["annotations"]["summary"]
        assert temp == "NVIDIA A10G GPU 0 gpu temperature 97 C reached its limit"
        # nothing healthy fired: the replay's first samples were below every threshold
        assert "GPUCorrectableECCBurst" not in delivered()

        # the monitor ran the recovery action once (then the cool-down holds it)
        entries = _wait(
            "a recovery log entry",
            lambda: (
                [json.loads(x) for x in rec_log.read_text().splitlines()]
                if rec_log.exists()
                else []
            ),
        )
        assert entries[0]["action"] == "ran"
        assert entries[0]["exit_status"] == 3
        assert "ecc" in entries[0]["rules"]
        assert sum(e["action"] == "ran" for e in entries) == 1
    finally:
        _stop(procs)


def test_a_monitor_that_goes_silent_fires_no_data_in_real_prometheus(tmp_path):
    """Unknown is never healthy: the monitor is scraped, then killed (SIGKILL: no
    goodbye). Prometheus marks its series stale at the next failed scrape, and the
    generated `present_over_time(x[lookback]) unless x` rule fires AccelbenchNoData for
    that instance. While the monitor reports, the rule must stay silent."""
    procs: list[subprocess.Popen] = []
    try:
        exp_port = free_port()
        settings = AlertSettings(window_s=10, for_s=0, no_data_for_s=0, no_data_lookback_s=120)
        prom = _prometheus(tmp_path, procs, rules_yaml(["accelbench"], settings), exp_port, None)
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        good = tmp_path / "good.xml"
        good.write_text(A10G.read_text())
        argv = [sys.executable, "-m", "accelbench", "monitor", "--port", str(exp_port),
                "--replay", str(good), "--interval", "1"]  # fmt: skip
        monitor = _start(argv, tmp_path / "monitor.log", env)
        procs.append(monitor)
        _wait("the monitor's health series in Prometheus",
              lambda: _query(prom, "accelbench_health_status"))  # fmt: skip

        def firing() -> list[dict[str, Any]]:
            url = f"{prom}/api/v1/alerts"
            with urllib.request.urlopen(url, timeout=5) as r:
                alerts = json.load(r)["data"]["alerts"]
            return [a for a in alerts if a["labels"]["alertname"] == "AccelbenchNoData"
                    and a["state"] == "firing"]  # fmt: skip

        time.sleep(3)  # three evaluations while the monitor reports: no alarm
        assert firing() == []
        monitor.kill()
        monitor.wait()
        alert = _wait("AccelbenchNoData firing after the monitor died", firing)[0]
        assert alert["labels"]["instance"] == f"127.0.0.1:{exp_port}"
        assert alert["labels"]["severity"] == SEVERITY["warn"]
        assert alert["labels"]["accelbench_rule"] == "no_data"
        assert alert["annotations"]["summary"] == (
            f"accelbench monitor at 127.0.0.1:{exp_port} stopped reporting: no data, "
            "so health is unknown"
        )
    finally:
        _stop(procs)
