"""Sweeps: a series of benchmark runs over concurrency or request rate, one run directory
per point under one sweep directory, with ``sweep.json`` holding the sweep's
configuration and every point's status (resumable)."""

from accelbench.suites.sweep.core import (
    SWEEP_SCHEMA,
    SaturationRule,
    SweepPlan,
    SweepSet,
    check_resume,
    inferencex_config,
    load_inputs,
    load_sweep,
    plan_values,
    run_sweep,
)

__all__ = [
    "SWEEP_SCHEMA",
    "SaturationRule",
    "SweepPlan",
    "SweepSet",
    "check_resume",
    "inferencex_config",
    "load_inputs",
    "load_sweep",
    "plan_values",
    "run_sweep",
]
