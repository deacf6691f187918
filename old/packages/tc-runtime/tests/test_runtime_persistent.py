"""Persistent kernels (tc_opt CompileOptions.persistent) take their grid as hidden parameters and
run at most one program per SM (kernel.launch_persistently; the launch itself is tested against the fake
driver in test_runtime_fakegpu.py): the runtime's record of a kernel keeps the flag, from a
compiled kernel and through a kernel file alike."""

from __future__ import annotations

import json
from pathlib import Path

from tc_runtime.binary import KernelBinary, read, save

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"


def _compiled(persistent: bool) -> object:
    from tc_nvptx.compiler import compile
    from tc_opt import CompileOptions

    return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 64},
                   options=CompileOptions(arch="sm_90", num_warps=8, num_stages=3,
                                          specialization=("16", "16", "16", None, None, None, "16", "16", "16"),
                                          warp_specialize=True, persistent=persistent),
                   assemble_cubin=False)


def test_a_persistent_compiled_kernel_is_marked() -> None:
    binary = KernelBinary.from_compiled(_compiled(True))
    assert binary.persistent and binary.metadata()["persistent"] is True
    plain = KernelBinary.from_compiled(_compiled(False))
    assert not plain.persistent and "persistent" not in plain.metadata()
    assert plain.num_warps == binary.num_warps == 9  # warp-specialized: launched with 9


def test_a_persistent_kernel_file_keeps_the_flag(tmp_path: Path) -> None:
    ck = _compiled(True)
    path = tmp_path / "dot.json"
    path.write_text(ck.dumps())  # type: ignore[attr-defined]
    assert json.loads(path.read_text())["persistent"] is True
    assert read(path).persistent
    # and the runtime's own files
    again = tmp_path / "again.json"
    save(read(path), again)
    assert read(again).persistent and json.loads(again.read_text())["persistent"] is True
