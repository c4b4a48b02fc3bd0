"""``accelbench ARGS`` run in this process (fast enough for property tests over options):
the CLI's own ``main``, in a working directory, with its output captured."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
from pathlib import Path

from accelbench.cli.main import main
from accelbench.lifetime import STOP_SIGNALS


def run_cli(args: list[str], cwd: Path) -> tuple[int, str, str, float]:
    """(exit code, stdout, stderr, seconds taken) of ``accelbench ARGS`` in ``cwd``."""
    out, err = io.StringIO(), io.StringIO()
    old_cwd, old_argv = Path.cwd(), sys.argv
    # main() sets the stop signals' handlers (and ignores them once its exit code is
    # known, as the process ends next): this process goes on, with its own
    old_handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    os.environ.pop("ACCELBENCH_DEBUG", None)
    code = 0
    t0 = time.monotonic()
    try:
        os.chdir(cwd)
        sys.argv = ["accelbench", *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
        for s, h in old_handlers.items():
            signal.signal(s, h)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - t0
