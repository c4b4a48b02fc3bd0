"""`accelbench doctor` end to end: on this GPU-less machine and on the captured fixtures."""

from __future__ import annotations

import json

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from accelbench.cli.doctor import register
from conftest import fixture_file


def make_app() -> typer.Typer:
    # The same registration the real entry point does (accelbench.cli.main), without the
    # other command groups, so this test depends only on the doctor.
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    register(app)
    return app


runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(make_app(), list(args), env={"COLUMNS": "160"})


def test_main_registers_the_doctor():
    from accelbench.cli.main import COMMANDS  # imports no command module

    assert COMMANDS["doctor"] == "accelbench.cli.doctor"


def test_doctor_on_this_machine_exits_0_with_a_clear_summary():
    r = invoke("doctor")
    assert r.exit_code == 0, r.output
    assert "Accelerators" in r.output
    last = [ln for ln in r.output.splitlines() if ln.startswith("doctor:")][-1]
    assert "0 fail" in last
    assert "no NVIDIA or AMD accelerator found" in r.output


def test_doctor_json_on_this_machine():
    r = invoke("doctor", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["ok"] is True and data["counts"]["fail"] == 0
    by_id = {c["id"]: c for c in data["checks"]}
    assert by_id["inventory.accelerators"]["status"] == "n/a"
    for cid in ("pcie.links", "memory.ecc", "compat.cuda", "compat.rocm", "gpu.idle"):
        assert by_id[cid]["status"] == "n/a", cid


def test_doctor_on_the_xid_log_fails_with_exit_1():
    log = fixture_file(
        "doctor",
        "kernel-log__nvidia-hgx-dell-xe9680__xid119-gsp-rpc-timeout__kernel5.15__dmesg-ctime.log",
    )
    r = invoke("doctor", "--kernel-log", str(log))
    assert r.exit_code == 1
    assert "Xid 119: GSP RPC timeout x5 (critical)" in r.output
    assert "failing: kernel.log" in r.output
    j = json.loads(invoke("doctor", "--kernel-log", str(log), "--json").output)
    kl = next(c for c in j["checks"] if c["id"] == "kernel.log")
    assert kl["status"] == "fail" and kl["data"]["events"][0]["code"] == 119


def test_doctor_on_nvidia_captures():
    lspci = fixture_file("doctor", "lspci_vvv__nvidia-h100-sxm5-x8-hgx__full-host.txt")
    smi = fixture_file("doctor", "nvidia-smi__nvidia-h100-sxm5-80gb-x8__drv565.57.01_cuda12.7.txt")
    topo = fixture_file(
        "doctor", "nvidia-smi_topo_m__nvidia-h100-x8-nv18__tabs-expanded-no-legend.txt"
    )
    r = invoke(
        "doctor", "--json", "--lspci", str(lspci), "--nvidia-smi", str(smi),
        "--nvidia-topo", str(topo),
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    by_id = {c["id"]: c for c in json.loads(r.output)["checks"]}
    assert by_id["inventory.agreement"]["status"] == "pass"
    assert by_id["pcie.links"]["status"] == "pass"
    assert by_id["versions.driver"]["summary"].startswith("NVIDIA driver 565.57.01")


def test_doctor_on_amd_captures():
    static = fixture_file(
        "doctor",
        "amd-smi_static_json__amd-mi300x-oam-x8-sriov-vf__rocm7.2.1_amdgpu6.16.13__root.json",
    )
    version = fixture_file(
        "doctor", "amd-smi_version_json__amdsmi26.2.2_rocm7.2.1_amdgpu6.16.13__root.json"
    )
    r = invoke("doctor", "--amd-smi", str(static), "--amd-smi", str(version), "--json")
    assert r.exit_code == 0, r.output
    by_id = {c["id"]: c for c in json.loads(r.output)["checks"]}
    assert by_id["compat.rocm"]["status"] == "pass"
    assert by_id["inventory.accelerators"]["summary"].startswith("8 AMD")


def test_missing_capture_file_is_a_clean_error():
    r = invoke("doctor", "--kernel-log", "/nonexistent/k.log")
    assert r.exit_code != 0
    assert "kernel log file not found" in str(r.exception)


def test_a_capture_of_the_wrong_tool_is_one_line_and_exit_2(tmp_path):
    # `nvidia-smi -q` text given as the plain table (the first real H200 run read it as
    # an empty capture: "accelerators unknown", exit 0). The -q text of the H100 session.
    from cli_inprocess import run_cli

    session = fixture_file("telemetry", "nvidia-smi_capture__h100-80gb-hbm3__drv590.48.01.txt")
    text = session.read_text()
    start = text.index("==============NVSMI LOG==============")
    q = tmp_path / "q.txt"
    q.write_text(text[start : text.index("\n####", start)])
    code, out, err, _ = run_cli(["doctor", "--no-live", "--nvidia-smi", str(q)], tmp_path)
    assert code == 2 and out == "", (code, out)
    assert err.strip().splitlines() == [
        f"error: --nvidia-smi {q} is not the plain `nvidia-smi` table: it looks like "
        "`nvidia-smi -q` text; capture it with: nvidia-smi > FILE"
    ]


def test_weights_write_and_verify(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "a.safetensors").write_bytes(b"a" * 100000)
    (model / "config.json").write_text("{}")
    r = invoke("doctor", "weights", str(model), "--write-manifest")
    assert r.exit_code == 0, r.output
    assert "2 files" in r.output
    manifest = model / "accelbench-manifest.json"
    r = invoke("doctor", "weights", str(model), "--verify", str(manifest))
    assert r.exit_code == 0 and "ok" in r.output
    (model / "a.safetensors").write_bytes(b"b" * 100000)
    r = invoke("doctor", "weights", str(model), "--verify", str(manifest))
    assert r.exit_code == 1
    assert "content differs (altered / corrupted): a.safetensors" in r.output
    j = json.loads(
        invoke("doctor", "weights", str(model), "--verify", str(manifest), "--json").output
    )
    assert j["hash_mismatch"] == ["a.safetensors"] and j["ok"] is False


def test_weights_needs_exactly_one_mode(tmp_path):
    r = invoke("doctor", "weights", str(tmp_path))
    assert r.exit_code != 0
    assert "exactly one of --write-manifest or --verify" in str(r.exception)


def test_terminal_output_never_reads_data_as_markup_or_emoji(tmp_path):
    # A real lspci stanza whose bus is 0xcd: ":cd:" is also Rich's emoji code for a CD.
    src = fixture_file("doctor", "lspci_vvv__nvidia-h100-sxm5__gpu-19-00.0-gen5x16-ok.txt")
    text = src.read_text().replace("19:00.0", "cd:00.0", 1)
    text = text.replace("NVIDIA Corporation", "NVIDIA [bold]Corporation[/bold]", 1)
    f = tmp_path / "lspci.txt"
    f.write_text(text)
    from rich.console import Console

    from accelbench.cli.doctor import console, render_report
    from accelbench.doctor import DoctorInputs, run_doctor

    con = console()
    assert isinstance(con, Console)
    with con.capture() as cap:
        render_report(run_doctor(DoctorInputs(lspci=f)), con, verbose=True)
    out = cap.get()
    assert "0000:cd:00.0" in out and "\N{OPTICAL DISC}" not in out
    assert "[bold]Corporation[/bold]" in out


_KLOG = ("doctor", "kernel-log__nvidia-1gpu__clean-driver-load-unload-reload__proprietary550.144.03"
         "__dmesg-raw-level-prefix.log")  # fmt: skip
_LSPCI = ("doctor", "lspci_vvv__nvidia-h100-sxm5__gpu-19-00.0-gen5x16-ok.txt")


@pytest.mark.parametrize(
    ("args", "opt"),
    [
        # the checks' options given with a subcommand: never dropped (a missing file too)
        (
            [
                "--json",
                "--verbose",
                "--lspci",
                "/nonexistent/l.txt",
                "weights",
                "{m}",
                "--write-manifest",
            ],
            "--json, --lspci, --verbose",
        ),
        (["--json", "weights", "{m}", "--write-manifest"], "--json"),
        (["--no-kernel-log", "weights", "{m}", "--write-manifest"], "--no-kernel-log"),
        (["--no-live", "weights", "{m}", "--write-manifest"], "--live"),
        (["--amd-smi", "{lspci}", "weights", "{m}", "--write-manifest"], "--amd-smi"),
        # --manifest is where --write-manifest writes; --verify names its own
        (
            ["weights", "{m}", "--verify", "{m}/accelbench-manifest.json", "--manifest", "{o}"],
            "--manifest",
        ),
        (["weights", "{m}", "--verify", "{m}/accelbench-manifest.json", "-o", "{o}"], "--manifest"),
        # --no-kernel-log where no live kernel log is read: --kernel-log replaces it,
        # a capture (without --live) stops every live query
        (["--kernel-log", "{klog}", "--no-kernel-log"], "--no-kernel-log"),
        (["--live", "--kernel-log", "{klog}", "--no-kernel-log"], "--no-kernel-log"),
        (["--lspci", "{lspci}", "--no-kernel-log"], "--no-kernel-log"),
        (["--lspci", "{lspci}", "--no-live", "--no-kernel-log"], "--no-kernel-log"),
        # --live/--no-live choose between captures and this machine: with no capture,
        # --no-live left nothing to check and --live changed nothing
        (["--no-live", "--no-kernel-log"], "--no-live"),
        (["--no-live"], "--no-live"),
        (["--live", "--json"], "--live"),
        # --verbose shows all evidence in the table; the JSON always holds it all
        (["--json", "--verbose"], "--verbose"),
        (["--json", "-v", "--lspci", "{lspci}"], "--verbose"),
    ],
)
def test_an_option_the_doctor_would_not_use_is_refused(tmp_path, args, opt):
    from cli_inprocess import run_cli

    model = tmp_path / "mdl"
    model.mkdir()
    (model / "a.bin").write_bytes(b"weights")
    manifest = model / "accelbench-manifest.json"
    assert invoke("doctor", "weights", str(model), "--write-manifest").exit_code == 0
    before = {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    subs = {"m": str(model), "o": str(tmp_path / "other.json"),
            "klog": str(fixture_file(*_KLOG)), "lspci": str(fixture_file(*_LSPCI))}  # fmt: skip
    argv = ["doctor", *(a.format(**subs) for a in args)]
    code, out, err, _ = run_cli(argv, tmp_path)
    assert code == 2 and out == "", (argv, code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {opt} "), (argv, err)
    assert {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert manifest.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--no-kernel-log", "--sysfs-root", "{root}", "--live"],
        ["--lspci", "{lspci}", "--live", "--no-kernel-log"],
        ["--verbose", "--lspci", "{lspci}"],
        ["--json", "--lspci", "{lspci}"],
        ["--kernel-log", "{klog}", "--json"],
    ],
)
def test_the_doctors_options_where_they_apply_still_run(tmp_path, args):
    subs = {"root": str(tmp_path), "klog": str(fixture_file(*_KLOG)),
            "lspci": str(fixture_file(*_LSPCI))}  # fmt: skip
    r = invoke("doctor", *(a.format(**subs) for a in args))
    assert r.exit_code in (0, 1), (args, r.output, r.exception)
    assert "applies only" not in r.output


def test_weights_manifest_with_write_still_writes_there(tmp_path):
    model = tmp_path / "mdl"
    model.mkdir()
    (model / "a.bin").write_bytes(b"weights")
    other = tmp_path / "other.json"
    r = invoke("doctor", "weights", str(model), "--write-manifest", "--manifest", str(other))
    assert r.exit_code == 0, r.output
    assert other.exists()
    r = invoke("doctor", "weights", str(model), "--verify", str(other), "--json")
    assert r.exit_code == 0 and json.loads(r.output)["ok"] is True


# every doctor option that reads one captured file
_CAPTURE_OPTS = ("--kernel-log", "--lspci", "--nvidia-smi", "--nvidia-topo", "--rocm-smi",
                 "--amd-smi", "--rocminfo", "--collect-env")  # fmt: skip


def _one_clean_error(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "", (code, out, err)
    (line,) = err.strip().splitlines()
    assert line.startswith("error:"), line
    # the file's bytes are never in the line: no U+FFFD read from them, no control byte
    assert "\ufffd" not in line and all(c.isprintable() for c in line), ascii(line)
    return line


def test_kernel_log_of_random_bytes_or_empty_is_refused(tmp_path):
    """The audit's example: 4000 bytes of /dev/urandom gave "pass: No GPU error
    signatures in 112 lines", exit 0, and an empty file "in 0 lines"."""
    from cli_inprocess import run_cli

    garbage = tmp_path / "g.bin"
    garbage.write_bytes(bytes(range(256)) * 16)
    line = _one_clean_error(*run_cli(["doctor", "--kernel-log", str(garbage)], tmp_path)[:3])
    assert f"kernel log file {garbage} is binary data, not text" in line
    for content in (b"", b"\n \n", b"\0" * 64):
        empty = tmp_path / "empty.log"
        empty.write_bytes(content)
        line = _one_clean_error(*run_cli(["doctor", "--kernel-log", str(empty)], tmp_path)[:3])
        assert f"--kernel-log {empty} is empty (no lines)" in line and "sudo dmesg" in line


def test_a_kernel_log_with_a_few_stray_bytes_is_read(tmp_path):
    from cli_inprocess import run_cli

    log = tmp_path / "k.log"
    text = fixture_file(*_KLOG).read_bytes()
    log.write_bytes(text[:200] + b"\xff\xfe\x00" + text[200:])
    code, out, err, _ = run_cli(["doctor", "--kernel-log", str(log), "--json"], tmp_path)
    assert code in (0, 1) and err == "", err
    assert json.loads(out)["checks"]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    opt=st.sampled_from(_CAPTURE_OPTS),
    data=st.binary(max_size=600),
    noise=st.sampled_from([b"", b"\xff", b"\x00\x01", b"\xc3("]),
)
def test_property_binary_data_is_refused_by_every_capture_option(tmp_path, opt, data, noise):
    """Any bytes given to any capture option (the kernel log too): no traceback, and an
    error is one line that never holds the file's bytes (no U+FFFD, no control byte).
    Bytes of which a tenth or more are not UTF-8 or control characters no tool prints
    are refused by every option as binary data, exit 2."""
    from accelbench.telemetry.parsers.text import not_text
    from cli_inprocess import run_cli

    blob = data + noise * (len(data) // 4 + 1)
    f = tmp_path / "capture"
    f.write_bytes(blob)
    code, out, err, _ = run_cli(["doctor", opt, str(f)], tmp_path)
    if not_text(blob.decode("utf-8", errors="replace")):
        line = _one_clean_error(code, out, err)
        assert "is binary data, not text" in line, line
    elif err:
        _one_clean_error(code, out, err)
    else:
        assert code in (0, 1), (code, out)


def test_a_device_is_refused_before_it_is_read(tmp_path):
    from cli_inprocess import run_cli

    line = _one_clean_error(*run_cli(["doctor", "--kernel-log", "/dev/zero"], tmp_path)[:3])
    assert "not a regular file" in line
