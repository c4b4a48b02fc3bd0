"""Load from many hosts as one run: load workers as Ray actors (``accelbench run --ray``).

Nothing here imports Ray at module level except ``ray_workers``, which only the Ray
path of ``runner/benchmark.py`` imports; a run without ``--ray`` never loads Ray.
"""

from __future__ import annotations

from importlib.util import find_spec

from accelbench.errors import UsageError

RAY_MISSING = "--ray needs Ray, which is not installed here: pip install 'accelbench[ray]'"


def require_ray() -> None:
    """One clear line (bad usage, exit 2) where ``--ray`` is asked for and Ray is not
    installed: the extra is optional. Looked up, not imported (Ray takes seconds to
    import, and the run imports it where it joins the cluster)."""
    if find_spec("ray") is None:
        raise UsageError(RAY_MISSING)
