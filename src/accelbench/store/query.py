"""The cross-run store: DuckDB views over the run directories under a results root (no
server, in memory), and user SQL over them with the file system and network closed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from accelbench.documents import not_a_file
from accelbench.errors import AccelbenchError
from accelbench.metrics.records import REQUEST_SCHEMA
from accelbench.metrics.registry import CACHE, FIGURES
from accelbench.store.reader import RunInfo, dig, iter_runs

# (suite, verdict) of a run directory and its run.json, e.g. ("stress soak", "pass"): the
# suites know (accelbench.suites.sections.suite_of, which the CLI hands in); the store
# imports no suite
SuiteOf = Callable[[Path, Mapping[str, object]], tuple[str | None, str | None]]


def _no_suite(run_dir: Path, run: Mapping[str, object]) -> tuple[str | None, str | None]:
    return None, None


RUN_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("run_id", pa.string()),
    ("path", pa.string()),
    ("sweep", pa.string()),
    ("source", pa.string()),
    ("suite", pa.string()),
    ("verdict", pa.string()),
    ("status", pa.string()),
    ("emulated", pa.string()),  # the accelerator serve emulated predicted; null: measured
    ("started_at", pa.string()),
    ("label", pa.string()),
    ("model", pa.string()),
    ("endpoint", pa.string()),
    ("mode", pa.string()),
    ("concurrency", pa.int64()),
    ("rate", pa.float64()),
    ("gpus", pa.int64()),
    ("isl", pa.int64()),
    ("osl", pa.int64()),
    ("dataset", pa.string()),
    ("completed", pa.int64()),
    ("failed", pa.int64()),
    ("duration_s", pa.float64()),
    ("requests_per_s", pa.float64()),
    ("output_tps", pa.float64()),
    ("total_tps", pa.float64()),
    ("output_tps_per_gpu", pa.float64()),
    ("total_tps_per_gpu", pa.float64()),
    ("interactivity", pa.float64()),
    ("ttft_p50_ms", pa.float64()),
    ("ttft_p99_ms", pa.float64()),
    ("tpot_p50_ms", pa.float64()),
    ("tpot_p99_ms", pa.float64()),
    ("e2e_p50_ms", pa.float64()),
    ("e2e_p99_ms", pa.float64()),
    ("error_rate", pa.float64()),
    # the prefix cache (summary.json ``cache``; null for a run without one)
    *((k, pa.float64()) for k in CACHE),
    ("problems", pa.string()),
)
RUNS_SCHEMA = pa.schema(list(RUN_FIELDS))
# One row of the ``runs`` view: every value coerced to its column's type (RUN_FIELDS).
RunRow = dict[str, str | int | float | None]


def run_row(r: RunInfo, suite_of: SuiteOf = _no_suite) -> RunRow:
    """One flat row of key figures for the ``runs`` view."""
    wl = r.workload()
    sweep_dir = r.path.parent
    suite, verdict = suite_of(r.path, r.run)
    row: dict[str, object] = {
        "run_id": r.run_id,
        "path": str(r.path),
        "sweep": sweep_dir.name if (sweep_dir / "sweep.json").exists() else None,
        "source": str(r.doc.source.get("tool") or "accelbench")
        if r.doc and r.doc.source
        else "accelbench",
        "suite": suite,
        "verdict": verdict,
        "status": r.status,
        "emulated": r.emulated,
        "started_at": r.doc.started_at if r.doc else None,
        "label": r.config.get("label"),
        "model": wl.get("model"),
        "endpoint": wl.get("endpoint"),
        "mode": "rate" if r.rate is not None else "concurrency",
        "concurrency": r.concurrency,
        "rate": r.rate,
        "gpus": r.gpus,
        "isl": wl.get("isl"),
        "osl": wl.get("osl"),
        "dataset": wl.get("dataset"),
        "completed": dig(r.summary, "counts", "completed"),
        "failed": dig(r.summary, "counts", "failed"),
        "duration_s": dig(r.summary, "window", "duration_s"),
        "problems": "; ".join(r.problems) or None,
    }
    for k in FIGURES:
        row[k] = r.figure(k) if r.summary else None
    out: RunRow = {}
    for name, typ in RUN_FIELDS:  # coerce to the column types
        v = row.get(name)
        out[name] = None
        if v is None:
            continue
        try:
            if pa.types.is_integer(typ):
                n = int(v)  # type: ignore[call-overload]  # a figure or a count: checked here
                out[name] = n if -(2**63) <= n < 2**63 else None
            elif pa.types.is_floating(typ):
                out[name] = float(v)  # type: ignore[arg-type]  # as above
            else:
                out[name] = str(v)
        except (TypeError, ValueError, OverflowError):
            out[name] = None
    return out


def _unreadable_parquet(path: Path) -> str | None:
    """Why a requests.parquet's footer does not read (None: it reads): one truncated or
    garbage file must not take the ``requests`` view of every other run down with it (its
    run still has its row)."""
    import pyarrow.parquet as pq

    why = not_a_file(path)
    if why is not None:  # a FIFO's read would wait for ever
        return why
    try:
        pq.read_metadata(path)
    except Exception as exc:  # noqa: BLE001 - absent, unreadable or not Parquet: left out
        return _first_line(exc)
    return None


def shared_run_ids(ids: Iterable[tuple[str, Path]]) -> list[str]:
    """One line per run_id that more than one run directory has (``ids``: each run's id
    and directory; a run copied, or runs of two roots side by side): joined on run_id,
    each one's requests would count for every run of that id."""
    dirs: dict[str, list[str]] = {}
    for run_id, path in ids:
        dirs.setdefault(run_id, []).append(str(path))
    return [
        f"run_id {i!r} is shared by {len(p)} run directories ({', '.join(p)}): "
        "join runs and requests on path, not run_id"
        for i, p in dirs.items()
        if len(p) > 1
    ]


def open_store(
    root: str | Path,
    *,
    sandbox: bool = True,
    suite_of: SuiteOf = _no_suite,
    left_out: list[str] | None = None,
) -> Any:
    """An in-memory DuckDB connection with two views over every run under ``root``:
    ``runs`` (one row per run, RUN_FIELDS) and ``requests`` (every requests.parquet row,
    REQUEST_SCHEMA columns, plus ``run_id`` and ``path``, the run's as ``runs`` has it). A
    run whose requests.parquet is there but does not read is left out of ``requests``;
    one line each on why goes to ``left_out``, and one for each run_id that several run
    directories share (``shared_run_ids``).

    ``sandbox`` (the default): once the views exist, DuckDB may read only the runs'
    requests.parquet files: no other file, no writing (``COPY ... TO``, ``ATTACH``), no
    extensions, no network; and the configuration is locked so SQL cannot undo that."""
    import duckdb

    rows: list[RunRow] = []
    ids: list[tuple[str, Path]] = []
    files: list[tuple[str, str, str]] = []  # (file, run_id, path as the runs view has it)
    unread: list[str] = []
    for r in iter_runs(root):  # one run's documents at a time: only its row is kept
        rows.append(run_row(r, suite_of))
        ids.append((r.run_id, r.path))
        f = r.path / "requests.parquet"
        why = _unreadable_parquet(f)
        if why is None:
            files.append((str(f.resolve()), r.run_id, str(r.path)))
        elif f.exists() or f.is_symlink():
            unread.append(f"{r.path}: requests.parquet unreadable ({why}); "
                          "left out of the requests view")  # fmt: skip
    if left_out is not None:
        left_out += shared_run_ids(ids) + unread
    con = duckdb.connect(database=":memory:")
    con.register("_runs_tbl", pa.Table.from_pylist(rows, schema=RUNS_SCHEMA))
    con.execute("CREATE VIEW runs AS SELECT * FROM _runs_tbl")
    if files:
        con.register(
            "_req_files",
            pa.table({"file": [f for f, _, _ in files], "run_id": [i for _, i, _ in files],
                      "path": [p for _, _, p in files]}),
        )  # fmt: skip
        lst = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f, _, _ in files) + "]"
        con.execute(
            "CREATE VIEW requests AS SELECT m.run_id, m.path, r.* EXCLUDE (filename) FROM "
            f"read_parquet({lst}, filename=true, union_by_name=true) r "
            "JOIN _req_files m ON r.filename = m.file"
        )
    else:
        empty = pa.schema([("run_id", pa.string()), ("path", pa.string()), *REQUEST_SCHEMA])
        empty = empty.empty_table()
        con.register("_req_empty", empty)
        con.execute("CREATE VIEW requests AS SELECT * FROM _req_empty")
    if sandbox:
        con.execute("SET allowed_paths = ?", [[f for f, _, _ in files]])
        con.execute("SET enable_external_access = false")
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET lock_configuration = true")
    return con


def query_runs(
    root: str | Path,
    sql: str,
    suite_of: SuiteOf = _no_suite,
    left_out: list[str] | None = None,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one SQL statement over the ``runs`` and ``requests`` views, sandboxed (see
    :func:`open_store`): SQL that reads other files, writes, installs or loads extensions
    or reaches the network, or holds more than one statement, fails with AccelbenchError.
    The runs left out of ``requests`` (their lines) go to ``left_out``."""
    import duckdb

    if not sql.strip():
        raise AccelbenchError("the query is empty: give one SQL statement, e.g. SELECT * FROM runs")
    try:
        con = open_store(root, suite_of=suite_of, left_out=left_out)
    except duckdb.Error as exc:  # a file that passed the footer check but not DuckDB's
        raise AccelbenchError(f"cannot open the runs under {root}: {_first_line(exc)}") from None
    try:
        # DuckDB ran every statement and returned the last one's rows: the others' were
        # lost without a word (DuckDB's own parser: a ';' inside a string is no boundary)
        n = len(con.extract_statements(sql))
        if n > 1:
            raise AccelbenchError(
                f"the query holds {n} SQL statements: give one (DuckDB would show only the last)"
            )
        cur = con.execute(sql)
        if cur is None:  # only comments, or ';': DuckDB ran nothing
            raise AccelbenchError("the query has no SQL statement")
        cols = [d[0] for d in cur.description] if cur.description else []
        return cols, cur.fetchall()
    except duckdb.Error as exc:
        raise AccelbenchError(f"query failed: {_first_line(exc)}") from None
    finally:
        con.close()


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
