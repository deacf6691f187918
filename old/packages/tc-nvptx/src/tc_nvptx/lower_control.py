"""Structured control flow to LLVM basic blocks and phis (tile values: one phi per element)."""

from __future__ import annotations

from collections.abc import Sequence

import llvmlite.ir as ir
from tc_ir.ops import ConditionOp, ForOp, IfOp, Value, WhileOp, YieldOp
from tc_ir.types import TileType

from .context import Ctx, LVal, SharedTile, TileVal, lowering_error
from .llvm_types import llvm_type
from .lowerings import lowers


def _phis(ctx: Ctx, values: Sequence[Value]) -> list[LVal]:
    """Empty phis shaped like `values` (in the current block)."""
    out: list[LVal] = []
    for v in values:
        t = v.type
        if isinstance(t, TileType):
            m = ctx.map_of(t)
            ty = llvm_type(t.element)
            out.append(TileVal(m, {k: ctx.b.phi(ty) for k in m.keys}, t.element))
        else:
            out.append(ctx.b.phi(llvm_type(t)))
    return out


def _add_incoming(phis: Sequence[LVal], values: Sequence[LVal], block: ir.Block, loc: object) -> None:
    for p, v in zip(phis, values):
        if isinstance(p, TileVal):
            if not isinstance(v, TileVal):
                for k in p.vals:
                    p.vals[k].add_incoming(v, block)  # type: ignore[attr-defined]
                continue
            for k, phi in p.vals.items():
                phi.add_incoming(v.vals[k], block)  # type: ignore[attr-defined]
        elif isinstance(p, SharedTile) or isinstance(v, (TileVal, SharedTile)):
            raise lowering_error("internal error: mismatched loop-carried value", None)
        else:
            p.add_incoming(v, block)


def _yielded(ctx: Ctx, term: object) -> list[LVal]:
    if isinstance(term, (YieldOp, ConditionOp)):
        return [ctx.values[v] for v in term.operands]
    return []


@lowers("tc.for")
def lower_for(ctx: Ctx, op: ForOp) -> None:
    b = ctx.b
    lb, ub, step = (ctx.scalar(v) for v in op.operands[:3])
    inits = [ctx.values[v] for v in op.inits]
    pre = b.block
    header = b.append_basic_block("for_header")
    body = b.append_basic_block("for_body")
    exit_bb = b.append_basic_block("for_exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lb.type, name="iv")
    carried = _phis(ctx, op.body.args[1:])
    iv.add_incoming(lb, pre)
    _add_incoming(carried, inits, pre, op.loc)
    b.cbranch(b.icmp_signed("<", iv, ub), body, exit_bb)
    b.position_at_end(body)
    ctx.values[op.body.args[0]] = iv
    for a, p in zip(op.body.args[1:], carried):
        ctx.values[a] = p
    ctx.lower_block(op.body)
    nxt = _yielded(ctx, op.body.terminator)
    iv_next = b.add(iv, step)
    latch = b.block
    iv.add_incoming(iv_next, latch)
    _add_incoming(carried, nxt, latch, op.loc)
    b.branch(header)
    b.position_at_end(exit_bb)
    for r, p in zip(op.results, carried):
        ctx.values[r] = p


@lowers("tc.if")
def lower_if(ctx: Ctx, op: IfOp) -> None:
    b = ctx.b
    cond = ctx.scalar(op.operands[0])
    then_bb = b.append_basic_block("if_then")
    else_bb = b.append_basic_block("if_else")
    join = b.append_basic_block("if_join")
    b.cbranch(cond, then_bb, else_bb)
    ends: list[tuple[ir.Block, list[LVal]]] = []
    for blk, bb in ((op.then_block, then_bb), (op.else_block, else_bb)):
        b.position_at_end(bb)
        ctx.lower_block(blk)
        ends.append((b.block, _yielded(ctx, blk.terminator)))
        b.branch(join)
    b.position_at_end(join)
    phis = _phis(ctx, op.results)
    for blk_end, vals in ends:
        _add_incoming(phis, vals, blk_end, op.loc)
    for r, p in zip(op.results, phis):
        ctx.values[r] = p


@lowers("tc.while")
def lower_while(ctx: Ctx, op: WhileOp) -> None:
    b = ctx.b
    inits = [ctx.values[v] for v in op.operands]
    pre = b.block
    before = b.append_basic_block("while_before")
    after = b.append_basic_block("while_after")
    exit_bb = b.append_basic_block("while_exit")
    b.branch(before)
    b.position_at_end(before)
    args = _phis(ctx, op.before.args)
    _add_incoming(args, inits, pre, op.loc)
    for a, p in zip(op.before.args, args):
        ctx.values[a] = p
    ctx.lower_block(op.before)
    term = op.before.terminator
    if not isinstance(term, ConditionOp):
        raise lowering_error("while without a condition", op.loc)
    cond = ctx.scalar(term.operands[0])
    passed = [ctx.values[v] for v in term.operands[1:]]
    b.cbranch(cond, after, exit_bb)
    b.position_at_end(after)
    for a, v in zip(op.after.args, passed):
        ctx.values[a] = v
    ctx.lower_block(op.after)
    nxt = _yielded(ctx, op.after.terminator)
    _add_incoming(args, nxt, b.block, op.loc)
    b.branch(before)
    b.position_at_end(exit_bb)
    for r, v in zip(op.results, passed):
        ctx.values[r] = v
