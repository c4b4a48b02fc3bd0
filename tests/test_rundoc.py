"""A run directory's documents (issue 21): run.json as one RunDoc with one writer and one
validating reader, summary.json with one writer and one reader, and the end of a run in
one pass (the sampler stopped with the summary's window and token counts, summary.json
written once)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelbench.documents import Fields
from accelbench.errors import DocumentError
from accelbench.metrics.records import FIELD_NAMES, RequestRecord, RequestRow
from accelbench.metrics.summary import EnergySection, TelemetrySection
from accelbench.runner import finalize
from accelbench.runner.benchmark import Target, new_run_doc
from accelbench.runner.config import BenchmarkConfig
from accelbench.store.reader import load_run
from accelbench.store.rundoc import (
    RunDoc,
    ServerInfo,
    read_run_doc,
    read_summary,
    write_run_doc,
    write_summary,
)


def _doc(**kw: object) -> RunDoc:
    base: dict = {"run_id": "r1", "status": "running", "config": {"concurrency": 2, "gpus": 1}}
    base.update(kw)
    return RunDoc(**base)


def test_run_doc_round_trips_through_its_one_writer_and_reader(tmp_path: Path) -> None:
    doc = _doc(server=ServerInfo(url="http://127.0.0.1:1", models=["m"]), planned_requests=4)
    write_run_doc(tmp_path, doc)
    raw = json.loads((tmp_path / "run.json").read_text())
    assert next(iter(raw)) == "schema" and raw["schema"] == "accelbench.run/1"
    assert "kind" not in raw and "client" not in raw  # absent sections are left out
    assert read_run_doc(tmp_path) == doc


def test_old_run_json_reads_and_unknown_versions_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "old", "configuration": {"a": 1}}))
    old = read_run_doc(tmp_path)  # no schema: before the field existed
    assert old.schema == "accelbench.run/1" and old.config == {"a": 1}
    assert old.status == "unknown"  # it recorded none: readers fall back on the summary
    (tmp_path / "run.json").write_text(json.dumps({"schema": "accelbench.run/9", "run_id": "x"}))
    with pytest.raises(DocumentError) as exc:
        read_run_doc(tmp_path)
    assert "accelbench.run/9" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("status", 5, "run.json: status: expected a string, got 5"),
        ("config", [1], "run.json: config: expected an object, got list"),
        ("planned_requests", -2, "run.json: planned_requests: expected a whole number >= 0"),
        ("server", {"models": "m"}, "run.json: server.models: expected a list"),
        (
            "server",
            {"embedded": {"engine": 3}},
            "run.json: server.embedded.engine: expected a string",
        ),
        ("absent", [1], "run.json: absent[0]: expected a string"),
    ],
)
def test_damaged_run_json_is_one_line_naming_the_field(
    tmp_path: Path, field: str, value: object, says: str
) -> None:
    doc = _doc().to_json()
    doc[field] = value
    (tmp_path / "run.json").write_text(json.dumps(doc))
    with pytest.raises(DocumentError, match="^run.json: ") as exc:
        read_run_doc(tmp_path, "run.json")
    assert says in str(exc.value) and "\n" not in str(exc.value)
    # the store reads the rest of the directory and says what was wrong
    info = load_run(tmp_path)
    assert info.doc is None and any(says in p for p in info.problems)


@pytest.mark.parametrize(
    ("engine", "name"), [("llama", "llama.cpp llama-server"), ("vllm", "vLLM")]
)
def test_run_json_names_the_embedded_engine_that_ran(
    tmp_path: Path, engine: str, name: str
) -> None:
    class Started:
        args = ["serve", "--port", 1234]

    cfg = BenchmarkConfig(url="http://user:SECRETMARK@127.0.0.1:9", model="m",
                          embedded_engine=engine)  # fmt: skip
    target = Target(api_key=None, server=ServerInfo(models=["m"]), tok=None, special=0)
    doc = new_run_doc(cfg, tmp_path / "r", target, Started(), planned=3)
    assert doc.server["embedded"] == {"engine": name, "args": ["--port", "1234"]}
    assert doc.status == "running" and doc.planned_requests == 3
    assert "SECRETMARK" not in json.dumps(doc.to_json())
    without = new_run_doc(cfg, tmp_path / "r", target, None, planned=None)
    assert "embedded" not in without.server


def test_summary_json_reader_refuses_with_one_line_or_drops_a_section(tmp_path: Path) -> None:
    for bad, says in (
        ([], "summary.json: expected an object, got list"),
        ({"schema": "accelbench.summary/7"}, "accelbench.summary/7"),
        ({"gpus": 0}, "gpus must be a whole number in 1..65536 (got 0)"),
    ):
        (tmp_path / "summary.json").write_text(json.dumps(bad))
        with pytest.raises(DocumentError) as exc:
            read_summary(tmp_path, "summary.json")
        assert says in str(exc.value) and "\n" not in str(exc.value)
    (tmp_path / "summary.json").write_text("{ torn")
    with pytest.raises(DocumentError, match="summary.json unreadable"):
        read_summary(tmp_path, "summary.json")
    figures = {"throughput": {"output_tokens_per_s_per_gpu": 1.0,
                              "total_tokens_per_s_per_gpu": 2.0},
               "interactivity": {"tok_s_user": None}}  # fmt: skip
    doc = {"gpus": 2, "energy": "lots", "health": {"verdict": 1}, "client": {"workers": 3},
           **figures}  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(doc))
    s, problems = read_summary(tmp_path, "summary.json")
    assert "energy" not in s and "health" not in s and "workers" not in s["client"]
    assert problems == [
        "summary.json: energy is not an object; ignored",
        "summary.json: health.verdict is not a string; ignored",
        "summary.json: client.workers is not a list; ignored",
    ]


def test_request_row_type_has_every_record_field_in_order() -> None:
    assert tuple(RequestRow.__annotations__) == FIELD_NAMES
    row = RequestRecord(idx=1).to_row()
    assert tuple(row) == FIELD_NAMES


# -- the end of a run -------------------------------------------------------------------
T0 = 1_000_000_000_000


def _run_dir(tmp_path: Path) -> Path:
    """A run that ended: run.json and a journal of 6 measured requests (one failed, its
    send the earliest) and a warm-up one."""
    d = tmp_path / "run"
    d.mkdir()
    write_run_doc(d, _doc(config={"concurrency": 2, "gpus": 1}))
    rows = []
    for i in range(7):
        t = T0 + i * 100_000_000
        r = RequestRecord(idx=i, warmup=i == 6, t_sched=t, t_send=t, ok=i != 0, isl=10,
                          isl_source="server_usage")  # fmt: skip
        if r.ok:
            r.chunk_times = [t + 20_000_000 * (k + 1) for k in range(4)]
            r.t_first, r.t_last, r.t_done = r.chunk_times[0], r.chunk_times[-1], r.chunk_times[-1]
            r.osl_server = 5  # the server's count: not the chunk count
        else:
            r.error_kind, r.t_done = "http_5xx", t + 1_000_000
        rows.append(r.derive().to_row())
    (d / "requests.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return d


class FakeSampler:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, object]] = []
        self.fail = fail

    def halt(self) -> None:
        self.calls.append(("halt", None))

    def stop(
        self,
        measured_window_ns: tuple[int, int] | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
    ) -> TelemetrySection:
        self.calls.append(("stop", (measured_window_ns, output_tokens, total_tokens)))
        if self.fail:
            raise RuntimeError("the GPU went away")
        assert measured_window_ns is not None and output_tokens
        joules = 50.0
        span = (measured_window_ns[1] - measured_window_ns[0]) / 1e9
        energy = EnergySection(
            joules=joules, method="counter", window_s=span, average_w=joules / span,
            j_per_output_token=joules / output_tokens,
            j_per_total_token=joules / (total_tokens or 1), devices={},
        )  # fmt: skip
        return TelemetrySection(sources={"fake": "ok"}, energy=energy,
                                health={"verdict": "pass", "findings": []})  # fmt: skip


def test_run_end_stops_the_sampler_with_the_summarys_window_and_writes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _run_dir(tmp_path)
    writes: list[Path] = []

    def counting(run_dir: Path, summary: object) -> None:
        writes.append(run_dir)
        write_summary(run_dir, summary)  # type: ignore[arg-type]

    monkeypatch.setattr(finalize, "write_summary", counting)
    read = []
    monkeypatch.setattr(finalize, "read_run_doc", lambda p: read.append(p))  # never called
    doc = read_run_doc(d)
    sampler = FakeSampler()
    summary = finalize.finalize_run(d, doc=doc, status="completed", client={"n_workers": 1},
                                    sampler=sampler)  # fmt: skip
    assert len(writes) == 1 and read == []  # summary.json once; run.json not read back
    assert [c[0] for c in sampler.calls] == ["halt", "stop"]  # sampling ended first
    window, out_tok, total_tok = sampler.calls[1][1]  # type: ignore[misc]
    w = summary["window"]
    # the window every rate divides by: the failed request's send opens it
    assert window == (w["start_ns"], w["end_ns"]) == (T0, T0 + 5 * 100_000_000 + 80_000_000)
    assert out_tok == summary["tokens"]["output"] == 5 * 5  # the server's counts
    assert total_tok == 5 * 5 + 5 * 10
    energy = summary["energy"]
    assert energy is not None
    assert energy["j_per_output_token"] == pytest.approx(50.0 / 25)
    # one definition: W / (tok/s) is J/token
    tps = summary["throughput"]["output_tokens_per_s"]
    assert tps is not None and energy["average_w"] is not None
    assert energy["average_w"] / tps == pytest.approx(energy["j_per_output_token"])
    on_disk = json.loads((d / "summary.json").read_text())
    assert on_disk["energy"] == energy and on_disk["health"]["verdict"] == "pass"
    assert on_disk["telemetry"]["sources"] == {"fake": "ok"}
    again = read_run_doc(d)
    assert again.status == "completed" and again.finished_at and again.client == {"n_workers": 1}


def test_a_failing_sampler_never_breaks_the_run_end(tmp_path: Path) -> None:
    d = _run_dir(tmp_path)
    summary = finalize.finalize_run(d, status="completed", sampler=FakeSampler(fail=True))
    assert summary["telemetry"] == {"error": "telemetry failed: the GPU went away"}
    assert "energy" not in summary and summary["counts"]["completed"] == 5
    # a recompute (accelbench summarize) keeps what only the live run measured
    (d / "summary.json").write_text(json.dumps({**summary, "energy": {"joules": 1.0}}))
    again = finalize.finalize_run(d)
    assert again["energy"] == {"joules": 1.0} and "error" in again["telemetry"]


@given(st.text(max_size=20), st.text(max_size=20))
def test_a_document_error_is_one_printable_line_whatever_the_file_holds(
    key: str, value: str
) -> None:
    """Keys and values of a damaged file are quoted in the error: none breaks the line."""
    with pytest.raises(DocumentError) as exc:
        Fields({key: value}, "run.json").int(key)
    line = str(exc.value)
    assert line.isprintable() and line.startswith("run.json: ")
    assert str(DocumentError(f"a\nb\x1b[31m{key}")).isprintable()
