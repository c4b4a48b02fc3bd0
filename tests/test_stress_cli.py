"""The stress commands from the command line: bad usage (exit 2), the mixed suite with
an interference matrix and a claim on reference servers (no shared resource: the claim
holds), the verdict table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    # a bare environment, but the same accelbench as the tests (PYTHONPATH, when given)
    keep = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    return subprocess.run([sys.executable, "-m", "accelbench", "stress", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", **keep})  # fmt: skip


@pytest.mark.parametrize(
    "args, message",
    [
        (["soak", "--url", "http://127.0.0.1:9"], "needs --duration"),
        (["mixed", "--url", "http://127.0.0.1:9,isl=x", "--url", "http://127.0.0.1:9"], "isl='x'"),
        (["flood", "--url", "http://127.0.0.1:9", "--lengths", "1,a"], "--lengths"),
        (["consistency", "--url", "http://127.0.0.1:9", "--prompts", "0"], "--prompts"),
        (["soak", "--url", "http://127.0.0.1:9", "-d", "60", "--server-pid", "-1"], "--server-pid"),
        (["soak", "--url", "http://127.0.0.1:9", "-d", "60", "--leak-warn", "nan"], "--leak-warn"),
        (["soak", "--url", "http://127.0.0.1:9", "-d", "60", "--leak-fail", "inf"], "--leak-fail"),
        (["soak", "--url", "http://127.0.0.1:9", "-d", "60", "--leak-warn", "64"], "--leak-warn"),
        (["soak", "--url", "http://127.0.0.1:9", "-d", "60", "--exhaustion-horizon", "0"],
         "--exhaustion-horizon"),
        (["soak", "--url", "http://127.0.0.1:9", "-d", "60", "--drift-fail", "-1"], "--drift-fail"),
        (["mixed", "--url", "http://127.0.0.1:9", "--url", "http://127.0.0.1:9", "--warn", "nan"],
         "--warn"),
        (["mixed", "--url", "http://127.0.0.1:9", "--url", "http://127.0.0.1:9", "--fail", "-1"],
         "--fail"),
        # given where they do not apply (at their default value too): refused, not ignored
        (["mixed", "--url", "http://127.0.0.1:9", "--url", "http://127.0.0.1:9", "--embedded",
          "3"], "--embedded applies only without --url"),
        (["mixed", "--url", "http://127.0.0.1:9", "--url", "http://127.0.0.1:9", "--claim-stat",
          "jitter"], "--claim-stat applies only with --claim"),
        (["mixed", "--url", "http://127.0.0.1:9", "--url", "http://127.0.0.1:9", "--matrix"],
         "--matrix applies only with 3 or more"),
        (["flood", "--url", "http://127.0.0.1:9", "--lengths", "64", "--context", "4096"],
         "--context applies only"),
        (["flood", "--url", "http://127.0.0.1:9", "--lengths", "64", "--max-context", "4096"],
         "--max-context applies only"),
        (["flood", "--lengths", "64", "--server-pid", "1"], "--server-pid applies only with --url"),
        (["soak", "-d", "60", "--server-pid", "1"], "--server-pid applies only with --url"),
        (["consistency", "--url", "http://127.0.0.1:9", "--results-root", "results"],
         "--results-root does not apply with --out"),
    ],
)  # fmt: skip
def test_bad_usage_is_one_line_exit_2(args, message, tmp_path):
    r = cli(*args, "--out", str(tmp_path / "s"))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_mixed_matrix_and_claim_on_reference_servers(reference_server, tmp_path):
    a, b, c = (reference_server("--ttft-ms", "20", "--itl-ms", "2") for _ in range(3))
    out = tmp_path / "mixed"
    r = cli("mixed", "--url", f"{a.url},isl=16,osl=4", "--url", f"{b.url},concurrency=2",
            "--url", f"{c.url},rate=20", "--duration", "1.5", "--stagger", "1", "--window", "0.5", "--matrix",
            "--claim", "20", "--claim-stat", "change", "--no-telemetry", "--osl", "4",
            "--out", str(out))  # fmt: skip
    doc = json.loads((out / "stress.json").read_text())
    # exit 1 exactly when a verdict failed (a tail may suffer from the shared client CPU)
    failed = any(v["status"] == "fail" for v in doc["verdicts"])
    assert r.returncode == (1 if failed else 0), r.stdout + r.stderr
    assert "interference matrix" in r.stdout and "claim ep2" in r.stdout
    assert doc["status"] == "completed" and len(doc["runs"]) == 3 + 3 + 3 * 2
    m = doc["interference_matrix"]
    assert [m[i][i] for i in range(3)] == [None] * 3
    assert all(m[i][j]["estimate"] is not None for i in range(3) for j in range(3) if i != j)
    # fixed server latency, nothing shared but the client's CPU: no false alarm, no claim
    # fails (the claim is 20 %, 4 ms of a 20 ms TTFT: three loads and three servers on 2
    # busy cores add a few ms; a 1.5 s run can leave an interval reaching past it: warn)
    claims = [v for v in doc["verdicts"] if v["kind"] == "claim"]
    assert len(claims) == 3
    assert all(v["status"] in ("pass", "warn") and v["interval"]["low"] < 20 for v in claims), (
        claims
    )
    cfg = doc["config"]["loads"]
    assert cfg[0]["workload"]["isl"] == 16 and cfg[1]["concurrency"] == 2 and cfg[2]["rate"] == 20


def test_results_root_places_the_suite_and_is_not_refused_by_its_steps(reference_server, tmp_path):
    """The suite places its directory under --results-root; its steps each run in a
    directory of their own, so their --out is the suite's, not the user's: `stress
    consistency --results-root R` had failed at its first step with "--results-root does
    not apply with --out", an --out nobody gave."""
    srv = reference_server("--ttft-ms", "5", "--itl-ms", "1", "--deterministic")
    root = tmp_path / "root"
    r = cli("consistency", "--url", srv.url, "--prompts", "2", "--repeats", "1",
            "--loaded-concurrency", "0", "--osl", "4", "--no-telemetry", "-q",
            "--results-root", str(root))  # fmt: skip
    assert r.returncode == 0, r.stderr
    (suite,) = root.iterdir()
    assert suite.name.startswith("stress-consistency-")
    assert json.loads((suite / "stress.json").read_text())["status"] == "completed"
    # with --out as well, --results-root is unused: refused before anything runs
    r = cli("consistency", "--url", srv.url, "--results-root", str(root), "--out",
            str(tmp_path / "o"), "--no-telemetry", "-q")  # fmt: skip
    assert r.returncode == 2 and "--results-root" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()
