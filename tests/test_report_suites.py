"""`accelbench report` on the suites' directories, built by running the real suites
briefly against the reference server: every verdict figure in the HTML and Markdown
equals the one in stress.json / verdict.json / LoadGen's own summary, and the suites'
runs are in the runs store with their suite and verdict."""

from __future__ import annotations

import html as htmlmod
import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from accelbench.report.data import build_report_data
from accelbench.report.html import render_html
from accelbench.report.markdown import render_markdown
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.store.runs import list_runs, run_row
from accelbench.suites.sections import SECTIONS, suite_of


def md_rows(md: str) -> dict[str, list[str]]:
    """First cell -> cells of the first Markdown table row that starts with it."""
    out = {}
    for line in md.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip().replace("\\|", "|").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
                     for c in re.split(r"(?<!\\) \| ", line[2:-2])]  # fmt: skip
            out.setdefault(cells[0], cells)  # the first table that has the row
    return out


def html_rows(page: str) -> dict[str, list[str]]:
    out = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", page, re.S):
        cells = [htmlmod.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        if cells:
            out.setdefault(cells[0], cells)
    return out


def val(cell: str) -> float:
    return float(cell.replace(",", ""))


def near(cell: str, x: float) -> bool:
    """The cell shows x to its 4 significant digits."""
    return val(cell) == pytest.approx(x, rel=6e-4, abs=1e-12)


def ci(cell: str) -> tuple[float, float]:
    m = re.search(r"([-0-9.,e+]+) to ([-0-9.,e+]+)", cell)
    assert m, cell
    return val(m.group(1)), val(m.group(2))


def render(*paths: Path) -> tuple[str, str, Any]:
    data = build_report_data(list(paths), timelines=False, sections=SECTIONS)
    return render_markdown(data), render_html(data), data


def check_verdicts(doc: dict[str, Any], md: str, page: str) -> None:
    """Each verdict's row: estimate, interval, thresholds and result as in the file."""
    assert doc["verdicts"]
    for rows in (md_rows(md), html_rows(page)):
        for v in doc["verdicts"]:
            r = rows[v["name"]]
            assert r[1] == v["statistic"] and r[2] == v["unit"] and r[6] == v["word"]
            if v["estimate"] is None:
                assert r[3] == r[4] == "—"
            else:
                assert near(r[3], v["estimate"])
                lo, hi = ci(r[4])
                assert lo == pytest.approx(v["interval"]["low"], rel=6e-4, abs=1e-12)
                assert hi == pytest.approx(v["interval"]["high"], rel=6e-4, abs=1e-12)
            shown = dict(x.split(" ", 1) for x in r[5].split("; ")) if r[5] != "—" else {}
            for k, x in v["thresholds"].items():
                assert k not in shown if x is None else near(shown[k], x)


def test_soak_section_and_runs_store(reference_server, tmp_path: Path) -> None:
    from accelbench.suites.stress.soak import SoakConfig, run_soak

    srv = reference_server("--ttft-ms", "5", "--itl-ms", "1", "--leak-bytes-per-request",
                           "200000")  # fmt: skip
    load = BenchmarkConfig(url=srv.url, rate=20, arrival="constant", telemetry=False,
                           workload=WorkloadConfig(isl=16, osl=4))  # fmt: skip
    # 14 s sampled every 0.1 s: a leak's interval needs 60 samples after the warm-up
    cfg = SoakConfig(load=load, duration_s=14, window_s=1, sample_s=0.1, server_pid=srv.proc.pid,
                     gpu=False)  # fmt: skip
    run_soak(cfg, tmp_path / "soak")
    doc = json.loads((tmp_path / "soak" / "stress.json").read_text())
    md, page, data = render(tmp_path / "soak")
    check_verdicts(doc, md, page)
    leak = next(v for v in doc["verdicts"] if v["name"] == "leak server_rss_bytes")
    assert leak["estimate"] > 0  # the injected leak is there to be shown
    ev = dict(x.split("=", 1) for x in md_rows(md)["leak server_rss_bytes"][8].split("; "))
    assert near(ev["time_to_exhaustion_h"], leak["evidence"]["time_to_exhaustion_h"])
    assert int(ev["n"]) == leak["evidence"]["n"]  # the evidence, as written
    wins = [json.loads(x) for x in (tmp_path / "soak" / "windows.jsonl").read_text().splitlines()]
    rows = md_rows(md)
    for w in wins:  # per-window rows: requests and output tokens/s as written
        r = rows[str(w["window"])]
        assert int(r[3]) == w["requests"] and near(r[5], w["output_tok_per_s"])
    su = data.suites[0]
    assert [c.title for c in su.charts] == ["Per-window latency",
                                           "Per-window throughput and errors",
                                           "Memory series (leak verdicts above)"]  # fmt: skip
    assert su.verdict == doc_worst(doc) and not data.sets
    assert "Traceback" not in page and 'id="suites"' in page
    # the runs store: the segment's row names its suite and the suite's verdict
    row = run_row(list_runs(tmp_path)[0], suite_of)
    assert row["suite"] == "stress soak" and row["verdict"] == doc_worst(doc)


def doc_worst(doc: dict[str, Any]) -> str:
    got = {v["status"] for v in doc["verdicts"]}
    return next(v for v in ("fail", "warn", "pass") if v in got)


def test_flood_section_fit_and_steps(reference_server, tmp_path: Path) -> None:
    from accelbench.suites.stress.flood import FloodConfig, run_flood

    srv = reference_server("--ttft-ms", "uniform:2:6", "--itl-ms", "1")
    load = BenchmarkConfig(url=srv.url, telemetry=False, workload=WorkloadConfig(isl=16, osl=4))
    cfg = FloodConfig(load=load, lengths=[64, 256, 512, 1024], requests=2, osl=2, sample_s=0.5,
                      gpu=False)  # fmt: skip
    run_flood(cfg, tmp_path / "flood")
    doc = json.loads((tmp_path / "flood" / "stress.json").read_text())
    md, page, _ = render(tmp_path / "flood")
    check_verdicts(doc, md, page)
    fit = doc["ttft_fit_ms"]
    for rows in (md_rows(md), html_rows(page)):
        for k, unit in (("a", "ms"), ("b", "ms/token"), ("c", "ms/token^2")):
            r = rows[f"{k} ({unit})"]
            assert near(r[1], fit[k]["estimate"])
            lo, hi = ci(r[2])
            assert lo == pytest.approx(fit[k]["ci_low"], rel=6e-4)
            assert hi == pytest.approx(fit[k]["ci_high"], rel=6e-4)
        assert near(rows["R^2"][1], fit["r2"])
        for s in doc["steps"]:
            r = rows[f"{s['input_tokens']:g}"]
            assert near(r[4], s["ttft_ms"]["p50"]) and near(r[7], s["prefill_tok_per_s_p50"])
    assert "fit a + bL + cL^2" in page


def test_mixed_section(reference_server, tmp_path: Path) -> None:
    import subprocess
    import sys

    a = reference_server("--ttft-ms", "10", "--itl-ms", "2")
    b = reference_server("--ttft-ms", "10", "--itl-ms", "2")
    out = tmp_path / "mixed"
    subprocess.run([sys.executable, "-m", "accelbench", "stress", "mixed", "--url", a.url,
                    "--url", f"{b.url},concurrency=2", "--duration", "1", "--stagger", "0.5",
                    "--window", "0.25", "--claim", "50", "--claim-stat", "change",
                    "--no-telemetry", "--osl", "4", "--out", str(out)],
                   capture_output=True, timeout=120, check=False)  # fmt: skip
    doc = json.loads((out / "stress.json").read_text())
    md, page, _ = render(out)
    check_verdicts(doc, md, page)
    for rows in (md_rows(md), html_rows(page)):
        for e in doc["endpoints"]:
            r = rows[f"ep{e['endpoint']}"]
            c = e["ttft_p50_change_pct"]
            assert near(r[3].split()[0], c["estimate"])
            assert ci(r[3]) == pytest.approx((c["ci_low"], c["ci_high"]), rel=6e-4)
            assert r[2] == f"{e['solo_requests']} / {e['mixed_requests']}"
    assert any(v["kind"] == "claim" for v in doc["verdicts"])


def test_consistency_section(reference_server, tmp_path: Path) -> None:
    from accelbench.suites.stress.consistency import ConsistencyConfig, run_consistency

    base = reference_server("--ttft-ms", "1", "--itl-ms", "1", "--deterministic")
    cand = reference_server("--ttft-ms", "1", "--itl-ms", "1", "--deterministic",
                            "--diverge", "0.25")  # fmt: skip
    load = BenchmarkConfig(url=base.url, telemetry=False, workload=WorkloadConfig(isl=16, osl=8))
    cfg = ConsistencyConfig(load=load, urls=[base.url, cand.url], prompts=12, repeats=1,
                            loaded_concurrency=2)  # fmt: skip
    run_consistency(cfg, tmp_path / "cons")
    doc = json.loads((tmp_path / "cons" / "stress.json").read_text())
    md, page, _ = render(tmp_path / "cons")
    check_verdicts(doc, md, page)
    pairs = (tmp_path / "cons" / "divergent.jsonl").read_text().splitlines()
    assert pairs and f"Diverging pairs ({len(pairs)};" in md
    for rows in (md_rows(md), html_rows(page)):
        for c in doc["comparisons"]:
            r = rows[c["run"]]
            assert int(r[1]) == c["compared"] and near(r[2], c["identical_fraction"])
            assert int(r[3]) == c["divergent"]
            if c["first_diff_min"] is not None:
                assert near(r[5], c["first_diff_min"]) and near(r[7], c["similarity_mean"])
    assert any(c["divergent"] for c in doc["comparisons"])


def test_shadow_section(reference_server, tmp_path: Path) -> None:
    from accelbench.suites.shadow.replay import ReplayOptions, replay
    from accelbench.suites.shadow.verdict import shadow_verdict

    base = reference_server("--ttft-ms", "5", "--itl-ms", "1")
    cand = reference_server("--ttft-ms", "5", "--itl-ms", "1")
    rng = random.Random(3)
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(
        json.dumps({"timestamp": i * 5.0, "input_length": rng.randint(8, 30),
                    "output_length": 3, "hash_ids": []}) + "\n" for i in range(60)
    ))  # fmt: skip
    cfg = BenchmarkConfig(workload=WorkloadConfig(trace=str(trace)), telemetry=False)
    d, _ = replay(cfg, ReplayOptions(base.url, cand.url, str(tmp_path / "sh")))
    gates = ["ttft_p50 <= +50%", "error_rate <= +5pp"]
    v = shadow_verdict(d, gates).to_json()
    assert v["resources"]["telemetry"] == "off"  # said, not null
    from typer.testing import CliRunner

    from accelbench.cli.main import app

    r = CliRunner().invoke(
        app, ["shadow", "verdict", str(d), "--gate", gates[0], "--gate", gates[1]]
    )
    assert "resources: telemetry off" in r.output
    assert json.loads((d / "verdict.json").read_text())["gates"] == v["gates"]  # same seed
    md, page, data = render(d)
    assert data.suites[0].verdict == v["verdict"]
    for rows in (md_rows(md), html_rows(page)):
        for g in v["gates"]:
            r = rows[g["name"]]
            assert r[1] == g["statistic"] and r[2] == g["unit"] and near(r[3], g["estimate"])
            assert r[6] == g["word"]
            iv = g["interval"]
            assert ci(r[4]) == pytest.approx((iv["low"], iv["high"]), rel=6e-4, abs=1e-12)
            assert r[5].startswith("bound ") and near(r[5][6:], g["thresholds"]["bound"])
        for side in ("baseline", "candidate"):
            r = rows[side]
            s = v["sides"][side]
            assert int(r[1]) == s["requests"] and near(r[4], s["ttft"]["p50"])
    assert "resources: telemetry off" in md
    assert f"**{v['verdict']}**" in md


def test_mlperf_section_and_noncompliance(reference_server, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from accelbench.cli.main import app

    srv = reference_server("--ttft-ms", "5", "--itl-ms", "1")
    out = tmp_path / "ml"
    CliRunner().invoke(app, ["mlperf", "server", "--url", srv.url, "--target-qps", "200",
                             "--min-duration", "1", "--min-query-count", "100", "--isl", "16",
                             "--osl", "4", "--samples", "16", "--out", str(out), "-q"])  # fmt: skip
    summary = (out / "mlperf_log_summary.txt").read_text()
    # LoadGen's own page, read here by hand: the report must say the same
    result = re.search(r"Result is : (\w+)", summary).group(1)
    sps = float(re.search(r"Completed samples per second\s*: ([0-9.]+)", summary).group(1))
    ttft99 = float(re.search(r"99.00 percentile first token latency \(ns\)\s*: (\d+)",
                             summary).group(1)) / 1e6  # fmt: skip
    md, page, data = render(out)
    su = data.suites[0]
    assert su.verdict == f"{result}, non-compliant" and len(data.sets) == 1  # also a run
    for rows in (md_rows(md), html_rows(page)):
        assert val(rows["completed samples/s; requests/s"][1]) == pytest.approx(sps, abs=0.006)
        assert near(rows["TTFT p99 ms"][1], ttft99)
        acc = json.loads((out / "summary.json").read_text())["latency"]["ttft_ms"]["p99"]
        assert near(rows["TTFT p99 ms"][2], acc)  # accelbench's own beside it
    assert "NON-COMPLIANT: min_duration 1 s is below the benchmark's 600 s" in md
    assert f"[MLPerf {result}, non-compliant]" in md  # the point's label too
    assert "MLPerf Results Summary" in page  # LoadGen's page, unchanged
    row = run_row(list_runs(tmp_path)[0], suite_of)
    assert row["suite"] == "mlperf server" and row["verdict"] == f"{result}, non-compliant"


def test_suites_mixed_with_runs_and_bad_files(tmp_path: Path) -> None:
    """A run beside damaged suite directories: one warning line each, the run reported."""
    from synthetic_runs import make_run

    run = make_run(tmp_path / "run", concurrency=4)
    st = tmp_path / "st"
    make_run(st / "runs" / "s0", concurrency=2)
    (st / "stress.json").write_text("{not json")
    sh = tmp_path / "sh"
    sh.mkdir()
    (sh / "shadow.json").write_text("{}")
    (sh / "verdict.json").write_text('{"schema": "accelbench.suites.shadow-verdict/1", "gates": 7}')
    ml = tmp_path / "ml"
    make_run(ml, concurrency=1)
    (ml / "mlperf_log_detail.txt").write_text(':::MLLOG {"key": "result_validity", "val')
    md, page, data = render(run, st, sh, ml)
    warns = {s.name: s.warnings for s in data.suites}
    bad_json = (
        "stress.json unreadable (not JSON at line 1 column 2: "
        "Expecting property name enclosed in double quotes)"
    )
    assert warns["st"] == [f"stress directory malformed: {bad_json}"]
    assert warns["ml"][0].startswith("mlperf_log_detail.txt: no result_validity event")
    assert len(data.sets) == 2 and "Warnings and missing data" in page
    assert all(f"{n}</b>: {htmlmod.escape(w[0])}" in page for n, w in warns.items() if w)
    row = run_row(list_runs(st)[0], suite_of)
    assert row["suite"] == "stress ?" and row["verdict"] == bad_json


@pytest.mark.browser
def test_suite_report_renders_in_headless_chromium(reference_server, tmp_path: Path) -> None:
    """A flood beside a run: every chart (the suite's and the run's) drew, no JS error,
    and the verdict table is in the DOM."""
    from accelbench.report.html import write_html
    from accelbench.suites.stress.flood import FloodConfig, run_flood
    from synthetic_runs import make_run
    from test_report import ARTIFACTS, CHROMIUM, _chromium

    assert Path(CHROMIUM).exists(), "headless Chromium (/usr/bin/chromium) absent"
    srv = reference_server("--ttft-ms", "uniform:2:6", "--itl-ms", "1")
    load = BenchmarkConfig(url=srv.url, telemetry=False, workload=WorkloadConfig(isl=16, osl=4))
    cfg = FloodConfig(load=load, lengths=[32, 64, 128], requests=2, osl=2, sample_s=0.3,
                      server_pid=srv.proc.pid, gpu=False)  # fmt: skip
    run_flood(cfg, tmp_path / "flood")
    data = build_report_data(
        [make_run(tmp_path / "run", concurrency=4), tmp_path / "flood"], sections=SECTIONS
    )
    charts = len(data.suites[0].charts)
    assert charts == 3  # TTFT with the fit, prefill, memory
    path = write_html(data, tmp_path / "r.html")
    res = _chromium(["--dump-dom", path.resolve().as_uri()], tmp_path / "profile")
    dom = res.stdout
    assert res.returncode == 0, res.stderr[-2000:]
    status = re.search(r'id="ab-status" data-rendered="(\d+)" data-expected="(\d+)"', dom)
    assert status, "render script did not run"
    # latency 3, timeline 1; no frontier from the run's single point (a sentence instead)
    assert int(status.group(1)) == int(status.group(2)) == 4 + charts
    assert "A frontier needs at least two load points" in dom
    errors = re.search(r'id="js-errors" data-count="(\d+)"[^>]*>([^<]*)', dom)
    assert errors and errors.group(1) == "0", errors.group(2) if errors else dom[-500:]
    assert dom.count('class="main-svg"') >= 4 + charts
    doc = json.loads((tmp_path / "flood" / "stress.json").read_text())
    v = doc["verdicts"][-1]
    assert v["name"] == "flood errors" and f"<td>{v['word']}</td>" in dom.replace(
        '<td class="">', "<td>"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(path, ARTIFACTS / "report-suites.html")
