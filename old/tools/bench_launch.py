"""Host time of one kernel launch: tc vs Triton 3.x (@triton.jit) vs CuPy RawKernel vs torch, in
the same run, on the same small vector add (GPU machine only).

    PYTHONPATH=<packages/*/src> python3 tools/bench_launch.py [--json OUT.json]

Each provider launches repeatedly in batches shorter than the launch queue (so the GPU never makes
the host wait), with a synchronisation between batches outside the timed region; the table gives
the median over batches of the host microseconds per call. Providers that cannot be imported are
listed as unavailable. Also prints the breakdown of tc's launch path and the bare driver call.
The verdict (tc at most CuPy's and Triton's) compares tc and the peers timed in interleaved rounds.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

ADD_SRC = """
__global__ void add(float* z, float* x, float* y, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""

CUDA_C_ADD = r"""
extern "C" __global__ void add(float* z, const float* x, const float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = x[i] + y[i];
}
"""

N = 1024
BATCH = 200
BATCHES = 30
#: The verdict's interleaved rounds, and the batches each provider gets per round.
ROUNDS = 9
ROUND_BATCHES = 8


def per_call_us(fn: Callable[[], object], sync: Callable[[], object], batches: int = BATCHES) -> float:
    """Median over batches of host microseconds per call."""
    for _ in range(3 * BATCH):  # warm-up: compilation, caches, lazy loading
        fn()
    sync()
    samples = []
    for _ in range(batches):
        sync()
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        samples.append((time.perf_counter() - t0) / BATCH * 1e6)
    sync()
    return float(statistics.median(samples))


def _caller(k: Any, zp: int, xp: int, yp: int) -> Callable[[], Callable[[], object]]:
    return lambda: lambda: k(zp, xp, yp, N, grid=(1,))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    import torch

    import tc_runtime as tc
    from tc_runtime import driver, knobs

    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to measure", file=sys.stderr)
        return 1
    sync = torch.cuda.synchronize
    x = torch.rand(N, device="cuda")
    y = torch.rand(N, device="cuda")
    z = torch.empty_like(x)
    zp, xp, yp = z.data_ptr(), x.data_ptr(), y.data_ptr()
    results: dict[str, float | str] = {}
    callers: dict[str, Callable[[], object]] = {}

    def measure(name: str, make: Callable[[], Callable[[], object]]) -> None:
        try:
            fn = make()
            fn()
            sync()
            callers[name] = fn
            results[name] = per_call_us(fn, sync)
        except Exception as exc:  # a missing peer must not hide the others
            results[name] = f"unavailable ({type(exc).__name__}: {str(exc)[:80]})"
        value = results[name]
        print(f"{name:58s} " + (f"{value:7.2f} us" if isinstance(value, float) else value),
              flush=True)

    # --- tc, through each launch back end
    backends = {}
    chosen = os.environ.get("TC_LAUNCH_BACKEND")
    for backend in ("ctypes", "cuda-python"):
        os.environ["TC_LAUNCH_BACKEND"] = backend
        driver._raw_launch = None  # re-read the knob for the kernels created next
        k = tc.kernel(ADD_SRC, device="cuda", defines={"BLOCK": 1024})
        k(zp, xp, yp, N, grid=(1,))
        backends[backend] = k
        measure(f"tc kernel, int pointers, tuple grid [{backend}]", _caller(k, zp, xp, yp))
    if chosen is None:
        del os.environ["TC_LAUNCH_BACKEND"]
    else:
        os.environ["TC_LAUNCH_BACKEND"] = chosen
    driver._raw_launch = None
    default = knobs.launch_backend()
    results["tc kernel, int pointers, tuple grid (default back end)"] = \
        results[f"tc kernel, int pointers, tuple grid [{default}]"]
    k = backends[default]
    measure("tc kernel, data_ptr() + lambda grid (the tutorial's call)",
            lambda: lambda: k(z.data_ptr(), x.data_ptr(), y.data_ptr(), N,
                              grid=lambda opt: (tc.cdiv(N, opt.BLOCK),)))
    measure("tc kernel, torch tensors as pointers, tuple grid",
            lambda: lambda: k(z, x, y, N, grid=(1,)))
    measure("tc kernel, explicit stream", lambda: lambda: k(zp, xp, yp, N, grid=(1,), stream=0))
    try:
        import tc_torch

        measure("tc_torch.add(x, y) (allocates z)", lambda: lambda: tc_torch.add(x, y))
    except ImportError as exc:
        results["tc_torch.add(x, y) (allocates z)"] = f"unavailable ({exc})"

    # --- peers
    measure("torch x + y (allocates z)", lambda: lambda: x + y)
    measure("torch.add(x, y, out=z)", lambda: lambda: torch.add(x, y, out=z))

    def triton_fn() -> Callable[[], object]:
        from triton_add import _add_kernel

        return lambda: _add_kernel[(1,)](x, y, z, N, BLOCK=1024)

    measure("Triton 3.x @triton.jit kernel[(1,)](x, y, z, n, BLOCK=1024)", triton_fn)

    def cupy_fn() -> Callable[[], object]:
        import cupy  # type: ignore[import-not-found, unused-ignore]
        import numpy as np

        kern = cupy.RawKernel(CUDA_C_ADD, "add")
        cx = cupy.asarray(x)
        cy = cupy.asarray(y)
        cz = cupy.asarray(z)
        n32 = np.int32(N)
        return lambda: kern((1,), (1024,), (cz, cx, cy, n32))

    measure("CuPy RawKernel((1,), (1024,), (z, x, y, n))", cupy_fn)

    # --- the parts of tc's launch path, and the bare driver call
    v = next(iter(k._fast.values()))
    key_fn = k._key_fn
    measure("  part: key function (specialization)", lambda: lambda: key_fn(zp, xp, yp, N))
    measure("  part: variant look-up", lambda: lambda: k._fast[key_fn(zp, xp, yp, N)])
    measure("  part: pack_into", lambda: lambda: v.pack_into(v.buffer, 0, zp, xp, yp, N))
    stream_fn = k._stream_fn
    measure("  part: current stream", lambda: lambda: stream_fn(0))
    measure("  part: Function.launch", lambda: lambda: v.function.launch(1, 1, 1, 0, v.packer))
    lookup, run, packed = k._lookup, v.run, (zp, xp, yp, N)
    measure("  part: look-up function (key + dict)", lambda: lambda: lookup(zp, xp, yp, N))
    measure("  part: variant launch closure (pack + launch)",
            lambda: lambda: run(packed, 1, 1, 1, 0))
    cu = driver._module()
    fn = v.function
    s0 = driver.stream_object(0)
    measure("  bare cuLaunchKernel through cuda-python",
            lambda: lambda: cu.cuLaunchKernel(fn.handle, 1, 1, 1, fn.block_x, 1, 1,
                                              fn.shared_bytes, s0, v.packer.address, 0))
    raw = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    ch = ctypes.c_void_p(int(fn.handle))
    measure("  bare cuLaunchKernel through ctypes",
            lambda: lambda: raw(ch, 1, 1, 1, fn.block_x, 1, 1, fn.shared_bytes, None,
                                v.packer.pointers, None))

    # --- the verdict: tc and the peers in interleaved rounds (the host's speed drifts during a
    # run: measured one after the other, one provider can get a slow stretch to itself)
    tc_name = f"tc kernel, int pointers, tuple grid [{default}]"
    triton_name = "Triton 3.x @triton.jit kernel[(1,)](x, y, z, n, BLOCK=1024)"
    cupy_name = "CuPy RawKernel((1,), (1024,), (z, x, y, n))"
    rivals = {name: callers[name] for name in (tc_name, cupy_name, triton_name) if name in callers}
    rounds: dict[str, list[float]] = {name: [] for name in rivals}
    for _ in range(ROUNDS):
        for name, call in rivals.items():
            rounds[name].append(per_call_us(call, sync, batches=ROUND_BATCHES))
    print(f"\ninterleaved, {ROUNDS} rounds (us per call, median; per round):")
    for name, values in rounds.items():
        results[f"interleaved: {name}"] = float(statistics.median(values))
        print(f"  {name:56s} {statistics.median(values):7.2f}  " + " ".join(f"{v:.2f}" for v in values))
    if tc_name in rounds and cupy_name in rounds:
        ratios = [t / c for t, c in zip(rounds[tc_name], rounds[cupy_name])]
        print("  tc / CuPy per round: " + " ".join(f"{r:.2f}" for r in ratios))
    tc_us = results.get(f"interleaved: {tc_name}", "unavailable")
    triton_us = results.get(f"interleaved: {triton_name}", "unavailable")
    cupy_us = results.get(f"interleaved: {cupy_name}", "unavailable")
    print()
    for peer, us in (("Triton", triton_us), ("CuPy", cupy_us)):
        if isinstance(tc_us, float) and isinstance(us, float):
            print(f"tc / {peer}: {tc_us / us:.2f} ({'PASS' if tc_us <= us else 'FAIL'}: tc must "
                  f"be at most {peer}'s)")
    if isinstance(tc_us, float):
        print(f"tc under 8 us: {'PASS' if tc_us < 8 else 'FAIL'} ({tc_us:.2f} us)")
    out = args.json or (str(Path(os.environ["OUT"]) / "bench_launch.json")
                        if os.environ.get("OUT") else None)
    if out:
        data: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0), "results": results}
        Path(out).write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
