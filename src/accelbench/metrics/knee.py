"""The measured KV-capacity knee: where a sweep over concurrent sessions sees the prefix
cache's hit rate break (docs/COST_AND_PLAN.md, "The KV-capacity knee").

Each sweep point has its concurrent sessions ``c``, the prompt-token hit rate (cached
prompt tokens / prompt tokens) with its interval, and the TTFT p50. The rule:

* **plateau**: the hit rate a point's workload reaches when nothing is evicted: the
  point's own ideal (infinite-cache) hit rate when it has one (best: the ideal moves a
  little with ``c``, since the first request of a run finds even the shared system prompt
  cold), else a given plateau, else the hit rate of the sweep's smallest ``c``.
* **threshold** = plateau - tolerance. A point is **below** when its whole interval is
  below the threshold (its high end < threshold; the estimate when it has no interval),
  else it is on the plateau.
* **knee interval** = (the largest ``c`` on the plateau before the first point below, the
  first ``c`` below). No point below: the knee is beyond the sweep, ``(largest c, None)``;
  the first point already below: ``(None, smallest c)``.

A point's interval is two-sided at ``confidence``: a point truly on the plateau is called
below with probability at most (1 - confidence) / 2, so with ``m`` points before the
knee the bracket starts too early with probability at most m (1 - confidence) / 2.
:func:`point_confidence` gives the per-point confidence that bounds that by the sweep's.

:func:`hit_rate_interval` is the interval of one point's hit rate from per-session totals
(a ratio of sums; the sessions are the independent units, since a session's turns share
its cache fate): the linearised (delta-method) interval on the logit scale, Student's t.

:func:`knee_agrees` judges a prediction (``plan.knee.KneePrediction``; this module takes
any object with ``knee_sessions`` and ``interval``) against the measured bracket.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from accelbench import validate as v
from accelbench.errors import UsageError
from accelbench.metrics.stats import CONFIDENCE, t_critical, z_critical
from accelbench.metrics.verdict import Interval, Status, Verdict

MIN_SESSIONS = 30  # fewer sessions at a point: no interval for its hit rate
DEFAULT_TOLERANCE = 0.05  # hit-rate points (absolute) below the plateau


@dataclass(frozen=True)
class KneePoint:
    """One sweep point: ``sessions`` concurrent, its hit rate (0..1) and the interval of it
    (``low``/``high``; None: judged by the estimate), the TTFT p50 in seconds, and the
    ideal (infinite-cache) hit rate of the point's workload when known."""

    sessions: int
    hit_rate: float
    low: float | None = None
    high: float | None = None
    ttft_p50_s: float | None = None
    ideal: float | None = None

    @classmethod
    def from_sessions(
        cls,
        sessions: int,
        cached_tokens: Sequence[float],
        prompt_tokens: Sequence[float],
        ttft_p50_s: float | None = None,
        confidence: float = CONFIDENCE,
        ideal: float | None = None,
    ) -> KneePoint:
        """A point from each session's totals of cached and prompt tokens (one entry per
        session, the same order in both)."""
        iv = hit_rate_interval(cached_tokens, prompt_tokens, confidence)
        rate = sum(cached_tokens) / sum(prompt_tokens) if sum(prompt_tokens) > 0 else 0.0
        return cls(sessions, rate, iv.low, iv.high, ttft_p50_s, ideal)


def hit_rate_interval(
    cached_tokens: Sequence[float], prompt_tokens: Sequence[float], confidence: float = CONFIDENCE
) -> Interval:
    """Interval of the hit rate R = sum(cached) / sum(prompt) over n sessions (each session
    one unit: its turns share its cache fate). The ratio estimator's linearised standard
    error, SE = s / (sqrt(n) xbar) with s^2 = sum((y_i - R x_i)^2) / (n - 1) and xbar the
    mean prompt tokens per session, taken to the logit scale (SE / (R (1 - R))), where a
    rate near 0 or 1 is less skewed; R's logit +- t(n - 1) x that, mapped back. R of
    exactly 0 or 1 is moved half a token inside. Below MIN_SESSIONS sessions the interval
    is (None, None) and ``method`` says so (tests/test_knee.py checks coverage at 30)."""
    if len(cached_tokens) != len(prompt_tokens):
        raise ValueError("cached_tokens and prompt_tokens must have one entry per session")
    n = len(prompt_tokens)
    total = float(sum(prompt_tokens))
    if n < MIN_SESSIONS or total <= 0:
        return Interval(None, None, confidence, f"too few sessions (< {MIN_SESSIONS})")
    r = float(sum(cached_tokens)) / total
    xbar = total / n
    s2 = sum((y - r * x) ** 2 for y, x in zip(cached_tokens, prompt_tokens, strict=True)) / (n - 1)
    se = math.sqrt(s2 / n) / xbar
    rr = min(max(r, 0.5 / total), 1 - 0.5 / total)
    if not (math.isfinite(se) and 0 < rr < 1):  # a count NaN, inf, or sums out of range
        return Interval(None, None, confidence, "no interval: session token counts not finite")
    half = float(t_critical(confidence, n - 1)) * se / (rr * (1 - rr))
    mid = math.log(rr / (1 - rr))
    return Interval(
        1 / (1 + math.exp(-(mid - half))),
        1 / (1 + math.exp(-(mid + half))),
        confidence,
        "ratio of sums over sessions, logit scale, t",
    )


def point_confidence(points: int, confidence: float = CONFIDENCE) -> float:
    """The per-point confidence that keeps the chance of any false break among ``points``
    points at most the one-sided (1 - confidence) / 2 (Bonferroni)."""
    v.integer("points", points, 1, 1 << 20)
    return 1.0 - (1.0 - confidence) / points


@dataclass(frozen=True)
class MeasuredKnee:
    """The measured knee: the bracket, and what it was judged by."""

    interval: Interval  # (largest c on the plateau, first c below); None: open end
    plateau: float | None  # None: each point's own ideal hit rate
    tolerance: float
    threshold: float | None  # plateau - tolerance (None: per point, ideal - tolerance)
    statistic: str
    found: bool  # a point below the threshold after one on the plateau
    ttft_ratio: float | None  # TTFT p50 at the first c below / at the last c on the plateau
    note: str = ""

    def verdict(self) -> Verdict:
        """The bracket as a verdict record: pass when found, inconclusive when the knee is
        outside the sweep (beyond it, or before its first point)."""
        return Verdict(
            name="kv-capacity knee",
            status=Status.PASS if self.found else Status.INCONCLUSIVE,
            statistic=self.statistic,
            unit="sessions",
            estimate=None,
            interval=self.interval,
            thresholds={"hit_rate_below": self.threshold, "tolerance": self.tolerance},
            rule="below: hit-rate interval high < "
            + ("the point's ideal" if self.plateau is None else f"plateau {self.plateau:.4g}")
            + f" - tolerance {self.tolerance:.4g}",
            evidence={"plateau": self.plateau, "ttft_p50_ratio": self.ttft_ratio},
            kind="knee",
            note=self.note,
        )


def _below(p: KneePoint, plateau: float, tolerance: float) -> bool:
    top = p.high if p.high is not None else p.hit_rate
    level = p.ideal if p.ideal is not None else plateau
    return top < level - tolerance


def find_knee(
    points: Sequence[KneePoint],
    *,
    plateau: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> MeasuredKnee:
    """The knee bracket of a sweep (the module docstring has the rule). ``plateau``: the
    hit rate with nothing evicted, for points without their own ``ideal`` (default: the
    smallest ``c``'s hit rate)."""
    if not points:
        raise UsageError("no sweep points to find a knee in")
    v.number("tolerance", tolerance, 0, 1)
    pts = sorted(points, key=lambda p: p.sessions)
    for p in pts:
        v.integer("sessions", p.sessions, 1, 1 << 30)
        v.number("hit rate", p.hit_rate, 0, 1)
        v.optional_number("ideal hit rate", p.ideal, 0, 1)
    if len({p.sessions for p in pts}) != len(pts):
        raise UsageError("two sweep points with the same number of sessions")
    level = pts[0].hit_rate if plateau is None else v.number("plateau", plateau, 0, 1)
    per_point = all(p.ideal is not None for p in pts)
    statistic = "concurrent sessions at which the prefix-cache hit rate falls below the plateau"
    first = next((i for i, p in enumerate(pts) if _below(p, level, tolerance)), None)
    note = ""
    ttft_ratio = None
    if first is None:
        iv = Interval(float(pts[-1].sessions), None, CONFIDENCE, "beyond the sweep")
        found = False
        note = f"no point below the plateau: the knee is beyond {pts[-1].sessions} sessions"
    elif first == 0:
        iv = Interval(None, float(pts[0].sessions), CONFIDENCE, "before the sweep")
        found = False
        note = f"the first point ({pts[0].sessions} sessions) is already below the plateau"
    else:
        lo, hi = pts[first - 1], pts[first]
        iv = Interval(float(lo.sessions), float(hi.sessions), CONFIDENCE, "sweep bracket")
        found = True
        if lo.ttft_p50_s and hi.ttft_p50_s is not None:
            ttft_ratio = hi.ttft_p50_s / lo.ttft_p50_s
        back = [p.sessions for p in pts[first + 1 :] if not _below(p, level, tolerance)]
        if back:
            note = f"hit rate back on the plateau at {back} sessions, after the break"
    return MeasuredKnee(
        iv,
        None if per_point else level,
        tolerance,
        None if per_point else level - tolerance,
        statistic,
        found,
        ttft_ratio,
        note,
    )


class KneeForecast(Protocol):
    """What :func:`knee_agrees` needs of a prediction (``plan.knee.KneePrediction``)."""

    @property
    def knee_sessions(self) -> float: ...

    @property
    def interval(self) -> Interval: ...


def knee_agrees(
    predicted: KneeForecast,
    measured: MeasuredKnee | Interval,
    replayed: MeasuredKnee | Interval | None = None,
) -> Verdict:
    """Does the predicted knee fall in the measured bracket?

    The bracket (lo, hi) says lo sessions kept the plateau and hi did not; the
    prediction says floor(knee) sessions fit and one more does not. They agree when
    lo <= knee < hi (an open end: no bound). pass: they agree; inconclusive: the knee is
    outside but the prediction's interval reaches into the bracket; fail: neither;
    unknown: the measurement has no bracket at all.

    ``replayed``: the bracket an LRU cache of the same capacity finds when it replays
    the requests in the order they reached the server. The prediction assumes each
    point's sessions all overlap at their last turns; just past the knee they may not
    (docs/WORKLOADS.md, "the first point past the knee is soft"). When the prediction
    misses but the replay finds the measured bracket exactly, the capacity explains the
    measurement and the arrival order moved the break: inconclusive, not fail."""
    iv = measured.interval if isinstance(measured, MeasuredKnee) else measured
    rp = replayed.interval if isinstance(replayed, MeasuredKnee) else replayed
    k = predicted.knee_sessions
    lo = -math.inf if iv.low is None else iv.low
    hi = math.inf if iv.high is None else iv.high
    p_lo = predicted.interval.low if predicted.interval.low is not None else k
    p_hi = predicted.interval.high if predicted.interval.high is not None else k
    if iv.low is None and iv.high is None:
        status, note = Status.UNKNOWN, "no measured bracket"
    elif lo <= k < hi:
        status, note = Status.PASS, "the predicted knee is inside the measured bracket"
    elif p_lo < hi and p_hi >= lo:
        status, note = (
            Status.INCONCLUSIVE,
            "the predicted knee is outside the measured bracket; its interval reaches into it",
        )
    elif rp is not None and (rp.low, rp.high) == (iv.low, iv.high):
        status, note = (
            Status.INCONCLUSIVE,
            "the predicted knee is outside the measured bracket, but an LRU of the same "
            "capacity replaying the requests in their arrival order finds that bracket: "
            "the sessions overlapped less than the prediction assumes",
        )
    else:
        status, note = Status.FAIL, "the predicted knee and its interval miss the measured bracket"
    return Verdict(
        name="predicted knee vs measured",
        status=status,
        statistic="predicted knee (sessions)",
        unit="sessions",
        estimate=k,
        interval=iv,
        thresholds={"measured_low": iv.low, "measured_high": iv.high},
        rule="measured low <= predicted knee < measured high",
        evidence={
            "predicted": k,
            "predicted_low": predicted.interval.low,
            "predicted_high": predicted.interval.high,
            "replayed_low": None if rp is None else rp.low,
            "replayed_high": None if rp is None else rp.high,
        },
        kind="knee",
        note=note,
    )


# -- the knee of a cache of known capacity (plan.knee adds where the capacity comes from)
INTERVAL_COVERAGE = 0.80  # the knee interval: 10 % and 90 % of the working set's spread
MAX_TOKENS = 10_000_000  # accepted tokens per turn / system prompt / context
MAX_TURNS = 100_000


@dataclass(frozen=True)
class SessionMix:
    """The sessions of a multi-turn workload: mean turns per session, mean user tokens
    and output tokens per turn (each with a standard deviation), the shared system prompt
    in tokens, and the tokens a chat template adds per turn (0 on completions)."""

    turns: float
    user_tokens: float
    output_tokens: float
    system_tokens: int = 0
    turns_sd: float = 0.0
    user_tokens_sd: float = 0.0
    output_tokens_sd: float = 0.0
    template_tokens: int = 0

    def check(self) -> SessionMix:
        """The mix, or one UsageError line naming the option out of range."""
        v.number("--turns", self.turns, 1, MAX_TURNS)
        v.number("--user-tokens", self.user_tokens, 0, MAX_TOKENS, unit="tokens")
        v.number("--osl", self.output_tokens, 0, MAX_TOKENS, unit="tokens")
        v.integer("--system-tokens", self.system_tokens, 0, MAX_TOKENS, unit="tokens")
        v.integer("--template-tokens", self.template_tokens, 0, MAX_TOKENS, unit="tokens")
        v.number("--turns-sd", self.turns_sd, 0, MAX_TURNS)
        v.number("--user-tokens-sd", self.user_tokens_sd, 0, MAX_TOKENS, unit="tokens")
        v.number("--osl-sd", self.output_tokens_sd, 0, MAX_TOKENS, unit="tokens")
        if self.system_tokens + self.user_tokens + self.template_tokens == 0:
            # a first prompt of no tokens: no session could be sent, yet a knee was
            # printed (--user-tokens 0 --osl 0: 29,205 sessions of 0 tokens on an H100)
            raise UsageError(
                "--system-tokens, --user-tokens and --template-tokens are all 0: a "
                "session's first prompt would hold no token"
            )
        return self

    @property
    def turn_tokens(self) -> float:
        """Mean tokens one turn adds to the history: user + output + template."""
        return self.user_tokens + self.output_tokens + self.template_tokens

    @property
    def session_tokens(self) -> float:
        """Mean tokens of a session at its longest: P + T x (U + O + template)."""
        return self.system_tokens + self.turns * self.turn_tokens

    @property
    def last_prompt_tokens(self) -> float:
        """Mean tokens of a session's last prompt: P + T x (U + O + template) - O."""
        return self.session_tokens - self.output_tokens

    def held_blocks(self, block_size: int, ideal_cache: bool = False) -> int:
        """Blocks the mean session's last prompt takes, the shared ones included (the
        module docstring): rounded up on an engine, down in the ideal cache."""
        if ideal_cache:
            return math.floor(self.last_prompt_tokens / block_size)
        return math.ceil(self.last_prompt_tokens / block_size)

    @property
    def session_tokens_sd(self) -> float:
        """Standard deviation of a session's tokens at its longest: a random number of
        turns, each of random length (a compound sum, turns and lengths independent):
        ``Var = E[T] (sd_U^2 + sd_O^2) + sd_T^2 (U + O + template)^2``."""
        var = (
            self.turns * (self.user_tokens_sd**2 + self.output_tokens_sd**2)
            + self.turns_sd**2 * self.turn_tokens**2
        )
        return math.sqrt(var)

    @property
    def last_prompt_tokens_sd(self) -> float:
        """Standard deviation of a session's last prompt (T user messages, T - 1 replies):
        ``Var = E[T] sd_U^2 + (E[T] - 1) sd_O^2 + sd_T^2 (U + O + template)^2``."""
        var = (
            self.turns * self.user_tokens_sd**2
            + (self.turns - 1) * self.output_tokens_sd**2
            + self.turns_sd**2 * self.turn_tokens**2
        )
        return math.sqrt(var)


def knee_at(capacity: int, shared: int, own: float, sd: float, z: float) -> float:
    """The ``c`` at which ``c`` sessions' own blocks (mean ``own`` each, sd ``sd``) plus
    the shared blocks reach ``capacity`` at the quantile ``z`` (0: the mean)."""
    room = capacity - shared
    if room <= 0:
        return 0.0
    if sd == 0 or z == 0:
        return room / own
    x = (-z * sd + math.sqrt(z * z * sd * sd + 4 * own * room)) / (2 * own)
    return x * x


@dataclass(frozen=True)
class CapacityKnee:
    """The knee of a cache of a known capacity (tokens), whatever holds it: the block
    arithmetic every prediction shares (``predict_knee`` adds where the capacity comes
    from; a sweep gives the capacity its server published)."""

    capacity_tokens: int
    block_size: int
    capacity_blocks: int  # capacity_tokens // block_size - reserved
    shared_blocks: int
    session_blocks: int
    session_blocks_sd: float
    knee_sessions: float
    interval: Interval


def capacity_knee(
    capacity_tokens: int,
    mix: SessionMix,
    *,
    block_size: int,
    reserved_blocks: int = 0,
    ideal_cache: bool = False,
) -> CapacityKnee:
    """The sessions of ``mix`` at which a cache of ``capacity_tokens`` fills, with its
    analytic interval (module docstring)."""
    capacity_blocks = max(0, capacity_tokens // block_size - reserved_blocks)
    b = block_size
    shared = mix.system_tokens // b
    session_blocks = max(1, mix.held_blocks(b, ideal_cache) - shared)
    sd_blocks = mix.last_prompt_tokens_sd / b
    z = z_critical(INTERVAL_COVERAGE)
    knee = knee_at(capacity_blocks, shared, session_blocks, 0.0, 0.0)
    lo = knee_at(capacity_blocks, shared, session_blocks, sd_blocks, z)
    hi = knee_at(capacity_blocks, shared, session_blocks, sd_blocks, -z)
    method = (
        "analytic: the sessions at which the working set of c independent sessions "
        "(normal approximation) exceeds the capacity with probability 90 % and 10 %"
        if sd_blocks > 0
        else "no spread in the session mix: the point"
    )
    return CapacityKnee(capacity_tokens, b, capacity_blocks, shared, session_blocks, sd_blocks,
                        knee, Interval(lo, hi, INTERVAL_COVERAGE, method))  # fmt: skip
