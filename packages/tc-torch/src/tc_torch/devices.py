"""Where a tensor lives, seen from tc: its device string and the stream to launch on."""

from __future__ import annotations

from collections.abc import Sequence

import torch

_DTYPES = {torch.float32: "float", torch.float16: "half", torch.bfloat16: "bf16"}


def device_of(tensors: Sequence[torch.Tensor], op: str) -> torch.device:
    """The one device all tensors share (a clear error if they differ)."""
    first = tensors[0].device
    if all(t.device == first for t in tensors[1:]) and first.type == "cuda" \
            and first.index is not None:
        return first  # the common case, cheaply
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
    """The raw handle of torch's current stream on a CUDA device (0 on the CPU)."""
    if device.type != "cuda":
        return 0
    if _raw_stream is not None:
        return int(_raw_stream(device.index))
    return int(torch.cuda.current_stream(device).cuda_stream)


# torch's fast accessor of the current stream handle (an int), when this build has it
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def tc_type(dtype: torch.dtype, op: str, allowed: Sequence[torch.dtype]) -> str:
    """The Triton-C type name for a tensor dtype the op supports."""
    if dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"{op}: dtype {str(dtype).replace('torch.', '')} is not supported "
                        f"(supported: {names})")
    return _DTYPES[dtype]
