"""Consistency against two deterministic reference servers, one with an injected
divergence fraction: the divergence is recovered exactly."""

from __future__ import annotations

import json
import urllib.request

import pytest

from accelbench.reference.server import StressKnobs, deterministic_words
from accelbench.runner.config import BenchmarkConfig, WorkloadConfig
from accelbench.suites.stress.consistency import ConsistencyConfig, run_consistency

N = 39  # prompts; with the probe request first, the candidate sees 40 requests per run


def diverged_total(url: str) -> int:
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    return int(
        dict(x.split() for x in text.splitlines() if x and x[0] != "#")["reference_diverged_total"]
    )


def test_divergence_schedule_is_exact():
    k = StressKnobs(diverge=0.25)
    assert sum(k.diverges(i) for i in range(400)) == 100
    a = deterministic_words("a prompt", 12, False)
    b = deterministic_words("a prompt", 12, True)
    assert a == deterministic_words("a prompt", 12, False)  # depends on the prompt only
    assert sum(x != y for x, y in zip(a, b, strict=True)) == 1


def test_injected_divergence_recovered_exactly(reference_server, tmp_path):
    base = reference_server("--ttft-ms", "1", "--itl-ms", "1", "--deterministic")
    cand = reference_server("--ttft-ms", "1", "--itl-ms", "1", "--deterministic",
                            "--diverge", "0.25")  # fmt: skip
    load = BenchmarkConfig(url=base.url, telemetry=False, workload=WorkloadConfig(isl=24, osl=12))
    cfg = ConsistencyConfig(load=load, urls=[base.url, cand.url], prompts=N, repeats=1,
                            loaded_concurrency=4)  # fmt: skip
    res = run_consistency(cfg, tmp_path / "cons")
    assert res.status == "completed"
    got = {c.run: c for c in res.comparisons}
    # the baseline under load: identical; the candidate alone and under load: the
    # server diverged requests 1..39 and 41..79 (request 0 and 40 are the probes)
    expected = sum(StressKnobs(diverge=0.25).diverges(k) for k in range(1, 40))
    assert expected == 10
    assert got["ep0-loaded-r0"].divergent == 0
    assert got["ep1-alone-r0"].divergent == expected
    assert got["ep1-loaded-r0"].divergent == expected
    assert got["ep1-alone-r0"].identical_fraction == (N - expected) / N
    assert diverged_total(cand.url) == 2 * expected  # the server's own count agrees
    # every diverging pair is kept, differing in one word: first difference inside it
    pairs = [
        json.loads(x) for x in (tmp_path / "cons" / "divergent.jsonl").read_text().splitlines()
    ]
    assert len(pairs) == 2 * expected
    for p in pairs:
        a, b = p["baseline"], p["output"]
        assert a != b and len(a.split()) == len(b.split()) == 12
        assert sum(x != y for x, y in zip(a.split(), b.split(), strict=True)) == 1
        assert a[: p["first_diff"]] == b[: p["first_diff"]]  # byte tokens: same prefix
        assert 0.5 < p["similarity"] < 1
    v = {x.name: x for x in res.verdicts}
    assert v["consistency ep0-loaded-r0"].word == "pass"
    cv = v["consistency ep1-alone-r0"]
    assert cv.word == "fail" and cv.estimate == pytest.approx(expected / N)
    assert cv.low < expected / N < cv.high
    doc = json.loads((tmp_path / "cons" / "stress.json").read_text())
    assert doc["unit"] == "token" and len(doc["runs"]) == 4
