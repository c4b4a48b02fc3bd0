"""Credentials never leave the process: every command that writes or prints runs against
real reference servers with a marker credential in the URL (``http://user:SECRETMARK@host``)
and a marker API key in the environment, and neither marker appears in any file written
(parquet bytes and logs included), nor on stdout or stderr (issue 20, "Secrets"; issue 21:
the URL travels as an ``urls.Endpoint``, whose stored form has no credentials).

Commands: run (directly and through the shadow proxy), sweep, stress flood / consistency /
mixed / soak, shadow proxy / replay / verdict, mlperf, monitor, health, summarize, report,
compare, runs list / query / import-vllm. Each with the shortest settings that still write
its files."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from accelbench.ports import free_port

URL_MARKER = "SECRETMARK"
KEY_MARKER = "sk-KEY_MARKER_456"
KEY_ENV = "ACCELBENCH_SECRET_TEST_KEY"
FAST = ("--ttft-ms", "5", "--itl-ms", "1")


def _markers() -> list[bytes]:
    """Every form a leak could take: raw, Basic-encoded, Bearer."""
    basic = base64.b64encode(f"user:{URL_MARKER}".encode())
    return [URL_MARKER.encode(), KEY_MARKER.encode(), basic, basic[:16]]


def _with_creds(url: str) -> str:
    return url.replace("http://", f"http://user:{URL_MARKER}@")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ACCELBENCH_DEBUG"}
    env[KEY_ENV] = KEY_MARKER
    env["COLUMNS"] = "200"
    return env


def _cli(args: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "accelbench", *args], cwd=cwd, env=_env(),
        capture_output=True, timeout=timeout,
    )  # fmt: skip


def test_no_command_writes_or_prints_a_credential(reference_server, tmp_path: Path) -> None:
    a = reference_server(*FAST, "--device-memory-rate", "1000")
    b = reference_server(*FAST)
    ua, ub = _with_creds(a.url), _with_creds(b.url)
    load = ["--isl", "16", "--osl", "4"]
    key = ["--api-key-env", KEY_ENV]
    outputs: dict[str, bytes] = {}

    def run(name: str, args: list[str], ok: tuple[int, ...] = (0, 1), **kw: float) -> None:
        p = _cli(args, tmp_path, **kw)
        outputs[name] = p.stdout + p.stderr
        assert p.returncode in ok, (name, p.returncode, p.stderr.decode()[-2000:])

    # the shadow proxy, driven by a run whose URL (the proxy's) carries the credential
    port = free_port()
    proxy = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "shadow", "proxy", "--listen", f"127.0.0.1:{port}",
         "--baseline", ua, "--candidate", ub, "--candidate-api-key-env", KEY_ENV,
         "--max-requests", "6", "--duration", "60", "-o", "shadow-proxy"],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (tmp_path / "shadow-proxy").exists():
            time.sleep(0.2)
        time.sleep(1.0)
        run("run via proxy", ["run", "--url", _with_creds(f"http://127.0.0.1:{port}"),
            "-n", "6", "-c", "2", *load, "--no-telemetry", "--results-root", "res",
            "--label", "via-proxy"])  # fmt: skip
        p_out, p_err = proxy.communicate(timeout=60)
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
    outputs["shadow proxy"] = p_out + p_err
    assert proxy.returncode in (0, 1), p_err.decode()[-2000:]

    run("run", ["run", "--url", ua, "-n", "8", "-c", "2", *load, *key, "--results-root", "res",
                "--label", "r1", "--telemetry-interval", "0.2"])  # fmt: skip
    run("run no key", ["run", "--url", ua, "-n", "8", "-c", "2", *load, "--results-root", "res",
                       "--label", "r2"])  # fmt: skip
    run(
        "sweep",
        [
            "sweep",
            "--url",
            ua,
            "--values",
            "1,2",
            "--requests-per-point",
            "2",
            *load,
            *key,
            "-o",
            "sweep",
        ],
    )
    run("shadow replay", ["shadow", "replay", "--trace", "shadow-proxy", "--baseline", ua,
                          "--candidate", ub, "-o", "shadow-replay",
                          "--telemetry-interval", "0.2"])  # fmt: skip
    run("stress mixed", ["stress", "mixed", "--url", f"{ua},isl=16", "--url", ub,
                         "--duration", "1", "--stagger", "0.5", "--window", "0.5", "--osl", "4",
                         "--no-telemetry", "-o", "mixed"])  # fmt: skip
    run("stress consistency", ["stress", "consistency", "--url", ua, "--url", ub,
                               "--prompts", "3", "--repeats", "1", "--pause", "0", *load,
                               "--no-telemetry", "-o", "consistency"])  # fmt: skip
    run("stress soak", ["stress", "soak", "--url", ua, "-d", "3", "--window", "1",
                        "--sample-interval", "0.5", "-c", "2", *load, "--no-telemetry",
                        "-o", "soak"])  # fmt: skip
    run("stress flood", ["stress", "flood", "--url", ua, "--lengths", "16", "--concurrencies",
                         "2", "--requests", "4", "--osl", "4", "-o", "flood"])  # fmt: skip
    run(
        "shadow verdict replay",
        ["shadow", "verdict", "shadow-replay", "--gate", "ttft_p99 <= +10%"],
        ok=(0, 1, 3),
    )
    run(
        "shadow verdict proxy",
        ["shadow", "verdict", "shadow-proxy", "--gate", "ttft_p99 <= +10%"],
        ok=(0, 1, 3),
    )
    run("mlperf", ["mlperf", "offline", "--url", ua, "--samples", "16", "--min-query-count", "16",
                   "--min-duration", "0.2", *load, *key, "-o", "mlperf"])  # fmt: skip
    run("monitor", ["monitor", "--server-url", ua, "--source", "server", "--no-exporter",
                    "--interval", "0.2", "--duration", "1"])  # fmt: skip
    run("health", ["health", "--server-url", ua, "--source", "server", "--duration", "0.5",
                   "--interval", "0.2"])  # fmt: skip
    # what only reads the results: summary, reports, the store
    runs = sorted(p.parent for p in (tmp_path / "res").rglob("run.json"))
    assert len(runs) >= 3, runs
    run("summarize", ["summarize", str(runs[0])])
    run("report", ["report", str(runs[0]), "sweep", "-o", "report.html", "--markdown", "r.md"])
    run("report suites", ["report", "mixed", "consistency", "soak", "shadow-replay", "mlperf",
                          "-o", "suites.html"])  # fmt: skip
    run("compare", ["compare", str(runs[0]), str(runs[1]), "--allow-mismatch"])
    # a vLLM result that names its server with credentials (as `--base-url` was given)
    vllm = tmp_path / "vllm.json"
    vllm.write_text(json.dumps(_vllm_result(ua)))
    run("runs import-vllm", ["runs", "import-vllm", str(vllm), "--root", "imported"], ok=(0,))
    run("runs list", ["runs", "list", "--root", "."])
    run("runs query", ["runs", "query", "--root", ".", "SELECT * FROM runs"])
    run("runs query requests", ["runs", "query", "--root", ".", "--format", "csv",
                                "SELECT * FROM requests"])  # fmt: skip
    # a bad --url spec and an unreachable server quote the URL: redacted there too
    run("stress mixed bad spec", ["stress", "mixed", "--url", f"{ua},isl=x", "--url", ub,
                                  "-o", "m2"], ok=(2,))  # fmt: skip
    run("unreachable", ["run", "--url", _with_creds("http://127.0.0.1:1"), "-n", "1", "-q",
                        "--results-root", "res2"], ok=(1, 2))  # fmt: skip

    leaks = [f"output of {name}: {m.decode()}" for name, text in outputs.items()
             for m in _markers() if m in text]  # fmt: skip
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != vllm]
    assert len(files) > 50  # every command above wrote its directory
    for f in files:
        data = f.read_bytes()
        leaks += [f"{f.relative_to(tmp_path)}: {m.decode()}" for m in _markers() if m in data]
    assert not leaks, "\n".join(leaks)
    for d in ("shadow-proxy", "shadow-replay"):  # each side's Endpoint, in its display form
        assert b"***@127.0.0.1" in (tmp_path / d / "shadow.json").read_bytes()
    assert (tmp_path / "shadow-replay" / "verdict.json").is_file()
    assert any((tmp_path / "imported").rglob("run.json"))


def _vllm_result(base_url: str, n: int = 4) -> dict:
    """A `vllm bench serve --save-result` file (the fields the importer reads)."""
    return {
        "date": "20250101-000000", "backend": "vllm", "base_url": base_url,
        "model_id": "reference", "num_prompts": n, "request_rate": "inf",
        "max_concurrency": 2, "duration": 1.0, "completed": n, "failed": 0,
        "total_input_tokens": 16 * n, "total_output_tokens": 4 * n,
        "request_throughput": float(n), "output_throughput": 4.0 * n,
        "total_token_throughput": 20.0 * n, "input_lens": [16] * n, "output_lens": [4] * n,
        "ttfts": [0.01] * n, "itls": [[0.002] * 3] * n, "generated_texts": ["x"] * n,
        "errors": [""] * n, "start_times": [0.1 * i for i in range(n)],
    }  # fmt: skip


def test_webhook_credentials_go_as_a_header_and_are_never_logged(caplog) -> None:
    """`monitor --webhook http://user:key@host/...`: the POST carries Basic auth, the
    URL it logs on a failure is redacted."""
    import http.server
    import threading

    from accelbench.health.monitor import post_webhook

    got: list[str | None] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            got.append(self.headers.get("Authorization"))
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(500)  # a failure, so the URL is logged
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = _with_creds(f"http://127.0.0.1:{srv.server_port}/hook")
        with caplog.at_level("WARNING"):
            assert post_webhook(url, {"verdict": "fail"}) == 500
            assert post_webhook(_with_creds("http://127.0.0.1:1/hook"), {}) is None
    finally:
        srv.shutdown()
    assert got == ["Basic " + base64.b64encode(f"user:{URL_MARKER}".encode()).decode()]
    assert "***@127.0.0.1" in caplog.text
    assert all(m.decode() not in caplog.text for m in _markers()), caplog.text
