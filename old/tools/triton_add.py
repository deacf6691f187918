# mypy: ignore-errors
"""The peer for bandwidth comparisons: a vector add written in plain Triton 3.x (@triton.jit).

Only imported where triton is installed (the GPU machine); untyped because triton is.
"""

import torch
import triton
import triton.language as tl


def _add_kernel_src(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(y_ptr + offsets, mask=mask)
    tl.store(z_ptr + offsets, a + b, mask=mask)


_add_kernel = triton.jit(_add_kernel_src)


def triton_add(x: torch.Tensor, y: torch.Tensor, block: int = 1024) -> torch.Tensor:
    z = torch.empty_like(x)
    n = z.numel()
    _add_kernel[(triton.cdiv(n, block),)](x, y, z, n, BLOCK=block)
    return z
