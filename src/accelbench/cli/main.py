"""The `accelbench` command. Each command group lives in its own module under cli/
and exposes `register(app)`; this module only assembles them and maps errors to
one clear line."""

from __future__ import annotations

import importlib
import os
import sys

import typer

from accelbench import __version__
from accelbench.errors import AccelbenchError
from accelbench.lifetime import interrupt_on_termination

app = typer.Typer(
    name="accelbench",
    help="Benchmark, price, plan and watch LLM inference on AI accelerators.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # docstrings are wrapped at 100 columns: markdown joins their lines into paragraphs
    # (the default keeps each line break, so help read "tokens per\n GPU")
    rich_markup_mode="markdown",
)

# One line per command module; each has `register(app: typer.Typer) -> None`.
COMMAND_MODULES = (
    "accelbench.cli.analysis",
    "accelbench.cli.cost",
    "accelbench.cli.doctor",
    "accelbench.cli.mlperf",
    "accelbench.cli.predict",
    "accelbench.cli.monitor",
    "accelbench.cli.run",
    "accelbench.cli.serve",
    "accelbench.cli.shadow",
    "accelbench.cli.stress",
    "accelbench.cli.sweep",
    "accelbench.cli.telemetry",
    "accelbench.cli.trace",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"accelbench {__version__}")
        raise typer.Exit()


@app.callback()
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


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


# click's usage errors, whether typer vendors click (recent typer) or uses it
_CLICK_ERRORS = {c.__name__: c for c in typer.BadParameter.__mro__}
ClickException: type[Exception] = _CLICK_ERRORS["ClickException"]

EXIT_INTERNAL = 70  # sysexits EX_SOFTWARE: a bug, not the user's input


def main() -> None:
    """Entry point: runs the app; every error becomes one line and an exit code
    (README, "Exit codes"); ``--debug`` / ACCELBENCH_DEBUG=1 re-raises for the traceback."""
    debug = bool(os.environ.get("ACCELBENCH_DEBUG")) or "--debug" in sys.argv[1:2]
    interrupt_on_termination()  # SIGTERM, SIGHUP: the same orderly stop as Ctrl-C
    try:
        # not standalone: click's usage errors come here, to be one line like the rest
        # (standalone, they were a boxed block); every command returns None, and an
        # explicit typer.Exit(code) comes back as that code
        code = app(standalone_mode=False)
    except ClickException as exc:  # a usage error: one line, and where to read more
        msg = " ".join(str(getattr(exc, "format_message", lambda: "")()).split())
        ctx = getattr(exc, "ctx", None)
        if msg:  # none when plain `accelbench` printed its help
            where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.secho(f"error: {msg}{where}", fg=typer.colors.RED, err=True)
        sys.exit(int(getattr(exc, "exit_code", 2)))
    except typer.Abort:  # click's own Ctrl-C at a prompt
        typer.secho("interrupted", fg=typer.colors.YELLOW, err=True)
        sys.exit(130)
    except AccelbenchError as exc:
        if debug or os.environ.get("ACCELBENCH_DEBUG"):
            raise
        from accelbench.console import one_line  # an error may quote outside text

        typer.secho(f"error: {one_line(exc)}", fg=typer.colors.RED, err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        typer.secho("interrupted", fg=typer.colors.YELLOW, err=True)
        sys.exit(1)
    except OSError as exc:
        if debug or os.environ.get("ACCELBENCH_DEBUG"):
            raise
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        typer.secho(f"error:{where}: {exc.strerror or exc}", fg=typer.colors.RED, err=True)
        sys.exit(2)
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
        sys.exit(EXIT_INTERNAL)
    sys.exit(code if isinstance(code, int) else 0)
