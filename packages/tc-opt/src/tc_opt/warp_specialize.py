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

Persistent (CompileOptions.persistent): the runtime launches as many CTAs as fit on the GPU at
once and passes the grid the user asked for (tc.grid_dim, hidden parameters); both roles loop
over its programs t = cta, cta + ctas, ... (program ids decomposed from t, x fastest), their
slots and phases running on from one program to the next. The producer recomputes the scalars
its copies need (a slice of the ops before the loop), so it starts on the next program's tiles
while the consumers are still in the epilogue of this one; the slots stay reserved through the
epilogue (which then has shared memory of its own), and the consumers release the last slot of
a program after its final dot_wait. Needs: the ops before the loop pure, the producer's slice
scalar, and no return but the kernel's last op.

Clusters with multicast (CompileOptions.cluster_multicast, persistent only): the runtime
launches a multiple of the cluster's CTAs (2, or 4 with CompileOptions.cluster_2x2), CTAs
c .. c + n - 1 a cluster, so the CTA of rank r runs program t while the CTA of rank r ^ d runs
t ^ d. A CTA's partners are the ranks r ^ 1 (clusters of 2) or r ^ 1 and r ^ 2 (clusters of 4:
in a grouped order of groups of 2 rows, programs t ^ 1 and t ^ 2 are the tiles below and beside
t). Each producer computes its partners' tile coordinates; for an operand whose tile a partner
copies too (`_shared_partners`: B of two tiles of one column, A of two tiles of one row), each
of the two CTAs copies half of the tile, of its panels or else of its rows (multicast_plans),
into both CTAs' slot (`.multicast::cluster`), which halves that operand's traffic from L2. So
that a producer never writes into a partner's slot before its consumers are done with it, every
consumer warp arrives on the `empty` barriers of its own CTA and of each partner (count
(1 + partners) x num_warps; where only wgmma reads the slots, one warp of each warpgroup arrives
on each barrier instead: (1 + partners) x num_warps / 4). A program whose partner program is past
the grid's last (`paired` false, decided per program: the last CTAs of the grid may run one
program fewer) shares nothing with it, and the arrivals meant for that partner go to this CTA's
own barrier. (Deciding that for the whole grid left every odd grid unshared: 4104^3 has 33 x 17
tiles of 128x256.) The loop's bounds must not depend on the program (the CTAs of a cluster run
the same iterations). A cluster barrier follows the barriers' initialization (before any remote
arrive or copy) and precedes their invalidation (no remote arrive is still to come).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from tc_ir.ops import (
    Block,
    ClusterBarrierOp,
    DotWaitOp,
    ForOp,
    Function,
    LocalAllocOp,
    MBarrierArriveOp,
    MBarrierInitOp,
    MBarrierInvalOp,
    MBarrierWaitOp,
    NumProgramsOp,
    Operation,
    ProgramIdOp,
    Value,
    WarpSpecializeOp,
    YieldOp,
)
from tc_ir.types import I1, I32, IRType, TileType

from .k_major_operands import reads_a_from_registers
from .persistent import grid_of, has_early_return, move_into, program_ids, tile_loop, user_program_ids
from .pipeline_loops import _buffer_type, _Emitter, async_dot, replace_loop
from .pipeline_tma import (
    BARRIER_LAYOUT,
    I64,
    issue_copies,
    next_slot_and_phase,
    read_slot,
    start_coordinates,
    tile_coordinates,
)
from .tma import Lin, TmaPlan

#: Warps of the producer (one: its one elected thread issues every copy).
PRODUCER_WARPS = 1
#: An SM's register file is four partitions of 16 K 32-bit registers, one per warp scheduler,
#: and a program's warps are spread over them round robin.
REGISTER_PARTITIONS = 4
REGISTERS_PER_PARTITION = 16 * 1024
#: Registers a consumer thread holds besides its accumulator (addresses, descriptors, barrier
#: phases, loop state): 26 in the 128x256x64 fp16 kernel (154 in all).
CONSUMER_OVERHEAD = 32


def registers_per_thread(warps: int) -> int:
    """The most registers ptxas can give each thread of a program of `warps` warps: the fullest
    partition holds ceil(warps / 4) of them (168 at 9 warps, where 8 warps may take 255)."""
    per_partition = -(-warps // REGISTER_PARTITIONS)
    return min(255, REGISTERS_PER_PARTITION // (32 * per_partition) // 8 * 8)


#: Warps of the producer once it hands registers over: setmaxnreg works on whole warpgroups.
PRODUCER_WARPGROUP = 4
#: What the producer keeps a thread: its loop of waits and copies needs few (cuBLAS keeps 40).
PRODUCER_REGISTERS = 40


def register_split(num_warps: int) -> tuple[int, int]:
    """(producer, consumer) registers a thread once a producer warpgroup beside `num_warps`
    consumer warps gives what it does not need to them: the launch's registers a thread
    (registers_per_thread of all the warps) times its threads, less the producer's, over the
    consumers' threads, in setmaxnreg's steps of 8 and at most 240 (168 -> 232 for 8 warps)."""
    launch = registers_per_thread(num_warps + PRODUCER_WARPGROUP) * 32 * (num_warps + PRODUCER_WARPGROUP)
    consumers = (launch - PRODUCER_REGISTERS * 32 * PRODUCER_WARPGROUP) // (32 * num_warps) // 8 * 8
    return PRODUCER_REGISTERS, min(240, consumers)


def accumulator_registers(acc: TileType, num_warps: int) -> int:
    """32-bit registers per thread of the program's warps that a dot's accumulator takes."""
    elements = 1
    for d in acc.shape:
        elements *= d
    return -(-elements * max(acc.element.bits, 32) // (32 * 32 * num_warps))


def can_specialize(f: Function, loop: ForOp, plans: list[TmaPlan], num_warps: int,
                   handoff: bool = False) -> bool:
    """Whether `loop`, with TMA plans for all its candidate loads, qualifies; `handoff`: with a
    producer warpgroup that hands its registers to the consumers (register_split).

    Without the handoff, not a dot whose wgmma reads A into registers each K step
    (k_major_operands.reads_a_from_registers: a tf32 product computed transposed, B^T in
    registers, or a tf32 A staged M-contiguous): ptxas serializes the wgmma of that loop behind
    a producer warp (advisory C7512, "insufficient register resources", at 164-168 registers;
    A^T B^T with 128x256x32 tiles), and the serialized kernel ran 0.79-0.89x the plain one on an
    H100 (2026-11-25). With the handoff's 232 registers a consumer thread it is not serialized.

    Nor an accumulator that leaves too few registers under the producer's warps
    (registers_per_thread, or the consumers' share of the handoff): a 256x192 fp32 accumulator
    over 8 warps is 192 registers a thread of the 168 that 9 warps allow, and ptxas spilled and
    serialized the wgmma (advisory C7511; tf32 A B^T 11 TFLOPS instead of 325 without the
    producer, H100 2026-11-25)."""
    if loop.parent is not f.body:
        return False
    dot = async_dot(loop, [p.alloc for p in plans])
    if dot is None:
        return False
    if reads_a_from_registers(dot) and not handoff:
        return False
    acc = dot.result.type
    budget = register_split(num_warps)[1] if handoff else registers_per_thread(num_warps + PRODUCER_WARPS)
    if isinstance(acc, TileType) and accumulator_registers(acc, num_warps) + CONSUMER_OVERHEAD > budget:
        return False
    before = f.body.ops[: f.body.ops.index(loop)]
    return not any(op.HAS_SIDE_EFFECTS or op.regions for op in before)


def _producer_needs(loop: ForOp, plans: list[TmaPlan]) -> list[Value]:
    """The values the producer's loop reads: the loop's bounds and the variables of the copies'
    coordinates."""
    vals = list(loop.operands[:3])
    for p in plans:
        for lin in (*p.start, *(lin for lin, _ in p.outer)):
            vals.extend(k for k in lin if k is not None)
    return vals


def _upstream(prefix: Sequence[Operation], values: Sequence[Value]) -> list[Operation]:
    """The ops of `prefix` (in order) that `values` are computed from."""
    defs: dict[Value, Operation] = {r: op for op in prefix for r in op.results}
    seen: set[Operation] = set()
    todo = list(values)
    while todo:
        op = defs.get(todo.pop())
        if op is not None and op not in seen:
            seen.add(op)
            todo.extend(op.operands)
    return [op for op in prefix if op in seen]


def _producer_slice(prefix: Sequence[Operation], needed: list[Value]) -> list[Operation] | None:
    """The ops of `prefix` (in order) computing `needed`, program ids excluded (the caller maps
    them); None when one of them is a tile op (the producer warp has no layout of its own)."""
    ops = [op for op in _upstream(prefix, needed) if not isinstance(op, (ProgramIdOp, NumProgramsOp))]
    if any(isinstance(r.type, TileType) for op in ops for r in op.results):
        return None
    return ops


def can_persist(f: Function, loop: ForOp, plans: list[TmaPlan]) -> bool:
    """Whether the specialized kernel can also loop over its programs (see the module's doc)."""
    body = f.body
    if has_early_return(f):
        return False
    return _producer_slice(body.ops[: body.ops.index(loop)], _producer_needs(loop, plans)) is not None


def can_cluster(f: Function, loop: ForOp, plans: list[TmaPlan]) -> bool:
    """Whether the persistent specialized kernel can run in clusters with multicast (see the
    module's doc): the loop's bounds are the same for every program and some operand's tile can
    be copied in halves."""
    prefix = f.body.ops[: f.body.ops.index(loop)]
    reads_ids = any(isinstance(op, (ProgramIdOp, NumProgramsOp)) for op in _upstream(prefix, loop.operands[:3]))
    return not reads_ids and any(p.can_halve for p in plans)


def _mapped(lin: Lin, mapping: dict[Value, Value]) -> Lin:
    return {(mapping.get(k, k) if k is not None else None): c for k, c in lin.items()}


def _copy_loop(e: _Emitter, plans: list[TmaPlan], bufs: Sequence[Value], full: Value, empty: Value,
               starts: list[tuple[Value, Value]], outers: list[list[Value]], bounds: Sequence[Value],
               ivt: IRType, slot0: Value, phase0: Value, stages: int, loc: object,
               shared: Sequence[Value | None] = ()) -> ForOp:
    """The producer's loop over one program's iterations: wait until the slot is free, then
    announce and issue the copies of iteration `iter` into it (`shared`: issue_copies')."""
    pbody = Block([ivt, I32, I32, I32], [None, "slot", "phase", "iter"])
    _, slot, phase, it = pbody.args
    pe = _Emitter(pbody, 0)
    free = pe.binary("xor", phase, pe.const(I32, 1))
    pe.add(MBarrierWaitOp.create([empty, slot, free], [], loc=loc))  # type: ignore[arg-type]
    issue_copies(pe, plans, bufs, full, slot, pe.const(I1, 1), tile_coordinates(pe, plans, starts, outers, it),
                 shared)
    next_slot, next_phase = next_slot_and_phase(pe, slot, phase, stages)
    pe.add(YieldOp.create([next_slot, next_phase, pe.binary("add", it, pe.const(I32, 1))], []))
    op = e.add(ForOp.create([*bounds, slot0, phase0, e.const(I32, 0)], [I32, I32, I32], {}, [pbody], loc))  # type: ignore[arg-type]
    assert isinstance(op, ForOp)
    return op


def _program_copies(pe: _Emitter, f: Function, plans: list[TmaPlan], sliced: Sequence[Operation],
                    user_ids: Sequence[ProgramIdOp | NumProgramsOp], program: Value, dims: Sequence[Value]
                    ) -> tuple[dict[Value, Value], list[tuple[Value, Value]], list[list[Value]]]:
    """For program `program` of the grid `dims`, computed at `pe`: the producer's slice of the
    prefix (the map from its values to theirs) and the start and outer coordinates of the plans'
    copies."""
    ids = program_ids(pe, program, dims)
    mapping: dict[Value, Value] = {}
    for op in user_ids:
        mapping[op.result] = ids[op.axis] if isinstance(op, ProgramIdOp) else dims[op.axis]
    pe.clone(sliced, mapping)
    mapped = [attrs.evolve(p, start=(_mapped(p.start[0], mapping), _mapped(p.start[1], mapping)),
                           outer=tuple((_mapped(lin, mapping), a) for lin, a in p.outer)) for p in plans]
    starts, outers = start_coordinates(pe, f, mapped)
    return mapping, starts, outers


def multicast_plans(plans: list[TmaPlan], partners: int = 1) -> list[TmaPlan]:
    """The plans whose copies may be shared: in clusters of 2 (one partner) those that split by
    panels where there are any, else those that split by rows (TmaPlan.multicast_split). Copies
    by rows need a second tensor map each, and on an H100 (2026-11-27) shared tf32 tiles split by
    rows did not pay, so an operand of one panel is left unshared beside one of several (A beside
    B in a 16-bit A B). In clusters of 4 (two partners, one per operand) every plan that splits."""
    if partners > 1:
        return [p for p in plans if p.can_halve]
    by_panels = [p for p in plans if p.multicast_split == "panels"]
    return by_panels or [p for p in plans if p.multicast_split == "rows"]


def cluster_partners(cluster: int) -> tuple[int, ...]:
    """The rank bits d of a CTA's partners (the CTAs of rank `rank ^ d`) in clusters of `cluster`
    CTAs: none outside clusters, (1,) in clusters of 2, (1, 2) in clusters of 4."""
    return tuple(1 << i for i in range(max(cluster, 1).bit_length() - 1))


def _has_partner(e: _Emitter, program: Value, count: Value, d: int) -> Value:
    """Whether the CTA of rank `rank ^ d` runs program `program` ^ d beside this one: always but
    where that program is past the grid's last (the last CTAs may run one program fewer)."""
    return e.cmp("slt", e.binary("xor", program, e.const(I32, d)), count)


def _shared_partners(pe: _Emitter, f: Function, plans: list[TmaPlan], sliced: Sequence[Operation],
                     user_ids: Sequence[ProgramIdOp | NumProgramsOp], program: Value, dims: Sequence[Value],
                     count: Value, partners: tuple[int, ...], starts: list[tuple[Value, Value]],
                     outers: list[list[Value]]) -> list[Value | None]:
    """Per plan, the rank bit (i32) of the partner that copies the same tile in this program and
    splits it with this CTA, 0 for none (None: a plan left out, see multicast_plans). A CTA shares
    a tile with the partner across bit 1 where their tiles coincide; else with the one across bit
    2 where theirs do and that partner does not share it across bit 1 itself, so that the two
    CTAs of every pair choose each other."""
    chosen = multicast_plans(plans, len(partners))
    # the coordinates of the programs program ^ x, x = 1 .. 3, and whether they exist
    others = {x: _program_copies(pe, f, plans, sliced, user_ids, pe.binary("xor", program, pe.const(I32, x)), dims)[1:]
              for x in range(1, 2 * partners[-1])}
    exists = {x: _has_partner(pe, program, count, x) for x in others}
    mine = (starts, outers)

    def same(k: int, a: tuple[list[tuple[Value, Value]], list[list[Value]]],
             b: tuple[list[tuple[Value, Value]], list[list[Value]]], given: Value) -> Value:
        out = given
        for x, y in zip((*a[0][k], *a[1][k]), (*b[0][k], *b[1][k])):
            out = pe.binary("and", out, pe.cmp("eq", x, y))
        return out

    zero = pe.const(I32, 0)
    result: list[Value | None] = []
    for k, p in enumerate(plans):
        if p not in chosen:
            result.append(None)
            continue
        across1 = same(k, mine, others[1], exists[1])
        partner = pe.select(across1, pe.const(I32, 1), zero)
        if len(partners) > 1:
            across2 = same(k, mine, others[2], exists[2])
            theirs1 = same(k, others[2], others[3], pe.binary("and", exists[2], exists[3]))
            free = pe.binary("and", pe.binary("xor", across1, pe.const(I1, 1)),
                             pe.binary("xor", theirs1, pe.const(I1, 1)))
            partner = pe.select(pe.binary("and", across2, free), pe.const(I32, 2), partner)
        result.append(partner)
    return result


def warp_specialize_loop(f: Function, loop: ForOp, stages: int, plans: list[TmaPlan], num_warps: int,
                         persistent: bool = False, handoff: bool = False,
                         cluster: int = 0) -> WarpSpecializeOp:
    """Replace `loop` (and what follows it) by a tc.warp_specialize op as described above, and
    return it; `persistent` (where can_persist) makes both roles loop over the programs,
    `handoff` makes the producer a warpgroup that hands its registers to the consumers,
    `cluster` (2 or 4; persistent, where can_cluster) runs clusters of that many CTAs that
    multicast shared tiles."""
    assert cluster in (0, 2, 4) and (persistent or not cluster)
    partners = cluster_partners(cluster)
    outer = f.body
    assert loop.parent is outer and stages >= 2
    body = loop.body
    term = body.terminator
    assert term is not None
    lb, ub, step = loop.operands[:3]
    ivt = body.args[0].type
    at = outer.ops.index(loop)
    prefix = outer.ops[:at]
    user_ids = user_program_ids(f)
    top = _Emitter(outer, 0 if persistent else at)
    bufs = [top.add(LocalAllocOp.create([], [_buffer_type(p.alloc.result.type, stages)], loc=p.alloc.loc)).result  # type: ignore[arg-type]
            for p in plans]
    bars_type = TileType((stages,), I64, BARRIER_LAYOUT)
    full = top.add(LocalAllocOp.create([], [bars_type], loc=loop.loc)).result
    empty = top.add(LocalAllocOp.create([], [bars_type], loc=loop.loc)).result
    top.add(MBarrierInitOp.create([full], [], {"count": 1}, loc=loop.loc))
    # (clusters: one arrival per warpgroup and CTA where only wgmma reads the slots)
    dot0 = async_dot(loop, [p.alloc for p in plans])
    per_warpgroup = bool(cluster) and num_warps % 4 == 0 and dot0 is not None and not reads_a_from_registers(dot0)
    arrivals = num_warps // 4 if per_warpgroup else num_warps
    top.add(MBarrierInitOp.create([empty], [], {"count": arrivals * (1 + len(partners))}, loc=loop.loc))
    if cluster:
        top.add(ClusterBarrierOp.create([], [], loc=loop.loc))
    producer, consumer = Block(), Block()
    prod, cons = _Emitter(producer, 0), _Emitter(consumer, 0)
    producer_registers, consumer_registers = register_split(num_warps) if handoff else (0, 0)  # (0: no setmaxnreg)
    ws = WarpSpecializeOp.create([], [], {"producer_warps": PRODUCER_WARPGROUP if handoff else PRODUCER_WARPS,
                                          "producer_registers": producer_registers,
                                          "consumer_registers": consumer_registers},
                                 [producer, consumer], loop.loc)
    top.add(ws)
    ws_at = outer.ops.index(ws)
    if persistent:
        prefix_at = top.index - 1  # the prefix follows the op: move it and the rest into the roles
        assert outer.ops[prefix_at] is ws
        top.index = prefix_at
        cta, ctas, dims, count = grid_of(top)
        ws_at = outer.ops.index(ws)
        # producer: per program, the slice of the prefix its copies need, then its copies
        ptile, pe = tile_loop(prod, cta, count, ctas, 2, loop.loc)
        sliced = _producer_slice(prefix, _producer_needs(loop, plans))
        assert sliced is not None
        mapping, starts, outers = _program_copies(pe, f, plans, sliced, user_ids, ptile.body.args[0], dims)
        bounds = [mapping.get(v, v) for v in (lb, ub, step)]
        shared = _shared_partners(pe, f, plans, sliced, user_ids, ptile.body.args[0], dims, count, partners, starts,
                                  outers) if partners else []
        copies = _copy_loop(pe, plans, bufs, full, empty, starts, outers, bounds, ivt,
                            ptile.body.args[1], ptile.body.args[2], stages, loop.loc, shared)
        pe.add(YieldOp.create(copies.results[:2], []))
        # consumer: per program, the prefix, the loop and the epilogue
        ctile, ce = tile_loop(cons, cta, count, ctas, 2, loop.loc)
        paired = [_has_partner(ce, ctile.body.args[0], count, d) for d in partners]
        ids = program_ids(ce, ctile.body.args[0], dims)
        tile_body = ctile.body
        move_into(tile_body, [op for op in outer.ops[ws_at + 1:] if op is not outer.terminator], user_ids, ids, dims)
        read0: Value | None = ctile.body.args[1]
        phase0: Value | None = ctile.body.args[2]
        tile_term = YieldOp.create([], [])
        tile_body.append(tile_term)
        prod.add(YieldOp.create([], []))
        inval_at = cons
        if cluster:
            inval_at.add(ClusterBarrierOp.create([], [], loc=loop.loc))
        inval_at.add(MBarrierInvalOp.create([full], [], loc=loop.loc))
        inval_at.add(MBarrierInvalOp.create([empty], [], loc=loop.loc))
        cons.add(YieldOp.create([], []))
        home = tile_body
    else:
        starts, outers = start_coordinates(_Emitter(outer, ws_at), f, plans)
        ws_at = outer.ops.index(ws)
        zero = prod.const(I32, 0)
        _copy_loop(prod, plans, bufs, full, empty, starts, outers, [lb, ub, step], ivt, zero, zero, stages, loop.loc)
        prod.add(YieldOp.create([], []))
        for moved in [op for op in outer.ops[ws_at + 1:] if op is not outer.terminator]:
            outer.remove(moved)
            consumer.append(moved)
        consumer.append(YieldOp.create([], []))
        read0 = phase0 = None
        paired = []
        home = consumer

    def release_slot(e: _Emitter, slot: Value, pred: Value) -> None:
        """Each consumer warp's arrive on `empty[slot]` (with clusters, the partners' too)."""
        if not paired:
            e.add(MBarrierArriveOp.create([empty, slot, pred], [], loc=loop.loc))
        else:
            e.add(MBarrierArriveOp.create([empty, slot, pred, *paired], [],
                                          {"cluster": True, "per_warpgroup": per_warpgroup}, loc=loop.loc))

    # the consumers' loop: wait for the slot, dot, release the slot the previous dot read
    read = body.add_arg(I32, "read_slot")
    phase = body.add_arg(I32, "phase")
    release = body.add_arg(I32, "release_slot")
    read_slot(_Emitter(body, 0), loop, plans, bufs, full, read, phase)
    dot = async_dot(loop)
    assert dot is not None
    dot.asynchronous = True
    after_dot = _Emitter(body, body.ops.index(dot) + 1)
    done = after_dot.add(DotWaitOp.create([dot.result], [dot.result.type], {"pending": 1}, loc=dot.loc)).result
    term.operands = [done if v is dot.result else v for v in term.operands]
    not_first = after_dot.cmp("sgt", body.args[0], lb)  # the dot of iteration i - 1 read slot `release`
    release_slot(after_dot, release, not_first)
    tail = _Emitter(body, body.ops.index(term))
    next_read, next_phase = next_slot_and_phase(tail, read, phase, stages)
    term.operands = [*term.operands, next_read, next_phase, read]
    lpre = _Emitter(home, home.ops.index(loop))
    last = lpre.const(I32, stages - 1)
    if read0 is None or phase0 is None:
        zero = lpre.const(I32, 0)
        read0 = phase0 = zero
        after: Operation | None = MBarrierInvalOp.create([full], [], loc=loop.loc)
    else:
        after = None
    new = replace_loop(f, loop, lpre, [*loop.operands, read0, phase0, last], after, dot)
    if persistent:
        # the last dot of the program is complete after its dot_wait(0): release its slot, and
        # carry the slot and phase on to the next program
        wait = home.ops[home.ops.index(new) + 1]
        assert isinstance(wait, DotWaitOp)
        e = _Emitter(home, home.ops.index(wait) + 1)
        ran = e.cmp("slt", lb, ub)
        release_slot(e, new.results[release.index - 1], ran)
        tile_term.operands = [new.results[read.index - 1], new.results[phase.index - 1]]
    else:
        inval = next(op for op in consumer.ops if isinstance(op, MBarrierInvalOp))
        consumer.insert(consumer.ops.index(inval) + 1, MBarrierInvalOp.create([empty], [], loc=loop.loc))
    return ws


__all__ = ["PRODUCER_REGISTERS", "PRODUCER_WARPGROUP", "PRODUCER_WARPS", "accumulator_registers", "can_cluster",
           "can_persist", "cluster_partners", "can_specialize", "multicast_plans", "register_split", "registers_per_thread", "warp_specialize_loop"]
