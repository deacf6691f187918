"""Matrix multiplication, 2-D and batched, as a differentiable op: the tutorial's kernel (grouped
program ordering, masked store, auto-tuned per (M, N, K)) with the spec's macro scheme for the four
transposition variants.

The variant of each operand follows its memory layout: a row-major operand is read as is, a
column-major one (e.g. `a.t()` of a contiguous `a`) through the transposed variant (`USE_A=^a`),
without a copy; any other layout is copied first. The backward passes dC @ B^T and A^T @ dC are
the same kernel on transposed views."""

from __future__ import annotations

from typing import Any

import torch

import tc_runtime as tc

from ..devices import (FLOAT_DTYPES, INT32_LIMIT, acc_type, check_extent, check_tensor, cuda_index,
                       device_of, extent, launch, on_cuda, tc_type)
from ..library import get_kernel
from . import transpose as transpose_op
from .first_order import first_order
from .pad_rows import fast_padded, padded

OP = "tc_torch.matmul"
PRECISIONS = ("ieee", "tf32")

#: The defines of each operand variant (the spec's option list; see kernels/matmul.tc).
A_VARIANTS = {
    False: {"USE_A": "a", "STRIDE_AK": "1", "STRIDE_AM": "lda", "BROADCAST_AK": "newaxis,:",
            "BROADCAST_AM": ":,newaxis", "SHAPE_A": "MB,KB"},
    True: {"USE_A": "^a", "STRIDE_AK": "lda", "STRIDE_AM": "1", "BROADCAST_AK": ":,newaxis",
           "BROADCAST_AM": "newaxis,:", "SHAPE_A": "KB,MB"},
}
B_VARIANTS = {
    False: {"USE_B": "b", "STRIDE_BK": "ldb", "STRIDE_BN": "1", "BROADCAST_BK": ":,newaxis",
            "BROADCAST_BN": "newaxis,:", "SHAPE_B": "KB,NB"},
    True: {"USE_B": "^b", "STRIDE_BK": "1", "STRIDE_BN": "ldb", "BROADCAST_BK": "newaxis,:",
           "BROADCAST_BN": ":,newaxis", "SHAPE_B": "NB,KB"},
}


def _cfg(mb: int, nb: int, kb: int, warps: int, stages: int, group: int | None = None,
         **options: bool) -> tc.Config:
    """A tile configuration; `group` sets GROUP_SIZE (rows of tiles per group of the program
    order; kernels/matmul.tc's default is 8)."""
    defines: dict[str, int] = {"MB": mb, "NB": nb, "KB": kb}
    if group is not None:
        defines["GROUP_SIZE"] = group
    return tc.config(defines=defines, num_warps=warps, num_stages=stages, options=options or None)


#: On sm_90 a persistent grid (at most one program per SM looping over the tiles, balanced by
#: tc_runtime.kernel.persistent_ctas; a producer warp) whose bulk-store epilogue overlaps the next
#: tile (tc_opt.warp_specialize, tc_opt.tma_store); before sm_90 these compile as the plain
#: configuration.
PERSISTENT = {"persistent": True, "tma_store": True}


#: Tensor-core configurations (half, bf16): the tutorial's eight, plus larger tiles for sm_90.
TENSOR_CORE_CONFIGS = [
    _cfg(128, 128, 32, 4, 3), _cfg(64, 128, 32, 4, 3), _cfg(128, 64, 32, 4, 3),
    _cfg(64, 64, 64, 4, 3), _cfg(32, 128, 64, 4, 3), _cfg(128, 32, 64, 4, 3),
    _cfg(64, 32, 64, 2, 3), _cfg(32, 64, 64, 2, 3),
    _cfg(128, 256, 64, 8, 3), _cfg(256, 128, 64, 8, 3), _cfg(128, 128, 64, 4, 4),
    _cfg(64, 256, 32, 4, 4), _cfg(128, 128, 64, 4, 3),  # (the best on wgmma, H100 2026-11-23)
    _cfg(128, 256, 64, 8, 4), _cfg(128, 256, 64, 8, 3, **PERSISTENT),
    _cfg(128, 256, 64, 8, 4, **PERSISTENT),  # (two 16 KiB store buffers: 230,400 bytes)
    # each program's first dot before the previous one's stores (tc_opt.overlap_epilogue): H100,
    # 2026-11-26, tutorial kernel at 4096^3, 288.2 k -> 285.6 k cycles (cuBLAS 284.4 k)
    _cfg(128, 256, 64, 8, 4, **PERSISTENT, overlap_epilogue=True),
    # the same in clusters of 2 whose CTAs multicast the B tile they share, half of its panels
    # each (tc_opt.warp_specialize): H100, 2026-11-27, x cuBLAS in 5 rounds, 8192^3 1.051
    # against 1.017 without; 4096^3 1.001 against 1.009. (Those runs had no overlapped epilogue:
    # clusters kept it out until the thirty-eighth session. With it, H100, TFLOPS forced, one
    # run: 4096^3 689 against 710 without clusters, 8192^3 673 / 676, 4104^3 568 / 430.)
    _cfg(128, 256, 64, 8, 4, **PERSISTENT, overlap_epilogue=True, cluster_multicast=True),
    # 192 columns (tile dimensions need not be powers of two): where 128x256 tiles leave most of
    # the last wave of 132 SMs idle. H100, 2026-11-25, x cuBLAS in interleaved rounds against the
    # tuner's choice without them: 3072^3 0.80 -> 0.97 (128x192 persistent), 3840^3 0.94 -> 0.97,
    # 4352^3 0.93 -> 0.99 (256x192), 5120^3 0.89 -> 0.93
    _cfg(128, 192, 64, 8, 4, **PERSISTENT), _cfg(128, 192, 64, 8, 4, **PERSISTENT, overlap_epilogue=True),
    _cfg(256, 192, 64, 8, 3),
    # 256x160 (no producer warp: its accumulator leaves too few registers under 9 warps): 5120^3
    # is 640 such tiles, 5 for each of 128 CTAs, where 128x256 tiles give 7 to some CTAs and 6
    # to others. H100, 2026-11-26, tutorial kernel x cuBLAS in 7 interleaved rounds: 0.968
    # against 0.945 for 128x256x64/8/3 persistent (0.845 for 128x160). Without a bulk store: in
    # 64-byte panels (tc_opt.tma_store.store_swizzle) it ran 5120^3 at 634 TFLOPS against 665
    # without (H100, thirty-seventh session)
    _cfg(256, 160, 64, 8, 3, persistent=True),
    # 64x128 tiles with K steps of 64: products too small to give every SM a 128x128 tile.
    # H100, 2026-11-27, Nsight cycles of one launch (cuBLAS 14.2 k at 1024^3, 25.6 k at 1536^3):
    # 1024^3 /4/6 14.1 k, /4/4 15.2 k, /4/3 18.1 k against 17.9 k for the best 128x128 tile;
    # 1536^3 32.5 k (/4/3) against 36.6 k
    _cfg(64, 128, 64, 4, 3), _cfg(64, 128, 64, 4, 4), _cfg(64, 128, 64, 4, 6),
    # 192x96 (cuBLAS's tile at 1536^3, nvjet 192x96 with 5 stages): 1536^3 is then 128 tiles, one
    # per SM, each 1.125 times a 128x128 tile, where 128x128 tiles give 12 SMs two and 64x128
    # give some three halves. H100, 2026-11-27, Nsight cycles of one launch at 1536^3: 28.7 k
    # against 32.0 k for 64x128x64/4/3 (cuBLAS 25.6 k); 3 stages 34.9 k, 5 stages 31.5 k,
    # persistent with a producer warp and bulk stores 29.5 k
    _cfg(192, 96, 64, 4, 4),
    # 192x192 with 12 warps, three warpgroups of 64 rows: squares just past a multiple of 2048,
    # where every tile of 128 or 256 rows leaves a partial wave (2064^3: 11 x 11 = 121 tiles for
    # 132 SMs). H100, 2026-11-27, TFLOPS forced (tools/bench_matmul_shapes.py), against the best
    # of 256x192x64/8/3 and 128x256x64/8/4 persistent overlapped, and torch: 2064^3 /12/4 522
    # against 450 (torch 584), 3072^3 persistent /12/3 687 against 593 (torch 721), 2056^3 382
    # against 371, 3000^3 448 against 436; slower at 4096^3 (624 against 698), 2304^3 and 4104^3.
    # Before sm_90 they run on mma.sync with 56 bytes of spills (the tuner times them there too).
    _cfg(192, 192, 64, 12, 4), _cfg(192, 192, 64, 12, 3, **PERSISTENT),
    # the same in clusters of 2 that multicast a shared tile: where rows 16 bytes but not 32
    # apart (4104, 3000, 2056 halves) cut L2's sectors, halving an operand's reads from L2 pays
    # most. H100, 2026-11-27, TFLOPS forced (tools/bench_matmul_shapes.py) against
    # 128x256x64/8/4 persistent overlapped with multicast and torch: 4104^3 550 against 504
    # (torch 644), 2056^3 435 against 339 (550), 3000^3 536 against 520 (633). Programs in
    # rows (GROUP_SIZE 1: programs t and t ^ 1 side by side, sharing A) rather than in groups
    # of 8 rows (sharing B): H100, thirty-seventh session, two runs, 4104^3 560 / 567 against
    # 552 / 551, 2056^3 424 / 433 against 408 / 407, 5000^3 539 / 543 against 526, 4096^3
    # 629 / 621 against 623 (cuBLAS's kernels at these shapes run in clusters of 2 as well)
    _cfg(192, 192, 64, 12, 3, 1, **PERSISTENT, cluster_multicast=True),
    # Not listed: 192x256 on 12 warps (22% fewer operand bytes per FLOP than 128x256; no producer
    # fits, ptxas compiles 16 warps to 128 registers a thread). H100, forty-second session: 4096^3
    # 6-12% slower in every variant (2.67 waves of 1.5-unit tiles; stream-K won 5% back), and
    # tuned at 8192^3 with it as without (mean 1.030 against 1.027x torch over six products).
]
#: float32 with precision="tf32": on sm_90 wgmma. A B with B N-contiguous (no transposition)
#: runs transposed with B^T in registers (tc_opt.k_major_operands): 256x128x32 with 8 warps and 4
#: stages measured best on an H100 (372 TFLOPS alone at 4096^3, 0.95x cuBLAS in rounds); with A
#: transposed (A read into registers, B restaged or K-contiguous) 128x256x32 (0.94x; a large A^T B
#: copies an operand K-contiguous first instead: TRANSPOSE_FIRST_MIN below). The 4-warp
#: tiles serve small products and GPUs before sm_90 (mma.sync). The persistent ones run with a
#: producer warp in A B^T (both operands K-contiguous; 1-2% over the plain tiles there, H100
#: 2026-11-25) and without one in the other layouts (tc_opt.persistent; A B 256x128x32/8/4: 2.2
#: GB read from DRAM at 8192^3 instead of 3.0-4.3, 0.94 -> 0.96x and 0.91 -> 0.93x torch at
#: 4096^3 and 8192^3, H100 2026-11-25). Tiles of 192 columns do not pay for tf32 (0.79-0.90x
#: torch at 4096^3 in A B and A B^T, H100 2026-11-25). The persistent 256x128 once more with
#: groups of 4 rows of tiles (GROUP_SIZE): A B 8192^3 x torch in four interleaved runs (H100,
#: 2026-11-25/26) 0.972 / 1.004 / 0.977 / 0.960 against 0.960 / 1.001 / 0.946 / 0.953 with 8; at
#: 4096^3 0.983 / 0.965 against 0.984 / 0.983 (so both are offered; the tuner chooses). The
#: last: stream-K on its last wave (tc_opt.stream_k), A B 8192^3 x cuBLAS 0.994 / 0.984 / 1.002
#: in three processes against 0.982 / 0.977 / 0.975 for the same tile without (H100,
#: 2026-11-27); at 4096^3 it loses (0.93 against 0.96-0.98), where the tuner leaves it.
TF32_CONFIGS = [
    _cfg(256, 128, 32, 8, 4), _cfg(256, 128, 32, 8, 3), _cfg(128, 256, 32, 8, 3), _cfg(128, 128, 32, 8, 4),
    _cfg(128, 128, 32, 4, 4), _cfg(64, 128, 32, 4, 3), _cfg(64, 64, 32, 4, 3),
    _cfg(128, 256, 32, 8, 3, persistent=True), _cfg(256, 128, 32, 8, 4, persistent=True),
    _cfg(256, 128, 32, 8, 4, group=4, persistent=True),
    _cfg(256, 128, 32, 8, 4, group=4, persistent=True, stream_k=True),
]
#: tf32 with B K-contiguous (A B^T, A^T B^T): nothing is restaged, so a persistent 128x256x32
#: with 4 stages fits (196,672 bytes) and feeds the loop better than 3 stages: A B^T 4096^3
#: 0.93 -> 0.96x torch in one interleaved run (H100, 2026-11-25). With a bulk-store epilogue
#: too (4 stages and two 16 KiB store buffers: 230,400 bytes): H100 2026-11-26, A B^T x torch in
#: two interleaved passes, 4096^3 8/3 0.961 / 0.976 and 8/4 0.963 / 0.955 against 0.943 / 0.922
#: without the store; 8192^3 8/3 0.994 / 0.997 against 0.970 / 0.978.
TF32_K_MAJOR_B_CONFIGS = [*TF32_CONFIGS, _cfg(128, 256, 32, 8, 4, persistent=True),
                          _cfg(128, 256, 32, 8, 3, **PERSISTENT), _cfg(128, 256, 32, 8, 4, **PERSISTENT)]
#: float32 (ieee) and float64: CUDA-core products, smaller tiles.
FMA_CONFIGS = [
    _cfg(64, 64, 32, 4, 3), _cfg(128, 64, 32, 4, 3), _cfg(64, 128, 32, 4, 3),
    _cfg(128, 128, 16, 8, 3), _cfg(32, 64, 32, 2, 3), _cfg(64, 32, 32, 2, 3),
]
#: The interpreter: one small configuration (timing configs there would only cost time).
CPU_CONFIG = _cfg(32, 32, 16, 4, 1)

#: Stream-K (kernels/matmul_streamk.tc), `matmul_out(..., stream_k="on")` for a single 16-bit
#: product: one program per SM takes whole tiles round robin for all waves but the last full
#: one, then shares the (tile, k-step) iterations of the rest; partial tiles meet in a workspace.
#: Off by default: on an H100 (2026-11-25, 5 interleaved rounds against the plain auto-tuned
#: kernel) it gained 2-4% where 128x256 tiles fill the last wave badly (3072^3 1.026x, 4352^3
#: 1.021x, 5120^3 1.037x, 5632^3 1.028x) and lost elsewhere (2304^3 0.78x, 2560^3 0.90x, 3840^3
#: 0.97x, 4096^3 0.88x, 8192^3 0.96x): no rule from the wave fill alone picked only the gains.
STREAM_K_CONFIGS = [_cfg(128, 256, 64, 8, 3), _cfg(128, 256, 64, 8, 4), _cfg(256, 128, 64, 8, 3),
                    _cfg(128, 128, 64, 4, 4)]
STREAM_K = ("on", "off")
#: Programs of a stream-K launch on the interpreter (several, so that tiles are cut).
CPU_STREAM_K_PROGRAMS = 3


def configs_for(dtype: torch.dtype, device: torch.device, precision: str = "ieee",
                trans_b: bool = False) -> list[tc.Config]:
    """The auto-tuner's configurations for a product of `dtype` on `device`; `trans_b` (B
    K-contiguous) matters to tf32 alone."""
    if device.type == "cpu":
        return [CPU_CONFIG]
    if dtype in (torch.float16, torch.bfloat16):
        return TENSOR_CORE_CONFIGS
    if dtype == torch.float32 and precision == "tf32":
        return TF32_K_MAJOR_B_CONFIGS if trans_b else TF32_CONFIGS
    return FMA_CONFIGS


def kernel_for(dtype: torch.dtype, trans_a: bool, trans_b: bool, device: torch.device,
               configs: list[tc.Config] | None = None, precision: str = "ieee") -> tc.Kernel:
    """The matmul kernel of one (dtype, variant, device, float32 precision), auto-tuned over
    `configs` on (M, N, K)."""
    defines: dict[str, object] = {"TYPE": tc_type(dtype, OP, FLOAT_DTYPES), "ACC": acc_type(dtype),
                                  **A_VARIANTS[trans_a], **B_VARIANTS[trans_b]}
    cfgs = configs if configs is not None else configs_for(dtype, device, precision, trans_b)
    return _tuned("matmul", device, defines, cfgs, precision)


def _tuned(name: str, device: torch.device, defines: dict[str, object], cfgs: list[tc.Config],
           precision: str = "ieee") -> tc.Kernel:
    """Kernel `name` of kernels/<name>.tc auto-tuned over `cfgs` on (M, N, K); one
    configuration without options of its own is compiled directly (nothing to time)."""
    if len(cfgs) == 1 and not cfgs[0].options:  # (a schedule's options live in the config)
        c = cfgs[0]
        return get_kernel(name, name, device, {**defines, **c.defines}, c.num_warps, c.num_stages,
                          fp32_dot=precision)
    return get_kernel(name, name, device, defines, configs=cfgs, key=["M", "N", "K"], fp32_dot=precision)


#: The GPU kernels matmul_out chose so far (its default configurations), by (dtype, A transposed,
#: B transposed, device index, precision): the fast path's look-up.
_KERNELS: dict[tuple[torch.dtype, bool, bool, int, str], tc.Kernel] = {}

#: The fast path's launches by operand layout: (shapes, strides, dtypes, device index, precision)
#: -> (the _KERNELS key, the output's shape, the integer arguments, the grid function), for
#: products that read their operands in place. A call with a layout seen before only allocates
#: and launches: deriving the launch again cost the host about 6 us a call on an H100's host
#: (thirty-ninth session), a quarter of a 2048^3 product's kernel time.
_PLANS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
#: Layouts _PLANS holds at most (all are forgotten beyond: a workload has a few).
PLANS_MAX = 1024
#: The backward pass's launches of 2-D products by layout: (A, B and dC's shapes and strides,
#: dtypes, device index, precision, which gradients) -> (dA's plan or None, dB's plan or None),
#: plans of _PLANS. Torch runs the backward on its autograd thread, where Python runs 2-3x
#: slower than on the calling thread (fortieth session): a planned backward launches both
#: products without the transposes and _mm's layers.
_BACKWARD_PLANS: dict[tuple[Any, ...], tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]] = {}


def _layout(t: torch.Tensor) -> tuple[torch.Tensor, bool, int]:
    """(tensor, transposed, leading dimension) of the matrices in the last two dims of t."""
    rows, cols = t.shape[-2], t.shape[-1]
    if t.stride(-1) == 1 or cols == 1:
        return t, False, int(t.stride(-2)) if rows > 1 else max(cols, 1)
    if t.stride(-2) == 1 or rows == 1:
        return t, True, int(t.stride(-1)) if cols > 1 else max(rows, 1)
    t = t.contiguous()
    return t, False, max(cols, 1)


#: tf32 products whose operands both lie M- or N-contiguous (A^T B: dB = A^T dC in training) copy
#: the smaller operand K-contiguous first (tc_torch.transpose) when the product has at least
#: TRANSPOSE_FIRST_MIN_FLOPS and the other operand's free dimension is at least
#: TRANSPOSE_FIRST_MIN: wgmma reads 32-bit operands K-major only, and with both operands MN-major
#: the kernel restages one of them in every K step (tc_opt.k_major_operands), which runs at about
#: 0.7x the other layouts' TFLOPS on an H100 (234 against 311-333 at 4096^3 and 8192^3), far more
#: than one transposition at the bandwidth limit costs. H100, x torch without / with the copy
#: (tools/bench_tf32_plans.py; BENCHMARKS.md, 2026-11-25 thirteenth session): 512^3 0.80 / 0.76,
#: 768^3 0.79 / 0.83, 1024^3 0.76 / 0.82, 1280^3 0.92 / 1.02, 1536^3 0.95 / 1.23-1.26, 2048^3
#: 1.02 / 1.27, 4096^3 1.05 / 1.44, 8192^3 0.99 / 1.35; 2048x1024x1024 (B copied) 0.97 / 1.05.
TRANSPOSE_FIRST_MIN = 768
TRANSPOSE_FIRST_MIN_FLOPS = 8e8
TRANSPOSE_FIRST = ("auto", "a", "b", "none")

_sm90: dict[int, bool] = {}


def _has_wgmma(device: torch.device) -> bool:
    """Whether the CUDA device runs the sm_90 tensor-core path (memoized per device index)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    found = _sm90.get(index)
    if found is None:
        found = _sm90[index] = torch.cuda.get_device_capability(index)[0] == 9
    return found


def pick_transpose_first(m: int, n: int, k: int, ta: bool, tb: bool) -> str:
    """Which operand a tf32 product on sm_90 copies K-contiguous before it runs: "a", "b" or
    "none" (see TRANSPOSE_FIRST_MIN). Only A^T B qualifies; of its operands the smaller one (A on
    a tie: A B then runs with B^T in registers, the fastest tf32 layout) is copied, when the
    product is large enough and the other operand's free dimension pays for the copy."""
    if not ta or tb or 2.0 * m * n * k < TRANSPOSE_FIRST_MIN_FLOPS:
        return "none"
    if m * k <= k * n:
        return "a" if n >= TRANSPOSE_FIRST_MIN else "none"
    return "b" if m >= TRANSPOSE_FIRST_MIN else "none"


def _k_contiguous(x: torch.Tensor, transposed: bool) -> tuple[torch.Tensor, bool, int]:
    """A K-contiguous copy of the one matrix x (1, R, C) holds, made by tc's transpose kernel, as
    _layout returns it: A (M-contiguous, transposed) becomes row-major; B (N-contiguous) becomes
    column-major, the transposed variant with leading dimension K."""
    mat = x[0]
    if transposed:  # A: [M, K] with M contiguous, i.e. A^T row-major in memory
        y = torch.empty(mat.shape, dtype=x.dtype, device=x.device)
        transpose_op.transpose_out(y, mat.t())
        return y.unsqueeze(0), False, max(int(mat.shape[1]), 1)
    y = torch.empty((mat.shape[1], mat.shape[0]), dtype=x.dtype, device=x.device)
    transpose_op.transpose_out(y, mat)  # B^T, row-major: B column-major
    return y.t().unsqueeze(0), True, max(int(mat.shape[0]), 1)


#: Operands whose leading dimension is not a multiple of 8 elements (4100 or 4095 columns): the
#: runtime tells a kernel of integers divisible by 16 or by 8 only (tc_runtime.signature), so the
#: kernel cannot know that such rows start 16 bytes apart, which the TMA copies need (and
#: cp.async's 16-byte pieces): it loads them one element at a time, without a pipeline (about 0.5x
#: torch at 4100^3 on an H100, fp16 and tf32 alike, BENCHMARKS.md, thirty-fourth session). A GPU
#: product of at least PAD_MIN_FLOPS copies such an operand first into rows of a multiple of
#: PAD_ROWS_TO elements (one read and one write of it) and runs on the copy (matmul_out's `pad`):
#: 4100^3 fp16 111 -> 456 TFLOPS, 4095^3 125 -> 478 (H100, thirty-fourth session). The threshold
#: is TRANSPOSE_FIRST_MIN_FLOPS, from which tf32's copies paid; padding's own break-even has not
#: been measured.
PAD_MIN_FLOPS = 8e8
PAD = ("auto", "on", "off")
#: Rows of 16-bit elements 16 bytes apart but not 32 (leading dimensions 8 modulo 16: 4104, 3000,
#: 1000) start every other row in the middle of a 32-byte sector of L2, and the kernels that stream
#: the most rows of such an operand per K step lose the most. H100, thirty-fifth session, fp16, the
#: 128x256 persistent tile forced, TFLOPS with the operand's rows as they are / padded to 64:
#: B's rows of 4104 (4096x4104x4096) 458 / 592; A's rows of 4104 (4104^3, B padded) 568 / 596;
#: rows 32 bytes apart (4112) are not slower; cp.async copies instead of TMA are slower still.
#: The tuner's choice among tiles softens it (4096x4104x4096 626 against cuBLAS's 678), and a
#: copy costs one read and one write of the operand, so copying B first pays only where A has
#: many rows: with the tuner's choice, padded / not (pad "auto" / "off"), 6008^3 605 / 523
#: (C = A B; dA and dB +6% and +10%), 4104^3 503 / 479, but 3000^3 434 / 519 and 4096x4104x4096
#: 535 / 626. matmul_out copies such a B into rows of PAD_ROWS_TO before products of at least
#: PAD_MIN_FLOPS with at least PAD_SPLIT_MIN_ROWS rows of A (A is left as it is).
PAD_SPLIT_MIN_ROWS = 6000


def rows_aligned(ld: int) -> bool:
    """Whether a kernel learns that rows `ld` elements apart are 16-byte aligned: `ld` divisible by
    8 (the runtime's divisible_by_8 and divisible_by_16 classes; 16 bytes for 16-bit elements,
    more for wider ones)."""
    return ld % 8 == 0


def sectors_split(ld: int, itemsize: int) -> bool:
    """Whether rows `ld` elements of `itemsize` bytes apart are 16-byte but not 32-byte aligned
    (16-bit elements, `ld` 8 modulo 16: see PAD_SPLIT_MIN_ROWS)."""
    return rows_aligned(ld) and (ld * itemsize) % 32 != 0


def pads(m: int, n: int, k: int, lds: tuple[int, int], pad: str = "auto", gpu: bool = True,
         itemsize: int = 4) -> tuple[bool, bool]:
    """Whether matmul_out copies A and B (leading dimensions `lds`, elements of `itemsize` bytes)
    into padded rows before a product of M x N x K: an operand whose leading dimension is not a
    multiple of 8, and a B whose rows split sectors (sectors_split); with pad "on" always, with
    "auto" on a GPU from PAD_MIN_FLOPS up (and, for B's split sectors, from PAD_SPLIT_MIN_ROWS
    rows of A)."""
    lda, ldb = lds
    if pad == "off":
        return False, False
    split_b = sectors_split(ldb, itemsize)
    if pad == "on":
        return not rows_aligned(lda), not rows_aligned(ldb) or split_b
    if not gpu or 2.0 * m * n * k < PAD_MIN_FLOPS:
        return False, False
    return not rows_aligned(lda), not rows_aligned(ldb) or (split_b and m >= PAD_SPLIT_MIN_ROWS)


#: Stream-K workspaces, by (device index, stream): partial tiles and flags (the kernel leaves
#: the flags at 0). One per stream: launches on one stream run one after the other.
_WORKSPACES: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}


def _workspace(device: torch.device, programs: int, tile: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Floats for `programs` partial tiles of `tile` elements and `programs` zeroed flags."""
    key = (-1, 0) if not on_cuda(device) else (
        device.index if device.index is not None else torch.cuda.current_device(),
        torch.cuda.current_stream(device).cuda_stream)
    found = _WORKSPACES.get(key)
    if found is None or found[0].numel() < programs * tile or found[1].numel() < programs:
        found = (torch.empty(programs * tile, dtype=torch.float32, device=device),
                 torch.zeros(programs, dtype=torch.int32, device=device))
        _WORKSPACES[key] = found
    return found


def _stream_k(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, ta: bool, tb: bool, lda: int,
              ldb: int, configs: list[tc.Config] | None) -> None:
    """c[0] = a[0] @ b[0] by kernels/matmul_streamk.tc (auto-tuned over STREAM_K_CONFIGS)."""
    device = c.device
    _, m, n = c.shape
    k = a.shape[-1]
    cpu = not on_cuda(device)
    cfgs = configs or ([CPU_CONFIG] if cpu else STREAM_K_CONFIGS)
    defines: dict[str, object] = {"TYPE": tc_type(a.dtype, OP, FLOAT_DTYPES), "ACC": acc_type(a.dtype),
                                  **A_VARIANTS[ta], **B_VARIANTS[tb]}
    kern = _tuned("matmul_streamk", device, defines, cfgs)
    slots = CPU_STREAM_K_PROGRAMS if cpu else torch.cuda.get_device_properties(device).multi_processor_count
    tile = max(int(cf.defines["MB"]) * int(cf.defines["NB"]) for cf in cfgs)  # type: ignore[call-overload]
    w, f = _workspace(device, slots, tile)

    def grid(opt: tc.Options) -> tuple[int]:  # (at most one program per iteration: none idle)
        return (min(slots, tc.cdiv(m, opt.MB) * tc.cdiv(n, opt.NB) * tc.cdiv(k, opt.KB)),)

    launch(kern, device, grid, a, b, c, w, f, m, n, k, lda, ldb, max(n, 1))


def matmul_out(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
               configs: list[tc.Config] | None = None, precision: str = "ieee", *,
               transpose_first: str = "auto", stream_k: str = "off", pad: str = "auto") -> torch.Tensor:
    """c = a @ b for a (Z|1, M, K), b (Z|1, K, N) and a contiguous c (Z, M, N); a batch of 1 is
    broadcast (batch stride 0). No autograd. `transpose_first` ("auto", "a", "b" or "none") says
    whether an MN-contiguous operand is copied K-contiguous first; "auto" does so for the tf32
    products of sm_90 that `pick_transpose_first` picks. An operand already K-contiguous, or a
    batched one, is never copied. `stream_k="on"` runs a single float16 or bfloat16 product
    (Z = 1) by stream-K (STREAM_K_CONFIGS; `configs`, if given, are then the stream-K kernel's);
    other products ignore it. `pad` ("auto", "on" or "off") says whether operands whose leading
    dimension is not a multiple of 8, and a B whose rows split L2's sectors, are copied into
    padded rows first; "auto" does so for large GPU products (`pads`)."""
    if pad not in PAD:
        raise ValueError(f"{OP}: pad must be one of {', '.join(PAD)}, got {pad!r}")
    if transpose_first not in TRANSPOSE_FIRST:
        raise ValueError(f"{OP}: transpose_first must be one of {', '.join(TRANSPOSE_FIRST)}, got "
                         f"{transpose_first!r}")
    if stream_k not in STREAM_K:
        raise ValueError(f"{OP}: stream_k must be one of {', '.join(STREAM_K)}, got {stream_k!r}")
    if configs is not None:
        _check_configs(configs)
    _check_out(c, a, b)
    device = device_of([c, a, b], OP)
    z, m, n = c.shape
    k = a.shape[-1]
    if c.numel() == 0:
        return c
    a, ta, lda = _layout(a)
    b, tb, ldb = _layout(b)
    plan = transpose_first
    if plan == "auto":
        tf32_wgmma = precision == "tf32" and on_cuda(device) and _has_wgmma(device)
        plan = pick_transpose_first(m, n, k, ta, tb) if tf32_wgmma else "none"
    if plan == "a" and ta and a.shape[0] == 1:
        a, ta, lda = _k_contiguous(a, True)
    elif plan == "b" and not tb and b.shape[0] == 1:
        b, tb, ldb = _k_contiguous(b, False)
    pad_a, pad_b = pads(m, n, k, (lda, ldb), pad, on_cuda(device), a.element_size())
    if pad_a:
        a, lda = padded(a, ta, lda, device)
    if pad_b:
        b, ldb = padded(b, tb, ldb, device)
    check_extent(OP, a, b, c)
    if z > 65535:
        raise ValueError(f"{OP}: a batch of {z} matrices is more than the grid allows (65535)")
    if _runs_stream_k(stream_k, z, k, a.dtype):
        _stream_k(c, a, b, ta, tb, lda, ldb, configs)
        return c
    chosen = configs is None and on_cuda(device)
    kern = _KERNELS.get((a.dtype, ta, tb, device.index, precision)) if chosen else None
    if kern is None:  # (kernel_for keys the configurations: 30 of them cost the host 20-40 us)
        kern = kernel_for(a.dtype, ta, tb, device, configs, precision)
        if chosen:
            _KERNELS[a.dtype, ta, tb, device.index, precision] = kern
    saz = int(a.stride(0)) if a.shape[0] > 1 else 0
    sbz = int(b.stride(0)) if b.shape[0] > 1 else 0

    def grid(opt: tc.Options) -> tuple[int, int]:
        return tc.cdiv(m, opt.MB) * tc.cdiv(n, opt.NB), z

    launch(kern, device, grid, a, b, c, m, n, k, lda, ldb, max(n, 1), saz, sbz, m * n)
    return c


#: The defines a matmul configuration sets: the tile (kernels/matmul.tc, matmul_streamk.tc).
TILE_DEFINES = ("MB", "NB", "KB")


def _check_configs(configs: object) -> None:
    """matmul_out's `configs`: a non-empty list of tc_runtime configs that each set the tile
    (TILE_DEFINES); before, a dict failed inside the tuner and a missing tile as an undeclared
    name in the kernel's source."""
    if not isinstance(configs, (list, tuple)) or not configs:
        raise TypeError(f"{OP}: configs must be a non-empty list of tc_runtime.config(...) objects "
                        f"(or None for the auto-tuner's), got {configs!r}")
    for i, cfg in enumerate(configs):
        if not isinstance(cfg, tc.Config):
            raise TypeError(f"{OP}: configs[{i}] must be a tc_runtime.config(...), got {type(cfg).__name__} "
                            f"{cfg!r}")
        missing = [d for d in TILE_DEFINES if d not in cfg.defines]
        if missing:
            raise ValueError(f"{OP}: configs[{i}] must set the tile defines {', '.join(TILE_DEFINES)}; "
                             f"it lacks {', '.join(missing)}")


def _check_out(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """matmul_out's operands: 3-D tensors of one dtype, c contiguous (Z, M, N) for a (Z|1, M, K)
    and b (Z|1, K, N) (the kernel writes c's M x N and reads the operands' extents from them)."""
    for name, t in (("c", c), ("a", a), ("b", b)):
        check_tensor(t, OP, name)
        if t.dim() != 3:
            raise ValueError(f"{OP}: matmul_out takes 3-D (batch, rows, columns) tensors, got {name} "
                             f"of shape {tuple(t.shape)}")
    if not a.dtype == b.dtype == c.dtype:
        raise TypeError(f"{OP}: c, a and b must have one dtype, got {c.dtype}, {a.dtype} and {b.dtype}")
    z, m, n = c.shape
    if a.shape[1] != m or b.shape[2] != n or a.shape[2] != b.shape[1] or a.shape[0] not in (z, 1) \
            or b.shape[0] not in (z, 1):
        raise ValueError(f"{OP}: c of shape {tuple(c.shape)} does not hold a @ b for a of shape "
                         f"{tuple(a.shape)} and b of shape {tuple(b.shape)}")
    if not c.is_contiguous():
        raise ValueError(f"{OP}: c must be contiguous (matmul_out writes it row-major)")


def _runs_stream_k(stream_k: str, z: int, k: int, dtype: torch.dtype) -> bool:
    """Whether matmul_out runs this product by stream-K (see its `stream_k`)."""
    return stream_k == "on" and z == 1 and k > 0 and dtype in (torch.float16, torch.bfloat16)


def _operand(rows: int, cols: int, strides: tuple[int, ...]) -> tuple[bool, int, int] | None:
    """(transposed, leading dimension, extent) of a matrix of rows x cols with `strides` read in
    place, as _layout and check_extent find them; None where _layout would copy."""
    s0, s1 = strides
    if s1 == 1 or cols == 1:
        trans, ld = False, s0 if rows > 1 else max(cols, 1)
    elif s0 == 1 or rows == 1:
        trans, ld = True, s1 if cols > 1 else max(rows, 1)
    else:
        return None
    return trans, ld, 1 + (rows - 1) * s0 + (cols - 1) * s1


def _fast_mm(a: torch.Tensor, b: torch.Tensor, precision: str) -> torch.Tensor | None:
    """_mm(a, b) for non-empty operands on a GPU that matmul_out can read in place (2-D, or 3-D
    batches: a batch of 1 or a 2-D operand broadcasts), whose kernel was chosen before: the same
    launch without the general path's checks (an H100's host, 2048²: 26 us per call against
    34 through matmul_out; a batch went through matmul_out alone, 136 us); else None, and the
    general path decides. A layout launched before takes its plan (`_PLANS`)."""
    i = cuda_index(a)
    if i < 0 or cuda_index(b) != i:
        return None
    layout = _layout_key(a, b, i, precision)
    plan = _PLANS.get(layout)
    if plan is not None:
        kern = _KERNELS.get(plan[0])
        if kern is not None:
            return _launch_planned(kern, plan, a, b)
    return _fast_mm_first(a, b, precision, i, layout)


def _layout_key(a: torch.Tensor, b: torch.Tensor, i: int, precision: str) -> tuple[Any, ...]:
    """The key of a @ b's plan in _PLANS, on GPU `i`."""
    return a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, i, precision


def _launch_planned(kern: tc.Kernel, plan: tuple[Any, ...], a: torch.Tensor, b: torch.Tensor
                    ) -> torch.Tensor:
    """a @ b as `plan` (a _PLANS entry) says, by its chosen kernel `kern`: a new output, one
    launch."""
    _, shape, ints, grid = plan
    c = a.new_empty(shape)
    kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), *ints, grid=grid)
    return c


def _fast_mm_first(a: torch.Tensor, b: torch.Tensor, precision: str, i: int,
                   layout: tuple[Any, ...]) -> torch.Tensor | None:
    """_fast_mm for a `layout` without a plan yet (or whose kernel is not chosen), on GPU `i`:
    derive the launch, and keep it as the layout's plan where it reads the operands in place."""
    sa = a.shape
    sb = b.shape
    da, db = len(sa), len(sb)
    if da == db == 2:
        z = za = zb = 1
        saz = sbz = 0
    elif da in (2, 3) and db in (2, 3):
        za = sa[0] if da == 3 else 1
        zb = sb[0] if db == 3 else 1
        z = za if zb == 1 else zb
        if za not in (z, 1) or not 0 < z <= 65535 or extent(a) >= INT32_LIMIT or extent(b) >= INT32_LIMIT:
            return None
        saz = int(a.stride(0)) if za > 1 else 0
        sbz = int(b.stride(0)) if zb > 1 else 0
    else:
        return None
    m, k = sa[-2], sa[-1]
    k2, n = sb[-2], sb[-1]
    dtype = a.dtype
    if k != k2 or not (m and n and k) or b.dtype != dtype or z * m * n >= INT32_LIMIT:
        return None
    la = _operand(m, k, a.stride()[-2:])
    lb = _operand(k, n, b.stride()[-2:])
    if la is None or lb is None or la[2] >= INT32_LIMIT or lb[2] >= INT32_LIMIT:
        return None
    plan = pick_transpose_first(m, n, k, la[0], lb[0]) if precision == "tf32" else "none"
    if plan != "none" and (da == 3 or db == 3):
        return None  # (matmul_out copies a batch of one's operand K-contiguous: the general path)
    lds = (la[1], lb[1]) if plan == "none" else (k, lb[1]) if plan == "a" else (la[1], k)
    pad_a, pad_b = pads(m, n, k, lds, itemsize=a.element_size())
    kern = _KERNELS.get((dtype, la[0], lb[0], i, precision)) if plan == "none" else None
    if pad_a or pad_b:
        if kern is None:
            return None
        # copies into padded rows here too (pad_rows.fast_padded: one allocation and one launch
        # each): the general path would add its checks to the copies' host time
        if pad_a:
            got = _fast_padded(a, la, za, i)
            if got is None:
                return None
            a, la, saz = got
        if pad_b:
            got = _fast_padded(b, lb, zb, i)
            if got is None:
                return None
            b, lb, sbz = got
    elif plan != "none":  # copy an operand K-contiguous first, as matmul_out does
        wgmma = _sm90.get(i)
        if wgmma is None:
            return None  # (matmul_out asks torch for the arch once)
        if wgmma:
            # (None unless the operand's row-major form is contiguous: the general path copies it)
            copy = transpose_op._fast_transpose(a.t() if plan == "a" else b)
            if copy is None:
                return None
            if plan == "a":
                a, la = copy, (False, k, m * k)
            else:
                b, lb = copy.t(), (True, k, k * n)
        kern = _KERNELS.get((dtype, la[0], lb[0], i, precision))
    if kern is None:
        return None
    def grid(opt: tc.Options) -> tuple[int, int]:  # (called every launch: tc.cdiv inlined)
        return -(-m // opt.MB) * -(-n // opt.NB), z

    launch_plan = ((dtype, la[0], lb[0], i, precision), (z, m, n) if da == 3 or db == 3 else (m, n),
                   (m, n, k, la[1], lb[1], n, saz, sbz, m * n), grid)
    c = _launch_planned(kern, launch_plan, a, b)
    if not (pad_a or pad_b) and plan == "none":  # (copies: their own tensors each call)
        if len(_PLANS) >= PLANS_MAX:
            _PLANS.clear()
        _PLANS[layout] = launch_plan
    return c


def _fast_padded(x: torch.Tensor, layout: tuple[bool, int, int], z: int, index: int
                 ) -> tuple[torch.Tensor, tuple[bool, int, int], int] | None:
    """An operand of `z` matrices (2-D or 3-D) read as `layout` (_operand's) copied into padded
    rows on the GPU `index` (pad_rows.fast_padded), with its new layout and batch stride; None
    where the general path must copy (or refuse the copy's extent, as check_extent does)."""
    transposed, ld, _ = layout
    got = fast_padded(x, transposed, index)
    if got is None:
        return None
    y, new_ld = got
    rows, length = (x.shape[-1], x.shape[-2]) if transposed else (x.shape[-2], x.shape[-1])
    return y, (transposed, new_ld, (rows - 1) * new_ld + length), rows * new_ld if z > 1 else 0


def _mm(a: torch.Tensor, b: torch.Tensor, precision: str = "ieee") -> torch.Tensor:
    """a @ b for 2-D or 3-D operands (a batch of 1 or a 2-D operand broadcasts)."""
    fast = _fast_mm(a, b, precision)
    if fast is not None:
        return fast
    a3 = a if a.dim() == 3 else a.unsqueeze(0)
    b3 = b if b.dim() == 3 else b.unsqueeze(0)
    z = a3.shape[0] if b3.shape[0] == 1 else b3.shape[0]  # (broadcast: a batch of 0 stays 0)
    c = torch.empty((z, a3.shape[1], b3.shape[2]), dtype=a.dtype, device=a.device)
    matmul_out(c, a3, b3, precision=precision)
    return c if a.dim() == 3 or b.dim() == 3 else c[0]


class _Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, precision: str,
                planned: tuple[tc.Kernel, tuple[Any, ...]] | None) -> torch.Tensor:
        """`planned`: _planned's kernel and plan of this layout, or None (_mm decides)."""
        ctx.save_for_backward(a, b)
        ctx.precision = precision
        return _mm(a, b, precision) if planned is None else _launch_planned(*planned, a, b)

    @staticmethod
    @first_order
    def backward(ctx: Any, dc: torch.Tensor
                 ) -> tuple[torch.Tensor | None, torch.Tensor | None, None, None]:
        a, b = ctx.saved_tensors
        p = ctx.precision
        needs = ctx.needs_input_grad
        i = cuda_index(dc)
        layout = (a.shape, b.shape, dc.shape, a.stride(), b.stride(), dc.stride(), a.dtype, dc.dtype,
                  i, p, needs[0], needs[1])
        plans = _BACKWARD_PLANS.get(layout)
        if plans is not None:
            planned = _planned_gradients(plans, a, b, dc)
            if planned is not None:
                return planned
        da, db = _gradients(a, b, dc, p, needs)
        if i >= 0 and dc.dtype == a.dtype:
            _plan_backward(layout, a, b, dc, p, needs, i)
        return da, db, None, None


#: _Matmul.apply (untyped in torch)
_apply: Any = _Matmul.apply


def _gradients(a: torch.Tensor, b: torch.Tensor, dc: torch.Tensor, p: str, needs: tuple[bool, ...]
               ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """dA = dC B^T and dB = A^T dC (where `needs` asks for them), for every batch layout."""
    dc = dc.to(a.dtype)
    da = db = None
    if needs[0]:
        operands = _gradient_operands(0, a, b, dc)
        if operands is not None:  # same batch as dC: one product per batch
            da = _mm(*operands, p)
            if da.dim() == 3 and a.dim() == 3 and a.shape[0] == 1 and da.shape[0] != 1:
                da = da.sum(0, keepdim=True)
        else:  # a broadcast over b's batch
            be = b if b.dim() == 3 else b.unsqueeze(0)
            zn = dc.shape[0] * dc.shape[2]  # (explicit: -1 is ambiguous for a batch of 0)
            da = _mm(dc.transpose(0, 1).reshape(dc.shape[1], zn),
                     be.transpose(-1, -2).reshape(zn, be.shape[1]), p)
            da = da.reshape(a.shape)
    if needs[1]:
        operands = _gradient_operands(1, a, b, dc)
        assert operands is not None  # (dB is always one product)
        db = _mm(*operands, p)
        if db.dim() == 2 and b.dim() == 3:  # (b broadcast over a's batch: made as a matrix)
            db = db.reshape(b.shape)
        elif db.dim() == 3 and b.dim() == 3 and b.shape[0] == 1 and db.shape[0] != 1:
            db = db.sum(0, keepdim=True)
    return da, db


def _plan_backward(layout: tuple[Any, ...], a: torch.Tensor, b: torch.Tensor, dc: torch.Tensor,
                   p: str, needs: tuple[bool, ...], i: int) -> None:
    """Keep the backward pass of `a`, `b` and `dc` (of a's dtype, on GPU `i`) as
    `_BACKWARD_PLANS[layout]` when each gradient _gradients computed is one product launched from
    a plan of _PLANS that reads dC and B (dA = dC B^T), or A and dC (dB = A^T dC), in place and
    makes the gradient's shape: 2-D products, batches of the same size, and a 2-D B under a
    batched A (dB over A and dC seen as Z*M rows, where both are such views). Where _gradients
    copied, reshaped or summed, no plan is kept."""
    plans: list[tuple[Any, ...] | None] = []
    for which, pointers, shape in ((0, (dc, b), a.shape), (1, (a, dc), b.shape)):
        if not needs[which]:
            plans.append(None)
            continue
        operands = _gradient_operands(which, a, b, dc)
        if operands is None:
            return
        x, y = operands
        plan = _PLANS.get(_layout_key(x, y, i, p))
        if plan is None or tuple(plan[1]) != tuple(shape) or x.data_ptr() != pointers[0].data_ptr() \
                or y.data_ptr() != pointers[1].data_ptr():
            return
        plans.append(plan)
    if len(_BACKWARD_PLANS) >= PLANS_MAX:
        _BACKWARD_PLANS.clear()
    _BACKWARD_PLANS[layout] = (plans[0], plans[1])


def _gradient_operands(which: int, a: torch.Tensor, b: torch.Tensor, dc: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The operands of the one product _gradients computes dA (`which` 0) or dB (1) by, as views
    where they can be; None where it takes more than one product (a broadcast A's dA)."""
    a_batched = a.dim() == 3 and a.shape[0] != 1  # (a batch of 0 is batched too)
    b_batched = b.dim() == 3 and b.shape[0] != 1
    if which == 0:
        return (dc, b.transpose(-1, -2)) if a_batched or not b_batched else None
    if b_batched or not a_batched:
        return a.transpose(-1, -2), dc
    # b broadcast over a's batch: A' [K, Z*M] @ dC' [Z*M, N] (zm explicit: -1 is ambiguous for a
    # batch of 0)
    zm = a.shape[0] * a.shape[1]
    return a.reshape(zm, a.shape[-1]).t(), dc.reshape(zm, dc.shape[-1])


def _planned_gradients(plans: tuple[tuple[Any, ...] | None, tuple[Any, ...] | None], a: torch.Tensor,
                       b: torch.Tensor, dc: torch.Tensor
                       ) -> tuple[torch.Tensor | None, torch.Tensor | None, None, None] | None:
    """The backward pass's gradients launched from its plans (`_BACKWARD_PLANS`), or None (and
    nothing launched) when a plan's kernel is no longer the chosen one."""
    kernels = [_KERNELS.get(plan[0]) if plan is not None else None for plan in plans]
    if any(plan is not None and kern is None for plan, kern in zip(plans, kernels)):
        return None
    (plan_a, plan_b), (kern_a, kern_b) = plans, kernels
    # dA = dC B^T and dB = A^T dC (B^T and A^T: the same addresses as B and A)
    da = _launch_planned(kern_a, plan_a, dc, b) if plan_a is not None and kern_a is not None else None
    db = _launch_planned(kern_b, plan_b, a, dc) if plan_b is not None and kern_b is not None else None
    return da, db, None, None


def _check(a: object, b: object, precision: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = check_tensor(a, OP, "a")
    b = check_tensor(b, OP, "b")
    if precision not in PRECISIONS:
        raise ValueError(f"{OP}: precision must be 'ieee' or 'tf32', got {precision!r}")
    if a.dtype != b.dtype:
        raise TypeError(f"{OP}: the operands have different dtypes ({a.dtype} and {b.dtype}); "
                        f"convert one first")
    tc_type(a.dtype, OP, FLOAT_DTYPES)
    if precision == "tf32":
        if a.dtype != torch.float32:
            raise ValueError(f"{OP}: precision='tf32' applies to float32 operands, got {a.dtype}")
    if a.dim() not in (2, 3) or b.dim() not in (2, 3):
        raise ValueError(f"{OP}: operands must be 2-D matrices or 3-D batches of matrices, got "
                         f"shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"{OP}: incompatible dimensions, {tuple(a.shape)} @ {tuple(b.shape)} "
                         f"(a.shape[-1] = {a.shape[-1]} but b.shape[-2] = {b.shape[-2]})")
    if a.dim() == 3 and b.dim() == 3 and a.shape[0] != b.shape[0] and 1 not in (a.shape[0],
                                                                                 b.shape[0]):
        raise ValueError(f"{OP}: batch sizes {a.shape[0]} and {b.shape[0]} do not broadcast")
    device_of([a, b], OP)
    return a, b


def matmul(a: torch.Tensor, b: torch.Tensor, precision: str = "ieee") -> torch.Tensor:
    """a @ b for 2-D matrices or 3-D batches (a batch of 1 or a 2-D operand broadcasts), in
    float32, float16, bfloat16 or float64, differentiable. Products accumulate in float32 (float64
    for float64). `precision` is the float32 product: "ieee" (exact; the default) or "tf32"
    (tensor cores on the GPU, about 1e-3 relative error, also in the backward; the interpreter
    computes it exactly)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and type(precision) is str:
        if not ((a.requires_grad or b.requires_grad) and torch.is_grad_enabled()):
            c = _fast_mm(a, b, precision)  # the common case on a GPU; else checked below
            if c is not None:
                return c
        else:
            planned = _planned(a, b, precision)
            if planned is not None:  # (a layout launched before passed _check then)
                from_plan: torch.Tensor = _apply(a, b, precision, planned)
                return from_plan
    a, b = _check(a, b, precision)
    if not ((a.requires_grad or b.requires_grad) and torch.is_grad_enabled()):
        return _mm(a, b, precision)
    out: torch.Tensor = _apply(a, b, precision, None)
    return out


def _planned(a: torch.Tensor, b: torch.Tensor, precision: str
             ) -> tuple[tc.Kernel, tuple[Any, ...]] | None:
    """The chosen kernel and the plan of a @ b where _PLANS has one whose kernel is still chosen;
    else None. The forward with autograd then launches from it (plans are made only for operands
    that the general path's checks accept, so a training step's forward skips _check: 1-2 us of
    an H100 host's 22-25)."""
    i = cuda_index(a)
    if i < 0 or cuda_index(b) != i:
        return None
    plan = _PLANS.get(_layout_key(a, b, i, precision))
    kern = _KERNELS.get(plan[0]) if plan is not None else None
    return None if kern is None or plan is None else (kern, plan)
