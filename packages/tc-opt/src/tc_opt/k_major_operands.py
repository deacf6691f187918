"""tf32 operands of wgmma: K-major in shared memory, or in registers.

wgmma reads 32-bit (tf32) operands from shared memory K-major only: its transpose bits exist for
16-bit types alone. The spec's matmul has B as a K x N row-major tile (N contiguous in global
memory: "MN-major"), and its transposed variant `^a` has A so. Three ways, best first:

1. `swaps_operands`: A K-contiguous times B N-contiguous in a pipelined loop (the spec's kernel)
   runs as C^T = B^T A^T: wgmma's A operand may come from registers, so B^T is read per K step
   from B's slot in its own order (scalar shared loads into the instruction's fragment), A
   (K-major) is wgmma's B by descriptor, and the accumulator has the transposed Mma layout. cuBLAS
   does the same (its SASS: LDS into the fragment, HGMMA with A in registers). H100, 4096^3:
   0.95x cuBLAS.
2. `register_a_operand`: A is always staged in its own order; where it is M-contiguous wgmma
   reads it from registers too (the same per-step fragment loads, from A's tile). A^T B and
   A^T B^T: 0.94x.
3. `restaged_operands` / `restage`: an N-contiguous B of a pipelined loop that is not swapped
   (A^T B) is copied 16 bytes at a time (or by TMA) into slots in its own order and restaged each
   iteration: read into registers (`restaging_layout`), stored K-major into one of two buffers
   (`tc.local_store`: a proxy fence and a barrier before the dot).
4. Otherwise (no pipelining, too little shared memory) B is copied transposed element by element
   (`transposing_copy_layout`, a 4-byte cp.async or a load and a 4-byte store): 0.6x.

The transposing copy layout: one element per thread and instruction, a warp's 32 lanes 16
consecutive elements along the dimension contiguous in global memory (64 bytes) by 2 consecutive
along K. In the K-major buffer those are 16 rows (XOR-swizzled by row % 8) at 2 consecutive K: two
lanes per bank. Measured on an H100 (8192^3, 256x128x32 tiles, 8 warps, 3 stages): 8 x 4 lanes (no
bank conflict, 4 rows of 32 bytes per instruction) 215 TFLOPS, 16 x 2 231, 32 x 1 (4-way
conflicts, one 128-byte row) 227. (Triton 3.6 copies tf32 B this way too, with 4 consecutive
elements per thread and 32 lanes along the row, 16-way conflicts: 147 at its best tile.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tc_ir.layouts import Blocked, Layout, Mma, Shared
from tc_ir.ops import (
    BinaryOp,
    ConstantOp,
    ConvertLayoutOp,
    DotOp,
    ForOp,
    Function,
    LoadOp,
    LocalAllocOp,
    LocalLoadOp,
    LocalStoreOp,
    LocalSubviewOp,
    OpResult,
    Operation,
    TransOp,
    Value,
)
from tc_ir.types import I32, ElementType, ScalarType, TileType

from .dot_layouts import shared_layout, uses_wgmma
from .resources import max_shared_bytes

#: Lanes of a warp along the global-contiguous dimension in a transposing copy (16 x 4 bytes); the
#: other 2 go along K.
LANES_ALONG_ROW = 16


def needs_k_major(element: ElementType) -> bool:
    """Whether wgmma reads operands of this element type K-major only (32-bit: tf32)."""
    return element.bits == 32


def operand_source(dot: DotOp, index: int) -> tuple[Value, tuple[int, ...] | None]:
    """Operand `index` of `dot` before a `trans` (the spec's `^a`), and that trans's permutation
    (None when there is none); after layout assignment, behind the convert to the operand layout."""
    v = dot.operands[index]
    if isinstance(v, OpResult) and isinstance(v.op, ConvertLayoutOp):
        v = v.op.operands[0]
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


def _spread_warps(num_warps: int) -> int:
    """The warps a copy layout spreads over the tile: the largest power of two in `num_warps`
    (8 of 12; the other 4 hold copies), so that its blocks divide tile dimensions of powers of two."""
    return 1 << (num_warps.bit_length() - 1)


def transposing_copy_layout(shape: tuple[int, ...], fast: int, kdim: int, num_warps: int) -> Blocked:
    """The layout of a rank-2 tile copied element by element into a K-major buffer: 16 lanes along
    `fast` (the global-contiguous dimension) by 2 along `kdim`, warps along K first."""
    spt = [1, 1]
    tpw = [1, 1]
    tpw[fast] = min(LANES_ALONG_ROW, shape[fast])
    tpw[kdim] = 32 // tpw[fast]
    warps = _spread_warps(num_warps)
    wpc = [1, 1]
    wpc[kdim] = max(1, min(warps, shape[kdim] // tpw[kdim]))
    wpc[fast] = warps // wpc[kdim]
    return Blocked(spt, tpw, wpc, (fast, kdim))


#: Shared memory left free for what else a pipelined loop keeps (its mbarriers, a reduction's
#: scratch) when restaged buffers are sized against the limit.
SHARED_MARGIN = 1024
#: Consecutive K elements each thread holds while restaging (one 16-byte store, K-major).
RESTAGE_RUN = 4


def restaging_layout(shape: tuple[int, ...], fast: int, kdim: int, num_warps: int) -> Blocked:
    """The registers between an MN-major slot and the K-major buffer of a restaged operand: 4
    consecutive K per thread (one 16-byte store into a K-major row), a warp's 32 lanes along
    `fast` (each scalar read of the slot one conflict-free 128-byte row), warps along K first."""
    spt = [1, 1]
    spt[kdim] = RESTAGE_RUN
    tpw = [1, 1]
    tpw[fast] = 32
    warps = _spread_warps(num_warps)
    wpc = [1, 1]
    wpc[kdim] = max(1, min(warps, shape[kdim] // RESTAGE_RUN))
    wpc[fast] = warps // wpc[kdim]
    return Blocked(spt, tpw, wpc, (kdim, fast))


def _tile_bytes(v: Value) -> int:
    t = v.type
    return t.storage_numel * t.element.bytes if isinstance(t, TileType) and isinstance(t.element, ScalarType) else 0


def register_a_operand(index: int) -> bool:
    """Whether operand `index` of a tf32 wgmma dot is staged in its own order whatever it is: A,
    which wgmma reads from registers where it is not K-major (tc_nvptx.lower_wgmma reads it
    there from its tile in shared memory, 4 registers per K step of 8)."""
    return index == 0


def reads_a_from_registers(op: DotOp) -> bool:
    """Whether a laid-out wgmma dot reads its A operand into registers (tc_nvptx.lower_wgmma): a transposed accumulator
    (C^T = B^T A^T), or tf32 operands with A staged M-contiguous (wgmma reads tf32 K-major only
    from shared memory, any layout from registers)."""
    lay = getattr(op.result.type, "layout", None)
    if not isinstance(lay, Mma) or lay.version != 3:
        return False
    if lay.transposed:
        return True
    a = op.operands[0]
    e = getattr(a.type, "element", None)
    if not (isinstance(e, ScalarType) and e.bits == 32 and isinstance(a, OpResult)):
        return False
    shared = getattr(a.op.operands[0].type, "layout", None) if a.op.operands else None
    return isinstance(shared, Shared) and shared.order[0] != 1


def swaps_operands(dot: DotOp, num_warps: int, num_stages: int, fast_of: Callable[[Value], int]) -> bool:
    """Whether the tf32 wgmma `dot` C = A B of a pipelined loop runs as C^T = B^T A^T: A loaded
    K-contiguous, B N-contiguous (`fast_of(tile)`: the dimension contiguous in its load's layout).
    B^T is then wgmma's A operand, which may come from registers (read from B's slot in its own
    order, tc_nvptx.lower_wgmma), and A, K-major in shared memory, its B operand: nothing is
    restaged. The accumulator is the transposed Mma layout: N rows of whole warpgroups, M <= 256
    columns (one instruction's N)."""
    if num_stages < 2 or num_warps % 4:
        return False
    body = dot.parent
    loop = body.parent if body is not None else None
    if not isinstance(loop, ForOp):
        return False
    (a, a_perm), (b, b_perm) = operand_source(dot, 0), operand_source(dot, 1)
    if a_perm is not None or b_perm is not None:
        return False
    for v in (a, b):
        if not (isinstance(v, OpResult) and isinstance(v.op, LoadOp) and v.op.parent is body):
            return False
    at, bt = a.type, b.type
    if not (isinstance(at, TileType) and isinstance(bt, TileType) and needs_k_major(at.element)):
        return False
    (m, k), (_, n) = at.shape, bt.shape
    if fast_of(a) != 1 or fast_of(b) != 1:
        return False
    return 16 <= m <= 256 and m % 16 == 0 and n % (16 * num_warps) == 0 and n % 32 == 0 and k % 8 == 0


def restaged_operands(dot: DotOp, num_stages: int, arch: str, fast_of: Callable[[Value], int]) -> dict[int, LoadOp]:
    """{1: load} when B, a tf32 wgmma operand, is loaded N-contiguous (`fast_of(tile)`, the
    dimension contiguous in its load's layout, is not K) in the loop that holds a dot that does
    not swap its operands: it goes through the pipeline's slots in its own order and is restaged
    K-major in the loop (`restage`); else {} and B is copied transposed element by element:
    outside a loop, without pipelining (one stage), for tiles narrower than a warp's row, or when
    the slots and the two restaging buffers would not fit in shared memory. (A is never
    restaged: `register_a_operand`.)"""
    if num_stages < 2 or getattr(getattr(dot.result.type, "layout", None), "transposed", False):
        return {}
    body = dot.parent
    loop = body.parent if body is not None else None
    if not isinstance(loop, ForOp) or loop.body.args[0].type != I32:
        return {}
    out: dict[int, LoadOp] = {}
    slots = 0
    for index in (0, 1):
        src, perm = operand_source(dot, index)
        t = src.type
        if not (isinstance(src, OpResult) and isinstance(src.op, LoadOp) and src.op.parent is body):
            continue
        slots += num_stages * _tile_bytes(src)
        if index == 0 or not isinstance(t, TileType) or t.rank != 2 or not needs_k_major(t.element):
            continue  # (A goes to registers where it is not K-major: register_a_operand)
        kdim, fast = source_k_dim(index, perm), fast_of(src)
        if fast != kdim and t.shape[fast] % 32 == 0 and t.shape[kdim] % RESTAGE_RUN == 0:
            out[index] = src.op
    limit = max_shared_bytes(arch) - SHARED_MARGIN
    while out and slots + 2 * sum(_tile_bytes(ld.result) for ld in out.values()) > limit:
        del out[max(out, key=lambda i: _tile_bytes(out[i].result))]
    return out


def load_order(coalesced: Callable[[Value], Blocked]) -> Callable[[Value], int]:
    """`fast_of` for the layout solver: the contiguous dimension of a load's own layout."""
    def fast(v: Value) -> int:
        assert isinstance(v, OpResult)
        return coalesced(v.op.operands[0]).order[0]
    return fast


def k_major_anchors(
    f: Function, num_warps: int, arch: str, coalesced: Callable[[Value], Blocked], num_stages: int = 1
) -> Iterator[tuple[Value, Layout]]:
    """Layout anchors for the loads whose tiles feed a tf32 wgmma operand directly (or through a
    trans) and are not contiguous along K in global memory: their pointer, mask, other value and
    result take the transposing copy layout (unless they are restaged: `restaged_operands`, which
    keep the load's own layout). `coalesced(ptr)` is the load's own layout."""
    for op in f.walk():
        if not isinstance(op, DotOp) or not uses_wgmma(op, num_warps, arch):
            continue
        if swaps_operands(op, num_warps, num_stages, load_order(coalesced)):
            continue  # (both operands stay in their load order)
        restaged = restaged_operands(op, num_stages, arch, load_order(coalesced))
        for index in (0, 1):
            src, perm = operand_source(op, index)
            t = src.type
            if not (isinstance(src, OpResult) and isinstance(src.op, LoadOp) and isinstance(t, TileType)):
                continue
            if t.rank != 2 or not needs_k_major(t.element) or index in restaged or register_a_operand(index):
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


def restage(dot: DotOp, load: LoadOp, src: Value, kdim: int, num_warps: int) -> Value:
    """Stage the tile `src` (the result of `load`, MN-major) for operand of `dot` through a buffer
    in its own order (16-byte copies, or TMA, into the pipeline's slots) and restage it K-major
    in the loop: read into registers (`restaging_layout`), stored into one of two K-major buffers
    made before the loop, alternating by iteration, so that the store of iteration i never
    overwrites what the dot of iteration i - 1, which may still be in flight, reads. (The dot of
    iteration i - 2 is complete in every warpgroup: a loop keeps at most one wgmma batch in flight
    past its wait, and a barrier follows each warpgroup's wait before the next store: the one after
    `dot_wait(1)` with several warpgroups, or the store's own in the previous iteration.)
    Returns the K-major view (in `src`'s dimensions) for the dot to read."""
    t = src.type
    assert isinstance(t, TileType) and isinstance(t.layout, Blocked)
    body = dot.parent
    assert body is not None and isinstance(body.parent, ForOp)
    loop = body.parent
    outer = loop.parent
    assert outer is not None
    fast = t.layout.order[0]
    at = body.ops.index(dot)

    def emit(op: Operation) -> Operation:
        nonlocal at
        body.insert(at, op)
        at += 1
        return op

    def binary(kind: str, a: Value, b: Value) -> Value:
        return emit(BinaryOp.create([a, b], [I32], {"kind": kind})).result

    slot_t = TileType(t.shape, t.element, shared_layout(t.shape, (fast, kdim), t.element, True))
    slot = emit(LocalAllocOp.create([src], [slot_t], loc=load.loc)).result
    regs_t = TileType(t.shape, t.element, restaging_layout(t.shape, fast, kdim, num_warps))
    regs = emit(LocalLoadOp.create([slot], [regs_t], loc=dot.loc)).result
    k_major = shared_layout(t.shape, (kdim, fast), t.element, True)
    pair_t = TileType((2, *t.shape), t.element,
                      Shared(k_major.vec, k_major.per_phase, k_major.max_phase, (kdim + 1, fast + 1, 0)))
    pair = LocalAllocOp.create([], [pair_t], loc=dot.loc)
    outer.insert(outer.ops.index(loop), pair)
    # the buffer of this iteration: ((iv - lb) / step) % 2
    iv, lb, step = body.args[0], loop.operands[0], loop.operands[2]
    one = emit(ConstantOp.create([], [I32], {"value": 1})).result
    parity = binary("and", binary("sdiv", binary("sub", iv, lb), step), one)
    view = emit(LocalSubviewOp.create([pair.result, parity], [TileType(t.shape, t.element, k_major)])).result
    emit(LocalStoreOp.create([regs, view], [], loc=dot.loc))
    return view
