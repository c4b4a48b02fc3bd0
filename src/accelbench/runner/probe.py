"""The start-up test request, retried: one fault (a 503 while the server warms up, a
dropped connection) must not abort a run, but a server that keeps failing must stop it
with one line saying why."""

from __future__ import annotations

import time
from collections.abc import Callable

from accelbench.errors import AccelbenchError
from accelbench.metrics.records import ErrorKind, RequestRecord
from accelbench.urls import Endpoint

# Waits between tries: 5 tries over 7.5 s.
PROBE_DELAYS_S = (0.5, 1.0, 2.0, 4.0)
# Failures a retry cannot cure: the request itself is wrong (model, auth, body).
NOT_RETRIED = frozenset({ErrorKind.HTTP_4XX, ErrorKind.CLIENT_EXCEPTION})


def probe_with_retry(
    send: Callable[[], RequestRecord],
    url: str | Endpoint,
    *,
    delays: tuple[float, ...] | None = None,
    log: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> RequestRecord:
    """Call ``send`` until its record is ok, waiting ``delays`` (default
    ``PROBE_DELAYS_S``) between tries;
    raise AccelbenchError naming the last failure when every try failed."""
    delays = PROBE_DELAYS_S if delays is None else delays
    tries = len(delays) + 1
    for i in range(tries):
        rec = send()
        if rec.ok:
            return rec
        if rec.error_kind in NOT_RETRIED or i == tries - 1:
            break
        if log is not None:
            log(
                f"test request failed ({rec.error_kind}: {rec.error}); "
                f"retrying in {delays[i]:g} s ({i + 2}/{tries})"
            )
        sleep(delays[i])
    n = i + 1
    tried = "once" if n == 1 else f"{n} times over {sum(delays[: n - 1]):g} s"
    raise AccelbenchError(
        f"a test request to {Endpoint.parse(url).display} failed ({rec.error_kind}: {rec.error}); tried {tried}"
    )
