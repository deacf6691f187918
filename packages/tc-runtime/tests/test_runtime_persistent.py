"""Persistent kernels (tc_opt CompileOptions.persistent) take their grid as hidden parameters and
need one program per SM at launch, which this runtime does not do yet: it refuses them with an
error naming the kernel and the option, from a compiled kernel and from a kernel file alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tc_runtime.binary import KernelBinary, read

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


def test_a_persistent_compiled_kernel_is_refused() -> None:
    with pytest.raises(ValueError, match=r"kernel 'dot' was compiled persistent .*compile it without persistent=True"):
        KernelBinary.from_compiled(_compiled(True))
    assert KernelBinary.from_compiled(_compiled(False)).num_warps == 9  # warp-specialized: launched with 9


def test_a_persistent_kernel_file_is_refused(tmp_path: Path) -> None:
    ck = _compiled(True)
    path = tmp_path / "dot.json"
    path.write_text(ck.dumps())  # type: ignore[attr-defined]
    assert json.loads(path.read_text())["persistent"] is True
    with pytest.raises(ValueError, match=r"dot\.json is not a valid tc kernel file: kernel 'dot' was compiled persistent"):
        read(path)
