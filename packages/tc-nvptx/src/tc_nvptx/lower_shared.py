"""Ops that move data between threads: layout conversions, trans and reshape through shared
memory, reductions (in-thread, warp butterfly shuffles, then shared memory across warps) and the
FMA dot (operands staged in shared memory, each thread computing its accumulator elements)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import llvmlite.ir as ir
from tc_ir.layouts import DotOperand
from tc_ir.ops import ConvertLayoutOp, DotOp, Operation, ReduceOp, ReshapeOp, TransOp
from tc_ir.types import ElementType, ScalarType, TileType
from tc_lang.diagnostics import Location
from tc_opt.shared_alloc import (
    exchange_shape,
    exchange_strides,
    runs_first_in_shared_memory,
    storage_bytes,
    trans_exchange_strides,
)

from .context import Ctx, SharedTile, TileVal, is_power_of_two, lowering_error
from .layout_math import DimMap, ThreadMap, row_major_strides
from .llvm_types import F32, I8, I32, bits_of, llvm_type, memory_type
from .lower_elementwise import combine
from .lower_tile import lower_small_reshape
from .lowerings import lowers


def _store_shared(ctx: Ctx, base: ir.Value, elem: ElementType, index: ir.Value, v: ir.Value) -> None:
    b = ctx.b
    mt = memory_type(elem)
    if isinstance(elem, ScalarType) and elem.name == "i1":
        v = b.zext(v, I8)
    b.store(v, b.gep(base, [index], source_etype=mt))


def _load_shared(ctx: Ctx, base: ir.Value, elem: ElementType, index: ir.Value) -> ir.Value:
    b = ctx.b
    mt = memory_type(elem)
    v = b.load(b.gep(base, [index], source_etype=mt), typ=mt)
    if isinstance(elem, ScalarType) and elem.name == "i1":
        v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
    return v


def _linear(ctx: Ctx, m: ThreadMap, strides: Sequence[int], key: tuple[int, ...]) -> ir.Value:
    base = ctx.linear_base(m, strides)
    const = sum(o * s for o, s in zip(key, strides))
    return ctx.b.add(base, ir.Constant(I32, const)) if const else base


def exchange(ctx: Ctx, op: Operation, src: TileVal, dst_t: TileType, read_strides: Sequence[int],
             write_strides: Sequence[int] | None = None, columns: int = 0) -> TileVal:
    """Write `src` to shared memory at sum(coord[i] * write_strides[i]) (row-major when None),
    then read each destination element at sum(coord[i] * read_strides[i]). With `columns`
    (ConvertLayoutOp.columns) in rounds of that many columns of the last dimension through a
    buffer of one round: write a round, barrier, read it (coordinates taken from the round's
    first column), barrier before the next round's writes."""
    base = ctx.smem_ptr(op)
    src_strides = list(write_strides) if write_strides is not None else row_major_strides(src.map.shape)
    m = ctx.map_of(dst_t)
    writes = rounds_of(src.map, columns, op.loc) if columns else None
    reads = rounds_of(m, columns, op.loc) if columns else None
    vals: dict[tuple[int, ...], ir.Value] = {}
    for r in range(dst_t.shape[-1] // columns if columns else 1):
        if r or not runs_first_in_shared_memory(ctx.function, ctx.alloc, op):
            ctx.barrier()  # earlier readers of this memory are done
        shift = r * columns
        for key, v in src.vals.items():
            if writes is None or writes[key] == r:
                _store_shared(ctx, base, src.element, _linear(ctx, src.map, src_strides, _shifted(key, shift)), v)
        ctx.barrier()
        for key in m.keys:
            if reads is None or reads[key] == r:
                vals[key] = _load_shared(ctx, base, dst_t.element, _linear(ctx, m, read_strides, _shifted(key, shift)))
    return TileVal(m, vals, dst_t.element)


def _shifted(key: tuple[int, ...], shift: int) -> tuple[int, ...]:
    """`key` moved `shift` elements back along the last dimension (to its round's first column)."""
    return (*key[:-1], key[-1] - shift) if shift else key


@lowers("tc.convert_layout")
def lower_convert(ctx: Ctx, op: ConvertLayoutOp) -> None:
    dst_t = op.result.type
    src_v = ctx.values[op.operands[0]]
    assert isinstance(dst_t, TileType)
    if not isinstance(src_v, TileVal):
        ctx.values[op.result] = ctx.splat_tile(dst_t, src_v)  # type: ignore[arg-type]
        return
    if isinstance(dst_t.layout, DotOperand):
        base = ctx.smem_ptr(op)
        strides = row_major_strides(dst_t.shape)
        ctx.barrier()
        for key, v in src_v.vals.items():
            _store_shared(ctx, base, src_v.element, _linear(ctx, src_v.map, strides, key), v)
        ctx.barrier()
        ctx.values[op.result] = SharedTile(base, dst_t.shape, dst_t.element)
        return
    if src_v.map.layout == dst_t.layout:
        ctx.values[op.result] = src_v
        return
    if dst_t.numel == 1:
        # every thread holds the one element (replicas compute it alike, a reduction ends in
        # every thread): no exchange, and tc_opt.shared_alloc allocates none for it
        ctx.values[op.result] = ctx.splat_tile(dst_t, next(iter(src_v.vals.values())))
        return
    padded = exchange_strides(exchange_shape(op), storage_bytes(dst_t))  # (fewer bank conflicts)
    ctx.values[op.result] = exchange(ctx, op, src_v, dst_t, padded, padded, op.columns)


def thread_reach(d: DimMap) -> int:
    """The largest part of a coordinate along `d` that depends on the thread (its lane and warp):
    each element a thread holds lies at `base + offset` with 0 <= base <= this (layout_math)."""
    if d.mode in ("one", "all"):
        return 0
    if d.mode == "wrap":
        return d.size - 1  # (a base anywhere in the dimension)
    if d.warp_step:
        return (d.tpw - 1) * d.spt + (d.wpc - 1) * d.warp_step
    return (d.tpw * d.wpc - 1) * d.spt


def rounds_of(m: ThreadMap, columns: int, loc: Location | None) -> dict[tuple[int, ...], int]:
    """Each key's round: which `columns` of the last dimension hold its element, the same for
    every thread (tc_opt.layout_utils.thread_block promised so when it chose the rounds)."""
    d = m.dims[-1]
    reach = thread_reach(d)
    out: dict[tuple[int, ...], int] = {}
    for key in m.keys:
        if key[-1] % columns + reach >= columns:
            raise lowering_error(f"internal error: the layout {m.layout} does not keep each thread's elements in "
                                 f"rounds of {columns} columns", loc)
        out[key] = key[-1] // columns
    return out


def _same_threads(a: DimMap, b: DimMap) -> bool:
    return attrs.evolve(a, root_dim=0) == attrs.evolve(b, root_dim=0)


def _trans_in_registers(ctx: Ctx, src: TileVal, dst_t: TileType, perm: Sequence[int]) -> TileVal | None:
    """When every thread already holds the elements it must hold after the transposition (the
    result layout is the source layout with its dimensions permuted), only the keys change."""
    m = ctx.map_of(dst_t)
    sm = src.map
    if len(m.dims) != len(sm.dims) or m.removed != sm.removed:
        return None
    if not all(_same_threads(m.dims[i], sm.dims[p]) for i, p in enumerate(perm)):
        return None
    vals = {tuple(key[p] for p in perm): v for key, v in src.vals.items()}
    return TileVal(m, vals, dst_t.element)


@lowers("tc.trans")
def lower_trans(ctx: Ctx, op: TransOp) -> None:
    dst_t = op.result.type
    assert isinstance(dst_t, TileType)
    src_v = ctx.tile(op.operands[0])
    renamed = _trans_in_registers(ctx, src_v, dst_t, op.perm)
    if renamed is not None:
        ctx.values[op.result] = renamed
        return
    src_t = op.operands[0].type
    assert isinstance(src_t, TileType)
    src_strides = trans_exchange_strides(src_t, dst_t, op.perm)  # (fewest bank conflicts)
    read = [src_strides[p] for p in op.perm]
    ctx.values[op.result] = exchange(ctx, op, src_v, dst_t, read, src_strides)


@lowers("tc.reshape")
def lower_reshape(ctx: Ctx, op: ReshapeOp) -> None:
    if lower_small_reshape(ctx, op):
        return
    dst_t = op.result.type
    assert isinstance(dst_t, TileType)
    ctx.values[op.result] = exchange(ctx, op, ctx.tile(op.operands[0]), dst_t, row_major_strides(dst_t.shape))


# ------------------------------------------------------------------------------ reductions


def _shuffle_xor(ctx: Ctx, v: ir.Value, mask: int) -> ir.Value:
    b = ctx.b
    bits = v.type.width if isinstance(v.type, ir.IntType) else {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(v.type)]

    def shfl(x: ir.Value) -> ir.Value:
        return ctx.call(
            "llvm.nvvm.shfl.sync.bfly.i32", I32,
            [ir.Constant(I32, -1), x, ir.Constant(I32, mask), ir.Constant(I32, 31)],
        )

    ity = ir.IntType(bits)
    iv = v if isinstance(v.type, ir.IntType) else b.bitcast(v, ity)
    if bits == 64:
        lo = b.trunc(iv, I32)
        hi = b.trunc(b.lshr(iv, ir.Constant(ity, 32)), I32)
        r = b.or_(b.zext(shfl(lo), ity), b.shl(b.zext(shfl(hi), ity), ir.Constant(ity, 32)))
    elif bits == 32:
        r = shfl(iv)
    else:
        r = b.trunc(shfl(b.zext(iv, I32)), ity)
    return r if isinstance(v.type, ir.IntType) else b.bitcast(r, v.type)


@lowers("tc.reduce")
def lower_reduce(ctx: Ctx, op: ReduceOp) -> None:
    src = ctx.tile(op.operands[0])
    axis = op.axis
    m = src.map
    d = m.dims[axis]
    kind = op.kind
    # 1. within the thread
    partial: dict[tuple[int, ...], ir.Value] = {}
    for key in m.keys:
        rkey = key[:axis] + key[axis + 1 :]
        v = src.vals[key]
        partial[rkey] = combine(ctx, kind, partial[rkey], v) if rkey in partial else v
    # 2. across the lanes holding different parts of the axis
    step = 1
    while step < d.distinct_lanes:
        lane_mask = d.lane_stride * step
        partial = {k: combine(ctx, kind, v, _shuffle_xor(ctx, v, lane_mask)) for k, v in partial.items()}
        step *= 2
    # 3. across warps, through shared memory
    dw = d.distinct_warps
    res_t = op.result.type
    res_shape = res_t.shape if isinstance(res_t, TileType) else ()
    if dw > 1:
        elem = src.element
        base = ctx.smem_ptr(op)
        numel = 1
        for s in res_shape:
            numel *= s
        strides = row_major_strides(res_shape)
        res_map = ctx.map_of(res_t) if isinstance(res_t, TileType) else None
        warp_d = ctx.warp_part(d.warp_stride, d.wpc)
        # (replicas share a slot; 12 warps give the accumulator 3 or 12 warps along an axis)
        pow2 = is_power_of_two(dw)
        slot = ctx.modulo(warp_d, dw, ctx.b)
        slot_base = ctx.b.mul(slot, ir.Constant(I32, numel))
        ctx.barrier()

        def index(k: tuple[int, ...]) -> ir.Value:
            if res_map is None:
                return ir.Constant(I32, 0)
            return _linear(ctx, res_map, strides, k)

        for k, v in partial.items():
            _store_shared(ctx, base, elem, ctx.b.add(slot_base, index(k)), v)
        ctx.barrier()
        out = {}
        if not res_shape and pow2:
            # a scalar result (every lane wants the same value): lane l reads warp (l mod dw)'s
            # partial and a butterfly over dw lanes combines them, so every lane ends with the
            # same value (the butterfly is symmetric) from one load and 2 log2(dw) instructions,
            # instead of dw loads and dw - 1 combines. (With a tile result, neighbouring lanes
            # hold different elements, so they cannot be combined by shuffles.)
            own = ctx.b.mul(ctx.lane_part(1, dw), ir.Constant(I32, numel))
            for k in partial:
                x = _load_shared(ctx, base, elem, ctx.b.add(index(k), own))
                step = 1
                while step < dw:
                    x = combine(ctx, kind, x, _shuffle_xor(ctx, x, step))
                    step *= 2
                out[k] = x
        else:
            for k in partial:
                acc = None
                for w in range(dw):
                    x = _load_shared(ctx, base, elem, ctx.b.add(index(k), ir.Constant(I32, w * numel)))
                    acc = x if acc is None else combine(ctx, kind, acc, x)
                out[k] = acc
        partial = out  # type: ignore[assignment]
    if isinstance(res_t, TileType):
        ctx.values[op.result] = TileVal(ctx.map_of(res_t), partial, res_t.element)
    else:
        ctx.values[op.result] = partial[()]
