"""Import of ``vllm bench serve --save-result`` files as run directories in our format."""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from accelbench.errors import AccelbenchError, UsageError
from accelbench.jsonfile import DuplicateKeyError, loads_unique
from accelbench.metrics.records import REQUEST_SCHEMA, ErrorKind
from accelbench.metrics.registry import (
    MAX_REQUESTS_PER_S,
    MAX_TOKENS_PER_S,
    MAX_TOKENS_PER_S_PER_USER,
)
from accelbench.metrics.summary import ImportSection, Summary
from accelbench.metrics.values import finite_number
from accelbench.store.reader import GPUS_MAX, dig, summarize_table
from accelbench.store.rundir import write_parquet_atomic
from accelbench.store.rundoc import ImportSource, RunDoc, ServerInfo, write_run_doc, write_summary
from accelbench.validate import MAX_DURATION_S, MAX_REQUESTS, make_dir, output_dir
from accelbench.validate import label as safe_label


def _num(x: Any) -> float | None:
    return finite_number(x, strings=True)


INT_MAX = 2**53  # counts and lengths beyond this are not real
LEN_MAX = 10_000_000  # tokens: declared ISL / OSL


def _is_int(x: Any, lo: int = 0) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x < INT_MAX


def _is_real(lo: float, hi: float | None = None, *, lo_open: bool = False) -> Any:
    """A check: a JSON number (not a string, not a bool), finite, in [lo, hi] (lo open
    with ``lo_open``)."""

    def ok(x: Any) -> bool:
        v = finite_number(x)
        return v is not None and (v > lo if lo_open else v >= lo) and (hi is None or v <= hi)

    return ok


def _is_rate(x: Any) -> bool:
    """vllm bench serve's ``request_rate``: requests/s above 0, or infinity (all at once),
    which it writes as the string ``"inf"``."""
    return x == "inf" or x == math.inf or _is_real(0, lo_open=True)(x)


MS_MAX = MAX_DURATION_S * 1000  # a latency longer than the longest run is not real
TPOT_MIN_MS = 1000 / MAX_TOKENS_PER_S_PER_USER  # a shorter TPOT is not real
MIN_DURATION_S = 1e-6  # the totals are divided by it: 2^53 tokens / 1 us stays finite


STAMP_MAX_S = 4e9  # start_times: seconds on the sender's clock (epoch: 1.7e9), in int64 ns


def _is_len(x: Any) -> bool:
    return x is None or (_is_int(x) and x <= LEN_MAX)


def _is_gaps(x: Any) -> bool:
    """One request's inter-token gaps: each, and their sum, a latency of at most a run."""
    return (
        isinstance(x, list)
        and all(_is_real(0, MAX_DURATION_S)(g) for g in x)
        and sum(x) <= MAX_DURATION_S
    )


_LISTS: dict[str, tuple[str, Any]] = {
    "input_lens": (f"whole numbers in 0..{LEN_MAX:,}", _is_len),
    "output_lens": (f"whole numbers in 0..{LEN_MAX:,}", _is_len),
    "ttfts": (
        f"numbers of seconds in [0, {MAX_DURATION_S:,.0f}]",
        lambda x: x is None or _is_real(0, MAX_DURATION_S)(x),
    ),
    "itls": (
        f"lists of numbers of seconds >= 0 summing to at most {MAX_DURATION_S:,.0f}",
        _is_gaps,
    ),
    "errors": ("strings", lambda x: x is None or isinstance(x, str)),
    "start_times": (f"numbers of seconds in [0, {STAMP_MAX_S:g}]", _is_real(0, STAMP_MAX_S)),
}
_SCALARS: dict[str, tuple[str, Any]] = {
    "completed": ("a whole number >= 0", _is_int),
    "failed": ("a whole number >= 0", _is_int),
    "num_prompts": (
        f"a whole number in 1..{MAX_REQUESTS:,}",
        lambda x: _is_int(x, 1) and x <= MAX_REQUESTS,
    ),
    "max_concurrency": ("a whole number >= 1", lambda x: _is_int(x, 1)),
    "request_rate": ('a number of requests/s above 0, or "inf"', _is_rate),
    "duration": (
        f"a number of seconds from {MIN_DURATION_S:g} to {MAX_DURATION_S:,.0f}",
        _is_real(MIN_DURATION_S, MAX_DURATION_S),
    ),
    "total_input_tokens": ("a whole number >= 0", _is_int),
    "total_output_tokens": ("a whole number >= 0", _is_int),
    # at most what a run can measure (the summary reader's bounds: metrics/registry.py)
    "request_throughput": (
        f"a number of requests/s in [0, {MAX_REQUESTS_PER_S:g}]",
        _is_real(0, MAX_REQUESTS_PER_S),
    ),
    "output_throughput": (
        f"a number of tokens/s in [0, {MAX_TOKENS_PER_S:g}]",
        _is_real(0, MAX_TOKENS_PER_S),
    ),
    "total_token_throughput": (
        f"a number of tokens/s in [0, {MAX_TOKENS_PER_S:g}]",
        _is_real(0, MAX_TOKENS_PER_S),
    ),
    **{
        f"{stat}_{metric}_ms": (f"a number of ms in [0, {MS_MAX:,.0f}]", _is_real(0, MS_MAX))
        for metric in ("ttft", "tpot", "e2el")
        for stat in ("mean", "std", "median", "p90", "p95", "p99", "p99.9")
    },
    # its interactivity is 1000 / it: at most what a run can measure (registry.py)
    "median_tpot_ms": (
        f"0 or a number of ms in [{TPOT_MIN_MS:g}, {MS_MAX:,.0f}]",
        lambda x: _is_real(0, 0)(x) or _is_real(TPOT_MIN_MS, MS_MAX)(x),
    ),
    "model_id": ("a string", lambda x: isinstance(x, str)),
    "model": ("a string", lambda x: isinstance(x, str)),
    "backend": ("a string", lambda x: isinstance(x, str)),
    "endpoint_type": ("a string", lambda x: isinstance(x, str)),
    "date": ("a string", lambda x: isinstance(x, str)),
}


def check_vllm_result(d: Mapping[str, object], src: Path) -> None:
    """The fields this import reads have the types ``vllm bench serve`` writes, in ranges
    a real run has (no NaN, infinity, negative or absurd figure); else one
    AccelbenchError naming the first field that does not. Its counts against its requests:
    :func:`_check_counts`, once the per-request lists are known to agree."""
    for k, (what, ok) in _SCALARS.items():
        v = d.get(k)
        if v is not None and not ok(v):
            raise AccelbenchError(f"{src}: field {k!r} must be {what} (got {str(v)[:40]!r})")
    for k, (what, ok) in _LISTS.items():
        v = d.get(k)
        if v is None:
            continue
        if not isinstance(v, list):
            raise AccelbenchError(f"{src}: field {k!r} must be a list of {what}")
        for i, x in enumerate(v):
            if not ok(x):
                raise AccelbenchError(
                    f"{src}: field {k!r}[{i}] must be one of {what} (got {str(x)[:40]!r})"
                )


def _check_counts(d: Mapping[str, object], src: Path, sent: int, ttfts: int) -> None:
    """The file's counts against its requests (``sent``: ``input_lens``' entries, one a
    request sent, 0: no such list; ``ttfts``: its entries, one a request or one a
    completed request): never more completed or failed than were sent, nor fewer
    planned than sent."""
    raw = d.get("num_prompts")
    planned = raw if isinstance(raw, int) else None
    if sent and planned is not None and planned < sent:
        raise AccelbenchError(
            f"{src}: field 'num_prompts' is {planned:,}, fewer than the {sent:,} requests "
            "of input_lens"
        )
    most, of = (sent, "the requests of input_lens") if sent else (planned, "num_prompts")
    c, f = d.get("completed"), d.get("failed")
    c = c if isinstance(c, int) else None
    f = f if isinstance(f, int) else None
    if most is not None:
        for k, x in (("completed", c), ("failed", f)):
            if x is not None and x > most:
                raise AccelbenchError(f"{src}: field {k!r} is {x:,}, more than {of} ({most:,})")
        if c is not None and f is not None and c + f > most:
            raise AccelbenchError(
                f"{src}: fields 'completed' + 'failed' are {c:,} + {f:,}, more than {of} ({most:,})"
            )
    if c is not None and not sent and ttfts and c > ttfts:  # (else checked against sent)
        raise AccelbenchError(f"{src}: field 'completed' is {c:,}, more than ttfts' {ttfts:,}")


def _check_outcomes(d: Mapping[str, object], src: Path, okl: list[bool], basis: str) -> None:
    """The file's ``completed`` and ``failed`` against the requests its ``basis`` list
    says succeeded (an empty error; else output tokens) and failed: the same, or the
    summary's counts would disagree with its own requests."""
    ok = sum(okl)
    for k, want in (("completed", ok), ("failed", len(okl) - ok)):
        x = d.get(k)
        if isinstance(x, int) and x != want:
            raise AccelbenchError(
                f"{src}: field {k!r} is {x:,}, but {basis} says {want:,} of its "
                f"{len(okl):,} requests {k}"
            )


RATE_RTOL = 1e-3  # vllm bench serve divides by the same duration: only rounding differs


def _check_rates(d: Mapping[str, object], src: Path) -> None:
    """The file's throughputs against its totals over its duration, as vllm bench serve
    computes them (completed / duration, output tokens / duration, all tokens /
    duration): the import reads some figures from each, so a file edited in one place
    gave a summary of 4e8 input tokens/s beside 222 tokens/s in all."""
    dur = d.get("duration")
    if not isinstance(dur, int | float) or isinstance(dur, bool) or dur <= 0:
        return
    tin, tout = d.get("total_input_tokens"), d.get("total_output_tokens")
    totals = {
        "request_throughput": (d.get("completed"), "'completed'"),
        "output_throughput": (tout, "'total_output_tokens'"),
        "total_token_throughput": (
            tin + tout if isinstance(tin, int) and isinstance(tout, int) else None,
            "'total_input_tokens' + 'total_output_tokens'",
        ),
    }
    for k, (total, of) in totals.items():
        rate = d.get(k)
        if not isinstance(total, int) or not isinstance(rate, int | float):
            continue
        want = total / dur
        if abs(rate - want) > RATE_RTOL * max(abs(want), abs(rate)):
            raise AccelbenchError(
                f"{src}: field {k!r} is {rate:g}, but {of} over 'duration' is {total:,} / "
                f"{dur:g} s = {want:g}: not as vllm bench serve writes it"
            )


NO_THROUGHPUT = "throughput (the file has neither start_times nor duration)"


@dataclass
class _Imported:
    """One result file read, checked and converted; nothing written yet."""

    src: Path
    out: Path
    table: pa.Table
    run_doc: RunDoc
    summary: Summary


def import_vllm(
    result_file: str | Path,
    results_root: str | Path,
    *,
    gpus: int = 1,
    isl: int | None = None,
    osl: int | None = None,
    dataset: str | None = None,
    label: str | None = None,
) -> Path:
    """Turn a ``vllm bench serve --save-result`` JSON file into a run directory in our
    format. Per-request figures come from its per-request lists (``input_lens``,
    ``output_lens``, ``ttfts``, ``itls``, ``errors``, ``start_times`` where present); what
    the file does not hold is listed under ``absent`` in run.json and summary.json."""
    return import_vllm_files([result_file], results_root, gpus=gpus, isl=isl, osl=osl,
                             dataset=dataset, label=label)[0]  # fmt: skip


def import_vllm_files(
    result_files: Sequence[str | Path],
    results_root: str | Path,
    *,
    gpus: int = 1,
    isl: int | None = None,
    osl: int | None = None,
    dataset: str | None = None,
    label: str | None = None,
) -> list[Path]:
    """Import several result files as :func:`import_vllm` does one, all or none: every
    file is read, checked and given its run directory before the first is written (one
    that fails, or two that would share a run directory, leave nothing written)."""
    if label is not None and len(result_files) > 1:
        raise AccelbenchError("--label needs exactly one file")
    done = [_prepare(f, results_root, gpus, isl, osl, dataset, label) for f in result_files]
    seen: dict[Path, Path] = {}
    for imp in done:
        if (other := seen.get(imp.out)) is not None:
            raise AccelbenchError(
                f"{other} and {imp.src} would both be run {imp.out.name}: import them one at "
                "a time, each with its own --label"
            )
        seen[imp.out] = imp.src
    return [_write(imp, results_root) for imp in done]


def _prepare(
    result_file: str | Path,
    results_root: str | Path,
    gpus: int,
    isl: int | None,
    osl: int | None,
    dataset: str | None,
    label: str | None,
) -> _Imported:
    """One file read, checked and converted, its run directory named; nothing written."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= GPUS_MAX:
        raise AccelbenchError(f"--gpus must be a whole number in 1..{GPUS_MAX} (got {gpus!r})")
    for name, v in (("--isl", isl), ("--osl", osl)):
        if v is not None and not (_is_int(v, 1) and v <= LEN_MAX):
            raise AccelbenchError(f"{name} must be a whole number in 1..{LEN_MAX} (got {v!r})")
    src = Path(result_file)
    if label is not None:
        safe_label("--label", label)
    else:  # the run id from the file's name: the same rule as --label's
        rid = f"vllm-{src.stem}"
        try:
            safe_label("the run id", rid)
        except UsageError:
            shown = rid if len(rid) <= 60 else rid[:57] + "..."
            raise UsageError(
                f"{src}: the run id from its name, {shown!r}, is not 1-100 letters, digits, "
                "'.', '_' or '-' starting with a letter or digit: give one with --label"
            ) from None
    try:
        d = loads_unique(src.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccelbenchError(f"{src}: no such file") from None
    except DuplicateKeyError as exc:
        raise AccelbenchError(f"{src}: {exc}") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise AccelbenchError(f"{src}: not a JSON file ({str(exc)[:120]})") from None
    if not isinstance(d, dict) or not ({"completed", "request_throughput"} <= d.keys()):
        raise AccelbenchError(
            f"{src}: not a vllm bench serve result (no 'completed' / 'request_throughput')"
        )
    check_vllm_result(d, src)
    try:
        table, run_doc, summary = _convert(d, src, gpus, isl, osl, dataset, label)
    except (TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
        raise AccelbenchError(
            f"{src}: fields not as vllm bench serve writes them ({type(exc).__name__}: "
            f"{str(exc)[:120]})"
        ) from None
    out = output_dir("--root", results_root) / run_doc.run_id
    if out.exists():
        raise AccelbenchError(f"{out} exists already; pass another --label")
    return _Imported(src, out, table, run_doc, summary)


def _write(imp: _Imported, results_root: str | Path) -> Path:
    """Write one prepared import: beside its run directory, then renamed (an import that
    fails leaves nothing behind)."""
    root, out = make_dir("--root", results_root), imp.out
    if out.exists():  # (made since it was prepared)
        raise AccelbenchError(f"{out} exists already; pass another --label")
    tmp = root / f".{out.name}.tmp-{os.getpid()}"
    try:
        tmp.mkdir()
        write_parquet_atomic(tmp / "requests.parquet", imp.table)
        write_run_doc(tmp, imp.run_doc)
        write_summary(tmp, imp.summary)
        tmp.rename(out)
    except OSError as exc:
        raise AccelbenchError(f"cannot write {out}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _convert(
    d: dict[str, Any],
    src: Path,
    gpus: int,
    isl: int | None,
    osl: int | None,
    dataset: str | None,
    label: str | None,
) -> tuple[pa.Table, RunDoc, Summary]:
    """The requests table, run.json and summary.json of one checked result file."""
    absent: list[str] = []
    in_lens = d.get("input_lens") or []
    out_lens = d.get("output_lens") or []
    ttfts = d.get("ttfts") or []
    itls = d.get("itls") or []
    errors = d.get("errors") or []
    starts = d.get("start_times") or []
    n = len(in_lens) or len(ttfts)
    # a per-request list has one entry a request (ttfts: or one a completed request, as
    # some versions write it); one of another length was dropped and every request of
    # the run then read as failed: refused instead, naming it
    basis = "input_lens" if in_lens else "ttfts"
    for name, lst in (("output_lens", out_lens), ("errors", errors), ("itls", itls),
                      ("start_times", starts), ("input_lens", in_lens)):  # fmt: skip
        if lst and len(lst) != n:
            raise AccelbenchError(
                f"{src}: {name} has {len(lst)} entries for {n} requests ({basis}): not as "
                "vllm bench serve writes it (one a request)"
            )
    _check_counts(d, src, len(in_lens), len(ttfts))
    if n == 0:
        absent.append("per-request records (the file has no input_lens / ttfts lists)")
    if errors:
        okl = [not e for e in errors]
    elif out_lens:
        okl = [bool(o) for o in out_lens]
    elif n and d.get("completed") == n:  # every request completed: none failed
        okl = [True] * n
    elif n:
        raise AccelbenchError(
            f"{src}: cannot tell which of the {n} requests failed: no errors or output_lens "
            f"list, and completed is {d.get('completed')!r}, not {n}"
        )
    else:
        okl = []
    if errors or out_lens:
        _check_outcomes(d, src, okl, "errors" if errors else "output_lens")
    _check_rates(d, src)
    if len(ttfts) == n:
        ttft_l = ttfts
    elif len(ttfts) == sum(okl):  # some versions list successful requests only
        it = iter(ttfts)
        ttft_l = [next(it) if k else None for k in okl]
    elif ttfts:
        raise AccelbenchError(
            f"{src}: ttfts has {len(ttfts)} entries for {n} requests ({basis}) of which "
            f"{sum(okl)} completed: not as vllm bench serve writes it"
        )
    else:
        ttft_l = [None] * n
        absent.append("ttft per request")
    itl_l = itls if len(itls) == n and all(isinstance(x, list) for x in itls) else None
    if itl_l is None and n:
        absent.append("inter-token gaps per request (e2e, tpot unknown per request)")
    has_start = len(starts) == n and n > 0
    if not has_start:
        absent += ["t_send/t_first/t_last (no start_times)", "timeline"]
    rows = []
    for i in range(n):
        rec: dict[str, Any] = {"idx": i, "request_id": f"vllm-{i}", "ok": bool(okl[i])}
        rec["isl"] = int(in_lens[i]) if i < len(in_lens) and in_lens[i] is not None else None
        rec["isl_source"] = "vllm_result"
        o = out_lens[i] if out_lens else None
        rec["osl"] = int(o) if o is not None and okl[i] else None
        rec["osl_source"] = "vllm_result"
        rec["error"] = (errors[i] or None) if len(errors) == n else None
        if not okl[i]:
            rec["error_kind"] = ErrorKind.CLIENT_EXCEPTION
        tt = _num(ttft_l[i])
        if tt is not None and okl[i]:
            rec["ttft_ms"] = tt * 1000
            if itl_l is not None:
                gaps = [float(g) for g in itl_l[i]]
                e2e = tt + sum(gaps)
                rec["e2e_ms"] = e2e * 1000
                if rec["osl"]:
                    rec["ntpot_ms"] = rec["e2e_ms"] / rec["osl"]
                    if rec["osl"] >= 2:
                        rec["tpot_ms"] = (rec["e2e_ms"] - rec["ttft_ms"]) / (rec["osl"] - 1)
                if has_start:
                    s0 = int(float(starts[i]) * 1e9)
                    ct = [s0 + int(tt * 1e9)]
                    for g in gaps:
                        ct.append(ct[-1] + int(g * 1e9))
                    rec.update(t_sched=s0, t_send=s0, t_first=ct[0], t_last=ct[-1], chunk_times=ct)
                    rec["n_chunks"] = len(ct)
        rows.append(rec)
    cols = {f.name: [r.get(f.name) for r in rows] for f in REQUEST_SCHEMA}
    table = pa.Table.from_pydict(cols, schema=REQUEST_SCHEMA)

    rate = _num(d.get("request_rate"))
    conc = d.get("max_concurrency")
    model = d.get("model_id") or d.get("model")
    if isl is None or osl is None:
        absent.append("workload ISL/OSL (pass --isl/--osl to declare them)")
    cfg: dict[str, Any] = {
        "url": None,
        "model": model,
        "endpoint": d.get("endpoint_type") or d.get("backend"),
        "concurrency": int(conc) if isinstance(conc, int | float) else None,
        "rate": rate,  # finite or None (_num)
        "num_requests": d.get("num_prompts") or n,
        "gpus": gpus,
        "label": label,
        "workload": {"isl": isl, "osl": osl, "dataset": dataset},
    }
    if cfg["concurrency"] is None and cfg["rate"] is None and n:
        cfg["concurrency"] = None  # request rate inf and no cap: all at once
    summary = summarize_table(
        table,
        gpus=gpus,
        mode="rate" if cfg["rate"] is not None else "concurrency",
        target_concurrency=cfg["concurrency"],
        requested_rate=cfg["rate"],
    )
    dur = _num(d.get("duration"))
    if summary["window"]["duration_s"] == 0 and dur:
        summary["window"] = {"start_ns": None, "end_ns": None, "duration_s": dur}
        g = max(1, gpus)
        it_ = _num(d.get("total_input_tokens")) or 0.0
        ot = _num(d.get("total_output_tokens")) or 0.0
        in_s = it_ / dur
        out_s = _num(d.get("output_throughput")) or ot / dur
        tot_s = _num(d.get("total_token_throughput")) or (it_ + ot) / dur
        summary["throughput"] = {
            "requests_per_s": _num(d.get("request_throughput")),
            "input_tokens_per_s": in_s,
            "output_tokens_per_s": out_s,
            "total_tokens_per_s": tot_s,
            "input_tokens_per_s_per_gpu": in_s / g if in_s else None,
            "output_tokens_per_s_per_gpu": out_s / g if out_s else None,
            "total_tokens_per_s_per_gpu": tot_s / g if tot_s else None,
        }
        summary["tokens"] = {"input": it_, "output": ot}
    if summary["window"]["duration_s"] == 0 and not dur:
        # no window to divide by: the run has no throughput, said (it was left null unsaid)
        absent.append(NO_THROUGHPUT)
    for ours, theirs in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("e2e_ms", "e2el")):
        if not summary["latency"][ours].get("count"):
            st = {
                "count": d.get("completed"),
                "mean": _num(d.get(f"mean_{theirs}_ms")),
                "std": _num(d.get(f"std_{theirs}_ms")),
                "p50": _num(d.get(f"median_{theirs}_ms")),
                "p99": _num(d.get(f"p99_{theirs}_ms")),
            }
            for p in (90, 95, 99.9):
                st[f"p{p:g}"] = _num(d.get(f"p{p:g}_{theirs}_ms"))
            summary["latency"][ours] = st
            absent.append(f"{ours} per request (summary from the file's aggregates)")
    if summary["interactivity"]["tok_s_user"] is None:
        med = _num(d.get("median_tpot_ms")) or dig(summary, "latency", "tpot_ms", "p50")
        summary["interactivity"]["tok_s_user"] = 1000.0 / med if med else None
    summary["counts"]["completed"] = int(d.get("completed") or summary["counts"]["completed"])
    if d.get("failed") is not None:
        summary["counts"]["failed"] = int(d["failed"])
    summary["source"] = ImportSection(tool="vllm bench serve", file=str(src))
    summary["absent"] = absent + ["steady_state", "client CPU and loop figures", "chunk tokens"]
    summary["definitions"]["token_source"] = "vllm result file (input_lens / output_lens)"

    run_id = label or f"vllm-{src.stem}"
    run_doc = RunDoc(
        run_id=run_id,
        status="completed",
        source=ImportSource(tool="vllm bench serve", file=str(src), date=d.get("date")),
        config=cfg,
        server=ServerInfo(models=[model] if model else []),
        started_at=d.get("date"),
        absent=absent,
    )
    return table, run_doc, summary
