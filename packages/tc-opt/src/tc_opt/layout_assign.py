"""Layout assignment: give every tile a layout, inserting convert_layout where a producer and a
consumer disagree (cheap producer chains are re-materialized instead).

Anchors: loads, stores and atomics get the coalesced Blocked layout of their pointer (memory
order from contiguity, vector width from alignment, at most 128 bits per access); dot results
get a Blocked layout. Layouts then spread to neighbours: element-wise ops share one layout,
expand_dims takes a Slice of its result's layout, reduce produces a Slice of its source's, and
values tied through for/if/while share one. trans, reshape and dot operands are exchanged through
shared memory, so they break the chain.
"""

from __future__ import annotations

from collections import deque

from tc_ir.layouts import Blocked, DotOperand, Layout, Slice
from tc_ir.ops import (
    AddPtrOp,
    AssumeOp,
    AtomicCASOp,
    AtomicRMWOp,
    BinaryOp,
    Block,
    BroadcastOp,
    CastOp,
    CmpOp,
    ConditionOp,
    ConstantOp,
    ConvertLayoutOp,
    DotOp,
    ExpandDimsOp,
    FmaOp,
    ForOp,
    Function,
    IfOp,
    LoadOp,
    MakeRangeOp,
    Module,
    Operation,
    OpResult,
    ReduceOp,
    SelectOp,
    SplatOp,
    StoreOp,
    UnaryOp,
    Value,
    WhileOp,
    YieldOp,
)
from tc_ir.types import PointerType, ScalarType, TileType, element_of

from .axis_info import AxisAnalysis
from .dot_layouts import WGMMA_ARCHS, dot_operand_layout, dot_result_layout, uses_mma
from .k_major_operands import k_major_anchors, load_order, swaps_operands
from .layout_utils import blocked_for, default_order, distributed_for, panel_layout
from .pass_manager import Pass
from .transpose_layout import transpose_anchors

ELEMENTWISE = (BinaryOp, CmpOp, CastOp, UnaryOp, FmaOp, SelectOp, AddPtrOp, BroadcastOp, AssumeOp)
MEMORY = (LoadOp, StoreOp, AtomicRMWOp, AtomicCASOp)
CHEAP = (
    MakeRangeOp, SplatOp, ConstantOp, BinaryOp, CmpOp, CastOp, SelectOp, AddPtrOp, BroadcastOp, ExpandDimsOp, AssumeOp,
)


def is_tile(v: Value) -> bool:
    return isinstance(v.type, TileType)


def coalesced_layout(ptr: Value, axes: AxisAnalysis, num_warps: int) -> Blocked:
    """The layout that lets each thread access up to 128 bits of consecutive memory."""
    return blocked_for(*_coalesced(ptr, axes, num_warps))


def coalesced_distribution(ptr: Value, axes: AxisAnalysis, num_warps: int) -> Layout:
    """coalesced_layout, as a Slice when its threads cannot cover the tile in whole blocks
    (layout_utils.distributed_for)."""
    return distributed_for(*_coalesced(ptr, axes, num_warps))


def _coalesced(ptr: Value, axes: AxisAnalysis, num_warps: int
               ) -> tuple[tuple[int, ...], int, tuple[int, ...], int]:
    """blocked_for's arguments (shape, warps, order, vector width) for an access through `ptr`."""
    t = ptr.type
    assert isinstance(t, TileType)
    info = axes.info(ptr)
    rank = t.rank
    default = default_order(rank)
    order = tuple(sorted(range(rank), key=lambda d: (-info.contiguity[d], default.index(d))))
    elem = t.element
    eb = elem.pointee.bytes if isinstance(elem, PointerType) else 4
    fast = order[0]
    vec = min(info.contiguity[fast], max(1, info.divisibility[fast] // eb), max(1, 16 // eb))
    return t.shape, num_warps, order, max(1, vec)


class _Solver:
    """Spreads layouts over the values of one function."""

    def __init__(self, function: Function, num_warps: int, arch: str = "sm_80", num_stages: int = 1,
                 store_accumulators: bool = False) -> None:
        self.f = function
        self.num_warps = num_warps
        self.arch = arch
        self.num_stages = num_stages
        #: 32-bit wgmma accumulators are stored from their own layout (`_stored_accumulator_layout`)
        self.store_accumulators = store_accumulators and arch in WGMMA_ARCHS
        self.layout: dict[Value, Layout] = {}
        self.queue: deque[tuple[Value, Layout]] = deque()
        self.users: dict[Value, list[Operation]] = {}
        self.ties: dict[Value, list[Value]] = {}
        for op in function.walk():
            for v in op.operands:
                self.users.setdefault(v, []).append(op)
            self._collect_ties(op)

    # ------------------------------------------------------------------------ tied values

    def _tie(self, a: Value, b: Value) -> None:
        if is_tile(a) and is_tile(b):
            self.ties.setdefault(a, []).append(b)
            self.ties.setdefault(b, []).append(a)

    def _collect_ties(self, op: Operation) -> None:
        if isinstance(op, ForOp):
            args = op.body.args[1:]
            y = op.body.terminator
            for i, a in enumerate(args):
                self._tie(a, op.inits[i])
                self._tie(a, op.results[i])
                if isinstance(y, YieldOp):
                    self._tie(a, y.operands[i])
        elif isinstance(op, IfOp):
            for blk in op.regions:
                y = blk.terminator
                if isinstance(y, YieldOp):
                    for r, v in zip(op.results, y.operands):
                        self._tie(r, v)
        elif isinstance(op, WhileOp):
            for a, init in zip(op.before.args, op.operands):
                self._tie(a, init)
            c = op.before.terminator
            if isinstance(c, ConditionOp):
                for i, v in enumerate(c.operands[1:]):
                    self._tie(v, op.after.args[i])
                    self._tie(v, op.results[i])
            y = op.after.terminator
            if isinstance(y, YieldOp):
                for a, v in zip(op.before.args, y.operands):
                    self._tie(a, v)

    # ----------------------------------------------------------------------------- rules

    def operand_layouts(self, op: Operation, res_layout: Layout | None) -> list[Layout | None]:
        """The layout each operand must have given the op's result layout (None: no constraint)."""
        ops = op.operands
        if isinstance(op, ELEMENTWISE):
            return [res_layout if is_tile(v) else None for v in ops]
        if isinstance(op, ExpandDimsOp):
            if res_layout is None or not is_tile(ops[0]):
                return [None]
            return [Slice(res_layout, op.axis)]
        if isinstance(op, ReduceOp):
            if isinstance(res_layout, Slice) and res_layout.dim == op.axis:
                return [res_layout.parent]
            return [None]
        if isinstance(op, LoadOp):
            return [res_layout if is_tile(v) else None for v in ops]
        if isinstance(op, DotOp):
            if res_layout is None:
                return [None, None, None]
            e = element_of(ops[0].type)
            assert isinstance(e, ScalarType)
            return [dot_operand_layout(res_layout, 0, e), dot_operand_layout(res_layout, 1, e), res_layout]
        return [None for _ in ops]

    def result_layout(self, op: Operation, operand: Value, layout: Layout) -> Layout | None:
        """The result layout implied by one operand's layout (None: no implication)."""
        if not op.results or not is_tile(op.results[0]):
            return None
        if isinstance(op, ELEMENTWISE) or isinstance(op, LoadOp):
            return layout
        if isinstance(op, ExpandDimsOp):
            if isinstance(layout, Slice) and layout.dim == op.axis:
                return layout.parent
            return None
        if isinstance(op, ReduceOp):
            return Slice(layout, op.axis)
        if isinstance(op, DotOp) and operand is op.operands[2]:
            return layout
        return None

    # --------------------------------------------------------------------------- solving

    def anchors(self, axes: AxisAnalysis) -> None:
        stores: list[tuple[Value, Layout]] = []
        others: list[tuple[Value, Layout]] = []
        accumulators: dict[Value, Layout] = {}
        for op in self.f.walk():
            if isinstance(op, DotOp):  # tensor-core accumulators come first
                swap = self.arch in WGMMA_ARCHS and uses_mma(op) and swaps_operands(
                    op, self.num_warps, self.num_stages, load_order(lambda p: coalesced_layout(p, axes, self.num_warps)))
                mma = dot_result_layout(op, self.num_warps, self.arch, swap)
                if mma is not None:
                    self.queue.append((op.results[0], mma))
                    accumulators[op.results[0]] = mma
        # partial sums stored and read back into an accumulator (split-K, stream-K) keep its layout
        reach = self._accumulator_values(accumulators)
        partial_loads = self._loads_into_accumulators(reach)
        self.queue.extend(partial_loads)
        for op in self.f.walk():
            if isinstance(op, MEMORY) and is_tile(op.operands[0]):
                lay: Layout = coalesced_distribution(op.operands[0], axes, self.num_warps)
                if isinstance(op, StoreOp) and self.store_accumulators:
                    # (else in panels of columns: an exchange into it can run in rounds)
                    lay = _stored_accumulator_layout(op, accumulators) or _panels(op, lay)
                elif (isinstance(op, StoreOp) and partial_loads and len(op.operands) == 2
                      and self._partial_sum(op.operands[1], reach)):
                    lay = reach[op.operands[1]]
                target = stores if isinstance(op, StoreOp) else others
                for v in op.operands:
                    if is_tile(v):
                        target.append((v, lay))
                for r in op.results:
                    target.append((r, lay))
        # loads copied transposed into K-major tf32 wgmma operands: element copies over many banks
        self.queue.extend(k_major_anchors(self.f, self.num_warps, self.arch,
                                          lambda ptr: coalesced_layout(ptr, axes, self.num_warps),
                                          self.num_stages))
        # transpositions between loads and stores first: one layout pair makes `trans` free
        self.queue.extend(transpose_anchors(self.f, axes, self.num_warps))
        self.queue.extend(stores)
        self.queue.extend(others)

    def _accumulator_values(self, accumulators: dict[Value, Layout]) -> dict[Value, Layout]:
        """The tensor-core accumulators and the values that carry them on: loop-carried and
        if/while values tied to them and their sums (`acc += *partial`), with their layouts."""
        reach = dict(accumulators)
        todo = list(accumulators)
        while todo:
            v = todo.pop()
            nxt = list(self.ties.get(v, []))
            nxt += [u.results[0] for u in self.users.get(v, []) if isinstance(u, BinaryOp) and u.kind == "fadd"]
            for w in nxt:
                if w not in reach and w.type == v.type:
                    reach[w] = reach[v]
                    todo.append(w)
        return reach

    @staticmethod
    def _partial_sum(v: Value, reach: dict[Value, Layout]) -> bool:
        """Whether `v` is a 32-bit accumulator value (one of `reach`)."""
        t = v.type
        return v in reach and isinstance(t, TileType) and isinstance(t.element, ScalarType) and t.element.bits == 32

    def _loads_into_accumulators(self, reach: dict[Value, Layout]) -> list[tuple[Value, Layout]]:
        """Loads of 32-bit tiles whose one use adds them to a tensor-core accumulator, each (with
        its pointers) given the accumulator's layout; unmasked stores of such accumulators keep it
        as well (`anchors`).

        A kernel that splits K among programs (split-K, stream-K) stores partial sums and adds
        them to another program's accumulator. Loaded coalesced, a partial would cross shared
        memory to reach the accumulator's layout with both tiles in registers at once (128
        floats each per thread for a 128x256 tile over 8 warps: ptxas spills); stored coalesced,
        the accumulator crosses shared memory first. Where the accumulator lies, each thread
        writes and adds its own elements, and a warp's accesses to neighbouring pairs along a row
        still fill whole 32-byte sectors (as `_stored_accumulator_layout` argues). In a kernel
        that reads partials back so, an unmasked store of an accumulator is taken for a partial
        (the results are stored masked to the matrix's bounds, and keep the exchange). tc_nvptx
        adds such a load as it arrives (lower_memory._accumulating_add)."""
        out: list[tuple[Value, Layout]] = []
        for op in self.f.walk():
            if not isinstance(op, LoadOp) or not is_tile(op.result):
                continue
            t = op.result.type
            users = self.users.get(op.result, [])
            if not isinstance(t, TileType) or not isinstance(t.element, ScalarType) or t.element.bits != 32 or len(users) != 1:
                continue
            add = users[0]
            if isinstance(add, BinaryOp) and add.kind == "fadd":
                other = [v for v in add.operands if v is not op.result]
                if len(other) == 1 and other[0] in reach:  # (its pointers too, before other uses claim them)
                    out += [(v, reach[other[0]]) for v in (*op.operands, op.result) if is_tile(v)]
        return out

    def push(self, v: Value, lay: Layout | None) -> None:
        # dot operands are staged through shared memory: their producers keep their own layouts
        if lay is not None and is_tile(v) and v not in self.layout and not isinstance(lay, DotOperand):
            self.queue.append((v, lay))

    def solve(self) -> None:
        while self.queue:
            v, lay = self.queue.popleft()
            if v in self.layout:
                continue
            t = v.type
            assert isinstance(t, TileType)
            self.layout[v] = lay
            for w in self.ties.get(v, []):  # tied values (loop-carried, if results) agree at once
                if w not in self.layout and is_tile(w):
                    self.queue.appendleft((w, lay))
            if isinstance(v, OpResult):
                for operand, ol in zip(v.op.operands, self.operand_layouts(v.op, lay)):
                    self.push(operand, ol)
            for user in self.users.get(v, []):
                rl = self.result_layout(user, v, lay)
                if rl is not None:
                    for r in user.results:
                        self.push(r, rl)
                    # siblings of an element-wise op follow as well
                    for operand, ol in zip(user.operands, self.operand_layouts(user, rl)):
                        self.push(operand, ol)

    def fill_defaults(self) -> None:
        """Values nothing reached get the default Blocked layout (then spread again)."""
        for op in self.f.walk():
            for v in list(op.operands) + list(op.results) + [a for r in op.regions for a in r.args]:
                if is_tile(v) and v not in self.layout:
                    t = v.type
                    assert isinstance(t, TileType)
                    lay: Layout = distributed_for(t.shape, self.num_warps)
                    if isinstance(v, OpResult) and isinstance(v.op, DotOp):
                        lay = distributed_for(t.shape, self.num_warps, vec=4)
                    self.push(v, lay)
                    self.solve()


def _stored_accumulator_layout(store: StoreOp, accumulators: dict[Value, Layout]) -> Layout | None:
    """The tensor-core layout a store of a 32-bit wgmma accumulator keeps in a warp-specialized
    kernel (None: the store is coalesced as any other).

    Each thread holds its accumulator as pairs of neighbours along a row (a product computed
    transposed as 2 x 2 blocks: tc_nvptx.mma_layout pairs its rows): every warp-wide store of one
    register or pair fills whole 32-byte sectors, so writing it where it lies costs the memory system no more than a coalesced
    store and needs no layout exchange through shared memory. A plain kernel's exchange reuses
    its pipeline's slots (and measured as fast: tf32 on an H100, 2026-11-25), but a producer warp
    keeps filling them while the consumers store: there the exchange would need memory of its own
    (128 KiB for a 256x128 float tile), more than a tf32 pipeline leaves. 16-bit results are
    always exchanged: their pairs are 4 bytes, half a sector per row of a warp's store."""
    v = store.operands[1]
    while isinstance(v, OpResult) and isinstance(v.op, ForOp):  # the loop's final accumulator
        y = v.op.body.terminator
        if not isinstance(y, YieldOp):
            return None
        v = y.operands[v.index]
    lay = accumulators.get(v)
    t = store.operands[1].type
    if (lay is None or not isinstance(t, TileType) or not isinstance(t.element, ScalarType)
            or t.element.bits != 32 or t != v.type):
        return None
    return lay


def _panels(store: StoreOp, lay: Layout) -> Layout:
    """A warp-specialized kernel's store in layout_utils.panel_layout: the exchange into it of
    a tensor-core result that the TMA cannot store (rows not 16-byte aligned) then fits beside
    the producer's pipeline in rounds of 128-byte columns (tc_opt.exchange_rounds) instead of
    taking a whole tile's buffer (64 KiB for a 16-bit 128x256 tile)."""
    t = store.operands[0].type
    assert isinstance(t, TileType)
    e = t.element
    return panel_layout(lay, t.shape, e.pointee.bytes) if isinstance(e, PointerType) else lay


class _Materializer:
    """Rewrites types and inserts converts (or clones) where layouts disagree."""

    def __init__(self, solver: _Solver) -> None:
        self.s = solver
        self.layout = solver.layout
        self.clones: dict[tuple[Value, Layout], Value] = {}

    def retype(self) -> None:
        for op in self.s.f.walk():
            for v in list(op.results) + [a for r in op.regions for a in r.args]:
                self._set(v)
        for a in self.s.f.args:
            self._set(a)

    def _set(self, v: Value) -> None:
        t = v.type
        if isinstance(t, TileType) and v in self.layout:
            v.type = t.with_layout(self.layout[v])

    def fix_uses(self, block: Block) -> None:
        for op in list(block.ops):
            for r in op.regions:
                self.fix_uses(r)
            self._fix_result(op, block, self.s.f.body)
            res_layout = self.layout.get(op.results[0]) if op.results else None
            if isinstance(op, MEMORY) and is_tile(op.operands[0]):
                want: list[Layout | None] = [self.layout.get(op.operands[0])] * len(op.operands)
            elif isinstance(op, (YieldOp, ConditionOp)):
                want = self._yield_wants(op)
            elif isinstance(op, (ForOp, WhileOp)):
                want = self._loop_wants(op)
            else:
                want = self.s.operand_layouts(op, res_layout)
            new_operands = []
            for v, w in zip(op.operands, want):
                if w is None or not is_tile(v) or self.layout.get(v) == w:
                    new_operands.append(v)
                    continue
                new_operands.append(self._convert(v, w, block, op))
            op.operands = new_operands + op.operands[len(new_operands):]

    def _yield_wants(self, op: Operation) -> list[Layout | None]:
        parent = op.parent.parent if op.parent is not None else None
        out: list[Layout | None] = []
        if isinstance(parent, ForOp):
            out = [self.layout.get(a) for a in parent.body.args[1:]]
        elif isinstance(parent, IfOp):
            out = [self.layout.get(r) for r in parent.results]
        elif isinstance(parent, WhileOp):
            if isinstance(op, ConditionOp):
                out = [None] + [self.layout.get(a) for a in parent.after.args]
            else:
                out = [self.layout.get(a) for a in parent.before.args]
        return out

    def _loop_wants(self, op: Operation) -> list[Layout | None]:
        if isinstance(op, ForOp):
            return [None, None, None] + [self.layout.get(a) for a in op.body.args[1:]]
        assert isinstance(op, WhileOp)
        return [self.layout.get(a) for a in op.before.args]

    def _cheap(self, v: Value, depth: int = 0) -> bool:
        if not isinstance(v, OpResult) or depth > 8:
            return False
        op = v.op
        if not isinstance(op, CHEAP) or len(op.results) != 1:
            return False
        return all(not is_tile(x) or self._cheap(x, depth + 1) for x in op.operands)

    def _convert(self, v: Value, want: Layout, block: Block, user: Operation) -> Value:
        key = (v, want)
        if key in self.clones:
            return self.clones[key]
        if self._cheap(v) and not isinstance(want, DotOperand):
            new = self._clone(v, want)
        else:
            t = v.type
            assert isinstance(t, TileType)
            cv = ConvertLayoutOp.create([v], [t.with_layout(want)], loc=user.loc)
            self._insert_after_def(v, cv, block, user)
            new = cv.result
            self.layout[new] = want
        self.clones[key] = new
        return new

    def _insert_after_def(self, v: Value, op: Operation, block: Block, user: Operation) -> None:
        t = op.result.type
        lay = t.layout if isinstance(t, TileType) else None
        # converts to dot operands stay next to their user: their shared buffers are short-lived
        if isinstance(v, OpResult) and v.op.parent is not None and not isinstance(lay, DotOperand):
            parent = v.op.parent
            parent.insert(parent.ops.index(v.op) + 1, op)
            return
        block.insert(block.ops.index(user), op)

    def _natural_result(self, op: Operation) -> Layout | None:
        """Ops whose result layout follows from their operands'."""
        if isinstance(op, MEMORY) and op.results and is_tile(op.operands[0]):
            return self.layout.get(op.operands[0])
        if isinstance(op, ReduceOp) and op.results and is_tile(op.results[0]):
            src = self.layout.get(op.operands[0])
            return Slice(src, op.axis) if src is not None else None
        return None

    def _fix_result(self, op: Operation, block: Block, root: Block) -> None:
        natural = self._natural_result(op)
        res = op.results[0] if op.results else None
        if natural is None or res is None or self.layout.get(res) == natural:
            return
        from .ir_utils import replace_uses

        assigned = self.layout[res]
        t = res.type
        assert isinstance(t, TileType)
        cv = ConvertLayoutOp.create([res], [t.with_layout(assigned)], loc=op.loc)
        replace_uses(root, res, cv.result)
        block.insert(block.ops.index(op) + 1, cv)
        self.layout[cv.result] = assigned
        self.layout[res] = natural

    def _clone(self, v: Value, want: Layout) -> Value:
        key = (v, want)
        if key in self.clones:
            return self.clones[key]
        assert isinstance(v, OpResult)
        op = v.op
        wants = self.s.operand_layouts(op, want)
        operands = []
        for x, w in zip(op.operands, wants):
            if w is not None and is_tile(x) and self.layout.get(x) != w:
                operands.append(self._clone(x, w))
            else:
                operands.append(x)
        t = v.type
        assert isinstance(t, TileType)
        new = type(op).create(operands, [t.with_layout(want)], op.attributes(), loc=op.loc)
        assert op.parent is not None
        op.parent.insert(op.parent.ops.index(op) + 1, new)
        self.layout[new.result] = want
        self.clones[key] = new.result
        return new.result


class AssignLayouts(Pass):
    """Attach a layout to every tile type; insert convert_layout where needed."""

    name = "assign-layouts"

    def run(self, module: Module) -> None:
        """Give every tile a layout (recording `num_warps`), inserting convert_layout where producer
        and consumer disagree."""
        nw = self.options.num_warps
        module.attributes["num_warps"] = nw
        for f in module.functions:
            axes = AxisAnalysis(f)
            solver = _Solver(f, nw, self.options.arch, self.options.num_stages,
                             store_accumulators=self.options.warp_specialize)
            solver.anchors(axes)
            solver.solve()
            solver.fill_defaults()
            m = _Materializer(solver)
            m.fix_uses(f.body)
            m.retype()
            for op in f.walk():
                for v in op.operands:
                    if isinstance(v.type, TileType) and v.type.layout is None and v in solver.layout:
                        v.type = v.type.with_layout(solver.layout[v])
            _check_all_laid_out(f)


def _check_all_laid_out(f: Function) -> None:
    for op in f.walk():
        for v in list(op.results) + list(op.operands):
            t = v.type
            if isinstance(t, TileType) and t.layout is None:
                raise AssertionError(f"{op.NAME}: tile without a layout after layout assignment")


class RemoveTrivialConverts(Pass):
    """Drop convert_layout ops whose source already has the target layout; fold chains."""

    name = "remove-converts"

    def run(self, module: Module) -> None:
        """Drop convert_layout ops to the layout their source already has, folding chains of two."""
        from .ir_utils import replace_uses

        for f in module.functions:
            for op in list(f.walk()):
                if not isinstance(op, ConvertLayoutOp) or op.parent is None:
                    continue
                src = op.operands[0]
                if isinstance(src, OpResult) and isinstance(src.op, ConvertLayoutOp):
                    op.operands = [src.op.operands[0]]
                    src = op.operands[0]
                if src.type == op.result.type:
                    replace_uses(f.body, op.result, src)
                    op.parent.remove(op)


def element_bytes(t: TileType) -> int:
    e = element_of(t)
    return e.bytes
