"""The report's suite sections: what a suite's view gives the report, and the contract
a view implements (docs/RESULTS.md).

A suite (stress, shadow, MLPerf) keeps its view beside the code that writes its files
(``suites/<suite>/view.py``); the view reads the suite's documents and returns a
:class:`SuiteView` of plain-text cells and aggregated charts, which the HTML and
Markdown renderers draw as they are. The report reads no suite's files itself: the CLI
hands it the sections (:class:`SuiteSection`) to look for. A damaged file never raises:
it becomes one warning line of its section.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from accelbench.errors import AccelbenchError
from accelbench.metrics.format import sig
from accelbench.metrics.verdict import Verdict
from accelbench.report.verdicts import HEAD, cells
from accelbench.store.reader import RunInfo

MAX_CHART_POINTS = 300  # per series (memory samples of a day-long soak are thinned)


@dataclass
class Table:
    title: str
    head: list[str]
    rows: list[list[str]]
    left: int = 1  # leading text columns (left-aligned in HTML)


@dataclass
class Series:
    name: str
    x: Sequence[float | None]
    y: Sequence[float | None]
    mode: str = "lines"  # lines | markers | lines+markers
    dash: str = "solid"


@dataclass
class Chart:
    title: str
    x_title: str
    y_title: str
    series: list[Series]


@dataclass
class SuiteView:
    kind: str  # stress | shadow | mlperf
    name: str
    path: Path
    title: str
    verdict: str | None = None  # overall: pass/warn/fail, go/no-go/inconclusive, VALID...
    headline: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    text: str | None = None  # LoadGen's summary page, shown as it is
    run: RunInfo | None = None


class SuiteSection(Protocol):
    """What a suite's view implements for the report."""

    kind: str  # stress | shadow | mlperf
    also_a_run: bool  # its directory is an ordinary run too (reported as a point as well)

    def detect(self, path: Path) -> bool:
        """Whether ``path`` is this suite's directory (by its files)."""
        ...

    def fill(self, path: Path, view: SuiteView) -> None:
        """Fill the section from the directory's documents; a damaged document raises
        AccelbenchError (DocumentError), which becomes the section's warning line."""
        ...

    def point_tag(self, run: RunInfo) -> str | None:
        """A tag for a run's point label (``MLPerf VALID``), or None."""
        ...


def find_section(path: Path, sections: Sequence[SuiteSection]) -> SuiteSection | None:
    """The section whose directory ``path`` is, or None."""
    if not path.is_dir():
        return None
    return next((s for s in sections if s.detect(path)), None)


def load_section(path: Path, section: SuiteSection) -> SuiteView:
    """The section of one suite directory; what cannot be read is one warning line."""
    kind = section.kind
    view = SuiteView(kind, path.name, path, f"{kind}: {path.name}")
    try:
        section.fill(path, view)
    except AccelbenchError as exc:
        msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        view.warnings.append(f"{kind} directory malformed: {msg}")
    except OSError as exc:
        view.warnings.append(f"{kind} directory malformed: {exc.strerror or exc}")
    return view


# -- cells ------------------------------------------------------------------------------
def num(x: object) -> float | None:
    """A finite number, else None."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


def f(x: object, digits: int = 4) -> str:
    """A cell: 4 significant digits, thousands separated from 10,000; '—' when unknown."""
    v = num(x)
    if v is None and not (x is None or isinstance(x, int | float)):
        return str(x)
    return sig(v, digits, inf=None)


def interval(lo: object, hi: object) -> str:
    return f"{f(lo)} to {f(hi)}" if num(lo) is not None and num(hi) is not None else "—"


def thin(n: int) -> range:
    """Indexes of at most MAX_CHART_POINTS of n points, evenly spread."""
    return range(0, n, max(1, math.ceil(n / MAX_CHART_POINTS)))


def counts(c: dict[str, int] | None) -> str:
    """Counts by kind (errors by kind, counters) in one cell."""
    if not c:
        return "none"
    return ", ".join(f"{k}: {v}" for k, v in sorted(c.items()))


def verdict_table(verdicts: Sequence[Verdict], title: str) -> Table:
    """The verdicts, each drawn as every report draws one (report/verdicts.py)."""
    return Table(title, list(HEAD), [cells(v) for v in verdicts], left=3)
