"""predict/mlperf_check.py: MLPerf Inference results as validation on models the
factors never saw (provenance, the error arithmetic, the physical limit, the docs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.hardware.catalog import find_accelerator, load_catalog
from accelbench.plan.models import find_model
from accelbench.predict import mlperf_check as m
from accelbench.predict.stepmodel import steady_state

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def checked() -> m.MlperfValidation:
    return m.check()


def test_every_point_has_its_source() -> None:
    pts = m.mlperf_points()
    assert len(pts) >= 300
    cat = load_catalog([])
    for p in pts:
        assert re.fullmatch(r"[0-9a-f]{40}", p.source_commit), p
        assert p.source_repo.count("/") == 1 and "inference_results" in p.source_repo
        assert p.source_file.endswith("/performance/run_1/mlperf_log_summary.txt")
        assert p.round in ("v5.1", "v6.0") and p.submitter and p.system and p.software
        assert p.precision and p.gpus >= 1 and p.output_tok_s > 0
        find_accelerator(p.accelerator, cat)
        find_model(p.model)
        if p.scenario != "offline":
            assert p.ttft_limit_s and p.tpot_limit_s, p
    for model, (isl, source) in m.ISL_MAX.items():
        find_model(model)
        assert isl > m.ISL_MIN and str(isl) in source.replace(",", "")


def test_a_point_read_by_hand() -> None:
    """AMD's 8 x MI300X llama2-70b-99 Server of v5.1, as its LoadGen log reads:
    "Completed tokens per second: 24593.77", ttft_latency 2000000000 ns, tpot_latency
    200000000 ns, p99 TPOT 193380124 ns, TOKENS_PER_SAMPLE 301.3 (results table)."""
    (p,) = [
        p
        for p in m.mlperf_points()
        if p.source_file
        == "closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99/Server/performance/run_1/"
        "mlperf_log_summary.txt"
    ]
    assert (p.output_tok_s, p.ttft_limit_s, p.tpot_limit_s) == (24593.8, 2.0, 0.2)
    assert p.p99_tpot_s == pytest.approx(0.193380, abs=1e-6)
    assert p.tokens_per_sample == 301.3 and p.engine == "vllm" and p.gpus == 8
    assert m.output_length(p) == 301


def test_error_arithmetic() -> None:
    assert m.error(150.0, 100.0) == pytest.approx(0.5)
    assert m.error(80.0, 100.0) == pytest.approx(-0.2)
    # |e| = 0.5, 0.2, 0.1, 0.4: median 0.3; p90 (linear) 0.4 + 0.7 * (0.5 - 0.4) = 0.47
    n, med, p90 = m.ape_stats([0.5, -0.2, 0.1, -0.4])
    assert (n, med, p90) == (4, pytest.approx(0.3), pytest.approx(0.47))
    assert m.ape_stats([])[0] == 0
    p = m.mlperf_points()[0]
    lo = m.MlperfPrediction(1, 300, "8 x TP1", 10, 2.0 * p.output_tok_s, 1e12, "x", ())
    hi = m.MlperfPrediction(1024, 300, "8 x TP1", 10, 0.5 * p.output_tok_s, 1e12, "x", ())
    c = m.Checked(p, lo, hi)
    assert (c.err_min, c.err_max, c.within) == (pytest.approx(1.0), pytest.approx(-0.5), True)
    assert not m.Checked(p, hi, hi).within


def test_predictions_within_the_physical_limit(checked: m.MlperfValidation) -> None:
    assert len(checked.checked) >= 200
    for c in checked.checked:
        for pred in (c.at_min, c.at_max):
            assert 0 < pred.predicted_tok_s <= pred.limit_tok_s * (1 + 1e-9), (c.point, pred)
            # every one of these is an extrapolation and says so
            assert any(
                "llama" in e or "model" in e or "engine" in e for e in pred.extrapolation
            ) or (c.point.model == "deepseek-r1")
    models = {c.point.model for c in checked.checked}
    assert {"llama-2-70b", "llama-3.1-405b", "mixtral-8x7b", "deepseek-r1"} <= models
    for p, why in checked.skipped:  # never silently dropped: each says why
        assert why, p


def test_server_load_meets_the_limits(checked: m.MlperfValidation) -> None:
    """The Server concurrency is the largest whose predicted medians meet the limits."""
    from accelbench.predict.point import fitted_step_model
    from accelbench.predict.stepmodel import Layout

    c = next(
        c
        for c in checked.checked
        if c.point.scenario == "server" and c.point.model == "llama-2-70b"
        and c.point.accelerator == "mi300x"
    )  # fmt: skip
    pred = c.at_max
    tp = int(re.search(r"TP(\d+)", pred.layout).group(1))  # type: ignore[union-attr]
    sm, _ = fitted_step_model(
        "llama-2-70b", "mi300x", Layout(tp), c.point.engine, "fp8", m.KV_PRECISION
    )
    ok = steady_state(sm, pred.isl, pred.osl, pred.concurrency)
    assert ok.ttft_s <= c.point.ttft_limit_s and ok.tpot_s <= c.point.tpot_limit_s  # type: ignore[operator]
    over = steady_state(sm, pred.isl, pred.osl, pred.concurrency + 1)
    assert over.ttft_s > c.point.ttft_limit_s or over.tpot_s > c.point.tpot_limit_s  # type: ignore[operator]


def test_docs_hold_what_the_code_prints(checked: m.MlperfValidation) -> None:
    text = (ROOT / "docs/PREDICT.md").read_text(encoding="utf-8")
    block = text.split(m.DOC_BEGIN, 1)[1].split(m.DOC_END, 1)[0].strip()
    assert block == m.markdown(checked).strip()
    assert text.index(m.SECTION) < text.index(m.DOC_BEGIN) < text.index(m.BEFORE)


def test_write_docs_inserts_then_replaces(tmp_path: Path) -> None:
    doc = tmp_path / "P.md"
    doc.write_text("# P\n\n## Intro\n\ntext\n\n## Calibrate on what you own\n\nrest\n")
    m.write_docs(doc, "TABLE 1")
    t1 = doc.read_text()
    assert t1.index(m.SECTION) < t1.index("TABLE 1") < t1.index(m.BEFORE)
    m.write_docs(doc, "TABLE 2")
    t2 = doc.read_text()
    assert "TABLE 1" not in t2 and t2.count(m.SECTION) == 1 and t2.endswith("rest\n")


HEADER = ",".join(
    [*m._REQUIRED, "tokens_per_sample", "ttft_limit_s", "tpot_limit_s"]
)  # fmt: skip
GOOD = {
    "round": "v5.1", "submitter": "AMD", "system": "S", "model": "llama-2-70b",
    "scenario": "server", "accelerator": "mi300x", "accelerator_count": "8",
    "software": "vLLM", "precision": "fp8", "output_tok_s": "24593.8",
    "source_repo": "a/inference_results_v5.1", "source_commit": "0" * 40,
    "source_file": "f", "tokens_per_sample": "301.1", "ttft_limit_s": "2",
    "tpot_limit_s": "0.2",
}  # fmt: skip


def _csv(row: dict[str, str]) -> list[str]:
    return [HEADER, ",".join(row[k] for k in HEADER.split(","))]


def test_parse_a_good_row() -> None:
    (p,) = m.parse_points(_csv(GOOD))
    assert (p.output_tok_s, p.tpot_limit_s, p.gpus) == (24593.8, 0.2, 8)


@settings(max_examples=60, deadline=None)
@given(
    field=st.sampled_from(["output_tok_s", "accelerator_count", "tpot_limit_s", "ttft_limit_s"]),
    bad=st.one_of(
        st.sampled_from(["", "nan", "inf", "-1", "0", "x", "1e999"]),
        st.text(alphabet="abc-!", min_size=1, max_size=5),
    ),
)
def test_a_damaged_row_is_refused_with_its_line_and_field(field: str, bad: str) -> None:
    row = {**GOOD, field: bad}
    with pytest.raises(AccelbenchError, match=rf"line 2: field {field}"):
        m.parse_points(_csv(row))


def test_a_missing_column_is_refused() -> None:
    with pytest.raises(AccelbenchError, match="missing columns output_tok_s"):
        m.parse_points([HEADER.replace("output_tok_s", "tok_s"), "x"])
