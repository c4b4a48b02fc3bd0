"""Model files integrity: a SHA-256 manifest of a model directory, and its verification.

A half-copied model (a truncated safetensors shard) or a tampered one loads or fails in
confusing ways hours into a benchmark; hashing up front catches both. Files are hashed
in parallel threads (hashlib releases the GIL on large buffers, so threads scale with
disks that can feed them). Sizes are compared before any hashing, so a truncated copy
is reported at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NotRequired, TypedDict

from accelbench.errors import AccelbenchError, DocumentError
from accelbench.jsonfile import DuplicateKeyError, loads_unique

MANIFEST_NAME = "accelbench-manifest.json"
FORMAT = "accelbench-weights-manifest"
SKIP_DIRS = {".git", ".cache"}
CHUNK = 4 << 20

Progress = Callable[[int], None]  # called with the number of bytes just hashed


class FileEntry(TypedDict):
    size: int
    sha256: str


class Manifest(TypedDict):
    """The manifest file (``accelbench-manifest.json``, docs/DOCTOR.md): ``format`` and
    ``version`` 1, the hash ``algorithm``, when it was ``created``, the directory's name
    (``root``) and each file's size and hash by its path under the directory. As
    :func:`write_manifest` returns it, also where it was written and how long it took."""

    format: str
    version: int
    algorithm: str
    created: str
    root: str
    files: dict[str, FileEntry]
    path: NotRequired[str]
    seconds: NotRequired[float]


class SizeMismatch(TypedDict):
    file: str
    expected: int
    found: int


class Unreadable(TypedDict):
    file: str
    error: str


class Verification(TypedDict):
    """What :func:`verify_manifest` found (``doctor weights --verify --json``)."""

    ok: bool
    manifest: str
    directory: str
    checked: int
    expected: int
    missing: list[str]
    size_mismatch: list[SizeMismatch]
    hash_mismatch: list[str]
    unreadable: list[Unreadable]
    extra: list[str]
    seconds: float


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def list_files(root: Path, exclude: set[Path] | None = None) -> list[Path]:
    """Regular files under root (following file symlinks, as in Hugging Face snapshot
    directories), relative to root, sorted; .git/.cache and the manifest skipped."""
    exclude = {p.resolve() for p in (exclude or set())}
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for fn in filenames:
            p = Path(dirpath) / fn
            if fn == MANIFEST_NAME or p.resolve() in exclude or not p.is_file():
                continue
            out.append(p.relative_to(root))
    return sorted(out, key=lambda p: p.as_posix())


def sha256_file(path: Path, progress: Progress | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            if progress:
                progress(len(chunk))
    return h.hexdigest()


def _hash_all(
    root: Path, rels: list[Path], workers: int, progress: Progress | None
) -> tuple[dict[str, str], dict[str, str]]:
    """-> ({relpath: sha256}, {relpath: error}); never raises for a single bad file."""
    hashes: dict[str, str] = {}
    errors: dict[str, str] = {}

    def one(rel: Path) -> tuple[str, str | None, str | None]:
        try:
            return rel.as_posix(), sha256_file(root / rel, progress), None
        except OSError as exc:
            return rel.as_posix(), None, exc.strerror or str(exc)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for rel, digest, err in pool.map(one, rels):
            if digest is not None:
                hashes[rel] = digest
            else:
                errors[rel] = err or "unreadable"
    return hashes, errors


def _check_dir(model_dir: Path) -> Path:
    if not model_dir.exists():
        raise AccelbenchError(f"model directory not found: {model_dir}")
    if not model_dir.is_dir():
        raise AccelbenchError(f"not a directory: {model_dir} (give the model's directory)")
    return model_dir


def total_size(root: Path, rels: list[Path]) -> int:
    return sum((root / r).stat().st_size for r in rels)


def write_manifest(
    model_dir: Path,
    manifest_path: Path | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> Manifest:
    """Hash every file of model_dir and write the manifest (default: inside model_dir).
    Returns the manifest dict. Unreadable files are an error: a manifest with holes
    would later vouch for files it never saw."""
    root = _check_dir(model_dir)
    manifest_path = manifest_path or root / MANIFEST_NAME
    rels = list_files(root, exclude={manifest_path})
    if not rels:
        raise AccelbenchError(f"no files to hash in {root}")
    if on_total:
        on_total(total_size(root, rels))
    t0 = time.perf_counter()
    hashes, errors = _hash_all(root, rels, workers or default_workers(), progress)
    if errors:
        listed = "; ".join(f"{k}: {v}" for k, v in sorted(errors.items())[:5])
        raise AccelbenchError(f"cannot read {len(errors)} file(s) in {root}: {listed}")
    manifest: Manifest = {
        "format": FORMAT,
        "version": 1,
        "algorithm": "sha256",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "root": root.resolve().name,
        "files": {
            rel.as_posix(): {"size": (root / rel).stat().st_size, "sha256": hashes[rel.as_posix()]}
            for rel in rels
        },
    }
    try:
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    except OSError as exc:
        raise AccelbenchError(
            f"cannot write manifest {manifest_path}: {exc.strerror or exc}"
        ) from None
    manifest["path"] = str(manifest_path)
    manifest["seconds"] = round(time.perf_counter() - t0, 3)
    return manifest


def load_manifest(path: Path) -> Manifest:
    """The manifest at ``path``, every field checked: one line naming the file and the
    field when it is damaged, of another version, or not a manifest at all."""
    try:
        data = loads_unique(path.read_text())
    except FileNotFoundError:
        raise AccelbenchError(f"manifest not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AccelbenchError(f"cannot read manifest {path}: {exc}") from None
    except DuplicateKeyError as exc:
        raise AccelbenchError(f"manifest {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise AccelbenchError(f"manifest {path} is not valid JSON: {exc}") from None
    if (
        not isinstance(data, dict)
        or data.get("format") != FORMAT
        or not isinstance(data.get("files"), dict)
    ):
        raise AccelbenchError(
            f"{path} is not an accelbench weights manifest "
            "(write one with: accelbench doctor weights DIR --write-manifest)"
        )
    if data.get("version") != 1:
        raise DocumentError(f"{path}: version {data.get('version')!r} (this accelbench reads 1)")
    if data.get("algorithm", "sha256") != "sha256":
        raise DocumentError(f"{path}: algorithm {data.get('algorithm')!r} (only sha256)")
    files: dict[str, FileEntry] = {}
    for rel, entry in data["files"].items():
        size = entry.get("size") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise DocumentError(f"{path}: files[{rel!r}].size is not a byte count: {size!r}")
        if not isinstance(digest, str) or len(digest) != 64:
            raise DocumentError(f"{path}: files[{rel!r}].sha256 is not a SHA-256: {digest!r}")
        files[str(rel)] = {"size": size, "sha256": digest.lower()}
    return {
        "format": FORMAT, "version": 1, "algorithm": "sha256",
        "created": str(data.get("created") or ""), "root": str(data.get("root") or ""),
        "files": files,
    }  # fmt: skip


def verify_manifest(
    model_dir: Path,
    manifest_path: Path,
    workers: int | None = None,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> Verification:
    """Compare model_dir with a manifest. Missing, truncated (size differs), altered
    (hash differs) and unreadable files fail; files not in the manifest are listed."""
    root = _check_dir(model_dir)
    manifest = load_manifest(manifest_path)
    expected = manifest["files"]
    present = {p.as_posix() for p in list_files(root, exclude={manifest_path})}
    missing = sorted(k for k in expected if k not in present)
    extra = sorted(k for k in present if k not in expected)
    size_mismatch: list[SizeMismatch] = []
    to_hash: list[Path] = []
    for rel, want in sorted(expected.items()):
        if rel in missing:
            continue
        size = (root / rel).stat().st_size
        if size != want["size"]:
            size_mismatch.append({"file": rel, "expected": want["size"], "found": size})
        else:
            to_hash.append(Path(rel))
    if on_total:
        on_total(total_size(root, to_hash))
    t0 = time.perf_counter()
    hashes, errors = _hash_all(root, to_hash, workers or default_workers(), progress)
    hash_mismatch = sorted(rel for rel, h in hashes.items() if h != expected[rel]["sha256"])
    ok = not (missing or size_mismatch or hash_mismatch or errors)
    return {
        "ok": ok,
        "manifest": str(manifest_path),
        "directory": str(root),
        "checked": len(hashes),
        "expected": len(expected),
        "missing": missing,
        "size_mismatch": size_mismatch,
        "hash_mismatch": hash_mismatch,
        "unreadable": [{"file": k, "error": v} for k, v in sorted(errors.items())],
        "extra": extra,
        "seconds": round(time.perf_counter() - t0, 3),
    }
