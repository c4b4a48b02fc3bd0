"""LoadGen test settings: the benchmark's defaults for a model and scenario, then the
user's ``user.conf``, then the command line (docs/MLPERF.md, "Settings").

The defaults are MLCommons' ``mlperf.conf`` (mlcommons/inference, loadgen/mlperf.conf),
which LoadGen compiles in: ``TestSettings.FromConfig(path, model, scenario, 0)`` loads
it, ``..., 1)`` loads it and then a user.conf on top. Nothing here restates its values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from accelbench import validate as v
from accelbench.errors import UsageError
from accelbench.runner.config import MIN_RATE
from accelbench.suites.mlperf import loadgen

# accelbench's scenario -> (LoadGen scenario, uses the "-interactive" benchmark keys)
SCENARIOS: dict[str, tuple[str, bool]] = {
    "offline": ("Offline", False),
    "server": ("Server", False),
    "interactive": ("Server", True),
    "single-stream": ("SingleStream", False),
}

# mlperf.conf's model keys of the LLM benchmarks that measure token latencies.
BENCHMARKS = (
    "llama2-70b",
    "llama3_1-405b",
    "llama3_1-8b",
    "llama3_1-8b-edge",
    "mixtral-8x7b",
    "deepseek-r1",
    "gpt-oss-120b",
)
# Those with an interactive variant ("<model>-interactive.Server.*" keys).
INTERACTIVE = ("llama2-70b", "llama3_1-405b", "llama3_1-8b", "deepseek-r1", "gpt-oss-120b")

MAX_QPS = 1e6
# as run's --rate: one query every ~17 minutes. LoadGen schedules its first query 1/QPS
# after the start, so 1e-300 never finished (and 1e-6 waited eleven days)
MIN_QPS = MIN_RATE
MAX_DURATION_S = 30 * 86400.0
MAX_QUERIES = 10_000_000

# What run.json / mlperf.json record of a TestSettings (LoadGen's own attribute names).
FIELDS = (
    "min_duration_ms",
    "max_duration_ms",
    "min_query_count",
    "max_query_count",
    "server_target_qps",
    "offline_expected_qps",
    "ttft_latency",
    "tpot_latency",
    "server_target_latency_ns",
    "server_target_latency_percentile",
    "single_stream_expected_latency_ns",
    "single_stream_target_latency_percentile",
    "use_token_latencies",
    "performance_sample_count_override",
    "sample_concatenate_permutation",
)

# A user.conf line: "model.scenario.key = value" (spaces around "=", nothing after the
# value). LoadGen's parser silently skips "key=value" without spaces and fails the whole
# file on a comment after a value; each line is checked here and refused by number.
# (matched against the line's words joined by one space)
_CONF_LINE = re.compile(r"^([^.\s]+)\.([^.\s]+)\.([^.\s]+) = (\S+)$")
LG_SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")
# What LoadGen's strtoull (base 0) and strtod read whole: no sign, no "_", no spaces.
_UINT = re.compile(r"^(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$")
_DOUBLE = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")
_DAY_MS = 86_400_000
ALL = ("SingleStream", "MultiStream", "Server", "Offline")
_ASCII_WS = re.compile(r"[ \t\v\f\r]+")


@dataclass(frozen=True)
class ConfKey:
    """A user.conf key as LoadGen 6.0's ``TestSettings::FromConfig`` reads it (loadgen/
    test_settings_internal.cc): a whole number (strtoull) or a double (strtod), the
    scenarios it is looked up for, its allowed literal range, and why it is refused when
    it is (a key that redefines what VALID means, or one LoadGen ignores in a user.conf)."""

    kind: str  # "int" | "float"
    scenarios: tuple[str, ...] = ALL
    lo: float = 0
    hi: float = MAX_QUERIES
    unit: str = ""
    refused: str | None = None


_MODE = "the test mode is the command's (--find-peak; accuracy and submission modes are not run)"
_MLPERF_ONLY = "LoadGen reads it only from mlperf.conf and ignores it in a user.conf"
_VERDICT = "it changes what VALID means (which statistic LoadGen judges), not a limit"
_ACCURACY = "an accuracy-mode setting, without effect in a performance run"
_AUDIT = "a compliance-test mode (each sample once, or one sample repeated), not a performance run"
CONF_KEYS: dict[str, ConfKey] = {
    "mode": ConfKey("int", refused=_MODE),
    **{k: ConfKey("int", refused=_MLPERF_ONLY) for k in (
        "qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed", "test05",
        "test05_qsl_rng_seed", "test05_sample_index_rng_seed", "test05_schedule_rng_seed")},
    "accuracy_log_probability": ConfKey("float", refused=_MLPERF_ONLY),
    "use_token_latencies": ConfKey("int", refused=_VERDICT),
    "infer_token_latencies": ConfKey("int", refused=_VERDICT),
    "token_latency_scaling_factor": ConfKey("int", refused=_VERDICT),
    "target_latency_percentile": ConfKey(
        "float", ("SingleStream", "MultiStream", "Server"), refused=_VERDICT
    ),
    "performance_issue_unique": ConfKey("int", refused=_AUDIT),
    "performance_issue_same": ConfKey("int", refused=_AUDIT),
    "performance_issue_same_index": ConfKey("int", refused=_AUDIT),
    **{k: ConfKey("int", refused=_ACCURACY) for k in (
        "accuracy_sample_count_override", "accuracy_log_rng_seed",
        "accuracy_log_sampling_target")},
    # limits and run length: applied; a relaxed one makes the run non-compliant
    "ttft_latency": ConfKey("int", ("Server",), 1, _DAY_MS, "ms"),
    "tpot_latency": ConfKey("int", ("Server",), 1, _DAY_MS, "ms"),
    # SingleStream / MultiStream: the expected latency (ms) that sizes LoadGen's schedule
    # (Server's end-to-end bound is not judged where token latencies are: refused below)
    "target_latency": ConfKey("float", ("SingleStream", "MultiStream"), 0.001, _DAY_MS, "ms"),
    "target_qps": ConfKey("float", ("Server", "Offline"), MIN_QPS, MAX_QPS, "queries/s"),
    "min_duration": ConfKey("int", ALL, 0, MAX_DURATION_S * 1000, "ms"),
    "max_duration": ConfKey("int", ALL, 0, MAX_DURATION_S * 1000, "ms"),
    "min_query_count": ConfKey("int"),
    "max_query_count": ConfKey("int"),
    "performance_sample_count_override": ConfKey("int"),
    "samples_per_query": ConfKey("int", ("MultiStream",), 1, MAX_QUERIES),
    "sample_concatenate_permutation": ConfKey("int", ALL, 0, 1),
    "coalesce_queries": ConfKey("int", ("Server",), 0, 1),
    "max_async_queries": ConfKey("int", ("Server",), 0, MAX_QUERIES),
    "print_timestamps": ConfKey("int", ALL, 0, 1),
}  # fmt: skip


def conf_models() -> tuple[str, ...]:
    """The model keys a user.conf line may name: the benchmarks' and "*"."""
    return ("*", *BENCHMARKS, *(b + "-interactive" for b in INTERACTIVE))


class ConfLine(TypedDict):
    """A user.conf setting line as mlperf.json records it."""

    text: str
    applies: bool  # False: for another benchmark or scenario of the same file
    line: int
    # the command-line option that replaced its value (the command line wins): the line
    # applies to the run, its value does not
    replaced_by: NotRequired[str]


# user.conf keys the command line sets too, and the option that does
_CONF_OPTIONS = {
    "target_qps": "--target-qps",
    "min_duration": "--min-duration",
    "min_query_count": "--min-query-count",
}


# A LoadGen TestSettings' fields that say what a run is held to (FIELDS): numbers and flags.
Snapshot = dict[str, float]


@dataclass
class MlperfSettings:
    """Which benchmark's rules, which scenario, and the user's overrides."""

    scenario: str
    benchmark: str = "llama2-70b"
    user_conf: str | None = None
    target_qps: float | None = None  # Server: server_target_qps; Offline: expected QPS
    min_duration_s: float | None = None
    min_query_count: int | None = None
    find_peak: bool = False
    trace: bool = False  # LoadGen's trace (mlperf_log_trace.json) and the issue delays from it
    # filled by validate(): each user.conf setting line and whether it applies to this run
    user_conf_lines: list[ConfLine] = field(default_factory=list)

    def validate(self) -> None:
        v.choice("scenario", self.scenario, tuple(SCENARIOS))
        v.choice("--benchmark", self.benchmark, BENCHMARKS)
        if self.scenario == "interactive" and self.benchmark not in INTERACTIVE:
            raise UsageError(
                f"--benchmark {self.benchmark} has no interactive scenario; "
                f"one of: {', '.join(INTERACTIVE)}"
            )
        if self.user_conf is not None:
            self.user_conf_lines = check_user_conf(
                self.user_conf, self.conf_model, self.lg_scenario
            )
        self.target_qps = v.optional_number(
            "--target-qps", self.target_qps, MIN_QPS, MAX_QPS, unit="queries/s"
        )
        if self.target_qps is not None and self.scenario == "single-stream":
            raise UsageError("--target-qps does not apply to single-stream (one query at a time)")
        self.min_duration_s = v.optional_number(
            "--min-duration", self.min_duration_s, 0, MAX_DURATION_S, unit="s"
        )
        self.min_query_count = v.optional_integer(
            "--min-query-count", self.min_query_count, 1, MAX_QUERIES
        )
        given = {
            "--target-qps": self.target_qps,
            "--min-duration": self.min_duration_s,
            "--min-query-count": self.min_query_count,
        }
        for ln in self.user_conf_lines:  # the command line wins: said, never as applied
            opt = _CONF_OPTIONS.get(ln["text"].split()[0].rsplit(".", 1)[-1])
            if ln["applies"] and opt is not None and given[opt] is not None:
                ln["replaced_by"] = opt
        if self.find_peak and self.lg_scenario != "Server":
            raise UsageError(
                "--find-peak searches the Server QPS: use it with server or interactive"
            )

    @property
    def lg_scenario(self) -> str:
        return SCENARIOS[self.scenario][0]

    @property
    def conf_model(self) -> str:
        """The model key of mlperf.conf / user.conf for this benchmark and scenario."""
        return self.benchmark + ("-interactive" if SCENARIOS[self.scenario][1] else "")


def check_user_conf(
    path: str, model: str | None = None, scenario: str | None = None
) -> list[ConfLine]:
    """A readable user.conf whose every line LoadGen will read as written: one line
    (exit 2) naming the first line that it would reject, skip, ignore or misread, or
    whose setting changes what VALID means. Returns the setting lines, each with
    ``applies`` (False: for another benchmark or scenario of the same file) when
    ``model`` / ``scenario`` (LoadGen's names) are given."""
    p = v.input_file("--user-conf", path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--user-conf {p}: cannot read it: {exc}") from None
    out: list[ConfLine] = []
    first: dict[str, int] = {}  # model.scenario.key -> its line
    # LoadGen's getline splits at "\n" only and its ">>" at ASCII white space only
    # (Python's splitlines() and split() also break at \x85, \u2028...: a line LoadGen
    # reads as one word would pass here as three)
    for n, line in enumerate(text.split("\n"), 1):
        words = _ASCII_WS.split(line.strip(" \t\v\f\r"))
        if words == [""]:
            words = []
        if not words or words[0] == "#":  # LoadGen: a comment is '#' as its own word
            continue
        s = " ".join(words)
        try:
            applies = _conf_line(s, model, scenario)
        except ValueError as exc:
            raise UsageError(f"--user-conf {p} line {n}: {s[:80]!r}: {exc}") from None
        setting = words[0]  # model.scenario.key: one value each, or which one LoadGen
        if setting in first:  # kept would be its parser's business, not the user's
            raise UsageError(
                f"--user-conf {p} line {n}: {setting} is set twice (first on line "
                f"{first[setting]}): keep one"
            )
        first[setting] = n
        out.append({"text": s, "applies": applies, "line": n})
    return out


def _conf_line(s: str, model: str | None, scenario: str | None) -> bool:
    """Whether a valid setting line applies to ``model`` / ``scenario``; ValueError says
    why LoadGen would reject, skip, ignore or misread it."""
    m = _CONF_LINE.match(s)
    if m is None:
        raise ValueError(
            "not 'model.scenario.key = number' (LoadGen needs spaces around '=', "
            "nothing after the value, and '# ' to start a comment; it skips or rejects "
            "the line otherwise)"
        )
    mod, scen, key, val = m.groups()
    if mod not in conf_models():
        raise ValueError(f"unknown model {mod!r}; one of: {', '.join(conf_models())}")
    if scen != "*" and scen not in LG_SCENARIOS:
        raise ValueError(f"unknown scenario {scen!r}; one of: *, {', '.join(LG_SCENARIOS)}")
    spec = CONF_KEYS.get(key)
    if spec is None:
        raise ValueError(f"unknown key {key!r} (LoadGen would ignore it)")
    if spec.refused:
        raise ValueError(f"{key} is refused: {spec.refused}")
    if key == "target_latency" and scen == "Server":
        raise ValueError(
            "Server's target_latency is not judged by the LLM benchmarks (LoadGen judges "
            "ttft_latency and tpot_latency with token latencies on)"
        )
    if scen != "*" and scen not in spec.scenarios:
        raise ValueError(f"{key} applies to {', '.join(spec.scenarios)} only")
    if spec.kind == "int":
        if not _UINT.match(val):
            raise ValueError(
                f"{key} must be a whole number without sign or exponent (LoadGen reads "
                f"it with strtoull: {val!r} would become another number)"
            )
        octal = len(val) > 1 and val[0] == "0" and val[1] not in "xX"  # strtoull: 017 = 15
        num: float = int(val, 8) if octal else int(val, 0)
    else:
        if not _DOUBLE.match(val):
            raise ValueError(f"{key} must be a finite decimal number (got {val!r})")
        num = float(val)
    if not spec.lo <= num <= spec.hi:
        unit = f" {spec.unit}" if spec.unit else ""
        raise ValueError(f"{key} must be in [{spec.lo:g}, {spec.hi:g}]{unit} (got {val})")
    applies = (
        (model is None or mod in ("*", model))
        and (scenario is None or scen in ("*", scenario))
        and (scenario is None or scenario in spec.scenarios)
    )
    return applies


def snapshot(ts: Any) -> Snapshot:
    """The fields of a LoadGen TestSettings that say what a run is held to."""
    out: Snapshot = {}
    for f in FIELDS:
        val = getattr(ts, f)
        out[f] = val if isinstance(val, bool | int | float) else float(val)
    return out


def build(s: MlperfSettings, qsl_size: int) -> tuple[Any, Snapshot, Snapshot]:
    """(LoadGen TestSettings, the benchmark's defaults, the effective settings)."""
    lg = loadgen()
    base = lg.TestSettings()
    base.FromConfig("", s.conf_model, s.lg_scenario, 0)
    ts = lg.TestSettings()
    ts.FromConfig("", s.conf_model, s.lg_scenario, 0)
    if s.user_conf is not None:
        # conf_type 2: the file alone over mlperf.conf (type 1 loads mlperf.conf itself,
        # but only on its first call in a process: a second run would lose it)
        rc = ts.FromConfig(str(s.user_conf), s.conf_model, s.lg_scenario, 2)
        if rc != 0:
            raise UsageError(f"--user-conf {s.user_conf}: LoadGen could not apply it (code {rc})")
    ts.scenario = getattr(lg.TestScenario, s.lg_scenario)
    ts.mode = lg.TestMode.FindPeakPerformance if s.find_peak else lg.TestMode.PerformanceOnly
    if s.target_qps is not None:
        if s.lg_scenario == "Server":
            ts.server_target_qps = s.target_qps
        else:
            ts.offline_expected_qps = s.target_qps
    if s.min_duration_s is not None:
        ts.min_duration_ms = round(s.min_duration_s * 1000)
    if s.min_query_count is not None:
        ts.min_query_count = s.min_query_count
    # LoadGen draws sample indices below the performance sample count: never beyond the
    # samples this QSL holds.
    if ts.performance_sample_count_override == 0 or ts.performance_sample_count_override > qsl_size:
        ts.performance_sample_count_override = qsl_size
    effective = snapshot(ts)
    check_effective(effective, s)
    check_schedule(effective, s)
    return ts, snapshot(base), effective


def expected_samples(e: Snapshot, lg_scenario: str) -> tuple[float, str]:
    """How many samples LoadGen generates before its test starts (it builds the whole
    schedule in memory first: loadgen.cc GenerateQueries, test_settings_internal.cc),
    and from which settings."""
    dur_s = e["min_duration_ms"] / 1000
    count = e["min_query_count"]
    if lg_scenario == "Server":
        qps = e["server_target_qps"]
        return max(qps * dur_s, count), f"server_target_qps {qps:g} x min_duration {dur_s:g} s"
    if lg_scenario == "Offline":  # one query of max(min count, 1.1 x duration x QPS)
        qps = e["offline_expected_qps"]
        n = 1.1 * dur_s * qps
        return max(n, count), f"1.1 x offline_expected_qps {qps:g} x min_duration {dur_s:g} s"
    lat_ns = e["single_stream_expected_latency_ns"] or 1
    return (
        max(2 * dur_s * 1e9 / lat_ns, count),
        f"2 x min_duration {dur_s:g} s / expected latency {lat_ns / 1e6:g} ms",
    )


def check_schedule(e: Snapshot, s: MlperfSettings) -> None:
    """LoadGen allocates its whole schedule before the first query (some hundred bytes a
    sample): a schedule past MAX_QUERIES samples is refused before it is built, as
    ``run`` refuses a plan past it."""
    n, why = expected_samples(e, s.lg_scenario)
    if not n <= MAX_QUERIES:
        src = f" (with --user-conf {s.user_conf})" if s.user_conf else ""
        raise UsageError(
            f"LoadGen would schedule about {n:,.0f} samples ({why}, min_query_count "
            f"{e['min_query_count']:,}){src}; at most {MAX_QUERIES:,}: lower the QPS or "
            "the duration"
        )


def check_effective(e: Snapshot, s: MlperfSettings) -> None:
    """The settings after mlperf.conf, the user.conf and the options, held to the same
    limits as the options: LoadGen takes a user.conf's ``nan``, a negative rate or a
    count past 2^64 without a word, and then never finishes (or allocates until killed)."""
    src = f" (from --user-conf {s.user_conf})" if s.user_conf else ""
    day_ns = 86400 * 10**9

    def bound(key: str, lo: float, hi: float, *, lo_open: bool = False, unit: str = "") -> None:
        try:
            v.number(key, e[key], lo, hi, lo_open=lo_open, unit=unit)
        except UsageError as exc:
            raise UsageError(f"{exc}{src}") from None

    qps = "server_target_qps" if s.lg_scenario == "Server" else "offline_expected_qps"
    bound(qps, 0, MAX_QPS, lo_open=True, unit="queries/s")
    for key in ("min_duration_ms", "max_duration_ms"):
        bound(key, 0, MAX_DURATION_S * 1000, unit="ms")
    for key in ("min_query_count", "max_query_count"):
        bound(key, 0, MAX_QUERIES)
    for key in ("ttft_latency", "tpot_latency", "server_target_latency_ns",
                "single_stream_expected_latency_ns"):  # fmt: skip
        bound(key, 0, day_ns, unit="ns")
    for key in ("server_target_latency_percentile", "single_stream_target_latency_percentile"):
        bound(key, 0, 1, lo_open=True)


def compliance(defaults: Snapshot, effective: Snapshot, *, synthetic: bool) -> list[str]:
    """Why a run is not an MLPerf-compliant run of its benchmark ([] = no reason found).
    Shortened runs, relaxed latency limits, fewer samples, a synthetic sample set."""
    out: list[str] = []
    d, e = defaults, effective
    if e["min_duration_ms"] < d["min_duration_ms"]:
        out.append(
            f"min_duration {e['min_duration_ms'] / 1000:g} s is below the benchmark's "
            f"{d['min_duration_ms'] / 1000:g} s"
        )
    if e["min_query_count"] < d["min_query_count"]:
        out.append(
            f"min_query_count {e['min_query_count']} is below the benchmark's "
            f"{d['min_query_count']}"
        )
    for key, name in (("ttft_latency", "TTFT"), ("tpot_latency", "TPOT")):
        if d["use_token_latencies"] and e[key] > d[key]:
            out.append(
                f"the {name} limit {e[key] / 1e6:g} ms is above the benchmark's {d[key] / 1e6:g} ms"
            )
    # refused in a user.conf (settings.CONF_KEYS); a caller of the API could still set them
    for key in ("use_token_latencies", "server_target_latency_percentile",
                "single_stream_target_latency_percentile"):  # fmt: skip
        if e[key] != d[key]:
            out.append(f"{key} {e[key]} differs from the benchmark's {d[key]}")
    if e["performance_sample_count_override"] < d["performance_sample_count_override"]:
        out.append(
            f"{e['performance_sample_count_override']} performance samples, the benchmark "
            f"uses {d['performance_sample_count_override']}"
        )
    if synthetic:
        out.append("the samples are synthetic, not the benchmark's dataset")
    return out
