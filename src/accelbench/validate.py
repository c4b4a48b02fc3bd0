"""Checks for values that come from outside (CLI options, config files, API callers).

Every check raises :class:`~accelbench.errors.UsageError` with one line that names the
option as the CLI spells it, the allowed range and the value given, so the Python API and
the CLI reject the same inputs with the same words. NaN and infinities are never in range.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from accelbench.errors import UsageError
from accelbench.urls import redact_url

# a run's size (docs/LIMITS.md): far above what one client host can drive, low enough that
# a typo fails at once; runner.config's limits and runs import-vllm's checks share them
MAX_REQUESTS = 10_000_000
MAX_DURATION_S = 30 * 86400.0  # a 30-day soak
MAX_SEED = (1 << 32) - 1  # numpy's SeedSequence takes any non-negative int; keep it 32-bit


def seed(name: str, value: Any) -> int:
    """A random seed: a whole number in [0, 2**32-1]."""
    return integer(name, value, 0, MAX_SEED)


_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _fmt(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else f"{v:,}".replace(",", "_")


def number(
    name: str,
    value: Any,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    unit: str = "",
) -> float:
    """A finite real number in [lo, hi] (or (lo, hi] with ``lo_open``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number (got {value!r})") from None
    if isinstance(value, bool):
        raise UsageError(f"{name} must be a number (got {value!r})")
    lo_s = "-inf" if lo is None else _fmt(lo)
    hi_s = "inf" if hi is None else _fmt(hi)
    rng = f"{'(' if lo_open or lo is None else '['}{lo_s}, {hi_s}{']' if hi is not None else ')'}"
    unit_s = f" {unit}" if unit else ""
    ok = math.isfinite(v)
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
        ok = v <= hi
    if not ok:
        raise UsageError(f"{name} must be a finite number in {rng}{unit_s} (got {value!r})")
    return v


def integer(name: str, value: Any, lo: int, hi: int, *, unit: str = "") -> int:
    """A whole number in [lo, hi] (bools and non-integral floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{name} must be a whole number (got {value!r})")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise UsageError(f"{name} must be a whole number (got {value!r})")
    v = int(value)
    if not lo <= v <= hi:
        unit_s = f" {unit}" if unit else ""
        raise UsageError(f"{name} must be in [{_fmt(lo)}, {_fmt(hi)}]{unit_s} (got {value!r})")
    return v


def optional_number(name: str, value: Any, *args: Any, **kw: Any) -> float | None:
    return None if value is None else number(name, value, *args, **kw)


def optional_integer(name: str, value: Any, lo: int, hi: int, **kw: Any) -> int | None:
    return None if value is None else integer(name, value, lo, hi, **kw)


def distinct(name: str, values: Iterable[Any]) -> None:
    """Each value once: a list option that names one twice (a step, a key) is refused,
    never run twice or resolved by a silent last-wins."""
    seen: set[Any] = set()
    for x in values:
        if x in seen:
            raise UsageError(f"{name} gives {x!r} more than once: give each once")
        seen.add(x)


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UsageError(f"{name} must be one of {', '.join(allowed)} (got {value!r})")
    return str(value)


def header_value(name: str, value: str) -> str:
    """A value sent in an HTTP header (an API key): visible ASCII, with spaces or tabs only
    between other characters (RFC 9110 5.5). A CR or LF would end the header and start
    another; the value is a secret, so the message names the position, never the value."""
    for i, ch in enumerate(value):
        inner = 0 < i < len(value) - 1
        if not ("!" <= ch <= "~" or (ch in " \t" and inner)):
            raise UsageError(
                f"{name} has a character not allowed in an HTTP header (U+{ord(ch):04X} at "
                f"position {i + 1} of {len(value)}: visible ASCII only); the key is not shown"
            )
    return value


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_var(name: str, var: Any) -> str:
    """The name of an environment variable an option was explicitly given (an API key's):
    a valid name whose variable is set and not empty. Unset, it silently sent no key."""
    if not isinstance(var, str) or not _ENV_NAME.fullmatch(var):
        raise UsageError(
            f"{name} must name an environment variable (letters, digits and '_', not "
            f"starting with a digit; got {var!r})"
        )
    if not os.environ.get(var):
        raise UsageError(
            f"{name} {var}: that environment variable is not set or is empty, so no key "
            f"would be sent; set it, or leave {name} out"
        )
    return var


def label(name: str, value: str) -> str:
    """A name that is one safe path component: letters, digits, '.', '_', '-', not
    starting with '.', at most 100 characters, so it can never leave its parent folder."""
    # fullmatch: '$' would let a final newline in
    if not isinstance(value, str) or not _LABEL.fullmatch(value):
        raise UsageError(
            f"{name} must be 1-100 characters of letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit (got {value!r})"
        )
    return value


def output_dir(name: str, path: str | Path) -> Path:
    """A directory we may create or write into: not an existing file, and a parent that
    exists as a directory or can be created."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{name} {p} exists and is not a directory")
    for parent in [p, *p.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{name} {p} cannot be created: {parent} is not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UsageError(f"{name} {p} cannot be created: {parent} is not writable")
            break
    return p


def make_dir(name: str, path: str | Path) -> Path:
    """Create directory ``path`` (and its parents); one line naming ``name`` when that is
    impossible or the directory is not writable."""
    p = output_dir(name, path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{name} {p}: cannot create it ({exc.strerror or exc})") from None
    if not os.access(p, os.W_OK):
        raise UsageError(f"{name} {p}: not writable")
    return p


def missing_dirs(path: str | Path) -> list[Path]:
    """The folders that creating directory ``path`` with its parents would make, innermost
    first (empty when it exists): what a failed start removes again (:func:`remove_empty_dirs`)."""
    out = []
    for p in [Path(path), *Path(path).parents]:
        if p.exists() or p.is_symlink():
            break
        out.append(p)
    return out


def remove_empty_dirs(dirs: Iterable[Path]) -> None:
    """Remove each of ``dirs`` (innermost first) that is still empty; a folder that holds
    anything is left, with everything above it."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            return


def output_file(
    name: str,
    path: str | Path,
    inputs: Iterable[str | Path] = (),
    *,
    mkdir: bool = True,
    own_kinds: tuple[str, ...] = (),
) -> Path:
    """A file about to be (over)written or appended to, checked before any work is done:
    not a directory, FIFO, socket or block device (a FIFO would block the writer), its
    folder created if needed (``mkdir``), writable, and none of ``inputs``: the files the
    command reads, a directory standing for every file under it. "The same file" is the
    same inode, so a symlink or a hard link to an input is refused too. ``own_kinds``:
    suffixes of files the command writes and never reads (a report's ``.html``), which a
    rerun may overwrite inside an input directory."""
    p = Path(path)
    if not str(path):
        raise UsageError(f"{name} is empty; give a file name")
    if "\0" in str(path):
        raise UsageError(f"{name} {str(path)!r} contains a NUL character")
    if p.is_dir():
        raise UsageError(f"{name} {p} is a directory; give a file name")
    try:  # a link to itself: the OS's word (resolving it below raised RuntimeError)
        os.stat(p)
    except FileNotFoundError:
        pass  # a new file (or a link to one)
    except OSError as exc:
        raise UsageError(f"{name} {p} cannot be written: {exc.strerror or exc}") from None
    if p.exists() and not (p.is_file() or p.is_char_device()):
        raise UsageError(f"{name} {p} is not a regular file (a FIFO or socket would block)")
    parent = p.parent if str(p.parent) else Path(".")
    if mkdir:
        make_dir(name, parent)
    else:
        output_dir(name, parent)
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{name} {p}: not writable")
    if p.exists():  # root passes os.access everywhere: /proc/version still refuses a write
        try:
            open(p, "ab").close()  # noqa: SIM115 - appends nothing: the file is as it was
        except OSError as exc:
            raise UsageError(f"{name} {p} cannot be written: {exc.strerror or exc}") from None
    inp = _input_of(p, inputs, own_kinds)
    if inp is not None:
        raise UsageError(
            f"{name} {p} is {inp}, which this command reads: writing it would destroy "
            "the input; write elsewhere"
        )
    return p


def _input_of(
    out: Path, inputs: Iterable[str | Path], own_kinds: tuple[str, ...] = ()
) -> str | None:
    """Which of ``inputs`` the file ``out`` is (by inode, or by place when it does not
    exist yet), as words for the message; None when it is none of them."""
    try:
        st = out.stat()
        key: tuple[int, int] | None = (st.st_dev, st.st_ino)
    except OSError:
        key = None
    real = out.resolve()
    for i in inputs:
        ip = Path(i)
        if real == ip.resolve():
            return f"input {ip}"
        try:
            ist = ip.stat()
        except OSError:
            continue
        if key == (ist.st_dev, ist.st_ino):
            return f"input {ip}"
        if not ip.is_dir() or key is None:
            continue
        # a file of the command's own kind may be rewritten in place; a link to an input not
        own = out.suffix.lower() in own_kinds
        place = out.absolute().parent.resolve() / out.name  # the name itself, not its target
        if not own and ip.resolve() in real.parents:
            return f"inside input {ip}"
        for root, _dirs, files in os.walk(ip, followlinks=False):
            for f in files:
                fp = os.path.join(root, f)
                try:
                    fst = os.stat(fp)
                except OSError:
                    continue
                here = Path(root).resolve() / f
                if (fst.st_dev, fst.st_ino) == key and not (own and here == place):
                    return f"a link to {fp} inside input {ip}"
    return None


def command_line(name: str, text: str | None) -> list[str] | None:
    """A command given as one string, split into arguments like a POSIX shell would (no
    shell runs it): one line for an unbalanced quote, an empty command, a NUL or a first
    word that names no program that could be run."""
    if text is None:
        return None
    if "\0" in text:
        raise UsageError(f"{name} contains a NUL character")
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{name} {text!r} is not a valid command line: {exc}") from None
    if not argv:
        raise UsageError(f"{name} is empty; give a command")
    # found as it will be run (no shell: PATH for a bare name, else relative to the working
    # directory), at start rather than when the first alert fires
    if shutil.which(argv[0]) is None:
        raise UsageError(
            f"{name}: no program {argv[0]!r} can be run (not on PATH, or not an executable file)"
        )
    return argv


def port(name: str, value: Any, *, lo: int = 0) -> int:
    """A TCP port: 0 (any free port) or 1 to 65535."""
    return integer(name, value, lo, 65535)


def unbound_port(name: str, host: str, port: int) -> int:
    """A port that a server about to start here can bind on ``host``: one where something
    already listens is refused, before anything is built or started (else a readiness
    check could take whatever answers there for the new server). 0 (any) passes."""
    if port:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no owner
            try:
                s.bind((host, port))
            except OSError as exc:
                raise UsageError(
                    f"{name} {port} is taken on {host} ({exc.strerror or exc}): "
                    "give a free port, or 0 for any"
                ) from None
    return port


def bind_host(name: str, host: str, port: int) -> str:
    """An address a server binds: not empty (Python reads "" as every interface, so
    listening beyond loopback takes an address typed out, such as 0.0.0.0), and one this
    machine resolves (a name is resolved once, here)."""
    if not host.strip():
        raise UsageError(f"{name} is empty; give an address to bind, e.g. 127.0.0.1")
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError) as exc:
        raise UsageError(f"{name} {host!r} is not an address to bind: {exc}") from None
    return host


_PROM_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def prom_name(name: str, value: str, *, empty: bool = False) -> str:
    """A Prometheus metric name (or a prefix of one): ``[a-zA-Z_:][a-zA-Z0-9_:]*``, so it
    goes into PromQL and rule files as it is, never as syntax."""
    if value == "" and empty:
        return value
    if not isinstance(value, str) or len(value) > 200 or not _PROM_NAME.fullmatch(value):
        raise UsageError(
            f"{name} must be a Prometheus metric name: a letter, '_' or ':' then letters, "
            f"digits, '_' or ':', at most 200 (got {value!r})"
        )
    return value


def input_dir(name: str, path: str | Path) -> Path:
    """An existing directory (a results root to scan), named when it is not."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{name} {p} does not exist")
    if not p.is_dir():
        raise UsageError(f"{name} {p} is not a directory")
    return p


def input_file(name: str, path: str | Path) -> Path:
    """An existing regular file (not a FIFO, device or directory, which would hang or fail)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{name} {p} {missing(p)}")
    if not p.is_file():
        raise UsageError(f"{name} {p} is not a regular file")
    return p


def missing(p: Path) -> str:
    """Why a path that does not exist as a file does not: ``does not exist``, or what a
    symbolic link there points at (a loop of links, or a link to nothing, said "does not
    exist" of a name that is there)."""
    import errno
    import os

    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a loop of symbolic links"
        if p.is_symlink():
            return f"is a symbolic link to {os.readlink(p)}, which does not exist"
        if exc.errno == errno.ENOTDIR:
            return "does not exist (a folder on its path is a file)"
    return "does not exist"


SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")


def slo(values: Mapping[str, object]) -> dict[str, float]:
    """Goodput SLOs: known keys, each a finite number of milliseconds above 0 (30 days max)."""
    out: dict[str, float] = {}
    for k, val in values.items():
        if k not in SLO_KEYS:
            raise UsageError(f"unknown SLO {k!r}: use {', '.join(SLO_KEYS)}")
        out[k] = number(f"--slo {k}", val, 0, 30 * 86400e3, lo_open=True, unit="ms")
    return out


def check_url(url: str, name: str = "--url") -> str:
    """An http(s) URL with a host; anything else fails before a connection is tried."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"{name} {redact_url(url)!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = redact_url(url)
        raise UsageError(f"{name} must be http://host[:port] or https://... (got {shown!r})")
    del port
    return url
