"""Rebuild the MLPerf Inference points that ``accelbench predict --validate`` checks the
step model against (models the factors never saw) from fetched result repositories.

    python benchmarks/build_mlperf_points.py \\
        --snapshot ntuhpc/inference_results_v5.1=PATH/TO/inference_results_v5.1 \\
        --snapshot gbeezybez/inference_results_v6.0=PATH/TO/inference_results_v6.0

Each ``--snapshot OWNER/NAME=GITDIR`` is a git directory (a clone or a ``fetch``
snapshot) of an MLCommons inference results repository, or of a public mirror of one
(mlcommons/inference_results_v5.1 and v6.0 themselves could not be fetched here; the
mirrors above carry MLCommons' own "Commit results" / "Publishing Results" commits).
From its HEAD the script reads ``summary_results.json`` (MLCommons' results table: one
row per system x benchmark x scenario, ``Performance_Result`` in ``Performance_Units``
"Tokens/s", the system's accelerator and count, software, weight precision, and the
accuracy run's ``TOKENS_PER_SAMPLE``) and, for every kept row, the row's
``<Location>/performance/run_1/mlperf_log_summary.txt`` (LoadGen's own log: the tokens/s,
VALID, the latency limits of the run and the measured first-token and time-per-output-
token percentiles). A row whose log is missing, not VALID, or disagrees with the table
by more than 0.1 % is refused, counted on stderr, never silently dropped.

Kept: closed division, datacenter suite, one node, the LLM benchmarks the model catalog
holds (llama2-70b-99, llama3.1-8b, llama3.1-405b, mixtral-8x7b, deepseek-r1,
gpt-oss-120b; the 99.9 accuracy variants repeat the same runs and are left out), the
Offline, Server and Interactive scenarios, and accelerators the catalog holds (H200-NVL,
RTX PRO, Arc and others are counted and left out). MLPerf's tokens/s are generated
(output) tokens per second for the whole system.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src/accelbench/predict/data/mlperf_points.csv"

BENCHMARKS = {
    "llama2-70b-99": "llama-2-70b",
    "llama3.1-8b": "llama-3.1-8b",
    "llama3.1-405b": "llama-3.1-405b",
    "mixtral-8x7b": "mixtral-8x7b",
    "deepseek-r1": "deepseek-r1",
    "gpt-oss-120b": "gpt-oss-120b",
}
SCENARIOS = ("Offline", "Server", "Interactive")
# the source's accelerator name -> catalog id (anchored: H200-NVL, power-capped and
# mixed-accelerator systems do not match)
ACCELERATORS = (
    (re.compile(r"^(Virtualized )?NVIDIA H100-SXM-80GB$"), "h100"),
    (re.compile(r"^(Virtualized )?NVIDIA H200-SXM-141GB$"), "h200"),
    (re.compile(r"^NVIDIA B200-SXM-180GB$"), "b200"),
    (re.compile(r"^NVIDIA B300-SXM-270GB$"), "b300"),
    (re.compile(r"^NVIDIA GB200$"), "gb200"),
    (re.compile(r"^NVIDIA GB300$"), "gb300"),
    (re.compile(r"^AMD Instinct MI300X 192GB HBM3$"), "mi300x"),
    (re.compile(r"^AMD Instinct MI325X 256GB HBM3[eE]$"), "mi325x"),
    (re.compile(r"^AMD Instinct MI350X 288GB HBM3e$"), "mi350x"),
    (re.compile(r"^AMD Instinct MI355X 288GB HBM3e$"), "mi355x"),
)
COLUMNS = (
    "round",
    "published",
    "submitter",
    "system",
    "platform",
    "benchmark",
    "model",
    "scenario",
    "accelerator",
    "accelerator_name",
    "accelerator_count",
    "software",
    "precision",
    "output_tok_s",
    "tokens_per_sample",
    "ttft_limit_s",
    "tpot_limit_s",
    "p50_ttft_s",
    "p99_ttft_s",
    "p50_tpot_s",
    "p99_tpot_s",
    "source_repo",
    "source_commit",
    "source_table",
    "source_file",
    "details_url",
)
NS = 1e-9


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], check=True, capture_output=True, text=True
    ).stdout


def accelerator_id(name: str) -> str | None:
    for pattern, acc in ACCELERATORS:
        if pattern.match(name.strip()):
            return acc
    return None


def log_value(text: str, label: str) -> float | None:
    """The number after ``label`` and a colon in a LoadGen summary (None: absent)."""
    m = re.search(rf"^{re.escape(label)}\s*:\s*([0-9.eE+-]+)\s*$", text, re.MULTILINE)
    return float(m.group(1)) if m else None


def fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def rows_of(repo: Path, name: str, left_out: Counter[str]) -> list[dict[str, str]]:
    commit = git(repo, "rev-parse", "HEAD").strip()
    published = git(repo, "log", "-1", "--format=%cs", commit, "--", "summary_results.json")
    table = json.loads(git(repo, "show", f"{commit}:summary_results.json"))
    out: list[dict[str, str]] = []
    for r in table:
        if r.get("Category") != "closed" or r.get("Suite") != "datacenter":
            continue
        bench = BENCHMARKS.get(str(r.get("Model")))
        if bench is None or r.get("Scenario") not in SCENARIOS:
            continue
        why = ""
        acc = accelerator_id(str(r.get("Accelerator", "")))
        if r.get("Nodes") != 1:
            why = "more than one node"
        elif acc is None:
            why = f"accelerator not in the catalog ({r.get('Accelerator')})"
        elif r.get("Performance_Units") != "Tokens/s":
            why = f"units {r.get('Performance_Units')}"
        if why:
            left_out[why] += 1
            continue
        # v5.1 names the scenario's folder, v6.0 "./.../performance/run_1"
        loc = str(r["Location"]).removeprefix("./").rstrip("/")
        if not loc.endswith("/performance/run_1"):
            loc += "/performance/run_1"
        log_path = f"{loc}/mlperf_log_summary.txt"
        try:
            log = git(repo, "show", f"{commit}:{log_path}")
        except subprocess.CalledProcessError:
            left_out["no mlperf_log_summary.txt"] += 1
            continue
        if "Result is : VALID" not in log:
            left_out["LoadGen result not VALID"] += 1
            continue
        label = "Tokens per second" if r["Scenario"] == "Offline" else "Completed tokens per second"
        logged = log_value(log, label)
        table_tok_s = float(r["Performance_Result"])
        if logged is None or abs(logged / table_tok_s - 1) > 1e-3:
            left_out["table and log disagree"] += 1
            continue
        # the accuracy run's mean output tokens; llama3.1-8b reports GEN_LEN instead, the
        # characters of its post-processed text (mlcommons/inference
        # language/llama3.1-8b/evaluation.py: len() of the decoded strings), not tokens
        tps = re.search(r"TOKENS_PER_SAMPLE:\s*([0-9.]+)", str(r.get("Accuracy", "")))
        ttft_lim, tpot_lim = (
            log_value(log, "ttft_latency (ns)"),
            log_value(log, "tpot_latency (ns)"),
        )
        latency = r["Scenario"] != "Offline"
        p = {
            "p50_ttft_s": log_value(log, "50.00 percentile first token latency (ns)"),
            "p99_ttft_s": log_value(log, "99.00 percentile first token latency (ns)"),
            "p50_tpot_s": log_value(log, "50.00 percentile time to output token (ns)"),
            "p99_tpot_s": log_value(log, "99.00 percentile time to output token (ns)"),
        }
        out.append(
            {
                "round": str(r.get("version", "")),
                "published": published.strip(),
                "submitter": str(r["Submitter"]),
                "system": str(r["System"]),
                "platform": str(r["Platform"]),
                "benchmark": str(r["Model"]),
                "model": bench,
                "scenario": r["Scenario"].lower(),
                "accelerator": str(acc),
                "accelerator_name": str(r["Accelerator"]).strip(),
                "accelerator_count": str(int(r["a#"])),
                "software": str(r.get("Software") or "not in source").strip() or "not in source",
                "precision": str(r.get("weight_data_types") or "not in source").lower(),
                "output_tok_s": fmt(table_tok_s),
                "tokens_per_sample": tps.group(1) if tps else "",
                "ttft_limit_s": fmt(ttft_lim * NS) if latency and ttft_lim else "",
                "tpot_limit_s": fmt(tpot_lim * NS) if latency and tpot_lim else "",
                **{k: fmt(v * NS) if latency and v is not None else "" for k, v in p.items()},
                "source_repo": name,
                "source_commit": commit,
                "source_table": "summary_results.json",
                "source_file": log_path,
                "details_url": str(r.get("Details", "")),
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--snapshot",
        action="append",
        required=True,
        metavar="OWNER/NAME=GITDIR",
        help="a results repository's git directory, with its owner/name for provenance",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    left_out: Counter[str] = Counter()
    rows: list[dict[str, str]] = []
    for spec in args.snapshot:
        name, sep, path = spec.partition("=")
        if not sep or "/" not in name:
            print(f"--snapshot {spec!r}: expected OWNER/NAME=GITDIR", file=sys.stderr)
            return 2
        rows += rows_of(Path(path), name, left_out)
    rows.sort(key=lambda r: (r["model"], r["accelerator"], r["round"], r["scenario"], r["system"]))
    tmp = args.out.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    tmp.replace(args.out)
    print(f"{len(rows)} points -> {args.out}", file=sys.stderr)
    for why, n in left_out.most_common():
        print(f"left out: {n} {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
