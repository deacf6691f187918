"""Layouts of the tensor-core path: which dots run on mma.sync, the Mma accumulator layout
(warps spread over the tile), the DotOperand layouts of A and B, and the swizzled Shared layout
their tiles are staged in.

mma.sync m16n8k16 (fp16/bf16) and m16n8k8 (tf32) both accumulate a 16x8 fp32 tile per warp and
instruction; a warp repeats the instruction over its part of the tile. On sm_90, fp16/bf16 and
tf32 dots whose tile fits a warpgroup run on wgmma (Mma version 3, instr_shape (64, N, K of one
instruction)): each group of 4 warps computes 64 rows by the whole N of the tile per
instruction, reading both operands from shared memory. Its
accumulator holds, per warp, the same elements as mma.sync's with every warp along M (warps
(num_warps, 1)), so one thread map serves both. The Shared layout makes the
16-byte chunks of a row XOR-swizzled by the row's phase, so that 8 consecutive rows read at the
same column by ldmatrix, and the 16-byte cp.async writes of a warp, hit 8 different bank groups.
"""

from __future__ import annotations

from tc_ir.layouts import DotOperand, Layout, Mma, Shared
from tc_ir.ops import DotOp, Module
from tc_ir.types import ElementType, ScalarType, TileType

from .pass_manager import Pass

#: The accumulator block one mma.sync instruction computes per warp.
INSTR_SHAPE = (16, 8)


def instr_k(element: ElementType) -> int:
    """K of one mma instruction: 16 for 16-bit operands, 8 for tf32."""
    return 16 if element.bits == 16 else 8


def uses_mma(op: DotOp) -> bool:
    """fp16/bf16 dots (and fp32 dots with precision tf32) with fp32 accumulators and tile sizes
    the instruction divides run on tensor cores; everything else on FMA units."""
    a, b, c = (v.type for v in op.operands)
    if not (isinstance(a, TileType) and isinstance(b, TileType) and isinstance(c, TileType)):
        return False
    e = a.element
    if not isinstance(e, ScalarType) or c.element != ScalarType("f32"):
        return False
    if e.name in ("f16", "bf16"):
        pass
    elif e.name == "f32" and op.precision == "tf32":
        pass
    else:
        return False
    (m, k), (_, n) = a.shape, b.shape
    return m % 16 == 0 and n % 8 == 0 and k % instr_k(e) == 0


def mma_warps(m: int, n: int, num_warps: int) -> tuple[int, int]:
    """Warps along M and N: the warps split the tile into blocks as square as the 16x8
    instruction shape allows (fewer operand loads per mma), M first on ties. A factor 3 of
    `num_warps` (12 warps) goes first, to M where it divides the 16-row blocks, else to N."""
    wm, wn = 1, 1
    if num_warps % 3 == 0:  # (N takes it only where M cannot and N can)
        wm, wn = (1, 3) if m % 48 and n % 24 == 0 else (3, 1)
    while wm * wn < num_warps:
        rows = m // (16 * wm)  # instruction blocks per warp along M
        cols = n // (8 * wn)
        # (a split keeps whole blocks per warp: M or N need not be a power of two)
        halve_rows, halve_cols = m % (32 * wm) == 0, n % (16 * wn) == 0
        if halve_rows and (rows >= cols // 2 or not halve_cols):
            wm *= 2
        elif halve_cols:
            wn *= 2
        else:
            wm *= 2  # more warps than blocks: the extra warps repeat the work
    return wm, wn


def mma_layout(m: int, n: int, num_warps: int) -> Mma:
    wm, wn = mma_warps(m, n, num_warps)
    return Mma(2, (wm, wn), INSTR_SHAPE)


#: The architectures with wgmma (the kernels that use it are compiled for sm_90a).
WGMMA_ARCHS = ("sm_90", "sm_90a")


def uses_wgmma(op: DotOp, num_warps: int, arch: str) -> bool:
    """A tensor-core dot that wgmma can run: sm_90, whole warpgroups each taking 64-row blocks of
    M, N a multiple of 16 up to 256 (one instruction covers it), K of 16s (16-bit operands) or 8s
    (tf32). The operands' shared-memory rows are then at least 32 bytes (K or M/N contiguous),
    which the hardware swizzles need. tf32 operands must be K-major in shared memory (the
    instruction has no transpose for them): the staging stores them so (k_major_operands)."""
    if arch not in WGMMA_ARCHS or not uses_mma(op):
        return False
    a, b = op.operands[0].type, op.operands[1].type
    assert isinstance(a, TileType) and isinstance(b, TileType)
    (m, k), (_, n) = a.shape, b.shape
    return (num_warps % 4 == 0 and m % (16 * num_warps) == 0 and 16 <= n <= 256 and n % 16 == 0
            and k % instr_k(a.element) == 0)


def is_wgmma_dot(op: object) -> bool:
    """Whether `op` is a laid-out dot that runs on wgmma (its result has Mma version 3)."""
    if not isinstance(op, DotOp):
        return False
    lay = getattr(op.result.type, "layout", None)
    return isinstance(lay, Mma) and lay.version == 3


def dot_result_layout(op: DotOp, num_warps: int, arch: str = "sm_80", transposed: bool = False) -> Layout | None:
    """The layout a dot's result is anchored to (None: left to propagation, the FMA path).
    `transposed`: a wgmma tf32 dot computed as C^T = B^T A^T (k_major_operands.swaps_operands)."""
    if not uses_mma(op):
        return None
    c = op.operands[2].type
    assert isinstance(c, TileType)
    if transposed and arch in WGMMA_ARCHS:
        a = op.operands[0].type
        assert isinstance(a, TileType)
        return Mma(3, (num_warps, 1), (64, c.shape[0], instr_k(a.element)), transposed=True)
    if uses_wgmma(op, num_warps, arch):
        a = op.operands[0].type
        assert isinstance(a, TileType)
        return Mma(3, (num_warps, 1), (64, c.shape[1], instr_k(a.element)))
    return mma_layout(c.shape[0], c.shape[1], num_warps)


def dot_operand_layout(parent: Layout, index: int, element: ElementType) -> DotOperand:
    """Operand `index` of a dot whose result has layout `parent`. k_width: elements of K per
    32-bit register (2 for 16-bit operands of mma, 1 otherwise)."""
    k_width = max(1, 32 // element.bits) if isinstance(parent, Mma) else 1
    return DotOperand(parent, index, k_width)


#: How much of a wgmma operand's row storage may be padding: rows longer than 128 bytes that
#: are not a whole number of 128-byte panels take the 128-byte swizzle anyway, the last panel
#: partial and stored whole, where that pads them by at most this fraction (176 halves: 8%,
#: 160: 17%; 96 keeps the 64-byte swizzle, 25%). One TMA box per 64 halves instead of eleven of
#: 16 (176: the 32-byte swizzle) or five of 32 (160: 64 bytes). H100, thirty-seventh session,
#: TFLOPS forced (tools/bench_matmul_shapes.py), narrower swizzle / partial panels: 192x176/12/3
#: persistent multicast at 4104^3 382 / 507; 192x160 the same 421 / 473, 3000^3 374 / 418;
#: 128x160/8/4 persistent at 5120^3 584 / 638; 256x160/8/3 persistent at 5120^3 660 / 662.
PARTIAL_PANEL_PADDING = 0.2


def shared_layout(shape: tuple[int, ...], order: tuple[int, ...], element: ElementType, swizzle: bool,
                  partial_panels: bool = False) -> Shared:
    """A Shared layout for a tile stored with dimension order[0] contiguous. With `swizzle` the
    16-byte chunks of each row are XOR-permuted (conflict-free ldmatrix and cp.async).
    `partial_panels` (wgmma operands): rows longer than 128 bytes take the 128-byte swizzle
    where PARTIAL_PANEL_PADDING allows, the last panel partial (176 halves: panels of 64, 64
    and 48) and stored whole (TileType.storage_numel)."""
    if not swizzle:
        return Shared(1, 1, 1, order)
    eb = max(1, element.bits // 8)
    vec = max(1, 16 // eb)
    row_bytes = shape[order[0]] * eb
    if row_bytes < 16:
        return Shared(1, 1, 1, order)
    # the widest swizzle (128, 64, 32 or 16 bytes) that divides the row: rows of a tile dimension
    # that is not a power of two (96 halves: 192 bytes) are swizzled in panels of that width
    width = next(w for w in (128, 64, 32, 16) if row_bytes % w == 0)
    padded = -(-row_bytes // 128) * 128
    if partial_panels and row_bytes > 128 and padded - row_bytes <= PARTIAL_PANEL_PADDING * padded:
        width = 128
    return Shared(vec, 128 // width, width // 16, order)


def register_order(t: TileType) -> tuple[int, ...]:
    """The memory order a register tile's layout prefers (its fastest dimension first)."""
    lay = t.layout
    order = getattr(lay, "order", None)
    if isinstance(order, tuple) and len(order) == t.rank:
        return order
    return tuple(range(t.rank - 1, -1, -1))


class ApplyDotPrecision(Pass):
    """CompileOptions.fp32_dot == "tf32": fp32 x fp32 dots run as tf32 on tensor cores."""

    name = "dot-precision"

    def run(self, module: Module) -> None:
        if self.options.fp32_dot != "tf32":
            return
        for op in module.walk():
            if isinstance(op, DotOp) and op.precision == "ieee":
                t = op.operands[0].type
                if isinstance(t, TileType) and t.element == ScalarType("f32"):
                    op.precision = "tf32"
