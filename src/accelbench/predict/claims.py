"""Published claims of the seeds' kind, checked: for each, the commands, the predictions
with their intervals, the public measurements of the calibration set (with their
provenance) and a verdict (docs/CLAIMS.md, written by ``accelbench predict --claims
--write-docs docs/CLAIMS.md``; a test keeps the page equal to what this prints now).

A comparative claim is judged on a ratio of the two accelerators' predictions. Its
interval is conservative: the low end of one interval over the high end of the other
(and the reverse), as if the two predictions could err in opposite directions; in truth
they share the model, so their errors are correlated and the true interval is narrower.
The verdict (``metrics.verdict``, worded by the "claim" suite): supported when the whole
interval lies on the claim's side of the threshold, refuted when it lies wholly on the
other side, inconclusive when it straddles it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from accelbench.cost.tco import TcoInputs, resolve_tco
from accelbench.metrics.verdict import Interval, Status, Verdict
from accelbench.predict.calibration import Point, load_calibration
from accelbench.predict.fit import catalog_accelerator
from accelbench.predict.point import Estimate, Prediction, Target, predict_point
from accelbench.predict.stepmodel import Layout

HEADER = """# Published claims, checked

Claims of the kind this project was started to check, each with the command that
predicts it, the prediction with its interval, the public measurement where the
calibration set has one (with its provenance), and a verdict stated with its statistic,
interval and threshold. Everything here is generated: `accelbench predict --claims
--write-docs docs/CLAIMS.md` rewrites this page from the shipped model, and a test fails
when the page differs from what the code prints now (`src/accelbench/predict/claims.py`).

How to read a verdict. A comparison is judged on the ratio of the two predictions. Its
interval is conservative: the low end of one prediction's interval over the high end of
the other's, and the reverse, as if the two could err in opposite directions (they share
the model, so their errors are correlated and the true interval is narrower). The
prediction intervals are the 10th-90th percentiles of the model's cross-validated errors
on that accelerator (docs/PREDICT.md): about 80 % coverage each, not a confidence
interval; where the model's errors on an accelerator lean one way, its interval leans too
and may not contain the predicted value. **Supported**: the whole interval
lies on the claim's side of the threshold; **refuted**: wholly on the other side;
**inconclusive**: it straddles the threshold. The public measurement is shown beside it and does not enter the verdict.

The predictions are of DeepSeek-R1 (the only model the calibration set holds), with
SGLang on 8 GPUs in one tensor-parallel group, where the claims do not say the setup.
"""

SEC_PER_M = 1e6 / 3600  # tokens/s -> M tokens per hour: x 3600 / 1e6


@dataclass(frozen=True)
class Setup:
    """What the claim is checked at (where the claim does not say, the choice is ours and
    is printed)."""

    model: str
    precision: str
    isl: int
    osl: int
    engine: str
    tp: int
    target: Target

    def command(self, accelerator: str) -> str:
        t = self.target
        goal = (
            f"--interactivity {t.interactivity:g}"
            if t.interactivity is not None
            else f"--concurrency {t.concurrency}"
        )
        return (
            f"accelbench predict --model {self.model} --accelerator {accelerator} "
            f"--tp {self.tp} --engine {self.engine} --precision {self.precision} "
            f"--isl {self.isl} --osl {self.osl} {goal}"
        )

    def predict(self, accelerator: str) -> Prediction:
        return predict_point(
            self.model,
            accelerator,
            Layout(self.tp),
            self.isl,
            self.osl,
            self.target,
            engine=self.engine,
            precision=self.precision,
        )


@dataclass(frozen=True)
class Claim:
    title: str  # the claim as published
    source: str
    setup: Setup
    a: str  # the accelerator the claim is about
    b: str  # the one it is compared with
    statistic: str  # what the ratio is of
    claimed_ratio: float
    threshold: float
    side: str  # "below" or "above": where the claim puts the ratio against the threshold
    claim_words: str  # the claim as a statement about the ratio
    measure: Callable[[Prediction], Estimate]  # the figure compared, from a prediction
    unit: str
    measured: Callable[[str, Setup], Point | None]  # the public point for an accelerator
    cost_rate_set: str | None = None  # a cost claim: the TCO rate set it priced with


def _tput(p: Prediction) -> Estimate:
    return p.throughput_per_gpu


def _usd_per_m(acc: str, rate_set: str) -> Callable[[Prediction], Estimate]:
    usd = resolve_tco(catalog_accelerator(acc), TcoInputs(rate_set=rate_set)).usd_per_gpu_hour

    def f(p: Prediction) -> Estimate:
        t = p.throughput_per_gpu  # the cost falls as the throughput rises: ends swap
        return Estimate(
            usd / (t.value / SEC_PER_M), usd / (t.high / SEC_PER_M), usd / (t.low / SEC_PER_M)
        )

    return f


def _frontier_point(acc: str, s: Setup) -> Point | None:
    """The calibration set's best throughput/GPU on ``acc`` at the setup's model,
    precision and ISL/OSL among points at least as interactive as the target (any engine
    and layout): the frontier read without interpolation."""
    target = s.target.interactivity or 0.0
    pts = [
        p
        for p in load_calibration()
        if p.hardware == acc
        and p.model == s.model
        and p.precision == s.precision
        and (p.isl, p.osl) == (s.isl, s.osl)
        and 1.0 / p.tpot_s >= target
    ]
    return max(pts, key=lambda p: p.throughput_per_gpu, default=None)


def _same_point(acc: str, s: Setup) -> Point | None:
    """The latest calibration point of ``acc`` at exactly the setup (engine, precision,
    TP, no EP or DP attention, ISL/OSL, concurrency)."""
    pts = [
        p
        for p in load_calibration()
        if p.hardware == acc
        and p.model == s.model
        and p.engine == s.engine
        and p.precision == s.precision
        and p.layout == Layout(s.tp)
        and (p.isl, p.osl, p.concurrency) == (s.isl, s.osl, s.target.concurrency)
    ]
    return max(pts, key=lambda p: p.date, default=None)


R1_8K1K_32 = Setup("deepseek-r1", "fp8", 8192, 1024, "sglang", 8, Target(interactivity=32))
R1_1K1K_64 = Setup("deepseek-r1", "fp8", 1024, 1024, "sglang", 8, Target(concurrency=64))
OLD_RATES = "inferencex-2025-10"

CLAIMS: tuple[Claim, ...] = (
    Claim(
        title="MI355X reaches 1,369 tok/s/GPU against B200's 1,756 at 32 tok/s/user",
        source="SemiAnalysis InferenceX dashboard figures for DeepSeek-R1, as quoted in the "
        "project's seed facts (shared/docs/FACTS.md, 'TCO rates'); the claim does not state "
        "ISL/OSL, precision or engine: checked at 8k/1k FP8, InferenceX's default selection",
        setup=R1_8K1K_32,
        a="mi355x",
        b="b200",
        statistic="throughput/GPU MI355X / B200",
        claimed_ratio=1369 / 1756,
        threshold=1.0,
        side="below",
        claim_words="MI355X delivers less throughput per GPU than B200 at 32 tok/s/user",
        measure=_tput,
        unit="tok/s/GPU",
        measured=_frontier_point,
    ),
    Claim(
        title="MI325X is 1.3x H200",
        source="widely shared articles; the 1.3 is the ratio of peak dense BF16 FLOPS "
        "(1,307 / 989 TFLOPS, the catalog's figures), not a measurement (shared/docs/FACTS.md, "
        "'Claims that are false': MLPerf v5.0 Llama-2-70B has 8 x MI325X at 0.93-0.97x 8 x "
        "H200)",
        setup=R1_1K1K_64,
        a="mi325x",
        b="h200",
        statistic="throughput/GPU MI325X / H200",
        claimed_ratio=1.3,
        threshold=1.3,
        side="above",
        claim_words="MI325X delivers at least 1.3x H200's throughput per GPU",
        measure=_tput,
        unit="tok/s/GPU",
        measured=_same_point,
    ),
    Claim(
        title="MI355X costs $0.30 per Mtok against B200's $0.31",
        source="the figures of the first claim priced at InferenceX's owned-tier TCO rates "
        "of 2025-10 to 2026-05 ($1.48 and $1.95 per GPU-hour: 1.48 / (1369 x 0.0036) = "
        "$0.300, 1.95 / (1756 x 0.0036) = $0.308, which the seeds round to $0.309; "
        "shared/docs/FACTS.md)",
        setup=R1_8K1K_32,
        a="mi355x",
        b="b200",
        statistic="$ per M tokens MI355X / B200",
        claimed_ratio=(1.48 / 1369) / (1.95 / 1756),
        threshold=1.0,
        side="below",
        claim_words="MI355X costs less per token than B200 at 32 tok/s/user",
        measure=_tput,  # replaced per accelerator by the cost (check_claim)
        unit="$ per M tokens",
        measured=_frontier_point,
        cost_rate_set=OLD_RATES,
    ),
)


@dataclass(frozen=True)
class Checked:
    claim: Claim
    pred_a: Prediction
    pred_b: Prediction
    est_a: Estimate
    est_b: Estimate
    meas_a: Point | None
    meas_b: Point | None
    verdict: Verdict


def _measure(c: Claim, acc: str) -> Callable[[Prediction], Estimate]:
    return _usd_per_m(acc, c.cost_rate_set) if c.cost_rate_set else c.measure


def _measured_value(c: Claim, acc: str, p: Point | None) -> float | None:
    if p is None:
        return None
    if c.cost_rate_set:
        usd = resolve_tco(
            catalog_accelerator(acc), TcoInputs(rate_set=c.cost_rate_set)
        ).usd_per_gpu_hour
        return usd / (p.throughput_per_gpu / SEC_PER_M)
    return p.throughput_per_gpu


def judge(low: float, high: float, threshold: float, side: str) -> Status:
    """Supported (PASS) when [low, high] lies wholly on the claim's ``side`` ("below":
    under the threshold; "above": at or over it), refuted (FAIL) when wholly on the
    other, inconclusive when it straddles the threshold."""
    claim_side = (high < threshold, low >= threshold)
    ours, theirs = claim_side if side == "below" else claim_side[::-1]
    return Status.PASS if ours else Status.FAIL if theirs else Status.INCONCLUSIVE


def check_claim(c: Claim) -> Checked:
    """Predict both sides of ``c`` and judge it."""
    pa, pb = c.setup.predict(c.a), c.setup.predict(c.b)
    ea, eb = _measure(c, c.a)(pa), _measure(c, c.b)(pb)
    ratio = ea.value / eb.value
    lo, hi = ea.low / eb.high, ea.high / eb.low
    status = judge(lo, hi, c.threshold, c.side)
    ma, mb = c.measured(c.a, c.setup), c.measured(c.b, c.setup)
    va, vb = _measured_value(c, c.a, ma), _measured_value(c, c.b, mb)
    v = Verdict(
        name=c.title,
        status=status,
        statistic=c.statistic,
        estimate=ratio,
        interval=Interval(lo, hi, 0.8, "ends of the two 10-90 % prediction intervals crossed"),
        thresholds={c.side: c.threshold},
        rule=f"the claim: ratio {'<' if c.side == 'below' else '>='} {c.threshold:g}",
        evidence={
            "claimed_ratio": c.claimed_ratio,
            "measured_ratio": va / vb if va and vb else None,
        },
        suite="claim",
        kind="claim",
    )
    return Checked(c, pa, pb, ea, eb, ma, mb, v)


def _fmt(x: float, unit: str) -> str:
    return f"${x:,.3f}" if unit.startswith("$") else f"{x:,.0f}"


def _provenance(p: Point) -> str:
    version = "version not in source" if p.engine_version == "not in source" else p.engine_version
    return (
        f"{p.engine} ({version}), {p.layout.text()}, concurrency {p.concurrency}, "
        f"{1 / p.tpot_s:.1f} tok/s/user, {p.date}; {p.source}"
        + (f", {p.run_url}" if p.run_url else "")
    )


def section(i: int, ch: Checked) -> str:
    c, v = ch.claim, ch.verdict
    s = c.setup
    lines = [
        f'## {i}. "{c.title}"',
        "",
        f"Source: {c.source}.",
        "",
        f"Checked at: {s.model} {s.precision.upper()}, ISL {s.isl:,} / OSL {s.osl:,}, "
        f"{s.engine} TP{s.tp}, "
        + (
            f"{s.target.interactivity:g} tok/s/user (the largest concurrency that reaches it)"
            if s.target.interactivity is not None
            else f"concurrency {s.target.concurrency}"
        )
        + (f"; priced at the {c.cost_rate_set} owned-tier TCO rates" if c.cost_rate_set else "")
        + ".",
        "",
        "```bash",
        s.command(c.a),
        s.command(c.b),
        "```",
        "",
        f"| | {c.a.upper()} | {c.b.upper()} |",
        "|---|---|---|",
    ]
    row = f"| predicted {c.unit} [interval] | "
    for e in (ch.est_a, ch.est_b):
        row += f"{_fmt(e.value, c.unit)} [{_fmt(e.low, c.unit)} - {_fmt(e.high, c.unit)}] | "
    lines.append(row.rstrip())
    lines.append(
        f"| predicted at | concurrency {ch.pred_a.concurrency}, "
        f"{ch.pred_a.interactivity:.1f} tok/s/user | concurrency {ch.pred_b.concurrency}, "
        f"{ch.pred_b.interactivity:.1f} tok/s/user |"
    )
    meas = "| public measurement | "
    for acc, p in ((c.a, ch.meas_a), (c.b, ch.meas_b)):
        val = _measured_value(c, acc, p)
        meas += (
            "none in the calibration set | "
            if p is None or val is None
            else (f"{_fmt(val, c.unit)} ({_provenance(p)}) | ")
        )
    lines.append(meas.rstrip())
    ext = [x for p in (ch.pred_a, ch.pred_b) for x in p.extrapolation]
    lo, hi = v.low, v.high
    mr = v.evidence.get("measured_ratio")
    lines += [
        "",
        f"**Verdict: {v.word}.** Statistic: {v.statistic} = {v.estimate:.2f}, interval "
        f"[{lo:.2f}, {hi:.2f}]; threshold {c.threshold:g} (the claim: {c.claim_words}). "
        f"The claimed ratio {c.claimed_ratio:.2f} lies "
        f"{'inside' if lo is not None and hi is not None and lo <= c.claimed_ratio <= hi else 'outside'}"
        " the interval"
        + (f"; the public measurements give {mr:.2f}" if isinstance(mr, float) else "")
        + ".",
    ]
    if ext:
        lines += ["", "Extrapolation: " + "; ".join(sorted(set(ext))) + "."]
    return "\n".join(lines)


def claims_page() -> str:
    """docs/CLAIMS.md as the shipped model gives it now."""
    parts = [HEADER]
    for i, c in enumerate(CLAIMS, start=1):
        parts.append(section(i, check_claim(c)))
    return "\n\n".join(parts) + "\n"
