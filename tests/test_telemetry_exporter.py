"""The Prometheus exporter scraped over loopback and parsed back with prometheus_client's
parser; the monitor's alerting (command without a shell, webhook) on state changes."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from accelbench.health.monitor import Monitor, post_webhook, run_alert_command
from accelbench.telemetry.exporter import Exporter
from accelbench.telemetry.parsers import parse_dcgm_prometheus, parse_server_metrics
from accelbench.telemetry.schema import new_row
from accelbench.telemetry.sources import Source
from conftest import fixture_file
from raw_http import RawHttpServer

L4 = fixture_file("telemetry", "dcgm-exporter_metrics__l4__drv580.105.08__default-counters.prom")


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def value(samples, name, **labels):
    hits = [v for lab, v in samples[name] if all(lab.get(k) == x for k, x in labels.items())]
    assert len(hits) == 1, (name, labels, samples.get(name))
    return hits[0]


def test_exporter_scraped_over_loopback():
    rows = parse_dcgm_prometheus(L4.read_text(), t_ns=1)
    rows.append(
        new_row(
            t_ns=1,
            kind="host",
            cpu_util=0.25,
            host_mem_used_bytes=2 * 1024**3,
            host_mem_total_bytes=8 * 1024**3,
            proc_rss_bytes=123456789,
        )
    )
    rows += parse_server_metrics(
        "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 77\n"
        "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 3\n",
        t_ns=1,
    )
    health = {
        "verdict": "warn",
        "findings": [{"rule": "pcie", "severity": "warn", "device": "x", "message": "m"}],
    }
    exp = Exporter(port=0)  # default host: loopback
    port = exp.start()
    try:
        assert exp.host == "127.0.0.1"
        assert exp._server.server_address[0] == "127.0.0.1"
        exp.update(rows, health)
        s = scrape(port)
    finally:
        exp.stop()
    names = set(s)
    assert all(n.startswith("accelbench_") for n in names)
    gpu = {"model": "NVIDIA L4", "bus_id": "0000:31:00.0", "vendor": "nvidia", "device": "0"}
    assert value(s, "accelbench_gpu_power_watts", **gpu) == pytest.approx(16.365)
    assert value(s, "accelbench_gpu_energy_joules_total", **gpu) == pytest.approx(4742.776)
    assert value(s, "accelbench_gpu_temperature_celsius", sensor="gpu") == 31.0
    assert value(s, "accelbench_gpu_clock_hertz", clock="sm") == 210e6
    assert value(s, "accelbench_gpu_memory_total_bytes") == 23033 * 1024**2
    assert value(s, "accelbench_gpu_pcie_replays_total") == 0.0
    assert value(s, "accelbench_host_cpu_utilization_ratio") == 0.25
    assert value(s, "accelbench_server_process_resident_memory_bytes") == 123456789
    assert value(s, "accelbench_server_generation_tokens_total", engine="llamacpp") == 77
    assert value(s, "accelbench_server_requests_running", engine="llamacpp") == 3
    assert value(s, "accelbench_health_status") == 1.0
    assert value(s, "accelbench_health_findings", rule="pcie", severity="warn") == 1.0
    # columns the source did not give are absent, not zero
    assert "accelbench_gpu_power_limit_watts" not in names


def test_exporter_before_any_sample_serves_nothing_but_is_up():
    exp = Exporter(port=0)
    port = exp.start()
    try:
        assert scrape(port) == {}
    finally:
        exp.stop()


# ---------------------------------------------------------------------------- monitor


class ScriptedSource(Source):
    """A source that replays prepared rows (the GPU a CI machine lacks)."""

    name = "scripted"

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = script
        self.i = 0

    def probe(self) -> str | None:
        return None

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        kw = self.script[min(self.i, len(self.script) - 1)]
        self.i += 1
        return [new_row(t_ns=t_ns, kind="gpu", vendor="nvidia", uuid="GPU-x", device_index=0, **kw)]


OK = {"temp_gpu_c": 60.0, "temp_slowdown_c": 95.0, "ecc_uncorrected_volatile": 0}
HOT = {"temp_gpu_c": 96.0, "temp_slowdown_c": 95.0, "ecc_uncorrected_volatile": 0}


class Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hook.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook():
    Hook.received = []
    srv = HTTPServer(("127.0.0.1", 0), Hook)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/hook", Hook.received
    srv.shutdown()
    srv.server_close()


def test_monitor_alerts_on_state_changes(tmp_path, webhook):
    url, received = webhook
    log = tmp_path / "alerts.log"
    marker = tmp_path / "pwned"
    script = (
        "import json, os, sys\n"
        "ev = json.load(sys.stdin)\n"
        "open(sys.argv[1], 'a').write(os.environ['ACCELBENCH_PREVIOUS_VERDICT'] + '->' "
        "+ ev['verdict'] + ' ' + sys.argv[2] + '\\n')\n"
    )
    # the last argument would create a file if it went through a shell
    argv = [sys.executable, "-c", script, str(log), f"$(touch {marker})"]
    exp = Exporter(port=0)
    port = exp.start()
    try:
        mon = Monitor(
            [ScriptedSource([OK, OK, HOT, HOT, OK])],
            interval_s=0.01,
            window_s=0.0,  # judge each sample alone
            alert_cmd=argv,
            webhook=url,
            exporter=exp,
        )
        mon.run(iterations=3)
        assert value(scrape(port), "accelbench_health_status") == 2.0
        mon.run(iterations=2)
        assert value(scrape(port), "accelbench_health_status") == 0.0
    finally:
        exp.stop()
    assert [(e["previous"], e["verdict"]) for e in mon.events] == [
        ("pass", "fail"),
        ("fail", "pass"),
    ]
    lines = log.read_text().splitlines()
    assert lines == [f"pass->fail $(touch {marker})", f"fail->pass $(touch {marker})"]
    assert not marker.exists()
    assert [(e["previous"], e["verdict"]) for e in received] == [("pass", "fail"), ("fail", "pass")]
    assert received[0]["findings"][0]["rule"] == "temperature"


def test_monitor_first_bad_state_alerts():
    mon = Monitor([ScriptedSource([HOT])], interval_s=0.01)
    mon.tick()
    assert [(e["previous"], e["verdict"]) for e in mon.events] == [(None, "fail")]
    mon.tick()
    assert len(mon.events) == 1  # no change, no new alert


def test_alert_failures_do_not_raise(tmp_path):
    assert run_alert_command([str(tmp_path / "missing-binary")], {"verdict": "fail"}) is None
    assert run_alert_command([sys.executable, "-c", "raise SystemExit(3)"], {}) == 3
    assert post_webhook("http://127.0.0.1:9/nothing", {"verdict": "fail"}, timeout_s=1) is None


class _SlowHeadWebhook(RawHttpServer):
    """A webhook that answers ``HTTP/1.1 200 OK`` and then a header a byte at a time,
    without end (urllib's timeout bounds each read, and each read gets a byte)."""

    def __init__(self) -> None:
        super().__init__()
        self.url += "/hook"

    def serve(self, conn) -> None:
        import time

        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            while True:
                conn.sendall(b"a")
                time.sleep(0.1)
        except OSError:
            return


def test_a_webhook_that_never_finishes_its_answer_fails_in_its_timeout():
    """The webhook's timeout is the whole exchange's: one that sent its head a byte at a
    time held the monitor's one alert thread for ever (every later alert, command and
    recovery queued behind it, then dropped). Now it is a failure (None, never the 200
    its cut head says) after the timeout, and the next action runs."""
    from accelbench.health.monitor import Dispatcher

    hook = _SlowHeadWebhook()
    d = Dispatcher()
    got: list[int | None] = []
    d.submit(lambda: got.append(post_webhook(hook.url, {"verdict": "fail"}, timeout_s=0.5)))
    d.submit(lambda: got.append(run_alert_command([sys.executable, "-c", "pass"], {})))
    assert d.drain(timeout_s=30), "the alert thread is still held by the webhook"
    assert got == [None, 0]
    hook.sock.close()


# ---------------------------------------------------------------------------- unknown


class FailingSource(ScriptedSource):
    """Answers ``good`` times, then raises (a driver that stopped answering)."""

    name = "flaky"

    def __init__(self, good: int, script: list[dict[str, Any]], uuid: str = "GPU-y") -> None:
        super().__init__(script)
        self.good = good
        self.uuid = uuid

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        if self.i >= self.good:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        rows = super().sample(t_ns)
        for r in rows:
            r["uuid"] = self.uuid
        return rows


class EmptySource(ScriptedSource):
    name = "empty"

    def sample(self, t_ns: int) -> list[dict[str, Any]]:
        return []


def test_monitor_unknown_when_a_source_stops_answering_and_exporter_shows_it():
    exp = Exporter(port=0)
    port = exp.start()
    try:
        mon = Monitor([ScriptedSource([OK]), FailingSource(2, [OK])], interval_s=0.01, exporter=exp)
        mon.run(iterations=2)
        assert mon.verdict == "pass" and mon.events == []
        s = scrape(port)
        assert value(s, "accelbench_health_verdict", verdict="pass") == 1.0
        assert value(s, "accelbench_health_verdict", verdict="unknown") == 0.0
        assert value(s, "accelbench_source_up", source="flaky") == 1.0
        mon.tick()
        s = scrape(port)
    finally:
        exp.stop()
    assert mon.verdict == "unknown"
    reasons = mon.health["unknown"]
    assert "source flaky stopped answering (RuntimeError: NVML_ERROR_GPU_IS_LOST)" in reasons
    assert "nvidia GPU 0 (?, GPU-y): not reported in the latest sample" in reasons
    assert mon.health["sources"] == {
        "scripted": "ok",
        "flaky": "stopped answering (RuntimeError: NVML_ERROR_GPU_IS_LOST)",
    }
    assert [(e["previous"], e["verdict"]) for e in mon.events] == [("pass", "unknown")]
    assert mon.events[0]["unknown"] == reasons
    assert value(s, "accelbench_health_status") == 3.0
    assert value(s, "accelbench_health_verdict", verdict="unknown") == 1.0
    assert value(s, "accelbench_health_verdict", verdict="pass") == 0.0
    assert value(s, "accelbench_health_unknown_reasons") == len(reasons) == 2
    assert value(s, "accelbench_source_up", source="flaky") == 0.0
    assert value(s, "accelbench_source_up", source="scripted") == 1.0


def test_monitor_unknown_with_no_samples_and_fail_still_wins():
    mon = Monitor([EmptySource([OK])], interval_s=0.01)
    health = mon.tick()
    assert health["verdict"] == "unknown"
    assert health["unknown"] == [
        "no samples in the latest tick: no source answered",
        "source empty returned no samples",
    ]
    assert mon.events[0]["verdict"] == "unknown"  # first state not pass: alerted
    # a failing rule beats unknown: a hot GPU while the other source is silent
    mon = Monitor([ScriptedSource([HOT]), EmptySource([OK])], interval_s=0.01)
    health = mon.tick()
    assert health["verdict"] == "fail" and health["unknown"] == ["source empty returned no samples"]


def test_monitor_gpu_without_memory_error_counters_is_unknown():
    mon = Monitor([ScriptedSource([{"temp_gpu_c": 60.0, "temp_slowdown_c": 95.0}])])
    health = mon.tick()
    assert health["verdict"] == "unknown"
    (reason,) = health["unknown"]
    assert reason.endswith("no memory errors (ECC / row remapping) reported")


def test_exporter_never_serves_a_missing_verdict_as_pass():
    exp = Exporter(port=0)
    port = exp.start()
    try:
        exp.update([], {"findings": []})
        s = scrape(port)
    finally:
        exp.stop()
    assert value(s, "accelbench_health_status") == 3.0
    assert value(s, "accelbench_health_verdict", verdict="unknown") == 1.0


# -- the exporter's scrape, read back -------------------------------------------------
MONITOR_H200 = fixture_file(
    "telemetry", "accelbench-monitor_metrics__h200__drv580.159.04__load.prom"
)


def test_the_monitors_own_scrape_reads_back_hand_checked():
    """accelbench monitor's /metrics on a real H200 under load (the fixture): its GPU and
    host rows, values as the file shows them; the verdict series are named, not kept."""
    from accelbench.telemetry.parsers import parse_capture

    cap = parse_capture(MONITOR_H200.read_text())
    assert cap.format == "accelbench" and cap.lost == []
    assert cap.notes == [
        "the monitor's health verdict when scraped (warn) is not a sample: left out "
        "(the rows are judged again)"
    ]
    gpu, host = cap.rows
    assert (gpu["kind"], gpu["vendor"], gpu["model"], gpu["device_index"]) == (
        "gpu", "nvidia", "NVIDIA H200", 0
    )  # fmt: skip
    assert gpu["bus_id"] == "0000:00:06.0" and gpu["uuid"].startswith("GPU-addd9b9c")
    assert gpu["power_w"] == 693.583 and gpu["power_limit_w"] == 700.0
    assert gpu["energy_j"] == 10578.613  # accelbench_gpu_energy_joules_total
    assert gpu["throttle_power_s"] == 8.174029984 and gpu["throttle_thermal_s"] == 0.0
    assert gpu["mem_total_bytes"] == 150754820096 and gpu["mem_used_bytes"] == 1704853504
    assert (gpu["temp_gpu_c"], gpu["temp_mem_c"], gpu["temp_slowdown_c"]) == (57.0, 49.0, 89.0)
    assert (gpu["clock_sm_hz"], gpu["clock_mem_hz"]) == (1395e6, 3201e6)
    assert (gpu["pcie_gen"], gpu["pcie_gen_max"], gpu["pcie_width"]) == (5, 5, 16)
    assert gpu["ecc_uncorrected_volatile"] == 0 and gpu["remapped_rows_pending"] is False
    assert host["kind"] == "host" and host["host_mem_total_bytes"] == 135129063424


def _plausible(col: str) -> st.SearchStrategy[float]:
    """Any reading the parsers take for real (telemetry.schema.BOUNDS: outside it a value
    is lost, named, by design)."""
    from accelbench.telemetry.schema import BOUNDS

    lo, hi = BOUNDS[col]
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    gpus=st.lists(
        st.fixed_dictionaries(
            {
                "power_w": _plausible("power_w"),
                "energy_j": _plausible("energy_j"),
                "temp_gpu_c": _plausible("temp_gpu_c"),
                "throttle_power_s": _plausible("throttle_power_s"),
                "clock_sm_hz": _plausible("clock_sm_hz"),
                "ecc_uncorrected_volatile": st.integers(0, 10**9),
                "pcie_width": st.integers(1, 32),
                "remapped_rows_pending": st.booleans(),
            }
        ),  # fmt: skip
        min_size=1,
        max_size=4,
    ),
    cpu=_plausible("cpu_util"),
    running=st.integers(0, 10**6),
)
def test_property_the_exporters_scrape_reads_back_to_its_rows(gpus, cpu, running):
    """Rows -> the exporter's /metrics text -> the parser: every exported value comes back
    as it went in (one table of names for both: exporter.GPU_METRICS and the rest)."""
    from prometheus_client import generate_latest

    from accelbench.telemetry.parsers import parse_capture

    rows = [
        new_row(
            kind="gpu",
            vendor="nvidia",
            model="H200",
            device_index=i,
            bus_id=f"0000:0{i}:00.0",
            uuid=f"GPU-{i}",
            **vals,
        )  # fmt: skip
        for i, vals in enumerate(gpus)
    ]
    rows.append(new_row(kind="host", cpu_util=cpu))
    rows.append(new_row(kind="server", engine="vllm", srv_requests_running=running))
    ex = Exporter(port=0)
    ex.update(rows, {"verdict": "pass", "findings": [], "unknown": []})
    cap = parse_capture(generate_latest(ex.registry).decode())
    assert cap.format == "accelbench" and cap.lost == []
    back = {(r["kind"], r.get("device_index"), r.get("engine")): r for r in cap.rows}
    for i, vals in enumerate(gpus):
        r = back[("gpu", i, None)]
        assert (r["bus_id"], r["uuid"]) == (f"0000:0{i}:00.0", f"GPU-{i}")
        for col, v in vals.items():
            assert r[col] == v, (col, r[col], v)
    assert back[("host", None, None)]["cpu_util"] == cpu
    assert back[("server", None, "vllm")]["srv_requests_running"] == running
