"""Tensor-core dots on the GPU: the spec's matmul kernels (and a K-tail masked one) compiled with
mma.sync, ldmatrix and cp.async pipelining, against torch.matmul in float32."""

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
DTYPES = {"half": "float16", "bf16": "bfloat16"}

#: A matmul with masks inside the loop (a K tail, ragged M and N): masked-off vectors are
#: cp.async'ed with src-size 0 (zero fill) when K is specialized divisible by 16.
MASKED = """
__global__ void dot(TYPE* A, TYPE* B, TYPE* C, int M, int N, int K,
                    int stride_a_0, int stride_b_0, int stride_c_0) {
  int pid_m = get_program_id(0);
  int pid_n = get_program_id(1);
  int rm[MB] = pid_m * MB + 0 ... MB;
  int rn[NB] = pid_n * NB + 0 ... NB;
  int rk[KB] = 0 ... KB;
  TYPE *pa[MB, KB] = A + (rk[newaxis, :] * 1 + rm[:, newaxis] * stride_a_0);
  TYPE *pb[KB, NB] = B + (rk[:, newaxis] * stride_b_0 + rn[newaxis, :] * 1);
  float acc[MB, NB] = 0;
  for (int k = K; k > 0; k -= KB) {
    bool ma[MB, KB] = rm[:, newaxis] < M && rk[newaxis, :] < k;
    bool mb[KB, NB] = rk[:, newaxis] < k && rn[newaxis, :] < N;
    TYPE a[MB, KB] = ma ? *pa : 0;
    TYPE b[KB, NB] = mb ? *pb : 0;
    acc += a @ b;
    pa += KB * 1;
    pb += KB * stride_b_0;
  }
  TYPE *pc[MB, NB] = C + (rm[:, newaxis] * stride_c_0 + rn[newaxis, :]);
  *? (rm[:, newaxis] < M && rn[newaxis, :] < N) pc = acc;
}
"""


def _dtype(ty: str) -> Any:
    return getattr(torch, DTYPES[ty])


def _check(c: Any, a: Any, b: Any) -> None:
    ref = a.float() @ b.float()
    torch.testing.assert_close(c.float(), ref, atol=0.1, rtol=2e-2)


def _rand(rows: int, cols: int, ty: str) -> Any:
    return (torch.randn(rows, cols, device="cuda") * 0.5).to(_dtype(ty))


def _padded(x: Any, margin: int) -> Any:
    out = torch.zeros(x.shape[0] + margin, x.shape[1] + margin, device=x.device, dtype=x.dtype)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def _pad(n: int, block: int) -> int:
    return (n + block - 1) // block * block


# (MB, NB, KB, num_warps, num_stages): the tutorial's configurations and the fast path's
CONFIGS = [(128, 128, 32, 4, 3), (64, 128, 32, 4, 3), (64, 64, 64, 4, 4), (32, 64, 64, 2, 2),
           (128, 128, 64, 8, 3), (128, 256, 32, 8, 3), (64, 64, 32, 1, 2), (16, 16, 16, 4, 1),
           (128, 64, 32, 4, 1), (128, 256, 64, 8, 4)]


@pytest.mark.parametrize("size", [(193, 327, 320), (1024, 1024, 1024), (2048, 512, 4096)])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("ty", ["half", "bf16"])
def test_tutorial_matmul(ty: str, cfg: tuple[int, int, int, int, int], size: tuple[int, int, int]) -> None:
    import tc_runtime as tc

    mb, nb, kb, warps, stages = cfg
    m, n, k = size
    kp = _pad(k, kb)  # the tutorial's loop loads whole K blocks and unmasked M, N rows: pad
    a = torch.zeros(_pad(m, mb), kp, device="cuda", dtype=_dtype(ty))
    b = torch.zeros(kp, _pad(n, nb), device="cuda", dtype=_dtype(ty))
    a[:m, :k] = _rand(m, k, ty)
    b[:k, :n] = _rand(k, n, ty)
    c = torch.empty(m, n, device="cuda", dtype=_dtype(ty))
    src = (KERNELS / "matmul_tutorial.tc").read_text()
    kern = tc.kernel(src, device="cuda", defines={"TYPE": ty, "MB": mb, "NB": nb, "KB": kb},
                     num_warps=warps, num_stages=stages)
    kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, kp, a.stride(0), b.stride(0), c.stride(0),
         grid=lambda opt: (tc.cdiv(m, mb) * tc.cdiv(n, nb),))
    torch.cuda.synchronize()
    _check(c, a[:m, :kp], b[:kp, :n])


@pytest.mark.parametrize("size", [(100, 70, 48), (257, 129, 96), (64, 64, 50), (333, 555, 777)])
@pytest.mark.parametrize("cfg", [(64, 64, 32, 4, 3), (128, 128, 32, 8, 4), (32, 32, 16, 2, 2)],
                         ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("ty", ["half", "bf16"])
def test_masked_matmul(ty: str, cfg: tuple[int, int, int, int, int], size: tuple[int, int, int]) -> None:
    import tc_runtime as tc

    mb, nb, kb, warps, stages = cfg
    m, n, k = size
    a, b = _rand(m, k, ty), _rand(k, n, ty)
    c = torch.empty(m, n, device="cuda", dtype=_dtype(ty))
    kern = tc.kernel(MASKED, device="cuda", defines={"TYPE": ty, "MB": mb, "NB": nb, "KB": kb},
                     num_warps=warps, num_stages=stages)
    kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, a.stride(0), b.stride(0), c.stride(0),
         grid=lambda opt: (tc.cdiv(m, mb), tc.cdiv(n, nb)))
    torch.cuda.synchronize()
    _check(c, a, b)


@pytest.mark.parametrize("variant", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("ty", ["half", "bf16"])
def test_fused_transposed_matmul(ty: str, variant: str) -> None:
    import tc_runtime as tc

    d = dict(DEFINES["matmul_fused_trans.tc"][variant], TYPE=ty)
    tm, tn, tk = d["TM"], d["TN"], d["TK"]
    m, n, k = 4 * tm, 3 * tn, 8 * tk
    a, b = _rand(m, k, ty), _rand(k, n, ty)
    # the kernel pre-fetches one K block past the end: store with a margin (strides say where)
    a_st = _padded(a.t() if variant[0] == "T" else a, tk)  # stored [K, M] for ^a
    b_st = _padded(b.t() if variant[1] == "T" else b, tk)  # stored [N, K] for ^b
    c = torch.empty(m, n, device="cuda", dtype=_dtype(ty))
    src = (KERNELS / "matmul_fused_trans.tc").read_text()
    kern = tc.kernel(src, device="cuda", defines=d, num_warps=4, num_stages=3, name="dot")
    kern(a_st.data_ptr(), b_st.data_ptr(), c.data_ptr(), m, n, k, a_st.stride(0), b_st.stride(0), c.stride(0),
         grid=lambda opt: (m // tm, n // tn))
    torch.cuda.synchronize()
    _check(c, a, b)


@pytest.mark.parametrize("name", ["matmul.tc", "matmul_prefetch.tc", "matmul_remat.tc"])
@pytest.mark.parametrize("ty", ["half", "bf16"])
def test_spec_matmuls(name: str, ty: str) -> None:
    import tc_runtime as tc

    d = dict(DEFINES[name]["half"], TYPE=ty)
    tm, tn, tk = d["TM"], d["TN"], d["TK"]
    m, n, k = 3 * tm, 5 * tn, 7 * tk
    a, b = _rand(m, k, ty), _rand(k, n, ty)
    c = torch.empty(m, n, device="cuda", dtype=_dtype(ty))
    kern = tc.kernel((KERNELS / name).read_text(), device="cuda", defines=d, num_warps=4, num_stages=3)
    kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, a.stride(0), b.stride(0), c.stride(0),
         grid=lambda opt: (m // tm, n // tn))
    torch.cuda.synchronize()
    _check(c, a, b)
