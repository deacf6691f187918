"""tf32 operands of wgmma live K-major in shared memory.

wgmma reads 32-bit (tf32) operands from shared memory K-major only: its transpose bits exist for
16-bit types alone. The spec's matmul has B as a K x N row-major tile (N contiguous in global
memory: "MN-major"), and its transposed variant `^a` has A so. Such an operand is staged
transposed: its shared buffer keeps K contiguous (rows of K elements per M or N index, swizzled as
any wgmma operand), and the copy into it moves one element per instruction (a 4-byte cp.async in a
pipelined loop, a load and a 4-byte shared store otherwise). Triton 3.6 does the same for tf32 on
sm_90 (its B buffer is `nvmma_shared<transposed = true>`, filled by 4-byte cp.async).

The load feeding such an operand gets a layout made for those copies (`transposing_copy_layout`):
one element per thread and instruction, a warp's 32 lanes 16 consecutive elements along the
dimension contiguous in global memory (64 bytes) by 2 consecutive along K. In the K-major buffer
those are 16 rows (XOR-swizzled by row % 8) at 2 consecutive K: two lanes per bank. Measured on an
H100 (8192^3, 256x128x32 tiles, 8 warps, 3 stages): 8 x 4 lanes (no bank conflict, 4 rows of 32
bytes per instruction) 215 TFLOPS, 16 x 2 231, 32 x 1 (4-way conflicts, one 128-byte row) 227.
(Triton 3.x's own tf32 matmul, whose copies have 4 consecutive elements per thread and 32 lanes
along the row, 16-way conflicts, reached 147 at its best tile on that machine.) The number of
copies, more than their conflicts, bounds this path: 4-byte copies are 4 times the instructions
of the 16-byte ones of a K-contiguous operand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tc_ir.layouts import Blocked, Layout
from tc_ir.ops import DotOp, Function, LoadOp, OpResult, TransOp, Value
from tc_ir.types import ElementType, TileType

from .dot_layouts import uses_wgmma

#: Lanes of a warp along the global-contiguous dimension in a transposing copy (16 x 4 bytes); the
#: other 2 go along K.
LANES_ALONG_ROW = 16


def needs_k_major(element: ElementType) -> bool:
    """Whether wgmma reads operands of this element type K-major only (32-bit: tf32)."""
    return element.bits == 32


def operand_source(dot: DotOp, index: int) -> tuple[Value, tuple[int, ...] | None]:
    """Operand `index` of `dot` before a `trans` (the spec's `^a`), and that trans's permutation
    (None when there is none)."""
    v = dot.operands[index]
    if isinstance(v, OpResult) and isinstance(v.op, TransOp):
        return v.op.operands[0], tuple(v.op.perm)
    return v, None


def source_k_dim(index: int, perm: tuple[int, ...] | None) -> int:
    """The dimension of the staged source tile that is the dot's K (A is [M, K], B is [K, N]; a
    trans's result dimension j is its source's perm[j])."""
    k = 1 if index == 0 else 0
    return perm[k] if perm is not None else k


def k_major_order(index: int, perm: tuple[int, ...] | None) -> tuple[int, int]:
    """The shared-memory order of the staged source of operand `index`: its K dimension first."""
    k = source_k_dim(index, perm)
    return k, 1 - k


def transposing_copy_layout(shape: tuple[int, ...], fast: int, kdim: int, num_warps: int) -> Blocked:
    """The layout of a rank-2 tile copied element by element into a K-major buffer: 16 lanes along
    `fast` (the global-contiguous dimension) by 2 along `kdim`, warps along K first."""
    spt = [1, 1]
    tpw = [1, 1]
    tpw[fast] = min(LANES_ALONG_ROW, shape[fast])
    tpw[kdim] = 32 // tpw[fast]
    wpc = [1, 1]
    wpc[kdim] = max(1, min(num_warps, shape[kdim] // tpw[kdim]))
    wpc[fast] = num_warps // wpc[kdim]
    return Blocked(spt, tpw, wpc, (fast, kdim))


def k_major_anchors(
    f: Function, num_warps: int, arch: str, coalesced: Callable[[Value], Blocked]
) -> Iterator[tuple[Value, Layout]]:
    """Layout anchors for the loads whose tiles feed a tf32 wgmma operand directly (or through a
    trans) and are not contiguous along K in global memory: their pointer, mask, other value and
    result take the transposing copy layout. `coalesced(ptr)` is the load's own layout."""
    for op in f.walk():
        if not isinstance(op, DotOp) or not uses_wgmma(op, num_warps, arch):
            continue
        for index in (0, 1):
            src, perm = operand_source(op, index)
            t = src.type
            if not (isinstance(src, OpResult) and isinstance(src.op, LoadOp) and isinstance(t, TileType)):
                continue
            if t.rank != 2 or not needs_k_major(t.element):
                continue
            load = src.op
            kdim = source_k_dim(index, perm)
            fast = coalesced(load.operands[0]).order[0]
            if fast == kdim:
                continue
            lay = transposing_copy_layout(t.shape, fast, kdim, num_warps)
            for v in (*load.operands, load.result):
                if isinstance(v.type, TileType):
                    yield v, lay
