"""Cross-warp reductions in PTX: a reduction to a scalar combines the warps' partials with one
shared-memory load per lane and a shuffle butterfly; a reduction to a tile reads every warp's
partial (neighbouring lanes hold different elements there). The GPU results of both are checked
against the interpreter by tests/integration/test_integration_gpu_vs_interpreter.py."""

from __future__ import annotations

import re

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
