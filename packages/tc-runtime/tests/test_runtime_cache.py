"""The disk cache: keys, atomic entries, corruption detection, records, load()."""

from __future__ import annotations

import hashlib
import importlib
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


def test_an_entry_reads_only_its_own_files(tmp_path: Path) -> None:
    """meta.json listing a path outside the entry (with that file's right checksum) was read:
    now an entry names only its own files, and one that does not is corrupt (and removed)."""
    cache = KernelCache(tmp_path)
    key = cache_key({"k": "outside"})
    entry = cache.put(key, BIN)
    assert entry is not None
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not the cache's")
    meta = json.loads((entry / "meta.json").read_text())
    meta["files"]["../../secret.txt"] = hashlib.sha256(secret.read_bytes()).hexdigest()
    (entry / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"meta.json names '../../secret.txt', not one of the entry's files"):
        read_entry(entry)
    assert cache.get(key) is None and not entry.exists() and secret.exists()


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


def test_kernel_key_holds_every_ingredient(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tc_runtime import compiler

    build = importlib.import_module("tc_runtime.build")  # tc_runtime.build is the function

    fp = compiler.fingerprint()
    assert set(fp) == {"tc_lang", "tc_ir", "tc_opt", "tc_nvptx", "tc_runtime", "llvmlite",
                       "ptxas"}
    assert all(v != "missing" for k, v in fp.items() if k != "ptxas")
    base = build.base_key("src", "<source>", None, {"BLOCK": "64"})
    key = build.kernel_key(base, "sm_90", 4, 3, ["divisible_by_16", None])
    changed = [
        build.kernel_key(build.base_key("src2", "<source>", None, {"BLOCK": "64"}), "sm_90", 4, 3,
                         ["divisible_by_16", None]),
        build.kernel_key(build.base_key("src", "<source>", None, {"BLOCK": "128"}), "sm_90", 4, 3,
                         ["divisible_by_16", None]),
        build.kernel_key(build.base_key("src", "<source>", "k2", {"BLOCK": "64"}), "sm_90", 4, 3,
                         ["divisible_by_16", None]),
        build.kernel_key({**base, "toolchain": {**fp, "ptxas": "other"}}, "sm_90", 4, 3,
                         ["divisible_by_16", None]),
        build.kernel_key({**base, "toolchain": {**fp, "llvmlite": "other"}}, "sm_90", 4, 3,
                         ["divisible_by_16", None]),
        build.kernel_key({**base, "toolchain": {**fp, "tc_nvptx": "other"}}, "sm_90", 4, 3,
                         ["divisible_by_16", None]),
        build.kernel_key(base, "sm_80", 4, 3, ["divisible_by_16", None]),
        build.kernel_key(base, "sm_90", 8, 3, ["divisible_by_16", None]),
        build.kernel_key(base, "sm_90", 4, 2, ["divisible_by_16", None]),
        build.kernel_key(base, "sm_90", 4, 3, [None, None]),
        build.kernel_key(base, "sm_90", 4, 3, ["divisible_by_16", "equal_to_1"]),
    ]
    assert len({key, *changed}) == len(changed) + 1
    # an #include: the preprocessed text and the included file's content are in the key
    header = tmp_path / "v.h"
    header.write_text("#define VALUE 1\n")
    src = f'#include "{header}"\n__global__ void f(int n) {{}}\n'
    one = compiler.cache_source(src, {}, "<source>")
    header.write_text("#define VALUE 2\n")
    assert compiler.cache_source(src, {}, "<source>") != one


def test_package_hash_covers_sources_and_data_not_bytecode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiler package's hash changes with any source or data file's content or name, in any
    subfolder, and not with its bytecode caches."""
    import sys

    from tc_runtime import compiler

    pkg = tmp_path / "tc_fake_pkg"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text("X = 1\n")
    (pkg / "sub" / "passes.py").write_text("Y = 2\n")
    (pkg / "sub" / "table.json").write_text("{}")
    (pkg / "sub" / "__pycache__" / "passes.cpython-312.pyc").write_bytes(b"\0")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tc_fake_pkg", raising=False)
    files = [rel for rel, _ in compiler._package_files(str(pkg))]
    assert files == ["__init__.py", "sub/passes.py", "sub/table.json"]
    first = compiler._package_hash("tc_fake_pkg")
    (pkg / "sub" / "__pycache__" / "passes.cpython-312.pyc").write_bytes(b"\1")
    assert compiler._package_hash("tc_fake_pkg") == first
    seen = {first}
    for change in (lambda: (pkg / "sub" / "passes.py").write_text("Y = 3\n"),
                   lambda: (pkg / "sub" / "table.json").write_text("[]"),
                   lambda: (pkg / "sub" / "passes.py").rename(pkg / "sub" / "other.py")):
        change()
        now = compiler._package_hash("tc_fake_pkg")
        assert now not in seen
        seen.add(now)
    assert compiler._package_hash("tc_no_such_package_here") == "missing"


def test_ptxas_version_in_the_fingerprint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last line `ptxas --version` prints; "unknown" when it cannot run, "none" without one."""
    from tc_runtime import compiler

    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\necho 'Build cuda_99.9'\n\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TC_PTXAS", str(fake))
    assert compiler._ptxas_version(compiler._start_ptxas_version()) == "Build cuda_99.9"
    monkeypatch.setenv("TC_PTXAS", str(tmp_path / "missing"))
    assert compiler._ptxas_version(compiler._start_ptxas_version()) == "unknown"
    monkeypatch.delenv("TC_PTXAS")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert compiler._ptxas_version(compiler._start_ptxas_version()) == "none"


def test_always_compile_bypasses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tc_runtime import compiler

    build = importlib.import_module("tc_runtime.build")  # tc_runtime.build is the function

    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TC_ALWAYS_COMPILE", raising=False)
    monkeypatch.delenv("TC_DISABLE_CACHE", raising=False)
    compiled: list[str] = []

    def fake_compile(source: str, **kwargs: object) -> KernelBinary:
        compiled.append(source)
        return BIN

    monkeypatch.setattr(compiler, "compile_source", fake_compile)
    args = dict(filename="<source>", name=None, defines={"B": "1"}, arch="sm_90", num_warps=4,
                num_stages=3, spec=(None, None))
    assert build.compile_cached("s", **args) == BIN  # type: ignore[arg-type]
    assert build.compile_cached("s", **args) == BIN  # type: ignore[arg-type]
    assert len(compiled) == 1  # the second came from the cache under TC_CACHE_DIR
    assert len(list(tmp_path.glob("??/*/meta.json"))) == 1
    monkeypatch.setenv("TC_ALWAYS_COMPILE", "1")
    build.compile_cached("s", **args)  # type: ignore[arg-type]
    assert len(compiled) == 2
