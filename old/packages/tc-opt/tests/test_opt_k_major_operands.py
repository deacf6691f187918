"""tf32 wgmma operands at the IR level: the dot runs on wgmma (Mma v3, K 8 per instruction) and
reads both operands K-major; in a pipelined loop an M/N-contiguous load keeps its own layout and
slots in its own order (16-byte copies) and is restaged K-major in the loop (read into the
restaging layout, stored into one of two buffers by iteration), without pipelining it gets the
transposing copy layout; the restaging and the transposing copies are free of bank conflicts in
the swizzled buffers."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.layouts import Blocked, Mma, Shared
from tc_ir.types import F32, TileType
from tc_opt import CompileOptions
from tc_opt.dot_layouts import shared_layout
from tc_opt.k_major_operands import k_major_order, restaging_layout, transposing_copy_layout
from tc_opt.pipeline import gpu_pipeline

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
MATMUL = Path(__file__).resolve().parents[2] / "tc-torch" / "src" / "tc_torch" / "kernels" / "matmul.tc"
NN = {"TYPE": "float", "ACC": "float", "USE_A": "a", "STRIDE_AK": "1", "STRIDE_AM": "lda",
      "BROADCAST_AK": "newaxis,:", "BROADCAST_AM": ":,newaxis", "SHAPE_A": "MB,KB", "USE_B": "b",
      "STRIDE_BK": "ldb", "STRIDE_BN": "1", "BROADCAST_BK": ":,newaxis", "BROADCAST_BN": "newaxis,:",
      "SHAPE_B": "KB,NB", "MB": 128, "NB": 128, "KB": 32}
#: A transposed (the spec's `^a`: A's tile [K, M], M contiguous), B as in NN.
TN = {**NN, "USE_A": "^a", "STRIDE_AK": "lda", "STRIDE_AM": "1", "BROADCAST_AK": ":,newaxis",
      "BROADCAST_AM": "newaxis,:", "SHAPE_A": "KB,MB"}


def _gpu_ir(defines: dict[str, object], arch: str = "sm_90", fp32_dot: str = "tf32", stages: int = 3) -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(MATMUL.read_text(), defines, None, "matmul.tc")
    opts = CompileOptions(arch=arch, num_warps=8, num_stages=stages, specialization=("divisible_by_16",) * 12,
                          fp32_dot=fp32_dot, tma=False)  # (cp.async: the copies' layouts stay in the IR)
    gpu_pipeline(opts).run(m)
    return m


def _ops(m: O.Module, cls: type[O.Operation]) -> list[O.Operation]:
    return [op for op in m.walk() if isinstance(op, cls)]


def _layout(v: O.Value) -> object:
    t = v.type
    assert isinstance(t, TileType)
    return t.layout


def _dot_layout(m: O.Module) -> Mma:
    (dot,) = _ops(m, O.DotOp)
    lay = _layout(dot.results[0])
    assert isinstance(lay, Mma)
    return lay


def _buffer_orders(m: O.Module) -> list[tuple[int, ...]]:
    """The shared order of each pipeline buffer (a local_alloc without a source tile)."""
    out = []
    for op in _ops(m, O.LocalAllocOp):
        t = op.results[0].type
        if not op.operands and isinstance(t, TileType) and isinstance(t.layout, Shared):
            out.append(t.layout.order)
    return out


def _lane_coords(lay: Blocked, shape: tuple[int, int], warp: int, reg: int) -> list[tuple[int, int]]:
    """The element (row, col) each lane of `warp` copies with its register `reg` (spt = 1)."""
    assert lay.size_per_thread == (1, 1)
    lane_stride = {lay.order[0]: 1, lay.order[1]: lay.threads_per_warp[lay.order[0]]}
    warp_stride = {lay.order[0]: 1, lay.order[1]: lay.warps_per_cta[lay.order[0]]}
    cover = [lay.threads_per_warp[d] * lay.warps_per_cta[d] for d in (0, 1)]
    reps = [max(1, shape[d] // cover[d]) for d in (0, 1)]
    rep = {lay.order[0]: reg % reps[lay.order[0]], lay.order[1]: reg // reps[lay.order[0]]}
    out = []
    for lane in range(32):
        c = []
        for d in (0, 1):
            t = lane // lane_stride[d] % lay.threads_per_warp[d]
            w = warp // warp_stride[d] % lay.warps_per_cta[d]
            c.append((rep[d] * cover[d] + w * lay.threads_per_warp[d] + t) % shape[d])
        out.append((c[0], c[1]))
    return out


def _bank(sh: Shared, shape: tuple[int, int], coord: tuple[int, int]) -> int:
    """The bank of a 4-byte element in a swizzled buffer with rows along sh.order[1]."""
    fast, row = sh.order[0], sh.order[1]
    r, c = coord[row], coord[fast]
    chunk = (c // sh.vec) ^ (r // sh.per_phase % sh.max_phase)
    word = r * shape[fast] + chunk * sh.vec + c % sh.vec
    return word % 32


def _conflicts(sh: Shared, shape: tuple[int, int], lanes: list[tuple[int, int]]) -> int:
    """The most lanes of one warp-wide 4-byte access that share a bank (distinct words)."""
    per_bank: dict[int, int] = {}
    for x in lanes:
        b = _bank(sh, shape, x)
        per_bank[b] = per_bank.get(b, 0) + 1
    return max(per_bank.values())


@pytest.mark.parametrize("shape,warps", [((32, 128), 8), ((32, 256), 8), ((16, 128), 4), ((32, 64), 4)])
def test_transposing_copies_spread_over_the_banks(shape: tuple[int, int], warps: int) -> None:
    # B [K, N] (N contiguous in global memory) into a K-major buffer: each warp-wide copy of the
    # transposing layout writes 2 consecutive K of 16 consecutive N (64-byte runs in global
    # memory), at most 2 lanes per bank
    sh = shared_layout(shape, k_major_order(1, None), F32, swizzle=True)
    lay = transposing_copy_layout(shape, fast=1, kdim=0, num_warps=warps)
    regs = shape[0] * shape[1] // (32 * warps)
    for warp in range(warps):
        for reg in range(regs):
            lanes = _lane_coords(lay, shape, warp, reg)
            assert len(set(lanes)) == 32
            assert _conflicts(sh, shape, lanes) <= 2
            rows = {k for k, _ in lanes}
            assert len(rows) == 2
            for k in rows:
                ns = sorted(n for kk, n in lanes if kk == k)
                assert ns[0] % 16 == 0 and ns == list(range(ns[0], ns[0] + 16))


def test_copies_along_one_row_conflict() -> None:
    # (the bank model sees conflicts) Triton's copy layout, 4 consecutive elements per thread and
    # 32 lanes along the row: its first copy takes every 4th element of row 0, 16 lanes per bank
    sh = shared_layout((32, 128), k_major_order(1, None), F32, swizzle=True)
    assert _conflicts(sh, (32, 128), [(0, 4 * t) for t in range(32)]) == 16


def test_tf32_dot_of_n_contiguous_b_runs_transposed() -> None:
    # A (K-contiguous) times B (N-contiguous): C^T = B^T A^T, B^T from registers (tc_nvptx)
    m = _gpu_ir(NN)
    lay = _dot_layout(m)
    assert lay.version == 3 and lay.transposed and lay.instr_shape == (64, 128, 8)
    assert _buffer_orders(m) == [(2, 1, 0), (2, 1, 0)]  # both slots in their load order
    assert not _ops(m, O.LocalStoreOp)
    for op in _ops(m, O.AsyncCopyOp):  # 4 consecutive elements per thread along the contiguous dimension
        ptr_layout = _layout(op.operands[0])
        assert isinstance(ptr_layout, Blocked) and 4 in ptr_layout.size_per_thread


def test_tf32_dot_runs_on_wgmma_with_k_major_buffers() -> None:
    m = _gpu_ir(TN)  # A^T B: A M-contiguous (read into registers), B N-contiguous (restaged)
    lay = _dot_layout(m)
    assert lay.version == 3 and not lay.transposed and lay.instr_shape == (64, 128, 8)
    # B's restaging pair [2, K, N] with K contiguous, then the slots [stages, K, M|N] in the
    # loads' order (M and N contiguous)
    assert _buffer_orders(m) == [(1, 2, 0), (2, 1, 0), (2, 1, 0)]
    copies = _ops(m, O.AsyncCopyOp)
    assert len(copies) == 2 * 3  # both operands pipelined: 2 prologue stages + the loop's
    for op in copies:  # 4 consecutive elements per thread along the contiguous dimension
        ptr_layout = _layout(op.operands[0])
        assert isinstance(ptr_layout, Blocked) and 4 in ptr_layout.size_per_thread
    # in the loop: B read from its slot into the restaging layout, stored into the pair's buffer
    # of this iteration, which the dot reads; A read where it lies (its slot, M-contiguous)
    (store,) = _ops(m, O.LocalStoreOp)
    regs, view = store.operands
    assert _layout(regs) == restaging_layout((32, 128), 1, 0, 8)
    assert isinstance(regs, O.OpResult) and isinstance(regs.op, O.LocalLoadOp)
    assert isinstance(view, O.OpResult) and isinstance(view.op, O.LocalSubviewOp)
    (dot,) = _ops(m, O.DotOp)
    b = dot.operands[1]
    assert isinstance(b, O.OpResult) and b.op.operands[0] is view
    a = dot.operands[0]
    assert isinstance(a, O.OpResult) and isinstance(a.op, O.LocalLoadOp)
    a_view = a.op.operands[0].type
    assert isinstance(a_view, TileType) and isinstance(a_view.layout, Shared) and a_view.layout.order[0] == 0


def test_tf32_without_pipelining_copies_transposed() -> None:
    m = _gpu_ir(NN, stages=1)
    assert not _ops(m, O.LocalStoreOp)
    (load_b,) = [op for op in _ops(m, O.LoadOp) if _layout(op.results[0]) == transposing_copy_layout((32, 128), 1, 0, 8)]
    t = load_b.results[0].type
    assert isinstance(t, TileType) and t.shape == (32, 128)


def test_tf32_before_hopper_keeps_register_order() -> None:
    m = _gpu_ir(NN, arch="sm_80")
    assert _dot_layout(m).version == 2
    assert [o[0] for o in _buffer_orders(m)] == [2, 2]  # both row-major, as loaded (ldmatrix reads them)


def test_fp16_wgmma_operands_keep_their_order() -> None:
    m = _gpu_ir({**NN, "TYPE": "half"}, fp32_dot="ieee")
    assert [o[0] for o in _buffer_orders(m)] == [2, 2]  # B N-major: wgmma transposes 16-bit operands


def _restaging_lanes(lay: Blocked, warp: int, i: int, rk: int, rn: int) -> list[tuple[int, int]]:
    """(k, n) of the element lane l of `warp` holds at K offset i of its repetition rk along K
    and rn along N."""
    assert lay.order == (0, 1) and lay.threads_per_warp == (1, 32)
    wk, wn = lay.warps_per_cta
    k = (rk * wk + warp % wk) * 4 + i
    return [(k, (rn * wn + warp // wk) * 32 + lane) for lane in range(32)]


@pytest.mark.parametrize("shape,warps", [((32, 128), 8), ((32, 256), 8), ((16, 128), 8), ((32, 64), 4)])
def test_restaging_reads_and_writes_spread_over_the_banks(shape: tuple[int, int], warps: int) -> None:
    # B [K, N] from its N-major slot: each scalar read of a warp is one 128-byte row (32 banks);
    # into the K-major buffer: each thread's 4 consecutive K are one 16-byte store, and the 8
    # lanes of each quarter warp (one pass of a 16-byte store) hit 8 different groups of 4 banks
    lay = restaging_layout(shape, fast=1, kdim=0, num_warps=warps)
    assert lay.size_per_thread == (4, 1)
    slot = shared_layout(shape, (1, 0), F32, swizzle=True)
    k_major = shared_layout(shape, k_major_order(1, None), F32, swizzle=True)
    wk, wn = lay.warps_per_cta
    reps_k, reps_n = shape[0] // (4 * wk), shape[1] // (32 * wn)
    assert reps_k >= 1 and reps_n >= 1
    seen = set()
    for warp in range(warps):
        for rk in range(reps_k):
            for rn in range(reps_n):
                for i in range(4):
                    lanes = _restaging_lanes(lay, warp, i, rk, rn)
                    seen.update(lanes)
                    assert _conflicts(slot, shape, lanes) == 1
                firsts = _restaging_lanes(lay, warp, 0, rk, rn)
                for q in range(4):
                    groups = {_bank(k_major, shape, x) // 4 for x in firsts[8 * q: 8 * q + 8]}
                    assert len(groups) == 8
    assert len(seen) == shape[0] * shape[1]  # (the model covers the tile once)
