"""Stream-K (CompileOptions.stream_k): a persistent kernel whose last waves of programs share
their reduction loop's iterations, so that no SM idles through a partly filled last wave.

A kernel qualifies when its program is `prologue; acc = for (...) { acc += dot }; epilogue(acc)`:
one reduction loop in the kernel's body, with constant lower bound and step and an upper bound
that is an argument or a constant (every program runs the same number of iterations, `iters`),
the loop's only result read afterwards the dot's accumulator, which starts at zero, and no stores
or atomics outside the epilogue. Its TMA pipeline must be a plain one (tc_opt.pipeline_tma); the
persistent loop over the programs is then built here instead of by tc_opt.persistent.

The grid's P CTAs (one per SM: the runtime launches min(programs, SMs)) work as follows, T
programs in all, Q = T / P, R = T % P:
- when 4 R < P (no remainder, or a last wave less than a quarter full: each shared program would
  be cut between more than four CTAs, a chain of partial sums), Q = 0 (fewer programs than SMs)
  or iters = 0, as a plain persistent kernel: whole programs cta, cta + P, ...;
- else whole programs round robin for the first Q * P programs, then the R * iters iterations of
  the rest (the last wave), numbered program by program, split in P equal
  contiguous ranges [start, end): CTA c takes range c, one segment [k0, k1) of a program at a time,
  from the range's end. A program cut between CTAs has a slot in the workspace (its index among
  the shared programs, fewer than P) and an i32 flag saying up to which iteration the slot's sum
  goes:
  - its first iterations close the range of an earlier CTA, which runs them first and passes the
    partial sum on: it stores the accumulator into the slot and sets the flag to k1 (atomic
    exchange after a fence: release);
  - its later iterations open the range of a later CTA, which runs them last: it waits until the
    flag reads its k0 (atomic compare-and-swap: acquire; the program's last segment swaps in 0),
    adds the slot's sum and runs the epilogue, or passes the sum on again where the program goes
    on into the next CTA's range.
  A CTA only waits for the CTAs before it, which passed their sums on at the start of their
  ranged work, so every wait ends while all CTAs are resident (the runtime launches no more CTAs
  than SMs), and every flag is 0 again at the end of a launch, ready for the next.

The loop's iterations [k0, k1) of a segment: tc_opt.pipeline_tma moves the loop's bounds and the
copies' first coordinates (`k_range`). Before pipelining, `plan` puts placeholders (tc.undef) for
k0, k1, iters and the program's slot at the top of the kernel; after it, `build` inserts the
exchange of partial sums before the epilogue and the loop over the work items that replaces them.

The partial sums go through the workspace in the order of the threads' registers
(tc.partial_store / tc.partial_add): coalesced 16-byte vectors whatever the accumulator's layout.

Measured (H100, C = A B, BENCHMARKS.md, twenty-ninth session): sharing a full wave and the partial
one (Q - 1 waves whole, as kernels/matmul_streamk.tc does) cost 20% at tf32 4096^3: the CTAs'
segments start at different k, so the operand panels' k-slices are no longer read by every CTA
at once and L2 hits fall (85% -> 65%, DRAM reads 268 -> 751 MB). Sharing the last wave only, tf32
256x128x32 with GROUP_SIZE 4: 8192^3 0.98-1.00x cuBLAS against 0.96-0.98 without (tc_torch's tf32
list offers it), 4096^3 0.93 against 0.96-0.98 (the tuner leaves it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs
from tc_ir.ops import (
    AddPtrOp,
    AtomicCASOp,
    AtomicRMWOp,
    Block,
    BlockArgument,
    CastOp,
    ConditionOp,
    DotOp,
    ForOp,
    Function,
    IfOp,
    Operation,
    PartialAddOp,
    PartialStoreOp,
    ReturnOp,
    StoreOp,
    UndefOp,
    Value,
    WhileOp,
    WorkspaceOp,
    YieldOp,
)
from tc_ir.types import F32, I32, PointerType, ScalarType, TileType

from .ir_utils import constant_of, replace_uses
from .persistent import grid_of, move_into, program_ids, tile_loop, user_program_ids
from .pipeline_loops import _Emitter

I64 = ScalarType("i64")


@attrs.define(eq=False)
class StreamK:
    """A qualifying kernel's reduction loop (before pipelining) and the placeholders that `build`
    replaces: the segment's iterations [k0, k1), the iterations of a whole program and the
    program's slot in the workspace."""

    loop: ForOp
    #: the accumulator's users after the loop, (op, operand index): they find it after pipelining
    acc_uses: list[tuple[Operation, int]]
    #: the ops after the loop (the epilogue), terminator excluded
    epilogue: list[Operation]
    k0: Value
    k1: Value
    iters: Value
    slot: Value
    #: the loop's bounds as planned (constants, and the upper bound an argument or a constant)
    lower: int
    upper: Value | int
    step: int
    #: bytes of one partial sum (the accumulator tile: one slot of the workspace)
    partial_bytes: int


def _program_independent(f: Function, v: Value) -> bool:
    """An argument of the kernel or a constant: the same for every program, available anywhere."""
    return (isinstance(v, BlockArgument) and v.block is f.body) or isinstance(constant_of(v), int)


def _walk(ops: Sequence[Operation]) -> Iterator[Operation]:
    """`ops` and every op nested in their regions."""
    for op in ops:
        yield op
        for r in op.regions:
            yield from r.walk()


def _side_effects(ops: Sequence[Operation]) -> bool:
    return any(isinstance(o, (StoreOp, AtomicRMWOp, AtomicCASOp, ReturnOp)) for o in _walk(ops))


def _accumulator(loop: ForOp) -> int | None:
    """The index (among the loop's results) of the dot's accumulator that starts at zero."""
    term = loop.body.terminator
    assert term is not None
    for i, v in enumerate(term.operands):
        op = getattr(v, "op", None)
        arg = loop.body.args[1 + i]
        if isinstance(op, DotOp) and op.operands[2] is arg and constant_of(loop.inits[i]) == 0:
            return i
    return None


def plan(f: Function, loop: ForOp) -> StreamK | None:
    """The stream-K plan of `f` around its reduction loop `loop` (see the module's doc), None when
    the kernel does not qualify. Puts the placeholders at the top of the kernel."""
    body = f.body
    term = body.terminator
    if loop.parent is not body or term is None:
        return None
    if [op for op in f.walk() if isinstance(op, (ForOp, WhileOp))] != [loop]:
        return None
    lb, ub, step = loop.operands[:3]
    if not isinstance(constant_of(lb), int) or not isinstance(constant_of(step), int) \
            or constant_of(step) <= 0 or not _program_independent(f, ub):  # type: ignore[operator]
        return None
    acc = _accumulator(loop)
    if acc is None:
        return None
    t = loop.results[acc].type
    if not isinstance(t, TileType) or t.rank != 2 or t.element != F32 or t.layout is None:
        return None
    at = body.ops.index(loop)
    before, epilogue = body.ops[:at], [op for op in body.ops[at + 1:] if op is not term]
    if _side_effects(before) or _side_effects(loop.body.ops) or not isinstance(term, ReturnOp):
        return None
    if any(isinstance(o, ReturnOp) for o in _walk(epilogue)):
        return None
    acc_uses: list[tuple[Operation, int]] = []
    for o in _walk(epilogue):
        for k, v in enumerate(o.operands):
            if v in loop.results:
                if v is not loop.results[acc]:
                    return None  # (another carried value read after the loop)
                acc_uses.append((o, k))
    if not acc_uses:
        return None
    holders = [body.insert(0, UndefOp.create([], [I32])).results[0] for _ in range(4)]
    upper = constant_of(ub)
    return StreamK(loop, acc_uses, epilogue, holders[0], holders[1], holders[2], holders[3],
                   constant_of(lb), ub if upper is None else upper, constant_of(step),  # type: ignore[arg-type]
                   t.numel * t.element.bytes)


def _exchange(f: Function, sk: StreamK) -> None:
    """Before the epilogue: add the partial sum of the program's earlier iterations where the
    segment starts after its first (k0 > 0); pass the sum on instead of running the epilogue
    where the segment ends before its last (k1 < iters). A program cut between CTAs has a slot
    in the workspace (`slot`: its index among the programs shared by stream-K) and a flag that
    says up to which iteration the slot's sum goes: a segment [k0, k1) waits until it reads k0
    (and resets it to 0 when it is the program's last segment) and, passing the sum on, sets it
    to k1. Every flag is 0 again at the end of the launch."""
    body = f.body
    op0, k = sk.acc_uses[0]
    acc = op0.operands[k]
    t = acc.type
    assert isinstance(t, TileType) and isinstance(t.element, ScalarType)
    e = _Emitter(body, body.ops.index(sk.epilogue[0]))
    loc = sk.loop.loc
    partials = e.add(WorkspaceOp.create([], [PointerType(t.element)], {"part": "partials"}, loc=loc)).result
    flags = e.add(WorkspaceOp.create([], [PointerType(I32)], {"part": "flags"}, loc=loc)).result
    zero = e.const(I32, 0)
    flag = e.add(AddPtrOp.create([flags, sk.slot], [flags.type])).result
    last = e.cmp("sge", sk.k1, sk.iters)
    # the earlier iterations: wait for their sum (the flag reads k0), add it
    then, other = Block(), Block()
    te = _Emitter(then, 0)
    after_wait = te.select(last, zero, sk.k0)
    before, after = Block(), Block()
    be = _Emitter(before, 0)
    old = be.add(AtomicCASOp.create([flag, sk.k0, after_wait], [I32], loc=loc)).result
    be.add(ConditionOp.create([be.cmp("ne", old, sk.k0)], []))
    after.append(YieldOp.create([], []))
    te.add(WhileOp.create([], [], {}, [before, after], loc))
    te.add(YieldOp.create([te.add(PartialAddOp.create([partials, sk.slot, acc], [t], loc=loc)).result], []))
    other.append(YieldOp.create([acc], []))
    summed = e.add(IfOp.create([e.cmp("sgt", sk.k0, zero)], [t], {}, [then, other], loc)).results[0]
    # the later iterations: pass the sum on, or run the epilogue on it
    pass_on, finish = Block(), Block()
    pe = _Emitter(pass_on, 0)
    pe.add(PartialStoreOp.create([partials, sk.slot, summed], [], loc=loc))
    pe.add(AtomicRMWOp.create([flag, sk.k1], [I32], {"kind": "xchg"}, loc=loc))
    pe.add(YieldOp.create([], []))
    for op in sk.epilogue:
        body.remove(op)
        finish.append(op)
    finish.append(YieldOp.create([], []))
    for o, k in sk.acc_uses:
        o.operands = [summed if j == k else v for j, v in enumerate(o.operands)]
    e.add(IfOp.create([last], [], {}, [finish, pass_on], loc))


def build(f: Function, sk: StreamK) -> None:
    """After pipelining: the exchange of partial sums before the epilogue, then the persistent
    loop over this CTA's work items (whole programs, then segments), replacing the placeholders."""
    _exchange(f, sk)
    outer = f.body
    term = outer.terminator
    assert term is not None
    holders = [v.op for v in (sk.k0, sk.k1, sk.iters, sk.slot)]  # type: ignore[attr-defined]
    user_ids = user_program_ids(f)
    ops = [op for op in outer.ops if op is not term and op not in holders]
    e = _Emitter(outer, 0)
    cta, ctas, dims, count = grid_of(e)
    zero, one = e.const(I32, 0), e.const(I32, 1)
    # iterations of a whole program: ceil((ub - lb) / step), at least 0
    ub = e.const(I32, sk.upper) if isinstance(sk.upper, int) else sk.upper
    span = e.binary("smax", e.binary("sub", ub, e.const(I32, sk.lower)), zero)
    st = e.const(I32, sk.step)
    iters = e.binary("sdiv", e.binary("add", span, e.binary("sub", st, one)), st)
    q = e.binary("udiv", count, ctas)
    r = e.binary("sub", count, e.binary("mul", q, ctas))
    # (the last wave filled by a quarter at least: shorter chains of partial sums, see the doc)
    quarter = e.cmp("sge", e.binary("mul", r, e.const(I32, 4)), ctas)
    shared = e.binary("and", e.binary("and", quarter, e.cmp("sgt", q, zero)), e.cmp("sgt", iters, zero))
    whole = e.select(shared, e.binary("mul", q, ctas), count)
    # whole programs of this CTA: cta, cta + ctas, ... below `whole`
    n_whole = e.binary("sdiv", e.binary("add", e.binary("sub", whole, cta), e.binary("sub", ctas, one)), ctas)
    # its range of the remaining programs' iterations (64-bit products)
    total = e.add(CastOp.create([e.binary("mul", e.binary("sub", count, whole), iters)], [I64], {"kind": "sext"})).result
    wide = e.add(CastOp.create([ctas], [I64], {"kind": "sext"})).result

    def bound(c: Value) -> Value:
        c64 = e.add(CastOp.create([c], [I64], {"kind": "sext"})).result
        return e.add(CastOp.create([e.binary("sdiv", e.binary("mul", c64, total), wide)], [I32], {"kind": "trunc"})).result

    start, end = bound(cta), bound(e.binary("add", cta, one))
    safe = e.binary("smax", iters, one)
    last = e.binary("sdiv", e.binary("sub", end, one), safe)
    n_seg = e.select(e.cmp("sgt", end, start),
                     e.binary("add", e.binary("sub", last, e.binary("sdiv", start, safe)), one), zero)
    items = e.binary("add", n_whole, n_seg)
    loop, le = tile_loop(e, zero, items, one, 0, sk.loop.loc)
    j = loop.body.args[0]
    is_whole = le.cmp("slt", j, n_whole)
    t_whole = le.binary("add", cta, le.binary("mul", j, ctas))
    seg = le.binary("sub", last, le.binary("sub", j, n_whole))
    first = le.binary("mul", seg, safe)
    k0s = le.binary("smax", le.binary("sub", start, first), zero)
    k1s = le.binary("smin", le.binary("sub", end, first), iters)
    program = le.select(is_whole, t_whole, le.binary("add", whole, seg))
    k0 = le.select(is_whole, zero, k0s)
    k1 = le.select(is_whole, iters, k1s)
    ids = program_ids(le, program, dims)
    move_into(loop.body, ops, user_ids, ids, dims)
    for holder, value in zip(holders, (k0, k1, iters, seg)):
        replace_uses(loop.body, holder.results[0], value)
        outer.remove(holder)
    loop.body.append(YieldOp.create([], []))


__all__ = ["StreamK", "build", "plan"]
