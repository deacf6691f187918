"""The host (Python) cost per call of tc_torch's ops, without a GPU.

CPU tensors are sent down the ops' GPU code paths: the device probes of tc_torch.devices
(`device_of`, and `cuda_index` where it exists) are replaced in every tc_torch module by stand-ins
that do the same tensor attribute reads but answer cuda:0, and the runtime talks to the simulated
driver of packages/tc-runtime/tests/test_runtime_fakegpu.py with a no-op cuLaunchKernel (kernels
are really compiled to PTX on first use; TC_SKIP_AUTOTUNING=1 keeps that to one configuration).
What is timed is everything a call does on the host except the driver's launch itself: argument
checks, kernel selection, allocations (torch.empty on the CPU here, the caching allocator on a
GPU), packing and the launch entry. Torch's CPU ops (e.g. cross_entropy's final reduction) also
run on the CPU here, so for those rows the figure includes CPU arithmetic on the tensor.

    python tools/bench_torch_host.py [--rows 64] [--cols 1024] [--dtype float16]
                                     [--number 20000] [--repeat 5] [--only softmax,add]

Prints the best over repeats of nanoseconds per call, with two floors: the raw kernel call with
int pointers and torch.empty_like. Not a test: numbers depend on the machine. To compare with an
older tree, put that tree's tc_torch first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from bench_launch_host import _fake_module  # noqa: E402  (the simulated driver)
CUDA0 = torch.device("cuda", 0)
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
          "float64": torch.float64}


def install_fake_driver() -> None:
    """The simulated driver, with launches that do nothing and a stream getter that costs what
    torch's C accessor costs."""
    from tc_runtime import driver

    cu = _fake_module().FakeCuda(devices=1)

    def noop_cu(*args: object) -> tuple[int]:
        return (0,)

    cu.cuLaunchKernel = noop_cu
    driver._cu = cu
    driver._initialized = True
    driver._raw_launch = False  # cuda-python, the default back end
    stream_fn = (0).__mul__  # a C-level stand-in for torch._C._cuda_getCurrentRawStream
    driver.stream_getter = lambda index: stream_fn  # type: ignore[assignment]


def patch_devices() -> None:
    """Make CPU tensors look like tensors of cuda:0 to tc_torch's device probes."""
    import tc_torch  # noqa: F401  (imports every op module)
    from tc_torch import devices

    real_device_of = devices.device_of
    real_cuda_index = getattr(devices, "cuda_index", None)

    def device_of(tensors: Any, op: str) -> torch.device:
        first = tensors[0].device  # the reads the real probe does on the GPU
        for t in tensors[1:]:
            if t.device != first:
                return real_device_of(tensors, op)
        return CUDA0

    def cuda_index(t: torch.Tensor) -> int:
        return 0 if not t.is_cuda and t.layout is torch.strided and t.get_device() == -1 else -1

    for name, mod in list(sys.modules.items()):
        if name != "tc_torch" and not name.startswith("tc_torch."):
            continue
        if getattr(mod, "device_of", None) is real_device_of:
            setattr(mod, "device_of", device_of)
        if real_cuda_index is not None and getattr(mod, "cuda_index", None) is real_cuda_index:
            setattr(mod, "cuda_index", cuda_index)


def ns_per_call(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Best over `repeat` runs of `number` calls, in ns per call (after one warm-up call)."""
    fn()
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return min(times) / number * 1e9


def cases(m: int, n: int, dtype: torch.dtype) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) of each timed path: the public ops without grad, the internal backward
    functions that autograd calls, and whole forward + backward passes through autograd."""
    import tc_torch
    from tc_torch.ops import cross_entropy as ce
    from tc_torch.ops import layer_norm as ln
    from tc_torch.ops import softmax as sm

    torch.manual_seed(0)
    x = torch.randn(m, n, dtype=dtype)
    y = torch.randn(m, n, dtype=dtype)
    w = torch.randn(n, dtype=dtype)
    b = torch.randn(n, dtype=dtype)
    t = torch.randint(0, n, (m,))
    sq = torch.randn(128, 128, dtype=dtype)
    sy = sm.softmax_forward(x)
    _, mean, rstd = ln.layer_norm_forward(x, n, w, b, 1e-5)
    _, lse = ce.cross_entropy_forward(x, t, -100)
    dloss = torch.ones(m, dtype=lse.dtype)
    xg = x.clone().requires_grad_()
    wg = w.clone().requires_grad_()
    bg = b.clone().requires_grad_()
    sqg = sq.clone().requires_grad_()

    def grad_softmax() -> None:
        tc_torch.softmax(xg).backward(y)  # type: ignore[no-untyped-call]

    def grad_layer_norm() -> None:
        tc_torch.layer_norm(xg, n, wg, bg).backward(y)  # type: ignore[no-untyped-call]

    def grad_cross_entropy() -> None:
        tc_torch.cross_entropy(xg, t).backward()  # type: ignore[no-untyped-call]

    def grad_matmul() -> None:
        tc_torch.matmul(sqg, sqg).backward(sq)  # type: ignore[no-untyped-call]

    return [
        ("add(x, y)", lambda: tc_torch.add(x, y)),
        ("softmax(x)", lambda: tc_torch.softmax(x)),
        ("layer_norm(x, n, w, b)", lambda: tc_torch.layer_norm(x, n, w, b)),
        ("layer_norm(x, n)", lambda: tc_torch.layer_norm(x, n)),
        ("cross_entropy(x, t, reduction='none')",
         lambda: tc_torch.cross_entropy(x, t, reduction="none")),
        ("cross_entropy(x, t)  [mean: + torch ops]", lambda: tc_torch.cross_entropy(x, t)),
        ("transpose(x)", lambda: tc_torch.transpose(x)),
        ("matmul(a, b)  [128x128]", lambda: tc_torch.matmul(sq, sq)),
        ("softmax_backward(dy, y)", lambda: sm.softmax_backward(y, sy)),
        ("layer_norm_backward(dy, x, ..., dx dw db)",
         lambda: ln.layer_norm_backward(y, x, n, w, True, mean, rstd, True, True, True)),
        ("cross_entropy_backward(dloss, x, t, lse)",
         lambda: ce.cross_entropy_backward(dloss, x, t, lse, -100)),
        ("autograd: softmax(xg).backward(dy)", grad_softmax),
        ("autograd: layer_norm(xg, n, wg, bg).backward(dy)", grad_layer_norm),
        ("autograd: cross_entropy(xg, t).backward()", grad_cross_entropy),
        ("autograd: matmul(a, a).backward(dc)  [128x128]", grad_matmul),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--dtype", choices=list(DTYPES), default="float16")
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated substrings of case names")
    opts = parser.parse_args()
    os.environ.setdefault("TC_CACHE_DIR", tempfile.mkdtemp(prefix="tc-bench-torch-host-"))
    os.environ["TC_SKIP_AUTOTUNING"] = "1"
    torch.set_num_threads(1)

    install_fake_driver()
    patch_devices()
    import tc_runtime as tc
    import tc_torch

    dtype = DTYPES[opts.dtype]
    m, n = opts.rows, opts.cols
    x = torch.randn(m, n, dtype=dtype)
    k = tc.kernel("__global__ void nop(float* p, int N) {}", device="cuda:0")
    ptr = x.data_ptr()
    rows: list[tuple[str, Callable[[], object]]] = [
        ("floor: raw kernel call, int pointer", lambda: k(ptr, m, grid=(m,))),
        ("floor: torch.empty_like(x)", lambda: torch.empty_like(x)),
    ]
    rows += cases(m, n, dtype)
    wanted = [s for s in opts.only.split(",") if s]
    print(f"tc_torch from {Path(tc_torch.__file__).parent}; {m}x{n} {opts.dtype}, "
          f"best of {opts.repeat} x {opts.number} calls")
    for name, fn in rows:
        if wanted and not any(s in name for s in wanted):
            continue
        number = opts.number if not name.startswith("autograd") else max(1, opts.number // 10)
        print(f"{name:52s} {ns_per_call(fn, number, opts.repeat):9.0f} ns", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
