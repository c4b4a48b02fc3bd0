"""Rebuild the public calibration table of ``accelbench predict`` from fetched sources.

    python benchmarks/build_calibration.py PATH/TO/InferenceX-app  # github.com/vngcloud/InferenceX-app 7fe6d62
    python benchmarks/build_calibration.py SNAPSHOT --out src/accelbench/predict/data/calibration.csv

SNAPSHOT is a git directory of a snapshot of SemiAnalysis InferenceX-app (or a fork that
carries its data): the API fixtures ``packages/app/cypress/fixtures/api/benchmarks.json``
(latest point per configuration) and ``benchmarks-history.json`` (earlier runs), read
at the snapshot's HEAD with ``git show``. Each JSON point is one InferenceX benchmark run
(hardware, framework, precision, TP/EP, ISL/OSL, concurrency, and metrics in seconds and
tokens/s; ``tput_per_gpu`` counts input + output tokens per GPU per second).

Kept: aggregated single-node points without speculative decoding (the step model has no
disaggregated prefill/decode or multi-token prediction). Per configuration, the latest
point published before 2026 and the latest from 2026 on (so the time split has both
sides; repeated runs of one configuration are not independent points). Everything left
out is counted by reason on stderr, never silently. The units are the source's: seconds
for TTFT/TPOT, tokens/s for throughput and interactivity.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

FILES = (
    "packages/app/cypress/fixtures/api/benchmarks.json",
    "packages/app/cypress/fixtures/api/benchmarks-history.json",
)
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src/accelbench/predict/data/calibration.csv"
SPLIT_DATE = "2026-01-01"

# source's framework -> (engine, its family for the image tag)
ENGINES = {"sglang": "sglang", "trt": "trt-llm", "atom": "atom", "vllm": "vllm"}
MODELS = {"dsr1": "deepseek-r1", "gptoss": "gpt-oss-120b", "llama70b": "llama-3.3-70b"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], check=True, capture_output=True, text=True
    ).stdout


def version_of(image: str | None) -> str:
    """The engine version in a container image tag (``lmsysorg/sglang:v0.5.12-cu130`` ->
    ``v0.5.12-cu130``); "not in source" where the source gives no image."""
    return image.split(":", 1)[1] if image and ":" in image else "not in source"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot", type=Path, help="git directory of an InferenceX-app snapshot")
    ap.add_argument("--repo-name", default="", help="owner/name of the snapshot (provenance)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    repo: Path = args.snapshot
    name = args.repo_name or repo.parent.name.replace("+", "/")
    commit, commit_date = git(repo, "log", "-1", "--format=%H %cs").split()
    left_out: Counter[str] = Counter()
    best: dict[tuple[object, ...], dict[str, object]] = {}
    for path in FILES:
        points = json.loads(git(repo, "show", f"{commit}:{path}"))
        for p in points:
            m = p.get("metrics") or {}
            if p.get("disagg") or p.get("is_multinode"):
                left_out["disaggregated or multi-node"] += 1
                continue
            if p.get("spec_method") not in (None, "none"):
                left_out[f"speculative decoding ({p['spec_method']})"] += 1
                continue
            if p.get("framework") not in ENGINES or p.get("model") not in MODELS:
                left_out[f"engine/model not modelled ({p.get('framework')}/{p.get('model')})"] += 1
                continue
            need = ("tput_per_gpu", "median_ttft", "median_tpot")
            if any(not isinstance(m.get(k), int | float) or m[k] <= 0 for k in need):
                left_out["missing metric"] += 1
                continue
            tp, ep = int(p["decode_tp"]), int(p["decode_ep"])
            dp = bool(p["decode_dp_attention"])
            cfg = (p["hardware"], p["framework"], p["model"], p["precision"], tp, ep, dp)
            cfg += (p["isl"], p["osl"], p["conc"], str(p["date"]) >= SPLIT_DATE)
            row = {
                "source": "SemiAnalysis InferenceX (API fixture of the InferenceX-app)",
                "source_repo": name,
                "source_file": path,
                "source_commit": commit,
                "snapshot_date": commit_date,
                "run_url": p.get("run_url") or "",
                "date": p["date"],
                "submitter": "SemiAnalysis",
                "system": f"{p['hardware']} x{tp} {p['framework']}",
                "hardware": p["hardware"],
                # one TP group: the source's num_decode_gpu reads tp x ep on some
                # single-node points (16 for TP4 EP4), but their tput_per_gpu is over tp
                # GPUs (concurrency / TPOT / tp x 2 matches it within 7%)
                "accelerator_count": tp,
                "engine": ENGINES[p["framework"]],
                "engine_version": version_of(p.get("image")),
                "model": MODELS[p["model"]],
                "precision": p["precision"],
                "tp": tp,
                "ep": ep,
                "dp_attention": int(dp),
                "isl": int(p["isl"]),
                "osl": int(p["osl"]),
                "concurrency": int(p["conc"]),
                "tput_per_gpu_tok_s": m["tput_per_gpu"],
                "output_tput_per_gpu_tok_s": m.get("output_tput_per_gpu", ""),
                "median_ttft_s": m["median_ttft"],
                "median_tpot_s": m["median_tpot"],
                "p99_ttft_s": m.get("p99_ttft", ""),
                "p99_tpot_s": m.get("p99_tpot", ""),
                "median_intvty_tok_s_user": m.get("median_intvty", ""),
            }
            old = best.get(cfg)
            if old is not None:
                left_out["an earlier run of the same configuration (same side of 2026)"] += 1
                if str(old["date"]) >= str(row["date"]):
                    continue
            best[cfg] = row
    rows = sorted(
        best.values(),
        key=lambda r: (
            tuple(str(r[k]) for k in ("hardware", "engine", "precision", "date"))
            + (r["tp"], r["isl"], r["osl"], r["concurrency"])
        ),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} points -> {args.out} (from {name} at {commit[:12]}, {commit_date})")
    for why, n in left_out.most_common():
        print(f"  left out {n}: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
