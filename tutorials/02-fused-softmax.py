"""
Fused softmax
=============

The second tc tutorial: a row-wise softmax that reads each row once and writes it once (a naive
torch version reads 5MN + 2M and writes 3MN + 2M elements), its torch binding with one kernel per
power-of-two row length, a check against torch on an irregular 1823 x 781 matrix, and a bandwidth
benchmark against torch.softmax and the naive version.

Without a GPU the same script runs the kernel on the CPU interpreter (smaller sizes); set
TC_TUTORIAL_DEVICE=cpu to force that. Plots and tables go to TC_TUTORIAL_OUT (default
build/tutorials).
"""

from __future__ import annotations

import os
from typing import Any

import torch

import tc_runtime as tc


def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax in five torch operations: 5MN + 2M elements read, 3MN + 2M written."""
    x_max = torch.max(x, dim=1)[0]  # read MN elements; write M
    z = x - x_max[:, None]  # read MN + M; write MN
    numerator = torch.exp(z)  # read MN; write MN
    denominator = torch.sum(numerator, dim=1)  # read MN; write M
    return numerator / denominator[:, None]  # read MN + M; write MN


# %%
# Compute kernel
# --------------
# One program per row. BLOCK is a power of two at least N, so lanes past N are masked: they load
# -inf, which leaves the maximum and (after exp) the sum unchanged, and they are not stored.

_src = """
__global__ void softmax(float* Y, float* X, int stride_ym, int stride_xm, int M, int N) {
    int m = get_program_id(0);
    int n[BLOCK] = 0 ... BLOCK;
    float* px[BLOCK] = X + m * stride_xm + n;
    bool check[BLOCK] = n < N;
    float x[BLOCK] = check ? *px : -F32_INFINITY;
    // reductions: x[max] is the maximum of the tile, num[+] its sum
    float z[BLOCK] = x - x[max];
    float num[BLOCK] = exp(z);
    float denom = num[+];
    float y[BLOCK] = num / denom;
    float* py[BLOCK] = Y + m * stride_ym + n;
    *?(check)py = y;
}
"""

# %%
# Torch bindings
# --------------
# Kernels are indexed by the device and by BLOCK = next_power_of_2(N) (and the number of warps
# that goes with it): different row lengths that round to the same BLOCK share a kernel.


def _device() -> str:
    forced = os.environ.get("TC_TUTORIAL_DEVICE")
    if forced:
        return forced
    return "cuda" if torch.cuda.is_available() else "cpu"


DEVICE = _device()
_kernels: dict[tuple[int, int, str], tc.Kernel] = {}


def make_kernel(N: int, device: torch.device) -> tc.Kernel:
    BLOCK = tc.next_power_of_2(N)
    num_warps = 16 if BLOCK >= 4096 else 8 if BLOCK >= 2048 else 4
    key = (BLOCK, num_warps, str(device))
    if key not in _kernels:
        _kernels[key] = tc.kernel(_src, device=device, defines={"BLOCK": BLOCK},
                                  num_warps=num_warps)
    return _kernels[key]


class _softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        # constraints of the op
        assert x.dtype == torch.float32 and x.dim() == 2 and x.stride(1) == 1
        y = torch.empty_like(x)
        M, N = y.shape
        kernel = make_kernel(N, y.device)
        # one program per row; on the CPU the tensors themselves are passed (bounds-checked)
        args = (y, x) if y.device.type == "cpu" else (y.data_ptr(), x.data_ptr())
        kernel(*args, y.stride(0), x.stride(0), M, N, grid=lambda opt: (M,))
        return y


def softmax(x: torch.Tensor) -> torch.Tensor:
    apply: Any = _softmax.apply
    out: torch.Tensor = apply(x)
    return out


# %%
# Unit test
# ---------
# An irregular number of rows and columns checks the padding and the masks.


def check() -> None:
    torch.manual_seed(0)
    rows = 1823 if DEVICE.startswith("cuda") else 123
    x = torch.randn(rows, 781, device=DEVICE)
    y_tc = softmax(x)
    y_ref = torch.softmax(x, dim=1)
    ok = torch.allclose(y_tc, y_ref, atol=1e-6, rtol=1e-5)
    print(f"softmax {rows}x781: tc matches torch: {ok}")
    assert ok, "tc and torch disagree"


# %%
# Benchmark
# ---------
# Bandwidth in GB/s as a function of the row length, for 4096 rows: each element is read once and
# written once.

GPU = DEVICE.startswith("cuda")
M_ROWS = 4096 if GPU else 16
NS = [256 * i for i in range(2, 50)] if GPU else [128, 384, 781]


@tc.testing.perf_report(
    tc.testing.Benchmark(
        x_names=["N"],
        x_vals=NS,
        y_name="provider",
        y_vals=["tc", "torch", "naive"],
        y_lines=["tc", "Torch", "Naive"],
        ylabel="GB/s",
        xlabel="N",
        plot_name="softmax-performance",
        args={"M": M_ROWS},
    )
)
def benchmark(M: int, N: int, provider: str) -> tuple[float, float, float]:
    x = torch.randn(M, N, device=DEVICE, dtype=torch.float32)
    warmup, rep = (25, 100) if GPU else (1, 5)
    device = None if GPU else "cpu"
    fns = {"tc": lambda: softmax(x), "torch": lambda: torch.softmax(x, dim=1),
           "naive": lambda: naive_softmax(x)}
    ms, min_ms, max_ms = tc.testing.do_bench(fns[provider], warmup, rep, device=device)

    def gbps(ms: float) -> float:
        return 2 * x.numel() * x.element_size() * 1e-9 / (ms * 1e-3)

    return gbps(ms), gbps(max_ms), gbps(min_ms)


if __name__ == "__main__":
    print(f"running on {DEVICE}")
    check()
    out = os.environ.get("TC_TUTORIAL_OUT", os.path.join("build", "tutorials"))
    benchmark.run(show_plots=False, print_data=True, save_path=out)
    print(f"plot and table written to {out}/softmax-performance.png/.csv")
