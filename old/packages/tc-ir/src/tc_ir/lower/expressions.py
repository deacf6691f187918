"""Expression dispatch: literals, names, unary operators, casts, ranges, sizeof, comma.

Every expression lowers to a `TV` (an IR value with its C type). When the checker gave the node a
type, the result is converted to exactly that type, so the IR always agrees with the checker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tc_lang import ast as A
from tc_lang import rules
from tc_lang.builtins import BUILTIN_CONSTANTS
from tc_lang import types as C

from .analysis import INCDEC, is_pure
from .arith import lower_binary
from .builtins import lower_call
from .context import TV, Lowerer
from .errors import BAD_OPERAND, BAD_SHAPE, unknown_name
from .memory import incdec, load, lower_assign, lower_conditional
from .subscripts import lower_subscript
from .. import types as T
from .typemap import ir_element, is_float, size_of
from .types_ast import resolve_typename
from .values import constant, convert, convert_element, truth


def lower_expr(lw: Lowerer, e: A.Expr) -> TV | None:
    if _is_constant(lw, e):
        assert e.ty is not None and e.const is not None
        return constant(lw, e.const, e.ty)
    handler = _HANDLERS.get(type(e))
    if handler is None:
        lw.fail(f"expressions of kind '{type(e).__name__}' are not supported", e.loc)
    result: TV | None = handler(lw, e)
    if result is not None and e.ty is not None and result.ctype != e.ty:
        if not (isinstance(e.ty, C.ScalarType) and e.ty.is_void):
            result = convert(lw, result, e.ty)
    return result


def _is_constant(lw: Lowerer, e: A.Expr) -> bool:
    """A compile-time constant scalar the checker folded (not a variable of the same name)."""
    if e.const is None or not isinstance(e.ty, C.ScalarType) or e.ty.is_void:
        return False
    if isinstance(e, A.Name) and lw.env.lookup(e.name) is not None:
        return False
    return is_pure(e)


def _int_literal(lw: Lowerer, e: A.IntLiteral) -> TV:
    if e.ty is not None:
        return constant(lw, e.value, e.ty)
    unsigned = "u" in e.suffix
    wide = "l" in e.suffix or e.value >= (1 << 32 if unsigned else 1 << 31)
    t = {(False, False): C.INT32, (False, True): C.INT64, (True, False): C.UINT32, (True, True): C.UINT64}
    return constant(lw, e.value, t[(unsigned, wide)])


def _float_literal(lw: Lowerer, e: A.FloatLiteral) -> TV:
    t = e.ty or (C.FP32 if e.suffix.lower() == "f" else C.FP64)
    return constant(lw, e.value, t)


def _bool_literal(lw: Lowerer, e: A.BoolLiteral) -> TV:
    return constant(lw, e.value, C.BOOL)


def _name(lw: Lowerer, e: A.Name) -> TV:
    var = lw.env.lookup(e.name)
    if var is None and e.name in BUILTIN_CONSTANTS:
        ctype, value = BUILTIN_CONSTANTS[e.name]
        return constant(lw, value, ctype)
    if var is None:
        unknown_name(f"unknown name '{e.name}'", e.loc)
    return TV(var.value, var.ctype)


def _unary(lw: Lowerer, e: A.Unary) -> TV:
    if e.op in INCDEC:
        return incdec(lw, e)
    if e.op == "&":
        lw.fail("the address-of operator '&' is not supported", e.loc, BAD_OPERAND)
    x = lw.expr(e.operand)
    if e.op == "^":
        if not isinstance(x.ctype, C.TileType) or x.ctype.rank < 2:
            lw.fail("'^' (transpose) needs a tile of two or more axes", e.loc, BAD_SHAPE)
        rank = x.ctype.rank
        perm = list(range(1, rank)) + [0]
        shape = tuple(x.ctype.shape[i] for i in perm)
        return TV(lw.b.trans(x.value, perm), C.TileType(shape, x.ctype.element))
    if e.op == "!":
        t = truth(lw, x)
        return TV(lw.b.binary("xor", t.value, lw.b.constant(True, t.value.type)), t.ctype)
    try:
        rt = rules.unary_type(e.op, x.ctype)
    except rules.RuleError as err:
        lw.fail(str(err), e.loc, BAD_OPERAND)
    v = convert(lw, x, rt)
    if e.op == "+":
        return v
    if e.op == "-":
        return TV(lw.b.unary("fneg" if is_float(rt) else "neg", v.value), rt)
    if e.op == "~":
        return TV(lw.b.unary("not", v.value), rt)
    lw.fail(f"unknown operator '{e.op}'", e.loc, BAD_OPERAND)


def _cast(lw: Lowerer, e: A.Cast) -> TV | None:
    """`(T) x` and tile casts `(float[TM, TN]) x`: reshape/broadcast and numeric conversion.
    `(void) x`, C's way to discard a value, evaluates x for its effects (the checker accepts it)."""
    target = e.ty if e.ty is not None else resolve_typename(lw, e.type)
    if isinstance(target, C.ScalarType) and target.is_void:
        lw.expr_or_void(e.operand)
        return None
    return convert(lw, lw.expr(e.operand), target)


def _bitcast(lw: Lowerer, e: A.Bitcast) -> TV:
    x = lw.expr(e.operand)
    target = e.ty if e.ty is not None else resolve_typename(lw, e.type)
    dst = C.element_of(target)
    src = C.element_of(x.ctype)
    if isinstance(dst, C.PointerType) or isinstance(src, C.PointerType):
        return convert_element(lw, x, dst)
    if src.bits != dst.bits:
        lw.fail(f"bitcast needs types of equal width, not '{src}' and '{dst}'", e.loc, BAD_OPERAND)
    out = C.with_shape(dst, C.shape_of(x.ctype))
    if src == dst:
        return TV(x.value, out)
    ir = ir_element(dst, e.loc)
    if T.element_of(x.value.type) == ir:  # int32 <-> uint32: the same bits already
        return TV(x.value, out)
    return TV(lw.b.cast("bitcast", x.value, ir), out)


def _sizeof(lw: Lowerer, e: A.SizeOf) -> TV:
    if isinstance(e.operand, A.TypeName):
        t = resolve_typename(lw, e.operand)
    else:
        t = e.operand.ty if e.operand.ty is not None else lw.expr(e.operand).ctype
    n = size_of(C.element_of(t))
    for d in C.shape_of(t):
        n *= d
    return constant(lw, n, C.INT64)


def _range(lw: Lowerer, e: A.Range) -> TV:
    bounds = []
    for b in (e.start, e.end):
        v = b.const if b.const is not None else (b.value if isinstance(b, A.IntLiteral) else None)
        if not isinstance(v, int) or isinstance(v, bool):
            lw.fail("the bounds of a range 'a ... b' must be integer constants", b.loc, BAD_SHAPE)
        bounds.append(v)
    start, end = bounds
    if end <= start:
        lw.fail(f"the range {start} ... {end} is empty", e.loc, BAD_SHAPE)
    return TV(lw.b.make_range(start, end), C.TileType((end - start,), C.INT32))


def _deref(lw: Lowerer, e: A.Deref) -> TV:
    return load(lw, e)


def _comma(lw: Lowerer, e: A.Comma) -> TV | None:
    result: TV | None = None
    for x in e.exprs:
        result = lw.expr_or_void(x)
    return result


_HANDLERS: dict[type, Callable[[Lowerer, Any], TV | None]] = {
    A.IntLiteral: _int_literal,
    A.FloatLiteral: _float_literal,
    A.BoolLiteral: _bool_literal,
    A.Name: _name,
    A.Unary: _unary,
    A.Binary: lower_binary,
    A.Assign: lower_assign,
    A.Conditional: lower_conditional,
    A.Comma: _comma,
    A.Call: lower_call,
    A.Cast: _cast,
    A.Bitcast: _bitcast,
    A.SizeOf: _sizeof,
    A.Range: _range,
    A.Subscript: lower_subscript,
    A.Deref: _deref,
}
