"""Software pipelining with TMA: the loop's dot-operand loads become tensor-memory-access copies
that complete on mbarriers (CompileOptions.tma, sm_90), instead of every thread's cp.async.

Same schedule as pipeline_loops (S = num_stages buffers, loads issued S - 1 iterations ahead, the
wgmma dot kept in flight where that pays), different producer and consumer:
- the coordinates of outer map dimensions (a batch index, tc_opt.tma) are computed once before
  the loop and do not change;
- each slot s has an mbarrier; one thread announces the slot's bytes (`mbarrier_expect`) and
  issues the copies of every operand (`tma_load`, coordinates computed from the iteration number:
  no pointer tiles, no per-thread addresses); the copies of iterations past the end are not issued;
- iteration i waits on slot i % S for the phase of parity (i / S) % 2 (`mbarrier_wait`): the
  barrier's completion makes the copies visible, so there is no commit/wait group and no fence;
- a CTA barrier still proves that every warpgroup has finished reading the slot the next copies
  overwrite: at the top of the body when the dot is synchronous, after `dot_wait(1)` when it is in
  flight and there are several warpgroups (as for cp.async).
After the loop the barriers are invalidated, so their memory can hold other data.
"""

from __future__ import annotations

from collections.abc import Sequence

from tc_ir.layouts import Shared
from tc_ir.ops import (
    BarrierOp,
    ForOp,
    Function,
    LocalAllocOp,
    MBarrierExpectOp,
    MBarrierInitOp,
    MBarrierInvalOp,
    MBarrierWaitOp,
    TmaLoadOp,
    Value,
)
from tc_ir.types import I32, ScalarType, TileType

from .ir_utils import replace_uses
from .pipeline_loops import _buffer_type, _Emitter, dot_in_flight, replace_loop
from .tma import Lin, TmaPlan

I64 = ScalarType("i64")
#: The layout of the barrier array (plain, 8 bytes per barrier).
BARRIER_LAYOUT = Shared(1, 1, 1, (0,))


def materialize(e: _Emitter, lin: Lin) -> Value:
    """The i32 value of a linear form (its variables are available at the emitter's place)."""
    acc: Value | None = None
    for k, c in lin.items():
        if k is None:
            continue
        term = k if c == 1 else e.binary("mul", k, e.const(I32, c))
        acc = term if acc is None else e.binary("add", acc, term)
    const = lin.get(None, 0)
    if acc is None:
        return e.const(I32, const)
    return e.binary("add", acc, e.const(I32, const)) if const else acc


def outer_coordinate(e: _Emitter, f: Function, lin: Lin, stride_arg: int) -> Value:
    """The coordinate of an outer map dimension (tc_opt.tma: base offset `x * s`): x, or 0 where
    the stride s is 0 (an operand broadcast over the batch, whose map the runtime gives that
    dimension extent 1)."""
    x = materialize(e, lin)
    s = f.args[stride_arg]
    nonzero = e.cmp("ne", s, e.const(s.type, 0))
    return e.select(nonzero, x, e.const(I32, 0))


def _tile_bytes(t: TileType) -> int:
    """The bytes the copies of a tile write: whole boxes, so a partial last swizzle panel whole
    (TileType.storage_numel; the columns past the tile are read and not used)."""
    assert isinstance(t.element, ScalarType)
    return t.storage_numel * t.element.bytes


def issue_copies(e: _Emitter, plans: list[TmaPlan], bufs: Sequence[Value], bars: Value, slot: Value, valid: Value,
                 coords: list[tuple[Value, ...]], shared: Sequence[Value | None] = ()) -> None:
    """Where `valid` holds: announce the bytes of slot `slot` on its barrier, then copy every
    plan's tile into the slot; a plan with a `shared` partner (clusters, tc_opt.warp_specialize:
    an i32, the rank bit of the CTA it shares the tile with, 0 for none) gets a multicast copy
    that the two CTAs split where it is not 0 (the bytes announced are the same: the other CTA's
    half lands on this barrier too)."""
    total = 0
    for p in plans:
        t = p.alloc.result.type
        assert isinstance(t, TileType)
        total += _tile_bytes(t)
    e.add(MBarrierExpectOp.create([bars, slot, valid], [], {"bytes": total}))
    flags = [shared[k] if k < len(shared) else None for k in range(len(plans))]
    by_rows = [k for k, (p, flag) in enumerate(zip(plans, flags)) if flag is not None and p.multicast_split == "rows"]
    for k, (p, buf, xy, flag) in enumerate(zip(plans, bufs, coords, flags)):
        view = e.subview(buf, slot, p.alloc.result.type)
        if flag is None:
            e.add(TmaLoadOp.create([view, bars, slot, valid, *xy], [], p.attributes(k), loc=p.load.loc))
        else:  # (the maps of half the rows follow the plans' maps)
            half = len(plans) + by_rows.index(k) if k in by_rows else -1
            e.add(TmaLoadOp.create([view, bars, slot, valid, *xy, flag], [], p.attributes(k, True, half),
                                   loc=p.load.loc))


def tile_coordinates(e: _Emitter, plans: list[TmaPlan], starts: list[tuple[Value, Value]],
                     outers: list[list[Value]], n: Value | int) -> list[tuple[Value, ...]]:
    """Per plan, the map coordinates of the tile iteration `n` of the loop loads: the start moved
    `n` times by the plan's advance, then the outer dimensions' (fixed) coordinates."""
    out = []
    for p, xy, outer in zip(plans, starts, outers):
        pair = []
        for d in (0, 1):
            a = p.advance[d]
            if a == 0 or n == 0:
                pair.append(xy[d])
            elif isinstance(n, int):
                pair.append(e.binary("add", xy[d], e.const(I32, a * n)))
            else:
                pair.append(e.binary("add", xy[d], e.binary("mul", n, e.const(I32, a))))
        out.append((pair[0], pair[1], *outer))
    return out


def start_coordinates(e: _Emitter, f: Function, plans: list[TmaPlan]
                      ) -> tuple[list[tuple[Value, Value]], list[list[Value]]]:
    """The coordinates of iteration 0's tiles and of the outer map dimensions, computed at `e`."""
    starts = [(materialize(e, p.start[0]), materialize(e, p.start[1])) for p in plans]
    outers = [[outer_coordinate(e, f, lin, arg) for lin, arg in p.outer] for p in plans]
    return starts, outers


def next_slot_and_phase(e: _Emitter, slot: Value, phase: Value, stages: int) -> tuple[Value, Value]:
    """The slot after `slot` and the parity of its barrier's phase to wait for (it flips each
    time the slots wrap around)."""
    nxt = e.next_slot(slot, stages)
    wrapped = e.cmp("eq", nxt, e.const(I32, 0))
    return nxt, e.select(wrapped, e.binary("xor", phase, e.const(I32, 1)), phase)


def read_slot(e: _Emitter, loop: ForOp, plans: list[TmaPlan], bufs: Sequence[Value], bars: Value, read: Value,
              phase: Value) -> None:
    """At the top of the loop's body (`e`): wait for slot `read`'s copies (the phase of parity
    `phase` of its barrier), then read the plans' tiles from the slot instead of loading them."""
    body = loop.body
    e.add(MBarrierWaitOp.create([bars, read, phase], [], loc=loop.loc))
    for p, buf in zip(plans, bufs):
        view = e.subview(buf, read, p.alloc.result.type)
        replace_uses(body, p.alloc.result, view)
        body.remove(p.alloc)
        body.remove(p.load)


def pipeline_loop_tma(f: Function, loop: ForOp, stages: int, plans: list[TmaPlan], num_warps: int = 4,
                      k_range: tuple[Value, Value] | None = None) -> None:
    """Pipeline `loop` in place with TMA copies for the loads of `plans` (tc_opt.tma.plans_for).
    `k_range` (i32 values defined before the loop): run only its iterations [k0, k1), counted
    from 0 (a stream-K segment, tc_opt.stream_k); the loop's bounds and the copies' first
    coordinates move there, and everything else reads the loop's counter as before."""
    parent = loop.parent
    assert parent is not None and stages >= 2
    body = loop.body
    term = body.terminator
    assert term is not None
    args = body.args
    lb, ub, step = loop.operands[:3]
    ivt = args[0].type
    dist = stages - 1
    pre = _Emitter(parent, parent.ops.index(loop))
    if k_range is not None:
        k0, k1 = k_range
        first = pre.binary("add", lb, pre.binary("mul", step, k0))
        ub = pre.binary("smin", ub, pre.binary("add", lb, pre.binary("mul", step, k1)))
        lb = first
        loop.operands = [lb, ub, *loop.operands[2:]]
    bufs = [pre.add(LocalAllocOp.create([], [_buffer_type(p.alloc.result.type, stages)], loc=p.alloc.loc)).result  # type: ignore[arg-type]
            for p in plans]
    bars = pre.add(LocalAllocOp.create([], [TileType((stages,), I64, BARRIER_LAYOUT)], loc=loop.loc)).result
    pre.add(MBarrierInitOp.create([bars], [], {"count": 1}, loc=loop.loc))
    starts, outers = start_coordinates(pre, f, plans)
    if k_range is not None:
        starts = [(xy[0], xy[1]) for xy in tile_coordinates(pre, plans, starts, outers, k_range[0])]

    def coords(e: _Emitter, n: Value | int) -> list[tuple[Value, ...]]:
        return tile_coordinates(e, plans, starts, outers, n)

    # prologue: iterations 0 .. S-2
    for s in range(dist):
        iv: Value = lb if s == 0 else pre.binary("add", lb, pre.binary("mul", step, pre.const(ivt, s)))
        valid = pre.cmp("slt", iv, ub)
        issue_copies(pre, plans, bufs, bars, pre.const(I32, s), valid, coords(pre, s))
    # the loop: read/write slots, the read slot's phase and the iteration number of the next copies
    read = body.add_arg(I32, "read_slot")
    write = body.add_arg(I32, "write_slot")
    phase = body.add_arg(I32, "phase")
    ahead = body.add_arg(I32, "ahead_iter")
    top = _Emitter(body, 0)
    read_slot(top, loop, plans, bufs, bars, read, phase)
    dot, issue = dot_in_flight(loop, top, stages, num_warps)
    if dot is None:
        top.add(BarrierOp.create([], []))  # every warp is done with slot (i - 1) % S
    iv_ahead = issue.binary("add", args[0], issue.binary("mul", step, issue.const(ivt, dist)))
    valid = issue.cmp("slt", iv_ahead, ub)
    issue_copies(issue, plans, bufs, bars, write, valid, coords(issue, ahead))
    tail = _Emitter(body, body.ops.index(term))
    next_read, next_phase = next_slot_and_phase(tail, read, phase, stages)
    next_ahead = tail.binary("add", ahead, tail.const(I32, 1))
    term.operands = [*term.operands, next_read, tail.next_slot(write, stages), next_phase, next_ahead]
    inits = [*loop.operands, pre.const(I32, 0), pre.const(I32, dist % stages), pre.const(I32, 0), pre.const(I32, dist)]
    replace_loop(f, loop, pre, inits, MBarrierInvalOp.create([bars], [], loc=loop.loc), dot)


__all__ = ["BARRIER_LAYOUT", "issue_copies", "materialize", "next_slot_and_phase", "outer_coordinate", "pipeline_loop_tma", "read_slot",
           "start_coordinates", "tile_coordinates"]
