"""LoadGen test settings: the benchmark's defaults for a model and scenario, then the
user's ``user.conf``, then the command line (docs/MLPERF.md, "Settings").

The defaults are MLCommons' ``mlperf.conf`` (mlcommons/inference, loadgen/mlperf.conf),
which LoadGen compiles in: ``TestSettings.FromConfig(path, model, scenario, 0)`` loads
it, ``..., 1)`` loads it and then a user.conf on top. Nothing here restates its values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench import validate as v
from accelbench.errors import UsageError
from accelbench.mlperf import loadgen

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

# A user.conf line LoadGen understands: "model.scenario.key = number" (spaces around
# "=", nothing after the value). LoadGen's parser silently skips "key=value" without
# spaces and fails the whole file on a comment after a value; this names the line.
_CONF_LINE = re.compile(r"^(\S+)\.(\S+)\.(\S+)\s+=\s+(\S+)$")


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

    def validate(self) -> None:
        v.choice("scenario", self.scenario, tuple(SCENARIOS))
        v.choice("--benchmark", self.benchmark, BENCHMARKS)
        if self.scenario == "interactive" and self.benchmark not in INTERACTIVE:
            raise UsageError(
                f"--benchmark {self.benchmark} has no interactive scenario; "
                f"one of: {', '.join(INTERACTIVE)}"
            )
        if self.user_conf is not None:
            check_user_conf(self.user_conf)
        self.target_qps = v.optional_number(
            "--target-qps", self.target_qps, 0, MAX_QPS, lo_open=True, unit="queries/s"
        )
        if self.target_qps is not None and self.scenario == "single-stream":
            raise UsageError("--target-qps does not apply to single-stream (one query at a time)")
        self.min_duration_s = v.optional_number(
            "--min-duration", self.min_duration_s, 0, MAX_DURATION_S, unit="s"
        )
        self.min_query_count = v.optional_integer(
            "--min-query-count", self.min_query_count, 1, MAX_QUERIES
        )
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


def check_user_conf(path: str) -> Path:
    """A readable user.conf whose every line LoadGen will apply (one line on the first
    that it would reject or silently skip)."""
    p = v.input_file("--user-conf", path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--user-conf {p}: cannot read it: {exc}") from None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = _CONF_LINE.match(s)
        if m is None or not _is_number(m.group(4)):
            raise UsageError(
                f"--user-conf {p} line {n}: {s[:80]!r} is not 'model.scenario.key = number' "
                "(LoadGen needs spaces around '=' and ignores the line otherwise)"
            )
    return p


def _is_number(s: str) -> bool:
    """LoadGen reads values with strtoul (base 0: 10, 0x1A, 017) or strtod."""
    for parse in (lambda x: int(x, 0), float):
        try:
            parse(s)
            return True
        except ValueError:
            continue
    return False


def snapshot(ts: Any) -> dict[str, Any]:
    """The fields of a LoadGen TestSettings that say what a run is held to."""
    out: dict[str, Any] = {}
    for f in FIELDS:
        val = getattr(ts, f)
        out[f] = val if isinstance(val, bool | int | float) else float(val)
    return out


def build(s: MlperfSettings, qsl_size: int) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(LoadGen TestSettings, the benchmark's defaults, the effective settings)."""
    lg = loadgen()
    base = lg.TestSettings()
    base.FromConfig("", s.conf_model, s.lg_scenario, 0)
    ts = lg.TestSettings()
    if s.user_conf is not None:
        rc = ts.FromConfig(str(s.user_conf), s.conf_model, s.lg_scenario, 1)
        if rc != 0:
            raise UsageError(f"--user-conf {s.user_conf}: LoadGen could not apply it (code {rc})")
    else:
        ts.FromConfig("", s.conf_model, s.lg_scenario, 0)
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
    return ts, snapshot(base), effective


def check_effective(e: dict[str, Any], s: MlperfSettings) -> None:
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


def compliance(
    defaults: dict[str, Any], effective: dict[str, Any], *, synthetic: bool
) -> list[str]:
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
    if e["performance_sample_count_override"] < d["performance_sample_count_override"]:
        out.append(
            f"{e['performance_sample_count_override']} performance samples, the benchmark "
            f"uses {d['performance_sample_count_override']}"
        )
    if synthetic:
        out.append("the samples are synthetic, not the benchmark's dataset")
    return out
