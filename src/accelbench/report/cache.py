"""The prefix-cache section of a report (summary.json ``cache``, metrics/prefixcache.py) in
the words every renderer shares: the terminal's lines, the Markdown and HTML "Prefix cache"
sections. The three hit rates side by side (from the responses, from the server's
counters, the ideal), the gap to the ideal as the headline (docs/WORKLOADS.md: a measured
rate short of the LRU ideal is cache the server lost; an LRU ideal short of the infinite
one is a working set that does not fit), TTFT by turn and by cached share, the sessions.
Plain text: each renderer escapes it for its medium."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from accelbench.metrics.format import fixed
from accelbench.metrics.prefixcache import CacheSection, TurnBin

# The hit-rate table: one row per run (a sweep's point), the registry's cache figures.
CACHE_HEAD = ["point", "hit rate (responses)", "said", "hit rate (server)", "ideal (infinite)",
              "ideal (LRU)", "gap to ideal"]  # fmt: skip
BIN_HEAD = ["by", "bin", "n", "TTFT p50 (ms)", "TTFT p90 (ms)", "hit rate"]


def pct(x: float | None) -> str:
    """A share as a percentage to one decimal (``n/a`` when unknown)."""
    return "n/a" if x is None else f"{100 * x:.1f}%"


def gap_text(gap_pp: float | None) -> str:
    """The gap to the ideal in points, signed (``n/a`` when unknown)."""
    return "n/a" if gap_pp is None else f"{gap_pp:+.1f} points"


def cache_of(summary: Mapping[str, Any] | None) -> CacheSection | None:
    """A run summary's ``cache`` section, or None (no session, prefix or cached-token
    structure in the run, or a summary that predates it)."""
    c = summary.get("cache") if isinstance(summary, Mapping) else None
    return cast(CacheSection, c) if isinstance(c, Mapping) else None


def _ms(x: float | None) -> str:
    return fixed(x, 2)


def headline(c: CacheSection) -> str:
    """The three hit rates side by side and the gap to the ideal, one line."""
    if c["ideal_infinite"] is None:  # no structure to reuse: what the server said, alone
        return (f"prefix cache: {pct(c['hit_rate'])} of prompt tokens served from it "
                f"({c['reported']}/{c['requests']} responses said)")  # fmt: skip
    cap = c["capacity_tokens"]
    ideal = f"ideal {pct(c['ideal_infinite'])} (infinite cache)"
    if c["ideal_lru"] is not None:
        ideal += f" / {pct(c['ideal_lru'])} (LRU of {cap or 0:,} tokens)"
    gap = "" if c["gap_pp"] is None else f"; gap to the ideal {gap_text(c['gap_pp'])}"
    return (
        f"prefix cache (blocks of {c['block_size']} tokens): hit rate {pct(c['hit_rate'])} "
        f"from the responses ({c['reported']}/{c['requests']} said), "
        f"{pct(c['hit_rate_server'])} from the server's counters, {ideal}{gap}"
    )


def _bins(bins: Mapping[str, TurnBin]) -> str:
    return ", ".join(f"{k}: {_ms(b['ttft_ms_p50'])} ms (n {b['n']})" for k, b in bins.items())


def sessions_text(c: CacheSection) -> str | None:
    ss = c["sessions"]
    if ss is None:
        return None
    stopped = ss.get("stopped") or 0
    return (
        f"sessions: {ss['n']}, {ss['completed']} completed, {ss['ended_early']} ended early"
        + (f", {stopped} stopped by the run's stop" if stopped else "")
        + f"; time to finish p50 {_ms(cast(float | None, ss['time_to_finish_s'].get('p50')))} s"
    )


def cache_lines(c: CacheSection) -> list[str]:
    """The section in a few lines (the terminal's, and the Markdown's list): the headline,
    TTFT p50 by turn and by cached share, the sessions."""
    lines = [headline(c)]
    if c["by_turn"]:
        lines.append("  TTFT p50 by turn: " + _bins(c["by_turn"]))
    if c["by_cached_share"]:
        lines.append("  TTFT p50 by cached share: " + _bins(c["by_cached_share"]))
    if (s := sessions_text(c)) is not None:
        lines.append("  " + s)
    return lines


def cache_row(label: str, c: CacheSection) -> list[str]:
    """One row under :data:`CACHE_HEAD`."""
    return [label, pct(c["hit_rate"]), f"{c['reported']}/{c['requests']}",
            pct(c["hit_rate_server"]), pct(c["ideal_infinite"]), pct(c["ideal_lru"]),
            gap_text(c["gap_pp"])]  # fmt: skip


def bin_rows(c: CacheSection) -> list[list[str]]:
    """TTFT by turn and by cached share, rows under :data:`BIN_HEAD`."""
    rows = []
    for by, bins in (("turn", c["by_turn"]), ("cached share", c["by_cached_share"])):
        for k, b in bins.items():
            rows.append([by, k, str(b["n"]), _ms(b["ttft_ms_p50"]), _ms(b["ttft_ms_p90"]),
                         pct(b["hit_rate"])])  # fmt: skip
    return rows
