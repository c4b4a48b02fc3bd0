"""`accelbench cost` and `accelbench catalog` through the CLI (numbers asserted, no snapshots)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from accelbench.cli.cost import register
from accelbench.errors import AccelbenchError
from test_cost import make_run  # the same minimal run directory


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    a = typer.Typer()

    @a.callback()
    def _root() -> None:  # keep sub-commands as sub-commands
        pass

    register(a)
    return a


def run(app, *args):
    return CliRunner().invoke(app, list(args))


def run_json(app, *args):
    r = run(app, *args, "--json")
    assert r.exit_code == 0, (r.output, r.exception)
    return json.loads(r.output)


def test_cost_default_power_matches_inferencex_own_figures(app):
    (mi,) = run_json(app, "cost", "mi355x:1369")["results"]
    assert mi["kw_per_gpu_all_in"] == 2.09
    assert round(mi["tok_s_per_mw"]) == 655024  # InferenceX's figure (FACTS.md)
    assert round(mi["j_per_token_provisioned"], 3) == 1.527
    (pue,) = run_json(app, "cost", "mi355x:1369", "--pue", "1.3")["results"]
    assert pue["kw_per_gpu_all_in"] == pytest.approx(2.717)


def test_cost_of_a_killed_run_without_summary(app, tmp_path):
    from synthetic_runs import make_run as make_real_run

    d = make_real_run(tmp_path / "k", 50, concurrency=4, files=("run.json", "requests.parquet"))
    (r,) = run_json(app, "cost", f"h100:{d}", "--usd-per-gpu-hour", "2")["results"]
    assert r["total_tok_s_per_gpu"] > 0
    assert r["usd_per_m_total_tokens"] == pytest.approx(2 / (r["total_tok_s_per_gpu"] * 0.0036))


def test_cost_reproduces_inferencex(app):
    out = run_json(app, "cost", "mi355x:1369", "b200:1756", "--rates", "inferencex-2025-10")
    mi, b2 = out["results"]
    assert round(mi["usd_per_m_total_tokens"], 3) == 0.300
    assert b2["usd_per_m_total_tokens"] == pytest.approx(0.309, abs=0.001)
    assert mi["kw_per_gpu_all_in"] == 2.65 and b2["kw_per_gpu_all_in"] == 2.17
    assert mi["j_per_token_provisioned"] == pytest.approx(2650 / 1369)
    assert mi["tok_s_per_mw"] == pytest.approx(1369 * 1000 / 2.65)
    assert out["ratios_vs_first"][0]["usd_per_m_total_tokens"] == pytest.approx(
        (1.95 / 1756) / (1.48 / 1369)
    )
    assert any("inferencex-2025-10 owned" in a for a in mi["assumptions"])


def test_cost_table_shows_ratio_and_assumptions(app):
    r = run(app, "cost", "mi355x:1369", "b200:1756", "--rates", "inferencex-2025-10")
    assert r.exit_code == 0, r.output
    assert "0.3003" in r.output and "0.3085" in r.output
    assert "b200 / mi355x" in r.output and "1.027x" in r.output
    assert "Assumptions:" in r.output and "InferenceX" in r.output


def test_cost_sweeps_side_by_side_at_target_interactivity(app, tmp_path):
    for name, scale in (("mi355x", 1.0), ("b200", 0.8)):
        for i, (tot, inter) in enumerate([(4000, 10), (3000, 20), (2000, 40), (800, 80)]):
            make_run(tmp_path / name / f"c{i}", tot * scale, inter, energy={"j_per_token": 1.0})
    out = run_json(
        app,
        "cost",
        f"mi355x:{tmp_path / 'mi355x'}",
        f"b200:{tmp_path / 'b200'}",
        "-i",
        "20",
        "--rates",
        "inferencex-2025-10",
    )
    mi, b2 = out["results"]
    assert mi["total_tok_s_per_gpu"] == pytest.approx(3000)
    assert b2["total_tok_s_per_gpu"] == pytest.approx(2400)
    assert mi["usd_per_m_total_tokens"] == pytest.approx(1.48 / (3000 * 0.0036))
    assert b2["usd_per_m_total_tokens"] == pytest.approx(1.95 / (2400 * 0.0036))
    assert mi["j_per_token_measured"] == pytest.approx(1.0)
    assert out["ratios_vs_first"][0]["total_tok_s_per_gpu"] == pytest.approx(0.8)


def test_cost_of_a_run_directory_with_build_up_tco(app, tmp_path):
    d = make_run(tmp_path / "r", 2000, 30)
    out = run_json(
        app,
        "cost",
        str(d),
        "-a",
        "h100",
        "--capex",
        "30000",
        "--life-years",
        "4",
        "--cost-of-capital",
        "0",
        "--usd-per-kwh",
        "0.1",
        "--it-kw-per-gpu",
        "1.0",
        "--pue",
        "1.2",
    )
    (r,) = out["results"]
    usd = 30000 / 4 / 8760 + 1.0 * 1.2 * 0.1
    assert r["tco_mode"] == "buildup" and r["usd_per_gpu_hour"] == pytest.approx(usd)
    assert r["usd_per_m_total_tokens"] == pytest.approx(usd / (2000 * 0.0036))
    assert r["usd_per_m_output_tokens"] == pytest.approx(usd / (2000 / 11 * 0.0036))
    assert r["j_per_token_measured"] is None


def test_cost_tco_file_overridden_by_options(app, tmp_path):
    f = tmp_path / "tco.yaml"
    f.write_text("usd_per_gpu_hour: 3.0\nkw_per_gpu: 2.0\n")
    (r,) = run_json(app, "cost", "h200:1000", "--tco", str(f), "--usd-per-gpu-hour", "2.5")[
        "results"
    ]
    assert r["usd_per_gpu_hour"] == 2.5 and r["kw_per_gpu_all_in"] == 2.0


@pytest.mark.parametrize(
    "args, message",
    [
        (("cost", "mi35x:1000"), "did you mean: mi355x"),
        (("cost", "1000"), "say which accelerator"),
        (("cost", "h100:1000", "--usd-per-gpu-hour", "-1"), "(--usd-per-gpu-hour) must be in"),
        (("cost", "h100:1000", "--usd-per-gpu-hour", "nan"), "(--usd-per-gpu-hour) must be in"),
        (("cost", "h100:1000", "--usd-per-gpu-hour", "1e15"), "(--usd-per-gpu-hour) must be in"),
        (("cost", "h100:1000", "--utilisation", "nan", "--capex", "1"), "(--utilisation)"),
        (("cost", "h100:1000", "--pue", "-1"), "(--pue) must be in [1, 3]"),
        (("cost", "h100:1000", "--kw-per-gpu", "inf"), "(--kw-per-gpu) must be in"),
        (("cost", "h100:0"), "must be a finite number in"),
        (("cost", "h100:inf"), "must be a finite number in"),
        (("cost", "h100:nan"), "must be a finite number in"),
        (("cost", "h100:-3"), "must be a finite number in"),
        (("cost", "mi350x:1000"), "no owned rate for mi350x"),
    ],
)
def test_cost_bad_input(app, args, message):
    r = run(app, *args)
    assert isinstance(r.exception, AccelbenchError), r.output
    assert message in str(r.exception)


def test_cost_out_of_measured_range(app, tmp_path):
    for i, (tot, inter) in enumerate([(4000, 10), (2000, 40)]):
        make_run(tmp_path / "s" / f"c{i}", tot, inter)
    r = run(app, "cost", f"b200:{tmp_path / 's'}", "-i", "90")
    assert isinstance(r.exception, AccelbenchError)
    assert "out of measured range" in str(r.exception)


def test_catalog_commands(app, tmp_path):
    r = run(app, "catalog", "list")
    assert r.exit_code == 0 and "mi355x" in r.output and "[conflict]" in r.output
    shown = run_json(app, "catalog", "show", "b200")
    mem = shown["figures"]["memory_gib"]
    assert (mem["min"], mem["max"], mem["status"]) == (180, 192, "conflict")
    assert "InferenceX" in mem["source_title"]
    su = shown["figures"]["scale_up_gbs_unidir"]
    assert su["value"] == 900 and "one direction" in su["note"]
    r = run(app, "catalog", "show", "mi325x")
    assert "Sources:" in r.output and "ROCm" in r.output
    rates = run_json(app, "catalog", "rates")
    assert rates["rate_sets"]["inferencex-2025-10"]["rates"]["mi355x"]["owned"] == 1.48
    r = run(app, "catalog", "rates")
    assert r.exit_code == 0 and r.output.count("[placeholder]") >= 4  # B300, GB300 x 2 tiers
    models = run_json(app, "catalog", "models")
    kv = {m["id"]: m["kv_bytes_per_token_bf16"] for m in models}
    assert kv["llama-3.1-70b"] == 327680 and kv["deepseek-v3"] == 70272
    m = run_json(app, "catalog", "model", "gpt-oss-120b")
    assert m["sliding_layers"] == 18 and m["source"]["config"].startswith("https://")
    tpl = tmp_path / "host.yaml"
    tpl.write_text(run(app, "catalog", "template").output)
    listed = run_json(app, "catalog", "list", "--catalog", str(tpl))
    assert listed["cpu-host"]["memory_bw_tbs"] is None and listed["cpu-host"]["memory_gib"] > 0
    r = run(app, "catalog", "show", "h10")
    assert isinstance(r.exception, AccelbenchError) and "did you mean" in str(r.exception)


# --------------------------------------------------------------------------- options refused

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tests.cli_inprocess import run_cli  # noqa: E402

# a value for each `cost` option ({dir}: the test's directory; None: a flag)
_COST_OPTS: dict[str, str | None] = {
    "--accelerator": "h100", "--interactivity": "20", "--rates": "inferencex-2025-10",
    "--tier": "rental", "--usd-per-gpu-hour": "2", "--kw-per-gpu": "1.5",
    "--tco": "{dir}/tco.yaml", "--capex": "30000", "--life-years": "4",
    "--cost-of-capital": "0.08", "--utilisation": "0.8", "--it-kw-per-gpu": "1.2",
    "--pue": "1.2", "--usd-per-kwh": "0.1", "--other-opex": "0.1",
    "--catalog": "{dir}/catalog.yaml", "--json": None,
}  # fmt: skip
_COMMON = {"--accelerator", "--interactivity", "--tco", "--pue", "--catalog", "--json"}
_BUILDUP = {"--capex", "--life-years", "--cost-of-capital", "--usd-per-kwh"}
_COST_USES = {
    "given": _COMMON | {"--usd-per-gpu-hour", "--kw-per-gpu", "--rates"},
    "buildup": _COMMON
    | _BUILDUP
    | {"--utilisation", "--other-opex", "--it-kw-per-gpu", "--kw-per-gpu"},  # fmt: skip
    "rate": _COMMON | {"--rates", "--tier", "--kw-per-gpu"},
}


def _cost_uses(opts: set[str], sources_prefixed: bool = True) -> set[str]:
    """The options `cost` uses for ``opts``, independently of the CLI's tables."""
    mode = "given" if "--usd-per-gpu-hour" in opts else "buildup" if opts & _BUILDUP else "rate"
    used = set(_COST_USES[mode])
    if mode == "given" and "--kw-per-gpu" in opts:
        used.discard("--rates")
    if mode == "buildup" and "--it-kw-per-gpu" in opts:
        used.discard("--kw-per-gpu")
    used.discard("--interactivity")  # no sweep among the sources below
    if sources_prefixed:
        used.discard("--accelerator")
    return used


def test_every_cost_option_belongs_to_a_mode():
    """An option no TCO mode uses would be refused everywhere: each one has its mode."""
    from accelbench.cli.cost import _COST_MODES, cost_command

    a = typer.Typer(add_completion=False)
    a.command()(cost_command)
    opts = {max(p.opts, key=len) for p in typer.main.get_command(a).params if p.opts}
    opts.discard("sources")
    assert opts == set(_COST_OPTS) == set().union(*_COST_USES.values())
    assert set().union(*map(set, _COST_MODES.values())) == opts


@pytest.mark.parametrize(
    "args, names",
    [
        (["h100:1000", "--usd-per-gpu-hour", "2", "--tier", "rental"], "--tier"),
        (["h100:1000", "--usd-per-gpu-hour", "2", "--capex", "1"], "--capex"),
        (["h100:1000", "--usd-per-gpu-hour", "2", "--life-years", "4"], "--life-years"),
        (["h100:1000", "--usd-per-gpu-hour", "2", "--cost-of-capital", "0"], "--cost-of-capital"),
        (["h100:1000", "--usd-per-gpu-hour", "2", "--usd-per-kwh", "0.1"], "--usd-per-kwh"),
        (["h100:1000", "--usd-per-gpu-hour", "2", "--utilisation", "1"], "--utilisation"),
        (["h100:1000", "--usd-per-gpu-hour", "2", "--other-opex", "0"], "--other-opex"),
        (["h100:1000", "--usd-per-gpu-hour", "2", "--it-kw-per-gpu", "1"], "--it-kw-per-gpu"),
        (
            [
                "h100:1000",
                "--usd-per-gpu-hour",
                "2",
                "--kw-per-gpu",
                "1",
                "--rates",
                "inferencex-2025-10",
            ],
            "--rates",
        ),  # fmt: skip
        (["h100:1000", "--utilisation", "0.8"], "--utilisation"),
        (["h100:1000", "--other-opex", "0.1"], "--other-opex"),
        (["h100:1000", "--it-kw-per-gpu", "1"], "--it-kw-per-gpu"),
        (["h100:1000", "--capex", "1", "--tier", "owned"], "--tier"),
        (["h100:1000", "--capex", "1", "--rates", "inferencex-2025-10"], "--rates"),
        (
            ["h100:1000", "--capex", "1", "--it-kw-per-gpu", "1", "--kw-per-gpu", "2"],
            "--kw-per-gpu",
        ),  # fmt: skip
        (["mi355x:1369", "-i", "20"], "--interactivity"),
        (["mi355x:1369", "-a", "h100"], "--accelerator"),
        (["mi355x:1369", "b200:1756", "-a", "h100", "-i", "20"], "--accelerator"),
        (["{dir}/run", "-a", "h100", "-i", "20"], "--interactivity"),
    ],
)
def test_cost_option_of_another_mode_is_refused(tmp_path, args, names):
    """Each was ignored (the rate, the build-up or the sources did not use it): now one
    line, exit 2, naming it, before any output."""
    make_run(tmp_path / "run", 2000, 30)
    args = [a.format(dir=tmp_path) for a in args]
    code, out, err, _ = run_cli(["cost", *args], tmp_path)
    assert code == 2 and out == "", (args, code, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    assert names in err and "does not apply" in err, err


@pytest.mark.parametrize(
    "args",
    [
        ["h100:1000", "--rates", "inferencex-2025-10", "--usd-per-gpu-hour", "2"],
        ["{dir}/run", "-a", "h100", "--rates", "inferencex-2025-10", "--tier", "rental"],
        ["{dir}/run", "h100:1000", "-a", "b200", "--kw-per-gpu", "2", "--pue", "1.2"],
        ["{dir}/sweep", "-a", "h100", "-i", "20"],
        [
            "h100:1000",
            "--capex",
            "3e4",
            "--life-years",
            "4",
            "--cost-of-capital",
            "0.08",
            "--usd-per-kwh",
            "0.1",
            "--utilisation",
            "0.8",
            "--other-opex",
            "0.1",
            "--kw-per-gpu",
            "1.4",
        ],  # fmt: skip
    ],
)
def test_cost_lines_whose_options_all_apply_run(tmp_path, args):
    make_run(tmp_path / "run", 2000, 30)
    for i, (tot, inter) in enumerate([(4000, 10), (2000, 40)]):
        make_run(tmp_path / "sweep" / f"c{i}", tot, inter)
    code, out, err, _ = run_cli(["cost", *[a.format(dir=tmp_path) for a in args]], tmp_path)
    assert code == 0 and err == "", err


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    opts=st.sets(st.sampled_from(sorted(set(_COST_OPTS) - {"--catalog"})), min_size=1, max_size=5)
)
def test_property_an_option_the_tco_mode_ignores_is_refused(tmp_path, opts):
    """Whatever the TCO mode (a rate given, a build-up, a published rate), an option it
    does not use, or one the sources do not (-a with every source prefixed, -i without a
    sweep), is refused in one line, exit 2, naming it, with no output."""
    d = tmp_path / "w"
    d.mkdir(exist_ok=True)
    (d / "tco.yaml").write_text("pue: 1.1\n")
    unused = opts - _cost_uses(opts)
    args = ["cost", "h100:1000"]
    for opt in sorted(opts):
        v = _COST_OPTS[opt]
        args += [opt] if v is None else [opt, v.format(dir=d)]
    code, out, err, _ = run_cli(args, tmp_path)
    if not unused:  # an accepted line: it runs, or stops on a missing build-up input
        assert "does not apply" not in err, (args, err)
        assert code == 0 or "build-up TCO needs" in err, (args, err)
        return
    assert code == 2 and out == "", (args, code, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    # the TCO mode's options are checked first, then those that depend on the sources
    first = unused - {"--accelerator", "--interactivity"} or unused
    assert min(first) in err and "not apply to" in err, (args, err)


# the --tco file field of each option that has one (cost/tco.py, OPTIONS)
_FIELD_OF = {
    "--rates": "rate_set", "--tier": "tier", "--usd-per-gpu-hour": "usd_per_gpu_hour",
    "--kw-per-gpu": "kw_per_gpu", "--capex": "capex_usd", "--life-years": "life_years",
    "--cost-of-capital": "cost_of_capital", "--utilisation": "utilisation",
    "--it-kw-per-gpu": "it_kw_per_gpu", "--pue": "pue", "--usd-per-kwh": "usd_per_kwh",
    "--other-opex": "other_opex_usd_per_gpu_hour",
}  # fmt: skip


def test_every_tco_field_is_an_option():
    from accelbench.cost.tco import OPTIONS

    assert {v: k for k, v in OPTIONS.items()} == _FIELD_OF


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    split=st.dictionaries(st.sampled_from(sorted(_FIELD_OF)), st.booleans(), min_size=1, max_size=5)
)
def test_property_a_tco_file_field_the_mode_ignores_is_refused(tmp_path, split):
    """A field of the --tco file is its option's input: the same rule over the options
    and the file together (options first). ``split``: option -> True in the file, False
    on the command line. Before, `tier: spot` beside `usd_per_gpu_hour: 2` was ignored."""
    d = tmp_path / "w"
    d.mkdir(exist_ok=True)
    in_file = {o for o, f in split.items() if f}
    on_line = set(split) - in_file
    tco = d / "tco.yaml"
    tco.write_text("".join(f"{_FIELD_OF[o]}: {_COST_OPTS[o]}\n" for o in sorted(in_file)) or "{}\n")
    args = ["cost", "h100:1000", "--tco", str(tco)]
    for opt in sorted(on_line):
        args += [opt, str(_COST_OPTS[opt])]
    used = _cost_uses(set(split))
    code, out, err, _ = run_cli(args, tmp_path)
    if not set(split) - used:
        assert "does not apply" not in err, (args, err)
        assert code == 0 or "build-up TCO needs" in err, (args, err)
        return
    assert code == 2 and out == "", (args, code, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    first = on_line - used
    if first:
        assert min(first) in err and "not apply to" in err, (args, err)
    else:
        assert f"--tco {tco}:" in err and all(
            f"{_FIELD_OF[o]} ({o})" in err for o in in_file - used
        ), (args, err)


def test_an_unknown_tier_names_the_option_or_the_file_field(app, tmp_path):
    """`--tier gold` said "unknown tier 'gold' for inferencex-..." naming no option."""
    r = run(app, "cost", "h100:1000", "--tier", "gold")
    assert r.exit_code != 0
    assert "--tier must be one of owned, rental (got 'gold')" in str(r.exception)
    f = tmp_path / "tco.yaml"
    f.write_text("tier: gold\n")
    r = run(app, "cost", "h100:1000", "--tco", str(f))
    assert f"--tco {f}: tier (--tier) must be one of" in str(r.exception)
    f.write_text("rate_set: nope\n")
    r = run(app, "cost", "h100:1000", "--tco", str(f))
    assert f"--tco {f}: rate_set (--rates) must be one of" in str(r.exception)
