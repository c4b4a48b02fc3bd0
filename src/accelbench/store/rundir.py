"""A run directory: run.json, the requests.jsonl journal (written as records arrive),
requests.parquet and summary.json (written atomically at the end, or rebuilt later
from the journal by ``accelbench summarize``). See docs/RESULTS.md."""

from __future__ import annotations

import json
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from accelbench.documents import not_a_file, open_file
from accelbench.errors import AccelbenchError

RUN_JSON = "run.json"
JOURNAL = "requests.jsonl"
PARQUET = "requests.parquet"
SUMMARY = "summary.json"


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


def _finite(o: Any) -> Any:
    """JSON has no NaN / infinity: write them as null / "inf"."""
    if isinstance(o, float):
        if math.isnan(o):
            return None
        if math.isinf(o):
            return "inf" if o > 0 else "-inf"
        return o
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_finite(v) for v in o]
    return o


def json_text(doc: Any, default: Any = _json_default) -> str:
    """``doc`` as strict JSON (RFC 8259, which jq and other readers hold to): NaN as null,
    infinities as "inf" / "-inf" (json.dumps wrote NaN and Infinity, which are not JSON)."""
    return json.dumps(_finite(doc), indent=2, default=default, allow_nan=False)


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write ``doc`` as JSON through a temp file and a rename (no temp file is left behind
    when writing fails)."""
    write_text_atomic(path, json_text(doc) + "\n")


def _by_rename(path: Path) -> bool:
    """Whether ``path`` is written through a temp file and a rename: absent, or a regular
    file. A device (``/dev/null``, ``/dev/full``, through a link too) is written in place:
    a rename would put a file where the device was (as root, ``/dev/null`` itself, for
    every process). Anything else (a directory, a FIFO, a link loop) raises
    AccelbenchError naming it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return True
    except OSError as exc:
        raise AccelbenchError(f"cannot write {path}: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return True
    if stat.S_ISCHR(mode):
        return False
    if stat.S_ISDIR(mode):
        raise AccelbenchError(f"{path} is a directory; give a file name")
    raise AccelbenchError(f"cannot write {path}: it {not_a_file(path)}")


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same directory and a rename
    (a device, in place: ``_by_rename``). A path that cannot be written raises
    AccelbenchError naming it."""
    path = Path(path)
    if not _by_rename(path):
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise AccelbenchError(f"cannot write {path}: {exc.strerror or exc}") from None
        return
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise AccelbenchError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            tmp.unlink()


class Journal:
    """Append-only JSON lines; flushed to the OS at most every ``flush_s`` seconds, so a
    killed client loses at most that much. A torn last line is skipped on reading."""

    def __init__(self, path: Path, flush_s: float = 0.5) -> None:
        self.path = path
        self._f = open(path, "ab")  # noqa: SIM115 - lives as long as the run
        self._last = time.monotonic()
        self.flush_s = flush_s
        self.count = 0

    def write(self, rows: Sequence[Mapping[str, object]]) -> None:
        f = self._f
        for r in rows:
            f.write(orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY))
            f.write(b"\n")
        self.count += len(rows)
        self.flush_if_due()

    def flush_if_due(self) -> None:
        """Hand buffered lines to the OS if the last flush is older than ``flush_s``."""
        now = time.monotonic()
        if now - self._last >= self.flush_s:
            self._f.flush()
            self._last = now

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()


def iter_journal(
    path: Path,
    bad_lines: list[int] | None = None,
    counts: list[int] | None = None,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """The rows of a journal one at a time, read line by line (memory: one line), so a
    journal of millions of requests is never held whole. Unreadable lines (a torn last
    write, or damage), and rows ``keep`` refuses, are skipped; their 1-based numbers go
    to ``bad_lines`` and their count to ``counts[0]``, if given. Raises AccelbenchError
    if the file is missing, is not a regular file (a directory, a FIFO: never waited on)
    or cannot be read (a link loop: the OS's word)."""
    try:
        f = open_file(path)  # a FIFO is refused, never waited on
    except FileNotFoundError:
        raise AccelbenchError(f"{path} is missing: nothing to summarise") from None
    except OSError as exc:
        why = exc.strerror if exc.errno == 0 else f"cannot be read: {exc.strerror or exc}"
        raise AccelbenchError(f"{path} {why}") from None
    with f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                row = None
            if isinstance(row, dict) and (keep is None or keep(row)):
                yield row
            else:
                if counts is not None:
                    counts[0] += 1
                if bad_lines is not None:
                    bad_lines.append(no)


def read_journal(
    path: Path, bad_lines: list[int] | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Rows of a journal, and how many lines were unreadable (a torn last write, or
    damage); their 1-based numbers go to ``bad_lines`` if given."""
    counts = [0]
    rows = list(iter_journal(path, bad_lines, counts))
    return rows, counts[0]


def write_parquet_atomic(path: Path, table: Any) -> None:
    """Write an Arrow table to ``path`` through a temp file in the same directory and a
    rename, so readers see the old file or the new one, never half of one."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    if not _by_rename(path):
        raise AccelbenchError(f"cannot write {path}: it is a device, not a file")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    except OSError as exc:
        raise AccelbenchError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            tmp.unlink()


_DICTIONARY = ("error_kind", "isl_source", "osl_source", "finish_reason")


class ParquetColumns:
    """requests.parquet read a column at a time, where ``summarize`` reads its table: a
    run too large to hold whole (a 72-hour soak: 13 million rows, 415 million chunk
    times) is never in memory at once; each column is read from the file when asked for
    (its few repeated strings dictionary-encoded) and not kept."""

    def __init__(self, path: Path) -> None:
        import pyarrow.parquet as pq

        self.path = path
        pf = pq.ParquetFile(path)
        self.column_names: list[str] = pf.schema_arrow.names
        self.num_rows: int = pf.metadata.num_rows

    def column(self, name: str) -> Any:
        return self.select([name]).column(name)

    def select(self, names: Sequence[str]) -> Any:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pa.default_memory_pool().release_unused()  # the columns read before and dropped

        return pq.read_table(self.path, columns=list(names),
                             read_dictionary=[c for c in _DICTIONARY if c in names])  # fmt: skip

    def chunks(self) -> Iterator[Any]:
        """The chunk columns per 65,536 rows, in row order (``batches``)."""
        return self.batches(("chunk_times", "chunk_tokens"))

    def batches(self, names: Sequence[str], rows: int = 1 << 16) -> Iterator[Any]:
        """The columns ``names`` that the file has, per ``rows`` rows, in row order: one
        reader per row group, its memory handed back after each (one reader over the 13
        row groups of a 72-hour run's file grew to 2.0 GB of RSS; a reader per row group
        stays at 0.4)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = [c for c in names if c in self.column_names]
        for g in range(pq.ParquetFile(self.path).metadata.num_row_groups):
            reader = pq.ParquetFile(self.path)
            for b in reader.iter_batches(batch_size=rows, row_groups=[g], columns=cols):
                yield pa.Table.from_batches([b])
            del reader
            pa.default_memory_pool().release_unused()


def read_for_summary(path: Path, dense_chunks: int) -> tuple[Any, Any]:
    """requests.parquet as ``summarize`` takes it: (table, None) when it holds at most
    ``dense_chunks`` chunk times (the whole table, as always); else (a ParquetColumns,
    and its chunk columns per 65,536 rows, read anew from the file on every call)."""
    import pyarrow.parquet as pq

    md = pq.ParquetFile(path).metadata
    cols = [i for i in range(md.num_columns) if md.schema.column(i).path.startswith("chunk_times.")]
    n = sum(md.row_group(g).column(i).num_values for g in range(md.num_row_groups) for i in cols)
    if n <= dense_chunks:
        return pq.read_table(path), None
    lazy = ParquetColumns(path)
    return lazy, lazy.chunks
