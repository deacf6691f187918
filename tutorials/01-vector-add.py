"""
Vector addition
===============

The first tc tutorial: a Triton-C kernel that adds two vectors, its binding to torch, a
correctness check against torch, and a bandwidth benchmark with `tc.testing.perf_report`.

Without a GPU the same script runs the kernel on the CPU interpreter (smaller sizes); set
TC_TUTORIAL_DEVICE=cpu to force that. Plots and tables go to TC_TUTORIAL_OUT (default
build/tutorials).
"""

from __future__ import annotations

import os
from typing import Any

import torch

import tc_runtime as tc

# %%
# Compute kernel
# --------------
# Each program handles BLOCK consecutive elements: `off` is a tile of BLOCK offsets, the masked
# loads and store (`*?(check)`) keep the last program inside the vectors.

_src = """
__global__ void add(float* z, float* x, float* y, int N) {
    // the program id selects a chunk of BLOCK elements
    int pid = get_program_id(0);
    int off[BLOCK] = pid * BLOCK + (0 ... BLOCK);
    // pointer tiles
    float* pz[BLOCK] = z + off;
    float* px[BLOCK] = x + off;
    float* py[BLOCK] = y + off;
    // guard the loads and the store
    bool check[BLOCK] = off < N;
    *?(check)pz = *?(check)px + *?(check)py;
}
"""

# %%
# Torch bindings
# --------------
# Kernels are compiled once per device and kept in a dictionary; the grid follows BLOCK through
# `opt`. Pointers are passed as integers (`data_ptr()`): on the CPU they are raw host addresses.


def _device() -> str:
    forced = os.environ.get("TC_TUTORIAL_DEVICE")
    if forced:
        return forced
    return "cuda" if torch.cuda.is_available() else "cpu"


DEVICE = _device()
_kernels: dict[str, tc.Kernel] = {}


def make_add_kernel(device: torch.device) -> tc.Kernel:
    key = str(device)
    if key not in _kernels:
        _kernels[key] = tc.kernel(_src, device=device, defines={"BLOCK": 1024})
    return _kernels[key]


class _add(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # constraints of the op
        assert x.dtype == torch.float32 and y.dtype == torch.float32
        assert x.is_contiguous() and y.is_contiguous() and x.shape == y.shape
        z = torch.empty_like(x)
        N = z.numel()
        grid = lambda opt: (tc.cdiv(N, opt.BLOCK),)  # noqa: E731
        kernel = make_add_kernel(z.device)
        kernel(z.data_ptr(), x.data_ptr(), y.data_ptr(), N, grid=grid)
        return z


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    apply: Any = _add.apply
    out: torch.Tensor = apply(x, y)
    return out


# %%
# Unit test
# ---------


def check() -> None:
    torch.manual_seed(0)
    size = 98432
    x = torch.rand(size, device=DEVICE)
    y = torch.rand(size, device=DEVICE)
    za = x + y
    zb = add(x, y)
    print(za)
    print(zb)
    diff = torch.max(torch.abs(za - zb)).item()
    print(f"The maximum difference between torch and tc is {diff}")
    assert diff == 0.0, "tc and torch disagree"


# %%
# Benchmark
# ---------
# Bandwidth in GB/s: three vectors of 4-byte floats are read or written.

SIZES = [2**i for i in range(12, 28)] if DEVICE.startswith("cuda") else [2**i for i in range(8, 13)]


@tc.testing.perf_report(
    tc.testing.Benchmark(
        x_names=["size"],  # argument names to use as an x-axis for the plot
        x_vals=SIZES,  # different possible values for `x_name`
        y_name="provider",  # argument name whose value corresponds to a different line in the plot
        y_vals=["torch", "tc"],  # possible keys for `y_name`
        y_lines=["Torch", "tc"],  # label name for the lines
        ylabel="GB/s",  # label name for the y-axis
        xlabel="size",
        x_log=True,
        plot_name="vector-add-performance",  # name for the plot; also the file names
        args={},  # values for function arguments not in `x_names` and `y_name`
    )
)
def benchmark(size: int, provider: str) -> tuple[float, float, float]:
    x = torch.rand(size, device=DEVICE, dtype=torch.float32)
    y = torch.rand(size, device=DEVICE, dtype=torch.float32)
    fast = not DEVICE.startswith("cuda")
    warmup, rep = (1, 5) if fast else (25, 100)
    device = "cpu" if fast else None
    if provider == "torch":
        ms, min_ms, max_ms = tc.testing.do_bench(lambda: x + y, warmup, rep, device=device)
    else:
        ms, min_ms, max_ms = tc.testing.do_bench(lambda: add(x, y), warmup, rep, device=device)

    def gbps(ms: float) -> float:
        return 12 * size / ms * 1e-6

    return gbps(ms), gbps(max_ms), gbps(min_ms)


if __name__ == "__main__":
    print(f"running on {DEVICE}")
    check()
    out = os.environ.get("TC_TUTORIAL_OUT", os.path.join("build", "tutorials"))
    benchmark.run(show_plots=False, print_data=True, save_path=out)
    print(f"plot and table written to {out}/vector-add-performance.png/.csv")
