"""The contract every live telemetry source follows.

A source has a ``name``, a ``probe()`` that returns ``None`` when it works or a reason
when it does not (it never raises for a missing library, driver or device), a
``sample(t_ns)`` that returns schema rows, and ``close()``. A failing call inside
``sample`` leaves that column null; it does not lose the row. ``lost()`` says what the
latest sample could not read (a replayed capture's ``Capture.lost``, a vendor tool's
reading that is not a number or not plausible; none for a library source): the monitor
makes its verdict unknown with each as a reason.
"""

from __future__ import annotations

import abc

from accelbench.gpu.values import call
from accelbench.telemetry.schema import Row


class Source(abc.ABC):
    """Base class: see the module docstring."""

    name = "source"

    @abc.abstractmethod
    def probe(self) -> str | None:
        """None when the source works here, else the reason it does not."""

    @abc.abstractmethod
    def sample(self, t_ns: int) -> list[Row]:
        """One row per device (common schema), stamped ``t_ns``."""

    def lost(self) -> list[str]:
        """What the latest :meth:`sample` could not read (see the module docstring)."""
        return []

    def close(self) -> None:
        return None


def close_sources(sources: list[Source]) -> None:
    """Close every source; a failing close must not hide the others or the results."""
    for src in sources:
        call(src.close)
