"""tf32 dots on the GPU: fp32 matmuls compiled with fp32_dot="tf32" run on Hopper's wgmma (A B
with B N-contiguous transposed, B^T in registers; an M-contiguous A in registers; other
N-contiguous B restaged or copied K-major) and on mma.sync elsewhere; their products must be those of the tf32 operands,
accumulated in fp32."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
DEFINES = json.loads((KERNELS / "defines.json").read_text())

#: A matmul with masks inside the loop (a K tail, ragged M and N).
MASKED = """
__global__ void dot(float* A, float* B, float* C, int M, int N, int K,
                    int stride_a_0, int stride_b_0, int stride_c_0) {
  int pid_m = get_program_id(0);
  int pid_n = get_program_id(1);
  int rm[MB] = pid_m * MB + 0 ... MB;
  int rn[NB] = pid_n * NB + 0 ... NB;
  int rk[KB] = 0 ... KB;
  float *pa[MB, KB] = A + (rk[newaxis, :] * 1 + rm[:, newaxis] * stride_a_0);
  float *pb[KB, NB] = B + (rk[:, newaxis] * stride_b_0 + rn[newaxis, :] * 1);
  float acc[MB, NB] = 0;
  for (int k = K; k > 0; k -= KB) {
    float a[MB, KB] = rm[:, newaxis] < M && rk[newaxis, :] < k ? *pa : 0;
    float b[KB, NB] = rk[:, newaxis] < k && rn[newaxis, :] < N ? *pb : 0;
    acc += a @ b;
    pa += KB * 1;
    pb += KB * stride_b_0;
  }
  float *pc[MB, NB] = C + (rm[:, newaxis] * stride_c_0 + rn[newaxis, :]);
  *? (rm[:, newaxis] < M && rn[newaxis, :] < N) pc = acc;
}
"""


def _tf32(x: Any, rounded: bool) -> Any:
    """x with its mantissa cut to tf32's 10 bits: truncated (what tensor cores do with fp32 bits
    they read from shared memory) or rounded to nearest (cvt.rna.tf32.f32, the mma.sync path)."""
    bits = x.contiguous().view(torch.int32)
    if rounded:
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32)


def _check(c: Any, a: Any, b: Any) -> None:
    """c is the fp32-accumulated product of the tf32 operands (truncated or rounded), far closer
    to it than tf32's own error: an operand read wrongly (a transposed or swizzled element, a
    missed K step) is off by the tf32 error or more."""
    got = c.double()
    errs = []
    for rounded in (False, True):
        ref = _tf32(a, rounded).double() @ _tf32(b, rounded).double()
        errs.append(float((got - ref).norm() / ref.norm()))
    exact = a.double() @ b.double()
    tf32_err = float((_tf32(a, True).double() @ _tf32(b, True).double() - exact).norm() / exact.norm())
    assert min(errs) < 1e-5 < tf32_err / 10, (errs, tf32_err)


def _rand(rows: int, cols: int) -> Any:
    return torch.randn(rows, cols, device="cuda")


# (MB, NB, KB, num_warps, num_stages): wgmma on sm_90 (pipelined: B^T from registers, 64 rows of
# N per warpgroup, M up to 256 per instruction; 32-, 64- and 128-byte K rows), the same tiles
# unpipelined (B copied K-major), and mma.sync (16 rows per warp)
CONFIGS = [(128, 128, 32, 8, 4), (128, 256, 32, 8, 3), (256, 128, 32, 8, 4), (64, 64, 32, 4, 3), (64, 128, 16, 4, 2),
           (128, 64, 8, 4, 3), (128, 128, 32, 4, 1), (64, 64, 64, 4, 3), (32, 32, 16, 2, 2)]


@pytest.mark.parametrize("size", [(193, 327, 320), (257, 129, 96), (1024, 1024, 1024)])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
def test_masked_tf32_matmul(cfg: tuple[int, int, int, int, int], size: tuple[int, int, int]) -> None:
    import tc_runtime as tc

    mb, nb, kb, warps, stages = cfg
    m, n, k = size
    a, b = _rand(m, k), _rand(k, n)
    c = torch.empty(m, n, device="cuda")
    kern = tc.kernel(MASKED, device="cuda", defines={"MB": mb, "NB": nb, "KB": kb}, num_warps=warps,
                     num_stages=stages, fp32_dot="tf32")
    kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, a.stride(0), b.stride(0), c.stride(0),
         grid=lambda opt: (tc.cdiv(m, mb), tc.cdiv(n, nb)))
    torch.cuda.synchronize()
    _check(c, a, b)


@pytest.mark.parametrize("variant", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("stages", [1, 3])
def test_fused_transposed_tf32_matmul(variant: str, stages: int) -> None:
    # A and B stored either way: an M- or N-contiguous operand is staged K-major in shared memory
    import tc_runtime as tc

    d = dict(DEFINES["matmul_fused_trans.tc"][variant], TYPE="float")
    tm, tn, tk = d["TM"], d["TN"], d["TK"]
    m, n, k = 4 * tm, 3 * tn, 8 * tk
    a, b = _rand(m, k), _rand(k, n)

    def stored(x: Any, transposed: bool) -> Any:  # with a margin: the kernel reads one K block past
        x = x.t() if transposed else x
        out = torch.zeros(x.shape[0] + tk, x.shape[1] + tk, device="cuda")
        out[: x.shape[0], : x.shape[1]] = x
        return out

    a_st, b_st = stored(a, variant[0] == "T"), stored(b, variant[1] == "T")
    c = torch.empty(m, n, device="cuda")
    src = (KERNELS / "matmul_fused_trans.tc").read_text()
    kern = tc.kernel(src, device="cuda", defines=d, num_warps=4, num_stages=stages, name="dot", fp32_dot="tf32")
    kern(a_st.data_ptr(), b_st.data_ptr(), c.data_ptr(), m, n, k, a_st.stride(0), b_st.stride(0), c.stride(0),
         grid=lambda opt: (m // tm, n // tn))
    torch.cuda.synchronize()
    _check(c, a, b)



@pytest.mark.parametrize("size", [(208, 336, 320), (2064, 2000, 304), (1024, 1024, 1024)])
@pytest.mark.parametrize("cfg", [(256, 128, 32, 8, 4), (128, 256, 32, 8, 3)], ids=lambda c: "x".join(map(str, c)))
def test_persistent_tf32_matmul(cfg: tuple[int, int, int, int, int], size: tuple[int, int, int]) -> None:
    """A B computed transposed (B^T in registers) on a persistent grid without a producer warp
    (tc_opt.persistent), through the runtime: each CTA runs several programs at the larger sizes,
    each program's barriers and epilogue reusing the shared memory of the previous one. M, N and
    K are not multiples of the tile (the maps' extents mask the edges); the strides are multiples
    of 16 elements, which TMA copies (and so the persistent grid) need."""
    import tc_runtime as tc

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs a Hopper GPU (TMA, wgmma)")
    mb, nb, kb, warps, stages = cfg
    m, n, k = size
    a, b = _rand(m, k), _rand(k, n)
    c = torch.empty(m, n, device="cuda")
    conf = tc.config({"MB": mb, "NB": nb, "KB": kb}, num_warps=warps, num_stages=stages, options={"persistent": True})
    kern = tc.kernel(MASKED, device="cuda", autotune_configs=[conf], fp32_dot="tf32")
    kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, a.stride(0), b.stride(0), c.stride(0),
         grid=lambda opt: (tc.cdiv(m, mb), tc.cdiv(n, nb)))
    torch.cuda.synchronize()
    _check(c, a, b)
    assert kern.info["persistent"] is True and kern.info["num_warps"] == warps
