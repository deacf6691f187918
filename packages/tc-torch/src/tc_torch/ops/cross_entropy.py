"""Cross-entropy of logits against int64 class indices, forward and backward in tc kernels.

The forward kernel gives the loss of every row (and saves its log-sum-exp); the backward kernel
writes (softmax - one_hot) * dloss. The mean/sum reduction of torch's default is a sum over the
row losses on top, so its gradient reaches the backward kernel as a broadcast (stride 0) vector."""

from __future__ import annotations

from typing import Any

import torch

import tc_runtime as tc

from ..devices import (CONTIGUOUS, FLOAT_DTYPES, INT32_LIMIT, acc_dtype, acc_type, check_extent,
                       check_tensor, cuda_index, device_of, launch, on_cuda, tc_type)
from ..library import get_kernel, rows_num_warps
from .first_order import first_order
from .rows import row_stride

OP = "tc_torch.cross_entropy"
REDUCTIONS = ("mean", "sum", "none")
#: Chunk of a row per loop iteration (GPU, interpreter).
BLOCK = 4096
CPU_BLOCK = 1024


#: The GPU kernels chosen so far, by (dtype, N, ignore_index, device index): the fast paths'
#: look-up, filled by the general paths.
_FORWARD: dict[tuple[torch.dtype, int, int, int], tc.Kernel] = {}
_BACKWARD: dict[tuple[torch.dtype, int, int, int], tc.Kernel] = {}


def _kernel(name: str, dtype: torch.dtype, n: int, ignore_index: int,
            device: torch.device) -> tc.Kernel:
    block = min(tc.next_power_of_2(max(n, 1)), CPU_BLOCK if device.type == "cpu" else BLOCK)
    defines = {"TYPE": tc_type(dtype, OP, FLOAT_DTYPES), "ACC": acc_type(dtype), "BLOCK": block,
               "IGNORE": _literal(ignore_index)}
    k = get_kernel("cross_entropy", name, device, defines, num_warps=rows_num_warps(block))
    if on_cuda(device):
        memo = _FORWARD if name == "cross_entropy_forward" else _BACKWARD
        memo[dtype, n, ignore_index, device.index] = k
    return k


#: The int64 range of the targets (and so of ignore_index).
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


def _literal(value: int) -> str:
    """`value` as a C expression of type long: -2**63 has no literal (its magnitude does not fit
    in a long), so it is written as a difference."""
    return f"({value + 1} - 1)" if value == INT64_MIN else f"({value})"


def _fast_forward(x: torch.Tensor, t: torch.Tensor,
                  ignore_index: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """cross_entropy_forward for contiguous, non-empty 2-D logits and (M,) int64 targets on a GPU
    whose kernel was chosen before (the same launch without the checks of the first call); else
    None."""
    i = cuda_index(x)
    if i < 0 or cuda_index(t) != i or not x.is_contiguous() or not t.is_contiguous() \
            or t.dtype != torch.int64:
        return None
    shape = x.shape
    if len(shape) != 2:
        return None
    m, n = shape
    k = _FORWARD.get((x.dtype, n, ignore_index, i))
    if k is None or not 0 < m * n < INT32_LIMIT or t.shape != (m,):
        return None
    loss = x.new_empty(m, dtype=acc_dtype(x.dtype))
    lse = torch.empty_like(loss)
    k(loss.data_ptr(), lse.data_ptr(), x.data_ptr(), t.data_ptr(), n, m, n, grid=(m,))
    return loss, lse


def cross_entropy_forward(x: torch.Tensor, t: torch.Tensor,
                          ignore_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss per row, log-sum-exp per row), both in acc_dtype(x.dtype)."""
    fast = _fast_forward(x, t, ignore_index)
    if fast is not None:
        return fast
    device = device_of([x, t], OP)
    m, n = x.shape
    loss = torch.empty(m, dtype=acc_dtype(x.dtype), device=x.device)
    lse = torch.empty_like(loss)
    if m:
        k = _kernel("cross_entropy_forward", x.dtype, n, ignore_index, device)
        launch(k, device, (m,), loss, lse, x, t, row_stride(x), m, n)
    return loss, lse


def cross_entropy_backward(dloss: torch.Tensor, x: torch.Tensor, t: torch.Tensor,
                           lse: torch.Tensor, ignore_index: int) -> torch.Tensor:
    i = cuda_index(x)
    if i >= 0 and x.is_contiguous() and dloss.dtype == lse.dtype and cuda_index(dloss) == i \
            and cuda_index(t) == i and cuda_index(lse) == i:  # the fast path, as _fast_forward's
        shape = x.shape
        if len(shape) == 2:
            m, n = shape
            k = _BACKWARD.get((x.dtype, n, ignore_index, i))
            if k is not None and m and n:
                dx = torch.empty_like(x, memory_format=CONTIGUOUS)
                stride = int(dloss.stride(0)) if dloss.dim() == 1 else 0
                xp = x.data_ptr()
                k(dx.data_ptr(), xp, t.data_ptr(), lse.data_ptr(), dloss.data_ptr(), n, n,
                  stride, m, n, grid=(m,))
                return dx
    device = device_of([dloss, x, t, lse], OP)
    m, n = x.shape
    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m and n:
        dl = dloss.to(lse.dtype)
        stride = int(dl.stride(0)) if dl.dim() == 1 else 0
        k = _kernel("cross_entropy_backward", x.dtype, n, ignore_index, device)
        launch(k, device, (m,), dx, x, t, lse, dl, row_stride(dx), row_stride(x), stride, m, n)
    return dx


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, t: torch.Tensor, ignore_index: int) -> torch.Tensor:
        loss, lse = cross_entropy_forward(x, t, ignore_index)
        ctx.save_for_backward(x, t, lse)
        ctx.ignore_index = ignore_index
        ctx.mark_non_differentiable(lse)
        return loss

    @staticmethod
    @first_order
    def backward(ctx: Any, dloss: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        x, t, lse = ctx.saved_tensors
        return cross_entropy_backward(dloss, x, t, lse, ctx.ignore_index), None, None


def _check(logits: object, target: object, ignore_index: object,
           reduction: object) -> tuple[torch.Tensor, torch.Tensor]:
    x = check_tensor(logits, OP, "logits")
    t = check_tensor(target, OP, "target")
    tc_type(x.dtype, OP, FLOAT_DTYPES)
    if t.dtype != torch.int64:
        raise TypeError(f"{OP}: target must hold int64 class indices, got {t.dtype}")
    if x.dim() != 2:
        raise ValueError(f"{OP}: logits must be 2-D (rows, classes), got shape {tuple(x.shape)}")
    if t.shape != (x.shape[0],):
        raise ValueError(f"{OP}: target must have shape ({x.shape[0]},) for logits of shape "
                         f"{tuple(x.shape)}, got {tuple(t.shape)}")
    if not isinstance(ignore_index, int) or isinstance(ignore_index, bool):
        raise TypeError(f"{OP}: ignore_index must be an int, got {ignore_index!r}")
    if not INT64_MIN <= ignore_index <= INT64_MAX:
        raise ValueError(f"{OP}: ignore_index {ignore_index} does not fit in int64, the dtype of "
                         f"the targets")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{OP}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    device = device_of([x, t], OP)
    if x.shape[1] == 0:
        raise ValueError(f"{OP}: logits have no classes (shape {tuple(x.shape)})")
    if device.type == "cpu" and t.numel():  # cheap here; on the GPU it would synchronize
        bad = (t != ignore_index) & ((t < 0) | (t >= x.shape[1]))
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise ValueError(f"{OP}: target[{i}] = {int(t[i])} is not a class index in "
                             f"[0, {x.shape[1]}) (nor ignore_index={ignore_index})")
    if x.numel() and x.stride(1) != 1:
        x = x.contiguous()
    t = t.contiguous()
    check_extent(OP, x)
    return x, t


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,
                  reduction: str = "mean") -> torch.Tensor:
    """torch.nn.functional.cross_entropy(logits, target) for 2-D logits (rows, classes) and int64
    targets: reduction "mean" (over the rows not ignored), "sum" or "none"; rows whose target is
    ignore_index count 0. Any number of classes; float32, float16, bfloat16, float64; computed
    in float32 (float64 for float64). On the GPU a target out of range gives a NaN loss (the
    check would synchronize); on the CPU it is refused."""
    if type(ignore_index) is int and type(reduction) is str and reduction in REDUCTIONS \
            and isinstance(logits, torch.Tensor) and isinstance(target, torch.Tensor) \
            and not (logits.requires_grad and torch.is_grad_enabled()):
        fast = _fast_forward(logits, target, ignore_index)  # the common case on a GPU
        if fast is not None:
            return _reduce(fast[0], target, ignore_index, reduction, logits.dtype)
    x, t = _check(logits, target, ignore_index, reduction)
    if torch.is_grad_enabled() and x.requires_grad:
        apply: Any = _CrossEntropy.apply
        loss: torch.Tensor = apply(x, t, ignore_index)
    else:
        loss = cross_entropy_forward(x, t, ignore_index)[0]
    return _reduce(loss, t, ignore_index, reduction, x.dtype)


def _reduce(loss: torch.Tensor, t: torch.Tensor, ignore_index: int, reduction: str,
            dtype: torch.dtype) -> torch.Tensor:
    """The row losses reduced as `reduction` says, in `dtype`. (The mean divides by the int64
    count of rows not ignored: the division converts it, as .to(loss.dtype) would.)"""
    if reduction == "none":
        return loss if loss.dtype == dtype else loss.to(dtype)
    total = loss.sum()
    if reduction != "sum":
        total = total / (t != ignore_index).sum()
    return total if total.dtype == dtype else total.to(dtype)
