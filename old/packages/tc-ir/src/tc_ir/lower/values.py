"""Implicit and explicit conversions between C types, made explicit as IR ops.

`convert` is the one place that turns a value of one C type into another: the element first
(sext/zext/trunc, sitofp/uitofp, fptosi/fptoui, fpext/fptrunc, `!= 0` for bool, pointer casts),
then the shape (splat a scalar, left-pad with size-1 axes and broadcast, or reshape tiles of the
same element count; a one-element tile may become a scalar).
"""

from __future__ import annotations

from collections.abc import Sequence

from tc_lang import consts
from tc_lang import types as C

from .. import types as T
from ..ops import ConstantOp, OpResult, Value
from .context import TV, Lowerer
from .errors import BAD_SHAPE
from .typemap import ir_element, ir_type, is_signed


def constant(lw: Lowerer, value: int | float | bool, ctype: C.Type) -> TV:
    return TV(lw.b.constant(value, ir_type(ctype, lw.b.loc)), ctype)


def zero(lw: Lowerer, ctype: C.Type) -> TV:
    """0 of any type (the null pointer for pointers): what an uninitialised variable holds."""
    el = C.element_of(ctype)
    if isinstance(el, C.PointerType):
        i = lw.b.constant(0, T.I64)
        p = lw.b.cast("inttoptr", i, ir_element(el))
        return TV(shape_to(lw, p, C.shape_of(ctype)), ctype)
    return constant(lw, 0.0 if el.is_float else 0, ctype)


def truth(lw: Lowerer, tv: TV) -> TV:
    """C truthiness, element-wise: `x != 0` as bool (i1) of x's shape."""
    el = C.element_of(tv.ctype)
    shape = C.shape_of(tv.ctype)
    out_type = C.with_shape(C.BOOL, shape)
    if isinstance(el, C.ScalarType) and el.is_bool:
        return TV(tv.value, out_type)
    v = tv.value
    if isinstance(el, C.PointerType):
        v = lw.b.cast("ptrtoint", v, T.I64)
    vel = T.element_of(v.type)
    assert isinstance(vel, T.ScalarType)
    z = lw.b.constant(0.0 if vel.is_float else 0, v.type)
    return TV(lw.b.cmp("une" if vel.is_float else "ne", v, z), out_type)


def convert_element(lw: Lowerer, tv: TV, dst: C.ElementType) -> TV:
    """The elements of `tv` converted to `dst`, the shape unchanged."""
    src = C.element_of(tv.ctype)
    shape = C.shape_of(tv.ctype)
    out_type = C.with_shape(dst, shape)
    if src == dst:
        return tv
    if isinstance(dst, C.ScalarType) and dst.is_bool:
        return truth(lw, tv)
    dst_ir = ir_element(dst, lw.b.loc)
    if T.element_of(tv.value.type) == dst_ir:
        return TV(tv.value, out_type)  # int32 <-> uint32: same bits
    folded = _fold(lw, tv, dst, out_type)
    if folded is not None:
        return folded
    signed_dst = isinstance(dst, C.ScalarType) and dst.is_signed
    v = lw.b.convert(tv.value, dst_ir, is_signed(tv.ctype), signed_dst)
    return TV(v, out_type)


def shape_to(lw: Lowerer, v: Value, shape: Sequence[int]) -> Value:
    """`v` at `shape`: splat, left-pad + broadcast, or reshape when the element count is equal."""
    shape = tuple(shape)
    src = T.shape_of(v.type)
    if src == shape:
        return v
    n_src = _numel(src)
    const = constant_of(v)
    if const is not None and _numel(shape) >= n_src:
        return lw.b.constant(const, T.TileType(shape, T.element_of(v.type)) if shape else T.element_of(v.type))
    if not src:
        return lw.b.splat(v, shape)
    if len(src) <= len(shape):
        padded = (1,) * (len(shape) - len(src)) + src
        if all(a == b or a == 1 for a, b in zip(padded, shape)):
            out = v
            for _ in range(len(shape) - len(src)):
                out = lw.b.expand_dims(out, 0)
            return out if padded == shape else lw.b.broadcast(out, shape)
    if n_src == _numel(shape):
        return lw.b.reshape(v, shape)
    lw.fail(
        f"cannot convert a tile of shape [{_dims(src)}] to shape [{_dims(shape)}]",
        lw.b.loc,
        BAD_SHAPE,
    )


def constant_of(v: Value) -> int | float | bool | None:
    """The value of a constant (scalar or uniform tile), None for anything else."""
    if isinstance(v, OpResult) and isinstance(v.op, ConstantOp):
        return v.op.value
    return None


def _fold(lw: Lowerer, tv: TV, dst: C.ElementType, out_type: C.Type) -> TV | None:
    """A numeric conversion of a constant, done now with C's rules."""
    value = constant_of(tv.value)
    src = C.element_of(tv.ctype)
    if value is None or not isinstance(dst, C.ScalarType) or not isinstance(src, C.ScalarType):
        return None
    try:
        converted = consts.convert(consts.convert(value, src), dst)  # read it as src first
    except consts.FoldError:
        return None
    return TV(lw.b.constant(converted, ir_type(out_type, lw.b.loc)), out_type)


def convert(lw: Lowerer, tv: TV, target: C.Type) -> TV:
    """`tv` as a value of C type `target` (element conversion, then shape)."""
    if tv.ctype == target:
        return tv
    if isinstance(C.element_of(target), C.ScalarType) and C.element_of(target) == C.VOID:
        lw.fail("cannot convert to void", lw.b.loc)
    # convert elements where there are fewer of them
    src_n = _numel(C.shape_of(tv.ctype))
    dst_n = _numel(C.shape_of(target))
    dst_el = C.element_of(target)
    if src_n <= dst_n:
        out = convert_element(lw, tv, dst_el)
        return TV(shape_to(lw, out.value, C.shape_of(target)), target)
    shaped = TV(shape_to(lw, tv.value, C.shape_of(target)), C.with_shape(C.element_of(tv.ctype), C.shape_of(target)))
    return TV(convert_element(lw, shaped, dst_el).value, target)


def broadcast_all(lw: Lowerer, tvs: Sequence[TV], shape: Sequence[int]) -> list[TV]:
    """Each value at `shape`, element types kept."""
    return [
        TV(shape_to(lw, tv.value, shape), C.with_shape(C.element_of(tv.ctype), tuple(shape)))
        for tv in tvs
    ]


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _dims(shape: Sequence[int]) -> str:
    return ", ".join(str(d) for d in shape)
