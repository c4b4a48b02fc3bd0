"""The query sample library: the prompts LoadGen's queries point at.

Either synthetic (accelbench's exact-length prompts in the server's own tokens, via
``workload.build_plan``) or a dataset in the shape of MLPerf's LLM sets. The reference
implementations (mlcommons/inference, language/llama2-70b/processorca.py and
language/llama3.1-405b/dataset.py) store a pandas DataFrame in a pickle with, per sample:
``input`` (the prompt text, chat template applied), ``tok_input`` (its token ids),
``tok_input_length`` / ``tok_input_len``, and the reference answer as ``output`` /
``gt_output`` with ``tok_output`` / ``tok_output_length`` (Llama-2) or
``tok_ref_output`` / ``tok_ref_output_len`` (later sets). The same records are read
from JSON (a list of objects, or pandas' ``to_json`` column form) or JSONL; a pickle
only with ``allow_pickle`` (unpickling runs code from the file).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from accelbench import validate as v
from accelbench.errors import UsageError
from accelbench.jsonfile import DuplicateKeyError, loads_unique
from accelbench.workload.plan import PlannedRequest
from accelbench.workload.tokenizer import Tokenizer

PROMPT_FIELDS = ("input", "templated_text_input", "text_input")
ISL_FIELDS = ("tok_input_length", "tok_input_len")
OSL_FIELDS = ("tok_output_length", "tok_ref_output_len")
OSL_IDS_FIELDS = ("tok_output", "tok_ref_output")
OUTPUT_TEXT_FIELDS = ("output", "gt_output", "ref_output")
PICKLE_SUFFIXES = (".pkl", ".pickle")
MAX_SAMPLES = 10_000_000


def is_mlperf_dataset(path: str) -> bool:
    """Whether the file looks like an MLPerf LLM set (a pickle, or JSON/JSONL whose
    first record has one of the prompt fields)."""
    p = Path(path)
    if p.suffix in PICKLE_SUFFIXES:
        return True
    try:
        with open(p, encoding="utf-8") as f:
            head = f.read(1 << 16)
    except (OSError, UnicodeDecodeError):
        return False
    return any(f'"{name}"' in head for name in PROMPT_FIELDS + ISL_FIELDS)


def read_records(path: str, *, allow_pickle: bool = False) -> list[object]:
    """The dataset's records as read (JSON list, JSON columns, JSONL, or opted-in pickle):
    each is checked by :func:`samples_from_records` (an object with a prompt ...)."""
    p = v.input_file("--dataset", path)
    if p.suffix in PICKLE_SUFFIXES:
        return _read_pickle(p, allow_pickle)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--dataset {p}: cannot read it as UTF-8 text: {exc}") from None
    try:
        doc = loads_unique(text)
    except json.JSONDecodeError:
        doc = None
        rows: list[object] = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(loads_unique(line))
            except json.JSONDecodeError as exc:
                raise UsageError(f"--dataset {p} line {n}: not JSON ({exc.msg})") from None
            except DuplicateKeyError as exc:
                raise UsageError(f"--dataset {p} line {n}: {exc}") from None
    except RecursionError:
        raise UsageError(f"--dataset {p}: JSON nested too deeply") from None
    except DuplicateKeyError as exc:
        raise UsageError(f"--dataset {p}: {exc}") from None
    if doc is not None:
        rows = _rows_of(doc, p)
    return rows


def _rows_of(doc: object, p: Path) -> list[object]:
    if isinstance(doc, list):
        return list(doc)
    if isinstance(doc, dict) and doc and all(isinstance(c, dict | list) for c in doc.values()):
        return _columns(doc, p)
    if isinstance(doc, dict):
        return [doc]
    raise UsageError(f"--dataset {p}: expected records (a JSON list or JSONL of objects)")


def _columns(doc: dict[str, dict | list], p: Path) -> list[object]:
    """pandas ``DataFrame.to_json()``'s column form, ``{"column": {"index": value, ...}}``
    (a column may be a list: its positions are the index, ``"0"``, ``"1"``, ...), as rows.
    A row is the values of one index key in every column, whatever order each column
    lists its keys in (read by position, a column listed in another order gave one
    sample another's output length); rows in index order: numeric where every key is a
    whole number (pandas' RangeIndex: ``"10"`` after ``"9"``), else the first column's.
    A column whose keys differ from the first column's is refused, naming both."""
    cols = {
        name: c if isinstance(c, dict) else {str(i): x for i, x in enumerate(c)}
        for name, c in doc.items()
    }
    (first, index), *rest = cols.items()
    for name, c in rest:
        if c.keys() != index.keys():
            extra, missing = c.keys() - index.keys(), index.keys() - c.keys()
            diff = [f"{verb} {len(ks):,} index key{'s' * (len(ks) != 1)} ({_some(ks)}) "
                    f"that column {first[:40]!r} {other}"
                    for ks, verb, other in ((extra, "has", "lacks"), (missing, "lacks", "has"))
                    if ks]  # fmt: skip
            raise UsageError(
                f"--dataset {p}: column {name[:40]!r} {' and '.join(diff)}: the columns of a "
                "pandas to_json() table share one index"
            )
    keys = list(index)
    if all(_WHOLE.fullmatch(k) for k in keys):
        keys.sort(key=lambda k: (int(k), k))
    return [{name: c[k] for name, c in cols.items()} for k in keys]


_WHOLE = re.compile(r"-?[0-9]{1,30}")


def _some(keys: set[str]) -> str:
    """Up to three of ``keys``, quoted short, for a one-line message."""
    shown = sorted(keys, key=lambda k: (len(k), k))[:3]
    more = ", ..." if len(keys) > 3 else ""
    return ", ".join(repr(k[:20]) for k in shown) + more


def _read_pickle(p: Path, allow_pickle: bool) -> list[object]:
    if not allow_pickle:
        raise UsageError(
            f"--dataset {p} is a pickle: loading one runs code from the file. Pass "
            "--allow-pickle if you trust it, or convert it to JSONL "
            "(pandas: df.to_json('set.jsonl', orient='records', lines=True))"
        )
    try:
        import pandas as pd
    except ImportError:
        raise UsageError(
            f"--dataset {p}: MLPerf's pickles are pandas DataFrames; install pandas or "
            "convert the set to JSONL"
        ) from None
    try:
        df = pd.read_pickle(p)  # noqa: S301 - the user opted in with --allow-pickle
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is bad input
        raise UsageError(f"--dataset {p}: cannot unpickle it: {exc}") from None
    if not hasattr(df, "to_dict"):
        raise UsageError(f"--dataset {p}: the pickle holds a {type(df).__name__}, not a table")
    return list(df.to_dict("records"))


def _first(rec: Mapping[str, object], names: tuple[str, ...]) -> tuple[str, object] | None:
    for name in names:
        if rec.get(name) is not None:
            return name, rec[name]
    return None


def _count(where: str, name: str, val: object) -> int:
    if isinstance(val, list):
        return len(val)
    if (
        isinstance(val, bool)
        or not isinstance(val, int | float)
        or (isinstance(val, float) and not math.isfinite(val))  # NaN, inf: no int() of them
        or val != int(val)
    ):
        raise UsageError(f"{where}: {name} is not a token count: {str(val)[:40]!r}")
    n = int(val)
    if not 1 <= n <= 1 << 20:
        raise UsageError(f"{where}: {name} = {n} is outside 1 to 1,048,576 tokens")
    return n


def samples_from_records(
    rows: Sequence[object], *, tok: Tokenizer | None, default_osl: int, source: str = "--dataset"
) -> list[PlannedRequest]:
    """One planned request per record: the prompt text, ``max_tokens`` = the reference
    answer's length (where the set has none: the answer tokenized, else ``default_osl``),
    and the prompt's length from the set's own token ids or count."""
    if not rows:
        raise UsageError(f"{source}: no records")
    if len(rows) > MAX_SAMPLES:
        raise UsageError(f"{source}: {len(rows):,} records, more than {MAX_SAMPLES:,}")
    out: list[PlannedRequest] = []
    for i, rec in enumerate(rows):
        where = f"{source} record {i}"
        if not isinstance(rec, dict):
            raise UsageError(f"{where}: not an object")
        got = _first(rec, PROMPT_FIELDS)
        if got is None or not isinstance(got[1], str) or not got[1]:
            raise UsageError(f"{where}: no prompt text (one of {', '.join(PROMPT_FIELDS)})")
        prompt = got[1]
        isl: int | None = None
        if (ids := rec.get("tok_input")) is not None:
            isl = _count(where, "tok_input", ids)
        elif (n := _first(rec, ISL_FIELDS)) is not None:
            isl = _count(where, *n)
        elif tok is not None:
            isl = len(tok.encode(prompt))
        osl = default_osl
        if (n := _first(rec, OSL_FIELDS) or _first(rec, OSL_IDS_FIELDS)) is not None:
            osl = _count(where, *n)
        elif (t := _first(rec, OUTPUT_TEXT_FIELDS)) is not None and tok is not None:
            if not isinstance(t[1], str):
                raise UsageError(f"{where}: {t[0]} is not text")
            osl = max(1, len(tok.encode(t[1])))
        out.append(PlannedRequest(prompt, osl, isl))
    return out
