"""The kernel library: the .tc sources shipped in tc_torch/kernels and the compiled kernel objects,
created once per (source, kernel, device, defines, launch options) and reused."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources

import torch

import tc_runtime as tc

_lock = threading.Lock()
_kernels: dict[tuple[object, ...], tc.Kernel] = {}


@cache
def source(name: str) -> str:
    """The text of kernels/<name>.tc."""
    path = resources.files("tc_torch").joinpath("kernels", f"{name}.tc")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"tc_torch has no kernel source '{name}.tc'") from None


def get_kernel(file: str, name: str, device: torch.device, defines: Mapping[str, object],
               num_warps: int = 4, num_stages: int = 3,
               configs: Sequence[tc.Config] | None = None,
               key: Sequence[str] | None = None, fp32_dot: str = "ieee") -> tc.Kernel:
    """The kernel `name` of kernels/<file>.tc on `device` with `defines`; with several `configs`
    the runtime auto-tunes them per value of the arguments named in `key`. `fp32_dot` is the
    runtime's option of that name (float32 products: "ieee" or "tf32")."""
    cfg_key = tuple(c.key() for c in configs) if configs else ()
    k = (file, name, device.type, device.index, tuple(sorted((a, str(b)) for a, b in defines.items())),
         num_warps, num_stages, cfg_key, tuple(key or ()), fp32_dot)
    kern = _kernels.get(k)
    if kern is None:
        with _lock:
            kern = _kernels.get(k)
            if kern is None:
                kern = tc.kernel(source(file), device=device, defines=dict(defines),
                                 num_warps=num_warps, num_stages=num_stages,
                                 autotune_configs=list(configs) if configs else None,
                                 autotune_key=list(key) if key and configs else None, name=name,
                                 filename=f"tc_torch/kernels/{file}.tc", fp32_dot=fp32_dot)
                _kernels[k] = kern
    return kern


def rows_num_warps(block: int) -> int:
    """num_warps for a kernel holding one row of `block` elements (the softmax tutorial's rule)."""
    if block >= 4096:
        return 16
    if block >= 2048:
        return 8
    return 4
