"""Software pipelining: loads in a `tc.for` that feed shared-memory dot operands become cp.async
copies into `num_stages` shared buffers, issued `num_stages - 1` iterations ahead.

For each such load L (its one user a `local_alloc(L)` in the same body):
- stage 0 is the backward slice of L's pointer and mask inside the body, closed over the loop-carried
  values it reads (their yields join the slice). It may not contain loads, side effects or regions.
- before the loop, stage 0 runs for iterations 0 .. S-2 (cloned), each copying into buffer slot s,
  one commit group per iteration;
- in the loop body: `async_wait(S-2)`, a barrier, the reads of slot i % S (the local_alloc becomes a
  subview), then stage 0 of iteration i + S - 1 (cloned, on extra loop-carried "ahead" values)
  copying into slot (i + S - 1) % S, and a commit;
- after the loop `async_wait(0)` (the copies of iterations past the end are masked, but still write).
The copies of iterations that do not exist are masked off (cp.async with src-size 0 reads nothing).
The barrier both publishes every thread's copies of slot i and proves that all threads finished
reading slot (i - 1) % S, which this iteration overwrites.

When the body's dot runs on wgmma (accumulating into a loop-carried value) and the loop has four
stages or several warpgroups, the dot becomes asynchronous: the body issues it, waits with
`dot_wait(1)` until only it is in flight (so the dot of iteration i - 1, which read slot
(i - 1) % S, is complete), and only then issues the copies into that slot; with several warpgroups a barrier after the wait makes that true for all of them.
The tensor cores thus keep working through the copies and the next iteration's barrier. After the
loop, `dot_wait(0)` completes the accumulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tc_ir.layouts import Blocked, Shared
from tc_ir.ops import (
    AsyncCommitGroupOp,
    AsyncCopyOp,
    AsyncWaitOp,
    BarrierOp,
    BinaryOp,
    Block,
    BlockArgument,
    CmpOp,
    ConstantOp,
    DotOp,
    DotWaitOp,
    ForOp,
    Function,
    LoadOp,
    LocalAllocOp,
    LocalLoadOp,
    LocalSubviewOp,
    LocalTransOp,
    Module,
    Operation,
    OpResult,
    SelectOp,
    SplatOp,
    Value,
)
from tc_ir.types import I1, I32, IRType, PointerType, ScalarType, TileType

from .axis_info import AxisAnalysis
from .dot_layouts import is_wgmma_dot
from .ir_utils import constant_of, replace_uses, uses
from .pass_manager import Pass

if TYPE_CHECKING:
    from .stream_k import StreamK


def copy_bytes(load: LoadOp, shared: Shared, axes: AxisAnalysis) -> int:
    """Bytes one cp.async of this load can move (4, 8 or 16), 0 when it cannot use cp.async."""
    ptr = load.operands[0]
    t = ptr.type
    if not isinstance(t, TileType) or not isinstance(t.layout, Blocked):
        return 0
    pe = t.element
    if not isinstance(pe, PointerType) or not isinstance(pe.pointee, ScalarType):
        return 0
    eb = pe.pointee.bytes
    fast = t.layout.order[0]
    if shared.order[0] != fast:  # a transposing copy (tf32 wgmma operands): element by element
        return eb if eb >= 4 else 0
    info = axes.info(ptr)
    vec = min(t.layout.size_per_thread[fast], info.contiguity[fast], max(1, info.divisibility[fast] // eb), 16 // eb)
    if shared.vec > 1:
        vec = min(vec, shared.vec)
    if len(load.operands) > 1:
        vec = min(vec, axes.info(load.operands[1]).constancy[fast])
    p = 1
    while p * 2 <= vec:
        p *= 2
    nbytes = p * eb
    return nbytes if nbytes >= 4 else 0


def _zero_other(load: LoadOp) -> bool:
    if len(load.operands) < 3:
        return True
    c = constant_of(load.operands[2])
    return c is not None and not c


def candidates(loop: ForOp, axes: AxisAnalysis | None) -> list[tuple[LoadOp, LocalAllocOp]]:
    """Loads of the body whose one user is a shared buffer, masked-off elements zero, that
    cp.async can copy (`axes` None: whatever the vector width, as for TMA)."""
    body = loop.body
    users = uses(body)
    out: list[tuple[LoadOp, LocalAllocOp]] = []
    for op in body.ops:
        if not isinstance(op, LoadOp) or not isinstance(op.result.type, TileType) or op.volatile:
            continue
        us = users.get(op.result, [])
        if len(us) != 1 or not isinstance(us[0], LocalAllocOp) or us[0].parent is not body:
            continue
        at = us[0].result.type
        assert isinstance(at, TileType)
        if not isinstance(at.layout, Shared) or not _zero_other(op):
            continue
        if axes is not None and copy_bytes(op, at.layout, axes) == 0:
            continue
        out.append((op, us[0]))
    return out


def stage0(loop: ForOp, loads: Sequence[LoadOp]) -> tuple[list[Operation], list[int]] | None:
    """The ops computing the loads' pointers and masks (body order) and the indices of the block
    arguments they carry from iteration to iteration; None when the slice cannot run ahead."""
    body = loop.body
    term = body.terminator
    assert term is not None
    defs: dict[Value, Operation] = {r: op for op in body.ops for r in op.results}
    in_slice: set[Operation] = set()
    carried: set[int] = set()
    todo: list[Value] = [v for ld in loads for v in ld.operands[:2]]
    while todo:
        v = todo.pop()
        if isinstance(v, BlockArgument) and v.block is body:
            if v.index > 0 and v.index not in carried:
                carried.add(v.index)
                todo.append(term.operands[v.index - 1])
            continue
        op = defs.get(v)
        if op is None or op in in_slice:
            continue
        if op.HAS_SIDE_EFFECTS or op.regions or isinstance(op, LoadOp) or op in loads:
            return None
        in_slice.add(op)
        todo.extend(op.operands)
    return [op for op in body.ops if op in in_slice], sorted(carried)


class _Emitter:
    """Creates ops at a fixed place in a block."""

    def __init__(self, block: Block, index: int) -> None:
        self.block = block
        self.index = index

    def add(self, op: Operation) -> Operation:
        self.block.insert(self.index, op)
        self.index += 1
        return op

    def const(self, t: IRType, value: int) -> Value:
        return self.add(ConstantOp.create([], [t], {"value": value})).result

    def binary(self, kind: str, a: Value, b: Value) -> Value:
        return self.add(BinaryOp.create([a, b], [a.type], {"kind": kind})).result

    def cmp(self, pred: str, a: Value, b: Value) -> Value:
        return self.add(CmpOp.create([a, b], [I1], {"predicate": pred})).result

    def select(self, c: Value, a: Value, b: Value) -> Value:
        return self.add(SelectOp.create([c, a, b], [a.type])).result

    def clone(self, ops: Sequence[Operation], mapping: dict[Value, Value]) -> None:
        for op in ops:
            new = type(op).create(
                [mapping.get(v, v) for v in op.operands], [r.type for r in op.results], op.attributes(), loc=op.loc
            )
            self.add(new)
            for r, nr in zip(op.results, new.results):
                nr.name_hint = r.name_hint
                mapping[r] = nr

    def copy(self, load: LoadOp, mapping: dict[Value, Value], valid: Value, view: Value) -> None:
        ptr = mapping.get(load.operands[0], load.operands[0])
        pt = ptr.type
        assert isinstance(pt, TileType)
        mt = TileType(pt.shape, I1, pt.layout)
        mask: Value = self.add(SplatOp.create([valid], [mt])).result
        if len(load.operands) > 1:
            mask = self.binary("and", mapping.get(load.operands[1], load.operands[1]), mask)
        self.add(AsyncCopyOp.create([ptr, view, mask], [], loc=load.loc))

    def subview(self, buf: Value, index: Value, t: IRType) -> Value:
        return self.add(LocalSubviewOp.create([buf, index], [t])).result

    def next_slot(self, slot: Value, stages: int) -> Value:
        one = self.const(I32, 1)
        n = self.binary("add", slot, one)
        wrap = self.cmp("eq", n, self.const(I32, stages))
        return self.select(wrap, self.const(I32, 0), n)


def _buffer_type(t: TileType, stages: int) -> TileType:
    lay = t.layout
    assert isinstance(lay, Shared)
    order = tuple(d + 1 for d in lay.order) + (0,)
    return TileType((stages, *t.shape), t.element, Shared(lay.vec, lay.per_phase, lay.max_phase, order))


def async_dot(loop: ForOp, slots: Sequence[LocalAllocOp] = ()) -> DotOp | None:
    """The body's one wgmma dot when it can stay in flight across iterations: its accumulator is a
    loop-carried value and its result is read only by the yield that carries it back. `slots`:
    the buffers of the body that a pipeliner is about to turn into views of its slots."""
    body = loop.body
    term = body.terminator
    assert term is not None
    dots = [op for op in body.ops if isinstance(op, DotOp)]
    if len(dots) != 1 or not is_wgmma_dot(dots[0]):
        return None
    dot = dots[0]
    acc = dot.operands[2]
    if not isinstance(acc, BlockArgument) or acc.block is not body or acc.index == 0:
        return None
    users = uses(body)
    if users.get(dot.result, []) != [term] or term.operands.count(dot.result) != 1:
        return None
    if term.operands.index(dot.result) != acc.index - 1:  # not carried back into the accumulator
        return None
    if len(users.get(acc, [])) != 1:  # the accumulator's registers are in flight meanwhile
        return None
    if any(_stored_in(body, v, slots) for v in dot.operands[:2]):  # the next iteration would overwrite it
        return None
    return dot


def _stored_in(body: Block, v: Value, slots: Sequence[LocalAllocOp] = ()) -> bool:
    """Whether the shared tile a dot operand reads (through local_load / local_trans views) is a
    buffer that `body` itself stores into each iteration (a local_alloc of a register tile), not a
    pipeline slot: an in-flight dot would still read it while the next iteration writes it."""
    while isinstance(v, OpResult) and isinstance(v.op, (LocalLoadOp, LocalTransOp)):
        v = v.op.operands[0]
    return (isinstance(v, OpResult) and isinstance(v.op, LocalAllocOp) and bool(v.op.operands)
            and v.op.parent is body and v.op not in slots)


def dot_in_flight(loop: ForOp, top: _Emitter, stages: int, num_warps: int
                  ) -> tuple[DotOp | None, _Emitter]:
    """(the dot kept in flight, the emitter where the next copies go): with four stages or
    several warpgroups the loop's dot is issued asynchronously and the copies into the slot the
    previous dot read go after the wait that leaves this dot alone in flight (and a barrier with
    several warpgroups: the other one's previous dot read that slot too); otherwise (None, top).

    One warpgroup with three stages keeps two programs per SM, which already overlap each other's
    dots with their copies: issuing the copies after the dot only delays them there (measured on
    an H100: 590 -> 500 TFLOPS at 8192^3)."""
    dot = async_dot(loop) if stages >= 4 or num_warps > 4 else None
    if dot is None:
        return None, top
    body = loop.body
    term = body.terminator
    assert term is not None
    dot.asynchronous = True
    issue = _Emitter(body, body.ops.index(dot) + 1)
    done = issue.add(DotWaitOp.create([dot.result], [dot.result.type], {"pending": 1}, loc=dot.loc)).result
    term.operands = [done if v is dot.result else v for v in term.operands]
    if num_warps > 4:
        issue.add(BarrierOp.create([], []))
    return dot, issue


def replace_loop(f: Function, loop: ForOp, pre: _Emitter, inits: list[Value], after: Operation | None,
                 dot: DotOp | None) -> ForOp:
    """Replace `loop` by a for op over its (extended) body with `inits` (returned), followed by
    `after` (the drain of the copies) and, for a dot kept in flight, the wait for its last batch
    before anything reads the accumulator."""
    parent = loop.parent
    assert parent is not None
    body = loop.body
    body.parent = None
    new = ForOp.create(inits, [a.type for a in body.args[1:]], loop.attributes(), [body], loop.loc)
    pre.add(new)
    for old_r, new_r in zip(loop.results, new.results):
        new_r.name_hint = old_r.name_hint
        replace_uses(f.body, old_r, new_r)
    parent.remove(loop)
    at = parent.ops.index(new) + 1
    if after is not None:
        parent.insert(at, after)
        at += 1
    if dot is not None:
        carried_acc = dot.operands[2]
        assert isinstance(carried_acc, BlockArgument)
        acc = new.results[carried_acc.index - 1]
        wait = DotWaitOp.create([acc], [acc.type], {"pending": 0}, loc=dot.loc)
        parent.insert(at, wait)
        replace_uses(f.body, acc, wait.result)
        wait.operands = [acc]
    return new


def pipeline_loop(f: Function, loop: ForOp, stages: int, axes: AxisAnalysis, num_warps: int = 4) -> bool:
    """Pipeline `loop` in place (replaced by a new for op); False when it has nothing to pipeline."""
    pairs = candidates(loop, axes)
    if not pairs:
        return False
    sliced = stage0(loop, [ld for ld, _ in pairs])
    if sliced is None:
        return False
    ops, carried = sliced
    parent = loop.parent
    assert parent is not None
    body = loop.body
    term = body.terminator
    assert term is not None
    args = body.args
    lb, ub, step = loop.operands[:3]
    ivt = args[0].type
    dist = stages - 1
    pre = _Emitter(parent, parent.ops.index(loop))
    bufs = []
    for _, alloc in pairs:
        at = alloc.result.type
        assert isinstance(at, TileType)
        bufs.append(pre.add(LocalAllocOp.create([], [_buffer_type(at, stages)], loc=alloc.loc)).result)
    # prologue: iterations 0 .. stages-2
    env: dict[int, Value] = {j: loop.operands[3 + j - 1] for j in carried}
    for s in range(dist):
        iv: Value = lb if s == 0 else pre.binary("add", lb, pre.binary("mul", step, pre.const(ivt, s)))
        mapping: dict[Value, Value] = {args[0]: iv, **{args[j]: env[j] for j in carried}}
        pre.clone(ops, mapping)
        valid = pre.cmp("slt", iv, ub)
        slot = pre.const(I32, s)
        for (ld, alloc), buf in zip(pairs, bufs):
            pre.copy(ld, mapping, valid, pre.subview(buf, slot, alloc.result.type))
        pre.add(AsyncCommitGroupOp.create([], []))
        env = {j: mapping.get(term.operands[j - 1], term.operands[j - 1]) for j in carried}
    # the loop: extra carried values (stage 0 inputs of iteration i + dist, and the two slots)
    ahead = {j: body.add_arg(args[j].type, f"{args[j].name_hint or 'v'}_ahead") for j in carried}
    read = body.add_arg(I32, "read_slot")
    write = body.add_arg(I32, "write_slot")
    top = _Emitter(body, 0)
    top.add(AsyncWaitOp.create([], [], {"pending": stages - 2}))
    top.add(BarrierOp.create([], []))
    for (ld, alloc), buf in zip(pairs, bufs):
        view = top.subview(buf, read, alloc.result.type)
        replace_uses(body, alloc.result, view)
        body.remove(alloc)
        body.remove(ld)
    dot, issue = dot_in_flight(loop, top, stages, num_warps)
    iv = issue.binary("add", args[0], issue.binary("mul", step, issue.const(ivt, dist)))
    mapping = {args[0]: iv, **{args[j]: ahead[j] for j in carried}}
    issue.clone(ops, mapping)
    valid = issue.cmp("slt", iv, ub)
    for (ld, alloc), buf in zip(pairs, bufs):
        issue.copy(ld, mapping, valid, issue.subview(buf, write, alloc.result.type))
    issue.add(AsyncCommitGroupOp.create([], []))
    tail = _Emitter(body, body.ops.index(term))
    nxt = [mapping.get(term.operands[j - 1], term.operands[j - 1]) for j in carried]
    term.operands = [*term.operands, *nxt, tail.next_slot(read, stages), tail.next_slot(write, stages)]
    inits = [*loop.operands, *(env[j] for j in carried), pre.const(I32, 0), pre.const(I32, dist % stages)]
    replace_loop(f, loop, pre, inits, AsyncWaitOp.create([], [], {"pending": 0}), dot)
    return True


class PipelineLoops(Pass):
    """cp.async multi-buffering of the dot-operand loads of loops (num_stages >= 2)."""

    name = "pipeline-loops"
    #: the stream-K plan of the function being pipelined (tc_opt.stream_k), if any
    _stream_k: StreamK | None = None

    def run(self, module: Module) -> None:
        stages = self.options.num_stages
        if stages < 2:
            return
        for f in module.functions:
            loops = [op for op in f.walk() if isinstance(op, ForOp)]
            if not loops:
                continue
            axes = AxisAnalysis(f)
            plain_tma = False
            self._stream_k = None
            for loop in loops:
                done = self._pipeline_tma(module, f, loop) if self.options.tma else None
                if done is None:
                    pipeline_loop(f, loop, stages, axes, self.options.num_warps)
                plain_tma = plain_tma or done == "plain"
            if plain_tma and self.options.persistent and "persistent" not in module.attributes:
                self._persist(module, f)

    def _pipeline_tma(self, module: Module, f: Function, loop: ForOp) -> str | None:
        """TMA copies on mbarriers instead of cp.async (tc_opt.pipeline_tma) when every
        candidate load of the loop qualifies (tc_opt.tma), with a producer warp of their own
        where tc_opt.warp_specialize applies (recorded as the module's `producer_warps`: the
        launch has that many warps more): "specialized" or "plain"; None leaves the loop to
        cp.async."""
        from .pipeline_tma import pipeline_loop_tma
        from .tma import plans_for
        from .warp_specialize import can_cluster, can_persist, can_specialize, warp_specialize_loop

        if self.options.sm < 90:
            return None
        pairs = candidates(loop, None)
        plans = plans_for(f, loop, pairs) if pairs else None
        if plans is None:
            return None
        o = self.options
        handoff = o.producer_warpgroup
        if o.stream_k and o.persistent:
            # (stream-K shares programs through the plain pipeline's loop: no producer warp)
            from .stream_k import plan

            sk = plan(f, loop)
            if sk is not None:
                self._stream_k = sk
                pipeline_loop_tma(f, loop, o.num_stages, plans, o.num_warps, (sk.k0, sk.k1))
                return "plain"
        if o.warp_specialize and "producer_warps" not in module.attributes \
                and can_specialize(f, loop, plans, o.num_warps, handoff):
            persistent = o.persistent and can_persist(f, loop, plans)
            clustered = persistent and o.cluster_multicast and can_cluster(f, loop, plans)
            cluster = (4 if o.cluster_2x2 else 2) if clustered else 0
            ws = warp_specialize_loop(f, loop, o.num_stages, plans, o.num_warps, persistent, handoff, cluster)
            module.attributes["producer_warps"] = ws.producer_warps
            if persistent:
                module.attributes["persistent"] = True
            if cluster:
                module.attributes["cluster"] = cluster
            return "specialized"
        pipeline_loop_tma(f, loop, o.num_stages, plans, o.num_warps)
        return "plain"

    def _persist(self, module: Module, f: Function) -> None:
        """A persistent grid without a producer warp (tc_opt.persistent) for a kernel whose TMA
        pipelines are plain ones; by stream-K (tc_opt.stream_k) where that was planned."""
        from .persistent import has_early_return, persist_function
        from .stream_k import build

        if "producer_warps" in module.attributes or has_early_return(f):
            return
        if self._stream_k is not None:
            build(f, self._stream_k)
            module.attributes["stream_k"] = self._stream_k.partial_bytes
        else:
            persist_function(f)
        module.attributes["persistent"] = True
