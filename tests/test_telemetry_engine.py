"""Sampling beside a run against a real llama-server (``llama_server`` fixture: its base
URL, provided by tests/conftest.py; the server must run with ``--metrics``)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import psutil
import pyarrow.parquet as pq
import pytest

from accelbench.health.sampler import HealthSampler
from accelbench.telemetry.sampler import TELEMETRY_FILE


def _server_pid(base: str) -> int | None:
    port = base.rsplit(":", 1)[-1].split("/")[0]
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if "llama-server" in (p.info.get("name") or "") + cmd and port in cmd:
            return int(p.info["pid"])
    return None


def _complete(base: str, n_tokens: int) -> int:
    body = json.dumps({"prompt": "Hello", "max_tokens": n_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(
        base + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    # a busy 2-core host with the shared server still finishing an earlier test's
    # requests took over 60 s once (CI, 2026-12-06): wait as long as the engine tests do
    with urllib.request.urlopen(req, timeout=600) as resp:
        out = json.loads(resp.read())
    return int(out.get("usage", {}).get("completion_tokens", 0))


@pytest.mark.engine
def test_sampling_beside_llama_server(request, tmp_path):
    try:
        url = request.getfixturevalue("llama_server")
    except pytest.FixtureLookupError:
        pytest.skip("llama_server fixture not available")
    base = str(url).rstrip("/").removesuffix("/v1")
    pid = _server_pid(base)
    s = HealthSampler(tmp_path, interval_s=0.2, server_url=base, server_pid=pid)
    s.set_phase("warmup")
    s.start()
    assert s.status["server"] == "ok", f"{s.status['server']} (start llama-server with --metrics)"
    _complete(base, 4)
    start = time.monotonic_ns()
    s.set_phase("measured")
    generated = [0]
    failed: list[BaseException] = []

    def load() -> None:
        try:
            for _ in range(4):
                generated[0] += _complete(base, 32)
        except Exception as exc:  # reported below, not as "0 > 0"
            failed.append(exc)

    t = threading.Thread(target=load)
    t.start()
    t.join(1200)
    assert not failed and not t.is_alive(), f"the test's own load failed: {failed}"
    end = time.monotonic_ns()
    s.set_phase("drain")
    time.sleep(0.3)
    result = s.stop(measured_window_ns=(start, end), output_tokens=generated[0])
    json.dumps(result)
    assert result["sources"]["server"] == "ok" and result["sources"]["host"] == "ok"
    rows = pq.read_table(tmp_path / TELEMETRY_FILE).to_pylist()
    server = [r for r in rows if r["kind"] == "server"]
    assert server and all(r["engine"] == "llamacpp" for r in server)
    before = [r["srv_generation_tokens_total"] for r in server if r["t_ns"] <= start]
    after = [r["srv_generation_tokens_total"] for r in server if r["t_ns"] >= end]
    assert before and after
    assert after[-1] - before[-1] >= generated[0] > 0  # the server counted what we received
    if pid is not None:
        host = [r for r in rows if r["kind"] == "host"]
        assert all(r["proc_rss_bytes"] and r["proc_rss_bytes"] > 1_000_000 for r in host)
    assert {"warmup", "measured", "drain"} <= {r["phase"] for r in rows}
