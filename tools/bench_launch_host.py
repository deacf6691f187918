"""The Python-side cost of tc's launch path, without a GPU: the simulated driver of
packages/tc-runtime/tests/test_runtime_fakegpu.py with a no-op cuLaunchKernel, so what is timed is
the runtime's own work per call (the driver call itself is the "bare no-op launch" line).

    python tools/bench_launch_host.py [--repeat 7] [--number 100000]

Prints the best over repeats of nanoseconds per call. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
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


def _fake_module() -> Any:
    path = ROOT / "packages/tc-runtime/tests/test_runtime_fakegpu.py"
    spec = importlib.util.spec_from_file_location("_tc_fakegpu", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ns_per_call(fn: Callable[[], object], number: int, repeat: int) -> float:
    fn()
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return min(times) / number * 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=100_000)
    parser.add_argument("--backend", choices=["ctypes", "cuda-python", "both"], default="both")
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
    driver._cu = cu
    driver._initialized = True
    # a C-level stand-in for torch._C._cuda_getCurrentRawStream (returns 0 for any device)
    stream_fn = (0).__mul__
    driver.stream_getter = lambda index: stream_fn  # type: ignore[assignment]

    class Tensor:  # data_ptr() as a C method, like torch's
        def __init__(self, address: int) -> None:
            self.data_ptr = address.__int__

    n = 1024
    buf = cu.alloc(3 * 4 * n)
    zp, xp, yp = buf.ctypes.data, buf.ctypes.data + 4 * n, buf.ctypes.data + 8 * n
    z, x, y = Tensor(zp), Tensor(xp), Tensor(yp)
    number, repeat = opts.number, opts.repeat
    backends = ["ctypes", "cuda-python"] if opts.backend == "both" else [opts.backend]
    rows: list[tuple[str, float]] = []
    for backend in backends:
        driver._raw_launch = noop_raw if backend == "ctypes" else False
        k = tc.kernel(SRC, device="cuda:0", defines={"BLOCK": 1024})
        k(zp, xp, yp, n, grid=(1,))
        rows.append((f"tc kernel, int pointers, tuple grid [{backend}]",
                     ns_per_call(lambda: k(zp, xp, yp, n, grid=(1,)), number, repeat)))
        rows.append((f"tc kernel, data_ptr() + lambda grid [{backend}]",
                     ns_per_call(lambda: k(z.data_ptr(), x.data_ptr(), y.data_ptr(), n,
                                           grid=lambda opt: (tc.cdiv(n, opt.BLOCK),)),
                                 number, repeat)))
        rows.append((f"tc kernel, explicit stream=0 [{backend}]",
                     ns_per_call(lambda: k(zp, xp, yp, n, grid=(1,), stream=0), number, repeat)))
        rows.append((f"tc kernel, explicit stream=123 [{backend}]",
                     ns_per_call(lambda: k(zp, xp, yp, n, grid=(1,), stream=123), number, repeat)))
        rows.append((f"tc kernel, 2-D tuple grid [{backend}]",
                     ns_per_call(lambda: k(zp, xp, yp, n, grid=(1, 1)), number, repeat)))
    rows.append(("bare no-op launch (ctypes-style call, 11 args)",
                 ns_per_call(lambda: noop_raw(1, 1, 1, 1, 128, 1, 1, 0, None, None, None),
                             number, repeat)))
    rows.append(("empty lambda", ns_per_call(lambda: None, number, repeat)))
    for name, ns in rows:
        print(f"{name:58s} {ns:8.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
