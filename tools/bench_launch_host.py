"""The Python-side cost of tc's launch path, without a GPU: the simulated driver of
packages/tc-runtime/tests/test_runtime_fakegpu.py with a no-op cuLaunchKernel, so what is timed is
the runtime's own work per call (the driver call itself is the "bare no-op launch" line).

    python tools/bench_launch_host.py [--repeat 7] [--number 100000] [--stub-driver]

--stub-driver: launch through the real driver bindings (cuda-python's cuLaunchKernel wrapper, and
ctypes) into a no-op libcuda.so.1 compiled here with `cc` and loaded into this process only, so
the wrappers' own argument conversion is timed too (rows "bare ... (no-op libcuda)"); everything
else stays simulated.

Prints the best over repeats of nanoseconds per call. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SRC = """
__global__ void add(float* z, float* x, float* y, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""

# more integer arguments, as tc_torch's row kernels have (sizes and strides)
ROWS_SRC = """
__global__ void copy_rows(float* dst, float* src, int M, int N, int stride_d, int stride_s) {
    int row = get_program_id(0);
    int off[BLOCK] = 0 ... BLOCK;
    bool mask[BLOCK] = (off < N) & (row < M);
    *?(mask)(dst + row * stride_d + off) = *?(mask)(src + row * stride_s + off);
}
"""


def _fake_module() -> Any:
    path = ROOT / "packages/tc-runtime/tests/test_runtime_fakegpu.py"
    spec = importlib.util.spec_from_file_location("_tc_fakegpu", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# A libcuda whose every entry point does nothing and returns CUDA_SUCCESS (cuda-bindings finds its
# functions through cuGetProcAddress_v2; ctypes calls cuLaunchKernel by name).
STUB_DRIVER_C = r"""
#include <string.h>
typedef int CUresult;
static CUresult noop(void) { return 0; }
CUresult cuDriverGetVersion(int *version) { *version = 13000; return 0; }
CUresult cuGetProcAddress_v2(const char *name, void **fn, int version, unsigned long long flags,
                             int *status) {
    *fn = strcmp(name, "cuDriverGetVersion") == 0 ? (void *)cuDriverGetVersion : (void *)noop;
    if (status) *status = 0;
    return 0;
}
CUresult cuGetProcAddress(const char *name, void **fn, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(name, fn, version, flags, 0);
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    return 0;
}
"""


def load_stub_driver() -> str:
    """Compile the no-op libcuda and load it under the soname libcuda.so.1 (the driver bindings'
    dlopen then finds it); returns its path."""
    where = Path(tempfile.mkdtemp(prefix="tc-stub-libcuda-"))
    (where / "stub.c").write_text(STUB_DRIVER_C)
    lib = where / "libcuda.so.1"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(lib),
                    str(where / "stub.c")], check=True)
    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
    return str(lib)


def ns_per_call(fn: Callable[[], object], number: int, repeat: int) -> float:
    fn()
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return min(times) / number * 1e9


MATMUL_SRC = ROOT / "packages/tc-lang/tests/kernels/matmul_tutorial.tc"


def _persistent_matmul_rows(tc: Any, cu: Any, backend: str, number: int, repeat: int
                            ) -> list[tuple[str, float]]:
    """The fp16 4096^3 persistent matmul with tensor maps (A, B and a bulk-stored C), launched
    as tc_torch.matmul does: int arguments and a grid function, C the same tensor each call or
    (a new output per call) alternating between two addresses."""
    cu.param_count = 15
    a, b, c, c2 = (cu.alloc(4096).ctypes.data for _ in range(4))
    cfg = tc.config({"MB": 128, "NB": 256, "KB": 64}, num_warps=8, num_stages=4,
                    options={"persistent": True, "tma_store": True})
    k = tc.kernel(MATMUL_SRC.read_text(), device="cuda:0", defines={"TYPE": "half"},
                  autotune_configs=[cfg])
    n = 4096

    def grid(opt: Any) -> tuple[int, int]:
        return tc.cdiv(n, opt.MB) * tc.cdiv(n, opt.NB), 1

    outputs = [c, c2]
    k(a, b, c, n, n, n, n, n, n, grid=grid)
    k(a, b, c2, n, n, n, n, n, n, grid=grid)

    def alternating() -> None:
        outputs.reverse()
        k(a, b, outputs[0], n, n, n, n, n, n, grid=grid)

    return [(f"tc matmul 4096^3 persistent, 3 maps, same C [{backend}]",
             ns_per_call(lambda: k(a, b, c, n, n, n, n, n, n, grid=grid), number, repeat)),
            (f"tc matmul 4096^3 persistent, 3 maps, C alternating [{backend}]",
             ns_per_call(alternating, number, repeat))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=100_000)
    parser.add_argument("--backend", choices=["ctypes", "cuda-python", "both"], default="both")
    parser.add_argument("--stub-driver", action="store_true",
                        help="launch through the real driver bindings into a no-op libcuda")
    opts = parser.parse_args()
    os.environ.setdefault("TC_CACHE_DIR", tempfile.mkdtemp(prefix="tc-bench-host-"))

    import tc_runtime as tc
    from tc_runtime import driver

    fake = _fake_module()
    cu = fake.FakeCuda(devices=1)

    def noop_raw(*args: object) -> int:  # what libcuda's cuLaunchKernel costs is not timed
        return 0

    def noop_cu(*args: object) -> tuple[int]:
        return (0,)

    cu.cuLaunchKernel = noop_cu
    raw_launch: Any = noop_raw
    real: Any = None
    if opts.stub_driver:
        stub = load_stub_driver()
        import cuda.bindings.driver

        real = cuda.bindings.driver
        raw_launch = ctypes.CDLL(stub).cuLaunchKernel
        raw_launch.restype = ctypes.c_int
        cu.cuLaunchKernel = real.cuLaunchKernel
        cu.CUstream = real.CUstream
        get_function = cu.cuModuleGetFunction

        def real_function(module: int, name: bytes) -> tuple[Any, Any]:
            err, handle = get_function(module, name)
            return err, real.CUfunction(handle)

        cu.cuModuleGetFunction = real_function
    driver._cu = cu
    driver._initialized = True
    # a C-level stand-in for torch._C._cuda_getCurrentRawStream (returns 0 for any device)
    stream_fn = (0).__mul__
    driver.stream_getter = lambda index: stream_fn  # type: ignore[assignment]

    try:  # the entry checks a tensor's dtype against the pointer's (a set look-up per pointer)
        import torch
        float32: object = torch.float32
    except ImportError:
        import numpy as np
        float32 = np.dtype("float32")

    class Tensor:  # data_ptr() as a C method, like torch's
        def __init__(self, address: int) -> None:
            self.data_ptr = address.__int__
            self.dtype = float32
            self.is_cuda = True

    n = 1024
    buf = cu.alloc(3 * 4 * n)
    zp, xp, yp = buf.ctypes.data, buf.ctypes.data + 4 * n, buf.ctypes.data + 8 * n
    z, x, y = Tensor(zp), Tensor(xp), Tensor(yp)
    number, repeat = opts.number, opts.repeat
    backends = ["ctypes", "cuda-python"] if opts.backend == "both" else [opts.backend]
    rows: list[tuple[str, float]] = []
    for backend in backends:
        driver._raw_launch = raw_launch if backend == "ctypes" else False
        k = tc.kernel(SRC, device="cuda:0", defines={"BLOCK": 1024})
        k(zp, xp, yp, n, grid=(1,))
        rows.append((f"tc kernel, int pointers, tuple grid [{backend}]",
                     ns_per_call(lambda: k(zp, xp, yp, n, grid=(1,)), number, repeat)))
        rows.append((f"tc kernel, data_ptr() + lambda grid [{backend}]",
                     ns_per_call(lambda: k(z.data_ptr(), x.data_ptr(), y.data_ptr(), n,
                                           grid=lambda opt: (tc.cdiv(n, opt.BLOCK),)),
                                 number, repeat)))
        rows.append((f"tc kernel, tensors (data_ptr() objects), tuple grid [{backend}]",
                     ns_per_call(lambda: k(z, x, y, n, grid=(1,)), number, repeat)))
        rows.append((f"tc kernel, explicit stream=0 [{backend}]",
                     ns_per_call(lambda: k(zp, xp, yp, n, grid=(1,), stream=0), number, repeat)))
        rows.append((f"tc kernel, explicit stream=123 [{backend}]",
                     ns_per_call(lambda: k(zp, xp, yp, n, grid=(1,), stream=123), number, repeat)))
        rows.append((f"tc kernel, 2-D tuple grid [{backend}]",
                     ns_per_call(lambda: k(zp, xp, yp, n, grid=(1, 1)), number, repeat)))
        k2 = tc.kernel(ROWS_SRC, device="cuda:0", defines={"BLOCK": 64})
        k2(zp, xp, 1, 64, 64, 64, grid=(1,))
        rows.append((f"tc kernel, 2 pointers + 4 ints, tuple grid [{backend}]",
                     ns_per_call(lambda: k2(zp, xp, 1, 64, 64, 64, grid=(1,)), number, repeat)))
        rows += _persistent_matmul_rows(tc, cu, backend, number, repeat)
    rows.append(("bare no-op launch (ctypes-style call, 11 args)",
                 ns_per_call(lambda: noop_raw(1, 1, 1, 1, 128, 1, 1, 0, None, None, None),
                             number, repeat)))
    if real is not None:
        f = real.CUfunction(1)
        params = (ctypes.c_void_p * 4)()
        address = ctypes.addressof(params)
        rows.append(("bare cuLaunchKernel through cuda-python (no-op libcuda)",
                     ns_per_call(lambda: real.cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, None,
                                                             address, 0), number, repeat)))
        handle = ctypes.c_void_p(1)
        rows.append(("bare cuLaunchKernel through ctypes (no-op libcuda)",
                     ns_per_call(lambda: raw_launch(handle, 1, 1, 1, 128, 1, 1, 0, None, params,
                                                    None), number, repeat)))
    rows.append(("empty lambda", ns_per_call(lambda: None, number, repeat)))
    for name, ns in rows:
        print(f"{name:66s} {ns:8.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
