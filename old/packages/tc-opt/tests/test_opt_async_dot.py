"""An asynchronous wgmma dot (left in flight across iterations by the loop pipeliner) may only read
pipeline slots: an operand the body itself stores into shared memory each iteration would be
overwritten by the next iteration while the dot still reads it."""

from __future__ import annotations

import pytest
from tc_ir import ops as O
from tc_opt import CompileOptions
from tc_opt.pipeline import gpu_pipeline

SRC = """
__global__ void dot(half* A, half* B, float* C, int K, int lda, int ldb) {
  int rm[128] = 0 ... 128; int rn[128] = 0 ... 128; int rk[32] = 0 ... 32;
  half *pa[128, 32] = A + rm[:, newaxis] * lda + rk[newaxis, :];
  half *pb[32, 128] = B + rk[:, newaxis] * ldb + rn[newaxis, :];
  float acc[128, 128] = 0;
  for (int k = 0; k < K; k += 32) {
    half a[128, 32] = *pa;
    half b[32, 128] = *pb;
    acc += a @ OPERAND_B;
    pa += 32; pb += 32 * ldb;
  }
  float *pc[128, 128] = C + rm[:, newaxis] * 128 + rn[newaxis, :];
  *pc = acc;
}
"""


def _dots(operand_b: str, tma: bool) -> list[O.DotOp]:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(SRC, {"OPERAND_B": operand_b}, None, "dot.tc")
    opts = CompileOptions(arch="sm_90", num_warps=8, num_stages=4, specialization=("divisible_by_16",) * 6,
                          tma=tma)
    gpu_pipeline(opts).run(m)
    return [op for op in m.walk() if isinstance(op, O.DotOp)]


@pytest.mark.parametrize("tma", [False, True])
def test_dot_on_pipeline_slots_stays_in_flight(tma: bool) -> None:
    (dot,) = _dots("b", tma)
    assert dot.asynchronous


@pytest.mark.parametrize("tma", [False, True])
def test_dot_on_a_tile_stored_in_the_body_waits(tma: bool) -> None:
    # b * b is computed in registers and stored to shared memory in the loop body
    (dot,) = _dots("(b * b)", tma)
    assert not dot.asynchronous
