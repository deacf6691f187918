"""Shared-memory buffers and asynchronous copies: local_alloc (+ its stores), subview and
local_trans views, local_load (ldmatrix for tensor-core operands, plain loads otherwise),
cp.async with zero-fill for masked-off vectors, commit and wait groups."""

from __future__ import annotations

import llvmlite.ir as ir
from tc_ir.layouts import DotOperand, Mma, Shared
from tc_ir.ops import (
    AsyncCommitGroupOp,
    AsyncCopyOp,
    AsyncWaitOp,
    LocalAllocOp,
    LocalLoadOp,
    LocalStoreOp,
    LocalSubviewOp,
    LoadOp,
    LocalTransOp,
    Value,
)
from tc_ir.types import PointerType, ScalarType, TileType

from .context import Ctx, TileVal, lowering_error
from .layout_math import ThreadMap
from .llvm_types import I8, I32, bits_of, memory_type
from .lower_memory import chunks, load_vector, vector_width
from .lower_wgmma import fence_for_async_proxy
from .lowerings import lowers
from .swizzle import SharedView

Key = tuple[int, ...]


def view_of(ctx: Ctx, v: Value) -> SharedView:
    x = ctx.values[v]
    if not isinstance(x, SharedView):
        raise lowering_error("internal error: expected a shared-memory tile", None)
    return x


def coords(ctx: Ctx, m: ThreadMap, key: Key) -> list[ir.Value | int]:
    """The thread's coordinates of element `key` (base + offset per dimension)."""
    out: list[ir.Value | int] = []
    for d, k in zip(m.dims, key):
        if d.mode in ("one", "all"):
            out.append(k)
        else:
            base = ctx.base(d)
            out.append(ctx.b.add(base, ir.Constant(I32, k)) if k else base)
    return out


def _pow2_floor(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def store_vec(m: ThreadMap, lay: Shared, elem: ScalarType) -> int:
    """Elements per shared store: contiguous in the thread and inside one swizzle chunk."""
    if not m.dims or m.order[0] != lay.order[0]:
        return 1
    d = m.dims[m.order[0]]
    run = d.spt if d.mode in ("wrap", "tile") else d.size if d.mode == "all" else 1
    limit = lay.vec if lay.vec > 1 else run
    return _pow2_floor(max(1, min(run, limit, max(1, 128 // max(8, bits_of(elem))))))


def store_tile(ctx: Ctx, view: SharedView, src: TileVal) -> None:
    elem = src.element
    assert isinstance(elem, ScalarType)
    b = ctx.b
    mt = memory_type(elem)
    vec = store_vec(src.map, view.layout, elem)
    eb = max(1, bits_of(elem) // 8)
    for keys in chunks(src.map, vec):
        vals = [src.vals[k] for k in keys]
        if elem.name == "i1":
            vals = [b.zext(v, I8) for v in vals]
        ptr = view.address(ctx, coords(ctx, src.map, keys[0]))
        if vec == 1:
            b.store(vals[0], ptr, align=eb)
            continue
        vv: ir.Value = ir.Constant(ir.VectorType(mt, vec), None)
        for i, v in enumerate(vals):
            vv = b.insert_element(vv, v, ir.Constant(I32, i))
        b.store(vv, ptr, align=vec * eb)


def load_tile(ctx: Ctx, view: SharedView, t: TileType) -> TileVal:
    """Each element the thread holds in layout t.layout, read one by one."""
    b = ctx.b
    m = ctx.map_of(t)
    elem = t.element
    assert isinstance(elem, ScalarType)
    mt = memory_type(elem)
    vals = {}
    for key in m.keys:
        v = b.load(view.address(ctx, coords(ctx, m, key)), typ=mt)
        vals[key] = b.icmp_unsigned("!=", v, ir.Constant(I8, 0)) if elem.name == "i1" else v
    return TileVal(m, vals, elem)


@lowers("tc.local_alloc")
def lower_local_alloc(ctx: Ctx, op: LocalAllocOp) -> None:
    t = op.result.type
    assert isinstance(t, TileType)
    view = SharedView.of(ctx.smem_ptr(op), t)
    if op.operands:
        src = ctx.values[op.operands[0]]
        if not isinstance(src, TileVal):
            raise lowering_error("internal error: local_alloc of a non-tile", op.loc)
        ctx.barrier()  # earlier readers of this memory are done
        store_tile(ctx, view, src)
        fence_for_async_proxy(ctx)  # (wgmma reads shared memory through the async proxy)
        ctx.barrier()  # the stores are visible to every thread
    ctx.values[op.result] = view


@lowers("tc.local_store")
def lower_local_store(ctx: Ctx, op: LocalStoreOp) -> None:
    src = ctx.values[op.operands[0]]
    if not isinstance(src, TileVal):
        raise lowering_error("internal error: local_store of a non-tile", op.loc)
    store_tile(ctx, view_of(ctx, op.operands[1]), src)  # (no reader is in flight: the op's contract)
    fence_for_async_proxy(ctx)
    ctx.barrier()  # the stores are visible to every thread


@lowers("tc.local_subview")
def lower_local_subview(ctx: Ctx, op: LocalSubviewOp) -> None:
    ctx.values[op.result] = view_of(ctx, op.operands[0]).subview(ctx, ctx.scalar(op.operands[1]))


@lowers("tc.local_trans")
def lower_local_trans(ctx: Ctx, op: LocalTransOp) -> None:
    t = op.result.type
    assert isinstance(t, TileType) and isinstance(t.layout, Shared)
    ctx.values[op.result] = view_of(ctx, op.operands[0]).permute(op.perm, t.layout)


@lowers("tc.local_load")
def lower_local_load(ctx: Ctx, op: LocalLoadOp) -> None:
    view = view_of(ctx, op.operands[0])
    t = op.result.type
    assert isinstance(t, TileType)
    lay = t.layout
    if isinstance(lay, DotOperand) and (not isinstance(lay.parent, Mma) or lay.parent.version == 3):
        ctx.values[op.result] = view  # the FMA dot and wgmma read shared memory themselves
        return
    if isinstance(lay, DotOperand) and isinstance(t.element, ScalarType) and t.element.bits == 16:
        from .lower_mma import load_operand

        ctx.values[op.result] = load_operand(ctx, view, t)
        return
    ctx.values[op.result] = load_tile(ctx, view, t)


# ------------------------------------------------------------------------------- async copies


def copy_vec(ctx: Ctx, op: AsyncCopyOp, m: ThreadMap, view: SharedView, elem: ScalarType) -> int:
    """Elements per cp.async (its bytes must be 4, 8 or 16; 1 element otherwise)."""
    ptr = op.operands[0]
    if not m.dims or m.order[0] != view.layout.order[0]:
        return 1
    vec = vector_width(ctx, ptr, m, elem)
    if len(op.operands) > 2 and isinstance(op.operands[2].type, TileType):
        vec = min(vec, ctx.axes.info(op.operands[2]).constancy[m.order[0]])
    if view.layout.vec > 1:
        vec = min(vec, view.layout.vec)
    return _pow2_floor(max(1, vec))


@lowers("tc.async_copy")
def lower_async_copy(ctx: Ctx, op: AsyncCopyOp) -> None:
    b = ctx.b
    pv = ctx.tile(op.operands[0])
    view = view_of(ctx, op.operands[1])
    mask = op.operands[2] if len(op.operands) > 2 else None
    pt = op.operands[0].type
    assert isinstance(pt, TileType) and isinstance(pt.element, PointerType)
    elem = pt.element.pointee
    assert isinstance(elem, ScalarType)
    m = pv.map
    vec = copy_vec(ctx, op, m, view, elem)
    eb = max(1, bits_of(elem) // 8)
    nbytes = vec * eb

    def mask_of(key: Key) -> ir.Value | None:
        if mask is None:
            return None
        x = ctx.values[mask]
        return x.vals[key] if isinstance(x, TileVal) else x  # type: ignore[return-value]

    if nbytes < 4:  # no cp.async this narrow: a plain predicated load and a shared store
        zero = ir.Constant(memory_type(elem), None)
        for keys in chunks(m, vec):
            masks = [mask_of(k) for k in keys] if mask is not None else None
            vals = load_vector(ctx, LoadOp(), [pv.vals[k] for k in keys], masks, [zero] * len(keys), elem, True)  # type: ignore[arg-type]
            for k, v in zip(keys, vals):
                vv = b.zext(v, I8) if elem.name == "i1" else v
                b.store(vv, view.address(ctx, coords(ctx, m, k)), align=eb)
        return
    kind = "cg" if nbytes == 16 else "ca"
    text = f"cp.async.{kind}.shared.global [$0], [$1], {nbytes}, $2;"
    for keys in chunks(m, vec):
        dst = b.ptrtoint(view.address(ctx, coords(ctx, m, keys[0])), I32)
        pred = mask_of(keys[0])
        size: ir.Value = ir.Constant(I32, nbytes)
        if pred is not None:
            size = b.select(pred, size, ir.Constant(I32, 0))
        ctx.asm(ir.VoidType(), text, "r,l,r,~{memory}", [dst, pv.vals[keys[0]], size], side_effect=True)


@lowers("tc.async_commit_group")
def lower_async_commit(ctx: Ctx, op: AsyncCommitGroupOp) -> None:
    ctx.asm(ir.VoidType(), "cp.async.commit_group;", "~{memory}", [], side_effect=True)


@lowers("tc.async_wait")
def lower_async_wait(ctx: Ctx, op: AsyncWaitOp) -> None:
    ctx.asm(ir.VoidType(), f"cp.async.wait_group {int(op.pending)};", "~{memory}", [], side_effect=True)
    fence_for_async_proxy(ctx)  # this thread's copies, for wgmma (the barrier after publishes them)
