"""An llvmlite-style builder for the tile IR: an insertion point, a current location, one method per op.

Every method creates one op at the insertion point (the end of a block, or before an op), gives it
the builder's current `loc`, computes its result types from its operands and returns the result
(or the op itself for control flow, whose blocks the caller fills). The builder checks what it can
cheaply (operand types that must match); it does not replace the verifier.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tc_lang.diagnostics import Location

from . import ops as O
from .types import (
    I1,
    I32,
    I64,
    ElementType,
    IRType,
    PointerType,
    ScalarType,
    TileType,
    element_of,
    like,
    shape_of,
)


class BuilderError(ValueError):
    """Operands that do not fit an op: a bug in the caller, never a user error."""


def _with_shape(element: ElementType, shape: Sequence[int]) -> IRType:
    return TileType(tuple(shape), element) if len(shape) else element


def normalize_constant(value: int | float | bool, type: IRType) -> int | float | bool:
    """The canonical Python value of a constant of `type`: bool for i1, a signed int for iN, float."""
    el = element_of(type)
    if not isinstance(el, ScalarType):
        if isinstance(value, (int, bool)) and int(value) == 0:
            return 0
        raise BuilderError(f"constant {value!r} of pointer type {type}")
    if el.name == "i1":
        return bool(value)
    if el.is_int:
        if isinstance(value, float):
            value = int(value)
        bits = el.bits
        v = int(value) & ((1 << bits) - 1)
        return v - (1 << bits) if v >= 1 << (bits - 1) else v
    return float(value)


class Builder:
    """Creates ops at an insertion point. `loc` is given to every op created."""

    def __init__(self, block: O.Block | None = None, loc: Location | None = None) -> None:
        self.block: O.Block | None = block
        self._before: O.Operation | None = None
        self.loc = loc

    # ---------------------------------------------------------------------- insertion point

    def position_at_end(self, block: O.Block) -> None:
        """Insert new ops at the end of `block` from now on."""
        self.block, self._before = block, None

    def position_before(self, op: O.Operation) -> None:
        """Insert new ops just before `op` (which must be in a block) from now on."""
        if op.parent is None:
            raise BuilderError(f"{op.NAME} is not in a block")
        self.block, self._before = op.parent, op

    @contextmanager
    def _restoring(self) -> Iterator[Builder]:
        saved = (self.block, self._before)
        try:
            yield self
        finally:
            self.block, self._before = saved

    @contextmanager
    def at_end(self, block: O.Block) -> Iterator[Builder]:
        """Insert at the end of `block` inside the `with`, then return to where we were."""
        with self._restoring():
            self.position_at_end(block)
            yield self

    @contextmanager
    def before(self, op: O.Operation) -> Iterator[Builder]:
        """Insert just before `op` inside the `with`."""
        with self._restoring():
            self.position_before(op)
            yield self

    @contextmanager
    def location(self, loc: Location | None) -> Iterator[Builder]:
        """New ops take `loc` inside the `with` (None keeps the current one)."""
        saved = self.loc
        if loc is not None:
            self.loc = loc
        try:
            yield self
        finally:
            self.loc = saved

    def insert(self, op: O.Operation) -> O.Operation:
        """Place a ready-made op at the insertion point."""
        if self.block is None:
            raise BuilderError("the builder has no insertion point")
        if self._before is None:
            self.block.append(op)
        else:
            self.block.insert(self.block.ops.index(self._before), op)
        return op

    def create(
        self,
        cls: type[O.Operation],
        operands: Sequence[O.Value],
        result_types: Sequence[IRType],
        regions: Sequence[O.Block] = (),
        **attributes: Any,
    ) -> O.Operation:
        """Generic creation: any op class, with explicit result types."""
        op = cls.create(operands, result_types, attributes, regions, self.loc)
        return self.insert(op)

    def _one(
        self, cls: type[O.Operation], operands: Sequence[O.Value], type: IRType, **attributes: Any
    ) -> O.OpResult:
        return self.create(cls, operands, [type], **attributes).result

    # ------------------------------------------------------------------- constants, ids, ranges

    def constant(self, value: int | float | bool, type: IRType) -> O.OpResult:
        """A scalar constant, or a tile of `type` filled with `value`."""
        return self._one(O.ConstantOp, [], type, value=normalize_constant(value, type))

    def program_id(self, axis: int) -> O.OpResult:
        """The program's index along grid `axis` (0..2): i32."""
        self._axis(axis)
        return self._one(O.ProgramIdOp, [], I32, axis=axis)

    def num_programs(self, axis: int) -> O.OpResult:
        """The grid size along `axis` (0..2): i32."""
        self._axis(axis)
        return self._one(O.NumProgramsOp, [], I32, axis=axis)

    @staticmethod
    def _axis(axis: int) -> None:
        if axis not in (0, 1, 2):
            raise BuilderError(f"grid axis must be 0, 1 or 2, not {axis}")

    def make_range(self, start: int, end: int) -> O.OpResult:
        """The i32 tile start, start+1, ..., end-1 (`end` excluded)."""
        if end <= start:
            raise BuilderError(f"empty range {start} ... {end}")
        return self._one(O.MakeRangeOp, [], TileType((end - start,), I32), start=start, end=end)

    # ---------------------------------------------------------------------------- shape ops

    def splat(self, value: O.Value, shape: Sequence[int]) -> O.OpResult:
        """A tile of `shape` with the scalar `value` in every element."""
        if isinstance(value.type, TileType):
            raise BuilderError(f"splat of a tile {value.type}")
        return self._one(O.SplatOp, [value], TileType(tuple(shape), value.type))

    def broadcast(self, value: O.Value, shape: Sequence[int]) -> O.OpResult:
        """`value` stretched to `shape` along its size-1 dimensions (the rank stays the same)."""
        t = value.type
        if not isinstance(t, TileType) or t.rank != len(shape):
            raise BuilderError(f"broadcast of {t} to rank {len(shape)}")
        for a, b in zip(t.shape, shape):
            if a != b and a != 1:
                raise BuilderError(f"cannot broadcast {t} to {list(shape)}")
        return self._one(O.BroadcastOp, [value], TileType(tuple(shape), t.element))

    def expand_dims(self, value: O.Value, axis: int) -> O.OpResult:
        """`value` with a new dimension of size 1 inserted at `axis`."""
        shape = list(shape_of(value.type))
        if not 0 <= axis <= len(shape):
            raise BuilderError(f"expand_dims axis {axis} out of range for {value.type}")
        shape.insert(axis, 1)
        return self._one(O.ExpandDimsOp, [value], TileType(tuple(shape), element_of(value.type)), axis=axis)

    def reshape(self, value: O.Value, shape: Sequence[int]) -> O.OpResult:
        """Same elements in another shape; shape () turns a one-element tile into a scalar."""
        n = 1
        for d in shape:
            n *= d
        src = value.type
        if (src.numel if isinstance(src, TileType) else 1) != n:
            raise BuilderError(f"reshape of {src} to {list(shape)} changes the element count")
        return self._one(O.ReshapeOp, [value], _with_shape(element_of(src), shape))

    def trans(self, value: O.Value, perm: Sequence[int] | None = None) -> O.OpResult:
        """Permute dimensions (default: reverse them). Result dim i is source dim perm[i]."""
        t = value.type
        if not isinstance(t, TileType):
            raise BuilderError(f"trans of a scalar {t}")
        p = tuple(perm) if perm is not None else tuple(reversed(range(t.rank)))
        if sorted(p) != list(range(t.rank)):
            raise BuilderError(f"{list(p)} is not a permutation of the {t.rank} axes of {t}")
        return self._one(O.TransOp, [value], TileType(tuple(t.shape[i] for i in p), t.element), perm=p)

    # --------------------------------------------------------------------------- element-wise

    @staticmethod
    def _same(kind: str, *values: O.Value) -> IRType:
        t = values[0].type
        for v in values[1:]:
            if v.type != t:
                raise BuilderError(f"{kind}: operand types differ: {t} and {v.type}")
        return t

    def binary(self, kind: str, lhs: O.Value, rhs: O.Value) -> O.OpResult:
        """Element-wise arithmetic `kind` on operands of equal type (float kinds start with f)."""
        if kind not in O.INT_BINARY and kind not in O.FLOAT_BINARY:
            raise BuilderError(f"unknown binary kind {kind!r}")
        t = self._same(kind, lhs, rhs)
        el = element_of(t)
        if not isinstance(el, ScalarType) or (kind in O.FLOAT_BINARY) != el.is_float:
            raise BuilderError(f"binary {kind} on {t}")
        return self._one(O.BinaryOp, [lhs, rhs], t, kind=kind)

    def cmp(self, predicate: str, lhs: O.Value, rhs: O.Value) -> O.OpResult:
        """Element-wise comparison by `predicate` -> i1 of the operands' shape."""
        if predicate not in O.INT_PREDICATES and predicate not in O.FLOAT_PREDICATES:
            raise BuilderError(f"unknown predicate {predicate!r}")
        t = self._same(predicate, lhs, rhs)
        return self._one(O.CmpOp, [lhs, rhs], like(t, I1), predicate=predicate)

    def unary(self, kind: str, value: O.Value, approx: bool = False) -> O.OpResult:
        """Element-wise unary op or math function `kind`; `approx` picks the fast hardware version."""
        if kind not in O.UNARY_KINDS:
            raise BuilderError(f"unknown unary kind {kind!r}")
        return self._one(O.UnaryOp, [value], value.type, kind=kind, approx=approx)

    def fma(self, a: O.Value, b: O.Value, c: O.Value) -> O.OpResult:
        """a * b + c, rounded once; the three operands have one type."""
        return self._one(O.FmaOp, [a, b, c], self._same("fma", a, b, c))

    def select(self, cond: O.Value, a: O.Value, b: O.Value) -> O.OpResult:
        """cond ? a : b element-wise; `cond` is i1 of the operands' shape or a scalar i1."""
        t = self._same("select", a, b)
        if element_of(cond.type) != I1 or shape_of(cond.type) not in ((), shape_of(t)):
            raise BuilderError(f"select condition {cond.type} does not fit {t}")
        return self._one(O.SelectOp, [cond, a, b], t)

    def cast(self, kind: str, value: O.Value, to: IRType) -> O.OpResult:
        """Convert to `to`: an element type (the shape is kept) or a full type."""
        if kind not in O.CAST_KINDS:
            raise BuilderError(f"unknown cast kind {kind!r}")
        result = to if isinstance(to, TileType) else like(value.type, to)
        if shape_of(result) != shape_of(value.type):
            raise BuilderError(f"cast {kind} changes the shape: {value.type} to {result}")
        return self._one(O.CastOp, [value], result, kind=kind)

    def convert(self, value: O.Value, to: ElementType, signed_src: bool, signed_dst: bool = True) -> O.Value:
        """Numeric conversion of the elements to `to`, choosing the cast kind; `signed_src` says
        how to read an integer source (sext/sitofp or zext/uitofp), `signed_dst` how float->int
        rounds (fptosi or fptoui). Returns `value` itself when nothing changes. Conversion to i1
        truncates; C's `x != 0` is the caller's business."""
        src = element_of(value.type)
        if src == to:
            return value
        kind = conversion_kind(src, to, signed_src, signed_dst)
        if kind == "fpcast":  # f16 <-> bf16 goes through f32
            mid = self.cast("fpext", value, ScalarType("f32"))
            return self.cast("fptrunc", mid, to)
        if kind == "ptrtoint":
            as_int = self.cast("ptrtoint", value, I64)
            return self.convert(as_int, to, signed_src=False)
        if kind == "inttoptr":
            wide = self.convert(value, I64, signed_src)
            return self.cast("inttoptr", wide, to)
        return self.cast(kind, value, to)

    def addptr(self, ptr: O.Value, offset: O.Value) -> O.OpResult:
        """ptr + offset elements; the shapes must be equal (scalar pointer with scalar offset)."""
        if not isinstance(element_of(ptr.type), PointerType):
            raise BuilderError(f"addptr on non-pointer {ptr.type}")
        off_el = element_of(offset.type)
        if off_el not in (I32, I64) or shape_of(ptr.type) != shape_of(offset.type):
            raise BuilderError(f"addptr offset {offset.type} does not fit {ptr.type}")
        return self._one(O.AddPtrOp, [ptr, offset], ptr.type)

    # ------------------------------------------------------------------------------- memory

    @staticmethod
    def _pointee(ptr: O.Value) -> ScalarType | PointerType:
        el = element_of(ptr.type)
        if not isinstance(el, PointerType):
            raise BuilderError(f"memory access through non-pointer {ptr.type}")
        return el.pointee

    def _check_mask(self, ptr: O.Value, mask: O.Value | None) -> None:
        if mask is not None and (
            element_of(mask.type) != I1 or shape_of(mask.type) != shape_of(ptr.type)
        ):
            raise BuilderError(f"mask {mask.type} does not fit pointers {ptr.type}")

    def load(
        self,
        ptr: O.Value,
        mask: O.Value | None = None,
        other: O.Value | None = None,
        volatile: bool = False,
    ) -> O.OpResult:
        """Read through the pointers in `ptr`; where `mask` is false nothing is read and the result is
        `other` (undefined without it)."""
        result = like(ptr.type, self._pointee(ptr))
        self._check_mask(ptr, mask)
        operands = [ptr]
        if mask is not None:
            operands.append(mask)
            if other is not None:
                if other.type != result:
                    raise BuilderError(f"load 'other' {other.type} is not {result}")
                operands.append(other)
        elif other is not None:
            raise BuilderError("load with 'other' needs a mask")
        return self._one(O.LoadOp, operands, result, volatile=volatile)

    def store(self, ptr: O.Value, value: O.Value, mask: O.Value | None = None) -> O.Operation:
        """Write `value` through the pointers in `ptr`; nothing is written where `mask` is false."""
        if value.type != like(ptr.type, self._pointee(ptr)):
            raise BuilderError(f"store of {value.type} through {ptr.type}")
        self._check_mask(ptr, mask)
        operands = [ptr, value] + ([mask] if mask is not None else [])
        return self.create(O.StoreOp, operands, [])

    def atomic_rmw(
        self, kind: str, ptr: O.Value, value: O.Value, mask: O.Value | None = None
    ) -> O.OpResult:
        """Atomically combine `value` into memory at each pointer by `kind` (add, max, xchg, ...); returns the
        old values."""
        if value.type != like(ptr.type, self._pointee(ptr)):
            raise BuilderError(f"atomic {kind} of {value.type} through {ptr.type}")
        self._check_mask(ptr, mask)
        operands = [ptr, value] + ([mask] if mask is not None else [])
        return self._one(O.AtomicRMWOp, operands, value.type, kind=kind)

    def atomic_cas(self, ptr: O.Value, cmp: O.Value, value: O.Value) -> O.OpResult:
        """Atomically write `value` at each pointer whose memory equals `cmp`; returns the old values."""
        t = self._same("atomic_cas", cmp, value)
        if t != like(ptr.type, self._pointee(ptr)):
            raise BuilderError(f"atomic_cas of {t} through {ptr.type}")
        return self._one(O.AtomicCASOp, [ptr, cmp, value], t)

    # -------------------------------------------------------------------------- tile compute

    def reduce(self, kind: str, value: O.Value, axis: int) -> O.OpResult:
        """Reduce `axis` away; a rank-1 tile gives a scalar."""
        if kind not in O.REDUCE_KINDS:
            raise BuilderError(f"unknown reduction kind {kind!r}")
        t = value.type
        if not isinstance(t, TileType) or not 0 <= axis < t.rank:
            raise BuilderError(f"reduce axis {axis} of {t}")
        shape = t.shape[:axis] + t.shape[axis + 1 :]
        return self._one(O.ReduceOp, [value], _with_shape(t.element, shape), kind=kind, axis=axis)

    def dot(self, a: O.Value, b: O.Value, acc: O.Value, precision: str = "ieee") -> O.OpResult:
        """acc + a @ b for 2-D tiles a [M, K], b [K, N], acc [M, N]; `precision` is "ieee" or "tf32"."""
        ta, tb, tc = a.type, b.type, acc.type
        if not (
            isinstance(ta, TileType)
            and isinstance(tb, TileType)
            and isinstance(tc, TileType)
            and ta.rank == tb.rank == tc.rank == 2
            and ta.shape[1] == tb.shape[0]
            and tc.shape == (ta.shape[0], tb.shape[1])
        ):
            raise BuilderError(f"dot shapes do not fit: {ta} @ {tb} + {tc}")
        return self._one(O.DotOp, [a, b, acc], tc, precision=precision)

    def barrier(self) -> O.Operation:
        """A barrier across the program's threads (`__debug_barrier()`)."""
        return self.create(O.BarrierOp, [], [])

    def assume(self, value: O.Value, multiple_of: int = 1, aligned: int = 1) -> O.OpResult:
        """`value` with the facts of a declaration attribute (see `ops.AssumeOp`)."""
        el = element_of(value.type)
        if not (isinstance(el, PointerType) or (isinstance(el, ScalarType) and el.is_int)):
            raise BuilderError(f"assume on {value.type}: only integers and pointers have such facts")
        if multiple_of < 1 or aligned < 1:
            raise BuilderError(f"assume needs positive facts, got multiple_of={multiple_of} aligned={aligned}")
        return self._one(O.AssumeOp, [value], value.type, multiple_of=multiple_of, aligned=aligned)

    # -------------------------------------------------------------------- structured control

    def for_(
        self,
        lb: O.Value,
        ub: O.Value,
        step: O.Value,
        inits: Sequence[O.Value] = (),
        iv_name: str | None = None,
        arg_names: Sequence[str | None] = (),
    ) -> O.ForOp:
        """A counted loop; fill `op.body` (args: iv, *iter args) and end it with `yield_`."""
        for v in (lb, ub, step):
            if v.type != I32:
                raise BuilderError(f"for bounds must be i32, not {v.type}")
        body = O.Block([I32] + [v.type for v in inits], [iv_name, *arg_names])
        op = self.create(O.ForOp, [lb, ub, step, *inits], [v.type for v in inits], [body])
        assert isinstance(op, O.ForOp)
        return op

    def if_(self, cond: O.Value, result_types: Sequence[IRType] = ()) -> O.IfOp:
        """An if with empty then/else blocks; each must end with `yield_` of the results."""
        if cond.type != I1:
            raise BuilderError(f"if condition must be a scalar i1, not {cond.type}")
        op = self.create(O.IfOp, [cond], list(result_types), [O.Block(), O.Block()])
        assert isinstance(op, O.IfOp)
        return op

    def while_(
        self,
        inits: Sequence[O.Value],
        result_types: Sequence[IRType] | None = None,
        arg_names: Sequence[str | None] = (),
    ) -> O.WhileOp:
        """A while loop: `before` (args of the inits' types) ends in `condition`; `after` (args
        of the result types, default the inits' types) ends in `yield_` of the next args."""
        types = [v.type for v in inits]
        results = list(result_types) if result_types is not None else types
        before = O.Block(types, arg_names)
        after = O.Block(results, arg_names)
        op = self.create(O.WhileOp, list(inits), results, [before, after])
        assert isinstance(op, O.WhileOp)
        return op

    def yield_(self, values: Sequence[O.Value] = ()) -> O.Operation:
        """End a for/if/while(after) region, passing `values` on."""
        return self.create(O.YieldOp, list(values), [])

    def condition(self, cond: O.Value, values: Sequence[O.Value] = ()) -> O.Operation:
        """End a while's `before` region: `values` go to `after` while the scalar i1 `cond` holds, else
        they are the loop's results."""
        if cond.type != I1:
            raise BuilderError(f"while condition must be a scalar i1, not {cond.type}")
        return self.create(O.ConditionOp, [cond, *values], [])

    def ret(self) -> O.Operation:
        """End the function (kernels return nothing)."""
        return self.create(O.ReturnOp, [], [])


def conversion_kind(src: ElementType, dst: ElementType, signed_src: bool, signed_dst: bool) -> str:
    """The cast kind that converts `src` elements to `dst` ("fpcast" for f16<->bf16)."""
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        if isinstance(src, PointerType) and isinstance(dst, PointerType):
            return "bitcast"
        return "ptrtoint" if isinstance(src, PointerType) else "inttoptr"
    if src.is_int and dst.is_int:
        if dst.bits < src.bits:
            return "trunc"
        return "sext" if signed_src and src.bits > 1 else "zext"
    if src.is_int:
        return "sitofp" if signed_src and src.bits > 1 else "uitofp"
    if dst.is_int:
        return "fptosi" if signed_dst else "fptoui"
    if src.bits == dst.bits:
        return "fpcast"
    return "fpext" if dst.bits > src.bits else "fptrunc"
