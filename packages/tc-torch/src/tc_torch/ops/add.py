"""Element-wise addition: the vector-add kernel of the first tutorial as a torch op."""

from __future__ import annotations

from typing import Any

import torch
import tc_runtime as tc

from ..devices import (CONTIGUOUS, INT32_LIMIT, check_tensor, cuda_index, device_of, on_cuda,
                       tc_type)

SOURCE = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    TYPE* pz[BLOCK] = z + off;
    TYPE* px[BLOCK] = x + off;
    TYPE* py[BLOCK] = y + off;
    *?(check)pz = *?(check)px + *?(check)py;
}
"""

BLOCK = 1024
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_kernels: dict[tuple[torch.device, torch.dtype, int], tc.Kernel] = {}
#: The GPU kernels of BLOCK by (dtype, device index): the fast path's look-up.
_by_index: dict[tuple[torch.dtype, int], tc.Kernel] = {}


def kernel_for(device: torch.device, dtype: torch.dtype, block: int = BLOCK) -> tc.Kernel:
    """The add kernel for (device, dtype, BLOCK), created once."""
    key = (device, dtype, block)  # torch.device hashes and compares as (type, index)
    k = _kernels.get(key)
    if k is None:
        defines = {"TYPE": tc_type(dtype, "tc_torch.add", DTYPES), "BLOCK": block}
        k = tc.kernel(SOURCE, device=str(device), defines=defines, num_warps=4,
                      filename="tc_torch/add.tc")
        _kernels[key] = k
        if block == BLOCK and on_cuda(device):
            _by_index[dtype, device.index] = k
    return k


def _check(x: object, y: object) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError(f"tc_torch.add expects two tensors, got {type(x).__name__} and "
                        f"{type(y).__name__}")
    if x.dtype != y.dtype:
        raise TypeError(f"tc_torch.add: the tensors have different dtypes ({x.dtype} and "
                        f"{y.dtype}); convert one first")
    if x.shape != y.shape:
        raise ValueError(f"tc_torch.add: the tensors have different shapes ({tuple(x.shape)} and "
                         f"{tuple(y.shape)})")
    return x, y


def add_out(z: torch.Tensor, x: torch.Tensor, y: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """z = x + y for contiguous tensors of one shape, dtype and device (no autograd)."""
    x, y = _check(x, y)
    z = check_tensor(z, "tc_torch.add", "the output z")
    if z.dtype != x.dtype or z.shape != x.shape:
        raise ValueError(f"tc_torch.add: the output must have the inputs' shape {tuple(x.shape)} "
                         f"and dtype {x.dtype}, got {tuple(z.shape)} {z.dtype}")
    if not (z.is_contiguous() and x.is_contiguous() and y.is_contiguous()):
        raise ValueError("tc_torch.add: add_out takes contiguous tensors (the kernel indexes them "
                         "as flat arrays)")
    return _add_into(z, x, y, device_of([z, x, y], "tc_torch.add"), block)


def _add_into(z: torch.Tensor, x: torch.Tensor, y: torch.Tensor, device: torch.device,
              block: int = BLOCK) -> torch.Tensor:
    """add_out once `device` is known to be the device of all three tensors."""
    n = x.numel()
    if n >= 2**31:
        raise ValueError(f"tc_torch.add: {n} elements is more than the kernel's int index allows "
                         f"(2**31 - 1)")
    k = kernel_for(device, x.dtype, block)
    if n == 0:
        return z
    grid = ((n + block - 1) // block,)  # tc.cdiv(n, block)
    if on_cuda(device):  # the kernel launches on torch's current stream of its device
        k(z.data_ptr(), x.data_ptr(), y.data_ptr(), n, grid=grid)
    else:  # the interpreter: pass the tensors so their memory is registered and bounds-checked
        k(z, x, y, n, grid=grid)
    return z


class _Add(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        z = torch.empty_like(x, memory_format=torch.contiguous_format)
        return _add_into(z, x, y, x.device)  # (add checked x and y; z is allocated beside x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return grad, grad


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x + y through the tc vector-add kernel (float32, float16, bfloat16, float64; CUDA or CPU)."""
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) \
            and not ((x.requires_grad or y.requires_grad) and torch.is_grad_enabled()):
        # the fast path: contiguous tensors of one shape and dtype on a GPU whose kernel was
        # created before (the same launch as below, without the checks the first call did)
        i = cuda_index(x)
        if i >= 0 and cuda_index(y) == i and x.is_contiguous() and y.is_contiguous():
            dtype = x.dtype
            k = _by_index.get((dtype, i))
            if k is not None and dtype == y.dtype and x.shape == y.shape:
                n = x.numel()
                if 0 < n < INT32_LIMIT:
                    z = torch.empty_like(x, memory_format=CONTIGUOUS)
                    k(z.data_ptr(), x.data_ptr(), y.data_ptr(), n, grid=((n + BLOCK - 1) // BLOCK,))
                    return z
    x, y = _check(x, y)
    device = device_of([x, y], "tc_torch.add")
    tc_type(x.dtype, "tc_torch.add", DTYPES)
    if not (torch.is_grad_enabled() and (x.requires_grad or y.requires_grad)):
        x, y = x.contiguous(), y.contiguous()  # no autograd bookkeeping when no grad is needed
        # z is allocated on x's device: no need to check the three devices again
        return _add_into(torch.empty_like(x, memory_format=torch.contiguous_format), x, y,
                         device)
    apply: Any = _Add.apply
    out: torch.Tensor = apply(x, y)
    return out
