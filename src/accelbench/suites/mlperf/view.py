"""The report section of an MLPerf run directory (mlperf.json and LoadGen's logs),
read through the suite's documents (suites/mlperf/document.py, logs.py)."""

from __future__ import annotations

from pathlib import Path

from accelbench.documents import read_file
from accelbench.errors import AccelbenchError, DocumentError
from accelbench.report.sections import SuiteView, Table, f, num
from accelbench.store.reader import RunInfo, dig, load_run
from accelbench.suites.mlperf.document import MLPERF_JSON, MlperfDoc, label, read_mlperf, run_label
from accelbench.suites.mlperf.logs import DETAIL_FILE, SUMMARY_FILE, read_loadgen


class MlperfSection:
    kind = "mlperf"
    also_a_run = True  # an MLPerf directory is also an ordinary run

    def detect(self, path: Path) -> bool:
        return (path / DETAIL_FILE).is_file() or (path / SUMMARY_FILE).is_file()

    def point_tag(self, run: RunInfo) -> str | None:
        ml = run_label(run.run.get("mlperf"))  # an MLPerf run says VALID / non-compliant
        return None if ml is None else f"MLPerf {ml}"

    def fill(self, path: Path, view: SuiteView) -> None:
        _fill(path, view)


def _fill(path: Path, view: SuiteView) -> None:
    view.title = f"MLPerf: {path.name}"
    res = read_loadgen(path)
    meta: MlperfDoc | None = None
    if (path / MLPERF_JSON).is_file():
        try:
            meta = read_mlperf(path, MLPERF_JSON)
        except DocumentError as exc:
            view.warnings.append(str(exc))
    if res.result is None:
        view.warnings.append(
            f"{DETAIL_FILE}: no result_validity event "
            f"({'missing' if not (path / DETAIL_FILE).is_file() else 'malformed or truncated'})"
            ": no LoadGen result"
        )
    # mlperf.json's result is accelbench's (INVALID when a sample failed, whatever LoadGen
    # said); LoadGen's own is the detail log's, for a run without an mlperf.json
    lbl = meta.label if meta is not None else label(res.result, False)
    view.verdict = lbl  # "VALID, non-compliant": the label goes wherever the result does
    view.headline.append(
        f"{meta.benchmark if meta else None} {meta.scenario if meta else None} "
        f"(LoadGen {res.scenario}, {res.mode}): {lbl}"
    )
    if meta is None or not meta.compliant:
        why = (meta.noncompliance if meta else None) or ["no mlperf.json compliance record"]
        view.headline.append("NON-COMPLIANT: " + "; ".join(why))
    reasons = meta.reasons if meta is not None else res.reasons
    if reasons:
        view.headline.append("INVALID because: " + "; ".join(reasons))
    if num(res.peak_qps) is not None:
        view.headline.append(f"peak QPS (find-peak): {f(res.peak_qps)}")
    if res.checks:
        view.tables.append(Table("LoadGen's checks", ["check", "met"],
                                 [[k, "yes" if ok else "NO"] for k, ok in res.checks.items()]))  # fmt: skip
    run = None
    try:
        run = load_run(path)
    except AccelbenchError as exc:
        view.warnings.append(str(exc))
    view.run = run
    s = run.summary if run is not None else None
    fig = res.figures

    def f6(x: object) -> str:  # LoadGen prints 2 decimals: keep them
        return f(x, 6)

    rows = []
    for what, key, col in (("TTFT", "ttft", "ttft_ms"), ("TPOT", "tpot", "tpot_ms"),
                           ("latency (E2E)", "latency", "e2e_ms")):  # fmt: skip
        for q in ("50", "90", "99"):
            rows.append([f"{what} p{q} ms", f6(fig.get(f"{key}_p{q}_ms")),
                         f6(dig(s, "latency", col, f"p{q}"))])  # fmt: skip
    rows.append(["completed samples/s; requests/s", f6(fig.get("completed_samples_per_s")),
                 f6(dig(s, "throughput", "requests_per_s"))])  # fmt: skip
    rows.append(["tokens/s; output tokens/s",
                 f6(fig.get("completed_tokens_per_s") or fig.get("tokens_per_s")),
                 f6(dig(s, "throughput", "output_tokens_per_s"))])  # fmt: skip
    rows.append(["TTFT / TPOT limit ms", f"{f6(fig.get('ttft_limit_ms'))} / "
                 f"{f6(fig.get('tpot_limit_ms'))}", ""])  # fmt: skip
    view.tables.append(Table(
        "LoadGen's figures beside accelbench's (LoadGen times from the scheduled query; "
        "accelbench from the request's send)", ["figure", "LoadGen", "accelbench"], rows,
    ))  # fmt: skip
    try:  # a FIFO is refused, never waited on
        text = read_file(path / SUMMARY_FILE).decode("utf-8", errors="replace")
        view.text = text[:20000]
    except FileNotFoundError:
        view.warnings.append(f"{SUMMARY_FILE} missing")
    except OSError as exc:
        words = exc.strerror if exc.errno == 0 else f"cannot be read ({exc.strerror or exc})"
        view.warnings.append(f"{SUMMARY_FILE} {words}")
