"""The inference server's Prometheus ``/metrics``."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

from accelbench.telemetry.parsers import parse_server_metrics
from accelbench.telemetry.schema import Row
from accelbench.telemetry.sources.base import Source
from accelbench.urls import Endpoint

# A scrape is kilobytes (vLLM's: ~100 KB); a body past this is no scrape.
MAX_SCRAPE_BYTES = 64 << 20
# The whole scrape within this many times the timeout (which bounds each read): a loaded
# server slow to answer is still read, one that never finishes is not.
SCRAPE_DEADLINE_TIMEOUTS = 5


class ScrapeRefused(OSError):
    """A /metrics answer that never ends in time, or is too long to be a scrape."""


def fetch_metrics(url: str, auth: str | None, timeout_s: float) -> str:
    """The body of ``url`` (a /metrics), whole within :data:`SCRAPE_DEADLINE_TIMEOUTS`
    timeouts and at most :data:`MAX_SCRAPE_BYTES`, else :class:`ScrapeRefused`: the
    timeout bounds each read only, so a server that sent a byte a second (or without end)
    held `health`, a run's last scrape and the stress suites' gauges for ever."""
    headers = {"Accept": "text/plain"} | ({"Authorization": auth} if auth else {})
    req = urllib.request.Request(url, headers=headers)
    limit_s = SCRAPE_DEADLINE_TIMEOUTS * timeout_s
    deadline = time.monotonic() + limit_s
    body = bytearray()
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
        while chunk := resp.read1(65536):
            body += chunk
            if len(body) > MAX_SCRAPE_BYTES:
                raise ScrapeRefused(
                    f"{url} sent more than {MAX_SCRAPE_BYTES >> 20} MiB: not a scrape"
                )
            if time.monotonic() > deadline:
                raise ScrapeRefused(f"{url} did not send its whole scrape within {limit_s:g} s")
    return body.decode("utf-8", "replace")


class ServerMetricsSource(Source):
    """The inference server's Prometheus ``/metrics`` (vLLM, SGLang, llama.cpp, TGI)."""

    name = "server"

    def __init__(self, url: str | Endpoint, timeout_s: float = 2.0) -> None:
        # the server's credentials go as a header; self.url (shown) has none
        server = Endpoint.parse(url)
        self.auth = server.auth
        self.url = server.root.removesuffix("/metrics") + "/metrics"
        self.timeout_s = timeout_s
        self._lost: list[str] = []

    def fetch(self) -> str:
        return fetch_metrics(self.url, self.auth, self.timeout_s)

    def probe(self) -> str | None:
        try:
            text = self.fetch()
        except urllib.error.HTTPError as exc:
            hint = " (llama-server needs --metrics)" if exc.code in (404, 501) else ""
            return f"{self.url} answered HTTP {exc.code}{hint}"
        except ScrapeRefused as exc:
            return str(exc)
        except (OSError, ValueError) as exc:
            return f"{self.url} unreachable ({exc})"
        try:
            rows = parse_server_metrics(text)
        except Exception as exc:
            return f"{self.url} is not a Prometheus scrape ({exc})"
        if not rows:
            return f"{self.url} has no vLLM, SGLang, llama.cpp or TGI metrics"
        return None

    def sample(self, t_ns: int) -> list[Row]:
        """Raises when the scrape fails: the caller (``collect``) counts it, so a run or the
        monitor knows the server's samples were lost."""
        lost: list[str] = []  # a reading that is not a number or not plausible
        rows = parse_server_metrics(self.fetch(), t_ns=t_ns, lost=lost, read_only=True)
        self._lost = [f"{self.name}: {x}" for x in lost]
        for r in rows:
            r["wall_ns"] = time.time_ns()
        return rows

    def lost(self) -> list[str]:
        """What the latest sample left out (``schema.plausible``): -5 requests waiting,
        an infinite KV-cache usage; health and monitor then say unknown, never pass."""
        return list(self._lost)
