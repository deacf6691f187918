"""A persistent warp-specialized kernel's epilogue overlapped with the next program's first dot
(CompileOptions.overlap_epilogue).

In the consumers' loop over the programs (tc_opt.warp_specialize), the tensor cores idle from
the last wgmma of a program until the first one of the next: the final wait, the conversion of
the accumulator, its stores to shared memory, the fence and barriers and the bulk copies (3-3.6%
of a 4096^3 fp16 matmul's cycles on an H100, 2026-11-26). Here the first iteration of the dot
loop is peeled off and issued, for the next program, right after the accumulator's last reader
(the conversion) and before the rest of the epilogue, so the stores overlap that wgmma:

    if the loop runs at all (else the loop over the programs as it was):
      [first iteration of program cta, if there is one]
      for t in programs (..., acc, release):
        [the prefix of program t]
        for i in lb + step .. ub: [the loop, starting from the carried acc and slots]
        wait(0); release the last slot
        [the epilogue up to the accumulator's last reader: the conversion]
        [first iteration of program t + ctas, if there is one] -> acc, release
        [the rest of the epilogue: the stores, while that dot runs]

The peeled iteration is the loop's own body with iv = lb: it waits for the slot, issues the
dot (told not to read its accumulator: its `use_acc` is iv != lb) and leaves it in flight; the
loop's arrive for the slot the previous iteration read is off there (iv > lb), and the next
program's loop releases the peeled slot in its first iteration (iv = lb + step > lb).

Both the converted tile and the next accumulator are live over the stores, so the consumers
need more registers than a producer warp leaves them: the kernel's producer becomes a warpgroup
that hands its registers to the consumers (WarpSpecializeOp.producer_registers, setmaxnreg:
40 and 232 a thread beside 8 consumer warps).

Only with four stages or more: the producer is then two slots ahead of the consumers, so the
next program's first two k-steps are loaded by the time its first dot is issued. Measured on an
H100 (ncu cycles, tutorial 128x256x64 fp16 at 4096^3, 2026-11-26): 4 stages 288.2 k -> 285.6 k
(cuBLAS 284.4 k), 3 stages 288.9 k -> 291.4 k; peeling two iterations was slower than one
(288.8 k: the epilogue's stores and the dots share shared memory's bandwidth).

Applies where the loop's bounds and whatever its body reads from the program's prefix do not
depend on the program (so they can be computed once, before the loop over the programs; in
clusters the arrive's `paired` flags do, and the peeled iteration, which does not arrive, takes
false for them: before the thirty-eighth session every clustered kernel kept its epilogue), the
loop carries nothing but the accumulator and the slots (dead carried values are dropped first),
and the accumulator's readers after the wait have no side effects (something is left to overlap).
"""

from __future__ import annotations

from tc_ir.ops import (
    Block,
    BlockArgument,
    CmpOp,
    ConstantOp,
    DotOp,
    DotWaitOp,
    ForOp,
    IfOp,
    MBarrierArriveOp,
    Module,
    OpResult,
    Operation,
    UndefOp,
    Value,
    WarpSpecializeOp,
    YieldOp,
)
from tc_ir.types import I1

from .accumulator_init import is_positive_zero
from .ir_utils import clone_op, replace_uses, uses
from .pass_manager import Pass
from .pipeline_loops import _Emitter
from .warp_specialize import PRODUCER_REGISTERS, PRODUCER_WARPGROUP, register_split


def _defined_in(block: Block, v: Value) -> bool:
    """Whether `v` is an argument of `block` or the result of an op directly in it."""
    if isinstance(v, BlockArgument):
        return v.block is block
    return isinstance(v, OpResult) and v.op.parent is block


def drop_dead_carried(loop: ForOp) -> ForOp:
    """`loop` without the carried values nobody reads: a result without uses whose block argument
    feeds only ops (without side effects) that feed nothing but their own carried slot (a pointer
    tile a TMA pipeline no longer loads through). Returns the loop (a new op when any went)."""
    parent = loop.parent
    assert parent is not None
    body = loop.body
    term = body.terminator
    assert term is not None
    outer_uses = uses(parent)
    body_uses = uses(body)
    dead: list[int] = []
    chains: set[Operation] = set()
    for i, arg in enumerate(body.args[1:]):
        if outer_uses.get(loop.results[i]):
            continue
        chain: set[Operation] = set()
        todo: list[Value] = [arg]
        ok = True
        while todo and ok:
            for user in body_uses.get(todo.pop(), []):
                if user is term:
                    if any(term.operands[j] in (arg, *(r for op in chain for r in op.results))
                           for j in range(len(term.operands)) if j != i):
                        ok = False
                    continue
                if user.HAS_SIDE_EFFECTS or user.regions or user.parent is not body:
                    ok = False
                    break
                if user not in chain:
                    chain.add(user)
                    todo.extend(user.results)
        if ok:
            dead.append(i)
            chains |= chain
    if not dead:
        return loop
    for op in [op for op in body.ops if op in chains]:
        body.remove(op)
    keep = [i for i in range(len(body.args) - 1) if i not in dead]
    new_body = Block([body.args[0].type] + [body.args[1 + i].type for i in keep],
                     [body.args[0].name_hint] + [body.args[1 + i].name_hint for i in keep])
    mapping: dict[Value, Value] = {body.args[0]: new_body.args[0]}
    mapping.update({body.args[1 + i]: new_body.args[1 + n] for n, i in enumerate(keep)})
    for op in list(body.ops):
        body.remove(op)
        new_body.append(op)
    for old, new_arg in mapping.items():
        replace_uses(new_body, old, new_arg)
    term.operands = [term.operands[i] for i in keep]
    new = ForOp.create([*loop.operands[:3], *(loop.inits[i] for i in keep)],
                       [loop.results[i].type for i in keep], loop.attributes(), [new_body], loop.loc)
    parent.insert(parent.ops.index(loop), new)
    for n, i in enumerate(keep):
        new.results[n].name_hint = loop.results[i].name_hint
        replace_uses(parent, loop.results[i], new.results[n])
    parent.remove(loop)
    return new


def _invariant_slice(tile_body: Block, needed: list[Value]) -> list[Operation] | None:
    """The ops of `tile_body` (in order) that compute `needed` from values defined outside it;
    None when one of them reads the program (the body's arguments) or has effects or regions."""
    keep: set[Operation] = set()
    todo = list(needed)
    while todo:
        v = todo.pop()
        if not _defined_in(tile_body, v):
            continue
        if isinstance(v, BlockArgument):
            return None
        op = v.op  # type: ignore[attr-defined]
        if op in keep:
            continue
        if op.HAS_SIDE_EFFECTS or op.regions:
            return None
        keep.add(op)
        todo.extend(op.operands)
    return [op for op in tile_body.ops if op in keep]


def _compares(v: Value, predicate: str, a: Value, b: Value) -> bool:
    """Whether `v` is `a <predicate> b` (tc.cmp)."""
    return (isinstance(v, OpResult) and isinstance(v.op, CmpOp) and v.op.predicate == predicate
            and v.op.operands[0] is a and v.op.operands[1] is b)


class _Plan:
    """What the rewrite needs of one consumer loop over the programs."""

    def __init__(self, tile: ForOp, loop: ForOp, wait: DotWaitOp, acc: int, slots: tuple[int, int, int],
                 hoisted: list[Operation], readers: list[Operation]) -> None:
        self.tile, self.loop, self.wait = tile, loop, wait
        self.zeros = loop.inits[acc]  # the accumulator's start (a constant)
        self.acc = acc  # the accumulator's index among the loop's carried values
        self.slots = slots  # (read slot, phase, release slot) indices among them
        self.hoisted = hoisted  # the prefix ops computing the bounds and what the body reads
        self.readers = readers  # the accumulator's readers after the wait (the peel follows them)


def plan_overlap(tile: ForOp) -> _Plan | None:
    """The plan for consumer loop `tile` (a loop over the programs carrying the read slot and its
    phase), or None where the rewrite does not apply (see the module's doc)."""
    tb = tile.body
    if len(tile.inits) != 2:
        return None
    loops = [op for op in tb.ops if isinstance(op, ForOp)]
    if len(loops) != 1 or any(isinstance(op, IfOp) for op in tb.ops):
        return None
    loop = drop_dead_carried(loops[0])
    body = loop.body
    term = body.terminator
    dots = [op for op in body.ops if isinstance(op, DotOp)]
    if term is None or len(dots) != 1 or not dots[0].asynchronous or len(dots[0].operands) != 4:
        return None
    if any(op.regions for op in body.ops) or sum(isinstance(op, MBarrierArriveOp) for op in body.ops) != 1:
        return None
    if sum(isinstance(op, DotWaitOp) for op in body.ops) != 1:
        return None
    dot = dots[0]
    acc_arg = dot.operands[2]
    if not isinstance(acc_arg, BlockArgument) or acc_arg.block is not body:
        return None
    acc = acc_arg.index - 1
    carried = len(loop.inits)
    # warp_specialize appends the read slot, its phase and the slot to release, in that order
    slots = (carried - 3, carried - 2, carried - 1)
    if carried != 4 or acc in slots:
        return None
    if loop.inits[slots[0]] is not tb.args[1] or loop.inits[slots[1]] is not tb.args[2]:
        return None
    acc_init = loop.inits[acc]
    if not (isinstance(acc_init, OpResult) and isinstance(acc_init.op, ConstantOp)
            and is_positive_zero(acc_init.op.value)):
        return None
    # the peeled iteration relies on these two flags being false at iv = lb and true after it
    arrive = next(op for op in body.ops if isinstance(op, MBarrierArriveOp))
    lb = loop.operands[0]
    if not (_compares(dot.operands[3], "ne", body.args[0], lb) and _compares(arrive.operands[2], "sgt", body.args[0], lb)):
        return None
    tb_uses = uses(tb)
    readers = tb_uses.get(loop.results[acc], [])
    if len(readers) != 1 or not isinstance(readers[0], DotWaitOp) or len(readers[0].operands) != 1:
        return None
    wait = readers[0]
    region = tile.parent
    if region is None or any(uses(region).get(r) for r in tile.results):
        return None
    term_t = tb.terminator
    if term_t is None or list(term_t.operands) != [loop.results[slots[0]], loop.results[slots[1]]]:
        return None
    acc_readers = tb_uses.get(wait.result, [])
    if not acc_readers or any(r.HAS_SIDE_EFFECTS or r.regions or r.parent is not tb for r in acc_readers):
        return None
    at = max(tb.ops.index(r) for r in acc_readers) + 1
    if not any(op.HAS_SIDE_EFFECTS for op in tb.ops[at:-1]):
        return None  # nothing after the readers to overlap
    # the values the body reads from the prefix, and the bounds, computed once before the programs
    # (but a cluster's `paired` flags of the arrive: the peeled iteration does not arrive)
    free: list[Value] = []
    for op in body.walk():
        for v in op.operands[:3] if op is arrive else op.operands:
            if _defined_in(tb, v) and v not in free:
                free.append(v)
    needed = [*loop.operands[:3], acc_init, *free]
    hoisted = _invariant_slice(tb, needed)
    if hoisted is None:
        return None
    return _Plan(tile, loop, wait, acc, slots, hoisted, acc_readers)


def _peel(e: _Emitter, plan: _Plan, mapping: dict[Value, Value], go: Value, read: Value, phase: Value,
          release: Value) -> IfOp:
    """`if go: [the loop's first iteration from slot `read`, `phase`]` yielding the accumulator
    (in flight), the next read slot, its phase and the slot to release; else (no next program)
    an undefined accumulator and the slots unchanged."""
    loop = plan.loop
    body = loop.body
    acc_t = body.args[1 + plan.acc].type
    then, other = Block(), Block()
    te = _Emitter(then, 0)
    # (the dot does not read it: no instruction writes the registers before the tensor cores)
    undef = te.add(UndefOp.create([], [acc_t])).result
    local = dict(mapping)
    local[body.args[0]] = mapping.get(loop.operands[0], loop.operands[0])
    arrive = next(op for op in body.ops if isinstance(op, MBarrierArriveOp))
    if arrive.operands[3:]:  # (a cluster's partners: this iteration's arrive is off, iv = lb)
        off = te.const(I1, 0)
        local.update({v: off for v in arrive.operands[3:]})
    for i, arg in enumerate(body.args[1:]):
        local[arg] = undef if i == plan.acc else (read, phase, release)[plan.slots.index(i)]
    term = body.terminator
    assert term is not None
    te.clone([op for op in body.ops if op is not term], local)
    order = [plan.acc, *plan.slots]
    te.add(YieldOp.create([local.get(term.operands[i], term.operands[i]) for i in order], []))
    none = other.append(UndefOp.create([], [acc_t])).result
    other.append(YieldOp.create([none, read, phase, release], []))
    op = e.add(IfOp.create([go], [acc_t, *(read.type for _ in plan.slots)], {}, [then, other], loop.loc))
    assert isinstance(op, IfOp)
    return op


def overlap(plan: _Plan) -> IfOp:
    """Rewrite the plan's loop over the programs (see the module's doc): `if the dot loop runs:
    [the rewritten loop] else: [the loop as it was]`. A loop that runs no iteration gives the
    zeros it starts from, so the rewritten one needs none: no instruction writes the
    accumulator's registers on its path, and no zero is selected after its final wait (128
    selp or mov a thread on the path between two programs' dots). Returns the if."""
    tile, loop = plan.tile, plan.loop
    region = tile.parent
    assert region is not None
    tb = tile.body
    pre = _Emitter(region, region.ops.index(tile))
    mapping: dict[Value, Value] = {}
    pre.clone(plan.hoisted, mapping)
    lb, ub, step = (mapping.get(v, v) for v in loop.operands[:3])
    as_it_was = Block()
    as_it_was.append(clone_op(tile, {}))
    as_it_was.append(YieldOp.create([], []))
    rotated = Block()
    version = pre.add(IfOp.create([pre.cmp("slt", lb, ub)], [], {}, [rotated, as_it_was], tile.loc))
    assert isinstance(version, IfOp)
    region.remove(tile)
    ve = _Emitter(rotated, 0)
    first, count, ctas = tile.operands[:3]
    last = ve.const(loop.inits[plan.slots[2]].type, 0)
    peel0 = _peel(ve, plan, mapping, ve.cmp("slt", first, count), tile.inits[0], tile.inits[1], last)
    # the loop over the programs carries the peeled accumulator and its slot from here on
    acc_in = tb.add_arg(peel0.results[0].type, "next_acc")
    release_in = tb.add_arg(last.type, "next_release")
    new_tile = ForOp.create([*tile.operands[:3], peel0.results[1], peel0.results[2], peel0.results[0],
                             peel0.results[3]], [r.type for r in tb.args[1:]], tile.attributes(), [tb], tile.loc)
    tile.regions = []
    ve.add(new_tile)
    rotated.append(YieldOp.create([], []))
    # the next program's first iteration after the accumulator's last reader
    at = _Emitter(tb, max(tb.ops.index(r) for r in plan.readers) + 1)
    nxt = at.binary("add", tb.args[0], ctas)
    peel = _peel(at, plan, mapping, at.cmp("slt", nxt, count), *(loop.results[i] for i in plan.slots))
    term = tb.terminator
    assert term is not None
    term.operands = [peel.results[1], peel.results[2], peel.results[0], peel.results[3]]
    # the program's loop starts at its second iteration, from what was carried
    e = _Emitter(tb, tb.ops.index(loop))
    inits = list(loop.inits)
    inits[plan.acc] = acc_in
    inits[plan.slots[2]] = release_in
    loop.operands = [e.binary("add", lb, step), ub, step, *inits]
    return version


def overlap_consumer(ws: WarpSpecializeOp) -> bool:
    """Rewrite the loop over the programs of `ws`'s consumers if it qualifies; whether it did."""
    for tile in [op for op in ws.consumer.ops if isinstance(op, ForOp)]:
        plan = plan_overlap(tile)
        if plan is not None:
            overlap(plan)
            return True
    return False


#: Fewer stages leave the producer one slot ahead: overlapping was slower there (module doc).
MIN_STAGES = 4


class OverlapEpilogue(Pass):
    """The next program's first dot issued before this one's stores (see the module's doc)."""

    name = "overlap-epilogue"

    def run(self, module: Module) -> None:
        if not self.options.overlap_epilogue or self.options.num_stages < MIN_STAGES:
            return
        for f in module.functions:
            for ws in [op for op in f.walk() if isinstance(op, WarpSpecializeOp)]:
                if not overlap_consumer(ws):
                    continue
                ws.producer_warps = PRODUCER_WARPGROUP
                ws.producer_registers, ws.consumer_registers = register_split(self.options.num_warps)
                module.attributes["producer_warps"] = PRODUCER_WARPGROUP


__all__ = ["MIN_STAGES", "PRODUCER_REGISTERS", "PRODUCER_WARPGROUP", "OverlapEpilogue", "drop_dead_carried", "overlap",
           "overlap_consumer", "plan_overlap", "register_split"]
