"""Layouts for transpositions between memory accesses (`*py = ^(*px)`): one Blocked layout for the
loaded side whose dimension-permuted twin is the stored side's layout, so `trans` moves no data.

Each thread holds a small 2-D block: `vs` elements along the dimension the loads are contiguous in
and `vd` along the one the stores are contiguous in (in source coordinates). Both sides then access
global memory with vectors (128 bits when alignment allows), and the transposition is a renaming
of the thread's registers instead of a round trip through shared memory and barriers.

That holds only for small tiles: the lanes of a warp are split between the two dimensions, so a
warp's access covers at most 32 / (lanes along the other side) vectors of one row, and both
sides cannot cover 128 bytes of a row each (8 x 8 lanes of 16-byte vectors are 64 lanes). With
half rows (16-bit 64 x 64 tiles, 4 warps: 8-byte stores, 32 bytes of 8 rows per instruction;
8 x 8 blocks: 64 of 8 rows) an H100 moved 3-5% fewer bytes than with whole 128-byte rows on both
sides through shared memory, and 16-bit 32 x 32 tiles half as many. So the register
transposition is chosen only where it reaches, on both sides, the row coverage of the access's
own coalesced layout (`covers_rows`); otherwise the loads and stores keep their coalesced
layouts and the trans goes through shared memory (shared_alloc.trans_exchange_strides pads its
rows against bank conflicts).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tc_ir.layouts import Blocked
from tc_ir.ops import (
    AtomicCASOp,
    AtomicRMWOp,
    BinaryOp,
    CastOp,
    Function,
    LoadOp,
    Operation,
    OpResult,
    SelectOp,
    StoreOp,
    TransOp,
    UnaryOp,
    Value,
)
from tc_ir.types import PointerType, TileType

from .axis_info import AxisAnalysis

#: Ops through which a tile keeps its shape and is followed to the loads/stores around a trans.
PASS_THROUGH = (BinaryOp, CastOp, UnaryOp, SelectOp)


def permute_blocked(layout: Blocked, perm: Sequence[int]) -> Blocked:
    """The layout of `trans(x, perm)` when x has `layout` and no data moves: result dim i takes
    source dim perm[i]'s distribution, and the thread numbering (order) is kept."""
    inv = {p: i for i, p in enumerate(perm)}
    return Blocked(
        [layout.size_per_thread[p] for p in perm],
        [layout.threads_per_warp[p] for p in perm],
        [layout.warps_per_cta[p] for p in perm],
        [inv[d] for d in layout.order],
    )


def is_register_trans(src: TileType, dst: TileType, perm: Sequence[int]) -> bool:
    """Whether a trans from `src` to `dst` moves no data between threads (code generation then
    renames registers, and no shared memory is needed)."""
    return isinstance(src.layout, Blocked) and dst.layout == permute_blocked(src.layout, perm)


def access_vector(ptr: Value, axes: AxisAnalysis) -> tuple[int, int]:
    """(dimension, elements) of the widest aligned contiguous access of a pointer tile (<= 16 B).

    Where no dimension allows a vector (an unaligned leading dimension, say), the dimension the
    pointers are contiguous in still wins, so that a warp's lanes run along it and each access
    instruction reads whole 32-byte sectors."""
    t = ptr.type
    assert isinstance(t, TileType)
    info = axes.info(ptr)
    elem = t.element
    eb = elem.pointee.bytes if isinstance(elem, PointerType) else 4
    best = (t.rank - 1, 1)
    best_key = (0, 0)
    for d in range(t.rank - 1, -1, -1):
        v = min(info.contiguity[d], max(1, info.divisibility[d] // eb), max(1, 16 // eb), t.shape[d])
        key = (v, min(info.contiguity[d], t.shape[d]))
        if key > best_key:
            best, best_key = (d, v), key
    return best


def joint_layout(
    shape: Sequence[int], fs: int, vs: int, fd: int, vd: int, num_warps: int
) -> Blocked:
    """A 2-D layout holding vs x vd blocks (vs along fs, vd along fd), lanes first along fs so
    that the loads of a warp cover whole rows, warps then along fd."""
    rank = len(shape)
    per_thread = max(1, shape[0] * shape[1] // (32 * num_warps))
    vs = min(vs, per_thread, shape[fs])
    vd = min(vd, max(1, per_thread // vs), shape[fd]) if fd != fs else vs
    while fd != fs and vs > 2 * vd and vd * 2 <= shape[fd]:  # both sides vectorized where possible
        vs //= 2
        vd *= 2
    spt = [1] * rank
    spt[fs] = vs
    spt[fd] = max(spt[fd], vd)
    other = fd if fd != fs else 1 - fs
    tpw = [1] * rank
    tpw[fs] = min(8, max(1, shape[fs] // spt[fs]))
    tpw[other] = min(32 // tpw[fs], max(1, shape[other] // spt[other]))
    tpw[fs] *= 32 // (tpw[fs] * tpw[other])  # lanes left over: along fs (replicating if needed)
    wpc = [1] * rank
    left = num_warps
    for d in (other, fs):
        w = min(left, max(1, shape[d] // (spt[d] * tpw[d])))
        wpc[d] = w
        left //= w
    wpc[other] *= left
    return Blocked(spt, tpw, wpc, [fs, other])


#: A warp's access needs no more contiguous bytes of a row than this (a 128-byte line).
LINE_BYTES = 128


def row_bytes(layout: Blocked, dim: int, vec: int, element_bytes: int, extent: int) -> int:
    """Contiguous bytes of one row along `dim` that one warp-wide access of `vec`-element vectors
    covers in `layout` (lanes along `dim` hold adjacent vectors only when each holds one)."""
    spt, tpw = layout.size_per_thread[dim], layout.threads_per_warp[dim]
    lanes = tpw if spt <= vec else 1
    return min(lanes * min(spt, vec), extent) * element_bytes


def covers_rows(layout: Blocked, shape: Sequence[int], dim: int, vec: int, element_bytes: int) -> bool:
    """Whether a warp's access in `layout` covers as much of a row along `dim` as the access's
    coalesced layout does (32 lanes of `vec` elements, up to one 128-byte line or the extent)."""
    want = min(32 * vec * element_bytes, shape[dim] * element_bytes, LINE_BYTES)
    return row_bytes(layout, dim, vec, element_bytes, shape[dim]) >= want


def _element_bytes(ptr: Value) -> int:
    t = ptr.type
    assert isinstance(t, TileType)
    return t.element.pointee.bytes if isinstance(t.element, PointerType) else 4


def _producers(v: Value, depth: int = 0) -> Iterator[LoadOp]:
    if not isinstance(v, OpResult) or depth > 6:
        return
    op = v.op
    if isinstance(op, LoadOp):
        yield op
    elif isinstance(op, PASS_THROUGH):
        for x in op.operands:
            if isinstance(x.type, TileType) and x.type.shape == _shape(v):
                yield from _producers(x, depth + 1)


def _consumers(v: Value, users: dict[Value, list[Operation]], depth: int = 0) -> Iterator[StoreOp]:
    if depth > 6:
        return
    for u in users.get(v, []):
        if isinstance(u, StoreOp) and len(u.operands) > 1 and u.operands[1] is v:
            yield u
        elif isinstance(u, PASS_THROUGH) and u.results and _shape(u.results[0]) == _shape(v):
            yield from _consumers(u.results[0], users, depth + 1)


def _shape(v: Value) -> tuple[int, ...]:
    t = v.type
    return t.shape if isinstance(t, TileType) else ()


def _tiles(op: Operation) -> list[Value]:
    return [v for v in list(op.operands) + list(op.results) if isinstance(v.type, TileType)]


def transpose_anchors(f: Function, axes: AxisAnalysis, num_warps: int) -> list[tuple[Value, Blocked]]:
    """For every 2-D trans between loads and stores: the layouts of those loads' and stores' tiles."""
    users: dict[Value, list[Operation]] = {}
    for op in f.walk():
        for v in op.operands:
            users.setdefault(v, []).append(op)
    out: list[tuple[Value, Blocked]] = []
    for op in f.walk():
        if not isinstance(op, TransOp) or len(op.perm) != 2:
            continue
        loads = list(_producers(op.operands[0]))
        stores = list(_consumers(op.result, users))
        if not loads or not stores or any(isinstance(x, (AtomicRMWOp, AtomicCASOp)) for x in loads):
            continue
        fs, vs = access_vector(loads[0].operands[0], axes)
        fd_dst, vd = access_vector(stores[0].operands[0], axes)
        fd = op.perm[fd_dst]  # the store's fast dimension, in source coordinates
        shape = _shape(op.operands[0])
        src = joint_layout(shape, fs, vs, fd, vd, num_warps)
        dst = permute_blocked(src, op.perm)
        if not (covers_rows(src, shape, fs, vs, _element_bytes(loads[0].operands[0]))
                and covers_rows(dst, _shape(op.result), fd_dst, vd, _element_bytes(stores[0].operands[0]))):
            continue  # half rows cost more than the exchange through shared memory
        for ld in loads:
            out.extend((v, src) for v in _tiles(ld))
        for st in stores:
            out.extend((v, dst) for v in _tiles(st))
    return out
