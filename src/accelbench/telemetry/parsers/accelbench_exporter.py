"""accelbench's own ``/metrics`` scrapes (``accelbench monitor``'s exporter): read back
into the rows they were made from.

The names are the exporter's own tables (:mod:`accelbench.telemetry.exporter`), inverted:
one definition of what each metric holds. Counters are exposed with ``_total`` (and a
``_created`` sample, which is not a reading); one row per GPU (its ``vendor``, ``model``,
``device``, ``bus_id`` and ``uuid`` labels), one host row, one server row per ``engine``.
The health series (``accelbench_health_*``, ``accelbench_source_up``) are the monitor's
verdict, not samples: they are named in ``notes``. Throttle reasons and the throttle
bitmask are not exported, so a scrape's rows carry the throttle counters only.
"""

from __future__ import annotations

from accelbench.telemetry.exporter import GPU_METRICS, HOST_METRICS, SERVER_METRICS
from accelbench.telemetry.parsers.prometheus import finite, prometheus_samples, store
from accelbench.telemetry.schema import KIND_GPU, KIND_HOST, KIND_SERVER, Row, new_row, plausible

PREFIX = "accelbench_"
SOURCE = "accelbench-exporter"
# (name, extra labels) -> column, from the exporter's tables
_GPU: dict[tuple[str, frozenset[tuple[str, str]]], str] = {
    (PREFIX + name, frozenset(extra.items())): col for name, _, col, _, extra in GPU_METRICS
}
_HOST = {PREFIX + name: col for name, _, col, _ in HOST_METRICS}
_SERVER = {PREFIX + name: col for name, _, col, _ in SERVER_METRICS}
_GPU_EXTRA = {k for _, _, _, _, extra in GPU_METRICS for k in extra}
_VERDICT = (PREFIX + "health_", PREFIX + "source_up")


def is_accelbench_scrape(names: list[str]) -> bool:
    """Whether sample names are the exporter's (``accelbench_gpu_`` / ``_host_`` /
    ``_server_`` / ``_health_``)."""
    return any(
        n.startswith(tuple(PREFIX + k for k in ("gpu_", "host_", "server_", "health_")))
        for n in names
    )


def parse_accelbench_prometheus(
    text: str,
    t_ns: int | None = None,
    lost: list[str] | None = None,
    notes: list[str] | None = None,
) -> list[Row]:
    """An ``accelbench monitor`` ``/metrics`` scrape -> its GPU, host and server rows."""
    gpus: dict[tuple[str, ...], Row] = {}
    host: Row | None = None
    servers: dict[str, Row] = {}
    verdict = ""  # the monitor's own verdict, if the scrape carries one
    for name, labels, value in prometheus_samples(text, lost, notes):
        if name.endswith("_created"):
            continue
        if name.endswith("_total"):
            name = name[: -len("_total")]
        if name.startswith(_VERDICT):
            if name == PREFIX + "health_verdict" and value == 1.0:
                verdict = labels.get("verdict") or verdict
            verdict = verdict or "in it"
            continue
        if not finite(name, value, lost):  # NaN: no reading; +-Inf: lost
            continue
        extra = frozenset((k, v) for k, v in labels.items() if k in _GPU_EXTRA)
        col = _GPU.get((name, extra))
        if col is not None:
            key = tuple(labels.get(k, "") for k in ("vendor", "model", "device", "bus_id", "uuid"))
            row = gpus.get(key)
            if row is None:
                dev = labels.get("device", "")
                row = gpus[key] = new_row(
                    t_ns=t_ns,
                    source=SOURCE,
                    kind=KIND_GPU,
                    vendor=labels.get("vendor") or None,
                    model=labels.get("model") or None,
                    device_index=int(dev) if dev.isdigit() else len(gpus),
                    bus_id=labels.get("bus_id") or None,
                    uuid=labels.get("uuid") or None,
                )
            store(row, col, value)
        elif name in _HOST:
            if host is None:
                host = new_row(t_ns=t_ns, source=SOURCE, kind=KIND_HOST)
            store(host, _HOST[name], value)
        elif name in _SERVER:
            engine = labels.get("engine", "")
            srv = servers.get(engine)
            if srv is None:
                srv = servers[engine] = new_row(
                    t_ns=t_ns, source=SOURCE, kind=KIND_SERVER, engine=engine or None
                )
            store(srv, _SERVER[name], value)
    if verdict and notes is not None:
        notes.append(
            f"the monitor's health verdict when scraped ({verdict}) is not a sample: "
            "left out (the rows are judged again)"
        )
    rows = [*gpus.values(), *([host] if host is not None else []), *servers.values()]
    if not rows and lost is not None:
        lost.append("no accelbench_gpu_/host_/server_ samples in the scrape (cut short?)")
    return plausible(rows, lost)
