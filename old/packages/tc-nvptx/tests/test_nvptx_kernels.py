"""The spec's other kernels (softmax, transpose, matmul) compile to PTX that ptxas accepts."""

from __future__ import annotations

import re
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
def test_transpose_exchanges_through_shared_memory(name: str, type_: str) -> None:
    """A 32 x 64 trans between a load and a store goes through shared memory, so that both sides
    keep their coalesced layouts (a register renaming would leave either side half rows): the
    exchange is the kernel's first use of shared memory and needs one barrier, not two."""
    k = _compile(name, {"TYPE": type_, "TM": 32, "TN": 64})
    ptx = k.ptx  # type: ignore[attr-defined]
    assert "ld.global" in ptx and "st.global" in ptx
    assert "st.shared" in ptx and "ld.shared" in ptx
    assert ptx.count("bar.sync") == 1
    assert k.shared_bytes > 32 * 64 * (4 if type_ == "float" else 2)  # type: ignore[attr-defined]
    assert k.cubin is not None and k.spills == 0  # type: ignore[attr-defined]


TORCH_TRANSPOSE = Path(__file__).resolve().parents[2] / "tc-torch" / "src" / "tc_torch" / "kernels" / "transpose.tc"


@pytest.mark.parametrize("type_, tm, tn, shared", [
    ("half", 64, 64, 64 * 66 * 2), ("half", 128, 128, 128 * 130 * 2), ("float", 64, 64, 64 * 65 * 4),
])
def test_aligned_transpose_is_16_byte_vectors_of_whole_rows(type_: str, tm: int, tn: int, shared: int) -> None:
    """tc_torch's transpose as the runtime specializes it: 16-byte global loads and stores (one
    per 16 bytes of the thread's tile share: no 8-byte stores), one barrier, and shared rows
    padded by 2 (fp32: 1) elements as the bank model chose (fp16 writes fp16 pairs)."""
    k = compile(TORCH_TRANSPOSE.read_text(), defines={"TYPE": type_, "TM": tm, "TN": tn},
                options=CompileOptions(arch="sm_90", specialization=("divisible_by_16",) * 6))
    ptx = k.ptx
    vectors = tm * tn * (2 if type_ == "half" else 4) // 16 // 128
    assert ptx.count("ld.global.v4.b32") == vectors and ptx.count("st.global.v4.b32") == vectors
    assert "st.global.v2" not in ptx and "st.global.b" not in ptx
    assert ptx.count("bar.sync") == 1
    assert k.shared_bytes == shared
    if type_ == "half":
        assert "st.shared.b32" in ptx and "ld.shared.b16" in ptx
    assert k.cubin is not None and k.spills == 0


def test_small_aligned_transpose_renames_registers() -> None:
    """An 8 x 8 tile in one warp: lanes split between both dimensions still cover whole rows, so
    the trans moves no data (no shared memory, no barrier)."""
    k = compile(TORCH_TRANSPOSE.read_text(), defines={"TYPE": "float", "TM": 8, "TN": 8},
                options=CompileOptions(arch="sm_90", num_warps=1, specialization=("divisible_by_16",) * 6))
    assert "st.shared" not in k.ptx and "bar.sync" not in k.ptx
    assert k.shared_bytes == 0


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


NARROW = """
__global__ void narrow(half* h, bf16* g, float* x) {
  int r[N] = 0 ... N;
  float v[N] = *(x + r);
  *(h + r) = v;
  *(g + r) = v * v;
}
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_float_to_16_bit_tiles_convert_two_elements_per_instruction(arch: str) -> None:
    """A tile's f32 -> f16 and f32 -> bf16 conversions pair each thread's neighbouring elements in
    one packed cvt (ptxas makes a packing instruction of every scalar conversion too), and the
    pair is stored as one 32-bit register: no scalar conversion is left. A thread holding one
    element converts it alone."""
    k = compile(NARROW, defines={"N": 1024}, options=CompileOptions(arch=arch, num_warps=4))
    per_thread = 1024 // 128
    assert len(re.findall(r"cvt\.rn\.f16x2\.f32 ", k.ptx)) == per_thread // 2
    assert len(re.findall(r"cvt\.rn\.bf16x2\.f32 ", k.ptx)) == per_thread // 2
    assert not re.findall(r"cvt\.rn\.b?f16\.f32", k.ptx)
    assert k.cubin is not None
    one = compile(NARROW, defines={"N": 128}, options=CompileOptions(arch=arch, num_warps=4)).ptx
    assert "x2.f32" not in one
    assert len(re.findall(r"cvt\.rn\.f16\.f32 ", one)) == len(re.findall(r"cvt\.rn\.bf16\.f32 ", one)) == 1
