"""Matrix transposition: the spec's kernel (`*?(checky)py = ^(*?(checkx)px)`) as a differentiable
op returning a contiguous transposed copy, tile sizes auto-tuned per (M, N) on the GPU."""

from __future__ import annotations

from typing import Any

import torch

import tc_runtime as tc

from ..devices import (FLOAT_DTYPES, INT32_LIMIT, check_extent, check_tensor, cuda_index, device_of,
                       launch, on_cuda, tc_type)
from ..library import get_kernel
from .first_order import first_order

OP = "tc_torch.transpose"

#: The 2020 runnable example's space: TM, TN in {32, 64, 128}, 4 warps; and 64 x 64 with 2 warps
#: and 128 x 128 with 8. The tile goes through shared memory with 16-byte global accesses of whole
#: 128-byte rows on both sides (tc_opt/transpose_layout.py); on an H100 the best were 128 x 128 /
#: 8 warps for fp16 16384^2 and 64 x 64 (2 or 4 warps) for fp32 8192^2.
CONFIGS = [tc.config(defines={"TM": tm, "TN": tn}, num_warps=4)
           for tm in (32, 64, 128) for tn in (32, 64, 128)] + [
    tc.config(defines={"TM": 64, "TN": 64}, num_warps=2),
    tc.config(defines={"TM": 128, "TN": 128}, num_warps=8)]
CPU_DEFINES = {"TM": 32, "TN": 32}
#: The GPU kernels made so far, by (dtype, device index): the fast path's look-up.
_KERNELS: dict[tuple[torch.dtype, int], tc.Kernel] = {}
#: The largest M and N the grid allows (with the smallest tiles, 32 x 32 ... see transpose()).
MAX_M, MAX_N = 65535 * 128, 65535 * 32


def transpose_out(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """y = x^T for a 2-D x and a contiguous y of shape x.shape[::-1]. No autograd."""
    check_tensor(y, OP, "y")
    check_tensor(x, OP, "x")
    if x.dim() != 2 or tuple(y.shape) != tuple(x.shape[::-1]) or y.dtype != x.dtype \
            or not y.is_contiguous():
        raise ValueError(f"{OP}: transpose_out needs a 2-D x and a contiguous y of its dtype and "
                         f"transposed shape, got x {tuple(x.shape)} {x.dtype} and y "
                         f"{tuple(y.shape)} {y.dtype}" + ("" if y.is_contiguous() else " (not contiguous)"))
    device = device_of([y, x], OP)
    m, n = x.shape
    if x.numel() == 0:
        return y
    if x.stride(1) != 1 and n > 1:
        x = x.contiguous()
    ldx = int(x.stride(0)) if m > 1 else max(n, 1)
    check_extent(OP, x, y)
    defines: dict[str, object] = {"TYPE": tc_type(x.dtype, OP, FLOAT_DTYPES)}
    if device.type == "cpu":
        kern = get_kernel("transpose", "transpose", device, {**defines, **CPU_DEFINES})
    else:
        kern = get_kernel("transpose", "transpose", device, defines, configs=CONFIGS,
                          key=["M", "N"])
        if on_cuda(device):
            _KERNELS[x.dtype, device.index] = kern

    def grid(opt: tc.Options) -> tuple[int, int]:
        return tc.cdiv(m, opt.TM), tc.cdiv(n, opt.TN)

    launch(kern, device, grid, x, y, m, n, ldx, max(m, 1))
    return y


def _fast_transpose(x: torch.Tensor) -> torch.Tensor | None:
    """_transpose(x) for a contiguous, non-empty 2-D x on a GPU whose kernel was made before (the
    same launch without the checks of the first call); else None."""
    i = cuda_index(x)
    if i < 0 or not x.is_contiguous():
        return None
    shape = x.shape
    if len(shape) != 2:
        return None
    m, n = shape
    k = _KERNELS.get((x.dtype, i))
    if k is None or not 0 < m * n < INT32_LIMIT or m > MAX_M or n > MAX_N:
        return None
    y = x.new_empty((n, m))

    def grid(opt: tc.Options) -> tuple[int, int]:
        return tc.cdiv(m, opt.TM), tc.cdiv(n, opt.TN)

    k(x.data_ptr(), y.data_ptr(), m, n, n, m, grid=grid)  # leading dimensions n and m
    return y


def _transpose(x: torch.Tensor) -> torch.Tensor:
    y = _fast_transpose(x)
    if y is not None:
        return y
    y = torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, device=x.device)
    return transpose_out(y, x)


class _Transpose(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return _transpose(x)

    @staticmethod
    @first_order(linear=True)
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        return _transpose(dy)


def transpose(x: torch.Tensor) -> torch.Tensor:
    """The transpose of a 2-D tensor as a new contiguous tensor (float32, float16, bfloat16,
    float64), differentiable. Unlike torch's x.t() (a view), this moves the data."""
    if isinstance(x, torch.Tensor) and not (x.requires_grad and torch.is_grad_enabled()):
        y = _fast_transpose(x)  # the common case on a GPU; anything else is checked below
        if y is not None:
            return y
    x = check_tensor(x, OP, "x")
    if x.dim() != 2:
        raise ValueError(f"{OP}: x must be a 2-D matrix, got shape {tuple(x.shape)}")
    tc_type(x.dtype, OP, FLOAT_DTYPES)
    device_of([x], OP)
    if x.shape[0] > MAX_M or x.shape[1] > MAX_N:
        raise ValueError(f"{OP}: shape {tuple(x.shape)} needs more programs than the grid allows")
    if not (x.requires_grad and torch.is_grad_enabled()):
        return _transpose(x)
    apply: Any = _Transpose.apply
    out: torch.Tensor = apply(x)
    return out
