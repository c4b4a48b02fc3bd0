"""`python -m accelbench`, and the `accelbench` command (pyproject's entry point).

The stop signals are handled from the first instant, before the CLI's modules are
imported (a few hundred ms on a loaded host): a Ctrl-C, SIGTERM or SIGHUP then prints
"interrupted" and exits 130 (README, "Exit codes"), not a traceback from whatever module
was loading, or a death by the signal."""

import signal
import sys


def main() -> None:
    for s in (signal.SIGTERM, signal.SIGHUP):  # as Ctrl-C; the CLI's main sets its own
        signal.signal(s, signal.default_int_handler)
    try:
        from accelbench.cli.main import main as cli_main
    except KeyboardInterrupt:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the exit is not cut short
            signal.signal(s, signal.SIG_IGN)
        from accelbench.lifetime import ignore_stop_signals

        ignore_stop_signals()
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    cli_main()


if __name__ == "__main__":
    main()
