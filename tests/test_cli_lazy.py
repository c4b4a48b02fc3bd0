"""`accelbench COMMAND` imports only that command's module (issue 23: `accelbench predict`
for one point was slow because the entry point imported every command's modules)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap

import pytest
import typer

from accelbench.cli import main as cli_main
from cli_inprocess import run_cli


def _registered_by(module: str) -> list[str]:
    """The top-level names ``module.register`` adds, as click sees them."""
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    importlib.import_module(module).register(app)
    return list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_the_table_is_what_the_modules_register():
    """Every command module in cli/ is in the table, with exactly the names it registers
    (a new command, or a module, left out of COMMANDS fails here)."""
    from pathlib import Path

    cli_dir = Path(cli_main.__file__).parent
    helpers = {"__init__", "main", "options", "strict"}  # no register(app): not command modules
    on_disk = {f"accelbench.cli.{p.stem}" for p in cli_dir.glob("*.py") if p.stem not in helpers}
    assert set(cli_main.COMMAND_MODULES) == on_disk
    real = {name: m for m in cli_main.COMMAND_MODULES for name in _registered_by(m)}
    assert cli_main.COMMANDS == real
    assert cli_main.COMMAND_MODULES == tuple(dict.fromkeys(cli_main.COMMANDS.values()))


def test_app_is_the_whole_tree_in_the_table_order():
    names = list(typer.main.get_command(cli_main.app).commands)  # type: ignore[attr-defined]
    assert sorted(names) == sorted(cli_main.COMMANDS)
    # the order of `accelbench --help`: the modules' registration order, as before
    whole = typer.Typer()
    whole.callback()(lambda: None)
    for m in cli_main.COMMAND_MODULES:
        importlib.import_module(m).register(whole)
    assert names == list(typer.main.get_command(whole).commands)  # type: ignore[attr-defined]
    assert cli_main.app is cli_main.app  # built once


@pytest.mark.parametrize(
    ("argv", "modules"),
    [
        (["predict", "--model", "x"], ("accelbench.cli.predict",)),
        (["--debug", "doctor"], ("accelbench.cli.doctor",)),
        (["health", "--help"], ("accelbench.cli.telemetry",)),
        ([], cli_main.COMMAND_MODULES),
        (["--help"], cli_main.COMMAND_MODULES),
        (["--version", "predict"], cli_main.COMMAND_MODULES),
        (["runz"], cli_main.COMMAND_MODULES),
        (["--debug"], cli_main.COMMAND_MODULES),
    ],
)
def test_modules_for_argv(argv: list[str], modules: tuple[str, ...]) -> None:
    assert cli_main._modules_for(argv) == modules


_WRAPPER = textwrap.dedent(
    """
    import atexit, json, sys
    def _report():
        sys.__stderr__.write("MODULES " + json.dumps(sorted(sys.modules)) + "\\n")
    atexit.register(_report)
    from accelbench.cli.main import main
    sys.argv = ["accelbench", *sys.argv[1:]]
    main()
    """
)


def _imported(*args: str) -> tuple[int, set[str]]:
    r = subprocess.run([sys.executable, "-c", _WRAPPER, *args], capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    line = next(x for x in r.stderr.splitlines() if x.startswith("MODULES "))
    return r.returncode, set(json.loads(line.removeprefix("MODULES ")))


def test_predict_imports_no_other_command():
    code, mods = _imported("predict", "--help")
    assert code == 0
    assert "accelbench.cli.predict" in mods
    others = {m for m in cli_main.COMMAND_MODULES if m != "accelbench.cli.predict"}
    assert not others & mods, others & mods
    # what only the other commands need: the doctor, the store, the run engine, pyarrow
    for m in ("accelbench.doctor", "accelbench.store", "accelbench.runner", "pyarrow",
              "pyarrow.compute"):  # fmt: skip
        assert m not in mods, m


def test_the_whole_tree_when_there_is_no_known_command():
    code, mods = _imported("--version")
    assert code == 0
    assert set(cli_main.COMMAND_MODULES) <= mods


def test_main_in_process_switches_between_commands(tmp_path):
    """tests/cli_inprocess.py runs main() many times in one process: each call answers
    for its own argv, whatever the call before it registered."""
    code, out, _, _ = run_cli(["predict", "--help"], tmp_path)
    assert code == 0 and "predict" in out
    code, out, _, _ = run_cli(["doctor", "--help"], tmp_path)
    assert code == 0 and "doctor" in out
    code, _, err, _ = run_cli(["runz"], tmp_path)
    assert code == 2 and "No such command 'runz'" in err
    code, out, _, _ = run_cli(["--help"], tmp_path)
    assert code == 0 and all(name in out for name in ("predict", "doctor", "sweep"))
    code, out, _, _ = run_cli(["predict", "--help"], tmp_path)
    assert code == 0 and "--accelerator" in out


def test_one_predicted_point_reads_no_run_store():
    """Pricing a predicted point needs no run store: cost.costing imports it (and pyarrow)
    only in the functions that read runs."""
    code, mods = _imported("predict", "--model", "deepseek-r1", "--accelerator", "mi355x",
                           "--tp", "8", "--concurrency", "64")  # fmt: skip
    assert code == 0
    assert "accelbench.cost.costing" in mods  # the cost line was printed
    for m in ("accelbench.store", "accelbench.metrics.frontier", "pyarrow", "accelbench.doctor"):
        assert m not in mods, m
