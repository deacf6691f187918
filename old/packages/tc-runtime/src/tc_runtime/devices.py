"""Which device a kernel runs on: "cpu" (the interpreter) or one CUDA GPU."""

from __future__ import annotations

import sys


def parse_device(device: object) -> tuple[str, int | None]:
    """"cpu" | "cuda" | "cuda:N" | N | a torch.device -> ("cpu", None) or ("cuda", N)."""
    kind: object
    index: object
    if isinstance(device, bool):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, got {device!r}")
    if isinstance(device, int):
        kind, index = "cuda", device
    elif isinstance(device, str):
        text = device.strip().lower()
        kind, _, idx = text.partition(":")
        index = None
        if idx:
            if not idx.isdigit():
                raise ValueError(f"bad device {device!r}: the index after ':' must be a "
                                 f"non-negative number")
            index = int(idx)
    elif hasattr(device, "type"):  # torch.device (tc_runtime never imports torch)
        kind, index = getattr(device, "type"), getattr(device, "index", None)
    else:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, got "
                         f"{type(device).__name__} {device!r}")
    if kind == "cpu":
        return "cpu", None
    if kind != "cuda":
        raise ValueError(f"unsupported device {device!r}: tc runs on 'cuda' GPUs and on 'cpu' "
                         f"(the interpreter)")
    if index is None:
        index = _current_cuda_device()
    if not isinstance(index, int) or index < 0:
        raise ValueError(f"bad device index in {device!r}")
    return "cuda", index


def _current_cuda_device() -> int:
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return int(torch.cuda.current_device())
        except Exception:  # torch without CUDA: our driver gives the real error at creation
            return 0
    return 0
