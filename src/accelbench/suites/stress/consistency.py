"""The consistency suite: greedy outputs of a fixed prompt set (temperature 0, fixed
seed), repeated over time, alone and under concurrent load, and across endpoints.

Every run is compared with the baseline (the first endpoint, alone, first repeat),
prompt by prompt: identical or not, the first differing token (the server's own
tokenizer where it has /tokenize, else characters) and a similarity ratio. Every
diverging pair is kept in ``divergent.jsonl``; the ECC counters the telemetry saw
during each run are joined, so a divergence can be set beside memory errors."""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from accelbench.documents import JsonObject, to_json_object
from accelbench.errors import UsageError
from accelbench.metrics.verdict import Verdict
from accelbench.runner.config import BenchmarkConfig
from accelbench.suites.stress.common import (
    JsonlAppender,
    Log,
    StepChanges,
    _quiet,
    check_load,
    run_reason,
    run_records,
    run_step,
    suite_stops,
)
from accelbench.suites.stress.document import (
    DIVERGENT,
    Comparison,
    ConsistencyPart,
    Divergence,
    StressDoc,
    suite_reason,
    write_stress,
)
from accelbench.suites.stress.verdicts import compare_tokens, fraction_verdict
from accelbench.urls import Endpoint

GREEDY: JsonObject = {"temperature": 0.0, "top_k": 1, "seed": 1234}


@dataclass
class ConsistencyConfig:
    load: BenchmarkConfig  # workload (prompts), endpoint, osl; url is the baseline's
    urls: list[Endpoint]  # URL strings are parsed here (the boundary)
    prompts: int = 32
    repeats: int = 2
    loaded_concurrency: int | None = 8  # also run the set under this concurrency
    pause_s: float = 0.0  # between repeats
    warn_divergent: float = 0.0  # fraction of prompts
    fail_divergent: float = 0.05
    extra_greedy: JsonObject = field(default_factory=lambda: dict(GREEDY))

    def __post_init__(self) -> None:
        self.urls = [Endpoint.parse(u) for u in self.urls]

    def validate(self) -> None:
        from accelbench import validate as v
        from accelbench.suites.stress.verdicts import check_thresholds
        from accelbench.validate import check_url

        if not self.urls:
            raise UsageError("stress consistency needs at least one --url")
        v.integer("--prompts", self.prompts, 1, 100_000)
        v.integer("--repeats", self.repeats, 1, 10_000)
        if self.loaded_concurrency is not None:
            v.integer("--loaded-concurrency", self.loaded_concurrency, 2, 100_000)
        v.number("--pause", self.pause_s, 0.0, 86400.0, unit="s")
        for u in self.urls:
            check_url(u.url)  # no credentials in it; the same scheme and host
        check_thresholds("--warn-divergent", self.warn_divergent, "--fail-divergent",
                         self.fail_divergent, 1.0)  # fmt: skip
        if self.load.warmup_requests:  # every step is the prompt set itself, nothing before
            raise UsageError("stress consistency runs its fixed prompt set only: drop --warmup")
        for conc in (1, self.loaded_concurrency or 1):  # as each step runs: a closed loop
            check_load(self.load, step=self.step(conc))

    def step(self, concurrency: int) -> StepChanges:
        """What a step at ``concurrency`` changes in the load (:func:`run_step`; the
        endpoint and the greedy body are the step's own)."""
        return {"concurrency": concurrency, "rate": None, "num_requests": self.prompts,
                "duration_s": None, "warmup_requests": 0, "save_text": True}  # fmt: skip

    def to_json(self) -> JsonObject:
        d = asdict(self)
        d["load"] = self.load.to_json()
        d["urls"] = [u.display for u in self.urls]  # never the credentials
        return to_json_object(d, "consistency config")


@dataclass
class ConsistencyResult:
    path: Path
    status: str
    comparisons: list[Comparison]
    verdicts: list[Verdict]
    reason: str | None = None  # stress.json ``reason``


def _ecc(run_dir: Path) -> dict[str, int] | None:
    """Growth of the ECC counters over the run (all devices), or None without them."""
    p = run_dir / "telemetry.parquet"
    if not p.exists():
        return None
    import pyarrow.parquet as pq

    t = pq.read_table(p).to_pylist()
    out: dict[str, int] = {}
    for col in ("ecc_corrected_volatile", "ecc_uncorrected_volatile"):
        by_dev: dict[Any, list[int]] = {}
        for r in t:
            if r.get(col) is not None:
                by_dev.setdefault(r.get("device_index"), []).append(int(r[col]))
        if by_dev:
            out[col] = sum(max(v) - min(v) for v in by_dev.values())
    return out or None


def _tokens(text: str, tok: Any) -> list[Any]:
    if tok is not None:
        with contextlib.suppress(Exception):  # a tokenizer failure: fall back to characters
            return list(tok.encode(text))
    return list(text)


def run_consistency(cfg: ConsistencyConfig, path: Path, *, log: Log = _quiet) -> ConsistencyResult:
    from accelbench.client.session import load_api_key
    from accelbench.workload.tokenizer import server_tokenizer_if_any

    cfg.validate()
    path.mkdir(parents=True, exist_ok=True)
    extra = {**cfg.load.extra_body, **cfg.extra_greedy}
    steps: list[tuple[str, Endpoint, int, bool]] = []  # (name, url, concurrency, pause first)
    for r in range(cfg.repeats):
        for e, url in enumerate(cfg.urls):
            steps.append((f"ep{e}-alone-r{r}", url, 1, r > 0 and e == 0))
            if cfg.loaded_concurrency:
                steps.append((f"ep{e}-loaded-r{r}", url, cfg.loaded_concurrency, False))
    div_f = JsonlAppender(path / DIVERGENT)
    if div_f.path.exists():
        raise UsageError(f"{path} already holds a consistency suite: use another --out")
    api_key = load_api_key(cfg.load.api_key_env, cfg.load.api_key_file)
    base_texts: dict[int, str] | None = None
    tok = None
    comparisons: list[Comparison] = []
    status = "completed"
    stopped: str | None = None  # the error that stopped the suite
    runs = []
    with suite_stops() as check_stop:
        try:
            for name, url, conc, pause in steps:
                check_stop()
                if pause and cfg.pause_s:  # a stop ends the pause (within 0.1 s)
                    until = time.monotonic() + cfg.pause_s
                    while (left := until - time.monotonic()) > 0:
                        time.sleep(min(left, 0.1))
                        check_stop()
                out = path / "runs" / name
                log(f"{name}: {cfg.prompts} prompts at concurrency {conc} on {url.display}")
                changes: StepChanges = {**cfg.step(conc), "url": url, "extra_body": extra}
                res = run_step(cfg.load, out, log, **changes)
                runs.append(str(out.relative_to(path)))
                if res.status != "completed":
                    status, stopped = res.status, run_reason(res)
                    break
                texts = {
                    int(r["idx"]): r.get("output_text") for r in run_records(out) if r.get("ok")
                }
                if base_texts is None:
                    base_texts = {k: v for k, v in texts.items() if v is not None}
                    model = str(res.doc.config.get("model") or "")
                    tok = server_tokenizer_if_any(url, model, api_key) if model else None
                    continue
                comparisons.append(_compare(name, base_texts, texts, tok, out, div_f))
        except KeyboardInterrupt:
            status = "interrupted"
        verdicts = [_verdict(c, cfg) for c in comparisons]
        part = ConsistencyPart(runs[0] if runs else None, "token" if tok is not None else "char",
                               comparisons)  # fmt: skip
        reason = suite_reason(status, stopped, verdicts)
        write_stress(path, StressDoc(suite="consistency", status=status, config=cfg.to_json(),
                                     runs=runs, verdicts=verdicts, part=part, reason=reason))  # fmt: skip
    return ConsistencyResult(path, status, comparisons, verdicts, reason)


def _compare(name: str, base: dict[int, str], texts: dict[int, str | None], tok: Any,
             run_dir: Path, div_f: JsonlAppender) -> Comparison:  # fmt: skip
    n = identical = 0
    firsts: list[int] = []
    sims: list[float] = []
    missing = 0
    for idx, a in sorted(base.items()):
        b = texts.get(idx)
        if b is None:
            missing += 1
            continue
        n += 1
        c = compare_tokens(_tokens(a, tok), _tokens(b, tok))
        sims.append(c["similarity"])
        if c["identical"]:
            identical += 1
            continue
        if c["first_diff"] is not None:
            firsts.append(c["first_diff"])
        div_f.append(Divergence(name, idx, c["first_diff"], c["similarity"], a, b).to_json())
    return Comparison(
        run=name, compared=n, identical=identical, divergent=n - identical,
        identical_fraction=identical / n if n else None, missing=missing,
        first_diff_min=min(firsts) if firsts else None,
        first_diff_median=sorted(firsts)[len(firsts) // 2] if firsts else None,
        similarity_mean=sum(sims) / len(sims) if sims else None, ecc=_ecc(run_dir),
    )  # fmt: skip


def _verdict(c: Comparison, cfg: ConsistencyConfig) -> Verdict:
    ev: dict[str, float | int | str | bool | None] = {
        "compared": c.compared, "divergent": c.divergent, "first_diff_min": c.first_diff_min,
        "similarity_mean": c.similarity_mean,
        **(c.ecc or {}),  # ecc_corrected_volatile ... growth over the run
    }  # fmt: skip
    return fraction_verdict(
        f"consistency {c.run}", "consistency",
        "fraction of prompts whose greedy output differs from the baseline",
        c.divergent, c.compared, cfg.warn_divergent, cfg.fail_divergent, ev, counted="prompts",
    )  # fmt: skip
