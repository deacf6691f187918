# mypy: ignore-errors
"""Peers for the benchmark sweeps, in plain Triton 3.x (@triton.jit): fused softmax, the grouped
matrix multiplication of Triton's tutorial, and a tiled transpose.

Only imported where triton is installed (the GPU machine); untyped because triton is.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(y_ptr, x_ptr, stride_y, stride_x, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    block = triton.next_power_of_2(n)
    warps = 16 if block >= 4096 else 8 if block >= 2048 else 4
    y = torch.empty_like(x)
    _softmax_kernel[(m,)](y, x, y.stride(0), x.stride(0), n, BLOCK=block, num_warps=warps)
    return y


def _mm_configs():
    out = []
    for bm, bn, bk, stages, warps in ((128, 256, 64, 3, 8), (64, 256, 32, 4, 4),
                                      (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
                                      (64, 128, 32, 4, 4), (128, 32, 32, 4, 4),
                                      (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)):
        out.append(triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_stages=stages,
                                 num_warps=warps))
    return out


@triton.autotune(configs=_mm_configs(), key=["M", "N", "K"])
@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    width = GROUP * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP, GROUP)
    pid_m = group_id * GROUP + (pid % group_size)
    pid_n = (pid % width) // group_size
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    pa = a_ptr + rm[:, None] * s_am + rk[None, :] * s_ak
    pb = b_ptr + rk[:, None] * s_bk + rn[None, :] * s_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(pa, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(pb, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        pa += BK * s_ak
        pb += BK * s_bk
    cm = pid_m * BM + tl.arange(0, BM)
    cn = pid_n * BN + tl.arange(0, BN)
    pc = c_ptr + cm[:, None] * s_cm + cn[None, :] * s_cn
    tl.store(pc, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def triton_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)

    def grid(meta):
        return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)

    _matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1))
    return c


@triton.autotune(configs=[triton.Config({"TM": tm, "TN": tn}, num_warps=4)
                          for tm in (32, 64, 128) for tn in (32, 64, 128)], key=["M", "N"])
@triton.jit
def _transpose_kernel(x_ptr, y_ptr, M, N, ldx, ldy, TM: tl.constexpr, TN: tl.constexpr):
    rm = tl.program_id(0) * TM + tl.arange(0, TM)
    rn = tl.program_id(1) * TN + tl.arange(0, TN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * ldx + rn[None, :], mask=mask)
    tl.store(y_ptr + rn[None, :] * ldy + rm[:, None], x, mask=mask)


def triton_transpose(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    y = torch.empty((n, m), device=x.device, dtype=x.dtype)

    def grid(meta):
        return (triton.cdiv(m, meta["TM"]), triton.cdiv(n, meta["TN"]))

    _transpose_kernel[grid](x, y, m, n, x.stride(0), y.stride(0))
    return y
