"""Section 2 of side_by_side.py: shadow proxy intrusion.

What a caller sees through accelbench's shadow proxy, against what it sees through
nginx's ``mirror`` (the usual way to copy live traffic to a second server) and through
haproxy (a plain extra hop, no copy), with no hop at all (``direct``) as the floor.

The primary and the candidate are reference servers (``accelbench serve reference``,
TTFT 20 ms, 5 ms between tokens; the primary logs its ground truth). Three candidates:
(a) identical, (b) 10x slower (TTFT 200 ms, 50 ms between tokens), (c) dead (a port
nothing listens on). nginx (Debian's, ``worker_processes auto``) and haproxy run as this
benchmark's own processes on 127.0.0.1 ports, with config files written into the
workdir; they are installed with apt-get when missing (root), and a contender that
cannot be installed or started is a row saying why.

Every server and proxy stays up for the whole section (one accelbench proxy and one
nginx ``server`` block per candidate). The caller is ``accelbench run`` (1 worker,
closed loop, S streams, 16 tokens per response), a fresh process per run. Per round
and stream count the runs go direct, haproxy, then accelbench and nginx for each
candidate, the order rotated from round to round; after each run the section waits
for the slow candidate's copies to end so they do not land in the next run.

Figures per run, from the caller's records (``requests.parquet``): the p99 and p50 of
TTFT (first chunk minus send, the caller's clock), the p99 of the gaps between chunks
(every gap of every request), and, from the primary's ground truth, the p99 of the
caller's first chunk minus the primary's first write (the delay of the hop itself);
and the p50 of E2E (a hop that holds a response's end back, as nginx's ``mirror`` does
until its copy is done, slows the closed-loop caller, and so lowers the load on it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sbs_common import (
    ROOT,
    Row,
    busy_between,
    cc,
    cell,
    load_line,
    log,
    machine_state,
    on_cpus,
    ratio_cell,
    start_reference,
)

TODO: str | None = None

# Before/after: SBS_PROXY_BEFORE_SRC=<another tree's src/> adds that tree's proxy as
# "accelbench@before (case)", interleaved with the rest (how the fix was measured).
BEFORE_SRC = (
    Path(os.environ["SBS_PROXY_BEFORE_SRC"]) if os.environ.get("SBS_PROXY_BEFORE_SRC") else None
)
PRIMARY = ("--ttft-ms", "20", "--itl-ms", "5")
CASES: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "a": ("identical candidate", PRIMARY),
    "b": ("candidate 10x slower", ("--ttft-ms", "200", "--itl-ms", "50")),
    "c": ("dead candidate", None),
}
OSL = 16
ISL = 32
FIGURES = ("ttft_p99_ms", "gap_p99_ms", "req_p99_ms", "hop_p99_ms", "e2e_p50_ms", "hop_cpu_us")
SLOW_COPY_S = 0.2 + OSL * 0.05  # how long one copy to the slow candidate takes


# -- installing and starting the peers ----------------------------------------------------
def ensure_apt(exe: str, packages: list[str], timeout_s: float) -> tuple[str | None, str]:
    """The path of ``exe``, installed with apt-get (the first of ``packages`` that
    installs) when missing; (path, "") or (None, why)."""
    found = shutil.which(exe) or (f"/usr/sbin/{exe}" if Path(f"/usr/sbin/{exe}").exists() else None)
    if found:
        return found, ""
    if not shutil.which("apt-get"):
        return None, f"{exe} is not installed and there is no apt-get"
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    why = ""
    for update in (False, True):
        if update:
            subprocess.run(["apt-get", "update"], capture_output=True, env=env, timeout=timeout_s)
        for pkg in packages:
            log(f"apt-get install {pkg}")
            try:
                p = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", pkg],
                                   capture_output=True, env=env, timeout=timeout_s)  # fmt: skip
            except (OSError, subprocess.TimeoutExpired) as exc:
                why = f"apt-get install {pkg}: {exc}"
                continue
            found = shutil.which(exe) or (
                f"/usr/sbin/{exe}" if Path(f"/usr/sbin/{exe}").exists() else None
            )
            if p.returncode == 0 and found:
                return found, ""
            err = p.stderr.decode(errors="replace").strip().splitlines()
            why = f"apt-get install {pkg} failed: {(err or ['exit ' + str(p.returncode)])[-1]}"
    return None, why


def nginx_conf(wd: Path, primary: int, listen: dict[str, int], cands: dict[str, int]) -> Path:
    """nginx in the foreground, one ``server`` per candidate: every request to the
    primary (``proxy_buffering off``: SSE streams through), a ``mirror`` copy with its
    body to the candidate; kept-alive upstream connections both ways."""
    tmp = wd / "nginx-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    up = [f"  upstream primary {{ server 127.0.0.1:{primary}; keepalive 1024; }}"]
    servers = []
    for case, port in listen.items():
        up.append(f"  upstream cand_{case} {{ server 127.0.0.1:{cands[case]}; keepalive 1024; }}")
        servers.append(f"""  server {{
    listen 127.0.0.1:{port} backlog=4096;
    keepalive_requests 1000000;
    location / {{
      mirror /__mirror;
      mirror_request_body on;
      proxy_pass http://primary;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 600s;
    }}
    location = /__mirror {{
      internal;
      proxy_pass http://cand_{case}$request_uri;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_connect_timeout 5s;
      proxy_read_timeout 120s;
    }}
  }}""")
    conf = wd / "nginx.conf"
    conf.write_text(f"""daemon off;
master_process on;
worker_processes auto;
pid {wd / "nginx.pid"};
error_log {wd / "nginx-error.log"} error;
events {{ worker_connections 16384; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
{chr(10).join(up)}
{chr(10).join(servers)}
}}
""")
    return conf


def haproxy_conf(wd: Path, primary: int, listen: int) -> Path:
    conf = wd / "haproxy.cfg"
    conf.write_text(f"""global
  maxconn 4096
defaults
  mode http
  option http-no-delay  # SSE: every chunk sent at once (no MSG_MORE holding it back)
  timeout connect 5s
  timeout client 600s
  timeout server 600s
frontend caller
  bind 127.0.0.1:{listen}
  default_backend primary
backend primary
  server p1 127.0.0.1:{primary} maxconn 4096
""")
    return conf


def _up(proc: subprocess.Popen, url: str, what: str, timeout_s: float = 30.0) -> str:
    """'' once ``url`` answers, else why not."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            return f"{what} exited with {proc.returncode}"
        with contextlib.suppress(OSError):
            cc.http_get(url, timeout=1)
            return ""
        time.sleep(0.1)
    return f"{what} did not answer {url} within {timeout_s:.0f} s"


def _start(cmd: list[str], log_path: Path, env: dict[str, str] | None = None,
           cpus: set[int] | None = None) -> subprocess.Popen:  # fmt: skip
    logf = open(log_path, "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})}, preexec_fn=on_cpus(cpus))  # fmt: skip


def pin_sets(pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """``--pin-hop``: (the CPUs of the caller and the servers, the CPUs of the hop under
    test). The hop gets the last CPU this process may use, everything else the rest, so
    that every proxy has one core to itself, as in production where it does not share
    the server's cores; without it, (None, None): the scheduler decides."""
    if not pin:
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin-hop needs at least 2 CPUs")
    return set(cpus[:-1]), {cpus[-1]}


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# -- one run of the caller -----------------------------------------------------------------
def _gt_first_writes(gt: Path, offset: int) -> tuple[dict[str, int], dict[str, int], int]:
    """request_id -> the primary's first token write, and -> its receipt of the request
    (``t_recv``, its loop's clock), from the ground truth lines written after ``offset``;
    and the new offset."""
    first: dict[str, int] = {}
    recv: dict[str, int] = {}
    with open(gt, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        d = json.loads(line)
        if d.get("token_times"):
            first[d["request_id"]] = d["token_times"][0]
            recv[d["request_id"]] = d["t_recv"]
    return first, recv, offset + end


def caller_run(url: str, streams: int, n: int, seed: int, wd: Path, gt: Path,
               timeout_s: float, tokenizer: Path,
               cpus: set[int] | None = None) -> dict[str, Any]:  # fmt: skip
    """One ``accelbench run`` at ``url``: its figures (ms) or a status saying why not."""
    import numpy as np
    import pyarrow.parquet as pq

    wd.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "accelbench", "run", "--url", url, "-c", str(streams),
           "-n", str(n), "--warmup", str(streams), "--isl", str(ISL), "--osl", str(OSL),
           "--seed", str(seed), "--workers", "1", "--quiet", "--no-telemetry",
           "--tokenizer", str(tokenizer),
           "-o", str(wd / "run")]  # fmt: skip
    res: dict[str, Any] = {"command": cmd}
    gt_off = gt.stat().st_size
    t0 = time.monotonic()
    try:
        with open(wd / "caller.log", "wb") as f:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s,
                               preexec_fn=on_cpus(cpus))  # fmt: skip
        res["returncode"] = p.returncode
    except subprocess.TimeoutExpired:
        res["status"] = f"the caller ran over {timeout_s:.0f} s"
        return res
    res["seconds"] = round(time.monotonic() - t0, 1)
    if p.returncode != 0:
        tail = (wd / "caller.log").read_bytes()[-800:].decode("utf-8", "replace").strip()
        res["status"] = f"caller exit {p.returncode}: {tail.splitlines()[-1:] if tail else ''}"
        return res
    pf = next((wd / "run").rglob("requests.parquet"))
    cols = ["request_id", "ok", "warmup", "t_send", "t_first", "t_done", "chunk_times"]
    rows = [r for r in pq.read_table(pf, columns=cols).to_pylist() if not r["warmup"]]
    good = [r for r in rows if r["ok"] and r["t_first"]]
    if len(good) < 0.99 * n:
        res["status"] = f"only {len(good)} of {n} requests succeeded"
        return res
    ttft = np.array([(r["t_first"] - r["t_send"]) / 1e6 for r in good])
    gaps = np.concatenate([np.diff(np.asarray(r["chunk_times"], dtype=np.int64)) / 1e6
                           for r in good if len(r["chunk_times"]) > 1])  # fmt: skip
    first, recv, _ = _gt_first_writes(gt, gt_off)
    hop = np.array([(r["t_first"] - first[r["request_id"]]) / 1e6 for r in good
                    if r["request_id"] in first])  # fmt: skip
    # the other leg: the request's way in, caller's send to the primary's receipt
    req = np.array([(recv[r["request_id"]] - r["t_send"]) / 1e6 for r in good
                    if r["request_id"] in recv])  # fmt: skip
    res.update(
        status="ok", requests=len(good),
        ttft_p50_ms=float(np.percentile(ttft, 50)), ttft_p99_ms=float(np.percentile(ttft, 99)),
        gap_p50_ms=float(np.percentile(gaps, 50)), gap_p99_ms=float(np.percentile(gaps, 99)),
        hop_p99_ms=float(np.percentile(hop, 99)) if hop.size else None,
        req_p99_ms=float(np.percentile(req, 99)) if req.size else None,
        # a hop that holds a response's end back (nginx's mirror until the copy is
        # done) slows the closed-loop caller: fewer requests, less load, lower TTFT
        e2e_p50_ms=float(np.median([(r["t_done"] - r["t_send"]) / 1e6 for r in good])),
        hop_matched=int(hop.size),
    )  # fmt: skip
    shutil.rmtree(wd / "run", ignore_errors=True)
    return res


def tree_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of ``pid`` and every process under it (accelbench's
    candidate process, nginx's workers), or None without a hop (direct) or once gone."""
    import psutil

    if pid is None:
        return None
    try:
        root = psutil.Process(pid)
        total = 0.0
        for p in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
        return total
    except psutil.Error:
        return None


# -- the section ---------------------------------------------------------------------------
class Stack:
    """The servers and proxies of the section, up for its whole length."""

    def __init__(self, wd: Path, install_timeout: float, pin: bool = False) -> None:
        self.wd = wd
        self.rest_cpus, self.hop_cpus = pin_sets(pin)
        self.procs: list[subprocess.Popen] = []
        self.urls: dict[str, str] = {}  # contender -> URL
        self.why_not: dict[str, str] = {}  # contender -> why it has no figures
        self.pids: dict[str, int] = {}  # contender -> its hop's process (its tree counted)
        self.gt = wd / "primary_ground_truth.jsonl"
        self.install_timeout = install_timeout
        # the caller counts tokens itself (one ASCII character = one token, as the
        # reference server does): no /tokenize requests through the hop under test
        self.tokenizer = cc.make_tokenizer_dir(wd / "tokenizer")

    def start(self) -> None:
        wd = self.wd
        primary = cc.free_port()
        self.procs.append(start_reference(primary, self.gt, wd, PRIMARY, self.rest_cpus))
        self.urls["direct"] = f"http://127.0.0.1:{primary}"
        cands: dict[str, int] = {}
        for case, (_, extra) in CASES.items():
            cands[case] = cc.free_port()
            if extra is not None:
                (wd / f"cand-{case}").mkdir(exist_ok=True)
                self.procs.append(start_reference(cands[case], wd / f"cand-{case}" / "gt.jsonl",
                                                  wd / f"cand-{case}", extra,
                                                  self.rest_cpus))  # fmt: skip
        # accelbench's proxy, one per candidate (and the tree of BEFORE_SRC's, if given)
        for tag, src in (("", ROOT / "src"), ("@before", BEFORE_SRC)):
            if src is None:
                continue
            for case in CASES:
                port = cc.free_port()
                name = f"accelbench{tag} ({case})"
                proc = _start([sys.executable, "-m", "accelbench", "shadow", "proxy", "--listen",
                               f"127.0.0.1:{port}", "--baseline", self.urls["direct"],
                               "--candidate", f"http://127.0.0.1:{cands[case]}",
                               "--out", str(wd / f"shadow{tag}-{case}")],
                              wd / f"proxy{tag}-{case}.log", {"PYTHONPATH": str(src)},
                              self.hop_cpus)  # fmt: skip
                self.procs.append(proc)
                self._ready(name, proc, f"http://127.0.0.1:{port}")
        # nginx's mirror, one server block per candidate
        nginx, why = ensure_apt("nginx", ["nginx-light", "nginx"], self.install_timeout)
        ports = {case: cc.free_port() for case in CASES}
        if nginx is None:
            for case in CASES:
                self.why_not[f"nginx ({case})"] = why
        else:
            conf = nginx_conf(wd, primary, ports, cands)
            proc = _start([nginx, "-c", str(conf), "-p", str(wd)], wd / "nginx.log",
                          cpus=self.hop_cpus)  # fmt: skip
            self.procs.append(proc)
            for case in CASES:
                self._ready(f"nginx ({case})", proc, f"http://127.0.0.1:{ports[case]}")
        haproxy, why = ensure_apt("haproxy", ["haproxy"], self.install_timeout)
        if haproxy is None:
            self.why_not["haproxy"] = why
        else:
            port = cc.free_port()
            proc = _start([haproxy, "-db", "-f", str(haproxy_conf(wd, primary, port))],
                          wd / "haproxy.log", cpus=self.hop_cpus)  # fmt: skip
            self.procs.append(proc)
            self._ready("haproxy", proc, f"http://127.0.0.1:{port}")

    def _ready(self, name: str, proc: subprocess.Popen, url: str) -> None:
        why = _up(proc, url + "/health", name)
        if why:
            self.why_not[name] = why
        else:
            self.urls[name] = url
            self.pids[name] = proc.pid

    def stop(self) -> None:
        for proc in reversed(self.procs):  # proxies first (accelbench's: SIGINT ends it)
            _stop(
                proc, signal.SIGINT if "shadow" in " ".join(map(str, proc.args)) else signal.SIGTERM
            )


def contenders_order(rnd: int) -> list[str]:
    """direct, haproxy, then accelbench and nginx per candidate; rotated per round."""
    order = ["direct", "haproxy"]
    for case in CASES:
        order += [f"accelbench ({case})", f"nginx ({case})"]
        if BEFORE_SRC is not None:
            order.append(f"accelbench@before ({case})")
    k = rnd % len(order)
    return order[k:] + order[:k]


def _added(rows: dict[str, Row], name: str, figs: dict[str, list[float | None]]) -> list[float]:
    """Per round: the contender's p99 TTFT minus direct's (ms)."""
    return [x - d for x, d in zip(figs[name], figs["direct"], strict=False)
            if x is not None and d is not None]  # fmt: skip


def goal_a_verdict(acc: list[float | None], ngx: list[float | None]) -> tuple[str, list[float]]:
    """Goal (a), round by round: accelbench's added p99 TTFT minus nginx's (the same as
    their p99 TTFTs' difference: direct's cancels) in every round both have. Met when it
    is <= 0 in every such round, NOT met when > 0 in every one; otherwise the rounds
    disagree and the run shows neither (a median of three differences that straddle
    zero is a coin's side, not a verdict)."""
    diffs = [a - b for a, b in zip(acc, ngx, strict=False) if a is not None and b is not None]
    if not diffs:
        return "no round with both", diffs
    k = sum(d <= 0 for d in diffs)
    if k == len(diffs):
        return f"met in every round ({k} of {k})", diffs
    if k == 0:
        return f"NOT met in any round (0 of {len(diffs)})", diffs
    return f"not shown either way: no worse in {k} of {len(diffs)} rounds", diffs


def table(streams: int, n: int, per: dict[str, dict[str, list[Any]]], why_not: dict[str, str],
          max_spread: float) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """The markdown of one stream count, and its goals."""
    names = list(per)
    ttft = {k: per[k]["ttft_p99_ms"] for k in names}
    rows = {k: Row(k, ttft[k], per[k]["status"], why_not.get(k, "")) for k in names}
    out = [f"**2. Shadow proxy intrusion, {streams} streams, {n} requests per run "
           f"({OSL} tokens each): the caller's TTFT and chunk gaps**", "",
           "| contender | caller p99 TTFT ms | added p99 TTFT over direct, ms (per round) "
           "| p99 chunk gap ms | p99 primary's receipt - caller's send, ms "
           "| p99 first chunk - primary's first write, ms | p50 E2E ms "
           "| hop CPU µs per request | good rounds | note |",
           "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    raw: dict[str, Any] = {}
    for k in names:
        good = [x for x in ttft[k] if x is not None]
        added = _added(rows, k, ttft) if k != "direct" else []
        gaps = [x for x in per[k]["gap_p99_ms"] if x is not None]
        hop = [x for x in per[k]["hop_p99_ms"] if x is not None]
        req = [x for x in per[k]["req_p99_ms"] if x is not None]
        e2e = [x for x in per[k]["e2e_p50_ms"] if x is not None]
        cpu = [x for x in per[k]["hop_cpu_us"] if x is not None]
        bad = sorted({s for s in per[k]["status"] if s != "ok"})
        note = "; ".join(filter(None, [why_not.get(k, ""), *bad]))[:300]
        out.append(f"| {k} | {cell(good, '.1f')} | {cell(added, '+.2f') if added else '-'} "
                   f"| {cell(gaps, '.1f')} | {cell(req, '.2f')} | {cell(hop, '.2f')} "
                   f"| {cell(e2e, '.0f')} | {cell(cpu, '.0f') if cpu else '-'} "
                   f"| {len(good)}/{len(ttft[k])} "
                   f"| {note} |")  # fmt: skip
        raw[k] = {**per[k], "added_p99_ttft_ms": added}
    goals = []

    def ratio(a: str, b: str, spec: str = ".3f") -> str:
        if a not in rows or b not in rows:
            return "-"
        text, info = ratio_cell(rows[a], rows[b], max_spread, spec)
        raw.setdefault("ratios", {})[f"{a} / {b}"] = info
        return text

    add_a = _added(rows, "accelbench (a)", ttft) if "accelbench (a)" in ttft else []
    add_n = _added(rows, "nginx (a)", ttft) if "nginx (a)" in ttft else []
    if add_a and add_n:
        ma, mn = statistics.median(add_a), statistics.median(add_n)
        verdict, diffs = goal_a_verdict(ttft.get("accelbench (a)", []), ttft.get("nginx (a)", []))
        raw["goal_a"] = {"verdict": verdict, "accelbench_minus_nginx_ms": diffs}
        goals.append(f"(a) added p99 TTFT, accelbench {ma:+.2f} ms against nginx {mn:+.2f} ms "
                     f"(medians over rounds); accelbench - nginx per round "
                     f"[{', '.join(f'{d:+.2f}' for d in diffs)}] ms: {verdict}; p99 TTFT "
                     f"accelbench / nginx {ratio('accelbench (a)', 'nginx (a)')}, accelbench / "
                     f"haproxy {ratio('accelbench (a)', 'haproxy')}")  # fmt: skip
    cpu_rows = {k: Row(k, per[k]["hop_cpu_us"], per[k]["status"]) for k in names}

    def cpu_ratios(other: str, fmt: str) -> list[str]:
        """accelbench's hop CPU per request over ``other``'s, per candidate case: the
        section's steadiest figure (less moved by the host than a p99)."""
        out = []
        for case in CASES:
            now, them = f"accelbench ({case})", f"{other} ({case})"
            if now in cpu_rows and them in cpu_rows:
                text, info = ratio_cell(cpu_rows[now], cpu_rows[them], max_spread, fmt)
                raw.setdefault("ratios", {})[f"{now} / {them} hop CPU"] = info
                out.append(f"({case}) {text}")
        return out

    for other, fmt in (("nginx", ".2f"), ("accelbench@before", ".3f")):
        if rs := cpu_ratios(other, fmt):
            goals.append(f"hop CPU per request accelbench / {other} " + ", ".join(rs))
    for who in ("accelbench", "nginx"):
        for case in ("b", "c"):
            r = ratio(f"{who} ({case})", f"{who} ({'a'})")
            info = raw.get("ratios", {}).get(f"{who} ({case}) / {who} (a)", {})
            rs = info.get("ratios") or []
            verdict = ("" if "refused" in info or not rs else
                       " (within 1 %)" if abs(statistics.median(rs) - 1) <= 0.01 else
                       " (NOT within 1 %)")  # fmt: skip
            goals.append(f"{who} ({case}) / {who} (a) p99 TTFT {r}{verdict}")
    if BEFORE_SRC is not None:
        gap_rows = {k: Row(k, per[k]["gap_p99_ms"], per[k]["status"]) for k in names}
        for c in CASES:
            now, before = f"accelbench ({c})", f"accelbench@before ({c})"
            g, info = ratio_cell(gap_rows[now], gap_rows[before], max_spread, ".3f")
            raw.setdefault("ratios", {})[f"{now} / {before} (chunk gap p99)"] = info
            goals.append(f"{now} / {before}: p99 TTFT {ratio(now, before)}, p99 chunk gap {g}")
    out += ["", "Goals: " + "; ".join(goals) + "."]
    return "\n".join(out), raw


def run(a: argparse.Namespace, wd: Path) -> dict[str, Any]:
    wd.mkdir(parents=True, exist_ok=True)
    # per run: 64 streams x 5 requests, 256 x 2: 16 runs a round, and 3 rounds took 16
    # minutes with 11 contenders at 512 / 768 on the shared 2-core host (load 8-20); quick:
    # about half
    sizes = {64: 192, 256: 256} if a.quick else {64: 320, 256: 512}
    if getattr(a, "proxy_requests", None):
        sizes = dict.fromkeys(sizes, a.proxy_requests)
    pin = bool(getattr(a, "pin_hop", False))
    stack = Stack(wd, a.install_timeout, pin)
    runs: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    texts, tables = [], []
    try:
        stack.start()
        names = contenders_order(0)
        for streams, n in sizes.items():
            per = {k: {f: [] for f in (*FIGURES, "status")}
                   for k in names}  # fmt: skip
            for rnd in range(a.repeat):
                for name in contenders_order(rnd):
                    d = per[name]
                    url = stack.urls.get(name)
                    if url is None:
                        r: dict[str, Any] = {"status": stack.why_not.get(name, "not started")}
                    else:
                        s0 = machine_state()
                        c0 = tree_cpu_s(stack.pids.get(name))
                        log(f"proxy {streams} streams round {rnd + 1}/{a.repeat}: {name} "
                            f"(load {s0['loadavg'][0]})")  # fmt: skip
                        r = caller_run(url, streams, n, rnd, wd / f"{streams}-r{rnd + 1}" /
                                       name.replace(" ", "").strip("()").replace("(", "-"),
                                       stack.gt, a.run_timeout, stack.tokenizer,
                                       stack.rest_cpus)  # fmt: skip
                        r["machine"] = st = busy_between(s0, machine_state())
                        states.append(st)
                        log(f"  {r['status'][:200]}: p99 TTFT {r.get('ttft_p99_ms')} "
                            f"gap {r.get('gap_p99_ms')}")  # fmt: skip
                        if name.endswith("(b)"):
                            time.sleep(SLOW_COPY_S + 0.3)  # the slow copies end first
                        c1 = tree_cpu_s(stack.pids.get(name))
                        if c0 is not None and c1 is not None and r["status"] == "ok":
                            # the hop's own CPU (its copies' included) per request sent
                            r["hop_cpu_us"] = (c1 - c0) / (n + streams) * 1e6
                    ok = r["status"] == "ok"
                    for f in FIGURES:
                        d[f].append(r.get(f) if ok else None)
                    d["status"].append(r["status"][:200])
                    runs.append({"streams": streams, "round": rnd + 1, "contender": name, **r})
            text, raw = table(streams, n, per, stack.why_not, a.max_spread)
            texts.append(text)
            tables.append({"streams": streams, "requests": n, "contenders": raw})
    finally:
        stack.stop()
    counters = {}
    for case in CASES:
        with contextlib.suppress(OSError, ValueError):
            meta = json.loads((wd / f"shadow-{case}" / "shadow.json").read_text())
            counters[case] = meta.get("counters")
    notes = (
        "Contenders: direct (no hop), haproxy (2.6, one extra hop, no copy), accelbench "
        "`shadow proxy` and nginx (`mirror` + `mirror_request_body on`, `proxy_buffering "
        "off`, `worker_processes auto`), each with candidate (a) identical, (b) 10x slower, "
        "(c) dead. Caller: `accelbench run --workers 1 --tokenizer T` (byte-level), closed loop. 'added' is the "
        "contender's p99 TTFT minus direct's in the same round. accelbench's proxy "
        f"counters (copied / dropped / failed): {json.dumps(counters)}."
    )
    if pin:
        notes += (
            f" Pinned (`--pin-hop`): every hop under test (each proxy and the processes it "
            f"starts: accelbench's candidate process, nginx's workers) on CPU "
            f"{sorted(stack.hop_cpus or ())}, the caller and the reference servers on "
            f"{sorted(stack.rest_cpus or ())}."
        )
    return {"markdown": "\n\n".join([*texts, notes, load_line(states)]), "table": tables,
            "runs": runs}  # fmt: skip
