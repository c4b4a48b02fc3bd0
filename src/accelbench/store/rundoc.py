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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from accelbench.documents import Fields, load_json
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


EMULATED_PREFIX = "emulated:"  # an emulated server's model ids: emulated:<accelerator>:<model>


def emulated_accelerator(models: list[str | None]) -> str | None:
    """The accelerator an emulated server emulates, from its model ids; None: a real one."""
    for m in models:
        if m and m.startswith(EMULATED_PREFIX):
            return m[len(EMULATED_PREFIX) :].split(":", 1)[0] or "unknown"
    return None


class ServerInfo(TypedDict, total=False):
    """What the server said about itself (``/v1/models``, ``/version``, ``/props``,
    ``/server_info``: their values are the server's, kept as it sent them)."""

    url: str | None  # redacted: never the credentials
    models: list[str | None]
    version: dict[str, object]
    props: dict[str, object]
    server_info: dict[str, object]
    embedded: EmbeddedEngine
    # ``accelbench serve emulated``: the accelerator it emulates. Its results are
    # predictions, shown labelled as such everywhere (docs/PREDICT.md)
    emulated: str


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
        f = Fields(doc, where)
        f.schema(SCHEMA, KNOWN_SCHEMAS, absent=SCHEMA)  # no schema: it predates the field
        # "configuration": the oldest files
        key = "configuration" if f.has("configuration") and not f.has("config") else "config"
        server = f.opt_obj("server")
        return cls(
            schema=SCHEMA,
            run_id=f.str("run_id", ""),
            status=f.str("status", UNKNOWN_STATUS),
            config=dict(f.json_obj(key)),
            kind=f.opt_str("kind"),
            tool=cast(ToolInfo | None, f.opt_json_obj("tool")),  # shown, never computed on
            started_at=f.opt_str("started_at"),
            finished_at=f.opt_str("finished_at"),
            planned_requests=f.opt_count("planned_requests"),
            environment=cast(Environment | None, f.opt_json_obj("environment")),  # shown
            server=ServerInfo() if server is None else _server(server),
            tokenizer=f.opt_str("tokenizer"),
            special_tokens_per_prompt=f.opt_count("special_tokens_per_prompt"),
            doctor=_section(f, "doctor"),
            schedule=cast(Schedule | None, f.opt_json_obj("schedule")),  # shown only
            cluster=_section(f, "cluster"),
            client=cast(ClientSection | None, f.opt_json_obj("client")),  # summary's reader
            mlperf=_section(f, "mlperf"),
            source=cast(ImportSource | None, f.opt_json_obj("source")),
            absent=f.strs("absent") if f.has("absent") else None,
        )


def _section(f: Fields, key: str) -> dict[str, object] | None:
    """A section kept as the JSON object it is (shown; its own reader checks it)."""
    d = f.opt_json_obj(key)
    return None if d is None else {k: v for k, v in d.items()}


def _server(f: Fields) -> ServerInfo:
    """The server section, its fields that are computed on checked."""
    f.opt_str("url")
    if f.has("models"):
        for i, m in enumerate(f.list("models")):
            if m is not None and not isinstance(m, str):
                raise DocumentError(f"{f.at('models')}[{i}]: expected a model name, got {m!r}")
    emb = f.opt_obj("embedded")
    if emb is not None:
        emb.str("engine")
    f.opt_str("emulated")
    return cast(ServerInfo, dict(f.doc))


def write_run_doc(run_dir: Path, doc: RunDoc) -> None:
    """The only writer of run.json (atomically: temp file + rename)."""
    write_json_atomic(Path(run_dir) / RUN_JSON, doc.to_json())


def read_run_doc(run_dir: Path, where: str | None = None) -> RunDoc:
    """The only reader of run.json: a missing, unreadable or damaged file is one
    DocumentError line naming it (``where``, default its path) and the field."""
    path = Path(run_dir) / RUN_JSON
    return RunDoc.from_json(load_json(path, where or str(path)), where or str(path))


def write_summary(run_dir: Path, summary: Summary) -> None:
    """The only writer of summary.json (atomically), once at a run's end."""
    write_json_atomic(Path(run_dir) / SUMMARY, summary)


def read_summary(
    run_dir: Path, where: str | None = None, *, figures: bool = True
) -> tuple[Summary, list[str]]:
    """The only reader of summary.json: the summary and the sections that had to be
    dropped (:func:`~accelbench.metrics.summary.summary_from_json`); a file that cannot
    be used at all is one DocumentError line naming it (``where``) and the field.
    ``figures=False``: its figures are not checked (a rebuild that recomputes them and
    keeps only the sections a live run measured)."""
    path = Path(run_dir) / SUMMARY
    doc = load_json(path, where or str(path))
    return summary_from_json(doc, where or str(path), figures=figures)
