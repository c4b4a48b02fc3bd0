"""The `accelbench` command. Each command group lives in its own module under cli/
and exposes `register(app)`; this module only assembles them and maps errors to
one clear line.

The modules are imported lazily: `main()` registers only the module of the command in
argv (a process that predicts one point does not import the store, the doctor or
pyarrow; issue 23), and every module when the whole tree is needed (`accelbench`,
`--help`, `--version`, an unknown command, so click's own messages stay as they were).
`app`, the whole tree, is built on first access, for the tests and benchmarks that
import it."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import TYPE_CHECKING

import typer

from accelbench import __version__
from accelbench.errors import AccelbenchError
from accelbench.lifetime import ignore_stop_signals, interrupt_on_termination

if TYPE_CHECKING:
    app: typer.Typer  # built by __getattr__ below

# Each top-level command or group, and the module whose `register(app: typer.Typer) ->
# None` adds it; in the order of the command list in `accelbench --help`.
# tests/test_cli_lazy.py checks this table against what the modules really register.
COMMANDS: dict[str, str] = {
    "frontier": "accelbench.cli.analysis",
    "compare": "accelbench.cli.analysis",
    "report": "accelbench.cli.analysis",
    "runs": "accelbench.cli.analysis",
    "cost": "accelbench.cli.cost",
    "catalog": "accelbench.cli.cost",
    "plan": "accelbench.cli.cost",
    "doctor": "accelbench.cli.doctor",
    "mlperf": "accelbench.cli.mlperf",
    "predict": "accelbench.cli.predict",
    "monitor": "accelbench.cli.monitor",
    "run": "accelbench.cli.run",
    "summarize": "accelbench.cli.run",
    "serve": "accelbench.cli.serve",
    "shadow": "accelbench.cli.shadow",
    "stress": "accelbench.cli.stress",
    "sweep": "accelbench.cli.sweep",
    "health": "accelbench.cli.telemetry",
    "telemetry": "accelbench.cli.telemetry",
    "trace": "accelbench.cli.trace",
}

# every command module, once each, in registration order
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"accelbench {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug", help="Show full tracebacks on errors (also ACCELBENCH_DEBUG=1)."
    ),
) -> None:
    if debug:
        os.environ["ACCELBENCH_DEBUG"] = "1"


def build_app(modules: tuple[str, ...] = COMMAND_MODULES) -> typer.Typer:
    """The `accelbench` app with the commands of ``modules`` (all by default)."""
    new = typer.Typer(
        name="accelbench",
        help="Benchmark, price, plan and watch LLM inference on AI accelerators.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # docstrings are wrapped at 100 columns: markdown joins their lines into
        # paragraphs (the default keeps each line break, so help read "tokens per\n GPU")
        rich_markup_mode="markdown",
    )
    new.callback()(_root)
    for name in modules:
        importlib.import_module(name).register(new)
    from accelbench.cli.strict import harden

    harden(new)  # the checks every command line gets (cli/strict.py)
    return new


_APPS: dict[tuple[str, ...], typer.Typer] = {}


def _app_for(modules: tuple[str, ...]) -> typer.Typer:
    if modules not in _APPS:
        _APPS[modules] = build_app(modules)
    return _APPS[modules]


def __getattr__(name: str) -> object:
    if name == "app":  # the whole tree, built once, on first use
        return _app_for(COMMAND_MODULES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _modules_for(argv: list[str]) -> tuple[str, ...]:
    """The command modules that ``accelbench ARGV`` needs: the one that registers the
    first word after the root options, or all of them (no command, a root option other
    than --debug such as --help or --version, or a word that is no command)."""
    for arg in argv:
        if arg == "--debug":
            continue
        module = COMMANDS.get(arg)
        return (module,) if module is not None else COMMAND_MODULES
    return COMMAND_MODULES


# click's usage errors, whether typer vendors click (recent typer) or uses it
_CLICK_ERRORS = {c.__name__: c for c in typer.BadParameter.__mro__}
ClickException: type[Exception] = _CLICK_ERRORS["ClickException"]

EXIT_INTERNAL = 70  # sysexits EX_SOFTWARE: a bug, not the user's input


def main() -> None:
    """Entry point: runs the app; every error becomes one line and an exit code
    (README, "Exit codes"); ``--debug`` / ACCELBENCH_DEBUG=1 re-raises for the traceback.
    Once the exit code is known, the stop signals are ignored (docs/PROCESSES.md): the
    exit itself (multiprocessing's hooks, the interpreter's teardown) is not cut short."""
    debug = bool(os.environ.get("ACCELBENCH_DEBUG")) or "--debug" in sys.argv[1:2]
    interrupt_on_termination()  # SIGTERM, SIGHUP: the same orderly stop as Ctrl-C
    try:
        code = _main(debug)
    except KeyboardInterrupt:  # a stop before the command started, or while it reported one
        with contextlib.suppress(Exception):
            typer.secho("interrupted", fg=typer.colors.YELLOW, err=True)
        code = 130
    finally:
        ignore_stop_signals()
    sys.exit(code)


def _main(debug: bool) -> int:
    try:
        # not standalone: click's usage errors come here, to be one line like the rest
        # (standalone, they were a boxed block); every command returns None, and an
        # explicit typer.Exit(code) comes back as that code
        code = _app_for(_modules_for(sys.argv[1:]))(standalone_mode=False)
    except ClickException as exc:  # a usage error: one line, and where to read more
        msg = " ".join(str(getattr(exc, "format_message", lambda: "")()).split())
        ctx = getattr(exc, "ctx", None)
        if msg:  # none when plain `accelbench` printed its help
            where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.secho(f"error: {msg}{where}", fg=typer.colors.RED, err=True)
        return int(getattr(exc, "exit_code", 2))
    except (typer.Abort, KeyboardInterrupt):  # a stop with nothing to keep (README)
        # (click's prompts turn Ctrl-C into Abort; typer a KeyboardInterrupt in the
        # command into exit code 130, below; one outside the command, while its module
        # is imported, comes as it is)
        typer.secho("interrupted", fg=typer.colors.YELLOW, err=True)
        return 130
    except AccelbenchError as exc:
        if debug or os.environ.get("ACCELBENCH_DEBUG"):
            raise
        from accelbench.console import one_line  # an error may quote outside text

        typer.secho(f"error: {one_line(exc)}", fg=typer.colors.RED, err=True)
        return exc.exit_code
    except OSError as exc:
        if debug or os.environ.get("ACCELBENCH_DEBUG"):
            raise
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        typer.secho(f"error:{where}: {exc.strerror or exc}", fg=typer.colors.RED, err=True)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback
        if debug or os.environ.get("ACCELBENCH_DEBUG"):
            raise
        first = (str(exc).splitlines() or [""])[0][:300]
        typer.secho(
            f"internal error: {type(exc).__name__}: {first} (a bug: rerun with --debug for "
            "the traceback and report it)",
            fg=typer.colors.RED,
            err=True,
        )
        return EXIT_INTERNAL
    if code == 130:  # typer's own (silent) answer to a KeyboardInterrupt in the command
        typer.secho("interrupted", fg=typer.colors.YELLOW, err=True)
    return code if isinstance(code, int) else 0
