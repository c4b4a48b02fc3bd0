"""Every shipped capture through every parser that applies, under mutations: cut at many
points, a byte-order mark, CRLF line ends, a tool's warning line before the data, and
"N/A" in place of each value. Each mutated file must give either a parse that reports
what it lost or one clear error - never a traceback, never invented data, and never a
"pass" verdict when data is missing.

Plus the regression tests for the held-out defect classes of issue 14, each built from a
public capture of the same layout (tests/fixtures/*/SOURCES.md)."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from accelbench.doctor import DoctorInputs, Status, run_doctor
from accelbench.doctor import parsers as dp
from accelbench.doctor.inputs import CAPTURE_OPTIONS
from accelbench.doctor.kernel_log import scan_kernel_log
from accelbench.errors import AccelbenchError
from accelbench.health.check import judge
from accelbench.telemetry.parsers import DESCRIPTIONS, detect_format, identify, parse_capture
from accelbench.telemetry.parsers.text import not_text
from conftest import FIXTURES, fixture_file

PREAMBLE = "WARNING: User is missing the following required groups: render, video. Please add user to these groups.\n"  # noqa: E501 - amd-smi's own words (ROCm/amdsmi#130)
CUTS = 10  # cut points per file (plus the header region)

TELEMETRY = sorted(p for p in (FIXTURES / "telemetry").iterdir() if p.name != "SOURCES.md")
DOCTOR = sorted(p for p in (FIXTURES / "doctor").iterdir() if p.name != "SOURCES.md")

# doctor capture prefix -> (parser, DoctorInputs field or None)
DOCTOR_PARSERS: list[tuple[str, Callable[[str], Any], str | None]] = [
    ("kernel-log", scan_kernel_log, "kernel_log"),
    ("lspci", dp.parse_lspci, None),  # lspci has no end marker: a cut is undetectable
    ("nvidia-smi_topo", dp.parse_nvidia_topo, "nvidia_topo"),
    ("nvidia-smi__", dp.parse_nvidia_smi, "nvidia_smi"),
    ("rocm-smi", dp.parse_rocm_smi, "rocm_smi"),
    ("amd-smi", dp.parse_amd_smi, "amd_smi"),
    ("rocminfo", dp.parse_rocminfo, "rocminfo"),
    ("vllm-collect-env", dp.parse_collect_env, "collect_env"),
]


def doctor_parser(path: Path) -> tuple[Callable[[str], Any], str | None]:
    for prefix, fn, field in DOCTOR_PARSERS:
        if path.name.startswith(prefix):
            return fn, field
    raise AssertionError(f"no doctor parser for fixture {path.name}")


def doctor_field(path: Path) -> str:
    """The DoctorInputs field (the option) that reads this fixture."""
    return doctor_parser(path)[1] or "lspci"


def run_capture(field: str, path: Path) -> Any:
    return run_doctor(DoctorInputs(**{field: [path] if field == "amd_smi" else path}))


def refused(field: str, path: Path, text: str | None = None) -> str:
    """The one line the doctor refuses ``path`` with, given to ``field``'s option (the
    file is written first when ``text`` is given)."""
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(AccelbenchError) as err:
        run_capture(field, path)
    msg = str(err.value)
    one_clear_error(err.value)
    if text is not None and not_text(text):  # refused as it is read, before any sniffing
        assert f"file {path} is binary data, not text" in msg, msg
        return msg
    assert msg.startswith(f"{CAPTURE_OPTIONS[field].option} {path} is not "), msg
    assert ": it looks like " in msg and "; capture it with: " in msg, msg
    return msg


def cut_points(text: str) -> list[int]:
    """Cut offsets spread over the file, a few inside its first line (the header)."""
    n = len(text)
    first = text.find("\n") if "\n" in text else n
    pts = {max(1, first // 2), first, first + 1}
    pts |= {n * k // (CUTS + 1) for k in range(1, CUTS + 1)}
    pts |= {n - 2, n - 1}  # cut inside the last value / before the last line end
    return sorted(p for p in pts if 0 < p < len(text.rstrip()))


def na_mutations(text: str, fmt: str, limit: int = 12) -> Iterator[tuple[str, str]]:
    """(description, text) with one value replaced by N/A, up to ``limit`` per file."""
    spots: list[tuple[int, int]] = []
    if fmt in ("dcgm", "rocm-exporter", "server"):
        for m in re.finditer(r"^[A-Za-z_:][^ \n#]*(?:\{[^}]*\})?\s+(\S+)", text, re.M):
            spots.append(m.span(1))
    elif fmt == "nvidia-smi-csv":
        head = text.rstrip("\n").split("\n")
        row_start = len("\n".join(head[:-1])) + 1
        for m in re.finditer(r"(?:^|, )([^,\n]+)", head[-1]):
            spots.append((row_start + m.start(1), row_start + m.end(1)))
    elif fmt == "nvidia-smi-xml":
        spots = [m.span(1) for m in re.finditer(r">([^<>\n]+)</", text)]
    else:  # JSON
        spots = [m.span(1) for m in re.finditer(r'": "?([^",{}\[\]\n]+)"?', text)]
    step = max(1, len(spots) // limit)
    for a, b in spots[::step][:limit]:
        yield f"N/A at {a}", text[:a] + "N/A" + text[b:]


def one_clear_error(exc: BaseException) -> None:
    msg = str(exc)
    assert msg and "\n" not in msg.strip() and "Traceback" not in msg, msg


def columns(rows: list[dict[str, Any]]) -> set[tuple[Any, str]]:
    return {(r.get("device_index"), k) for r in rows for k, v in r.items() if v is not None}


def parse_or_error(text: str, fmt: str | None) -> Any:
    try:
        return parse_capture(text, fmt)
    except AccelbenchError as exc:
        one_clear_error(exc)
        return None


# --------------------------------------------------------------------------- telemetry


@pytest.mark.parametrize("path", TELEMETRY, ids=lambda p: p.name[:60])
def test_telemetry_capture_under_mutations(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    orig = parse_capture(text)
    fmt = orig.format
    assert orig.rows, path.name
    base_cols = columns(orig.rows)

    # Harmless changes: identical rows, nothing lost.
    for desc, mutated in (
        ("BOM", "\ufeff" + text),
        ("CRLF", text.replace("\n", "\r\n")),
        ("BOM+CRLF", "\ufeff" + text.replace("\n", "\r\n")),
        ("preamble", PREAMBLE + text),
    ):
        cap = parse_capture(mutated)
        assert cap.format == fmt, desc
        assert cap.rows == orig.rows and cap.lost == orig.lost, desc

    # Cut short: an error, or rows that say what they lost (and then never pass).
    for at in cut_points(text):
        cap = parse_or_error(text[:at], fmt)
        if cap is None:
            continue
        if cap.rows != orig.rows:
            assert cap.lost, f"cut at {at}: rows changed without a word"
            assert columns(cap.rows) <= base_cols, f"cut at {at}: invented data"
        if cap.lost:
            assert judge(cap.rows, cap.lost)["verdict"] != "pass", f"cut at {at}"

    # N/A in a value: the rest is kept, nothing is invented, missing signals never pass.
    for desc, mutated in na_mutations(text, fmt):
        cap = parse_or_error(mutated, fmt)
        if cap is None:
            continue
        assert columns(cap.rows) <= base_cols, desc
        verdict = judge(cap.rows, cap.lost)["verdict"]
        if judge(orig.rows, orig.lost)["verdict"] == "pass" and columns(cap.rows) < base_cols:
            assert verdict != "pass" or not _lost_required(orig.rows, cap.rows), desc


def _lost_required(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> bool:
    from accelbench.health.check import missing_signals

    return len(missing_signals(after)) > len(missing_signals(before))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from([p.name for p in TELEMETRY if p.stat().st_size < 30_000]),
    cut=st.floats(0.0, 1.0),
    bom=st.booleans(),
    crlf=st.booleans(),
    junk=st.text(max_size=20),
)
def test_telemetry_random_damage_never_crashes(
    name: str, cut: float, bom: bool, crlf: bool, junk: str
) -> None:
    text = (FIXTURES / "telemetry" / name).read_text(encoding="utf-8")
    text = text[: int(len(text) * cut)] + junk
    if crlf:
        text = text.replace("\n", "\r\n")
    if bom:
        text = "\ufeff" + text
    try:
        cap = parse_capture(text)
    except AccelbenchError as exc:
        one_clear_error(exc)
        return
    if cap.lost or not cap.rows:
        assert judge(cap.rows, cap.lost)["verdict"] != "pass"


# A line longer than the csv module's field limit (131,072 characters): a capture that ran
# into other output, or a tool printing one huge value (was an internal error, exit 70)
LONG = "x" * 200_000


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from([p.name for p in TELEMETRY]),
    where=st.floats(0.0, 1.0),
    own_line=st.booleans(),
)
def test_a_line_over_the_csv_field_limit_is_lost_or_refused(
    name: str, where: float, own_line: bool
) -> None:
    """A line of 200,000 characters anywhere in any capture (on a line of its own, or
    appended to a line): one clear error, or a parse that names what it lost (never a
    "pass" then); the csv module's error never escapes a parser."""
    lines = (FIXTURES / "telemetry" / name).read_text(encoding="utf-8").split("\n")
    at = min(int(len(lines) * where), len(lines) - 1)
    lines[at:at] = [LONG] if own_line else []
    if not own_line:
        lines[at] += LONG
    cap = parse_or_error("\n".join(lines), None)
    if cap is not None and cap.lost:
        assert judge(cap.rows, cap.lost)["verdict"] != "pass"


def test_a_query_gpu_row_with_a_field_over_the_csv_limit_is_lost(tmp_path: Path) -> None:
    """The audit's case: one field of 200,000 characters in a --query-gpu row (and 5 MB
    appended to an nvidia-smi session log): the row is left out and named by its line,
    the rows after it are read; telemetry parse, health --file and monitor --replay end
    as for any capture that lost data, never with an internal error (exit 70)."""
    from cli_inprocess import run_cli

    text = fixture_file(
        "telemetry", "nvidia-smi_query-gpu_csv__h200__drv580.159.04__load.csv"
    ).read_text()
    header, row = text.split("\n")[:2]
    damaged = row.replace("NVIDIA H200", "NVIDIA H200" + LONG)
    cap = parse_capture("\n".join([header, damaged, row]) + "\n")
    assert [r["model"] for r in cap.rows] == ["NVIDIA H200"]
    assert cap.lost == [
        "line 2 is not a row csv can read (field larger than field limit (131072)): left out"
    ]
    (tmp_path / "long_field.csv").write_text("\n".join([header, damaged]))
    session = fixture_file("telemetry", "nvidia-smi_capture__h100-80gb-hbm3__drv590.48.01.txt")
    (tmp_path / "appended.txt").write_text(session.read_text() + "x" * 5_000_000)
    for name in ("long_field.csv", "appended.txt"):
        for args, want in (
            (["telemetry", "parse", name], 0),
            (["health", "--file", name], 1),
            (["monitor", "--replay", name, "--no-exporter", "--duration", "0"], None),
        ):
            code, out, err, _ = run_cli(args, tmp_path)
            assert code != 70 and "internal error" not in err, (args, err[-300:])
            assert want is None or code == want, (args, code, err[-300:])
            if want is not None:  # (the monitor ends before its first tick)
                assert "csv can read" in out + err or "cut short" in out + err, args


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ('{"card0": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ('{"card0": {"GPU use (%)": ' + "1" * 5000 + "}}", "4300 digits"),
    ],
)
def test_json_python_will_not_read_is_one_clear_error(doc: str, why: str) -> None:
    """JSON the standard library refuses with RecursionError or ValueError (not a
    JSONDecodeError) is one clear error naming the tool (was exit 70)."""
    for fmt in (None, "rocm-smi", "amd-smi"):
        with pytest.raises(AccelbenchError, match=why) as err:
            parse_capture(doc, fmt)
        one_clear_error(err.value)


# --------------------------------------------------------------------------- doctor


def _gpu_count(report: Any) -> int:
    counts = report.get("inventory.accelerators").data.get("counts") or {}
    return max([n for c in counts.values() for n in c.values()] or [0])


@pytest.mark.parametrize("path", DOCTOR, ids=lambda p: p.name[:60])
def test_doctor_capture_under_mutations(path: Path, tmp_path: Path) -> None:
    fn, field = doctor_parser(path)
    text = path.read_text(encoding="utf-8")
    big = len(text) > 100_000
    orig = fn(text)
    for desc, mutated in (("BOM", "\ufeff" + text), ("CRLF", text.replace("\n", "\r\n"))):
        assert fn(mutated) == orig, desc

    def parse(t: str) -> None:  # no traceback; amd-smi's parser raises one clear ValueError
        try:
            fn(t)
        except ValueError as exc:
            assert field == "amd_smi", exc
            one_clear_error(exc)

    if field is None or big:
        for at in cut_points(text)[:: 3 if big else 1]:
            parse(text[:at])
        return

    def doctor(t: str) -> Any:
        f = tmp_path / path.name
        f.write_text(t, encoding="utf-8")
        try:
            return run_capture(field, f)
        except AccelbenchError:
            # Refused as holding nothing of its tool: only a cut inside the first line
            # (a banner or a header), before any of the tool's data or signature.
            refused(field, f)
            assert len(t.strip().splitlines()) <= 1, t[:200]
            assert not set(CAPTURE_OPTIONS[field].kinds) & set(identify(t))
            return None

    full = doctor(text)
    n_full = _gpu_count(full)
    for at in cut_points(text):
        parse(text[:at])
        report = doctor(text[:at])
        if report is None:
            continue
        inv = report.get("inventory.accelerators")
        if n_full and _gpu_count(report) < n_full:
            assert inv.status not in (Status.PASS, Status.NA), (at, inv.summary)
    # A warning line before the data changes nothing the doctor says about the GPUs.
    if field in ("amd_smi", "rocm_smi", "nvidia_smi"):
        assert _gpu_count(doctor(PREAMBLE + text)) == n_full


# ------------------------------------------------------- a capture of the wrong tool

# Another tool's file that really holds this tool's output: vLLM's NVIDIA collect_env
# embeds the `nvidia-smi topo -m` matrix, which --nvidia-topo reads (8 GPUs).
EMBEDDED = {
    ("vllm-collect-env__nvidia-h100-x8__cu124_drv550.90.12_vllm0.6.3_with-topo__indented4.txt",
     "nvidia_topo"),
}  # fmt: skip
WRONG_KIND = [
    (field, path)
    for field in CAPTURE_OPTIONS
    for path in DOCTOR
    if doctor_field(path) != field and (path.name, field) not in EMBEDDED
]


@pytest.mark.parametrize(
    "field, path", WRONG_KIND, ids=[f"{f}-{p.name[:40]}" for f, p in WRONG_KIND]
)
def test_a_capture_of_another_tool_is_refused_in_one_line(field: str, path: Path) -> None:
    msg = refused(field, path)
    # it says what the file is, and which option reads it
    kinds = identify(path.read_text())
    if kinds:
        own = doctor_field(path)
        option = CAPTURE_OPTIONS[own].option if own in CAPTURE_OPTIONS else "--kernel-log"
        assert f"it looks like {DESCRIPTIONS[kinds[0]]} (give it to {option})" in msg
    else:  # amd-smi version JSON names no tool
        assert "it looks like JSON of another tool" in msg


def test_an_embedded_capture_is_read() -> None:
    ((name, field),) = EMBEDDED
    report = run_capture(field, fixture_file("doctor", name))
    assert report.get("inventory.accelerators").summary == "8 NVIDIA accelerator(s)"
    assert report.get("system.numa").summary == "GPUs per NUMA node: node 0: 4, node 1: 4"


def test_nvidia_smi_q_text_given_as_the_table_is_refused(tmp_path: Path) -> None:
    # The first real GPU run: `--nvidia-smi` got a `nvidia-smi -q` file and reported
    # "accelerators unknown" with exit 0. The -q text of the H100 session (banner
    # "==============NVSMI LOG==============", no blanks) is the same kind of file.
    q = _session_section("nvidia-smi -q")
    f = tmp_path / "q.txt"
    for field in CAPTURE_OPTIONS:
        msg = refused(field, f, q)
        assert msg.endswith(f"it looks like `nvidia-smi -q` text; capture it with: "
                            f"{CAPTURE_OPTIONS[field].save}")  # fmt: skip
    assert refused("nvidia_smi", f, q) == (
        f"--nvidia-smi {f} is not the plain `nvidia-smi` table: it looks like `nvidia-smi -q` "
        "text; capture it with: nvidia-smi > FILE"
    )
    # dmon, -q -x XML and the --query-gpu CSV are named too
    assert "`nvidia-smi dmon`" in refused("nvidia_smi", f, _session_section("nvidia-smi dmon -c 5"))
    xml = fixture_file("telemetry", "nvidia-smi_q_x__a10g__drv515.105.01__dtd-v11.xml")
    assert "`nvidia-smi -q -x` XML" in refused("nvidia_smi", xml)
    csv = fixture_file(
        "telemetry", "nvidia-smi_query-gpu_csv__h100-80gb-hbm3__drv590.48.01__idle.csv"
    )
    assert "`nvidia-smi --query-gpu` CSV" in refused("nvidia_topo", csv)
    rocm_json = fixture_file("telemetry", "rocm-smi_json__mi100x4__rocm6.0.2.json")
    assert "`rocm-smi --json`" in refused("amd_smi", rocm_json)


def _own_signature(field: str, text: str) -> bool:
    """Whether ``text`` carries the signature of the tool ``field`` reads (for amd-smi
    also any JSON start: a cut JSON document may be its)."""
    if set(CAPTURE_OPTIONS[field].kinds) & set(identify(text)):
        return True
    return field == "amd_smi" and dp.has_json_start(text) and not identify(text)


_OTHER_LINES = {
    field: sorted(
        {
            ln
            for path in DOCTOR
            if doctor_field(path) != field and (path.name, field) not in EMBEDDED
            for ln in path.read_text().splitlines()[:400]
        }
    )
    for field in CAPTURE_OPTIONS
}
_CHARS = st.characters(blacklist_categories=("Cs",))  # a lone surrogate is no UTF-8


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), field=st.sampled_from(sorted(CAPTURE_OPTIONS)))
def test_text_without_the_tools_signature_is_refused(data: st.DataObject, field: str) -> None:
    # Random text, or random lines of the other tools' captures (their signatures and
    # their data in a jumble): refused in one line naming the option, never a traceback.
    text = data.draw(
        st.one_of(
            st.text(_CHARS, max_size=300),
            st.lists(st.sampled_from(_OTHER_LINES[field]), max_size=30).map("\n".join),
        )
    )
    assume(not _own_signature(field, text))
    with tempfile.TemporaryDirectory() as tmp:
        refused(field, Path(tmp) / "capture.txt", text)


def test_the_sniffer_names_every_doctor_fixture() -> None:
    for path in DOCTOR:
        kinds = identify(path.read_text())
        field = doctor_field(path)
        if field == "kernel_log":
            assert kinds == ["kernel-log"], path.name
        elif "amd-smi_version" not in path.name:  # version JSON: read, not sniffed
            assert set(CAPTURE_OPTIONS[field].kinds) & set(kinds), (path.name, kinds)


# --------------------------------------------------------------------------- regressions


def test_amd_smi_static_json_with_non_root_warning_finds_all_eight_mi300x() -> None:
    path = fixture_file(
        "doctor",
        "amd-smi_static_json__amd-mi300x-oam-x8__non-root-groups-warning-before-json__composed.json",
    )
    parsed = dp.parse_amd_smi(path.read_text())
    assert parsed["kind"] == "static" and len(parsed["gpus"]) == 8
    assert {g["name"] for g in parsed["gpus"]} == {"AMD Instinct MI300X"}
    assert "required groups" in parsed["skipped"][0]
    report = run_doctor(DoctorInputs(amd_smi=[path]))
    inv = report.get("inventory.accelerators")
    assert inv.status == Status.PASS and inv.summary == "8 AMD accelerator(s)"
    assert "CPU-only" not in json.dumps(report.to_dict())
    # The telemetry parser of the same tool skips the warning too.
    assert parse_capture(path.read_text()).notes[0].startswith("skipped text before the JSON")


def test_dmesg_decode_iso_lines_are_dated_and_not_cpu_only(tmp_path: Path) -> None:
    # The real Xid 119 log, rewritten into `dmesg --decode --time-format=iso` form
    # ("kern  :warn  : 2025-01-21T04:41:44,285060+00:00 ...", as in leptonai/gpud's
    # dmesg tests): same messages, decode prefix and ISO time.
    src = fixture_file(
        "doctor",
        "kernel-log__nvidia-hgx-dell-xe9680__xid119-gsp-rpc-timeout__kernel5.15__dmesg-ctime.log",
    ).read_text()
    months = {
        m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)
    }

    def iso(m: re.Match[str]) -> str:
        mon, day, hms, year = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        return f"kern  :warn  : {year}-{months[mon]:02d}-{day:02d}T{hms},000000+00:00 "

    text = re.sub(r"^\[\w{3} (\w{3}) +(\d+) (\S+) (\d{4})\] ", iso, src, flags=re.M)
    assert text.startswith("kern  :warn  : 2025-02-23T")
    events = scan_kernel_log(text)
    xid = next(e for e in events if e.key == "xid.119")
    assert xid.count == 5 and xid.first == "2025-02-23T16:24:18,000000+00:00"
    log = tmp_path / "k.log"
    log.write_text(text)
    inv = run_doctor(DoctorInputs(kernel_log=log)).get("inventory.accelerators")
    assert inv.status == Status.UNKNOWN and "0000:9b:00" in inv.summary


def test_query_gpu_csv_cut_inside_header_or_row_is_never_pass(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from accelbench.cli.main import app

    text = fixture_file(
        "telemetry", "nvidia-smi_query-gpu_csv__h100-80gb-hbm3__drv590.48.01__idle.csv"
    ).read_text()
    runner = CliRunner()
    for name, cut in (("header", text[:200]), ("row", text[: text.index("\n") + 300])):
        f = tmp_path / f"{name}.csv"
        f.write_text(cut)
        r = runner.invoke(app, ["health", "--file", str(f)])
        assert r.exit_code == 1, r.output
        assert "verdict: unknown" in r.output and "verdict: pass" not in r.output
        assert "[unknown] data lost" in r.output
    cap = parse_capture(text[: text.index("\n") + 300])
    assert len(cap.rows) == 1 and "of 212 fields" in cap.lost[0]


def test_truncated_rocm_smi_table_says_what_it_lost(tmp_path: Path) -> None:
    path = fixture_file(
        "doctor", "rocm-smi__amd-mi300x-x8__concise-new-layout-did-guid_rocm6.3.txt"
    )
    text = path.read_text()
    cut = text[: text.index("\n3       5")]  # three of eight GPU rows
    f = tmp_path / "rocm-smi.txt"
    f.write_text(cut)
    report = run_doctor(DoctorInputs(rocm_smi=f))
    inv = report.get("inventory.accelerators")
    assert inv.status == Status.UNKNOWN
    assert "at least 3 AMD" in inv.summary and "3 GPU(s) read before the cut" in inv.summary
    assert report.get("doctor.access").status == Status.WARN


def test_format_detection_by_content() -> None:
    session = fixture_file("telemetry", "nvidia-smi_capture__h100-80gb-hbm3__drv590.48.01.txt")
    cap = parse_capture(session.read_text())
    assert cap.format == "nvidia-smi-csv" and len(cap.rows) == 1  # not a ROCm exporter
    assert cap.rows[0]["model"] == "NVIDIA H100 80GB HBM3"
    table = fixture_file(
        "doctor", "nvidia-smi__nvidia-h100-sxm5-80gb-x8__drv565.57.01_cuda12.7.txt"
    )
    with pytest.raises(AccelbenchError, match="looks like the plain `nvidia-smi` table"):
        detect_format(table.read_text())
    rocm = fixture_file("doctor", "rocm-smi__amd-mi300x-x4__concise_drv6.7.0.txt")
    with pytest.raises(AccelbenchError, match=r"`rocm-smi` text \(add --json\)"):
        detect_format(rocm.read_text())
    for name in ("rocm-smi_json__mi100x4__rocm6.0.2.json",):
        text = fixture_file("telemetry", name).read_text()
        assert len(parse_capture("\ufeff" + text.replace("\n", "\r\n")).rows) == 4


def _session_section(command: str) -> str:
    """The output of ``command`` in the telemetry folder's whole H100 capture session
    (sections start with a "# $ command" header between two lines of #)."""
    text = fixture_file("telemetry", "nvidia-smi_capture__h100-80gb-hbm3__drv590.48.01.txt")
    lines = text.read_text().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.rstrip() == f"# $ {command}") + 2
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("#####"))
    return "".join(lines[start:end])


def test_the_sniffer_names_real_captures() -> None:
    # What a file is, for `telemetry parse` (and the doctor): the real `-q` banner has no
    # blanks, a `topo -m` header may be underlined (ANSI), a collect_env embeds topo -m or
    # rocm-smi output, an APU host's amd-smi text starts with CPU blocks.
    q = _session_section("nvidia-smi -q")
    assert q.startswith("\n==============NVSMI LOG==============")
    doc = {
        "nvidia-smi_topo_m__nvidia-h200-x1__drv590.48.01__ansi-underline-header.txt": [
            "nvidia-smi-topo"
        ],
        "vllm-collect-env__amd-mi300x-x8__rocm6.2_vllm0.6.4_with-rocm-smi-showtopo__"
        "indented4.txt": ["collect-env"],
        "vllm-collect-env__nvidia-h100-x8__cu124_drv550.90.12_vllm0.6.3_with-topo__indented4.txt": [
            "collect-env"
        ],
    }
    amd = fixture_file(
        "doctor", "amd-smi_static__amd-mi300a-x4__amdsmi-rocm6.2-era_drv6.9.0-rc5.txt"
    )
    for text, kinds in [
        (q, ["nvidia-smi-q"]),
        (_session_section("nvidia-smi dmon -c 5"), ["nvidia-smi-dmon"]),
        (_session_section("nvidia-smi topo -m"), ["nvidia-smi-topo"]),
        (amd.read_text()[:200], ["amd-smi-text"]),  # its CPU blocks only
        *[(fixture_file("doctor", name).read_text(), k) for name, k in doc.items()],
    ]:
        assert identify(text) == kinds, text[:80]
    with pytest.raises(AccelbenchError, match=r"`nvidia-smi -q` text \(capture `-q -x` instead\)"):
        detect_format(q)


def test_new_rocm_smi_concise_layout_keeps_name_and_device_id() -> None:
    path = fixture_file(
        "doctor", "rocm-smi__amd-mi300x-x8__concise-new-layout-did-guid_rocm6.3.txt"
    )
    rs = dp.parse_rocm_smi(path.read_text())
    assert rs["layout"] == "concise" and rs["truncated"] is None and len(rs["gpus"]) == 8
    g = rs["gpus"][5]
    assert (g["device_id"], g["name"], g["node_id"], g["guid"]) == (
        "0x74a1",
        "AMD Instinct MI300X",
        7,
        "2251",
    )
    assert (g["memory_partition"], g["compute_partition"]) == ("NPS1", "SPX")


def test_collect_env_without_driver_line_is_unknown_not_absent(tmp_path: Path) -> None:
    src = fixture_file(
        "doctor",
        "vllm-collect-env__nvidia-h100-x8__cu124_drv550.90.12_vllm0.6.3_with-topo__indented4.txt",
    ).read_text()
    f = tmp_path / "ce.txt"
    f.write_text("\n".join(ln for ln in src.splitlines() if "Nvidia driver version" not in ln))
    drv = run_doctor(DoctorInputs(collect_env=f)).get("versions.driver")
    assert drv.status == Status.UNKNOWN and "not captured" in drv.summary


def test_nvidia_smi_ecc_na_is_unknown(tmp_path: Path) -> None:
    src = fixture_file(
        "doctor", "nvidia-smi__nvidia-h100-sxm5-80gb-x8__drv565.57.01_cuda12.7.txt"
    ).read_text()
    assert dp.parse_nvidia_smi(src)["gpus"][0]["ecc_uncorrected"] == "0"
    # The same table from GPUs with ECC off: the ECC column reads N/A.
    f = tmp_path / "smi.txt"
    f.write_text(re.sub(r"(\|\s+)0(\s+\|\n\|\s+N/A\s+\d+C)", r"\1N/A\2", src))
    mem = run_doctor(DoctorInputs(nvidia_smi=f)).get("memory.ecc")
    assert mem.status == Status.UNKNOWN and "not reported (N/A)" in mem.summary


def test_one_na_in_a_dcgm_scrape_keeps_the_rest() -> None:
    text = fixture_file(
        "telemetry", "dcgm-exporter_metrics__l4__drv580.105.08__default-counters.prom"
    ).read_text()
    orig = parse_capture(text).rows[0]
    bad = re.sub(r"^(DCGM_FI_DEV_GPU_TEMP\{[^}]*\}) \S+", r"\1 N/A", text, flags=re.M)
    cap = parse_capture(bad)
    row = cap.rows[0]
    assert row["temp_gpu_c"] is None and row["power_w"] == orig["power_w"]
    assert cap.lost and "DCGM_FI_DEV_GPU_TEMP" in cap.lost[0]
    assert judge(cap.rows, cap.lost)["verdict"] == "unknown"
