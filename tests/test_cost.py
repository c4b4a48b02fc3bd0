"""Cost arithmetic, TCO (rates and build-up), sweep frontiers, run reading, bad input."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.cost.costing import (
    cost_of,
    joules_per_token,
    parse_plain_number,
    throughput_from_source,
    tokens_per_s_per_mw,
    usd_per_million_tokens,
)
from accelbench.cost.tco import LIMITS as TCO_LIMITS
from accelbench.cost.tco import OPTIONS as TCO_OPTIONS
from accelbench.cost.tco import TcoInputs, crf, load_tco_file, resolve_tco
from accelbench.errors import AccelbenchError, UsageError
from accelbench.hardware.catalog import shipped_catalog
from accelbench.store.runs import load_run
from synthetic_runs import make_run as make_real_run


def make_run(path, total, interactivity, gpus=8, concurrency=None, energy=None, isl=1000, osl=100):
    """A minimal run directory: summary.json with the fields cost and plan read."""
    path.mkdir(parents=True)
    share_in = isl / (isl + osl)
    s = {
        "schema": "accelbench.summary/1",
        "status": "completed",
        "gpus": gpus,
        "counts": {"planned": 100, "completed": 100, "failed": 0},
        "throughput": {
            "total_tokens_per_s_per_gpu": total,
            "input_tokens_per_s_per_gpu": total * share_in,
            "output_tokens_per_s_per_gpu": total * (1 - share_in),
        },
        "tokens": {"input": 100 * isl, "output": 100 * osl},
        "interactivity": {"tok_s_user": interactivity, "tpot_statistic": "p50"},
        "client": {"target_concurrency": concurrency},
    }
    if energy is not None:
        s["energy"] = energy
    (path / "summary.json").write_text(json.dumps(s))
    return path


# ------------------------------------------------------------------ InferenceX arithmetic


def test_inferencex_examples_from_the_rate_set():
    cat = shipped_catalog()
    old = TcoInputs(rate_set="inferencex-2025-10", tier="owned")
    mi = resolve_tco(cat["mi355x"], old)
    b2 = resolve_tco(cat["b200"], old)
    assert (mi.usd_per_gpu_hour, b2.usd_per_gpu_hour) == (1.48, 1.95)
    # 1.48 / (1369 * 3600 / 1e6) = 0.30030...
    mi_cost = cost_of("mi", cat["mi355x"], parse_plain_number("1369"), mi).usd_per_m_total
    assert round(mi_cost, 3) == 0.300
    # 1.95 / (1756 * 0.0036) = 0.30847; InferenceX prints $0.309 (its throughput is
    # presumably unrounded): agree to within a tenth of a cent
    b2_cost = cost_of("b2", cat["b200"], parse_plain_number("1756"), b2).usd_per_m_total
    assert b2_cost == pytest.approx(0.309, abs=0.001)
    assert b2_cost == pytest.approx(1.95 / (1756 * 0.0036), rel=1e-12)


def test_power_follows_inferencex_definition_by_default():
    # FACTS.md: MI355X at 1369 tok/s/GPU, 2.09 kW all-in -> 655,024 tok/s/MW, 1.527 J/token
    cat = shipped_catalog()
    tco = resolve_tco(cat["mi355x"], TcoInputs())  # default set inferencex-2026-07
    assert tco.kw_per_gpu == 2.09
    r = cost_of("mi", cat["mi355x"], parse_plain_number("1369"), tco)
    assert round(r.tok_s_per_mw) == 655024
    assert round(r.j_per_token, 3) == 1.527
    assert any("chip + host/NIC share" in a for a in tco.assumptions)
    # PUE only when asked for, and said so
    pue = resolve_tco(cat["mi355x"], TcoInputs(pue=1.3))
    assert pue.kw_per_gpu == pytest.approx(2.09 * 1.3)
    assert any("PUE 1.3 (given" in a for a in pue.assumptions)


def test_placeholder_rates_are_flagged_for_every_tier():
    cat = shipped_catalog()
    for aid in ("b300", "gb300"):
        for tier in ("owned", "rental"):
            t = resolve_tco(cat[aid], TcoInputs(rate_set="inferencex-2025-10", tier=tier))
            assert "[placeholder]" in t.assumptions[0], (aid, tier)
    t = resolve_tco(cat["b200"], TcoInputs(rate_set="inferencex-2025-10"))
    assert "[placeholder]" not in t.assumptions[0]


def test_energy_arithmetic():
    # 1369 tok/s/GPU at 2.65 kW all-in: 516,604 tok/s per MW; 1.936 J/token
    assert tokens_per_s_per_mw(1369, 2.65) == pytest.approx(1369 * 1000 / 2.65)
    assert joules_per_token(2.65, 1369) == pytest.approx(2650 / 1369)
    with pytest.raises(AccelbenchError, match="kw_per_gpu must be > 0"):
        tokens_per_s_per_mw(1000, 0)
    with pytest.raises(AccelbenchError, match="tokens/s per GPU must be > 0"):
        usd_per_million_tokens(1.0, 0)


def test_input_output_variants():
    cat = shipped_catalog()
    tco = resolve_tco(cat["h100"], TcoInputs(usd_per_gpu_hour=2.0, kw_per_gpu=1.5))
    r = cost_of("h", cat["h100"], parse_plain_number("900+100"), tco)
    assert r.usd_per_m_total == pytest.approx(2.0 / (1000 * 0.0036))
    assert r.usd_per_m_input == pytest.approx(2.0 / (900 * 0.0036))
    assert r.usd_per_m_output == pytest.approx(2.0 / (100 * 0.0036))
    assert r.j_per_output_token == pytest.approx(1500 / 100)


# --------------------------------------------------------------------------------- TCO


def test_crf():
    assert crf(0, 4) == 0.25
    # 0.08 * 1.08^4 / (1.08^4 - 1) = 0.301921
    assert crf(0.08, 4) == pytest.approx(0.3019208, rel=1e-6)


def test_crf_is_stable_as_the_rate_goes_to_zero():
    # audit_opts 1a: (1 + 1e-17) ** 4 == 1.0 divided by zero (exit 70); the limit is 1/n
    for rate in (1e-17, 1e-300, 5e-324, 1e-10):
        assert crf(rate, 4) == pytest.approx(0.25, rel=1e-9)
    assert crf(1e-6, 4) == pytest.approx(1e-6 * (1 + 1e-6) ** 4 / ((1 + 1e-6) ** 4 - 1), rel=1e-6)


def _in_range(key: str) -> st.SearchStrategy[float]:
    lo, lo_open, hi = TCO_LIMITS[key]
    edges = [hi] if lo_open else [lo, hi]
    return st.one_of(
        st.sampled_from(edges),
        st.floats(lo, hi, exclude_min=lo_open, allow_nan=False, allow_infinity=False),
    )


@settings(max_examples=300, deadline=None)
@given(
    capex=_in_range("capex_usd"),
    life=_in_range("life_years"),
    rate=_in_range("cost_of_capital"),
    util=_in_range("utilisation"),
    kw=_in_range("it_kw_per_gpu"),
    pue=_in_range("pue"),
    kwh=_in_range("usd_per_kwh"),
    other=_in_range("other_opex_usd_per_gpu_hour"),
)
def test_buildup_is_finite_over_every_accepted_input(capex, life, rate, util, kw, pue, kwh, other):
    """Every value each build-up input accepts gives a finite, non-negative $/GPU-hour
    (positive once capex is), never an exit-70 arithmetic error."""
    inp = TcoInputs(
        capex_usd=capex,
        life_years=life,
        cost_of_capital=rate,
        utilisation=util,
        it_kw_per_gpu=kw,
        pue=pue,
        usd_per_kwh=kwh,
        other_opex_usd_per_gpu_hour=other,
    )
    t = resolve_tco(shipped_catalog()["h100"], inp)
    assert math.isfinite(t.usd_per_gpu_hour) and t.usd_per_gpu_hour >= 0
    assert t.kw_per_gpu is not None and math.isfinite(t.kw_per_gpu) and t.kw_per_gpu > 0
    if capex >= 1:
        assert t.usd_per_gpu_hour > 0
    assert all(math.isfinite(v) for v in t.breakdown.values())


@pytest.mark.parametrize(
    "key", ["life_years", "utilisation", "kw_per_gpu", "it_kw_per_gpu", "cost_of_capital"]
)
def test_tco_lower_bounds_just_inside_accepted_just_outside_refused(key):
    lo, lo_open, _ = TCO_LIMITS[key]
    assert not lo_open
    TcoInputs(**{key: lo}).validate()
    below = math.nextafter(lo, -math.inf)
    for bad in (below, 1e-300 if lo > 0 else -1e-300):
        with pytest.raises(AccelbenchError, match=rf"\({TCO_OPTIONS[key]}\) must be in \["):
            TcoInputs(**{key: bad}).validate()


def test_buildup_by_hand():
    acc = shipped_catalog()["h100"]
    inp = TcoInputs(
        capex_usd=30000,
        life_years=4,
        cost_of_capital=0.08,
        utilisation=0.8,
        it_kw_per_gpu=1.2,
        pue=1.25,
        usd_per_kwh=0.10,
        other_opex_usd_per_gpu_hour=0.05,
    )
    t = resolve_tco(acc, inp)
    capital = 30000 * crf(0.08, 4) / 8760 / 0.8
    energy = 1.2 * 1.25 * 0.10
    assert t.mode == "buildup"
    assert t.usd_per_gpu_hour == pytest.approx(capital + energy + 0.05)
    assert t.kw_per_gpu == pytest.approx(1.5)


def test_buildup_defaults_capex_to_the_catalog_estimate_and_says_so():
    t = resolve_tco(
        shipped_catalog()["mi355x"], TcoInputs(life_years=4, cost_of_capital=0.0, usd_per_kwh=0.1)
    )
    # 23000 / 4 / 8760 + 2.09 kW (inferencex-2026-07 all-in, no PUE) x 0.1
    assert t.usd_per_gpu_hour == pytest.approx(23000 / 4 / 8760 + 2.09 * 0.1)
    assert any("catalog price [estimate]" in a for a in t.assumptions)


def test_buildup_missing_inputs_are_named():
    with pytest.raises(
        AccelbenchError, match=r"needs cost_of_capital \(--cost-of-capital\), usd_per_kwh"
    ):
        resolve_tco(shipped_catalog()["h100"], TcoInputs(life_years=4))
    with pytest.raises(AccelbenchError, match="no price for b300"):
        resolve_tco(shipped_catalog()["b300"], TcoInputs(life_years=4))


def test_newer_rate_set_uses_all_in_kw_as_is():
    t = resolve_tco(shipped_catalog()["gb200"], TcoInputs(rate_set="inferencex-2026-07"))
    assert t.usd_per_gpu_hour == 1.86
    assert t.kw_per_gpu == 1.87  # no PUE: the source's all-in figure
    t = resolve_tco(shipped_catalog()["b200"], TcoInputs(tier="rental", pue=1.2))
    assert t.usd_per_gpu_hour == 3.70 and t.kw_per_gpu == pytest.approx(1.71 * 1.2)


@pytest.mark.parametrize(
    "inputs, message",
    [
        (TcoInputs(usd_per_gpu_hour=-1.0), r"usd_per_gpu_hour \(--usd-per-gpu-hour\) must be in"),
        (TcoInputs(usd_per_gpu_hour=math.nan), r"--usd-per-gpu-hour\) must be in \[0, 1000\]"),
        (TcoInputs(usd_per_gpu_hour=math.inf), "usd_per_gpu_hour"),
        (TcoInputs(usd_per_gpu_hour=1e12), "usd_per_gpu_hour"),
        (TcoInputs(kw_per_gpu=0.0), r"kw_per_gpu \(--kw-per-gpu\) must be in \[0.001, 100\]"),
        (TcoInputs(utilisation=1.5), r"utilisation \(--utilisation\) must be in \[0.01, 1\]"),
        (TcoInputs(utilisation=math.nan), "utilisation"),
        (TcoInputs(pue=0.9), r"pue \(--pue\) must be in \[1, 3\]"),
        (TcoInputs(pue=math.nan), "pue"),
        (TcoInputs(capex_usd=-5.0), "capex_usd"),
        (TcoInputs(life_years=0.0), "life_years"),
        (TcoInputs(rate_set="nope"), "unknown rate set 'nope'"),
        (TcoInputs(tier="leased"), "unknown tier 'leased'"),
    ],
)
def test_impossible_tco_inputs_are_named(inputs, message):
    with pytest.raises(AccelbenchError, match=message):
        resolve_tco(shipped_catalog()["h100"], inputs)


def test_accelerator_without_a_rate_says_what_to_do():
    with pytest.raises(AccelbenchError, match="no owned rate for mi350x.*--usd-per-gpu-hour"):
        resolve_tco(shipped_catalog()["mi350x"])


def test_pue_without_a_power_figure_is_refused_not_ignored():
    """A PUE multiplies a kW; with a rate given and no kW (none given, none in the rate
    set for mi350x) it changed nothing: now a UsageError naming what would give one."""
    mi350x = shipped_catalog()["mi350x"]
    with pytest.raises(UsageError, match=r"pue \(--pue\) .* none for mi350x: give kw_per_gpu"):
        resolve_tco(mi350x, TcoInputs(usd_per_gpu_hour=2.0, pue=1.3))
    t = resolve_tco(mi350x, TcoInputs(usd_per_gpu_hour=2.0, pue=1.3, kw_per_gpu=1.5))
    assert t.kw_per_gpu == pytest.approx(1.5 * 1.3)
    assert resolve_tco(mi350x, TcoInputs(usd_per_gpu_hour=2.0)).kw_per_gpu is None


def test_tco_file_and_override(tmp_path):
    p = tmp_path / "tco.yaml"
    p.write_text("rate_set: inferencex-2025-10\ntier: rental\nkw_per_gpu: 2.0\n")
    inp = load_tco_file(p).merged(TcoInputs(tier="owned"))
    t = resolve_tco(shipped_catalog()["b200"], inp)
    assert (t.usd_per_gpu_hour, t.kw_per_gpu) == (1.95, 2.0)
    p.write_text("usd_per_gpu_hr: 2\n")
    with pytest.raises(AccelbenchError, match="unknown field.*usd_per_gpu_hr"):
        load_tco_file(p)
    p.write_text("capex_usd: lots\n")
    with pytest.raises(AccelbenchError, match="capex_usd must be a number"):
        load_tco_file(p)


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "null\n", "~\n", "---\n"])
def test_a_tco_file_with_no_fields_is_refused(tmp_path, text):
    """Before, a 0-byte or `null` file read as "no inputs": the published rate was used
    and the file never mentioned."""
    p = tmp_path / "tco.yaml"
    p.write_text(text)
    with pytest.raises(AccelbenchError, match=r"TCO file .*tco\.yaml holds no fields"):
        load_tco_file(p)


def test_a_tco_file_in_exponent_form_reads_as_numbers(tmp_path):
    """YAML 1.1 (PyYAML) read `1.0e-1` and `3e4` as text: "must be a number (got '3e4')"."""
    p = tmp_path / "tco.yaml"
    p.write_text("capex_usd: 3e4\nlife_years: 4.0\ncost_of_capital: 1.0e-1\nusd_per_kwh: 1E-1\n")
    inp = load_tco_file(p)
    assert (inp.capex_usd, inp.cost_of_capital, inp.usd_per_kwh) == (3e4, 0.1, 0.1)
    p.write_text("cost_of_capital: 1.0e10\n")  # a number now, and out of its range
    with pytest.raises(AccelbenchError, match=r"cost_of_capital .* must be in \[0, 1\]"):
        load_tco_file(p)
    p.write_text("usd_per_gpu_hour: 1e400\n")  # past the float range: an infinity, refused
    with pytest.raises(AccelbenchError, match="must be in"):
        load_tco_file(p)


# ------------------------------------------------------------------------- runs, sweeps


def test_run_without_energy_and_with_energy(tmp_path):
    a = throughput_from_source(str(make_run(tmp_path / "a", 1000, 50)))
    assert a.j_per_token_measured is None and a.total == 1000
    b = make_run(tmp_path / "b", 1000, 50, energy={"joules": 5000.0, "tokens": 2000})
    assert throughput_from_source(str(b)).j_per_token_measured == 2.5
    c = make_run(tmp_path / "c", 1000, 50, energy={"j_per_token": 1.25})
    assert throughput_from_source(str(c)).j_per_token_measured == 1.25


def test_run_energy_as_telemetry_writes_it(tmp_path):
    # accelbench.telemetry.energy.window_energy's block
    energy = {
        "joules": 36000.0,
        "method": "counter",
        "window_s": 10.0,
        "average_w": 3600.0,
        "j_per_output_token": 3.6,
        "j_per_total_token": 0.36,
        "devices": {},
    }
    make_run(tmp_path / "t", 1000, 50, energy=energy)
    t = throughput_from_source(str(tmp_path / "t"))
    assert (t.j_per_token_measured, t.j_per_output_token_measured) == (0.36, 3.6)


@pytest.mark.parametrize("sweep", [False, True])
def test_energy_warnings_follow_the_priced_joules(tmp_path, sweep):
    """A run whose telemetry said its energy figure missed a GPU over part of the window
    (summary.json energy.warnings) was priced in J/token with nothing said: the warning,
    naming the run, comes with the figure (a run, a sweep's frontier points); a run
    without a measured energy figure says nothing of energy."""
    gap = "GPU 1 unseen for 12.0 s of the 60.0 s window"
    energy = {"j_per_total_token": 0.36, "j_per_output_token": 3.6, "warnings": [gap]}
    if sweep:
        make_run(tmp_path / "s" / "a", 4000, 10, energy=energy)
        make_run(tmp_path / "s" / "b", 2000, 40, energy={"j_per_total_token": 0.5})
        t = throughput_from_source(str(tmp_path / "s"), 20)
    else:
        make_run(tmp_path / "a", 1000, 50, energy=energy)
        t = throughput_from_source(str(tmp_path / "a"))
    assert t.j_per_token_measured is not None
    assert [w for w in t.warnings if "energy" in w] == [f"a: measured energy: {gap}"]
    make_run(tmp_path / "n", 1000, 50, energy={"warnings": [gap]})  # no figure: nothing priced
    assert throughput_from_source(str(tmp_path / "n")).warnings == []


def test_run_missing_throughput_is_named(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"gpus": 1, "throughput": {}}))
    with pytest.raises(AccelbenchError, match="no run with throughput figures"):
        throughput_from_source(str(d))


def test_run_killed_before_its_summary_is_costed_from_its_requests(tmp_path):
    # a run interrupted before summary.json was written: only run.json + requests.parquet
    d = make_real_run(
        tmp_path / "killed", 100, concurrency=4, gpus=2, files=("run.json", "requests.parquet")
    )
    assert not (d / "summary.json").exists()
    info = load_run(d)
    t = throughput_from_source(str(d))
    assert t.total == pytest.approx(info.figure("total_tps_per_gpu"))
    assert t.output == pytest.approx(info.figure("output_tps_per_gpu"))
    assert t.total > t.output > 0
    assert any("recomputed from requests.parquet" in n for n in t.notes)


def test_sweep_interpolates_on_its_frontier(tmp_path):
    sweep = tmp_path / "sweep"
    for i, (tot, inter) in enumerate([(4000, 10), (3000, 20), (2000, 40), (1500, 20), (800, 80)]):
        make_run(sweep / f"c{i}", tot, inter, energy={"j_per_token": 0.5 + i})
    t = throughput_from_source(str(sweep), 20)
    assert t.total == pytest.approx(3000)  # the dominated (20, 1500) point is ignored
    assert t.input == pytest.approx(3000 * 1000 / 1100)
    assert t.j_per_token_measured == pytest.approx(1.5)
    with pytest.raises(AccelbenchError, match=r"out of measured range \[10, 80\]"):
        throughput_from_source(str(sweep), 100)
    with pytest.raises(AccelbenchError, match=r"interactivity \(--interactivity\) must be in"):
        throughput_from_source(str(sweep), math.nan)
    with pytest.raises(AccelbenchError, match="give --interactivity"):
        throughput_from_source(str(sweep), None)


def test_sweep_measured_energy_only_where_every_point_has_it(tmp_path):
    sweep = tmp_path / "sweep"
    make_run(sweep / "a", 4000, 10, energy={"j_per_token": 1.0})
    make_run(sweep / "b", 2000, 40)
    t = throughput_from_source(str(sweep), 20)
    assert t.j_per_token_measured is None and math.isfinite(t.total)


def test_plain_numbers_and_garbage():
    assert parse_plain_number("1369").total == 1369
    t = parse_plain_number("1200+169")
    assert (t.total, t.input, t.output) == (1369, 1200, 169)
    with pytest.raises(AccelbenchError, match="neither a run/sweep directory nor a number"):
        parse_plain_number("fast")
    for bad in ("-5", "0", "inf", "nan", "1e300", "5+inf", "nan+1", "-1+5"):
        with pytest.raises(AccelbenchError, match="must be a finite number in \\[1e-06, 1e"):
            parse_plain_number(bad)


def test_tco_file_rejects_bad_values(tmp_path):
    p = tmp_path / "tco.yaml"
    for text, message in (
        ("pue: .nan\n", "pue"),
        ("utilisation: 2\n", "utilisation"),
        ("usd_per_gpu_hour: true\n", "must be a number"),
        ("tier: 5\n", "must be text"),
        # PyYAML kept the second without a word (accelbench.yamlfile)
        (
            "usd_per_gpu_hour: 2\nusd_per_gpu_hour: 4\n",
            "line 2: key 'usd_per_gpu_hour' given twice",
        ),
    ):
        p.write_text(text)
        with pytest.raises(AccelbenchError, match=message):
            load_tco_file(p)
    p.write_bytes(bytes(range(256)))
    with pytest.raises(AccelbenchError, match="cannot read TCO file"):
        load_tco_file(p)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(max_size=20) | st.floats().map(str),
    field=st.sampled_from(["usd_per_gpu_hour", "kw_per_gpu", "pue", "utilisation", "capex_usd"]),
    value=st.floats(allow_nan=True, allow_infinity=True),
)
def test_any_plain_source_or_tco_value_costs_or_fails_with_one_line(text, field, value):
    """Random tok/s text and random TCO values: a finite positive cost or one AccelbenchError."""
    h100 = shipped_catalog()["h100"]
    try:
        r = cost_of(
            "h", h100, parse_plain_number(text), resolve_tco(h100, TcoInputs(**{field: value}))
        )
    except AccelbenchError as exc:
        assert "\n" not in str(exc)
    else:
        assert math.isfinite(r.usd_per_m_total) and r.usd_per_m_total >= 0


@settings(max_examples=60, deadline=None)
@given(
    acc=st.sampled_from(["h100", "MI355X", "b200"]),
    blank=st.text(alphabet=" \t", max_size=3),
    default=st.sampled_from([None, "h200"]),
)
def test_property_an_accel_prefix_with_no_source_is_refused(acc, blank, default):
    """``ACCEL:`` with nothing (or only blanks) after it, with or without -a, is refused
    naming the argument: `cost h100:` was read as the directory '.'."""
    from accelbench.cost.costing import split_source

    cat = shipped_catalog()
    with pytest.raises(AccelbenchError, match=r"no SOURCE \(a run or sweep directory"):
        split_source(f"{acc}:{blank}", default, cat)
    if default is not None:
        with pytest.raises(AccelbenchError, match="no SOURCE"):
            split_source(blank or " ", default, cat)
    assert split_source(f"{acc}:1369", default, cat)[1] == "1369"


def test_cost_cli_empty_source_regression(tmp_path):
    """`accelbench cost h100:` said '.: no run directories found'; now it names the
    argument."""
    from cli_inprocess import run_cli

    code, out, err, _ = run_cli(["cost", "h100:"], tmp_path)
    assert code == 2 and not out
    (line,) = err.strip().splitlines()
    assert "'h100:': no SOURCE" in line
