"""Compile-time constant folding with C semantics (wrap-around integers, truncating division,
float rounding to the operation's type), so tile dimensions written as macro arithmetic
(`TM * 2`, `(N + 1) / 2`) have exact values and folding agrees with what the GPU computes.
"""

from __future__ import annotations

import math
import struct

from .types import ScalarType

Const = int | float | bool


class FoldError(Exception):
    """A constant operation that C leaves undefined (division by zero, shift out of range)."""


def wrap_int(value: int, t: ScalarType) -> int:
    """`value` reduced to the range of integer type `t` (two's complement)."""
    bits = t.bits
    if t.is_bool:
        return 1 if value else 0
    value &= (1 << bits) - 1
    if t.is_signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def round_float(value: float, t: ScalarType) -> float:
    """`value` rounded to the precision of float type `t`."""
    if t.name == "fp64" or math.isnan(value) or math.isinf(value):
        return value
    try:
        if t.name == "fp32":
            return float(struct.unpack("<f", struct.pack("<f", value))[0])
        if t.name == "fp16":
            return float(struct.unpack("<e", struct.pack("<e", value))[0])
    except (OverflowError, struct.error):
        return math.copysign(math.inf, value)
    if t.name == "bf16":
        try:
            bits = struct.unpack("<I", struct.pack("<f", value))[0]
        except (OverflowError, struct.error):
            return math.copysign(math.inf, value)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return float(struct.unpack("<f", struct.pack("<I", bits))[0])
    return value


def convert(value: Const, t: ScalarType) -> Const:
    """A constant converted to scalar type `t` as C's conversions do."""
    if t.is_bool:
        return bool(value)
    if t.is_integer:
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                raise FoldError(f"cannot convert {value} to '{t}'")
            value = int(value)  # truncation toward zero
        return wrap_int(int(value), t)
    if t.is_float:
        return round_float(float(value), t)
    raise FoldError(f"cannot convert a constant to '{t}'")


def binary(op: str, a: Const, b: Const, operand: ScalarType, result: ScalarType) -> Const:
    """Fold `a op b` computed in type `operand` giving type `result`."""
    if op in ("&&", "||"):
        return (bool(a) and bool(b)) if op == "&&" else (bool(a) or bool(b))
    x, y = convert(a, operand), convert(b, operand)
    if op in ("<", ">", "<=", ">=", "==", "!="):
        return {
            "<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y, "==": x == y, "!=": x != y
        }[op]
    if operand.is_float:
        fx, fy = float(x), float(y)
        if op == "+":
            r = fx + fy
        elif op == "-":
            r = fx - fy
        elif op == "*":
            r = fx * fy
        elif op == "/":
            if fy == 0.0:
                r = math.nan if fx == 0.0 or math.isnan(fx) else math.copysign(math.inf, fx) * (
                    math.copysign(1.0, fy))
            else:
                r = fx / fy
        elif op == "%":
            if fy == 0.0:
                r = math.nan
            else:
                r = math.fmod(fx, fy)
        else:
            raise FoldError(f"operator '{op}' on floats")
        return round_float(r, result)
    return wrap_int(_int_result(op, int(x), int(y), operand), result)


def _int_result(op: str, ix: int, iy: int, operand: ScalarType) -> int:
    """The true (unwrapped) value of `ix op iy` on integers of type `operand`."""
    if op == "+":
        return ix + iy
    if op == "-":
        return ix - iy
    if op == "*":
        return ix * iy
    if op in ("/", "%"):
        if iy == 0:
            raise FoldError("division by zero in a constant expression")
        q = abs(ix) // abs(iy)
        if (ix < 0) != (iy < 0):
            q = -q
        return q if op == "/" else ix - q * iy
    if op == "&":
        return ix & iy
    if op == "|":
        return ix | iy
    if op == "^":
        return ix ^ iy
    if op in ("<<", ">>"):
        if iy < 0 or iy >= operand.bits:
            raise FoldError(f"shift by {iy} is out of range for '{operand}'")
        # (>>: arithmetic for signed (Python ints), logical for unsigned (>= 0))
        return ix << iy if op == "<<" else ix >> iy
    raise FoldError(f"operator '{op}'")


def signed_overflow(op: str, a: Const, b: Const, operand: ScalarType) -> bool:
    """Whether `a op b` computed in signed integer type `operand` has a true value outside the
    type's range: undefined in C (compilers warn), folded to the wrapped value the GPU computes.
    Unsigned arithmetic wraps by definition. A left shift into the sign bit (`1 << 31`) is not
    counted, as GCC and Clang accept it silently."""
    if not operand.is_integer or operand.is_bool or not operand.is_signed or \
            op not in ("+", "-", "*", "/", "%", "<<"):
        return False
    x, y = int(convert(a, operand)), int(convert(b, operand))
    r = _int_result(op, x, y, operand)
    top = 1 << (operand.bits - 1)
    if op == "<<" and x >= 0:
        return r >= 2 * top
    return not -top <= r < top


def unary(op: str, a: Const, t: ScalarType) -> Const:
    """Fold `op a` where `t` is the (promoted) result type."""
    if op == "!":
        return not bool(a)
    v = convert(a, t)
    if op == "+":
        return v
    if op == "-":
        return round_float(-float(v), t) if t.is_float else wrap_int(-int(v), t)
    if op == "~":
        return wrap_int(~int(v), t)
    raise FoldError(f"operator '{op}'")


def unary_overflow(op: str, a: Const, t: ScalarType) -> bool:
    """Whether `op a` in signed integer type `t` overflows: only `-` of the most negative value."""
    if op != "-" or not t.is_integer or t.is_bool or not t.is_signed:
        return False
    return int(convert(a, t)) == -(1 << (t.bits - 1))


_PACK = {16: "e", 32: "f", 64: "d"}
_IPACK = {8: "b", 16: "h", 32: "i", 64: "q"}


def bitcast(value: Const, src: ScalarType, dst: ScalarType) -> Const:
    """Reinterpret the bits of a constant of type `src` as type `dst` (equal widths)."""
    bits = src.bits
    if src.is_float:
        if src.name == "bf16":
            raw = struct.unpack("<I", struct.pack("<f", float(value)))[0] >> 16
        else:
            raw = struct.unpack("<" + _IPACK[bits].upper(), struct.pack("<" + _PACK[bits], float(value)))[0]
    else:
        raw = int(value) & ((1 << bits) - 1)
    if dst.is_float:
        if dst.name == "bf16":
            return float(struct.unpack("<f", struct.pack("<I", raw << 16))[0])
        return float(struct.unpack("<" + _PACK[bits], struct.pack("<" + _IPACK[bits].upper(), raw))[0])
    return wrap_int(raw, dst)
