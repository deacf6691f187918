"""Element-wise semantics: binary, unary, comparison, cast and fma, specialised per element type.

Each `make_*` returns a function over numpy values (arrays or numpy scalars) chosen once when the
kernel is prepared, so running an op costs one call. The rules (the GPU must match them):

* Integers wrap around at their width (two's complement). sdiv/srem truncate toward zero (C);
  udiv/urem use the unsigned bits. Division by zero gives all ones (-1) and a remainder equal to
  the dividend (what NVIDIA hardware returns); INT_MIN / -1 wraps to INT_MIN with remainder 0.
* Shift amounts are read as unsigned and clamped to the width, as PTX shl/shr do: shl and lshr by
  >= width give 0, ashr by >= width gives the sign (0 or -1).
* f16 is computed in f16 (each op rounded to f16); bf16 in float32 rounded to bf16 after each op.
  Math functions (exp, log, ...) of f16/bf16 are computed in float32 and rounded once.
* fmax/fmin return the non-NaN operand (PTX max.f32 / LLVM maxnum).
* fptosi/fptoui truncate toward zero and saturate to the target range; NaN gives 0 (PTX cvt.rzi).
* sitofp/uitofp and fptrunc round to nearest even.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..types import ElementType, PointerType, ScalarType
from .dtypes import is_bf16, round_bf16, unsigned, value_dtype

Fn1 = Callable[[Any], Any]
Fn2 = Callable[[Any, Any], Any]
Fn3 = Callable[[Any, Any, Any], Any]


def _as_result(x: Any) -> Any:
    """numpy ops on 0-d arrays give arrays; keep scalars scalar."""
    return x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x


def _bits(e: ElementType) -> int:
    return 64 if isinstance(e, PointerType) else e.bits


# ------------------------------------------------------------------------------- integer helpers


def _sdiv(a: Any, b: Any) -> Any:
    zero = b == 0
    bs = np.where(zero, 1, b).astype(a.dtype)
    q = a // bs
    r = a - q * bs
    q = q + ((r != 0) & ((a < 0) != (bs < 0))).astype(a.dtype)
    return _as_result(np.where(zero, a.dtype.type(-1), q).astype(a.dtype))


def _srem(a: Any, b: Any) -> Any:
    zero = b == 0
    bs = np.where(zero, 1, b).astype(a.dtype)
    r = np.fmod(a, bs)
    return _as_result(np.where(zero, a, r).astype(a.dtype))


def _udiv(a: Any, b: Any) -> Any:
    ua, ub = unsigned(np.asarray(a)), unsigned(np.asarray(b))
    zero = ub == 0
    q = ua // np.where(zero, 1, ub).astype(ua.dtype)
    q = np.where(zero, ua.dtype.type(-1 % (1 << (8 * ua.dtype.itemsize))), q).astype(ua.dtype)
    return _as_result(q.view(np.asarray(a).dtype))


def _urem(a: Any, b: Any) -> Any:
    ua, ub = unsigned(np.asarray(a)), unsigned(np.asarray(b))
    zero = ub == 0
    r = ua % np.where(zero, 1, ub).astype(ua.dtype)
    r = np.where(zero, ua, r).astype(ua.dtype)
    return _as_result(r.view(np.asarray(a).dtype))


def _shift(kind: str, width: int) -> Fn2:
    def shift(a: Any, b: Any) -> Any:
        a = np.asarray(a)
        amount = unsigned(np.asarray(b)).astype(np.uint64)
        big = amount >= width
        s = np.minimum(amount, width - 1).astype(a.dtype)
        if kind == "shl":
            r = np.where(big, 0, np.left_shift(a, s))
        elif kind == "ashr":
            r = np.where(big, np.where(a < 0, -1, 0), np.right_shift(a, s))
        else:
            r = np.where(big, 0, np.right_shift(unsigned(a), s.astype(unsigned(a).dtype)).view(a.dtype))
        return _as_result(r.astype(a.dtype))

    return shift


def _unsigned_op(f: Fn2) -> Fn2:
    def op(a: Any, b: Any) -> Any:
        a, b = np.asarray(a), np.asarray(b)
        return _as_result(f(unsigned(a), unsigned(b)).view(a.dtype))

    return op


_INT_BINARY: dict[str, Fn2] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "sdiv": _sdiv,
    "udiv": _udiv,
    "srem": _srem,
    "urem": _urem,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "smax": np.maximum,
    "smin": np.minimum,
    "umax": _unsigned_op(np.maximum),
    "umin": _unsigned_op(np.minimum),
}
# One-bit arithmetic: + and - are xor, * is and; signed i1 values are 0 and -1.
_BOOL_BINARY: dict[str, Fn2] = {
    "add": np.logical_xor,
    "sub": np.logical_xor,
    "mul": np.logical_and,
    "and": np.logical_and,
    "or": np.logical_or,
    "xor": np.logical_xor,
    "smax": np.logical_and,  # max(0, -1) = 0: true only if both true
    "smin": np.logical_or,
    "umax": np.logical_or,
    "umin": np.logical_and,
    "udiv": lambda a, b: np.where(b, a, True),
    "sdiv": lambda a, b: np.where(b, a, True),
    "urem": lambda a, b: np.where(b, False, a),
    "srem": lambda a, b: np.where(b, False, a),
    "shl": lambda a, b: np.logical_and(a, np.logical_not(b)),
    "lshr": lambda a, b: np.logical_and(a, np.logical_not(b)),
    "ashr": lambda a, b: a,
}
_FLOAT_BINARY: dict[str, Fn2] = {
    "fadd": np.add,
    "fsub": np.subtract,
    "fmul": np.multiply,
    "fdiv": np.divide,
    "frem": np.fmod,
    "fmax": np.fmax,
    "fmin": np.fmin,
}


def make_binary(kind: str, element: ElementType) -> Fn2:
    """The function computing `kind` on values of `element`."""
    if isinstance(element, ScalarType) and element.is_float:
        f = _FLOAT_BINARY[kind]
        if is_bf16(element):
            return lambda a, b: round_bf16(f(a, b))
        return f
    if isinstance(element, ScalarType) and element.bits == 1:
        g = _BOOL_BINARY[kind]
        return lambda a, b: _as_result(g(a, b))
    if kind in ("shl", "ashr", "lshr"):
        return _shift(kind, _bits(element))
    return _INT_BINARY[kind]


# ------------------------------------------------------------------------------- comparisons


def _float_cmp(pred: str) -> Fn2:
    table: dict[str, Fn2] = {
        "oeq": np.equal,
        "olt": np.less,
        "ole": np.less_equal,
        "ogt": np.greater,
        "oge": np.greater_equal,
        "une": np.not_equal,
        "one": lambda a, b: np.less(a, b) | np.greater(a, b),
        "ueq": lambda a, b: ~(np.less(a, b) | np.greater(a, b)),
        "ult_f": lambda a, b: ~np.greater_equal(a, b),
        "ule_f": lambda a, b: ~np.greater(a, b),
        "ugt_f": lambda a, b: ~np.less_equal(a, b),
        "uge_f": lambda a, b: ~np.less(a, b),
        "ord": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
        "uno": lambda a, b: np.isnan(a) | np.isnan(b),
    }
    f = table[pred]
    return lambda a, b: _as_result(f(a, b))


_INT_CMP: dict[str, Fn2] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "slt": np.less,
    "sle": np.less_equal,
    "sgt": np.greater,
    "sge": np.greater_equal,
}


def make_cmp(pred: str, element: ElementType) -> Fn2:
    if isinstance(element, ScalarType) and element.is_float:
        return _float_cmp(pred)
    if pred in _INT_CMP:
        if isinstance(element, ScalarType) and element.bits == 1 and pred[0] == "s":
            # i1 read as signed: true is -1 < false
            g = _INT_CMP[pred]
            return lambda a, b: _as_result(g(np.negative(np.asarray(a, np.int8)), np.negative(np.asarray(b, np.int8))))
        return _INT_CMP[pred]
    g = _INT_CMP["s" + pred[1:]]
    return lambda a, b: _as_result(g(unsigned(np.asarray(a)), unsigned(np.asarray(b))))


# ------------------------------------------------------------------------------- unary

_MATH: dict[str, Fn1] = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: np.reciprocal(np.sqrt(x)),
    "sin": np.sin,
    "cos": np.cos,
    "exp2": np.exp2,
    "log2": np.log2,
    "floor": np.floor,
    "ceil": np.ceil,
    "fabs": np.abs,
    "fneg": np.negative,
}


def make_unary(kind: str, element: ElementType) -> Fn1:
    if kind == "not":
        return np.invert  # bitwise; logical on bool
    if kind in ("neg", "iabs"):
        if isinstance(element, ScalarType) and element.bits == 1:
            return lambda a: a  # -x and |x| of a one-bit value keep its bit
        return np.negative if kind == "neg" else np.abs
    f = _MATH[kind]
    if not isinstance(element, ScalarType):
        raise ValueError(f"unary {kind} on {element}")
    if element.name == "f16" and kind not in ("fabs", "fneg"):
        return lambda a: _as_result(np.asarray(f(np.asarray(a, np.float32))).astype(np.float16))
    if is_bf16(element):
        return lambda a: round_bf16(f(a))
    return f


# ------------------------------------------------------------------------------- fma


def make_fma(element: ElementType) -> Fn3:
    """a*b+c rounded once: computed in float64 (exact products for f16/f32) and rounded."""
    dt = value_dtype(element)
    if dt == np.float64:
        return lambda a, b, c: a * b + c
    bf = is_bf16(element)

    def fma(a: Any, b: Any, c: Any) -> Any:
        r = (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(dt)
        return _as_result(round_bf16(r) if bf else r)

    return fma


# ------------------------------------------------------------------------------- casts


def _float_to_int(dst: np.dtype[Any], signed: bool, bits: int) -> Fn1:
    lo = -(1 << (bits - 1)) if signed else 0
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    target = dst if signed else unsigned(np.zeros(1, dst)).dtype

    def convert(a: Any) -> Any:
        x = np.trunc(np.asarray(a, np.float64))
        over = x >= float(hi)
        under = x <= float(lo)
        bad = over | under | np.isnan(x)
        safe = np.where(bad, 0, x).astype(target)
        r = np.where(over, target.type(hi), np.where(under, target.type(lo), safe)).astype(target)
        return _as_result(r.view(dst) if r.dtype != dst else r)

    return convert


def make_cast(kind: str, src: ElementType, dst: ElementType) -> Fn1:
    """Convert values of `src` to `dst` by `kind` (see the module docstring for the rules)."""
    sdt, ddt = value_dtype(src), value_dtype(dst)
    sbits, dbits = _bits(src), _bits(dst)
    bf = is_bf16(dst)

    def finish(x: Any) -> Any:
        return _as_result(round_bf16(x) if bf else x)

    if kind in ("sext", "zext", "trunc", "ptrtoint", "inttoptr"):
        if dbits == 1:
            return lambda a: _as_result((np.asarray(a) & 1).astype(np.bool_))
        if sbits == 1:
            if kind == "sext":
                return lambda a: _as_result(np.where(a, ddt.type(-1), ddt.type(0)))
            return lambda a: _as_result(np.asarray(a).astype(ddt))
        if kind in ("zext", "inttoptr") and dbits > sbits:
            return lambda a: _as_result(unsigned(np.asarray(a)).astype(ddt))
        return lambda a: _as_result(np.asarray(a).astype(ddt))
    if kind in ("fpext", "fptrunc"):
        return lambda a: finish(np.asarray(a).astype(ddt))
    if kind == "sitofp":
        if sbits == 1:
            return lambda a: finish(np.where(a, ddt.type(-1), ddt.type(0)))
        return lambda a: finish(np.asarray(a).astype(ddt))
    if kind == "uitofp":
        if sbits == 1:
            return lambda a: finish(np.asarray(a).astype(ddt))
        return lambda a: finish(unsigned(np.asarray(a)).astype(ddt))
    if kind in ("fptosi", "fptoui"):
        if dbits == 1:
            return lambda a: _as_result(np.asarray(a) != 0)
        return _float_to_int(ddt, kind == "fptosi", dbits)
    if kind == "bitcast":
        return _bitcast(src, dst)
    raise ValueError(f"unknown cast kind {kind!r}")


def _bitcast(src: ElementType, dst: ElementType) -> Fn1:
    sdt, ddt = value_dtype(src), value_dtype(dst)
    if is_bf16(src):  # bf16 value (f32) -> 16 bits
        return lambda a: _as_result((np.asarray(a, np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16).view(ddt))
    if is_bf16(dst):
        return lambda a: _as_result((np.asarray(a).view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32))
    if sdt == ddt:
        return lambda a: a
    return lambda a: _as_result(np.asarray(a).view(ddt))
