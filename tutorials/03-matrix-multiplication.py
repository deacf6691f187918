"""
Matrix multiplication
=====================

The third tc tutorial: a matrix multiplication kernel of about 25 lines with the `@` operator,
multi-dimensional pointer arithmetic, program re-ordering for a better L2 hit rate, and automatic
performance tuning; checked against torch (cuBLAS) in fp16 and benchmarked in TFLOPS.

(tc_torch.matmul is the production version of this kernel: any shape, batches, the four
transposition variants of the spec's macro scheme, and autograd.)

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
# Each program computes an MB x NB tile of C. Programs are grouped by MAX_GROUP_SIZE rows of tiles
# so that programs running together share tiles of A and B in L2. rm and rn are recomputed after
# the loop (rematerialized) to keep them out of registers during it. As in the spec, K must be a
# multiple of KB and the loads are not masked: M and N should be multiples of the tile, only the
# store is masked.

_src = """
#define MAX_GROUP_SIZE 8

__global__ void dot(TYPE* A, TYPE* B, TYPE* C, int M, int N, int K,
                    int lda, int ldb, int ldc) {
    // prologue
    int pid = get_program_id(0);
    int grid_m = (M + MB - 1) / MB;
    int grid_n = (N + NB - 1) / NB;
    // re-order program ID for better L2 performance
    int width = MAX_GROUP_SIZE * grid_n;
    int group_id = pid / width;
    int group_size = min(grid_m - group_id * MAX_GROUP_SIZE, MAX_GROUP_SIZE);
    int pid_m = group_id * MAX_GROUP_SIZE + (pid % group_size);
    int pid_n = (pid % width) / (group_size);
    // pointers to operands; the parentheses keep the offsets in int arithmetic
    int rm[MB] = pid_m * MB + 0 ... MB;
    int rn[NB] = pid_n * NB + 0 ... NB;
    int rk[KB] = 0 ... KB;
    TYPE* pa[MB, KB] = A + (rk[newaxis, :] * 1 + rm[:, newaxis] * lda);
    TYPE* pb[KB, NB] = B + (rk[:, newaxis] * ldb + rn[newaxis, :] * 1);
    // reduction loop
    float acc[MB, NB] = 0;
    for (int k = K; k > 0; k -= KB) {
        acc += (*pa) @ (*pb);
        pa += KB * 1;
        pb += KB * ldb;
    }
    // rematerialize rm and rn, then write back (acc converts to TYPE)
    rm = pid_m * MB + 0 ... MB;
    rn = pid_n * NB + 0 ... NB;
    TYPE* pc[MB, NB] = C + (rm[:, newaxis] * ldc + rn[newaxis, :]);
    *?(rm[:, newaxis] < M && rn[newaxis, :] < N) pc = acc;
}
"""

# %%
# Auto-tuning
# -----------
# The tutorial's eight configurations; the runtime times them the first time it sees a new value
# of the autotune key (the shapes) and keeps the fastest. The interpreter uses one configuration.

autotune_configs = [
    tc.config(defines={"MB": "128", "NB": "128", "KB": "32"}, num_warps=4),
    tc.config(defines={"MB": "64", "NB": "128", "KB": "32"}, num_warps=4),
    tc.config(defines={"MB": "128", "NB": "64", "KB": "32"}, num_warps=4),
    tc.config(defines={"MB": "64", "NB": "64", "KB": "64"}, num_warps=4),
    tc.config(defines={"MB": "32", "NB": "128", "KB": "64"}, num_warps=4),
    tc.config(defines={"MB": "128", "NB": "32", "KB": "64"}, num_warps=4),
    tc.config(defines={"MB": "64", "NB": "32", "KB": "64"}, num_warps=2),
    tc.config(defines={"MB": "32", "NB": "64", "KB": "64"}, num_warps=2),
]
cpu_configs = [tc.config(defines={"MB": "32", "NB": "32", "KB": "32"}, num_warps=4)]
autotune_key = ["M", "N", "K"]


def _device() -> str:
    forced = os.environ.get("TC_TUTORIAL_DEVICE")
    if forced:
        return forced
    return "cuda" if torch.cuda.is_available() else "cpu"


DEVICE = _device()
GPU = DEVICE.startswith("cuda")
_kernels: dict[tuple[str, torch.dtype], tc.Kernel] = {}


def make_kernel(device: torch.device, dtype: torch.dtype) -> tc.Kernel:
    key = (str(device), dtype)
    if key not in _kernels:
        configs = autotune_configs if device.type == "cuda" else cpu_configs
        _kernels[key] = tc.kernel(_src, device=device, defines={"TYPE": dtype},
                                  autotune_configs=configs, autotune_key=autotune_key)
    return _kernels[key]


# %%
# Autograd function
# -----------------


class _dot(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        M, Ka = a.shape
        Kb, N = b.shape
        assert Ka == Kb, "incompatible dimensions"
        assert a.is_contiguous() and b.is_contiguous(), "inputs must be contiguous"
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        kernel = make_kernel(a.device, a.dtype)
        grid = lambda opt: (tc.cdiv(M, opt.MB) * tc.cdiv(N, opt.NB),)  # noqa: E731
        args = (a, b, c) if a.device.type == "cpu" else (a.data_ptr(), b.data_ptr(), c.data_ptr())
        kernel(*args, M, N, Ka, a.stride(0), b.stride(0), c.stride(0), grid=grid)
        return c


def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    apply: Any = _dot.apply
    out: torch.Tensor = apply(a, b)
    return out


# %%
# Unit test
# ---------
# fp16 inputs, compared with torch.matmul (cuBLAS on the GPU) with fp16 tolerances.


def check() -> None:
    torch.manual_seed(0)
    M, K, N = (512, 768, 896) if GPU else (64, 96, 128)
    a = torch.rand((M, K), device=DEVICE, dtype=torch.float16)
    b = torch.rand((K, N), device=DEVICE, dtype=torch.float16)
    c_0 = dot(a, b)
    c_1 = torch.matmul(a, b) if GPU else (a.float() @ b.float()).half()
    print(c_0)
    print(c_1)
    ok = torch.allclose(c_0, c_1, rtol=1e-3, atol=1e-3 * K ** 0.5)
    print(f"matmul {M}x{K}x{N} fp16: tc matches torch: {ok}")
    assert ok, "tc and torch disagree"


# %%
# Benchmark
# ---------
# Square fp16 matrices, TFLOPS = 2 M N K / time, against torch.matmul (cuBLAS).

SIZES = [256 * i for i in range(2, 33)] if GPU else [64, 128]


@tc.testing.perf_report(
    tc.testing.Benchmark(
        x_names=["M", "N", "K"],
        x_vals=SIZES,
        y_name="provider",
        y_vals=["torch", "tc"],
        y_lines=["Torch (cuBLAS)" if GPU else "Torch (CPU, float32)", "tc" if GPU else "tc (interpreter)"],
        ylabel="TFLOPS",
        xlabel="M = N = K",
        plot_name="matmul-performance",
        args={},
    )
)
def benchmark(M: int, N: int, K: int, provider: str) -> tuple[float, float, float]:
    a = torch.randn((M, K), device=DEVICE, dtype=torch.float16)
    b = torch.randn((K, N), device=DEVICE, dtype=torch.float16)
    warmup, rep = (25, 100) if GPU else (1, 5)
    device = None if GPU else "cpu"
    if provider == "torch":
        fn = (lambda: torch.matmul(a, b)) if GPU else (lambda: (a.float() @ b.float()).half())
    else:
        fn = lambda: dot(a, b)  # noqa: E731
    ms, min_ms, max_ms = tc.testing.do_bench(fn, warmup, rep, device=device)

    def tflops(ms: float) -> float:
        return 2 * M * N * K * 1e-12 / (ms * 1e-3)

    return tflops(ms), tflops(max_ms), tflops(min_ms)


if __name__ == "__main__":
    print(f"running on {DEVICE}")
    check()
    out = os.environ.get("TC_TUTORIAL_OUT", os.path.join("build", "tutorials"))
    benchmark.run(show_plots=False, print_data=True, save_path=out)
    print(f"plot and table written to {out}/matmul-performance.png/.csv")
