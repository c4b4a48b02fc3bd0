"""The public calibration set: measured points with their provenance
(``predict/data/calibration.csv``, rebuilt by ``benchmarks/build_calibration.py``).

Units are the source's: seconds for TTFT and TPOT (medians over the run's requests),
tokens/s for throughput (``tput_per_gpu_tok_s``: input + output tokens per second per
GPU, InferenceX's ``tput_per_gpu``). A damaged row is refused with one line naming the
file, the line and the field: never dropped.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from accelbench.errors import AccelbenchError
from accelbench.predict.scheduler import Admission
from accelbench.predict.stepmodel import DEFAULT_MAX_BATCH, Layout

PROVENANCE = (
    "source",
    "source_repo",
    "source_file",
    "source_commit",
    "date",
    "submitter",
    "system",
    "accelerator_count",
    "engine",
    "engine_version",
    "precision",
)
COLUMNS = (
    *PROVENANCE,
    "snapshot_date",
    "run_url",
    "hardware",
    "model",
    "tp",
    "ep",
    "dp_attention",
    "isl",
    "osl",
    "concurrency",
    "tput_per_gpu_tok_s",
    "median_ttft_s",
    "median_tpot_s",
)
MAX_FILE_BYTES = 64 << 20
# repositories whose points InferenceX's client and launch scripts measured
INFERENCEX_REPOS = (
    "vngcloud/InferenceX-app",
    "SemiAnalysisAI/InferenceX",
    "SemiAnalysisAI/InferenceX-app",
)


@dataclass(frozen=True)
class Point:
    """One measured point of the calibration set."""

    hardware: str  # catalog accelerator id
    engine: str
    engine_version: str
    model: str  # catalog model id
    precision: str  # the source's name (fp8, fp4)
    layout: Layout
    isl: int
    osl: int
    concurrency: int
    throughput_per_gpu: float  # input + output tokens/s per GPU
    ttft_s: float  # median
    tpot_s: float  # median
    date: str  # ISO date the source gives the run
    source: str  # source repo and file
    run_url: str
    max_batch: int = DEFAULT_MAX_BATCH  # the engine's cap on running sequences (slots)

    @property
    def system(self) -> str:
        """One serving system: hardware, engine, precision and layout (the unit that
        leave-one-system-out cross-validation holds out)."""
        return f"{self.hardware} {self.engine} {self.precision} {self.layout.text()}"

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.hardware, self.engine, self.precision)

    @property
    def from_inferencex(self) -> bool:
        """Measured by SemiAnalysis InferenceX (its repository or the app's snapshot)."""
        return self.source.split(":", 1)[0] in INFERENCEX_REPOS

    @property
    def length_ratio(self) -> float:
        """The benchmark drew each prompt and output length uniformly from
        ``[ratio x ISL, ISL]`` (and OSL likewise): InferenceX runs its client
        (``utils/bench_serving/benchmark_serving.py``, ``sample_uniform``) with
        ``--random-range-ratio 0.8`` (``.github/workflows/benchmark-tmpl.yml``,
        ``RANDOM_RANGE_RATIO``); 1 (exact lengths) for any other source."""
        return 0.8 if self.from_inferencex else 1.0

    @property
    def mean_isl(self) -> int:
        """The mean prompt length the benchmark sent (``length_ratio``)."""
        return round(self.isl * (1 + self.length_ratio) / 2)

    @property
    def mean_osl(self) -> int:
        return round(self.osl * (1 + self.length_ratio) / 2)

    @property
    def admission(self) -> Admission:
        """When the engine that measured the point took new requests in
        (``inferencex_admission``; the engine's default for any other source)."""
        if not self.from_inferencex:
            return Admission()
        return inferencex_admission(self.hardware, self.engine, self.layout, self.concurrency)


def inferencex_admission(hardware: str, engine: str, layout: Layout, concurrency: int) -> Admission:
    """How InferenceX's launch scripts set the engines' admission (SemiAnalysisAI/InferenceX,
    ``benchmarks/single_node/fixed_seq_len/dsr1_fp{4,8}_{b200,b300}.sh`` and
    ``dsr1_fp{4,8}_{b200,h200}_trt.sh``, unchanged since 2025-09, before every point here):

    - SGLang on B200 and B300: ``--scheduler-recv-interval`` 10 below 16 users, 30 from 16
      (``SCHEDULER_RECV_INTERVAL``); the H200 and AMD scripts leave SGLang's default, 1.
    - TensorRT-LLM with DP attention: ``attention_dp_config: {enable_balance: true,
      batching_wait_iters: 0, timeout_iters: 60}``: new requests wait until every
      attention rank (TP of them) has one, at most 60 iterations."""
    if engine == "sglang" and hardware in ("b200", "b300"):
        return Admission(recv_interval=10 if concurrency < 16 else 30)
    if engine == "trt-llm" and layout.dp_attention and layout.tp > 1:
        return Admission(balance_ranks=layout.tp, balance_timeout_steps=60)
    return Admission()


def default_path() -> Path:
    return Path(str(resources.files("accelbench.predict").joinpath("data/calibration.csv")))


def _num(row: dict[str, str], key: str, where: str, integer: bool = False) -> float:
    text = (row.get(key) or "").strip()
    try:
        v = float(text)
    except ValueError:
        raise AccelbenchError(f"{where}: field {key!r} must be a number (got {text!r})") from None
    if not math.isfinite(v) or v <= 0 or (integer and v != int(v)):
        what = "a positive whole number" if integer else "a positive finite number"
        raise AccelbenchError(f"{where}: field {key!r} must be {what} (got {text!r})")
    return v


def parse_row(row: dict[str, str], where: str) -> Point:
    """One CSV row as a Point, or an AccelbenchError naming the field."""
    for key in PROVENANCE:
        if not (row.get(key) or "").strip():
            raise AccelbenchError(f"{where}: missing provenance field {key!r}")
    for key in ("hardware", "model"):
        if not (row.get(key) or "").strip():
            raise AccelbenchError(f"{where}: missing field {key!r}")
    date = row["date"].strip()
    if len(date) != 10 or date[4] != "-" or date[7] != "-" or not date.replace("-", "").isdigit():
        raise AccelbenchError(f"{where}: field 'date' must be YYYY-MM-DD (got {date!r})")
    dp = (row.get("dp_attention") or "").strip()
    if dp not in ("0", "1"):
        raise AccelbenchError(f"{where}: field 'dp_attention' must be 0 or 1 (got {dp!r})")
    tp = int(_num(row, "tp", where, True))
    ep = int(_num(row, "ep", where, True))
    if int(_num(row, "accelerator_count", where, True)) != tp:
        raise AccelbenchError(f"{where}: accelerator_count differs from tp (not one TP group)")
    return Point(
        hardware=row["hardware"].strip().lower(),
        engine=row["engine"].strip(),
        engine_version=row["engine_version"].strip(),
        model=row["model"].strip(),
        precision=row["precision"].strip().lower(),
        layout=Layout(tp, ep, dp == "1"),
        isl=int(_num(row, "isl", where, True)),
        osl=int(_num(row, "osl", where, True)),
        concurrency=int(_num(row, "concurrency", where, True)),
        throughput_per_gpu=_num(row, "tput_per_gpu_tok_s", where),
        ttft_s=_num(row, "median_ttft_s", where),
        tpot_s=_num(row, "median_tpot_s", where),
        date=date,
        source=f"{row['source_repo'].strip()}:{row['source_file'].strip()}",
        run_url=(row.get("run_url") or "").strip(),
    )


def load_calibration(path: str | Path | None = None) -> list[Point]:
    """Every point of the calibration table (the shipped one by default)."""
    p = Path(path) if path is not None else default_path()
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise AccelbenchError(f"{p}: not a calibration table (over {MAX_FILE_BYTES:,} bytes)")
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise AccelbenchError(f"{p}: not a calibration table (not UTF-8 text)") from None
    except OSError as exc:
        raise AccelbenchError(f"cannot read calibration table {p}: {exc.strerror}") from None
    lines = text.splitlines()
    if not lines:
        raise AccelbenchError(f"{p}: empty calibration table")
    reader = csv.DictReader(lines)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise AccelbenchError(
            f"{p}: not a calibration table (missing columns {', '.join(missing)})"
        )
    points = []
    for i, row in enumerate(reader, start=2):
        where = f"{p.name} line {i}"
        if None in row or any(v is None for v in row.values()):
            raise AccelbenchError(f"{where}: wrong number of fields")
        points.append(parse_row(row, where))
    if not points:
        raise AccelbenchError(f"{p}: the calibration table has no points")
    return points
