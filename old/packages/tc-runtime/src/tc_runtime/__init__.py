"""tc-runtime: launch Triton-C kernels from Python on CUDA GPUs (or the CPU interpreter).

    import tc_runtime as tc
    k = tc.kernel(src, device="cuda:0", defines={"TYPE": "float", "BLOCK": 1024})
    k(z_ptr, x_ptr, y_ptr, N, grid=lambda opt: (tc.cdiv(N, opt.BLOCK),))

The compiler packages are imported only when a kernel is compiled (extra `tc-runtime[jit]`).
"""

from __future__ import annotations

from . import testing
from .binary import KernelBinary, save
from .build import build
from .cache import KernelCache
from .errors import TcCacheError, TcDeviceError, TcLaunchError, TcRuntimeError
from .helpers import cdiv, next_power_of_2
from .kernel import Kernel, kernel, load
from .options import Config, Options, config

__version__ = "0.1.0"

__all__ = [
    "Config",
    "Kernel",
    "KernelBinary",
    "KernelCache",
    "Options",
    "TcCacheError",
    "TcDeviceError",
    "TcLaunchError",
    "TcRuntimeError",
    "build",
    "cdiv",
    "config",
    "kernel",
    "load",
    "next_power_of_2",
    "save",
    "testing",
]
