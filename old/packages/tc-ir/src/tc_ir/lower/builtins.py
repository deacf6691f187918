"""Calls: the built-in functions, and `__device__` helpers (inlined, see inline.py).

exp and log are the fast approximate versions (the language says so, like __expf); the other math
functions are exact. min/max pick smin/umin/fmin... from the C type they are computed in.
"""

from __future__ import annotations

from collections.abc import Callable

from tc_lang import ast as A
from tc_lang import rules
from tc_lang import types as C

from .context import TV, Lowerer
from .errors import BAD_CALL, unknown_name
from .memory import _masked, _shape, implicit_mask
from .typemap import is_float, is_signed
from .values import broadcast_all, convert, truth

# name -> (unary kind, approx)
MATH: dict[str, tuple[str, bool]] = {
    "exp": ("exp", True),
    "expf": ("exp", True),
    "log": ("log", True),
    "logf": ("log", True),
    "sqrt": ("sqrt", False),
    "sqrtf": ("sqrt", False),
    "rsqrt": ("rsqrt", False),
    "rsqrtf": ("rsqrt", False),
    "sin": ("sin", False),
    "sinf": ("sin", False),
    "cos": ("cos", False),
    "cosf": ("cos", False),
    "exp2": ("exp2", False),
    "exp2f": ("exp2", False),
    "log2": ("log2", False),
    "log2f": ("log2", False),
    "floor": ("floor", False),
    "floorf": ("floor", False),
    "ceil": ("ceil", False),
    "ceilf": ("ceil", False),
}

ATOMIC_RMW = {
    "atomic_add": "add",
    "atomic_max": "max",
    "atomic_min": "min",
    "atomic_and": "and",
    "atomic_or": "or",
    "atomic_xor": "xor",
    "atomic_xchg": "xchg",
    "atomic_exch": "xchg",
}


def lower_call(lw: Lowerer, e: A.Call) -> TV | None:
    helper = lw.unit.function(e.func)
    if helper is not None and helper.kind != "global":
        from .inline import inline_call

        return inline_call(lw, e, helper)
    handler = _HANDLERS.get(e.func)
    if handler is not None:
        return handler(lw, e)
    if e.func in MATH:
        return _math(lw, e)
    if e.func in ATOMIC_RMW:
        return _atomic_rmw(lw, e)
    if helper is not None:
        lw.fail(f"kernel '{e.func}' cannot be called; only __device__ functions can", e.loc, BAD_CALL)
    unknown_name(f"unknown function '{e.func}'", e.loc)


def _args(lw: Lowerer, e: A.Call, *counts: int) -> list[A.Expr]:
    if len(e.args) not in counts:
        want = " or ".join(str(c) for c in counts)
        lw.fail(f"'{e.func}' takes {want} argument(s), not {len(e.args)}", e.loc, BAD_CALL)
    return list(e.args)


def _const_axis(lw: Lowerer, e: A.Call) -> int:
    (arg,) = _args(lw, e, 1)
    value = arg.const if arg.const is not None else (arg.value if isinstance(arg, A.IntLiteral) else None)
    if not isinstance(value, int) or isinstance(value, bool) or value not in (0, 1, 2):
        lw.fail(f"'{e.func}' needs a constant axis 0, 1 or 2", arg.loc, BAD_CALL)
    return value


def _program_id(lw: Lowerer, e: A.Call) -> TV:
    return TV(lw.b.program_id(_const_axis(lw, e)), C.INT32)


def _num_programs(lw: Lowerer, e: A.Call) -> TV:
    return TV(lw.b.num_programs(_const_axis(lw, e)), C.INT32)


def _barrier(lw: Lowerer, e: A.Call) -> None:
    _args(lw, e, 0)
    lw.b.barrier()
    return None


def _result_type(lw: Lowerer, e: A.Call, args: list[TV], floating: bool) -> C.Type:
    """The checker's type of the call, or the common type of the arguments (float for math)."""
    if e.ty is not None:
        return e.ty
    shape = _shape(lw, *(a.ctype for a in args))
    el = C.element_of(args[0].ctype)
    for a in args[1:]:
        other = C.element_of(a.ctype)
        if isinstance(el, C.ScalarType) and isinstance(other, C.ScalarType):
            el = rules.common_scalar(el, other)
    if floating and isinstance(el, C.ScalarType) and not el.is_float:
        el = C.FP32
    return C.with_shape(el, shape)


def _math(lw: Lowerer, e: A.Call) -> TV:
    kind, approx = MATH[e.func]
    (arg,) = _args(lw, e, 1)
    x = lw.expr(arg)
    t = _result_type(lw, e, [x], floating=True)
    return TV(lw.b.unary(kind, convert(lw, x, t).value, approx), t)


def _abs(lw: Lowerer, e: A.Call) -> TV:
    (arg,) = _args(lw, e, 1)
    x = lw.expr(arg)
    t = _result_type(lw, e, [x], floating=e.func.startswith("f"))
    v = convert(lw, x, t)
    if is_float(t):
        return TV(lw.b.unary("fabs", v.value), t)
    if not is_signed(t):
        return v
    return TV(lw.b.unary("iabs", v.value), t)


def _fma(lw: Lowerer, e: A.Call) -> TV:
    xs = [lw.expr(a) for a in _args(lw, e, 3)]
    t = _result_type(lw, e, xs, floating=True)
    a, b, c = (convert(lw, x, t).value for x in xs)
    return TV(lw.b.fma(a, b, c), t)


def _minmax(lw: Lowerer, e: A.Call) -> TV:
    xs = [lw.expr(a) for a in _args(lw, e, 2)]
    t = _result_type(lw, e, xs, floating=False)
    a, b = (convert(lw, x, t).value for x in xs)
    op = "max" if e.func in ("max", "maximum") else "min"
    if isinstance(C.element_of(t), C.PointerType):
        lw.fail(f"'{e.func}' needs numbers, not pointers", e.loc, BAD_CALL)
    prefix = "f" if is_float(t) else ("s" if is_signed(t) else "u")
    return TV(lw.b.binary(prefix + op, a, b), t)


def _select(lw: Lowerer, e: A.Call) -> TV:
    c_e, a_e, b_e = _args(lw, e, 3)
    c = truth(lw, lw.expr(c_e))
    a, b = lw.expr(a_e), lw.expr(b_e)
    t = _result_type(lw, e, [a, b], floating=False)
    shape = _shape(lw, c.ctype, t)
    t = C.with_shape(C.element_of(t), shape)
    (cb,) = broadcast_all(lw, [c], shape) if C.shape_of(c.ctype) else [c]
    return TV(lw.b.select(cb.value, convert(lw, a, t).value, convert(lw, b, t).value), t)


def _pointer_operands(lw: Lowerer, e: A.Call, ptr_e: A.Expr, values: list[A.Expr], mask_e: A.Expr | None
                      ) -> tuple[TV, list[TV], TV | None, C.Type]:
    """Pointers, values (as the pointee type) and mask of an atomic, broadcast to one shape."""
    ptr = lw.expr(ptr_e)
    pel = C.element_of(ptr.ctype)
    if not isinstance(pel, C.PointerType):
        lw.fail(f"the first argument of '{e.func}' must be pointers, not '{ptr.ctype}'", ptr_e.loc, BAD_CALL)
    vals = [lw.expr(v) for v in values]
    mask = truth(lw, lw.expr(mask_e)) if mask_e is not None else None
    shape = _shape(lw, ptr.ctype, *(v.ctype for v in vals), *([mask.ctype] if mask else []))
    (ptr,) = broadcast_all(lw, [ptr], shape)
    t = C.with_shape(pel.pointee, shape)
    vals = [convert(lw, v, t) for v in vals]
    if mask is not None:
        (mask,) = broadcast_all(lw, [mask], shape)
    return ptr, vals, mask, t


def _atomic_rmw(lw: Lowerer, e: A.Call) -> TV:
    args = _args(lw, e, 2, 3)
    ptr, (val,), mask, t = _pointer_operands(lw, e, args[0], [args[1]], args[2] if len(args) == 3 else None)
    kind = ATOMIC_RMW[e.func]
    mask_v = _masked(lw, C.shape_of(ptr.ctype), mask.value if mask else None, "atomic")
    if kind in ("add", "max", "min"):
        if is_float(t):
            kind = "f" + kind
        elif kind != "add" and not is_signed(t):
            kind = "u" + kind
    elif is_float(t) and kind != "xchg":
        lw.fail(f"'{e.func}' needs integer values", e.loc, BAD_CALL)
    old = lw.b.atomic_rmw(kind, ptr.value, val.value, mask_v)
    return TV(old, t)


def _atomic_cas(lw: Lowerer, e: A.Call) -> TV:
    p, c, v = _args(lw, e, 3)
    ptr, (cmp, val), _mask, t = _pointer_operands(lw, e, p, [c, v], None)
    if implicit_mask(lw, C.shape_of(ptr.ctype), "atomic") is not None:
        lw.fail(
            "'atomic_cas' has no mask, so it cannot be in a branch of an element-wise '?:' "
            "(or the right operand of a tile '&&' / '||')",
            e.loc,
            BAD_CALL,
            hint="compute the condition first and run atomic_cas unconditionally, or use a scalar if",
        )
    return TV(lw.b.atomic_cas(ptr.value, cmp.value, val.value), t)


_HANDLERS: dict[str, Callable[[Lowerer, A.Call], TV | None]] = {
    "get_program_id": _program_id,
    "get_num_programs": _num_programs,
    "__debug_barrier": _barrier,
    "abs": _abs,
    "fabs": _abs,
    "fabsf": _abs,
    "fma": _fma,
    "fmaf": _fma,
    "min": _minmax,
    "max": _minmax,
    "minimum": _minmax,
    "maximum": _minmax,
    "select": _select,
    "atomic_cas": _atomic_cas,
}
