"""Layer normalization over the trailing dimensions (torch.nn.functional.layer_norm), forward
and backward in tc kernels: a row per program for y and dx, a column block per program (looping
over the rows, no atomics) for the weight and bias gradients."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch.autograd.function import once_differentiable

import tc_runtime as tc

from ..devices import FLOAT_DTYPES, acc_dtype, acc_type, check_tensor, device_of, launch, tc_type
from ..library import get_kernel, rows_num_warps
from .rows import as_rows, row_stride

OP = "tc_torch.layer_norm"
#: A row is held in one tile of next_power_of_2(N) elements: N up to this.
MAX_N = 65536
#: Tile of the weight/bias gradient kernel (rows x columns).
DW_BLOCK_M, DW_BLOCK_N = 32, 32


def _defines(dtype: torch.dtype, n: int, has_w: bool, has_b: bool) -> dict[str, object]:
    return {"TYPE": tc_type(dtype, OP, FLOAT_DTYPES), "ACC": acc_type(dtype),
            "BLOCK": tc.next_power_of_2(max(n, 1)), "HAS_W": int(has_w), "HAS_B": int(has_b),
            "BLOCK_M": DW_BLOCK_M, "BLOCK_N": DW_BLOCK_N}


def layer_norm_forward(x: torch.Tensor, n: int, w: torch.Tensor | None, b: torch.Tensor | None,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, rstd): y like x (contiguous), mean and rstd per row in acc_dtype."""
    device = device_of([x] + [v for v in (w, b) if v is not None], OP)
    rows = as_rows(x, n, OP)
    m = rows.shape[0]
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    mean = torch.empty(m, dtype=acc_dtype(x.dtype), device=x.device)
    rstd = torch.empty_like(mean)
    if y.numel():
        d = _defines(x.dtype, n, w is not None, b is not None)
        k = get_kernel("layer_norm", "layer_norm_forward", device, d,
                       num_warps=rows_num_warps(int(str(d["BLOCK"]))))
        yr = y.view(-1, n)
        launch(k, device, (m,), yr, rows, w if w is not None else rows,
               b if b is not None else rows, mean, rstd, row_stride(yr), row_stride(rows), m, n,
               float(eps))
    return y, mean, rstd


def layer_norm_backward(dy: torch.Tensor, x: torch.Tensor, n: int, w: torch.Tensor | None,
                        has_b: bool, mean: torch.Tensor, rstd: torch.Tensor, need_dx: bool,
                        need_dw: bool, need_db: bool
                        ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    device = device_of([dy, x, mean, rstd], OP)
    rows = as_rows(x, n, OP)
    dyr = as_rows(dy, n, OP)
    m = rows.shape[0]
    d = _defines(x.dtype, n, w is not None, has_b)
    dx = dw = db = None
    if need_dx:
        dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        if dx.numel():
            k = get_kernel("layer_norm", "layer_norm_backward_dx", device, d,
                           num_warps=rows_num_warps(int(str(d["BLOCK"]))))
            dxr = dx.view(-1, n)
            launch(k, device, (m,), dxr, dyr, rows, w if w is not None else rows, mean, rstd,
                   row_stride(dxr), row_stride(dyr), row_stride(rows), m, n)
    if need_dw or need_db:
        dw = torch.zeros(n, dtype=x.dtype, device=x.device) if w is not None else None
        db = torch.zeros(n, dtype=x.dtype, device=x.device) if has_b else None
        if m and n:
            k = get_kernel("layer_norm", "layer_norm_backward_dwdb", device, d, num_warps=4)
            launch(k, device, (tc.cdiv(n, DW_BLOCK_N),), dw if dw is not None else rows,
                   db if db is not None else rows, dyr, rows, mean, rstd, row_stride(dyr),
                   row_stride(rows), m, n)
    return dx, dw, db


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, n: int, w: torch.Tensor | None, b: torch.Tensor | None,
                eps: float) -> torch.Tensor:
        y, mean, rstd = layer_norm_forward(x, n, w, b, eps)
        ctx.save_for_backward(x, w, mean, rstd)
        ctx.n, ctx.has_b = n, b is not None
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, None,
                                                     torch.Tensor | None, torch.Tensor | None,
                                                     None]:
        x, w, mean, rstd = ctx.saved_tensors
        need = ctx.needs_input_grad
        dx, dw, db = layer_norm_backward(dy.to(x.dtype), x, ctx.n, w, ctx.has_b, mean, rstd,
                                         need[0], need[2], need[3])
        return dx, None, dw if need[2] else None, db if need[3] else None, None


def _shape(normalized_shape: object) -> tuple[int, ...]:
    if isinstance(normalized_shape, int) and not isinstance(normalized_shape, bool):
        return (normalized_shape,)
    if isinstance(normalized_shape, (tuple, list, torch.Size)) and all(
            isinstance(s, int) and not isinstance(s, bool) for s in normalized_shape):
        return tuple(normalized_shape)
    raise TypeError(f"{OP}: normalized_shape must be an int or a tuple of ints, got "
                    f"{normalized_shape!r}")


def layer_norm(x: torch.Tensor, normalized_shape: int | Sequence[int],
               weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5) -> torch.Tensor:
    """torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps), differentiable in
    x, weight and bias; float32, float16, bfloat16, float64, computed in float32 (float64 for
    float64). The normalized size (the product of normalized_shape) may be up to 65536."""
    x = check_tensor(x, OP, "x")
    shape = _shape(normalized_shape)
    tc_type(x.dtype, OP, FLOAT_DTYPES)
    if not shape or tuple(x.shape[x.dim() - len(shape):]) != shape or len(shape) > x.dim():
        raise ValueError(f"{OP}: normalized_shape {shape} must be the trailing dimensions of x "
                         f"(shape {tuple(x.shape)})")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            p = check_tensor(p, OP, name)
            if tuple(p.shape) != shape:
                raise ValueError(f"{OP}: {name} must have shape {shape}, got {tuple(p.shape)}")
            if p.dtype != x.dtype:
                raise TypeError(f"{OP}: {name} has dtype {p.dtype} but x has {x.dtype}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps >= 0:
        raise ValueError(f"{OP}: eps must be a non-negative number, got {eps!r}")
    device_of([x] + [p for p in (weight, bias) if p is not None], OP)
    n = math.prod(shape)
    if n > MAX_N:
        raise ValueError(f"{OP}: the normalized size {n} is more than this kernel holds in one "
                         f"tile ({MAX_N})")
    w = weight.contiguous().view(-1) if weight is not None else None
    b = bias.contiguous().view(-1) if bias is not None else None
    grads = torch.is_grad_enabled() and any(
        v is not None and v.requires_grad for v in (x, weight, bias))
    if not grads:
        return layer_norm_forward(x, n, w, b, float(eps))[0]
    apply: Any = _LayerNorm.apply
    out: torch.Tensor = apply(x, n, w, b, float(eps))
    return out
