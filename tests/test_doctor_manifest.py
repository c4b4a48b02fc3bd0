"""Model files integrity: manifest writer and verifier on generated files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from accelbench.doctor.manifest import MANIFEST_NAME, verify_manifest, write_manifest
from accelbench.errors import AccelbenchError


def make_model(root: Path) -> Path:
    model = root / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"hidden_size": 64}))
    (model / "model-00001-of-00002.safetensors").write_bytes(os.urandom(3 << 20))
    (model / "model-00002-of-00002.safetensors").write_bytes(os.urandom(1 << 20) + b"tail")
    (model / "sub" / "tokenizer.json").write_text('{"vocab": {}}')
    (model / ".git").mkdir()
    (model / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return model


def test_write_then_verify_ok(tmp_path):
    model = make_model(tmp_path)
    seen = []
    m = write_manifest(model, workers=3, progress=seen.append)
    assert Path(m["path"]) == model / MANIFEST_NAME
    assert sorted(m["files"]) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "sub/tokenizer.json",
    ]  # .git skipped, manifest not hashing itself
    assert m["files"]["model-00001-of-00002.safetensors"]["size"] == 3 << 20
    assert sum(seen) == sum(f["size"] for f in m["files"].values())
    on_disk = json.loads((model / MANIFEST_NAME).read_text())
    assert on_disk["algorithm"] == "sha256" and on_disk["files"] == m["files"]
    r = verify_manifest(model, model / MANIFEST_NAME, workers=2)
    assert r["ok"] and r["checked"] == 4 and r["extra"] == []


def test_tampered_truncated_missing_and_extra_files(tmp_path):
    model = make_model(tmp_path)
    manifest = tmp_path / "elsewhere.json"
    write_manifest(model, manifest)
    shard = model / "model-00001-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[1000] ^= 0xFF  # one flipped byte, same size
    shard.write_bytes(bytes(data))
    half = model / "model-00002-of-00002.safetensors"
    half.write_bytes(half.read_bytes()[: 1 << 19])  # half-copied
    (model / "sub" / "tokenizer.json").unlink()
    (model / "stray.bin").write_bytes(b"x")
    r = verify_manifest(model, manifest)
    assert not r["ok"]
    assert r["hash_mismatch"] == ["model-00001-of-00002.safetensors"]
    assert r["size_mismatch"] == [
        {"file": "model-00002-of-00002.safetensors", "expected": (1 << 20) + 4, "found": 1 << 19}
    ]
    assert r["missing"] == ["sub/tokenizer.json"]
    assert r["extra"] == ["stray.bin"]
    assert r["checked"] == 2  # only same-size files are hashed


def test_symlinked_files_are_followed(tmp_path):
    # Hugging Face snapshot directories hold symlinks into blobs/.
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "abc").write_bytes(b"weights")
    snap = tmp_path / "snap"
    snap.mkdir()
    os.symlink(blobs / "abc", snap / "model.safetensors")
    m = write_manifest(snap)
    assert list(m["files"]) == ["model.safetensors"]
    assert verify_manifest(snap, snap / MANIFEST_NAME)["ok"]


def test_user_errors(tmp_path):
    with pytest.raises(AccelbenchError, match="not found"):
        write_manifest(tmp_path / "nope")
    (tmp_path / "f").write_text("x")
    with pytest.raises(AccelbenchError, match="not a directory"):
        write_manifest(tmp_path / "f")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(AccelbenchError, match="no files"):
        write_manifest(empty)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(AccelbenchError, match="not valid JSON"):
        verify_manifest(tmp_path, bad)
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(AccelbenchError, match="not an accelbench weights manifest"):
        verify_manifest(tmp_path, other)
    with pytest.raises(AccelbenchError, match="manifest not found"):
        verify_manifest(tmp_path, tmp_path / "missing.json")


@pytest.mark.parametrize(
    "change, field",
    [
        ({"version": 2}, "version 2"),
        ({"algorithm": "md5"}, "algorithm 'md5'"),
        ({"files": {"a": {"size": "12", "sha256": "0" * 64}}}, "files['a'].size"),
        ({"files": {"a": {"size": -1, "sha256": "0" * 64}}}, "files['a'].size"),
        ({"files": {"a": {"size": 1, "sha256": "abc"}}}, "files['a'].sha256"),
        ({"files": {"a": [1, 2]}}, "files['a'].size"),
    ],
)
def test_a_damaged_manifest_is_one_line_naming_its_field(tmp_path, change, field):
    from accelbench.errors import DocumentError

    model = make_model(tmp_path)
    m = write_manifest(model)
    doc = {k: v for k, v in m.items() if k not in ("path", "seconds")} | change
    p = tmp_path / "damaged.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(DocumentError) as exc:
        verify_manifest(model, p)
    assert field in str(exc.value) and str(p) in str(exc.value) and "\n" not in str(exc.value)


def test_unreadable_file_is_reported_not_raised(tmp_path, monkeypatch):
    model = make_model(tmp_path)
    write_manifest(model)
    import accelbench.doctor.manifest as mf

    real = mf.sha256_file

    def flaky(path, progress=None):
        if path.name == "config.json":
            raise PermissionError(13, "Permission denied")
        return real(path, progress)

    monkeypatch.setattr(mf, "sha256_file", flaky)
    r = verify_manifest(model, model / MANIFEST_NAME)
    assert not r["ok"]
    assert r["unreadable"] == [{"file": "config.json", "error": "Permission denied"}]
    with pytest.raises(AccelbenchError, match="cannot read 1 file"):
        write_manifest(model, tmp_path / "m2.json")
