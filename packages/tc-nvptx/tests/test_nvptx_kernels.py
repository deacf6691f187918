"""The spec's other kernels (softmax, transpose, matmul) compile to PTX that ptxas accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_nvptx import compile
from tc_opt import CompileOptions

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"


def _compile(name: str, defines: dict[str, object], arch: str = "sm_90", warps: int = 4) -> object:
    src = (KERNELS / name).read_text()
    return compile(src, defines=defines, options=CompileOptions(arch=arch, num_warps=warps), filename=name)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("block", [128, 1024, 4096])
def test_softmax(arch: str, block: int) -> None:
    k = _compile("softmax.tc", {"BLOCK": block}, arch)
    ptx = k.ptx  # type: ignore[attr-defined]
    assert "shfl.sync.bfly" in ptx  # warp reductions
    assert "ex2.approx.f32" in ptx  # exp is approximate in Triton-C
    assert "bar.sync" in ptx  # across warps through shared memory
    assert k.shared_bytes > 0 and k.cubin is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["transpose.tc", "transpose_masked.tc", "transpose_multipleof.tc"])
@pytest.mark.parametrize("type_", ["float", "half"])
def test_transpose_renames_registers(name: str, type_: str) -> None:
    """A trans between a load and a store is laid out so that each thread holds a small 2-D
    block: both sides are coalesced and no data crosses threads (no shared memory, no barrier)."""
    k = _compile(name, {"TYPE": type_, "TM": 32, "TN": 64})
    ptx = k.ptx  # type: ignore[attr-defined]
    assert "ld.global" in ptx and "st.global" in ptx
    assert "st.shared" not in ptx and "bar.sync" not in ptx
    assert k.shared_bytes == 0  # type: ignore[attr-defined]
    assert k.cubin is not None and k.spills == 0  # type: ignore[attr-defined]


COMPUTED_TRANSPOSE = """
__global__ void t(TYPE* Y) {
  int rm[TM] = 0 ... TM;
  int rn[TN] = 0 ... TN;
  TYPE a[TM, TN] = rm[:, newaxis] * 3 + rn[newaxis, :];
  TYPE* py[TN, TM] = Y + rm[newaxis, :] * TN + rn[:, newaxis];
  *py = ^a;
}
"""


@pytest.mark.parametrize("type_", ["float", "half"])
def test_transpose_of_a_computed_tile_goes_through_shared_memory(type_: str) -> None:
    k = compile(COMPUTED_TRANSPOSE, defines={"TYPE": type_, "TM": 32, "TN": 64}, options=CompileOptions(arch="sm_90"))
    ptx = k.ptx
    assert "st.shared" in ptx and "ld.shared" in ptx and "bar.sync" in ptx
    assert k.shared_bytes >= 32 * 64 * (4 if type_ == "float" else 2)
    assert k.cubin is not None and k.spills == 0


def test_transpose_multipleof_vectorizes() -> None:
    k = _compile("transpose_multipleof.tc", {"TYPE": "half", "TM": 64, "TN": 64})
    assert "ld.global.v4" in k.ptx and "st.global.v4" in k.ptx  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "name,defines",
    [
        ("matmul.tc", {"TYPE": "float", "TM": 64, "TN": 64, "TK": 8}),
        ("matmul_prefetch.tc", {"TYPE": "float", "TM": 32, "TN": 32, "TK": 8}),
        ("matmul_remat.tc", {"TYPE": "half", "TM": 32, "TN": 32, "TK": 16}),
        ("matmul_tutorial.tc", {"TYPE": "float", "MB": 32, "NB": 32, "KB": 16}),
        ("matmul_autotuned.tc", {"TYPE": "half", "MB": 64, "NB": 64, "KB": 16}),
    ],
)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_matmul_fma(name: str, defines: dict[str, object], arch: str) -> None:
    k = _compile(name, defines, arch)
    ptx = k.ptx  # type: ignore[attr-defined]
    # fp32 dot runs on FMA units; fp16 dot on tensor cores (mma.sync, or wgmma on sm_90)
    assert "fma.rn.f32" in ptx or (("mma.sync" in ptx or "wgmma" in ptx) and defines["TYPE"] == "half")
    assert k.cubin is not None and k.shared_bytes > 0  # type: ignore[attr-defined]
