"""The public face of the store: reading run directories (store/reader.py), sets of runs
(store/sets.py), the DuckDB runs store (store/query.py) and the vLLM import
(store/vllm_import.py), importable from one place."""

from accelbench.metrics.values import column_np
from accelbench.store.query import (
    RUN_FIELDS,
    RUNS_SCHEMA,
    open_store,
    query_runs,
    run_row,
    shared_run_ids,
)
from accelbench.store.reader import (
    SCALAR_COLUMNS,
    RunInfo,
    conform_requests,
    dig,
    find_run_dirs,
    is_run_dir,
    iter_runs,
    list_runs,
    load_run,
    summarize_table,
)
from accelbench.store.rundir import write_json_atomic
from accelbench.store.sets import SweepSet, load_inputs, load_sweep
from accelbench.store.vllm_import import import_vllm, import_vllm_files

__all__ = [
    "RUNS_SCHEMA",
    "RUN_FIELDS",
    "SCALAR_COLUMNS",
    "RunInfo",
    "SweepSet",
    "column_np",
    "conform_requests",
    "dig",
    "find_run_dirs",
    "import_vllm",
    "import_vllm_files",
    "is_run_dir",
    "iter_runs",
    "list_runs",
    "load_inputs",
    "load_run",
    "load_sweep",
    "open_store",
    "query_runs",
    "run_row",
    "shared_run_ids",
    "summarize_table",
    "write_json_atomic",
]
