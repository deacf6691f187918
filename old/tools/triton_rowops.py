# mypy: ignore-errors
"""Triton 3.x peers of tc_torch's row kernels, written as the same algorithms as the tc kernels in
packages/tc-torch/src/tc_torch/kernels/ (issue 8 compares tc against these):

- softmax backward: one program per row holding the row in one tile, dx = y * (dy - sum(y * dy));
- layer_norm forward: one program per row, saves mean and rstd (float32);
- layer_norm backward, two stages (no atomics): programs of ROWS consecutive rows compute dx and
  sum dy * xhat and dy over their rows into [G, N] float32 partial buffers (G = cdiv(M, ROWS), ROWS
  from tc_torch's backward_rows rule, copied below); a second kernel sums the G partial rows, one
  program per BLOCK_N columns (layer_norm_backward_dx and layer_norm_backward_reduce);
- cross_entropy forward: one program per row walking the row in chunks with an online maximum;
  backward: dx = (exp(x - lse) - onehot) * dloss per chunk.

Launch parameters follow the tc side (num_warps from the same rule, the same chunk and tile sizes).
Only imported where triton is installed (the GPU machine); untyped because triton is.
"""

import torch
import triton
import triton.language as tl


def _warps(block):
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


@triton.jit
def _softmax_bwd_kernel(dx_ptr, dy_ptr, y_ptr, s_dx, s_dy, s_y, N, BLOCK: tl.constexpr):
    m = tl.program_id(0)
    n = tl.arange(0, BLOCK)
    mask = n < N
    y = tl.load(y_ptr + m * s_y + n, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + m * s_dy + n, mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(y * dy, axis=0)
    tl.store(dx_ptr + m * s_dx + n, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=mask)


def softmax_backward(dy, y):
    m, n = y.shape
    dx = torch.empty_like(y)
    block = triton.next_power_of_2(n)
    _softmax_bwd_kernel[(m,)](dx, dy, y, dx.stride(0), dy.stride(0), y.stride(0), n, BLOCK=block,
                              num_warps=_warps(block))
    return dx


@triton.jit
def _ln_fwd_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, s_y, s_x, N, eps,
                   BLOCK: tl.constexpr):
    m = tl.program_id(0)
    n = tl.arange(0, BLOCK)
    mask = n < N
    x = tl.load(x_ptr + m * s_x + n, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + n, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + n, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(y_ptr + m * s_y + n, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + m, mean)
    tl.store(rstd_ptr + m, rstd)


def layer_norm_forward(x, w, b, eps):
    m, n = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(m, device=x.device, dtype=torch.float32)
    rstd = torch.empty_like(mean)
    block = triton.next_power_of_2(n)
    _ln_fwd_kernel[(m,)](y, x, w, b, mean, rstd, y.stride(0), x.stride(0), n, eps, BLOCK=block,
                         num_warps=_warps(block))
    return y, mean, rstd


# tc_torch.ops.layer_norm's backward_rows and reduce_tile (the same constants)
_BWD_PARTIAL_ELEMS = 1 << 20
_BWD_MIN_PROGRAMS, _BWD_MAX_PROGRAMS = 256, 1024
_REDUCE_TILE = 2048


def _backward_rows(m, block):
    programs = min(_BWD_MAX_PROGRAMS, max(_BWD_MIN_PROGRAMS, _BWD_PARTIAL_ELEMS // max(block, 1)))
    return max(1, triton.cdiv(m, programs))


def _reduce_tile(block):
    block_n = min(32, max(8, block // 128))
    return _REDUCE_TILE // block_n, block_n


@triton.jit
def _ln_bwd_dx_kernel(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dwp_ptr, dbp_ptr, s_dx,
                      s_dy, s_x, M, N, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    n = tl.arange(0, BLOCK)
    mask = n < N
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    db = tl.zeros((BLOCK,), dtype=tl.float32)
    start = pid * ROWS
    end = tl.minimum(start + ROWS, M)
    for m in range(start, end):
        mean = tl.load(mean_ptr + m)
        rstd = tl.load(rstd_ptr + m)
        x = tl.load(x_ptr + m * s_x + n, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + m * s_dy + n, mask=mask, other=0.0).to(tl.float32)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        dw += dy * xhat
        db += dy
        g = dy * tl.load(w_ptr + n, mask=mask, other=0.0).to(tl.float32)
        c1 = tl.sum(xhat * g, axis=0) / N
        c2 = tl.sum(g, axis=0) / N
        dx = (g - c2 - xhat * c1) * rstd
        tl.store(dx_ptr + m * s_dx + n, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dwp_ptr + pid * N + n, dw, mask=mask)
    tl.store(dbp_ptr + pid * N + n, db, mask=mask)


@triton.jit
def _ln_bwd_reduce_kernel(dw_ptr, db_ptr, dwp_ptr, dbp_ptr, G, N, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr):
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, G, BLOCK_M):
        rg = start + tl.arange(0, BLOCK_M)
        mask = (rg[:, None] < G) & (rn[None, :] < N)
        off = rg[:, None] * N + rn[None, :]
        dw += tl.load(dwp_ptr + off, mask=mask, other=0.0)
        db += tl.load(dbp_ptr + off, mask=mask, other=0.0)
    tl.store(dw_ptr + rn, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=rn < N)
    tl.store(db_ptr + rn, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=rn < N)


def layer_norm_backward(dy, x, w, mean, rstd):
    m, n = x.shape
    dx = torch.empty_like(x)
    dw = torch.empty(n, device=x.device, dtype=x.dtype)
    db = torch.empty_like(dw)
    block = triton.next_power_of_2(n)
    rows = _backward_rows(m, block)
    g = triton.cdiv(m, rows)
    dwp = torch.empty((g, n), device=x.device, dtype=torch.float32)
    dbp = torch.empty_like(dwp)
    _ln_bwd_dx_kernel[(g,)](dx, dy, x, w, mean, rstd, dwp, dbp, dx.stride(0), dy.stride(0),
                            x.stride(0), m, n, BLOCK=block, ROWS=rows, num_warps=_warps(block))
    block_m, block_n = _reduce_tile(block)
    _ln_bwd_reduce_kernel[(triton.cdiv(n, block_n),)](dw, db, dwp, dbp, g, n, BLOCK_M=block_m,
                                                       BLOCK_N=block_n, num_warps=4)
    return dx, dw, db


@triton.jit
def _ce_fwd_kernel(loss_ptr, lse_ptr, x_ptr, t_ptr, s_x, N, BLOCK: tl.constexpr):
    m = tl.program_id(0)
    row = x_ptr + m * s_x
    t = tl.load(t_ptr + m)
    mx = -float("inf")
    total = 0.0
    xt = 0.0
    for start in range(0, N, BLOCK):
        n = start + tl.arange(0, BLOCK)
        x = tl.load(row + n, mask=n < N, other=-float("inf")).to(tl.float32)
        mnew = tl.maximum(mx, tl.max(x, axis=0))
        total = total * tl.exp(mx - mnew) + tl.sum(tl.exp(x - mnew), axis=0)
        mx = mnew
        xt += tl.sum(tl.where(n == t, x, 0.0), axis=0)
    lse = mx + tl.log(total)
    tl.store(loss_ptr + m, lse - xt)
    tl.store(lse_ptr + m, lse)


@triton.jit
def _ce_bwd_kernel(dx_ptr, x_ptr, t_ptr, lse_ptr, dl_ptr, s_dx, s_x, N, BLOCK: tl.constexpr):
    m = tl.program_id(0)
    t = tl.load(t_ptr + m)
    lse = tl.load(lse_ptr + m)
    g = tl.load(dl_ptr + m)
    for start in range(0, N, BLOCK):
        n = start + tl.arange(0, BLOCK)
        mask = n < N
        x = tl.load(x_ptr + m * s_x + n, mask=mask, other=-float("inf")).to(tl.float32)
        p = tl.exp(x - lse)
        dx = (p - tl.where(n == t, 1.0, 0.0)) * g
        tl.store(dx_ptr + m * s_dx + n, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def cross_entropy_forward(x, t, block=4096):
    m, n = x.shape
    loss = torch.empty(m, device=x.device, dtype=torch.float32)
    lse = torch.empty_like(loss)
    block = min(triton.next_power_of_2(n), block)
    _ce_fwd_kernel[(m,)](loss, lse, x, t, x.stride(0), n, BLOCK=block, num_warps=_warps(block))
    return loss, lse


def cross_entropy_backward(dloss, x, t, lse, block=4096):
    m, n = x.shape
    dx = torch.empty_like(x)
    block = min(triton.next_power_of_2(n), block)
    _ce_bwd_kernel[(m,)](dx, x, t, lse, dloss, dx.stride(0), x.stride(0), n, BLOCK=block,
                         num_warps=_warps(block))
    return dx
