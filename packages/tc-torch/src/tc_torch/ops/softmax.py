"""Softmax along the last dimension: the fused-softmax tutorial's kernel as a differentiable op.

Rows up to MAX_BLOCK elements are held in one next_power_of_2(N) tile (the spec's kernel); longer
rows use the looped kernels (an online max/sum pass, then a pass that writes)."""

from __future__ import annotations

from typing import Any

import torch

import tc_runtime as tc

from ..devices import (CONTIGUOUS, FLOAT_DTYPES, INT32_LIMIT, acc_type, check_tensor, cuda_index,
                       device_of, launch, on_cuda, tc_type)
from ..library import get_kernel, rows_num_warps
from .first_order import first_order
from .rows import as_rows, row_stride

#: Longest row held in one tile; longer rows walk the row in chunks of LOOP_BLOCK.
MAX_BLOCK = 16384
LOOP_BLOCK = 4096
#: The same on the interpreter, where big tiles only cost time.
CPU_MAX_BLOCK = 4096
CPU_LOOP_BLOCK = 1024


def plan(n: int, device: torch.device) -> tuple[bool, int]:
    """(looped, BLOCK) for rows of n elements."""
    cpu = device.type == "cpu"
    block = tc.next_power_of_2(max(n, 1))
    limit = CPU_MAX_BLOCK if cpu else MAX_BLOCK
    if block <= limit:
        return False, block
    return True, CPU_LOOP_BLOCK if cpu else LOOP_BLOCK


#: The GPU kernels chosen so far, by (dtype, N, device index): the fast paths' look-up (filled
#: by the general paths, so that a later call with the same key skips the plan and the checks).
_FORWARD: dict[tuple[torch.dtype, int, int], tc.Kernel] = {}
_BACKWARD: dict[tuple[torch.dtype, int, int], tc.Kernel] = {}


def _kernel(file: str, base: str, dtype: torch.dtype, n: int, device: torch.device,
            op: str) -> tc.Kernel:
    looped, block = plan(n, device)
    defines = {"TYPE": tc_type(dtype, op, FLOAT_DTYPES), "ACC": acc_type(dtype), "BLOCK": block}
    k = get_kernel(file, base + ("_looped" if looped else ""), device, defines,
                   num_warps=rows_num_warps(block))
    if on_cuda(device):
        (_FORWARD if file == "softmax" else _BACKWARD)[dtype, n, device.index] = k
    return k


def _fast_forward(x: torch.Tensor) -> torch.Tensor | None:
    """softmax_forward(x) for a contiguous, non-empty x on a GPU whose kernel was chosen before
    (the same kernel and arguments, without the checks the first call did); else None."""
    i = cuda_index(x)
    if i < 0 or not x.is_contiguous():
        return None
    shape = x.shape
    if not shape:
        return None
    n = shape[-1]
    k = _FORWARD.get((x.dtype, n, i))
    numel = x.numel()
    if k is None or not 0 < numel < INT32_LIMIT:  # (the extent of a contiguous tensor: numel)
        return None
    y = torch.empty_like(x, memory_format=CONTIGUOUS)
    m = numel // n
    k(y.data_ptr(), x.data_ptr(), n, n, m, n, grid=(m,))  # row strides n (any for one row)
    return y


def softmax_forward(x: torch.Tensor) -> torch.Tensor:
    """softmax(x, dim=-1) without autograd; the result is contiguous."""
    y = _fast_forward(x)
    if y is not None:
        return y
    device = device_of([x], "tc_torch.softmax")
    n = x.shape[-1] if x.dim() else 1
    rows = as_rows(x, n, "tc_torch.softmax")
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    m = rows.shape[0]
    k = _kernel("softmax", "softmax", x.dtype, n, device, "tc_torch.softmax")
    if y.numel():
        yr = y.view(-1, n)
        launch(k, device, (m,), yr, rows, row_stride(yr), row_stride(rows), m, n)
    return y


def softmax_backward(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The gradient of softmax(x, dim=-1) given the output y and the output gradient dy."""
    i = cuda_index(y)
    if i >= 0 and cuda_index(dy) == i and y.is_contiguous() and dy.is_contiguous() \
            and y.dtype == dy.dtype:  # the fast path, as in _fast_forward
        shape = y.shape
        if shape and dy.shape == shape:
            n = shape[-1]
            k = _BACKWARD.get((y.dtype, n, i))
            numel = y.numel()
            if k is not None and 0 < numel < INT32_LIMIT:
                dx = torch.empty_like(y, memory_format=CONTIGUOUS)
                m = numel // n
                k(dx.data_ptr(), dy.data_ptr(), y.data_ptr(), n, n, n, m, n, grid=(m,))
                return dx
    device = device_of([dy, y], "tc_torch.softmax backward")
    n = y.shape[-1] if y.dim() else 1
    dyr = as_rows(dy, n, "tc_torch.softmax backward")
    yr = as_rows(y, n, "tc_torch.softmax backward")
    dx = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    m = yr.shape[0]
    k = _kernel("softmax_backward", "softmax_backward", y.dtype, n, device,
                "tc_torch.softmax backward")
    if dx.numel():
        dxr = dx.view(-1, n)
        launch(k, device, (m,), dxr, dyr, yr, row_stride(dxr), row_stride(dyr), row_stride(yr),
               m, n)
    return dx


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = softmax_forward(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @first_order
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return softmax_backward(dy if dy.dtype == y.dtype else dy.to(y.dtype), y)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of x along its last dimension (any length; float32, float16, bfloat16, float64),
    differentiable; computed in float32 (float64 for float64)."""
    if type(dim) is int and dim == -1 and isinstance(x, torch.Tensor) \
            and not (x.requires_grad and torch.is_grad_enabled()):
        y = _fast_forward(x)  # the common case on a GPU; anything else is checked below
        if y is not None:
            return y
    x = check_tensor(x, "tc_torch.softmax", "x")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"tc_torch.softmax: dim must be an int, got {type(dim).__name__}")
    if x.dim() == 0:
        raise ValueError("tc_torch.softmax: x must have at least one dimension")
    if not -x.dim() <= dim < x.dim():
        raise ValueError(f"tc_torch.softmax: dim={dim} is out of range for a {x.dim()}-D tensor "
                         f"(tc_torch.softmax works along the last dimension, dim=-1)")
    if dim not in (-1, x.dim() - 1):
        raise ValueError(f"tc_torch.softmax works along the last dimension only (dim=-1), got "
                         f"dim={dim} for a {x.dim()}-D tensor; move the axis with "
                         f"x.transpose({dim}, -1) first")
    device_of([x], "tc_torch.softmax")
    tc_type(x.dtype, "tc_torch.softmax", FLOAT_DTYPES)
    if not (x.requires_grad and torch.is_grad_enabled()):
        return softmax_forward(x)
    apply: Any = _Softmax.apply
    out: torch.Tensor = apply(x)
    return out
