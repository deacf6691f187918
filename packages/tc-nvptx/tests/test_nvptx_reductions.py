"""Cross-warp reductions in PTX: a reduction to a scalar combines the warps' partials with one
shared-memory load per lane and a shuffle butterfly; a reduction to a tile reads every warp's
partial (neighbouring lanes hold different elements there). The GPU results of both are checked
against the interpreter by tests/integration/test_integration_gpu_vs_interpreter.py."""

from __future__ import annotations

import re

import pytest

import tc_nvptx
from tc_opt import CompileOptions

ROW_SUM = """
__global__ void row_sum(float* OUT, float* X) {
    int n[BLOCK] = 0 ... BLOCK;
    *OUT = (*(X + n))[+];
}
"""

COLUMN_SUMS = """
__global__ void column_sums(float* OUT, float* X) {
    int m[TM] = 0 ... TM;
    int n[TN] = 0 ... TN;
    *(OUT + n) = (*(X + m[:, newaxis] * TN + n[newaxis, :]))[+, :];
}
"""


def _ptx(src: str, defines: dict[str, object], warps: int) -> str:
    ck = tc_nvptx.compile(src, defines=defines, options=CompileOptions(
        arch="sm_90", num_warps=warps, specialization=("divisible_by_16",) * 2),
        assemble_cubin=False)
    return ck.ptx


def test_scalar_reduction_combines_warps_by_shuffles() -> None:
    ptx = _ptx(ROW_SUM, {"BLOCK": 4096}, 16)
    loads = re.findall(r"ld\.shared[.\w]*", ptx)
    assert loads == ["ld.shared.b32"]  # one partial per lane, not the 16 of every warp
    # 5 butterfly steps inside each warp, then 4 across the 16 warps' partials
    assert ptx.count("shfl.sync.bfly") == 9


def test_tile_reduction_reads_every_warps_partial() -> None:
    ptx = _ptx(COLUMN_SUMS, {"TM": 64, "TN": 32}, 8)
    assert "ld.shared" in ptx
    assert ptx.count("shfl.sync.bfly") < 9


DOT_COLUMN_SUMS = """
__global__ void dot_column_sums(float* OUT, half* A, half* B) {
    int m[192] = 0 ... 192;
    int n[192] = 0 ... 192;
    int k[16] = 0 ... 16;
    half a[192, 16] = *(A + m[:, newaxis] * 16 + k[newaxis, :]);
    half b[16, 192] = *(B + k[:, newaxis] * 192 + n[newaxis, :]);
    float c[192, 192] = a @ b;
    *(OUT + n) = c[+, :];
}
"""


@pytest.mark.parametrize("arch, warps_along_m", [("sm_80", 3), ("sm_90a", 12)])
def test_a_reduction_across_a_number_of_warps_that_is_not_a_power_of_two(arch: str, warps_along_m: int) -> None:
    # 12 warps put 3 (mma.sync) or 12 (wgmma) warps along the accumulator's rows: each warp's
    # partial goes to the slot of its coordinate modulo the distinct warps (a mask with 2 or 11,
    # as for a power of two, sent warps to the wrong slots), and the tile result reads each slot
    ck = tc_nvptx.compile(DOT_COLUMN_SUMS, options=CompileOptions(
        arch=arch, num_warps=12, specialization=("divisible_by_16",) * 3), assemble_cubin=False)
    ll = ck.asm["llvm"]
    coordinate = re.search(rf'(%"[.\w]+") = urem i32 %"warp", {warps_along_m}\n', ll)
    assert coordinate is not None, "the warp's coordinate along the rows"
    name = coordinate.group(1)
    assert f"urem i32 {name}, {warps_along_m}" in ll
    assert f"and i32 {name}, {warps_along_m - 1}" not in ll
    assert ("wgmma.mma_async" in ck.ptx) == (arch == "sm_90a")
