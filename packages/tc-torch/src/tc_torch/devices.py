"""Where a tensor lives, seen from tc: its device string, the stream to launch on, the Triton-C
type names of its dtype, and the launch itself (pointers on the GPU, tensors on the interpreter)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

import tc_runtime as tc

_DTYPES = {torch.float32: "float", torch.float16: "half", torch.bfloat16: "bf16",
           torch.float64: "double"}

#: The floating dtypes of the op library: the three of the GPU and float64 (for gradcheck).
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)

#: Offsets inside the kernels are C ints.
INT32_LIMIT = 2**31

#: The layout of the tensors the kernels read (sparse and mkldnn tensors are refused).
STRIDED = torch.strided

#: torch.contiguous_format, for the fast paths' torch.empty_like(x, memory_format=CONTIGUOUS).
CONTIGUOUS = torch.contiguous_format


def cuda_index(t: torch.Tensor) -> int:
    """The index of t's CUDA device, or -1 when t is not a strided tensor on a CUDA device: the
    ops' fast paths test this before any other read of a tensor (cheaper than t.device, which
    builds a torch.device), so a sparse one (no strides, no is_contiguous) takes the general
    path, which refuses it by name (`device_of`). Every fast path looks it up here, so
    tools/bench_torch_host.py can send CPU tensors down the GPU paths."""
    return t.get_device() if t.is_cuda and t.layout is STRIDED else -1


def device_of(tensors: Sequence[torch.Tensor], op: str) -> torch.device:
    """The one device all tensors share (a clear error if they differ)."""
    first = tensors[0].device
    if tensors[0].is_cuda and first.index is not None:  # the common case, cheaply (a
        for t in tensors:  # generator, or torch.device.type, costs more than the loop)
            if t.device != first or t.layout is not STRIDED:
                break
        else:
            return first
    for t in tensors:
        if t.layout is not STRIDED:  # (no strides or data pointer for a kernel to read)
            raise TypeError(f"{op}: tensors of layout {t.layout} (sparse, mkldnn) are not "
                            f"supported; pass a dense, strided tensor (tensor.to_dense())")
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        names = ", ".join(sorted(str(d) for d in devices))
        raise ValueError(f"{op}: all tensors must be on the same device, got {names}")
    dev = tensors[0].device
    if dev.type not in ("cuda", "cpu"):
        raise ValueError(f"{op}: tensors on {dev} are not supported (tc runs on cuda and cpu)")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def stream_of(device: torch.device) -> int:
    """The raw handle of torch's current stream on a CUDA device (0 on the CPU). Under
    torch.cuda.graph capture this is the capturing stream, so launches are recorded."""
    if device.type != "cuda":
        return 0
    if _raw_stream is not None:
        return int(_raw_stream(device.index))
    return int(torch.cuda.current_stream(device).cuda_stream)


# torch's fast accessor of the current stream handle (an int), when this build has it
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

_on_cuda: dict[torch.device, bool] = {}


def on_cuda(device: torch.device) -> bool:
    """device.type == "cuda", memoized (torch.device.type builds a new str on every access)."""
    cuda = _on_cuda.get(device)
    if cuda is None:
        cuda = _on_cuda[device] = device.type == "cuda"
    return cuda


def tc_type(dtype: torch.dtype, op: str, allowed: Sequence[torch.dtype]) -> str:
    """The Triton-C type name for a tensor dtype the op supports."""
    if dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"{op}: dtype {str(dtype).replace('torch.', '')} is not supported "
                        f"(supported: {names})")
    return _DTYPES[dtype]


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype kernels compute in: float64 for float64, float32 for everything else."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def acc_type(dtype: torch.dtype) -> str:
    """acc_dtype as a Triton-C type name (the ACC define of the kernels)."""
    return _DTYPES[acc_dtype(dtype)]


def check_tensor(value: object, op: str, name: str) -> torch.Tensor:
    """`value` if it is a tensor, else a TypeError naming the argument."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def extent(t: torch.Tensor) -> int:
    """How many elements t spans in memory, from its first to its last."""
    return 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()) if s > 0)


def check_extent(op: str, *tensors: torch.Tensor) -> None:
    """Refuse tensors whose element offsets do not fit the kernels' int arithmetic."""
    for t in tensors:
        if 0 < t.numel() < INT32_LIMIT and t.is_contiguous():
            continue  # (a contiguous tensor spans its numel elements)
        span = extent(t)
        if span >= INT32_LIMIT:
            raise ValueError(f"{op}: a tensor of shape {tuple(t.shape)} spans {span} elements, "
                             f"more than the kernels' int offsets allow (2**31 - 1)")


def launch(kernel: tc.Kernel, device: torch.device, grid: Any, *args: object) -> None:
    """Launch on the tensors' device: raw pointers and torch's current stream on the GPU; the
    tensors themselves on the interpreter (their memory is registered and bounds-checked)."""
    if on_cuda(device):
        # no stream=: a kernel launches on torch's current stream of its device (read per
        # launch, as stream_of does, and cheaper than passing it)
        kernel(*[a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args], grid=grid)
    else:
        kernel(*args, grid=grid)


GridFn = Callable[[tc.Options], tuple[int, ...]]
