"""Checks that IR is well formed: op signatures, SSA dominance, region/terminator rules, layouts.

`verify(module_or_function)` raises `IRVerificationError` listing every problem found, each naming
the op, its source location and what is wrong. Passes run it between stages; a failure there is a
compiler bug, so the message shows the offending op as IR text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tc_lang.diagnostics import UNKNOWN_LOCATION, Category, Diagnostic, TcCompileError

from . import ops as O
from .layouts import Blocked, DotOperand, Layout, Mma, Shared, Slice
from .printer import print_op
from .types import I1, I32, IRType, PointerType, ScalarType, TileType, element_of, shape_of


class IRVerificationError(TcCompileError):
    """The IR breaks a rule of the IR (a compiler bug, or hand-written IR that is wrong)."""


class _Problem(Exception):
    pass


def layout_rank(layout: Layout) -> int:
    """The tile rank a layout describes."""
    if isinstance(layout, Blocked):
        return layout.rank
    if isinstance(layout, Slice):
        return layout_rank(layout.parent) - 1
    if isinstance(layout, Mma):
        return len(layout.warps_per_cta)
    if isinstance(layout, DotOperand):
        return layout_rank(layout.parent)
    assert isinstance(layout, Shared)
    return len(layout.order)


def _check(cond: bool, message: str | Callable[[], str]) -> None:
    """Raise _Problem(message) unless `cond`; a message that names types is a function, called only
    then (formatting tile types and layouts for checks that pass was half the verifier's time)."""
    if not cond:
        raise _Problem(message if isinstance(message, str) else message())


def _same_shape(a: IRType, b: IRType) -> bool:
    return shape_of(a) == shape_of(b) and isinstance(a, TileType) == isinstance(b, TileType)


def _is_int(t: IRType) -> bool:
    e = element_of(t)
    return isinstance(e, ScalarType) and e.is_int


def _is_float(t: IRType) -> bool:
    e = element_of(t)
    return isinstance(e, ScalarType) and e.is_float


def _is_ptr(t: IRType) -> bool:
    return isinstance(element_of(t), PointerType)


def _count(op: O.Operation, operands: int | tuple[int, int], results: int) -> None:
    lo, hi = (operands, operands) if isinstance(operands, int) else operands
    n = len(op.operands)
    _check(lo <= n <= hi, lambda: f"expects {lo if lo == hi else f'{lo} to {hi}'} operand(s), has {n}")
    _check(len(op.results) == results, lambda: f"expects {results} result(s), has {len(op.results)}")


def _types(values: Sequence[O.Value]) -> list[str]:
    return [str(v.type) for v in values]


# ------------------------------------------------------------------------------- per-op rules

_RULES: dict[type[O.Operation], Callable[[Any], None]] = {}


def _rule(cls: type[O.Operation]) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    def deco(f: Callable[[Any], None]) -> Callable[[Any], None]:
        _RULES[cls] = f
        return f

    return deco


@_rule(O.ConstantOp)
def _constant(op: O.ConstantOp) -> None:
    _count(op, 0, 1)
    t = op.results[0].type
    e = element_of(t)
    _check(isinstance(e, ScalarType), lambda: f"a constant must be a number, not {t}")
    _check(isinstance(op.value, (bool, int, float)), lambda: f"constant value {op.value!r} is not a number")
    if isinstance(e, ScalarType) and e.is_int:
        _check(not isinstance(op.value, float), lambda: f"a float value {op.value!r} for an {e} constant")


@_rule(O.ProgramIdOp)
@_rule(O.NumProgramsOp)
@_rule(O.GridDimOp)
def _program_id(op: O.ProgramIdOp) -> None:
    _count(op, 0, 1)
    _check(op.axis in (0, 1, 2), lambda: f"axis {op.axis} is not 0, 1 or 2")
    _check(op.results[0].type == I32, lambda: f"result must be i32, not {op.results[0].type}")


@_rule(O.WorkspaceOp)
def _workspace(op: O.WorkspaceOp) -> None:
    _count(op, 0, 1)
    _check(op.part in ("partials", "flags"), lambda: f"workspace part {op.part!r} is not 'partials' or 'flags'")
    _check(isinstance(op.results[0].type, PointerType), lambda: f"result must be a pointer, not {op.results[0].type}")


@_rule(O.PartialStoreOp)
@_rule(O.PartialAddOp)
def _partial(op: O.Operation) -> None:
    _count(op, 3, 1 if isinstance(op, O.PartialAddOp) else 0)
    ptr, slot, tile = (v.type for v in op.operands)
    _check(isinstance(tile, TileType), lambda: f"the partial sum must be a tile, not {tile}")
    _check(isinstance(ptr, PointerType) and isinstance(tile, TileType) and ptr.pointee == tile.element,
           lambda: f"the workspace pointer {ptr} does not point to the tile's elements")
    _check(slot == I32, lambda: f"the slot must be i32, not {slot}")
    if isinstance(op, O.PartialAddOp):
        _check(op.results[0].type == tile, lambda: f"result {op.results[0].type} differs from the accumulator {tile}")


@_rule(O.MakeRangeOp)
def _make_range(op: O.MakeRangeOp) -> None:
    _count(op, 0, 1)
    _check(op.end > op.start, lambda: f"empty range [{op.start}, {op.end})")
    t = op.results[0].type
    _check(isinstance(t, TileType) and t.shape == (op.end - op.start,) and t.element == I32,
           lambda: f"result must be tile<{op.end - op.start}xi32>, not {t}")


@_rule(O.SplatOp)
def _splat(op: O.SplatOp) -> None:
    _count(op, 1, 1)
    src, t = op.operands[0].type, op.results[0].type
    _check(not isinstance(src, TileType), lambda: f"splat of a tile {src} (use broadcast)")
    _check(isinstance(t, TileType) and t.element == src, lambda: f"splat of {src} cannot give {t}")


@_rule(O.BroadcastOp)
def _broadcast(op: O.BroadcastOp) -> None:
    _count(op, 1, 1)
    src, t = op.operands[0].type, op.results[0].type
    _check(isinstance(src, TileType) and isinstance(t, TileType), lambda: f"broadcast needs tiles, got {src} -> {t}")
    assert isinstance(src, TileType) and isinstance(t, TileType)
    _check(src.element == t.element, lambda: f"broadcast changes the element type {src.element} -> {t.element}")
    _check(src.rank == t.rank and all(a in (1, b) for a, b in zip(src.shape, t.shape)),
           lambda: f"cannot broadcast shape {list(src.shape)} to {list(t.shape)}")


@_rule(O.ExpandDimsOp)
def _expand_dims(op: O.ExpandDimsOp) -> None:
    _count(op, 1, 1)
    src, t = op.operands[0].type, op.results[0].type
    shape = list(shape_of(src))
    _check(0 <= op.axis <= len(shape), lambda: f"axis {op.axis} out of range for rank {len(shape)}")
    shape.insert(op.axis, 1)
    _check(isinstance(t, TileType) and list(t.shape) == shape and element_of(t) == element_of(src),
           lambda: f"expand_dims of {src} at axis {op.axis} gives shape {shape}, not {t}")


@_rule(O.ReshapeOp)
def _reshape(op: O.ReshapeOp) -> None:
    _count(op, 1, 1)
    src, t = op.operands[0].type, op.results[0].type
    n_src = src.numel if isinstance(src, TileType) else 1
    n_dst = t.numel if isinstance(t, TileType) else 1
    _check(element_of(src) == element_of(t), lambda: f"reshape changes the element type: {src} -> {t}")
    _check(n_src == n_dst, lambda: f"reshape of {n_src} element(s) to {n_dst}: {src} -> {t}")


@_rule(O.TransOp)
def _trans(op: O.TransOp) -> None:
    _count(op, 1, 1)
    src, t = op.operands[0].type, op.results[0].type
    _check(isinstance(src, TileType), lambda: f"trans of a non-tile {src}")
    assert isinstance(src, TileType)
    _check(sorted(op.perm) == list(range(src.rank)),
           lambda: f"perm {list(op.perm)} is not a permutation of rank {src.rank}")
    want = [src.shape[i] for i in op.perm]
    _check(isinstance(t, TileType) and list(t.shape) == want and t.element == src.element,
           lambda: f"trans of {src} by {list(op.perm)} gives shape {want}, not {t}")


@_rule(O.BinaryOp)
def _binary(op: O.BinaryOp) -> None:
    _count(op, 2, 1)
    a, b, t = op.operands[0].type, op.operands[1].type, op.results[0].type
    _check(a == b, lambda: f"operand types differ: {a} and {b}")
    _check(t == a, lambda: f"result type {t} differs from the operand type {a}")
    if op.kind in O.INT_BINARY:
        _check(_is_int(a), lambda: f"integer op {op.kind!r} on {a}")
    elif op.kind in O.FLOAT_BINARY:
        _check(_is_float(a), lambda: f"float op {op.kind!r} on {a}")
    else:
        _check(False, lambda: f"unknown binary kind {op.kind!r}")


@_rule(O.CmpOp)
def _cmp(op: O.CmpOp) -> None:
    _count(op, 2, 1)
    a, b, t = op.operands[0].type, op.operands[1].type, op.results[0].type
    _check(a == b, lambda: f"operand types differ: {a} and {b}")
    _check(element_of(t) == I1 and _same_shape(t, a), lambda: f"result must be i1 of the operands' shape, not {t}")
    if op.predicate in O.INT_PREDICATES:
        _check(_is_int(a) or _is_ptr(a), lambda: f"integer predicate {op.predicate!r} on {a}")
    elif op.predicate in O.FLOAT_PREDICATES:
        _check(_is_float(a), lambda: f"float predicate {op.predicate!r} on {a}")
    else:
        _check(False, lambda: f"unknown predicate {op.predicate!r}")


def _bits(t: IRType) -> int:
    return element_of(t).bits


@_rule(O.CastOp)
def _cast(op: O.CastOp) -> None:
    _count(op, 1, 1)
    src, t = op.operands[0].type, op.results[0].type
    _check(_same_shape(src, t), lambda: f"cast changes the shape: {src} -> {t}")
    k = op.kind
    ok = {
        "sext": _is_int(src) and _is_int(t) and _bits(t) > _bits(src),
        "zext": _is_int(src) and _is_int(t) and _bits(t) > _bits(src),
        "trunc": _is_int(src) and _is_int(t) and _bits(t) < _bits(src),
        "fpext": _is_float(src) and _is_float(t) and _bits(t) > _bits(src),
        "fptrunc": _is_float(src) and _is_float(t) and (_bits(t) < _bits(src) or element_of(src) != element_of(t)),
        "sitofp": _is_int(src) and _is_float(t),
        "uitofp": _is_int(src) and _is_float(t),
        "fptosi": _is_float(src) and _is_int(t),
        "fptoui": _is_float(src) and _is_int(t),
        "bitcast": _bits(src) == _bits(t) and (_is_ptr(src) == _is_ptr(t)),
        "ptrtoint": _is_ptr(src) and _is_int(t),
        "inttoptr": _is_int(src) and _is_ptr(t),
    }
    _check(k in ok, lambda: f"unknown cast kind {k!r}")
    _check(ok[k], lambda: f"cast {k} cannot convert {src} to {t}")


_INT_UNARY = {"neg", "not", "iabs"}


@_rule(O.UnaryOp)
def _unary(op: O.UnaryOp) -> None:
    _count(op, 1, 1)
    a, t = op.operands[0].type, op.results[0].type
    _check(op.kind in O.UNARY_KINDS, lambda: f"unknown unary kind {op.kind!r}")
    _check(t == a, lambda: f"result type {t} differs from the operand type {a}")
    if op.kind in _INT_UNARY:
        _check(_is_int(a), lambda: f"integer op {op.kind!r} on {a}")
    else:
        _check(_is_float(a), lambda: f"float op {op.kind!r} on {a}")


@_rule(O.FmaOp)
def _fma(op: O.FmaOp) -> None:
    _count(op, 3, 1)
    ts = [v.type for v in op.operands]
    _check(ts[0] == ts[1] == ts[2] == op.results[0].type, lambda: f"fma needs equal types, got {_types(op.operands)}")
    _check(_is_float(ts[0]), lambda: f"fma on {ts[0]}")


@_rule(O.SelectOp)
def _select(op: O.SelectOp) -> None:
    _count(op, 3, 1)
    c, a, b = (v.type for v in op.operands)
    t = op.results[0].type
    _check(a == b == t, lambda: f"select operands and result must have one type, got {a}, {b} -> {t}")
    _check(element_of(c) == I1 and (not isinstance(c, TileType) or _same_shape(c, a)),
           lambda: f"select condition must be i1 (scalar or of shape {list(shape_of(a))}), not {c}")


@_rule(O.AddPtrOp)
def _addptr(op: O.AddPtrOp) -> None:
    _count(op, 2, 1)
    p, off = op.operands[0].type, op.operands[1].type
    _check(_is_ptr(p), lambda: f"addptr needs a pointer, got {p}")
    _check(_is_int(off) and _bits(off) in (8, 16, 32, 64) and _same_shape(p, off),
           lambda: f"addptr offset must be an integer of the pointer's shape, got {off} for {p}")
    _check(op.results[0].type == p, lambda: f"addptr result {op.results[0].type} differs from the pointer type {p}")


def _mask_ok(mask: IRType, ptr: IRType) -> bool:
    return element_of(mask) == I1 and _same_shape(mask, ptr)


@_rule(O.LoadOp)
def _load(op: O.LoadOp) -> None:
    _count(op, (1, 3), 1)
    p, t = op.operands[0].type, op.results[0].type
    _check(_is_ptr(p), lambda: f"load from a non-pointer {p}")
    pe = element_of(p)
    assert isinstance(pe, PointerType)
    _check(element_of(t) == pe.pointee and _same_shape(t, p), lambda: f"load through {p} cannot give {t}")
    if len(op.operands) > 1:
        m = op.operands[1].type
        _check(_mask_ok(m, p), lambda: f"load mask {m} must be i1 of the pointer's shape {list(shape_of(p))}")
    if len(op.operands) > 2:
        o = op.operands[2].type
        _check(element_of(o) == element_of(t) and _same_shape(o, t), lambda: f"load `other` {o} must be of type {t}")


@_rule(O.StoreOp)
def _store(op: O.StoreOp) -> None:
    _count(op, (2, 3), 0)
    p, v = op.operands[0].type, op.operands[1].type
    _check(_is_ptr(p), lambda: f"store to a non-pointer {p}")
    pe = element_of(p)
    assert isinstance(pe, PointerType)
    _check(element_of(v) == pe.pointee and _same_shape(v, p), lambda: f"cannot store {v} through {p}")
    if len(op.operands) > 2:
        m = op.operands[2].type
        _check(_mask_ok(m, p), lambda: f"store mask {m} must be i1 of the pointer's shape {list(shape_of(p))}")


_RMW = {"add": "i", "fadd": "f", "max": "i", "umax": "i", "fmax": "f", "min": "i", "umin": "i", "fmin": "f",
        "and": "i", "or": "i", "xor": "i", "xchg": "if"}


@_rule(O.AtomicRMWOp)
def _atomic_rmw(op: O.AtomicRMWOp) -> None:
    _count(op, (2, 3), 1)
    p, v, t = op.operands[0].type, op.operands[1].type, op.results[0].type
    _check(op.kind in _RMW, lambda: f"unknown atomic kind {op.kind!r}")
    _check(_is_ptr(p), lambda: f"atomic on a non-pointer {p}")
    pe = element_of(p)
    assert isinstance(pe, PointerType)
    _check(element_of(v) == pe.pointee and _same_shape(v, p),
           lambda: f"atomic value {v} does not match the pointer {p}")
    _check(t == v, lambda: f"atomic result {t} differs from the value type {v}")
    _check(("f" if _is_float(v) else "i") in _RMW.get(op.kind, "if"), lambda: f"atomic {op.kind} on {v}")
    if len(op.operands) > 2:
        _check(_mask_ok(op.operands[2].type, p),
               lambda: f"atomic mask {op.operands[2].type} must be i1 shaped like {p}")


@_rule(O.AtomicCASOp)
def _atomic_cas(op: O.AtomicCASOp) -> None:
    _count(op, 3, 1)
    p, c, v = (x.type for x in op.operands)
    _check(_is_ptr(p), lambda: f"atomic cas on a non-pointer {p}")
    pe = element_of(p)
    assert isinstance(pe, PointerType)
    _check(c == v == op.results[0].type and element_of(v) == pe.pointee and _same_shape(v, p),
           lambda: f"atomic cas types do not match: {_types(op.operands)} -> {op.results[0].type}")


@_rule(O.ReduceOp)
def _reduce(op: O.ReduceOp) -> None:
    _count(op, 1, 1)
    src, t = op.operands[0].type, op.results[0].type
    _check(op.kind in O.REDUCE_KINDS, lambda: f"unknown reduction {op.kind!r}")
    _check(isinstance(src, TileType), lambda: f"reduce of a non-tile {src}")
    assert isinstance(src, TileType)
    _check(0 <= op.axis < src.rank, lambda: f"axis {op.axis} out of range for rank {src.rank}")
    want = src.shape[: op.axis] + src.shape[op.axis + 1 :]
    _check(shape_of(t) == want and isinstance(t, TileType) == bool(want) and element_of(t) == src.element,
           lambda: f"reducing axis {op.axis} of {src} gives shape {list(want)} of {src.element}, not {t}")
    _check((op.kind[0] == "f") == _is_float(src), lambda: f"reduction {op.kind} on {src.element}")


@_rule(O.UndefOp)
def _undef(op: O.UndefOp) -> None:
    _count(op, 0, 1)
    _check(isinstance(element_of(op.results[0].type), ScalarType),
           lambda: f"undef of {op.results[0].type}: not a number")


@_rule(O.DotOp)
def _dot(op: O.DotOp) -> None:
    _count(op, (3, 4), 1)
    if len(op.operands) == 4:
        _check(op.operands[3].type == I1,
               lambda: f"a dot's use_acc operand must be a scalar i1, not {op.operands[3].type}")
    a, b, c = (v.type for v in op.operands[:3])
    _check(all(isinstance(x, TileType) and x.rank == 2 for x in (a, b, c)),
           lambda: f"dot needs 2-D tiles, got {_types(op.operands)}")
    assert isinstance(a, TileType) and isinstance(b, TileType) and isinstance(c, TileType)
    (m, k), (k2, n) = a.shape, b.shape
    _check(k == k2, lambda: f"dot inner dimensions differ: [{m}, {k}] @ [{k2}, {n}]")
    _check(c.shape == (m, n), lambda: f"dot accumulator {list(c.shape)} is not [{m}, {n}]")
    _check(a.element == b.element, lambda: f"dot operand types differ: {a.element} and {b.element}")
    _check(op.results[0].type == c, lambda: f"dot result {op.results[0].type} differs from the accumulator {c}")
    _check(op.precision in ("ieee", "tf32"), lambda: f"unknown precision {op.precision!r}")
    _check(isinstance(op.asynchronous, bool), lambda: f"asynchronous must be a bool, not {op.asynchronous!r}")


@_rule(O.DotWaitOp)
def _dot_wait(op: O.DotWaitOp) -> None:
    _count(op, (1, 2), 1)
    if len(op.operands) == 2:
        _check(op.operands[1].type == I1,
               lambda: f"a dot_wait's valid operand must be a scalar i1, not {op.operands[1].type}")
    _check(isinstance(op.operands[0].type, TileType),
           lambda: f"dot_wait of {_types(op.operands)}: a dot result is a tile")
    _check(op.results[0].type == op.operands[0].type,
           lambda: f"dot_wait changes the type {op.operands[0].type} -> {op.results[0].type}")
    _check(isinstance(op.pending, int) and op.pending >= 0, lambda: f"pending must be >= 0, not {op.pending!r}")


@_rule(O.BarrierOp)
def _barrier(op: O.BarrierOp) -> None:
    _count(op, 0, 0)


@_rule(O.AssumeOp)
def _assume(op: O.AssumeOp) -> None:
    _count(op, 1, 1)
    src, t = op.operands[0].type, op.results[0].type
    _check(src == t, lambda: f"assume changes the type {src} -> {t}")
    _check(_is_int(src) or _is_ptr(src), lambda: f"assume on {src}: only integers and pointers have such facts")
    for name in ("multiple_of", "aligned"):
        n = getattr(op, name)
        _check(isinstance(n, int) and not isinstance(n, bool) and n >= 1,
               lambda: f"{name} must be a positive integer, not {n!r}")
    _check(op.aligned & (op.aligned - 1) == 0, lambda: f"aligned {op.aligned} is not a power of two")


@_rule(O.ConvertLayoutOp)
def _convert_layout(op: O.ConvertLayoutOp) -> None:
    _count(op, 1, 1)
    src, t = op.operands[0].type, op.results[0].type
    _check(_same_shape(src, t) and element_of(src) == element_of(t),
           lambda: f"convert_layout changes the tile: {src} -> {t}")
    if op.columns:
        last = t.shape[-1] if isinstance(t, TileType) and t.rank else 0
        _check(isinstance(op.columns, int) and op.columns > 0 and last % op.columns == 0,
               lambda: f"convert_layout in rounds of {op.columns!r} columns: they must divide the tile's "
                       f"last dimension ({last})")


def _shared(t: IRType, what: str) -> TileType:
    _check(isinstance(t, TileType) and isinstance(t.layout, Shared), lambda: f"{what} must be a shared tile, not {t}")
    assert isinstance(t, TileType)
    return t


@_rule(O.LocalAllocOp)
def _local_alloc(op: O.LocalAllocOp) -> None:
    _count(op, (0, 1), 1)
    t = _shared(op.results[0].type, "the result")
    if op.operands:
        src = op.operands[0].type
        _check(isinstance(src, TileType) and src.shape == t.shape and src.element == t.element,
               lambda: f"local_alloc of {src} into {t}")


@_rule(O.LocalSubviewOp)
def _local_subview(op: O.LocalSubviewOp) -> None:
    _count(op, 2, 1)
    src = _shared(op.operands[0].type, "the buffer")
    t = _shared(op.results[0].type, "the result")
    _check(op.operands[1].type == I32, lambda: f"subview index must be i32, not {op.operands[1].type}")
    _check(t.shape == src.shape[1:] and t.element == src.element, lambda: f"subview of {src} gives {t}")


@_rule(O.LocalTransOp)
def _local_trans(op: O.LocalTransOp) -> None:
    _count(op, 1, 1)
    src = _shared(op.operands[0].type, "the source")
    t = _shared(op.results[0].type, "the result")
    _check(sorted(op.perm) == list(range(src.rank)), lambda: f"bad permutation {list(op.perm)}")
    _check(t.shape == tuple(src.shape[p] for p in op.perm) and t.element == src.element,
           lambda: f"local_trans {list(op.perm)} of {src} gives {t}")


@_rule(O.LocalLoadOp)
def _local_load(op: O.LocalLoadOp) -> None:
    _count(op, 1, 1)
    src = _shared(op.operands[0].type, "the source")
    t = op.results[0].type
    _check(isinstance(t, TileType) and t.shape == src.shape and t.element == src.element
           and not isinstance(t.layout, Shared), lambda: f"local_load of {src} gives {t}")


@_rule(O.LocalStoreOp)
def _local_store(op: O.LocalStoreOp) -> None:
    _count(op, 2, 0)
    src = op.operands[0].type
    t = _shared(op.operands[1].type, "the destination")
    _check(isinstance(src, TileType) and not isinstance(src.layout, Shared) and src.shape == t.shape
           and src.element == t.element, lambda: f"local_store of {src} into {t}")


@_rule(O.AsyncCopyOp)
def _async_copy(op: O.AsyncCopyOp) -> None:
    _count(op, (2, 3), 0)
    ptr = op.operands[0].type
    dst = _shared(op.operands[1].type, "the destination")
    _check(isinstance(ptr, TileType) and isinstance(ptr.element, PointerType)
           and ptr.shape == dst.shape and ptr.element.pointee == dst.element,
           lambda: f"async_copy from {ptr} into {dst}")
    if len(op.operands) == 3:
        _check(_mask_ok(op.operands[2].type, ptr), lambda: f"mask {op.operands[2].type} for {ptr}")


@_rule(O.AsyncCommitGroupOp)
def _async_commit(op: O.AsyncCommitGroupOp) -> None:
    _count(op, 0, 0)


@_rule(O.AsyncWaitOp)
def _async_wait(op: O.AsyncWaitOp) -> None:
    _count(op, 0, 0)
    _check(isinstance(op.pending, int) and op.pending >= 0, lambda: f"pending must be >= 0, not {op.pending!r}")


def _barriers(v: O.Value) -> None:
    t = v.type
    _check(isinstance(t, TileType) and isinstance(t.layout, Shared) and t.rank == 1
           and t.element == ScalarType("i64"), lambda: f"barriers must be a 1-D shared tile of i64, not {t}")


@_rule(O.MBarrierInitOp)
def _mbarrier_init(op: O.MBarrierInitOp) -> None:
    _count(op, 1, 0)
    _barriers(op.operands[0])
    _check(isinstance(op.count, int) and op.count >= 1, lambda: f"count must be >= 1, not {op.count!r}")


@_rule(O.MBarrierExpectOp)
def _mbarrier_expect(op: O.MBarrierExpectOp) -> None:
    _count(op, 3, 0)
    _barriers(op.operands[0])
    _check(op.operands[1].type == I32 and op.operands[2].type == I1, "mbarrier_expect takes (barriers, i32, i1)")
    _check(isinstance(op.bytes, int) and op.bytes > 0, lambda: f"bytes must be > 0, not {op.bytes!r}")


@_rule(O.MBarrierWaitOp)
def _mbarrier_wait(op: O.MBarrierWaitOp) -> None:
    _count(op, 3, 0)
    _barriers(op.operands[0])
    _check(op.operands[1].type == I32 and op.operands[2].type == I32, "mbarrier_wait takes (barriers, i32, i32)")


@_rule(O.MBarrierArriveOp)
def _mbarrier_arrive(op: O.MBarrierArriveOp) -> None:
    if op.cluster:
        _check(len(op.operands) in (4, 5), lambda: f"a cluster's mbarrier_arrive takes (barriers, i32, i1) and one "
               f"or two i1 flags (its partners), not {len(op.operands)} operands")
    else:
        _count(op, 3, 0)
    _barriers(op.operands[0])
    _check(op.operands[1].type == I32 and all(v.type == I1 for v in op.operands[2:]),
           "mbarrier_arrive takes (barriers, i32, i1" + (", i1...)" if op.cluster else ")"))


@_rule(O.ClusterBarrierOp)
def _cluster_barrier(op: O.ClusterBarrierOp) -> None:
    _count(op, 0, 0)


@_rule(O.WarpSpecializeOp)
def _warp_specialize(op: O.WarpSpecializeOp) -> None:
    _count(op, 0, 0)
    _check(len(op.regions) == 2, "warp_specialize needs producer and consumer regions")
    _check(isinstance(op.producer_warps, int) and op.producer_warps >= 1,
           lambda: f"producer_warps must be >= 1, not {op.producer_warps!r}")
    for name, block in (("producer", op.producer), ("consumer", op.consumer)):
        _check(not block.args, lambda: f"the {name} region takes no arguments")
        _check(not _yield_types(block, O.YieldOp), lambda: f"the {name} region yields nothing")


@_rule(O.MBarrierInvalOp)
def _mbarrier_inval(op: O.MBarrierInvalOp) -> None:
    _count(op, 1, 0)
    _barriers(op.operands[0])


@_rule(O.TmaLoadOp)
def _tma_load(op: O.TmaLoadOp) -> None:
    dst = _shared(op.operands[0].type, "the destination") if op.operands else None
    assert dst is not None
    rank = len(op.box)  # the map's: the tile's dimensions, then outer ones of box 1
    _check(dst.rank <= rank <= 5 and all(b == 1 for b in op.box[dst.rank:]),
           lambda: f"tma_load of a rank-{dst.rank} tile needs a map of rank {dst.rank} to 5 with outer boxes of 1")
    _count(op, 4 + rank + (1 if op.multicast else 0), 0)
    _barriers(op.operands[1])
    _check(op.operands[2].type == I32 and op.operands[3].type == I1,
           "tma_load takes (dst, barriers, i32, i1, coords" + (", i32)" if op.multicast else ")"))
    _check(all(v.type == I32 for v in op.coordinates), "tma_load coordinates must be i32")
    _check(not op.multicast or op.operands[-1].type == I32,
           "a multicast tma_load's last operand (the partner's rank bit, 0 for none) is an i32")
    if dst.rank == 2:
        assert isinstance(dst.layout, Shared)
        rows = dst.shape[dst.layout.order[1]]
        _check(op.box[1] > 0 and rows % op.box[1] == 0,
               lambda: f"tma_load: the box's {op.box[1]} rows must divide the tile's {rows}")
        panels = dst.shape[dst.layout.order[0]] // op.box[0] if op.box[0] > 0 else 0
        by_rows = op.half_descriptor >= 0
        _check(not op.multicast or op.box[1] == rows,
               lambda: f"a multicast tma_load's box has all the tile's {rows} rows, not {op.box[1]}")
        _check(not op.multicast or (by_rows and rows % 16 == 0) or (not by_rows and panels % 2 == 0),
               lambda: f"a multicast tma_load splits its {rows} rows (a multiple of 16, through half_descriptor) or "
               f"its panels (an even number, not {panels})")
        _check(op.multicast or not by_rows, "half_descriptor is for a multicast tma_load")
    _check(len(op.extents) == 2 * rank and len(op.stride) == 2 * (rank - 1),
           lambda: f"tma_load of a rank-{rank} map needs {rank} extents and {rank - 1} strides")
    _check(op.swizzle in (32, 64, 128), lambda: f"swizzle must be 32, 64 or 128 bytes, not {op.swizzle!r}")


@_rule(O.TmaStoreOp)
def _tma_store(op: O.TmaStoreOp) -> None:
    rank = len(op.box)
    _check(2 <= rank <= 5 and all(b == 1 for b in op.box[2:]),
           "tma_store needs a map of rank 2 to 5 with outer boxes of 1")
    _count(op, 1 + rank, 0)
    t = op.operands[0].type
    _check(isinstance(t, TileType) and t.rank == 2, "tma_store stores a 2-D tile")
    _check(all(v.type == I32 for v in op.operands[1:]), "tma_store coordinates must be i32")
    _check(op.fast in (0, 1), lambda: f"tma_store: fast must be 0 or 1, not {op.fast!r}")
    _check(len(op.extents) == 2 * rank and len(op.stride) == 2 * (rank - 1),
           lambda: f"tma_store of a rank-{rank} map needs {rank} extents and {rank - 1} strides")
    _check(op.swizzle in (32, 64, 128), lambda: f"swizzle must be 32, 64 or 128 bytes, not {op.swizzle!r}")


def _yield_types(block: O.Block, term: type[O.Operation]) -> list[IRType]:
    last = block.terminator
    _check(isinstance(last, term), lambda: f"region must end with {term.NAME}")
    assert last is not None
    vals = last.operands[1:] if term is O.ConditionOp else last.operands
    return [v.type for v in vals]


def _types_match(got: Sequence[IRType], want: Sequence[IRType], what: str) -> None:
    _check(list(got) == list(want), lambda: f"{what}: {[str(t) for t in got]} vs {[str(t) for t in want]}")


@_rule(O.ForOp)
def _for(op: O.ForOp) -> None:
    _check(len(op.operands) >= 3, "for needs lb, ub, step")
    _check(len(op.regions) == 1, "for needs one region")
    lb, ub, st = (v.type for v in op.operands[:3])
    _check(lb == ub == st and isinstance(lb, ScalarType) and lb.is_int and lb.bits > 1,
           lambda: f"lb, ub and step must be one scalar integer type, got {lb}, {ub}, {st}")
    inits = [v.type for v in op.inits]
    args = [a.type for a in op.body.args]
    _check(bool(args) and args[0] == lb, "the body's first argument must be the induction variable")
    _types_match(args[1:], inits, "body arguments do not match the loop-carried inits")
    _types_match([r.type for r in op.results], inits, "results do not match the inits")
    _types_match(_yield_types(op.body, O.YieldOp), inits, "yielded values do not match the loop-carried values")


@_rule(O.IfOp)
def _if(op: O.IfOp) -> None:
    _count(op, 1, len(op.results))
    _check(op.operands[0].type == I1, lambda: f"condition must be a scalar i1, not {op.operands[0].type}")
    _check(len(op.regions) == 2, "if needs then and else regions")
    want = [r.type for r in op.results]
    for name, block in (("then", op.then_block), ("else", op.else_block)):
        _check(not block.args, lambda: f"the {name} region takes no arguments")
        _types_match(_yield_types(block, O.YieldOp), want, f"the {name} region's yield does not match the results")


@_rule(O.WhileOp)
def _while(op: O.WhileOp) -> None:
    _check(len(op.regions) == 2, "while needs before and after regions")
    inits = [v.type for v in op.operands]
    _types_match([a.type for a in op.before.args], inits, "before-region arguments do not match the inits")
    cond = op.before.terminator
    _check(isinstance(cond, O.ConditionOp) and len(cond.operands) >= 1 and cond.operands[0].type == I1,
           "the before region must end with tc.condition of a scalar i1")
    carried = _yield_types(op.before, O.ConditionOp)
    _types_match([r.type for r in op.results], carried, "results do not match the condition's values")
    _types_match([a.type for a in op.after.args], carried, "after-region arguments do not match the condition's values")
    _types_match(_yield_types(op.after, O.YieldOp), inits, "the after region's yield does not match the inits")


@_rule(O.YieldOp)
@_rule(O.ConditionOp)
@_rule(O.ReturnOp)
def _terminator(op: O.Operation) -> None:
    _check(not op.results, "a terminator has no results")


# ------------------------------------------------------------------------------- walking


_TERMINATORS = (O.YieldOp, O.ConditionOp, O.ReturnOp)
_ALLOWED_TERMINATOR = {
    (O.ForOp, 0): O.YieldOp,
    (O.IfOp, 0): O.YieldOp,
    (O.IfOp, 1): O.YieldOp,
    (O.WhileOp, 0): O.ConditionOp,
    (O.WhileOp, 1): O.YieldOp,
    (O.WarpSpecializeOp, 0): O.YieldOp,
    (O.WarpSpecializeOp, 1): O.YieldOp,
}


def _type_layouts(t: IRType) -> None:
    if isinstance(t, TileType) and t.layout is not None:
        r = layout_rank(t.layout)
        _check(r == t.rank, lambda: f"layout {t.layout} has rank {r} but the tile {t} has rank {t.rank}")


class _Verifier:
    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def report(self, op: O.Operation | None, message: str, loc: Any = None) -> None:
        location = (op.loc if op is not None else loc) or UNKNOWN_LOCATION
        hint = None
        if op is not None:
            try:
                hint = "in: " + print_op(op).splitlines()[0]
            except Exception:  # a broken op may not print; the message still names it
                hint = None
        name = f"{op.NAME}: " if op is not None else ""
        self.diagnostics.append(Diagnostic(Category.LOWERING, "E0690", name + message, location, hint=hint))

    def block(self, block: O.Block, visible: set[int], terminator: type[O.Operation] | None) -> None:
        scope = set(visible)
        for arg in block.args:
            scope.add(id(arg))
            try:
                _type_layouts(arg.type)
            except _Problem as p:
                self.report(block.parent, f"block argument: {p}")
        for i, op in enumerate(block.ops):
            for j, v in enumerate(op.operands):
                if id(v) not in scope:
                    self.report(op, f"operand #{j} ({v.type}) is used before its definition or outside its region")
            if op.parent is not block:
                self.report(op, "the op's parent is not the block that holds it")
            if isinstance(op, _TERMINATORS):
                if i != len(block.ops) - 1:
                    self.report(op, "a terminator must be the last op of its block")
                elif terminator is not None and not isinstance(op, terminator):
                    self.report(op, f"this region must end with {terminator.NAME}")
            rule = _RULES.get(type(op))
            try:
                if rule is not None:
                    rule(op)
                for r in op.results:
                    _type_layouts(r.type)
            except _Problem as p:
                self.report(op, str(p))
            except Exception as e:  # malformed operands that a rule did not expect
                self.report(op, f"malformed op ({type(e).__name__}: {e})")
            for k, region in enumerate(op.regions):
                if region.parent is not op:
                    self.report(op, f"region #{k}'s parent is not this op")
                want = _ALLOWED_TERMINATOR.get((type(op), k))
                self.block(region, scope, want)
            for r in op.results:
                scope.add(id(r))
        last = block.terminator
        if terminator is not None and not isinstance(last, _TERMINATORS):
            self.report(block.parent, f"a region does not end with {terminator.NAME}")

    def function(self, fn: O.Function) -> None:
        for a in fn.args:
            if isinstance(a.type, TileType):
                self.report(None, f"function {fn.name}: argument of tile type {a.type}", fn.loc)
        if fn.arg_attrs and len(fn.arg_attrs) != len(fn.args):
            self.report(None, f"function {fn.name}: {len(fn.arg_attrs)} argument attribute sets "
                        f"for {len(fn.args)} arguments", fn.loc)
        self.block(fn.body, set(), O.ReturnOp)


def verify(target: O.Module | O.Function) -> None:
    """Raise `IRVerificationError` listing every rule the IR breaks; return None when it is valid."""
    v = _Verifier()
    functions = target.functions if isinstance(target, O.Module) else [target]
    for fn in functions:
        v.function(fn)
    if v.diagnostics:
        raise IRVerificationError(v.diagnostics)
