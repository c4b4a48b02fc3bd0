"""accelbench's YAML loader: safe_load's documents, but a key given twice is an error
(PyYAML keeps the last without a word: a TCO file's second usd_per_gpu_hour won)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.yamlfile import DuplicateKeyError, dump_yaml, load_yaml


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("usd_per_gpu_hour: 2.0\nusd_per_gpu_hour: 4.0\n",
         "line 2: key 'usd_per_gpu_hour' given twice (first on line 1)"),
        ("a:\n  x: 1\n  y: 2\n  x: 3\n", "line 4: key 'x' given twice (first on line 2)"),
        ("{a: 1, a: 2}\n", "line 1: key 'a' given twice (first on line 1)"),
        ("- {k: 1}\n- {k: 1, k: 1}\n", "key 'k' given twice"),
        ("1: a\n1: b\n", "key 1 given twice"),
    ],
)  # fmt: skip
def test_a_key_given_twice_is_refused(text, message):
    assert yaml.safe_load(text) is not None  # PyYAML alone: no error, the last one wins
    with pytest.raises(DuplicateKeyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_yaml(text)


def test_merge_keys_may_be_overridden():
    text = "base: &b {x: 1, y: 2}\nmine:\n  <<: *b\n  x: 3\n"
    assert (
        load_yaml(text)
        == yaml.safe_load(text)
        == {
            "base": {"x": 1, "y": 2},
            "mine": {"x": 3, "y": 2},
        }
    )


_KEYS = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans())
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(doc=st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=5), flow=st.booleans())
def test_property_documents_read_as_safe_load_and_a_repeated_key_is_named(doc, flow):
    """Without a repeated key, the document written, as yaml.safe_load reads it too (text
    such as '0E0' is quoted by dump_yaml); with the first key written again at the end,
    DuplicateKeyError naming it."""
    text = dump_yaml(doc, default_flow_style=flow)
    assert load_yaml(text) == yaml.safe_load(text) == doc
    key = next(iter(doc))
    again = dump_yaml({key: doc[key]}, default_flow_style=False)
    if flow:  # a flow mapping on one line: add the pair inside its braces
        twice = text.rstrip()[:-1] + ", " + again.strip().replace("\n", " ") + "}\n"
        if "\n" in again.strip():
            return  # a nested block value cannot join a flow mapping
    else:
        twice = text + again
    with pytest.raises(DuplicateKeyError) as exc:
        load_yaml(twice)
    assert f"key {key!r} given twice" in str(exc.value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e10", 1e10), ("1.0e10", 1e10), ("-1E-3", -1e-3), (".5e3", 500.0), ("1e308", 1e308),
        ("1e-300", 1e-300), ("-.5", -0.5), ("+2E+2", 200.0), ("1e+16", 1e16),
        # YAML 1.1's forms and integers are read as before
        ("1.0e+10", 1e10), ("1.5", 1.5), ("1.", 1.0), ("7", 7), ("1_000", 1000), ("0x1F", 31),
    ],
)  # fmt: skip
def test_yaml_1_2_float_forms_are_numbers(text, value):
    """PyYAML follows YAML 1.1, whose floats need a dot and a signed exponent: `1.0e10`
    was the string '1.0e10' and `cost --tco` said "must be a number (got '1.0e10')"."""
    got = load_yaml(f"x: {text}\n")["x"]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text", ["'1e10'", '"1.0e10"', "1e", "e5", "1.2.3", "1e5x", "1e5.0"])
def test_quoted_or_malformed_numbers_stay_text(text):
    assert isinstance(load_yaml(f"x: {text}\n")["x"], str)


def test_infinities_and_nan_keep_their_forms():
    """`.inf`/`.nan` stay YAML's; an exponent past the float range is an infinity, as
    YAML 1.1's `1.0e+400` was, for each reader's NaN/infinity check to refuse."""
    doc = load_yaml("a: .inf\nb: -.Inf\nc: .nan\nd: 1e400\ne: -1.0e400\n")
    assert doc["a"] == doc["d"] == float("inf") and doc["b"] == doc["e"] == -float("inf")
    assert doc["c"] != doc["c"]


def _exponent_forms(x: float) -> list[str]:
    """``x`` written as a user might: repr, and mantissa/exponent with and without a dot,
    an exponent sign, a capital E."""
    m, e = f"{x:.17e}".split("e")
    exp = int(e)
    forms = [repr(x), f"{m}e{exp}", f"{m}E{exp:+d}", f"{m.rstrip('0')}e{exp}"]
    if x == int(x) and abs(x) < 1e15:
        digits = str(int(x)).rstrip("0") or "0"
        forms.append(f"{digits}e{len(str(abs(int(x)))) - len(digits.lstrip('-'))}")
    return forms


@settings(max_examples=300, deadline=None)
@given(x=st.floats(allow_nan=False, allow_infinity=False))
def test_property_a_finite_float_reads_back_as_itself(x):
    """Any finite float, written by repr() or in exponent form (with or without a dot,
    an exponent sign, a capital E), reads back as that float, in a mapping or a list."""
    for form in _exponent_forms(x):
        assert load_yaml(f"v: {form}\n")["v"] == x, form
        assert load_yaml(f"[{form}]")[0] == x, form


def test_dump_yaml_quotes_text_that_reads_as_a_number():
    doc = {"id": "1e5", "v": ".5", "n": 1e5}
    assert yaml.safe_dump(doc).startswith("id: 1e5\n")  # bare: load_yaml reads 100000.0
    assert load_yaml(dump_yaml(doc)) == doc


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(min_value=-(10**400), max_value=10**400),
    form=st.sampled_from(["{}", "{:_}", "0x{:x}", "0{:o}"]),  # 0755: YAML 1.1 octal
)
def test_property_an_integer_past_the_float_range_is_refused_naming_its_line(n, form):
    """Any YAML integer (decimal, with underscores, hex, octal): within the float range it
    reads as itself; past it one NumberRangeError (a YAMLError, which every reader turns
    into its one-line refusal) naming the line. A 400-digit catalog figure or TCO field
    stopped the reader with OverflowError, exit 70."""
    import sys

    from accelbench.yamlfile import NumberRangeError

    text = ("-" if n < 0 else "") + form.format(abs(n))
    doc = f"a: 1\nvalue: {text}\n"
    if abs(n) > sys.float_info.max:
        with pytest.raises(NumberRangeError, match=r"^line 2: the integer .* past the float"):
            load_yaml(doc)
    else:
        assert load_yaml(doc) == {"a": 1, "value": n}


def test_cli_huge_integer_in_a_catalog_or_tco_file_regression(tmp_path):
    """`catalog list --catalog big.yaml` and `cost h100:100 --tco big.yaml` with a 401-digit
    integer were 'internal error: OverflowError', exit 70; now exit 2 naming file and line."""
    from cli_inprocess import run_cli

    big = "1" + "0" * 400
    (tmp_path / "t.yaml").write_text(f"usd_per_gpu_hour: {big}\n")
    (tmp_path / "c.yaml").write_text(
        f"accelerators:\n  x:\n    figures:\n      memory_gib: {{value: {big}, source: s}}\n"
    )
    for args, where in ((["cost", "h100:100", "--tco", "t.yaml"], "t.yaml: line 1"),
                        (["catalog", "list", "--catalog", "c.yaml"], "c.yaml: line 4")):  # fmt: skip
        code, out, err, _ = run_cli(args, tmp_path)
        assert code == 2 and not out
        (line,) = err.strip().splitlines()
        assert where in line and "past the float range" in line, line
