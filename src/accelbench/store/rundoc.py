"""A run directory's two JSON documents, each with one writer and one validating reader
into the same type (docs/RESULTS.md): run.json as :class:`RunDoc` (:func:`write_run_doc`,
:func:`read_run_doc`) and summary.json as :class:`~accelbench.metrics.summary.Summary`
(:func:`write_summary`, :func:`read_summary`).

Every writer of run.json (a benchmark run, an MLPerf run, the vLLM import) builds a
``RunDoc``; every reader (``accelbench summarize``, the store's ``load_run``) gets one or
a :class:`~accelbench.errors.DocumentError` of one line naming the file and the field.

The ``config`` section stays the run options' own JSON object
(``BenchmarkConfig.to_json``; imports record what their file said): its fields are
checked where they are used (``runner/finalize.py``, ``store/reader.py``), so that one odd
value in an old file costs that figure, not the whole run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from accelbench.errors import DocumentError
from accelbench.metrics.summary import ClientSection, Summary, summary_from_json
from accelbench.store.rundir import RUN_JSON, SUMMARY, write_json_atomic

SCHEMA = "accelbench.run/1"
KNOWN_SCHEMAS = ("accelbench.run/1",)  # a file without ``schema`` predates it: read as /1
STATUSES = ("running", "completed", "interrupted", "failed", "partial")
UNKNOWN_STATUS = "unknown"  # a file that records none (readers fall back on the summary's)

# The engines ``--embedded-engine`` starts, as run.json names them (server.embedded.engine).
EMBEDDED_ENGINE_NAMES = {"llama": "llama.cpp llama-server", "vllm": "vLLM"}


class ToolInfo(TypedDict):
    name: str
    version: str


class Environment(TypedDict):
    host: str
    platform: str
    cpu: str
    cpu_count: int | None
    python: str
    packages: dict[str, str]


class EmbeddedEngine(TypedDict):
    engine: str  # the engine that really ran: EMBEDDED_ENGINE_NAMES
    args: list[str]


class ServerInfo(TypedDict, total=False):
    """What the server said about itself (``/v1/models``, ``/version``, ``/props``,
    ``/server_info``: their values are the server's, kept as it sent them)."""

    url: str | None  # redacted: never the credentials
    models: list[str | None]
    version: dict[str, object]
    props: dict[str, object]
    server_info: dict[str, object]
    embedded: EmbeddedEngine


class Schedule(TypedDict):
    """How the load was sent (docs/RESULTS.md, "run.json schedule")."""

    mode: str
    open_loop: bool
    workers: int
    start_ns: int | None
    concurrency: list[int | None] | None
    max_concurrency: list[int | None] | None
    duration_s: float | None
    num_requests: int | None
    warmup_requests: int


class ImportSource(TypedDict):
    tool: str
    file: str
    date: NotRequired[str | None]


@dataclass
class RunDoc:
    """run.json. Optional sections are absent from the file where None."""

    run_id: str
    status: str
    config: dict[str, Any]  # the run options' JSON object: checked field by field where used
    schema: str = SCHEMA
    kind: str | None = None  # "mlperf" for an MLPerf run
    tool: ToolInfo | None = None
    started_at: str | None = None
    finished_at: str | None = None
    planned_requests: int | None = None
    environment: Environment | None = None
    server: ServerInfo = field(default_factory=lambda: ServerInfo())
    tokenizer: str | None = None
    special_tokens_per_prompt: int | None = None
    doctor: dict[str, object] | None = None  # the doctor's quick checks
    schedule: Schedule | None = None
    cluster: dict[str, object] | None = None  # --ray: docs/CLUSTER.md
    client: ClientSection | None = None
    mlperf: dict[str, object] | None = None  # the MLPerf suite's record (mlperf.json)
    source: ImportSource | None = None  # an imported run: where it came from
    absent: list[str] | None = None  # an imported run: what its file did not hold

    def to_json(self) -> dict[str, object]:
        """The file's object: ``schema`` first; a None section is left out (but
        ``planned_requests``, whose null means "as long as --duration lasts")."""
        out: dict[str, object] = {"schema": self.schema}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            if name != "schema" and (v is not None or name == "planned_requests"):
                out[name] = v
        return out

    @classmethod
    def from_json(cls, doc: object, where: str = RUN_JSON) -> RunDoc:
        """The document read back, or DocumentError naming ``where`` and the field."""
        if not isinstance(doc, dict):
            raise DocumentError(f"{where} is not a JSON object")
        schema = doc.get("schema", SCHEMA)
        if schema not in KNOWN_SCHEMAS:
            raise DocumentError(
                f"{where}: schema {str(schema)[:40]!r} is not one this accelbench reads "
                f"({', '.join(KNOWN_SCHEMAS)}): written by a newer version?"
            )
        c = _Checker(doc, where)
        key = "configuration" if "configuration" in doc and "config" not in doc else "config"
        config = c.obj(key) or {}  # "configuration": the oldest files
        return cls(
            schema=SCHEMA,
            run_id=c.text("run_id", default="") or "",
            status=c.text("status") or UNKNOWN_STATUS,
            config=dict(config),
            kind=c.text("kind"),
            tool=cast(ToolInfo | None, c.obj("tool")),  # shown, never computed on
            started_at=c.text("started_at"),
            finished_at=c.text("finished_at"),
            planned_requests=c.whole("planned_requests"),
            environment=cast(Environment | None, c.obj("environment")),  # shown only
            server=_server(c.obj("server") or {}, where),
            tokenizer=c.text("tokenizer"),
            special_tokens_per_prompt=c.whole("special_tokens_per_prompt"),
            doctor=c.obj("doctor"),
            schedule=cast(Schedule | None, c.obj("schedule")),  # shown only
            cluster=c.obj("cluster"),
            client=cast(ClientSection | None, c.obj("client")),  # summary's reader checks it
            mlperf=c.obj("mlperf"),
            source=cast(ImportSource | None, c.obj("source")),
            absent=c.texts("absent"),
        )


def _server(doc: dict[str, object], where: str) -> ServerInfo:
    """The server section, its fields that are computed on checked."""
    c = _Checker(doc, where, "server.")
    c.text("url")
    models = doc.get("models")
    if models is not None and not (
        isinstance(models, list) and all(m is None or isinstance(m, str) for m in models)
    ):
        raise c._bad("models", "a list of model names")
    emb = c.obj("embedded")
    if emb is not None:
        _Checker(emb, where, "server.embedded.").text("engine")
    return cast(ServerInfo, doc)


class _Checker:
    """Field checks of one document: each wrong type is one DocumentError line."""

    def __init__(self, doc: Mapping[str, object], where: str, prefix: str = "") -> None:
        self.doc, self.where, self.prefix = doc, where, prefix

    def _bad(self, key: str, what: str) -> DocumentError:
        got = json.dumps(self.doc.get(key), default=str)[:40]
        return DocumentError(f"{self.where} is damaged: {self.prefix}{key} is not {what} ({got})")

    def obj(self, key: str) -> dict[str, object] | None:
        v = self.doc.get(key)
        if v is None:
            return None
        if not isinstance(v, dict):
            raise self._bad(key, "an object")
        return v

    def text(self, key: str, default: str | None = None) -> str | None:
        v = self.doc.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise self._bad(key, "a string")
        return v

    def whole(self, key: str) -> int | None:
        v = self.doc.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise self._bad(key, "a whole number")
        if v != int(v) or v < 0:
            raise self._bad(key, "a whole number")
        return int(v)

    def texts(self, key: str) -> list[str] | None:
        v = self.doc.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self._bad(key, "a list of strings")
        return [str(x) for x in v]


def write_run_doc(run_dir: Path, doc: RunDoc) -> None:
    """The only writer of run.json (atomically: temp file + rename)."""
    write_json_atomic(Path(run_dir) / RUN_JSON, doc.to_json())


def read_run_doc(run_dir: Path, where: str | None = None) -> RunDoc:
    """The only reader of run.json: a missing, unreadable or damaged file is one
    DocumentError line naming it (``where``, default its path) and the field."""
    path = Path(run_dir) / RUN_JSON
    return RunDoc.from_json(_load(path, where or str(path)), where or str(path))


def write_summary(run_dir: Path, summary: Summary) -> None:
    """The only writer of summary.json (atomically), once at a run's end."""
    write_json_atomic(Path(run_dir) / SUMMARY, summary)


def read_summary(run_dir: Path, where: str | None = None) -> tuple[Summary, list[str]]:
    """The only reader of summary.json: the summary and the sections that had to be
    dropped (:func:`~accelbench.metrics.summary.summary_from_json`); a file that cannot
    be used at all is one DocumentError line naming it (``where``) and the field."""
    path = Path(run_dir) / SUMMARY
    return summary_from_json(_load(path, where or str(path)), where or str(path))


def _load(path: Path, where: str) -> object:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise DocumentError(f"{where} missing") from None
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad JSON or UTF-8
        raise DocumentError(f"{where} unreadable ({type(exc).__name__}: {str(exc)[:80]})") from None
