"""Constants, ids, ranges and the shape ops that only re-key elements (splat, broadcast,
expand_dims, one-element reshapes)."""

from __future__ import annotations

import struct

import llvmlite.ir as ir
from tc_ir.ops import (
    BroadcastOp,
    ConstantOp,
    ExpandDimsOp,
    ForOp,
    GridDimOp,
    WorkspaceOp,
    MakeRangeOp,
    NumProgramsOp,
    Operation,
    ProgramIdOp,
    ReshapeOp,
    SplatOp,
    UndefOp,
)
from tc_ir.layouts import Mma
from tc_ir.types import F32, TileType, element_of

from .context import Ctx, TileVal, lowering_error
from .llvm_types import F32 as F32_LL
from .llvm_types import I32, constant, llvm_type
from .lower_tma import return_from_kernel
from .lowerings import lowers

_AXES = "xyz"


@lowers("tc.constant")
def lower_constant(ctx: Ctx, op: ConstantOp) -> None:
    t = op.result.type
    c = constant(element_of(t), op.value)
    if isinstance(t, TileType) and _starts_a_wgmma_loop(op):
        ctx.values[op.result] = _registers_of(ctx, t, c)
        return
    ctx.values[op.result] = ctx.splat_tile(t, c) if isinstance(t, TileType) else c


def _starts_a_wgmma_loop(op: ConstantOp) -> bool:
    """Whether `op` is a float wgmma accumulator tile that a loop of its block starts with."""
    t = op.result.type
    if not (isinstance(t, TileType) and isinstance(t.layout, Mma) and t.layout.version == 3 and t.element == F32):
        return False
    block = op.parent
    return block is not None and any(isinstance(o, ForOp) and op.result in o.operands[3:] for o in block.ops)


def _registers_of(ctx: Ctx, t: TileType, c: ir.Constant) -> TileVal:
    """A wgmma accumulator's constant start, written by one asm statement: as LLVM constants, a
    loop's start that a branch around the loop also carries (a persistent kernel's accumulator:
    zeros when the loop runs no iteration) was materialized on both edges, and ptxas zeroed the
    128 registers twice at every program's start (fp16 128x256 over 8 warps). Registers the
    statement wrote are one value that both phis take. Side effects keep it where it is: hoisted
    out of the loop over the programs, it would hold 128 more registers through the kernel."""
    m = ctx.map_of(t)
    keys = list(m.keys)
    bits = f"0f{struct.unpack('<I', struct.pack('<f', float(c.constant)))[0]:08X}"
    text = " ".join(f"mov.b32 ${i}, {bits};" for i in range(len(keys)))
    r = ctx.asm(ir.LiteralStructType([F32_LL] * len(keys)), text, ",".join(["=f"] * len(keys)), [], side_effect=True)
    return TileVal(m, {k: ctx.b.extract_value(r, i) for i, k in enumerate(keys)}, t.element)


@lowers("tc.undef")
def lower_undef(ctx: Ctx, op: UndefOp) -> None:
    t = op.result.type
    u = ir.Constant(llvm_type(element_of(t)), ir.Undefined)
    ctx.values[op.result] = ctx.splat_tile(t, u) if isinstance(t, TileType) else u


@lowers("tc.program_id")
def lower_program_id(ctx: Ctx, op: ProgramIdOp) -> None:
    name = f"llvm.nvvm.read.ptx.sreg.ctaid.{_AXES[op.axis]}"
    ctx.values[op.result] = ctx.eb.call(ctx.intrinsic(name, I32, []), [])


@lowers("tc.num_programs")
def lower_num_programs(ctx: Ctx, op: NumProgramsOp) -> None:
    name = f"llvm.nvvm.read.ptx.sreg.nctaid.{_AXES[op.axis]}"
    ctx.values[op.result] = ctx.eb.call(ctx.intrinsic(name, I32, []), [])


@lowers("tc.grid_dim")
def lower_grid_dim(ctx: Ctx, op: GridDimOp) -> None:
    params = ctx.grid_params
    if not params:
        raise lowering_error("internal error: tc.grid_dim in a kernel that is not persistent", op.loc)
    ctx.values[op.result] = params[op.axis]


@lowers("tc.workspace")
def lower_workspace(ctx: Ctx, op: WorkspaceOp) -> None:
    if op.part not in ctx.workspace_params:
        raise lowering_error("internal error: tc.workspace in a kernel that is not stream-K", op.loc)
    ctx.values[op.result] = ctx.workspace_params[op.part]


@lowers("tc.make_range")
def lower_make_range(ctx: Ctx, op: MakeRangeOp) -> None:
    t = op.result.type
    assert isinstance(t, TileType)
    m = ctx.map_of(t)
    d = m.dims[0]
    base = ctx.base(d)
    vals = {}
    for key in m.keys:
        off = key[0] + op.start
        vals[key] = ctx.b.add(base, ir.Constant(I32, off)) if off else base
        if d.mode in ("one", "all"):
            vals[key] = ir.Constant(I32, off)
    ctx.values[op.result] = TileVal(m, vals, t.element)


@lowers("tc.splat")
def lower_splat(ctx: Ctx, op: SplatOp) -> None:
    t = op.result.type
    assert isinstance(t, TileType)
    ctx.values[op.result] = ctx.splat_tile(t, ctx.scalar(op.operands[0]))


@lowers("tc.broadcast")
def lower_broadcast(ctx: Ctx, op: BroadcastOp) -> None:
    t = op.result.type
    assert isinstance(t, TileType)
    src_v = ctx.values[op.operands[0]]
    if not isinstance(src_v, TileVal):
        ctx.values[op.result] = ctx.splat_tile(t, src_v)
        return
    m = ctx.map_of(t)
    stretched = [i for i, d in enumerate(src_v.map.shape) if d == 1 and t.shape[i] != 1]
    vals = {}
    for key in m.keys:
        k = list(key)
        for i in stretched:
            k[i] = 0
        vals[key] = src_v.vals[tuple(k)]
    ctx.values[op.result] = TileVal(m, vals, t.element)


@lowers("tc.expand_dims")
def lower_expand_dims(ctx: Ctx, op: ExpandDimsOp) -> None:
    t = op.result.type
    assert isinstance(t, TileType)
    src_v = ctx.values[op.operands[0]]
    if not isinstance(src_v, TileVal):
        ctx.values[op.result] = ctx.splat_tile(t, src_v)
        return
    m = ctx.map_of(t)
    vals = {key: src_v.vals[key[: op.axis] + key[op.axis + 1 :]] for key in m.keys}
    ctx.values[op.result] = TileVal(m, vals, t.element)


def lower_small_reshape(ctx: Ctx, op: Operation) -> bool:
    """One-element tiles to scalars and back: no data moves. False when shared memory is needed."""
    src_t, dst_t = op.operands[0].type, op.result.type
    src_v = ctx.values[op.operands[0]]
    if not isinstance(dst_t, TileType):
        assert isinstance(src_v, TileVal)
        ctx.values[op.result] = next(iter(src_v.vals.values()))
        return True
    if not isinstance(src_v, TileVal):
        ctx.values[op.result] = ctx.splat_tile(dst_t, src_v)
        return True
    if isinstance(src_t, TileType) and src_t.numel == 1:
        ctx.values[op.result] = ctx.splat_tile(dst_t, next(iter(src_v.vals.values())))
        return True
    return False


@lowers("tc.barrier")
def lower_barrier(ctx: Ctx, op: Operation) -> None:
    ctx.barrier()


@lowers("tc.yield", "tc.condition")
def lower_terminator(ctx: Ctx, op: Operation) -> None:
    """Read by the enclosing for/if/while lowering."""


@lowers("tc.return")
def lower_return(ctx: Ctx, op: Operation) -> None:
    return_from_kernel(ctx)


__all__ = ["ReshapeOp", "lower_small_reshape"]


@lowers("tc.assume")
def lower_assume(ctx: Ctx, op: Operation) -> None:
    """The facts were used by the alignment analysis; the value itself passes through unchanged."""
    ctx.values[op.result] = ctx.values[op.operands[0]]
