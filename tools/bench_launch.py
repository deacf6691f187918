"""Host overhead of a kernel launch through tc_runtime, broken down by step (GPU machine only).

Run: PYTHONPATH=<packages/*/src> python3 tools/bench_launch.py
"""

from __future__ import annotations

import ctypes
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "tc-runtime" / "tests"))

import tc_runtime as tc  # noqa: E402
from tc_runtime import driver  # noqa: E402
from tc_runtime.binary import KernelBinary  # noqa: E402
from tc_runtime.options import normalize_grid  # noqa: E402

EMPTY_PTX = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry empty(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u32 p3)
{
  ret;
}
"""


def per_call_us(fn: Callable[[], object], batches: int = 40, n: int = 250) -> float:
    """Host time per call, launching in batches below the queue depth (so the GPU never makes
    the host wait) and synchronising between batches outside the timed region."""
    dev = driver.get_device(0)
    total = 0.0
    for b in range(batches + 1):
        dev.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if b:
            total += time.perf_counter() - t0
    return total / (batches * n) * 1e6


def main() -> None:
    binary = KernelBinary(name="empty", arch="sm_80", ptx=EMPTY_PTX, cubin=None,
                          signature=("ptr<f32>", "ptr<f32>", "ptr<f32>", "i32"),
                          arg_names=("z", "x", "y", "N"), num_warps=4)
    k = tc.load(binary, device="cuda:0", defines={"BLOCK": 1024})
    dev = driver.get_device(0)
    buf = driver.DeviceBuffer(dev, 1 << 20)
    p = buf.ptr
    n = 1 << 18
    k(p, p, p, n, grid=(1,))
    v = next(iter(k._variants.values()))
    sig = k.signature
    results = {
        "tc kernel call, tuple grid": per_call_us(lambda: k(p, p, p, n, grid=(256,))),
        "tc kernel call, lambda grid": per_call_us(
            lambda: k(p, p, p, n, grid=lambda o: (tc.cdiv(n, o.BLOCK),))),
        "specialize": per_call_us(lambda: sig.specialize((p, p, p, n))),
        "normalize_grid tuple": per_call_us(lambda: normalize_grid((256,), v.opt)),
        "pack": per_call_us(lambda: v.packer.pack((p, p, p, n))),
        "Function.launch": per_call_us(lambda: v.function.launch(256, 1, 1, 0, v.packer.address)),
    }
    cu = driver._module()
    s0 = driver.stream_object(0)
    h = v.function.handle
    addr = v.packer.address
    results["raw cuLaunchKernel (cuda-python)"] = per_call_us(
        lambda: cu.cuLaunchKernel(h, 256, 1, 1, 128, 1, 1, 0, s0, addr, 0))
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuLaunchKernel
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    hp = int(h)
    results["raw cuLaunchKernel (ctypes)"] = per_call_us(
        lambda: fn(hp, 256, 1, 1, 128, 1, 1, 0, 0, addr, None))
    dev.synchronize()
    for name, us in results.items():
        print(f"{name:40s} {us:7.2f} us")


if __name__ == "__main__":
    main()
