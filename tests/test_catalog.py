"""Accelerator catalog: every FACTS.md accelerator, sourced figures, ranges, user files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.errors import AccelbenchError
from accelbench.hardware.catalog import (
    FIGURES,
    find_accelerator,
    host_template,
    load_catalog,
    parse_catalog,
    shipped_catalog,
)
from accelbench.yamlfile import load_yaml

FACTS_IDS = (
    "h100",
    "h200",
    "b200",
    "gb200",
    "b300",
    "gb300",
    "mi300x",
    "mi325x",
    "mi350x",
    "mi355x",
)


def test_every_facts_accelerator_is_shipped():
    cat = shipped_catalog()
    assert set(FACTS_IDS) <= set(cat)
    for aid in FACTS_IDS:
        a = cat[aid]
        for key in ("memory_gib", "memory_bw_tbs", "bf16_tflops", "fp8_tflops", "tdp_w"):
            assert a.figure(key).value is not None, (aid, key)


def test_every_figure_carries_source_date_and_status():
    for a in shipped_catalog().values():
        for key, f in a.figures.items():
            assert f.source, (a.id, key)
            assert f.date, (a.id, key)
            assert f.status in ("confirmed", "estimate", "conflict", "unconfirmed")
            assert a.source_title(key) and a.source_title(key) != f.source, (a.id, key)
            if f.value is None:
                assert f.status == "unconfirmed" or f.note, (a.id, key)


def test_spot_values_from_facts():
    cat = shipped_catalog()
    assert cat["h100"].figure("fp8_tflops").value == 1979  # dense, not the sparse 3958
    assert cat["h200"].figure("memory_bw_tbs").value == 4.8  # not 8 TB/s
    assert cat["mi325x"].figure("memory_gib").value == 256  # not 192
    assert cat["mi355x"].figure("memory_gib").value == 288
    assert cat["mi355x"].figure("fp4_tflops").value == 10066
    assert cat["mi300x"].figure("bf16_tflops").value == 1307.4
    assert cat["gb300"].figure("fp4_tflops").value == 15000
    assert cat["h100"].figure("fp4_tflops").value is None


def test_memory_is_binary_and_stored_in_bytes():
    # vendor HBM "GB" are GiB: an H200 "141 GB" reports 143,771 MiB = 140.4 GiB
    h200 = shipped_catalog()["h200"]
    assert h200.memory_bytes() == 141 * 2**30
    assert h200.memory_bytes() / 1e9 == pytest.approx(151.4, abs=0.05)


def test_conflicting_sources_are_kept_as_ranges():
    cat = shipped_catalog()
    mem = cat["b200"].figure("memory_gib")
    assert (mem.status, mem.min, mem.max, mem.value) == ("conflict", 180, 192, 180)
    gb300 = cat["gb300"].figure("memory_gib")  # 278 usable, 288 physical
    assert (gb300.status, gb300.min, gb300.max) == ("conflict", 278, 288)
    assert cat["gb300"].memory_bytes() == 278 * 2**30
    bw = cat["b200"].figure("memory_bw_tbs")
    assert (bw.min, bw.max) == (7.7, 8.0)
    tdp = cat["b300"].figure("tdp_w")
    assert (tdp.status, tdp.min, tdp.max) == ("conflict", 1100, 1400)
    assert cat["mi350x"].figure("bf16_tflops").status == "estimate"  # "~2300"
    # estimates are labelled as such
    for aid in ("h100", "h200"):
        assert cat[aid].figure("gemm_fraction").status == "estimate", aid


def test_scale_up_bandwidth_is_per_gpu_one_direction_from_the_source():
    cat = shipped_catalog()
    expected = {"h100": 450, "h200": 450, "b200": 900, "gb200": 900, "b300": 900}
    expected |= {"gb300": 900, "mi300x": 448, "mi325x": 448, "mi355x": 538}
    for aid, gbs in expected.items():
        f = cat[aid].figure("scale_up_gbs_unidir")
        assert f.value == gbs and "one direction" in f.note, aid
    # the source does not list MI350X: missing, and why
    f = cat["mi350x"].figure("scale_up_gbs_unidir")
    assert f.value is None and f.status == "unconfirmed" and "not MI350X" in f.note


def test_lookup_by_alias_and_suggestions():
    assert find_accelerator("NVIDIA H100 SXM").id == "h100"
    assert find_accelerator("Instinct-MI300X").id == "mi300x"
    with pytest.raises(AccelbenchError, match="did you mean: mi355x"):
        find_accelerator("mi355")
    with pytest.raises(AccelbenchError, match="unknown accelerator 'tpu-v9'"):
        find_accelerator("tpu-v9")


def _write(tmp_path, doc) -> str:
    p = tmp_path / "cat.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def _user_doc(**figures):
    figs = {
        "memory_gib": 512,
        "memory_bw_tbs": 0.4,
        "bf16_tflops": 10,
        "fp8_tflops": None,
        **figures,
    }
    return {
        "sources": {"me": {"title": "my measurements", "date": "2026-11"}},
        "accelerators": {
            "cpu-host": {
                "name": "my CPU host",
                "kind": "cpu",
                "defaults": {"source": "me", "date": "2026-11", "status": "confirmed"},
                "figures": {k: {"value": v} for k, v in figs.items()},
            }
        },
    }


def test_user_catalog_adds_a_cpu_host(tmp_path, monkeypatch):
    monkeypatch.delenv("ACCELBENCH_CATALOG", raising=False)
    path = _write(tmp_path, _user_doc())
    cat = load_catalog([path])
    a = find_accelerator("cpu-host", cat)
    assert a.origin == path and a.require("memory_bw_tbs") == 0.4
    assert a.source_title("memory_gib") == "my measurements"
    # also through the environment variable
    monkeypatch.setenv("ACCELBENCH_CATALOG", path)
    assert "cpu-host" in load_catalog()


def test_user_catalog_overrides_a_shipped_entry(tmp_path):
    doc = _user_doc()
    doc["accelerators"] = {"h100": doc["accelerators"]["cpu-host"]}
    cat = load_catalog([_write(tmp_path, doc)])
    assert cat["h100"].figure("memory_gib").value == 512


@pytest.mark.parametrize(
    "figures, message",
    [
        ({"memory_gib": -1}, "memory_gib value must be a finite number >= 0"),
        ({"memory_gib": float("nan")}, "memory_gib value must be a finite number >= 0"),
        ({"memory_gb": 80}, "unknown figure 'memory_gb' .*did you mean memory_gib"),
        ({"memory_bw_tbs": 0}, "memory_bw_tbs value must be at least 1e-06"),
        ({"memory_bw": 1.0}, "unknown figure 'memory_bw' .*did you mean memory_bw_tbs"),
        ({"tdp_w": "lots"}, "tdp_w value must be a number"),
    ],
)
def test_bad_user_catalog_names_the_field(tmp_path, figures, message):
    with pytest.raises(AccelbenchError, match=message):
        load_catalog([_write(tmp_path, _user_doc(**figures))])


def test_missing_catalog_file(tmp_path):
    with pytest.raises(AccelbenchError, match="--catalog names .*missing.yaml, which does not"):
        load_catalog([str(tmp_path / "missing.yaml")])


@pytest.mark.parametrize("env", [True, False])
def test_a_catalog_that_is_a_directory_is_named_with_where_it_came_from(tmp_path, monkeypatch, env):
    """ACCELBENCH_CATALOG=DIR said "catalog file not found: DIR" (the folder exists, and the
    variable was not named): the message says who named it and that it is a directory."""
    d = tmp_path / "cat"
    d.mkdir()
    if env:
        monkeypatch.setenv("ACCELBENCH_CATALOG", str(d))
    with pytest.raises(AccelbenchError) as err:
        load_catalog(None if env else [str(d)])
    who = "ACCELBENCH_CATALOG" if env else "--catalog"
    assert f"{who} names {d}, which is a directory" in str(err.value)


def test_host_template_is_a_valid_catalog_with_unconfirmed_gaps():
    text = host_template("my-host")
    cat = parse_catalog(yaml.safe_load(text), "template")
    a = cat["my-host"]
    assert a.kind == "cpu"
    assert a.figure("memory_gib").value > 0 and a.figure("memory_gib").status == "confirmed"
    bw = a.figure("memory_bw_tbs")
    assert bw.value is None and bw.status == "unconfirmed"
    with pytest.raises(AccelbenchError, match="has no memory_bw_tbs"):
        a.require("memory_bw_tbs")


def test_cpu_host_from_template_plans_once_filled_in(tmp_path):
    from accelbench.plan.planner import build_plan

    doc = yaml.safe_load(host_template("cpu-host"))
    path = tmp_path / "host.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(AccelbenchError, match="cpu-host has no FLOPS figure for bf16"):
        build_plan("llama-3.1-8b", "cpu-host", context=2048, catalog_files=[path])
    figs = doc["accelerators"]["cpu-host"]["figures"]
    figs["bf16_tflops"].update(value=1.0, status="estimate")
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(AccelbenchError, match="cpu-host has no memory_bw_tbs"):
        build_plan("llama-3.1-8b", "cpu-host", context=2048, catalog_files=[path])
    figs["memory_bw_tbs"].update(value=0.05, status="estimate")
    figs["memory_gib"]["value"] = 64.0
    path.write_text(yaml.safe_dump(doc))
    p = build_plan("llama-3.1-8b", "cpu-host", context=2048, catalog_files=[path])
    # batch 1 is memory-bound: (weights read + 2048 x 128 KiB) / 0.05 TB/s
    first = p.rows[0]
    assert first.physical.bound == "memory" and first.expected.bound == "memory"
    d = p.as_dict()
    assert d["hardware"]["bandwidth_tbs_per_gpu"] == 0.05
    assert d["hardware"]["memory_bytes_per_gpu"] == 64 * 2**30
    assert d["hardware"]["sources"]["memory_bw_tbs"]["status"] == "estimate"


def test_damaged_user_catalogs_are_one_line(tmp_path):
    p = tmp_path / "bad.yaml"
    for text in ("accelerators: {x: {figures: [1, 2]}}", "accelerators: {x: {aliases: 5}}"):
        p.write_text(text)
        with pytest.raises(AccelbenchError, match="must be a"):
            load_catalog([p])
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(AccelbenchError, match="cannot read catalog"):
        load_catalog([p])


# -- a key a catalog level does not hold is refused, never dropped ------------------------
def _full_doc() -> dict:
    """A user catalog with every level a key can sit at: top, source, entry, defaults,
    figure."""
    doc = _user_doc()
    entry = doc["accelerators"]["cpu-host"]
    entry["defaults"] = {"source": "me", "status": "estimate"}
    entry["figures"]["memory_gib"] = {"value": 512, "source": "me", "status": "confirmed"}
    return doc


# where each level sits in _full_doc()
_LEVELS = {
    "catalog": (),
    "source": ("sources", "me"),
    "entry": ("accelerators", "cpu-host"),
    "defaults": ("accelerators", "cpu-host", "defaults"),
    "figure": ("accelerators", "cpu-host", "figures", "memory_gib"),
}


@pytest.mark.parametrize(
    ("level", "key", "message"),
    [
        # figures beside `figures:` instead of under it: the entry planned without them
        ("entry", "bf16_tflops", "unknown key.*bf16_tflops.*put it under 'figures:'"),
        ("entry", "memory_gb", r"accelerator 'cpu-host': unknown key\(s\) memory_gb"),
        ("figure", "unit", "figure memory_gib: unknown key.*unit"),
        ("defaults", "note", "defaults: unknown key.*note"),
        ("source", "url", "source 'me': unknown key.*url"),
        ("catalog", "accelerator", r"unknown key\(s\) accelerator \(known: schema"),
    ],
)
def test_a_key_a_catalog_level_does_not_hold_is_refused(tmp_path, level, key, message):
    doc = _full_doc()
    node = doc
    for k in _LEVELS[level]:
        node = node[k]
    node[key] = 1
    with pytest.raises(AccelbenchError, match=message):
        load_catalog([_write(tmp_path, doc)])


def test_a_figure_given_twice_is_refused(tmp_path):
    doc = yaml.safe_dump(_full_doc(), sort_keys=False)
    text = doc.replace(
        "      memory_gib:\n", "      memory_gib: {value: 80}\n      memory_gib:\n", 1
    )
    p = tmp_path / "cat.yaml"
    p.write_text(text)
    with pytest.raises(AccelbenchError, match="key 'memory_gib' given twice"):
        load_catalog([p])


def test_the_full_doc_and_the_shipped_catalog_load():
    """Every key the levels hold is known (the shipped catalog uses them all)."""
    from accelbench.hardware.catalog import (
        CATALOG_KEYS,
        DEFAULT_KEYS,
        ENTRY_KEYS,
        FIGURE_KEYS,
        SOURCE_KEYS,
    )

    assert parse_catalog(_full_doc(), "test")["cpu-host"].figure("memory_gib").value == 512
    text = Path(__file__).parents[1] / "src/accelbench/hardware/data/accelerators.yaml"
    data = yaml.safe_load(text.read_text())
    used: dict[str, set[str]] = {"entry": set(), "figure": set(), "defaults": set()}
    for e in data["accelerators"].values():
        used["entry"] |= set(e)
        used["defaults"] |= set(e.get("defaults") or {})
        for f in e.get("figures", {}).values():
            used["figure"] |= set(f) if isinstance(f, dict) else set()
    assert set(data) == set(CATALOG_KEYS)
    assert used["entry"] == set(ENTRY_KEYS)
    assert used["figure"] | {"date"} == set(FIGURE_KEYS)  # a figure may carry its own date
    assert used["defaults"] == set(DEFAULT_KEYS)
    assert {k for s in data["sources"].values() for k in s} == set(SOURCE_KEYS)


@settings(max_examples=60, deadline=None)
@given(
    level=st.sampled_from(sorted(_LEVELS)),
    key=st.text(min_size=1, max_size=12).filter(lambda k: k.strip() == k),
)
def test_property_any_unknown_key_at_any_level_is_one_line(level, key):
    """Whatever the level and the key, a key the level does not hold is refused in one
    AccelbenchError naming it; a key it holds is not (the document still parses)."""
    from accelbench.hardware.catalog import (
        CATALOG_KEYS,
        DEFAULT_KEYS,
        ENTRY_KEYS,
        FIGURE_KEYS,
        SOURCE_KEYS,
    )

    known = {"catalog": CATALOG_KEYS, "source": SOURCE_KEYS, "entry": ENTRY_KEYS,
             "defaults": DEFAULT_KEYS, "figure": FIGURE_KEYS}[level]  # fmt: skip
    if key in known:
        return
    doc = _full_doc()
    node = doc
    for k in _LEVELS[level]:
        node = node[k]
    node[key] = "x"
    with pytest.raises(AccelbenchError) as exc:
        parse_catalog(doc, "test")
    from accelbench.console import one_line  # as the CLI prints an error

    shown = one_line(exc.value)
    assert one_line(key) in shown and "unknown key" in shown
    assert len(shown.splitlines()) == 1


@pytest.mark.parametrize(("text", "value"), [("5.12e2", 512.0), ("512E0", 512.0), ("4e-1", 0.4)])
def test_a_catalog_figure_in_exponent_form_is_a_number(tmp_path, text, value):
    """PyYAML's YAML 1.1 rules read `5.12e2` as text: "must be a number (got '5.12e2')"."""
    path = _write(tmp_path, _user_doc(memory_gib=123456))
    Path(path).write_text(Path(path).read_text().replace("123456", text))
    assert load_catalog([path])["cpu-host"].figure("memory_gib").value == value


def test_host_template_quotes_an_id_that_reads_as_a_number(tmp_path):
    text = host_template("1e5")
    cat = parse_catalog(load_yaml(text), "template")
    assert list(cat) == ["1e5"]


def test_a_figure_past_its_physical_limit_is_refused_naming_file_entry_and_field(tmp_path):
    """`memory_gib: 1e308` (a finite float, read as a number since YAML 1.2 floats are)
    was accepted: a 1e308 GiB GPU then planned every model on one card."""
    path = _write(tmp_path, _user_doc(memory_gib=123456))
    Path(path).write_text(Path(path).read_text().replace("123456", "1e308"))
    with pytest.raises(AccelbenchError) as exc:
        load_catalog([path])
    msg = str(exc.value)
    assert path in msg and "'cpu-host'" in msg and "memory_gib value" in msg
    assert "0..1,048,576" in msg and len(msg.splitlines()) == 1


@settings(max_examples=80, deadline=None)
@given(
    key=st.sampled_from(sorted(FIGURES)),
    part=st.sampled_from(["value", "min", "max"]),
    factor=st.floats(min_value=0.0, max_value=1e290, allow_nan=False),
)
def test_property_every_figure_is_bounded_by_its_physical_range(key, part, factor):
    """Any figure, value or end of its range: within 0..FIGURE_MAX it is read, past it
    refused in one line naming the entry, the figure and the limit."""
    from accelbench.hardware.catalog import FIGURE_MAX

    v = FIGURE_MAX[key] * factor
    if _below_floor(key, v) and part == "value":
        return  # refused on its own: test_property_a_divisor_figure_below_its_floor...
    fig = {"value": v}
    if part == "min":
        fig = {"value": max(v, 1e-3), "min": v}
    elif part == "max":
        fig = {"value": 1e-3, "max": max(v, 1e-3)}
    doc = _user_doc()
    doc["accelerators"]["cpu-host"]["figures"][key] = fig
    if part == "min" and _below_floor(key, v):
        with pytest.raises(AccelbenchError, match=f"figure {key} min must be at least"):
            parse_catalog(doc, "user.yaml")
    elif any(fig.get(p, 0) > FIGURE_MAX[key] for p in ("value", "min", "max")):
        with pytest.raises(AccelbenchError) as exc:
            parse_catalog(doc, "user.yaml")
        msg = str(exc.value)
        assert f"user.yaml: accelerator 'cpu-host' figure {key}" in msg
        assert f"0..{FIGURE_MAX[key]:,.0f}" in msg and len(msg.splitlines()) == 1
    else:
        assert parse_catalog(doc, "user.yaml")["cpu-host"].figure(key).known


def test_the_shipped_catalog_is_within_the_ranges():
    from accelbench.hardware.catalog import FIGURE_MAX, shipped_catalog

    assert set(FIGURE_MAX) == set(FIGURES)
    for acc in shipped_catalog().values():
        for key, fig in acc.figures.items():
            ends = (fig.value, fig.min, fig.max)
            assert all(v is None or 0 <= v <= FIGURE_MAX[key] for v in ends)


def test_a_value_outside_its_own_range_is_refused_naming_file_entry_and_field(tmp_path):
    """`memory_gib: {value: 300, min: 268, max: 288}` was read: the table showed 300, a fit
    used 268 (memory_bytes reads the lower end) and nothing said the figure contradicts
    itself. Refused in one line naming file, entry and figure; the CLI exits 2."""
    from cli_inprocess import run_cli

    doc = _user_doc()
    doc["accelerators"]["cpu-host"]["figures"]["memory_gib"] = {"value": 300, "min": 268,
                                                                "max": 288}  # fmt: skip
    path = _write(tmp_path, doc)
    with pytest.raises(AccelbenchError) as exc:
        load_catalog([path])
    msg = str(exc.value)
    assert msg == (f"{path}: accelerator 'cpu-host' figure memory_gib value 300 is outside "
                   "its own range (min 268, max 288)")  # fmt: skip
    code, out, err, _ = run_cli(["catalog", "list", "--catalog", path], tmp_path)
    assert code == 2 and not out
    (line,) = err.strip().splitlines()
    assert path in line and "'cpu-host'" in line and "memory_gib value 300" in line


_END = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e6, allow_nan=False))


@settings(max_examples=120, deadline=None)
@given(
    key=st.sampled_from(["price_usd", "tdp_w", "memory_gib"]),
    value=st.floats(min_value=1e-3, max_value=1e6, allow_nan=False),
    lo=_END,
    hi=_END,
)
def test_property_a_figure_is_read_iff_min_value_max_are_in_order(key, value, lo, hi):
    """Any (value, min, max), each end optional: read iff min <= value <= max (an end
    not given bounds nothing); otherwise one line naming the entry and the figure."""
    fig = {"value": value, **({"min": lo} if lo is not None else {}),
           **({"max": hi} if hi is not None else {})}  # fmt: skip
    doc = _user_doc()
    doc["accelerators"]["cpu-host"]["figures"][key] = fig
    ok = (lo is None or lo <= value) and (hi is None or value <= hi)
    ok = ok and not any(x is not None and _below_floor(key, x) for x in (lo, hi))
    if ok:
        f = parse_catalog(doc, "user.yaml")["cpu-host"].figure(key)
        assert (f.value, f.min, f.max) == (value, lo, hi)
        assert f.lower <= f.value <= f.upper  # type: ignore[operator]
    else:
        with pytest.raises(AccelbenchError) as exc:
            parse_catalog(doc, "user.yaml")
        msg = str(exc.value)
        assert msg.startswith(f"user.yaml: accelerator 'cpu-host' figure {key}")
        assert len(msg.splitlines()) == 1


def test_every_embedded_figure_lies_within_its_own_range():
    for acc in shipped_catalog().values():
        for key, fig in acc.figures.items():
            if fig.value is not None:
                assert (fig.min is None or fig.min <= fig.value) and (
                    fig.max is None or fig.value <= fig.max
                ), (acc.id, key)


def _below_floor(key: str, v: float) -> bool:
    """Whether ``v`` is under the catalog's floor for ``key`` (0 is "none" for FLOPS)."""
    from accelbench.hardware.catalog import FIGURE_MIN, ZERO_IS_NONE

    return key in FIGURE_MIN and v < FIGURE_MIN[key] and not (v == 0 and key in ZERO_IS_NONE)


@settings(max_examples=100, deadline=None)
@given(
    key=st.sampled_from(["memory_gib", "memory_bw_tbs", "bf16_tflops", "fp8_tflops",
                         "fp4_tflops", "gemm_fraction", "hbm_fraction"]),
    part=st.sampled_from(["value", "min", "max"]),
    scale=st.floats(min_value=0.0, max_value=1.0, allow_nan=False, exclude_max=True),
)  # fmt: skip
def test_property_a_divisor_figure_below_its_floor_is_refused(key, part, scale):
    """A figure a plan divides by (memory, bandwidth, FLOPS, the shares of a peak), in
    any part, below its floor (0 included, except a FLOPS figure's 0: no such rate) is
    refused in one line naming file, entry, figure and floor; at its floor every plan
    figure is finite. 5e-324 TB/s was read and the plan's JSON held Infinity; a
    gemm_fraction of 0 stopped the plan with ZeroDivisionError (exit 70)."""
    from accelbench.hardware.catalog import FIGURE_MIN, ZERO_IS_NONE

    floor = FIGURE_MIN[key]
    v = floor * scale
    fig: dict[str, float] = {"value": v}
    if part == "min":
        fig = {"value": floor, "min": v}
    elif part == "max":
        fig = {"max": v}
    doc = _user_doc()
    doc["accelerators"]["cpu-host"]["figures"][key] = fig
    if v == 0 and key in ZERO_IS_NONE:
        assert parse_catalog(doc, "user.yaml")["cpu-host"].figure(key)  # 0: no such rate
        return
    with pytest.raises(AccelbenchError) as exc:
        parse_catalog(doc, "user.yaml")
    msg = str(exc.value)
    assert msg.startswith(f"user.yaml: accelerator 'cpu-host' figure {key} {part} ")
    assert f"must be at least {floor:g}" in msg and len(msg.splitlines()) == 1


def test_a_plan_at_every_floor_is_finite(tmp_path):
    """Every divisor figure at its floor, the largest model and context: no Infinity."""
    import json
    import math

    from accelbench.hardware.catalog import FIGURE_MIN
    from accelbench.plan.planner import build_plan

    doc = _user_doc(**{k: v for k, v in FIGURE_MIN.items() if k != "memory_gib"})
    doc["accelerators"]["cpu-host"]["figures"]["memory_gib"] = {"value": float(1 << 20)}
    plan = build_plan(
        "llama-3.1-405b", "cpu-host", isl=10_000_000, osl=10_000_000,
        catalog_files=[_write(tmp_path, doc)],
    )  # fmt: skip
    rows = [r.physical.step_s for r in plan.rows] + [r.expected.step_s for r in plan.rows]
    assert rows and all(math.isfinite(x) for x in rows)
    json.dumps(plan.as_dict(), allow_nan=False)  # ValueError on any inf or nan


@pytest.mark.parametrize(
    "figure, message",
    [
        ({"gemm_fraction": 0}, "gemm_fraction value must be at least 0.001"),
        ({"memory_bw_tbs": 5e-324}, "memory_bw_tbs value must be at least 1e-06"),
        ({"memory_gib": {"value": 512, "min": 0}}, "memory_gib min must be at least"),
    ],
)
def test_cli_refuses_a_divisor_figure_below_its_floor(tmp_path, figure, message):
    """`gemm_fraction: 0` was exit 70 (ZeroDivisionError); 5e-324 TB/s printed Infinity;
    `memory_gib: {min: 0}` planned a GPU of 0 bytes. Now exit 2, one line."""
    from cli_inprocess import run_cli

    doc = _user_doc()
    for k, f in figure.items():
        doc["accelerators"]["cpu-host"]["figures"][k] = f if isinstance(f, dict) else {"value": f}
    path = _write(tmp_path, doc)
    args = ["plan", "llama-3.1-8b", "-a", "cpu-host", "--catalog", path, "-c", "2048"]
    code, out, err, _ = run_cli(args, tmp_path)
    assert code == 2 and not out
    (line,) = err.strip().splitlines()
    assert path in line and message in line


_NOT_TEXT = st.one_of(
    st.booleans(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=80, deadline=None)
@given(
    field=st.sampled_from(["name", "vendor", "kind", "arch", "memory_type", "scale_up",
                           "alias", "source", "date", "status", "note"]),
    bad=_NOT_TEXT,
)  # fmt: skip
def test_property_a_text_field_of_another_type_is_refused(field, bad):
    """Any descriptive field (an entry's name, vendor, kind, arch, memory type, scale-up,
    an alias; a figure's source, date, status, note) given a list, a mapping or a
    boolean is refused in one line naming file, entry and field: `name: [1, 2]` was shown
    as "[1, 2]", `aliases: [1, null]` were read as the names "1" and "None"."""
    doc = _user_doc()
    entry = doc["accelerators"]["cpu-host"]
    if field == "alias":
        entry["aliases"] = ["my-host", bad]
    elif field in ("source", "date", "status", "note"):
        entry["figures"]["memory_gib"][field] = bad
    else:
        entry[field] = bad
    with pytest.raises(AccelbenchError) as exc:
        parse_catalog(doc, "user.yaml")
    msg = str(exc.value)
    assert msg.startswith("user.yaml: accelerator 'cpu-host'") and len(msg.splitlines()) == 1
    assert field in msg


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(schema="accelbench.accelerators/9"), "schema 'accelbench.acc"),
        (lambda d: d["accelerators"].update({"": d["accelerators"]["cpu-host"]}),
         "accelerator id '' must hold a letter or digit"),
        (lambda d: d["accelerators"]["cpu-host"].update(aliases=[1, None]),
         "an alias must hold a letter or digit"),
        (lambda d: d["accelerators"]["cpu-host"].update(aliases=["H100"]),
         "'cpu-host': 'H100' already names 'h100' (shipped)"),
        (lambda d: d["accelerators"].update(myx=dict(d["accelerators"]["cpu-host"])),
         "'myx': 'myx' already names|'cpu-host' already names"),
    ],
)  # fmt: skip
def test_cli_refuses_a_catalog_whose_names_or_schema_mislead(tmp_path, edit, message):
    """Each was read without a word: an unknown schema as this one, an entry id '' (a
    part nobody can name), aliases [1, null], and an alias another entry holds (the user
    entry's `h100` lost to the shipped H100: `plan -a h100` planned the shipped part).
    Now exit 2 and one line naming the file."""
    from cli_inprocess import run_cli

    doc = _user_doc()
    edit(doc)
    if "myx" in doc["accelerators"]:  # two entries, one alias
        doc["accelerators"]["myx"]["aliases"] = ["cpu-host"]
    path = _write(tmp_path, doc)
    code, out, err, _ = run_cli(["catalog", "list", "--catalog", path], tmp_path)
    assert code == 2 and not out
    (line,) = err.strip().splitlines()
    assert path in line
    assert any(m in line for m in message.split("|")), line


@settings(max_examples=40, deadline=None)
@given(accel_id=st.one_of(st.sampled_from(["h100-sxm", "nvidia-h200", "MI355X", "!!", "--",
                                           "cpu-host", "h100", "my.host_2"]),
                          st.text(alphabet="ab-_.!1", min_size=1, max_size=6)))  # fmt: skip
def test_property_the_template_prints_only_what_the_reader_takes(accel_id):
    """`catalog template --id ID` printed entries the catalog reader refuses (an id with
    no letter or digit, an id that is a shipped part's alias): the user found out only
    when the saved file was read. Now the template is refused with --id named, iff the
    reader would refuse what it prints."""
    from accelbench.hardware.catalog import _norm

    shipped = shipped_catalog()
    other = {_norm(n): a.id for a in shipped.values() for n in (a.id, *a.aliases)}
    key = _norm(accel_id)
    bad = not key or (key in other and other[key] != accel_id.lower())
    if bad:
        with pytest.raises(AccelbenchError, match="^" + re.escape(f"--id {accel_id!r}: template:")):
            host_template(accel_id)
    else:
        text = host_template(accel_id)
        assert accel_id.lower() in parse_catalog(yaml.safe_load(text), "t")
