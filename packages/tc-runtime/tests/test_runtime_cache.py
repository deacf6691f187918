"""The disk cache: keys, atomic entries, corruption detection, records, load()."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tc_runtime as tc
from tc_runtime import knobs
from tc_runtime.binary import KernelBinary
from tc_runtime.cache import KernelCache, cache_key, read_entry

BIN = KernelBinary(name="add", arch="sm_90", ptx=".version 8.0\n// ptx text\n", cubin=b"\x7fELF123",
                   signature=("ptr<f32>", "i32"), arg_names=("x", "n"), num_warps=4,
                   shared_bytes=0, registers=12, spills=0, asm={"ir": "module", "ptx": "p"})


def test_key_is_canonical_and_sensitive() -> None:
    a = cache_key({"source": "s", "defines": [("A", "1")], "arch": "sm_90"})
    b = cache_key({"arch": "sm_90", "defines": [("A", "1")], "source": "s"})
    assert a == b and len(a) == 64
    assert a != cache_key({"source": "s", "defines": [("A", "2")], "arch": "sm_90"})
    assert a != cache_key({"source": "s", "defines": [("A", "1")], "arch": "sm_80"})


def test_round_trip(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    key = cache_key({"k": 1})
    assert cache.get(key) is None
    entry = cache.put(key, BIN)
    assert entry is not None and entry.is_dir()
    assert sorted(p.name for p in entry.iterdir()) == ["asm.json", "kernel.cubin", "kernel.ptx",
                                                        "meta.json"]
    assert cache.get(key) == BIN
    # no temporary directories are left behind
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    # the entry directory is loadable as a precompiled kernel
    assert read_entry(entry) == BIN


def test_truncated_file_is_detected_and_removed(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    key = cache_key({"k": 2})
    entry = cache.put(key, BIN)
    assert entry is not None
    ptx = entry / "kernel.ptx"
    ptx.write_bytes(ptx.read_bytes()[:5])  # a crash in the middle of a write
    assert cache.get(key) is None
    assert not entry.exists()
    cache.put(key, BIN)  # rebuilt
    assert cache.get(key) == BIN


@pytest.mark.parametrize("damage", ["missing-meta", "bad-json", "missing-cubin", "wrong-key"])
def test_other_corruptions(tmp_path: Path, damage: str) -> None:
    cache = KernelCache(tmp_path)
    key = cache_key({"k": damage})
    entry = cache.put(key, BIN)
    assert entry is not None
    if damage == "missing-meta":
        (entry / "meta.json").unlink()
    elif damage == "bad-json":
        (entry / "meta.json").write_text("{not json")
    elif damage == "missing-cubin":
        (entry / "kernel.cubin").unlink()
    else:
        meta = json.loads((entry / "meta.json").read_text())
        meta["key"] = "0" * 64
        (entry / "meta.json").write_text(json.dumps(meta))
    assert cache.get(key) is None
    assert cache.put(key, BIN) is not None
    assert cache.get(key) == BIN


def test_put_over_existing_entry_and_concurrent_writer(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    key = cache_key({"k": 3})
    cache.put(key, BIN)
    other = KernelCache(tmp_path)
    assert other.put(key, BIN) is not None  # a second writer with the same content is fine
    assert cache.get(key) == BIN


def test_unwritable_cache_warns_and_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = KernelCache(blocker / "sub")
    with pytest.warns(RuntimeWarning, match="cache disabled"):
        assert cache.put(cache_key({"k": 4}), BIN) is None
    assert cache.get(cache_key({"k": 4})) is None


def test_records(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    key = cache_key({"r": 1})
    assert cache.get_record(key) is None
    cache.put_record(key, {"name": "add", "kinds": ["i32"]})
    assert cache.get_record(key) == {"name": "add", "kinds": ["i32"]}
    path = cache.record_path(key)
    data = json.loads(path.read_text())
    data["body"]["kinds"] = ["f32"]
    path.write_text(json.dumps(data))
    assert cache.get_record(key) is None  # checksum mismatch: removed
    assert not path.exists()


def test_knobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path / "c"))
    assert knobs.cache_dir() == tmp_path / "c"
    assert KernelCache().root == tmp_path / "c"
    monkeypatch.delenv("TC_CACHE_DIR")
    monkeypatch.setenv("TC_HOME", str(tmp_path))
    assert knobs.cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("TC_HOME")
    assert knobs.cache_dir().name == "tc"
    monkeypatch.setenv("TC_ALWAYS_COMPILE", "1")
    assert knobs.always_compile()
    monkeypatch.setenv("TC_ALWAYS_COMPILE", "0")
    assert not knobs.always_compile()


def test_load_rejects_bad_directories(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a tc kernel directory"):
        tc.load(tmp_path, device="cpu")  # meta.json missing (checked before the device)
    os.makedirs(tmp_path / "x")
    (tmp_path / "x" / "meta.json").write_text("[]")
    with pytest.raises(ValueError, match="not a valid tc kernel directory"):
        read_entry(tmp_path / "x")
