"""TC_KERNEL_DUMP_DIR and TC_KERNEL_OVERRIDE_DIR: the PTX of every kernel the runtime builds is
written out, and a hand-edited copy put in the override folder is what loads instead (seen in an
ahead-of-time build, which takes the same path as a kernel's configurations; no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tc_runtime as tc

ADD = """
__global__ void add(float* z, float* x, float* y, int n) {
    int i[BLOCK] = get_program_id(0) * BLOCK + 0 ... BLOCK;
    bool ok[BLOCK] = i < n;
    *?(ok)(z + i) = *?(ok)(x + i) + *?(ok)(y + i);
}
"""


def _build(num_warps: int = 4) -> tc.KernelBinary:
    return tc.build(ADD, arch="sm_90", defines={"BLOCK": 256}, num_warps=num_warps)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TC_KERNEL_DUMP_DIR", raising=False)
    monkeypatch.delenv("TC_KERNEL_OVERRIDE_DIR", raising=False)


def test_every_kernel_built_is_dumped_once_under_its_name_and_key(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    dump = tmp_path / "dump"
    monkeypatch.setenv("TC_KERNEL_DUMP_DIR", str(dump))
    first = _build()
    (file,) = dump.iterdir()
    assert file.name.startswith("add-") and file.suffix == ".ptx" and len(file.stem) == len("add-") + 16
    assert file.read_text() == first.ptx
    _build()  # (from the disk cache now: the same file again)
    assert list(dump.iterdir()) == [file]
    _build(num_warps=8)  # another configuration, another key
    assert len(list(dump.iterdir())) == 2


def test_an_edited_copy_in_the_override_folder_loads_instead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    dump, override = tmp_path / "dump", tmp_path / "override"
    monkeypatch.setenv("TC_KERNEL_DUMP_DIR", str(dump))
    original = _build()
    (file,) = dump.iterdir()
    edited = original.ptx + "\n// edited by hand\n"
    override.mkdir()
    (override / file.name).write_text(edited)
    monkeypatch.delenv("TC_KERNEL_DUMP_DIR")
    monkeypatch.setenv("TC_KERNEL_OVERRIDE_DIR", str(override))
    got = _build()
    # the edited PTX, compiled by the driver when it loads (no cubin, no ptxas figures)
    assert got.ptx == edited and got.asm["ptx"] == edited
    assert got.cubin is None and got.registers is None and got.spills is None
    assert got.signature == original.signature and got.shared_bytes == original.shared_bytes
    assert f"kernel 'add' is loaded from {override / file.name}" in capsys.readouterr().err
    # a configuration without a file of its own is the compiler's
    assert "edited by hand" not in _build(num_warps=8).ptx
    # and nothing of the override reached the disk cache
    monkeypatch.delenv("TC_KERNEL_OVERRIDE_DIR")
    assert _build().ptx == original.ptx


def test_a_dump_folder_that_cannot_be_written_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TC_KERNEL_DUMP_DIR", str(blocker))
    with pytest.raises(OSError, match="TC_KERNEL_DUMP_DIR: cannot write .*a file"):
        _build()


def test_an_override_that_is_not_text_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dump, override = tmp_path / "dump", tmp_path / "override"
    monkeypatch.setenv("TC_KERNEL_DUMP_DIR", str(dump))
    _build()
    (file,) = dump.iterdir()
    override.mkdir()
    (override / file.name).write_bytes(b"\xff\xfe not PTX")
    monkeypatch.setenv("TC_KERNEL_OVERRIDE_DIR", str(override))
    with pytest.raises(OSError, match="TC_KERNEL_OVERRIDE_DIR: cannot read .*" + file.name):
        _build()
