"""Warp specialization of a TMA-pipelined dot loop (Hopper; CompileOptions.warp_specialize).

pipeline_tma keeps every warp both computing and producing: after each iteration's dot_wait(1)
all warps meet at a CTA barrier before thread 0 refills the slot the previous dot read, so the
warpgroups wait for each other every iteration. Here a dedicated producer warp (launched in
addition to the program's `num_warps`) does all the copies and the program's warps only compute:

    [the ops before the loop: pure, computed by every warp]
    buffers; full[S] (count 1), empty[S] (count num_warps) barriers; start coordinates
    tc.warp_specialize (
      producer: for j in iterations: wait empty[j % S] (parity of round j / S, flipped: the
                first round passes at once), expect + TMA copies of iteration j into slot j % S
                on full[j % S]
      consumer: for i in iterations: wait full[i % S]; dot (asynchronous); dot_wait(1) (the dot
                of iteration i - 1 is done); each warp arrives on empty[(i - 1) % S];
                dot_wait(0); invalidate the barriers; [the ops after the loop]
    )

No warp waits for another except through the slots' barriers. The producer's region comes first
in program order, so the shared-memory allocator sees the pipeline buffers dead after the
consumer's loop and lets the epilogue reuse them (every copy has landed by then: the consumers
waited for all of them).

Which loops: a top-level loop of the kernel whose dot runs on wgmma and can stay in flight
(pipeline_loops.async_dot) with every candidate load a TMA plan, and nothing with effects before
it (the producer warp runs those ops too, with the layouts of the program's warps).
"""

from __future__ import annotations

from tc_ir.ops import (
    Block,
    DotWaitOp,
    ForOp,
    Function,
    LocalAllocOp,
    MBarrierArriveOp,
    MBarrierInitOp,
    MBarrierInvalOp,
    MBarrierWaitOp,
    WarpSpecializeOp,
    YieldOp,
)
from tc_ir.types import I1, I32, TileType

from .ir_utils import replace_uses
from .pipeline_loops import _buffer_type, _Emitter, async_dot, replace_loop
from .pipeline_tma import (
    BARRIER_LAYOUT,
    I64,
    issue_copies,
    next_slot_and_phase,
    start_coordinates,
    tile_coordinates,
)
from .tma import TmaPlan

#: Warps of the producer (one: its one elected thread issues every copy).
PRODUCER_WARPS = 1


def can_specialize(f: Function, loop: ForOp, plans: list[TmaPlan]) -> bool:
    """Whether `loop`, with TMA plans for all its candidate loads, qualifies."""
    if loop.parent is not f.body or async_dot(loop, [p.alloc for p in plans]) is None:
        return False
    before = f.body.ops[: f.body.ops.index(loop)]
    return not any(op.HAS_SIDE_EFFECTS or op.regions for op in before)


def warp_specialize_loop(f: Function, loop: ForOp, stages: int, plans: list[TmaPlan], num_warps: int) -> None:
    """Replace `loop` (and what follows it) by a tc.warp_specialize op as described above."""
    outer = f.body
    assert loop.parent is outer and stages >= 2
    body = loop.body
    term = body.terminator
    assert term is not None
    lb, ub, step = loop.operands[:3]
    ivt = body.args[0].type
    at = outer.ops.index(loop)
    pre = _Emitter(outer, at)
    bufs = [pre.add(LocalAllocOp.create([], [_buffer_type(p.alloc.result.type, stages)], loc=p.alloc.loc)).result  # type: ignore[arg-type]
            for p in plans]
    bars_type = TileType((stages,), I64, BARRIER_LAYOUT)
    full = pre.add(LocalAllocOp.create([], [bars_type], loc=loop.loc)).result
    empty = pre.add(LocalAllocOp.create([], [bars_type], loc=loop.loc)).result
    pre.add(MBarrierInitOp.create([full], [], {"count": 1}, loc=loop.loc))
    pre.add(MBarrierInitOp.create([empty], [], {"count": num_warps}, loc=loop.loc))
    starts, outers = start_coordinates(pre, f, plans)

    # producer: one loop over the iterations issuing every copy
    pbody = Block([ivt, I32, I32, I32], [None, "slot", "phase", "iter"])
    _, slot, phase, it = pbody.args
    pe = _Emitter(pbody, 0)
    free = pe.binary("xor", phase, pe.const(I32, 1))
    pe.add(MBarrierWaitOp.create([empty, slot, free], [], loc=loop.loc))
    issue_copies(pe, plans, bufs, full, slot, pe.const(I1, 1), tile_coordinates(pe, plans, starts, outers, it))
    next_slot, next_phase = next_slot_and_phase(pe, slot, phase, stages)
    pe.add(YieldOp.create([next_slot, next_phase, pe.binary("add", it, pe.const(I32, 1))], []))
    producer = Block()
    prod = _Emitter(producer, 0)
    zero = prod.const(I32, 0)
    prod.add(ForOp.create([lb, ub, step, zero, zero, zero], [I32, I32, I32], {}, [pbody], loop.loc))
    prod.add(YieldOp.create([], []))

    # consumer: the loop and everything after it but the return
    consumer = Block()
    ws = pre.add(WarpSpecializeOp.create([], [], {"producer_warps": PRODUCER_WARPS}, [producer, consumer], loop.loc))
    rest = outer.ops[outer.ops.index(ws) + 1:]
    ret = rest.pop() if rest and rest[-1] is outer.terminator else None
    for op in rest:
        outer.remove(op)
        consumer.append(op)
    consumer.append(YieldOp.create([], []))
    assert ret is None or ret is outer.terminator

    read = body.add_arg(I32, "read_slot")
    phase = body.add_arg(I32, "phase")
    release = body.add_arg(I32, "release_slot")
    top = _Emitter(body, 0)
    top.add(MBarrierWaitOp.create([full, read, phase], [], loc=loop.loc))
    for p, buf in zip(plans, bufs):
        view = top.subview(buf, read, p.alloc.result.type)
        replace_uses(body, p.alloc.result, view)
        body.remove(p.alloc)
        body.remove(p.load)
    dot = async_dot(loop)
    assert dot is not None
    dot.asynchronous = True
    after_dot = _Emitter(body, body.ops.index(dot) + 1)
    done = after_dot.add(DotWaitOp.create([dot.result], [dot.result.type], {"pending": 1}, loc=dot.loc)).result
    term.operands = [done if v is dot.result else v for v in term.operands]
    not_first = after_dot.cmp("sgt", body.args[0], lb)  # the dot of iteration i - 1 read slot `release`
    after_dot.add(MBarrierArriveOp.create([empty, release, not_first], [], loc=loop.loc))
    tail = _Emitter(body, body.ops.index(term))
    next_read, next_phase = next_slot_and_phase(tail, read, phase, stages)
    term.operands = [*term.operands, next_read, next_phase, read]
    cpre = _Emitter(consumer, consumer.ops.index(loop))
    inits = [*loop.operands, cpre.const(I32, 0), cpre.const(I32, 0), cpre.const(I32, stages - 1)]
    replace_loop(f, loop, cpre, inits, MBarrierInvalOp.create([full], [], loc=loop.loc), dot)
    inval = next(op for op in consumer.ops if isinstance(op, MBarrierInvalOp))
    consumer.insert(consumer.ops.index(inval) + 1, MBarrierInvalOp.create([empty], [], loc=loop.loc))


__all__ = ["PRODUCER_WARPS", "can_specialize", "warp_specialize_loop"]
