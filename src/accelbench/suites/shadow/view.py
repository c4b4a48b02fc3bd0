"""The report section of a shadow directory (shadow.json and verdict.json), read
through the suite's documents (suites/shadow/document.py)."""

from __future__ import annotations

import os
from pathlib import Path

from accelbench.documents import Json
from accelbench.errors import DocumentError
from accelbench.metrics.verdict import word
from accelbench.report.sections import SuiteView, Table, counts, f, interval, verdict_table
from accelbench.store.reader import RunInfo, is_run_dir
from accelbench.suites.shadow.document import SHADOW_JSON, VERDICT, read_meta, read_verdict


class ShadowSection:
    kind = "shadow"
    also_a_run = False

    def detect(self, path: Path) -> bool:
        # the name, whatever stands there (a FIFO, a directory: its reader names it; as
        # "no run directories found" the report named neither)
        return os.path.lexists(path / SHADOW_JSON) or (
            os.path.lexists(path / VERDICT) and not is_run_dir(path)  # a generic name
        )

    def point_tag(self, run: RunInfo) -> str | None:
        return None

    def fill(self, path: Path, view: SuiteView) -> None:
        _fill(path, view)


def _fill(path: Path, view: SuiteView) -> None:
    view.title = f"shadow: {path.name}"
    if os.path.lexists(path / SHADOW_JSON):
        try:
            meta = read_meta(path, SHADOW_JSON)
        except DocumentError as exc:
            view.warnings.append(str(exc))
        else:
            view.headline.append(
                f"mode {meta.mode}, status {meta.status}; baseline {meta.baseline}, "
                f"candidate {meta.candidate}"
            )
    if not os.path.lexists(path / VERDICT):
        view.warnings.append(
            "no verdict.json: run `accelbench shadow verdict DIR --gate ...` first"
        )
        return
    doc = read_verdict(path, VERDICT)
    view.verdict = doc.word
    view.warnings.extend(doc.warnings)  # unpaired records, a journal with none
    view.headline.append(
        f"{doc.paired_requests} paired requests; confidence {f(doc.confidence)}; "
        "a gate passes when its whole interval is on the allowed side of the threshold"
    )
    gates = [g.verdict for g in doc.gates]
    view.tables.append(verdict_table(gates, "Gates"))
    if doc.windows:
        names = [g.name for g in gates]
        rows = [[f"{f(w.start_s)}-{f(w.end_s)}", str(w.requests), word(w.status, "shadow")]
                + [f"{g.verdict.word} {f(g.verdict.estimate)} "
                   f"({interval(g.verdict.low, g.verdict.high)})" for g in w.gates]
                for w in doc.windows]  # fmt: skip
        view.tables.append(Table("Windows (shown beside the verdict; the overall result decides)",
                                 ["window s", "requests", "verdict", *names], rows))  # fmt: skip
    view.tables.append(Table("Sides", [
        "side", "requests", "ok", "errors by kind", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms",
        "TPOT p99 ms", "E2E p50 ms", "E2E p99 ms", "output tok/s",
    ], [[side, str(s.requests), str(s.ok), counts(s.errors),
         *(f(s.latency.get(m, {}).get(q)) for m in ("ttft", "tpot", "e2e") for q in ("p50", "p99")),
         f(s.output_tokens_per_s)] for side, s in doc.sides.items()]))  # fmt: skip
    if doc.counters:
        view.headline.append("counters: " + counts(doc.counters))
    view.headline.append("resources: " + _resources(doc.resources))


def _resources(r: dict[str, Json] | None) -> str:
    if r is None:
        return "not recorded (a verdict.json older than the resources section)"
    if r.get("telemetry") == "off":
        return f"telemetry off: {r.get('reason')}"
    from accelbench.suites.shadow.verdict import resources_line

    return " | ".join(
        f"{side}: {resources_line(r.get(side))}" for side in ("baseline", "candidate")
    )
