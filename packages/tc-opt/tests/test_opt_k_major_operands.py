"""tf32 wgmma operands at the IR level: the dot runs on wgmma (Mma v3, K 8 per instruction), both
operands are staged K-major, an M/N-contiguous load gets the transposing copy layout and is still
pipelined (element-wise cp.async), and that layout's copies are free of bank conflicts in the
swizzled K-major buffer."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.layouts import Blocked, Mma, Shared
from tc_ir.types import F32, TileType
from tc_opt import CompileOptions
from tc_opt.dot_layouts import shared_layout
from tc_opt.k_major_operands import k_major_order, transposing_copy_layout
from tc_opt.pipeline import gpu_pipeline

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
MATMUL = Path(__file__).resolve().parents[2] / "tc-torch" / "src" / "tc_torch" / "kernels" / "matmul.tc"
NN = {"TYPE": "float", "ACC": "float", "USE_A": "a", "STRIDE_AK": "1", "STRIDE_AM": "lda",
      "BROADCAST_AK": "newaxis,:", "BROADCAST_AM": ":,newaxis", "SHAPE_A": "MB,KB", "USE_B": "b",
      "STRIDE_BK": "ldb", "STRIDE_BN": "1", "BROADCAST_BK": ":,newaxis", "BROADCAST_BN": "newaxis,:",
      "SHAPE_B": "KB,NB", "MB": 128, "NB": 128, "KB": 32}


def _gpu_ir(defines: dict[str, object], arch: str = "sm_90", fp32_dot: str = "tf32") -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(MATMUL.read_text(), defines, None, "matmul.tc")
    opts = CompileOptions(arch=arch, num_warps=8, num_stages=3, specialization=("divisible_by_16",) * 12,
                          fp32_dot=fp32_dot, tma=False)  # cp.async: the path that copies transposed
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


def test_tf32_dot_runs_on_wgmma_with_k_major_buffers() -> None:
    m = _gpu_ir(NN)
    lay = _dot_layout(m)
    assert lay.version == 3 and lay.instr_shape == (64, 128, 8)
    # [stages, M, K] and [stages, K, N] buffers, K contiguous in both
    assert [o[0] for o in _buffer_orders(m)] == [2, 1]
    copies = _ops(m, O.AsyncCopyOp)
    assert len(copies) == 2 * 3  # both operands pipelined: 2 prologue stages + the loop's
    b_ptr_layouts = set()
    for op in copies:
        dst = op.operands[1].type
        if isinstance(dst, TileType) and dst.shape == (32, 128):  # a slot of B's buffer
            b_ptr_layouts.add(_layout(op.operands[0]))
    assert b_ptr_layouts == {transposing_copy_layout((32, 128), 1, 0, 8)}


def test_tf32_before_hopper_keeps_register_order() -> None:
    m = _gpu_ir(NN, arch="sm_80")
    assert _dot_layout(m).version == 2
    assert [o[0] for o in _buffer_orders(m)] == [2, 2]  # both row-major, as loaded (ldmatrix reads them)


def test_fp16_wgmma_operands_keep_their_order() -> None:
    m = _gpu_ir({**NN, "TYPE": "half"}, fp32_dot="ieee")
    assert [o[0] for o in _buffer_orders(m)] == [2, 2]  # B N-major: wgmma transposes 16-bit operands
