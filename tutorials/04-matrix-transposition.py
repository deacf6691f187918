"""
Matrix transposition
====================

The fourth tc tutorial: the spec's transposition kernel. Each program loads a TM x TN tile,
transposes it with the `^` operator and stores it; the compiler stages the tile through shared
memory so that both the loads and the stores are coalesced. Bounds checks (`*?(check)`) handle any
M and N, and TM/TN are auto-tuned (list-valued defines) on the GPU.

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
# px is a TM x TN tile of pointers into X (rows rm, columns rn), py the TN x TM tile of the same
# elements in Y. checkx and checky mask the elements outside the matrices.

_src = """
__global__ void transpose(TYPE* X, TYPE* Y, int M, int N, int ldx, int ldy) {
    // extract program ID
    int pidm = get_program_id(0);
    int pidn = get_program_id(1);
    // 1D ranges along the two axes of the matrix
    int rm[TM] = pidm * TM + 0 ... TM;
    int rn[TN] = pidn * TN + 0 ... TN;
    // 2D tiles of pointers
    TYPE* px[TM, TN] = X + rm[:, newaxis] * ldx + rn[newaxis, :];
    TYPE* py[TN, TM] = Y + rm[newaxis, :] + rn[:, newaxis] * ldy;
    // bounds-checking masks
    bool checkx[TM, TN] = (rm[:, newaxis] < M) && (rn[newaxis, :] < N);
    bool checky[TN, TM] = (rm[newaxis, :] < M) && (rn[:, newaxis] < N);
    // conditional write-back of the transposed tile
    *?(checky)py = ^(*?(checkx)px);
}
"""

# %%
# Torch bindings
# --------------
# On the GPU, TM and TN are lists: the runtime times the nine combinations the first time it sees
# a new (M, N) and keeps the fastest. The interpreter uses one tile size.


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
        tiles: dict[str, object] = ({"TM": [32, 64, 128], "TN": [32, 64, 128]}
                                    if device.type == "cuda" else {"TM": 32, "TN": 32})
        _kernels[key] = tc.kernel(_src, device=device, defines={"TYPE": dtype, **tiles},
                                  num_warps=4, autotune_key=["M", "N"])
    return _kernels[key]


class _transpose(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 2 and x.stride(1) == 1, "x must be a row-major matrix"
        M, N = x.shape
        y = torch.empty((N, M), device=x.device, dtype=x.dtype)
        kernel = make_kernel(x.device, x.dtype)
        grid = lambda opt: (tc.cdiv(M, opt.TM), tc.cdiv(N, opt.TN))  # noqa: E731
        args = (x, y) if x.device.type == "cpu" else (x.data_ptr(), y.data_ptr())
        kernel(*args, M, N, x.stride(0), y.stride(0), grid=grid)
        return y


def transpose(x: torch.Tensor) -> torch.Tensor:
    apply: Any = _transpose.apply
    out: torch.Tensor = apply(x)
    return out


# %%
# Unit test
# ---------


def check() -> None:
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16):
        M, N = (1823, 781) if GPU else (123, 78)
        x = torch.randn(M, N, device=DEVICE, dtype=dtype)
        ok = torch.equal(transpose(x), x.t())
        print(f"transpose {M}x{N} {str(dtype).replace('torch.', '')}: tc matches torch: {ok}")
        assert ok, "tc and torch disagree"


# %%
# Benchmark
# ---------
# Bandwidth in GB/s for square float32 matrices: every element is read once and written once.
# torch's peer is x.t().contiguous().

SIZES = [256 * i for i in range(2, 33, 2)] if GPU else [64, 128]


@tc.testing.perf_report(
    tc.testing.Benchmark(
        x_names=["N"],
        x_vals=SIZES,
        y_name="provider",
        y_vals=["tc", "torch"],
        y_lines=["tc", "Torch"],
        ylabel="GB/s",
        xlabel="M = N",
        plot_name="transpose-performance",
        args={},
    )
)
def benchmark(N: int, provider: str) -> tuple[float, float, float]:
    x = torch.randn(N, N, device=DEVICE, dtype=torch.float32)
    warmup, rep = (25, 100) if GPU else (1, 5)
    device = None if GPU else "cpu"
    fn = (lambda: transpose(x)) if provider == "tc" else (lambda: x.t().contiguous())
    ms, min_ms, max_ms = tc.testing.do_bench(fn, warmup, rep, device=device)

    def gbps(ms: float) -> float:
        return 2 * x.numel() * x.element_size() * 1e-9 / (ms * 1e-3)

    return gbps(ms), gbps(max_ms), gbps(min_ms)


if __name__ == "__main__":
    print(f"running on {DEVICE}")
    check()
    out = os.environ.get("TC_TUTORIAL_OUT", os.path.join("build", "tutorials"))
    benchmark.run(show_plots=False, print_data=True, save_path=out)
    print(f"plot and table written to {out}/transpose-performance.png/.csv")
