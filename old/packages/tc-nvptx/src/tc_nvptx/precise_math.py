"""Accurate fp32 exp, exp2, log, log2, sin and cos from PTX arithmetic (no libdevice).

These are the lowerings of `tc.unary` with `approx=False` (CompileOptions.precise_math sets it on
every math op; the language's sin, cos, exp2 and log2 have it by default). Each function is
written once, over an abstract instruction set (`MathOps`): `LlvmOps` emits LLVM IR for it, and the
tests run the very same code over numpy float32/float64 arrays (`tests/test_nvptx_precise_math.py`),
so that the accuracy measured on the CPU is that of the emitted instruction sequence, with the
constants below.

Only IEEE-rounded operations are used (add, mul, fma, rint, conversions, integer bit operations):
no MUFU approximation, so the numpy model is exact up to the rare double rounding of its fma
emulation. Sequences never feed an fmul directly into an fadd (LLVM and ptxas may contract such a
pair into an fma, which the model would not mirror); where a product is added, an fma is written.

Accuracy (max error over all floats measured by the model, see the tests and packages/tc-nvptx
README): exp, exp2, log, log2 about 1 ulp; sin and cos about 1-2 ulp for every finite argument.

- exp2(x): n = rint(x), f = x - n in [-1/2, 1/2] (exact), 2^f = 1 + f P(f) (degree-6 minimax),
  scaled by 2^n in two exact power-of-two factors (no overflow in the intermediate, one rounding in
  the subnormal range). x is clamped to [-151, 129] first (0 and inf beyond), NaN passes through.
- exp(x): n = rint(x log2 e), r = x - n ln2 (Cody-Waite, two-part ln2: exact), e^r = 1 + r P(r),
  scaled as exp2. x is clamped to [-104, 89].
- log(x), log2(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)) by bit manipulation (subnormals are
  scaled by 2^23 first); with f = m - 1 (exact), log(m) = f + f^2 Q(f) (degree-9 minimax for Q);
  log = e ln2 (two-part) + log(m), log2 = e + log(m) log2(e) (log2(e) two-part). 0 -> -inf,
  x < 0 -> NaN, inf -> inf, NaN -> NaN.
- sin(x), cos(x): j = rint(x 2/pi), r = x - j pi/2 with pi/2 in three fp32 parts (Cody-Waite; the
  first fma is exact for |x| <= FAST_TRIG_LIMIT = 105615), then minimax polynomials on
  [-pi/4, pi/4] and the quadrant j mod 4. Larger |x| take a branch to an exact reduction in fp64:
  x = M 2^k (M the 24-bit significand), x mod 2pi = M (2^k mod 2pi), with 2^k mod 2pi read from a
  table of 105 entries in three parts (the first two have 29 bits, so M times them is exact); then
  a three-part Cody-Waite reduction by pi/2 in fp64. inf and NaN give NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, Protocol, TypeVar

import llvmlite.ir as ir

from .llvm_types import join

V = TypeVar("V")


# ---------------------------------------------------------------------------------------------
# constants (shared with the numpy model of the tests)


def _pi(bits: int) -> Fraction:
    """pi to `bits` bits (Machin's formula in integers)."""
    scale = 1 << (bits + 16)

    def atan_inv(n: int) -> int:
        total, term, k, sign = 0, scale // n, 1, 1
        n2 = n * n
        while term:
            total += sign * (term // k)
            term //= n2
            k += 2
            sign = -sign
        return total

    return Fraction(16 * atan_inv(5) - 4 * atan_inv(239), scale)


PI = _pi(400)


def _round_bits(x: Fraction, bits: int) -> Fraction:
    """x rounded to `bits` significant bits (to nearest)."""
    if x == 0:
        return x
    e = 0
    a = abs(x)
    while a >= 2:
        a /= 2
        e += 1
    while a < 1:
        a *= 2
        e -= 1
    q = Fraction(2) ** (e - bits + 1)
    return round(x / q) * q


def _f32(x: Fraction) -> float:
    """x rounded to the nearest fp32 value (normal range), as a Python float."""
    return float(_round_bits(x, 24))


def _split(x: Fraction, bits: Sequence[int]) -> list[float]:
    """x as a sum of parts of the given significant bits (the last part takes what is left)."""
    out = []
    rest = x
    for nb in bits:
        part = _round_bits(rest, nb)
        out.append(float(part))
        rest -= Fraction(float(part))
    return out


LOG2E = 1.4426950408889634
#: 2^f = 1 + f * P(f) on [-1/2, 1/2] (minimax, fp32 coefficients, highest degree last)
EXP2_POLY = (0.6931471824645996, 0.24022650718688965, 0.055504102259874344, 0.009618038311600685,
             0.0013333935057744384, 0.00015466756303794682, 1.5196156709862407e-05)  # fmt: skip
#: e^r = 1 + r * P(r) on [-ln2/2, ln2/2]
EXP_POLY = (1.0, 0.5, 0.1666666567325592, 0.04166627302765846, 0.008333568461239338,
            0.0013945897808298469, 0.00019767672347370535)  # fmt: skip
#: ln2 = LN2_HI + LN2_LO; LN2_HI has 15 significant bits, so n * LN2_HI is exact for |n| < 512
LN2_HI = 0.693145751953125
LN2_LO = 1.428606765330187e-06
#: log2(e) = LOG2E_HI + LOG2E_LO (fp32 parts)
LOG2E_HI = 1.4426950216293335
LOG2E_LO = 1.925963033500011e-08
#: log(1 + f) = f + f^2 * Q(f) on [sqrt(1/2) - 1, sqrt(2) - 1]
LOG_POLY = (-0.5, 0.3333331048488617, -0.2500002682209015, 0.20002220571041107, -0.16667689383029938,
            0.1421768069267273, -0.12407337874174118, 0.11900955438613892, -0.1167605072259903,
            0.06725059449672699)  # fmt: skip
#: bit pattern of the fp32 nearest sqrt(1/2): the mantissa range's lower end
SQRT_HALF_BITS = 0x3F3504F3
#: sin(r) = r + r^3 * S(r^2), cos(r) = 1 + r^2 * C(r^2) on [-pi/4, pi/4]
SIN_POLY = (-0.1666666716337204, 0.008333329111337662, -0.00019839312881231308, 2.7181215500604594e-06)
COS_POLY = (-0.5, 0.04166661947965622, -0.001388668199069798, 2.4383567506447434e-05)

#: fp32 fast reduction: pi/2 = PIO2_F[0] + PIO2_F[1] + PIO2_F[2]; PIO2_F[0] has 22 bits, which
#: keeps x - j * PIO2_F[0] exact for |x| <= FAST_TRIG_LIMIT (|j| < 2^17)
PIO2_F = tuple(_f32(p) if i else float(p) for i, p in enumerate(
    [_round_bits(PI / 2, 22), _round_bits(PI / 2 - _round_bits(PI / 2, 22), 24),
     PI / 2 - _round_bits(PI / 2, 22) - _round_bits(PI / 2 - _round_bits(PI / 2, 22), 24)]))  # fmt: skip
TWO_OVER_PI_F = _f32(2 / PI)
FAST_TRIG_LIMIT = 105615.0
#: fp64 slow reduction: pi/2 in three parts, the first two of 26 bits (j < 2^27: j * part exact)
PIO2_D = tuple(_split(PI / 2, [26, 26, 53]))
TWO_OVER_PI_D = float(_round_bits(2 / PI, 53))
#: 2^k mod 2pi for k = 0..104, three parts each (29, 29, 53 bits), flattened: an fp32 x >= 2^24
#: is M * 2^k with a 24-bit integer M and k <= 104
TRIG_TABLE_SIZE = 105


def _trig_table() -> tuple[float, ...]:
    out: list[float] = []
    two_pi = 2 * PI
    for k in range(TRIG_TABLE_SIZE):
        v = Fraction(2) ** k
        v -= (v // two_pi) * two_pi
        out.extend(_split(v, [29, 29, 53]))
    return tuple(out)


TRIG_TABLE = _trig_table()


# ---------------------------------------------------------------------------------------------
# the abstract instruction set


class MathOps(Protocol[V]):
    """The operations the sequences are written in. f32 values unless the name says d (f64) or
    i (i32); predicates give booleans."""

    def f(self, v: float) -> V: ...
    def i(self, v: int) -> V: ...
    def add(self, a: V, b: V) -> V: ...
    def sub(self, a: V, b: V) -> V: ...
    def mul(self, a: V, b: V) -> V: ...
    def fma(self, a: V, b: V, c: V) -> V: ...
    def rint(self, a: V) -> V: ...
    def fabs(self, a: V) -> V: ...
    def neg(self, a: V) -> V: ...
    def lt(self, a: V, b: V) -> V: ...
    def gt(self, a: V, b: V) -> V: ...
    def eq(self, a: V, b: V) -> V: ...
    def lt_or_nan(self, a: V, b: V) -> V: ...
    def isnan(self, a: V) -> V: ...
    def or_(self, a: V, b: V) -> V: ...
    def select(self, c: V, a: V, b: V) -> V: ...
    def bits(self, a: V) -> V: ...
    def from_bits(self, a: V) -> V: ...
    def to_int(self, a: V) -> V: ...  # an integral f32 (or f64) to i32; NaN -> 0
    def i_to_f(self, a: V) -> V: ...
    def iadd(self, a: V, b: V) -> V: ...
    def isub(self, a: V, b: V) -> V: ...
    def iand(self, a: V, b: V) -> V: ...
    def ior(self, a: V, b: V) -> V: ...
    def shl(self, a: V, n: int) -> V: ...
    def ashr(self, a: V, n: int) -> V: ...
    def ilt(self, a: V, b: V) -> V: ...
    def igt(self, a: V, b: V) -> V: ...
    def ieq(self, a: V, b: V) -> V: ...
    def d(self, v: float) -> V: ...
    def to_d(self, a: V) -> V: ...  # f32 -> f64
    def i_to_d(self, a: V) -> V: ...
    def d_to_f(self, a: V) -> V: ...
    def dadd(self, a: V, b: V) -> V: ...
    def dsub(self, a: V, b: V) -> V: ...
    def dmul(self, a: V, b: V) -> V: ...
    def dfma(self, a: V, b: V, c: V) -> V: ...
    def drint(self, a: V) -> V: ...
    def table(self, index: V, part: int) -> V: ...  # TRIG_TABLE[3 * index + part] (f64)
    def branch(self, cond: V, slow: Callable[[], tuple[V, V]], fast: tuple[V, V]) -> tuple[V, V]: ...


def _horner(o: MathOps[V], x: V, coeffs: Sequence[float]) -> V:
    acc = o.f(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = o.fma(acc, x, o.f(c))
    return acc


def _scale(o: MathOps[V], p: V, n: V) -> V:
    """p * 2^n for an integer n (i32) in [-151, 129] and p in [1/2, 2]: two exact power-of-two
    factors, so only the last product rounds (in the subnormal range) or overflows."""
    n1 = o.ashr(n, 1)
    n2 = o.isub(n, n1)
    s1 = o.from_bits(o.shl(o.iadd(n1, o.i(127)), 23))
    s2 = o.from_bits(o.shl(o.iadd(n2, o.i(127)), 23))
    return o.mul(o.mul(p, s1), s2)


def _clamp(o: MathOps[V], x: V, lo: float, hi: float) -> V:
    """x clamped to [lo, hi] with NaN passing through (compares, not minnum/maxnum)."""
    x = o.select(o.gt(x, o.f(hi)), o.f(hi), x)
    return o.select(o.lt(x, o.f(lo)), o.f(lo), x)


def exp2(o: MathOps[V], x: V) -> V:
    x = _clamp(o, x, -151.0, 129.0)
    n = o.rint(x)
    f = o.sub(x, n)
    p = o.fma(f, _horner(o, f, EXP2_POLY), o.f(1.0))
    return _scale(o, p, o.to_int(n))


def exp(o: MathOps[V], x: V) -> V:
    x = _clamp(o, x, -104.0, 89.0)
    n = o.rint(o.mul(x, o.f(LOG2E)))
    r = o.fma(n, o.f(-LN2_HI), x)
    r = o.fma(n, o.f(-LN2_LO), r)
    p = o.fma(r, _horner(o, r, EXP_POLY), o.f(1.0))
    return _scale(o, p, o.to_int(n))


def _log_parts(o: MathOps[V], x: V) -> tuple[V, V, V]:
    """(e as f32, f = m - 1, f * Q(f)): log(x) = e ln2 + f + f (f Q(f))."""
    sub = o.lt(x, o.f(1.1754943508222875e-38))  # subnormal (or 0, negative: fixed up later)
    xs = o.select(sub, o.mul(x, o.f(8388608.0)), x)
    ix = o.bits(xs)
    t = o.isub(ix, o.i(SQRT_HALF_BITS))
    e = o.ashr(t, 23)
    m = o.from_bits(o.isub(ix, o.shl(e, 23)))
    e = o.select(sub, o.isub(e, o.i(23)), e)
    f = o.sub(m, o.f(1.0))
    fq = o.mul(f, _horner(o, f, LOG_POLY))
    return o.i_to_f(e), f, fq


def _log_special(o: MathOps[V], x: V, y: V) -> V:
    inf = o.f(float("inf"))
    y = o.select(o.eq(x, inf), inf, y)
    y = o.select(o.eq(x, o.f(0.0)), o.f(float("-inf")), y)
    return o.select(o.lt_or_nan(x, o.f(0.0)), o.f(float("nan")), y)


def log(o: MathOps[V], x: V) -> V:
    e, f, fq = _log_parts(o, x)
    lm = o.fma(f, fq, f)
    y = o.fma(e, o.f(LN2_LO), lm)
    y = o.fma(e, o.f(LN2_HI), y)
    return _log_special(o, x, y)


def log2(o: MathOps[V], x: V) -> V:
    e, f, fq = _log_parts(o, x)
    c = o.fma(o.mul(f, fq), o.f(LOG2E_HI), o.mul(f, o.f(LOG2E_LO)))
    lm2 = o.fma(f, o.f(LOG2E_HI), c)
    return _log_special(o, x, o.add(e, lm2))


def _sincos_poly(o: MathOps[V], r: V) -> tuple[V, V]:
    z = o.mul(r, r)
    s = o.fma(r, o.mul(z, _horner(o, z, SIN_POLY)), r)
    c = o.fma(z, _horner(o, z, COS_POLY), o.f(1.0))
    return s, c


def _reduce_fast(o: MathOps[V], x: V) -> tuple[V, V]:
    """(r, quadrant as i32) for |x| <= FAST_TRIG_LIMIT."""
    j = o.rint(o.mul(x, o.f(TWO_OVER_PI_F)))
    r = o.fma(j, o.f(-PIO2_F[0]), x)
    r = o.fma(j, o.f(-PIO2_F[1]), r)
    r = o.fma(j, o.f(-PIO2_F[2]), r)
    return r, o.to_int(j)


def _reduce_slow(o: MathOps[V], x: V) -> tuple[V, V]:
    """(r, quadrant as i32) for any finite x, exactly (fp64 with a table of 2^k mod 2pi)."""
    ix = o.iand(o.bits(x), o.i(0x7FFFFFFF))
    k = o.isub(o.ashr(ix, 23), o.i(150))
    big = o.igt(k, o.i(0))
    kk = o.select(big, o.select(o.igt(k, o.i(TRIG_TABLE_SIZE - 1)), o.i(TRIG_TABLE_SIZE - 1), k), o.i(0))
    mant = o.ior(o.iand(ix, o.i(0x7FFFFF)), o.i(0x800000))
    a = o.select(big, o.i_to_d(mant), o.to_d(o.fabs(x)))
    y1 = o.dmul(a, o.table(kk, 0))  # exact (24 x 29 bits)
    y2 = o.dmul(a, o.table(kk, 1))  # exact
    y3 = o.dmul(a, o.table(kk, 2))
    j = o.drint(o.dmul(o.dadd(y1, y2), o.d(TWO_OVER_PI_D)))
    r = o.dfma(j, o.d(-PIO2_D[0]), y1)  # exact
    r = o.dadd(r, y2)
    r = o.dfma(j, o.d(-PIO2_D[1]), r)
    r = o.dadd(r, o.dfma(j, o.d(-PIO2_D[2]), y3))
    q = o.iand(o.to_int(j), o.i(3))
    neg = o.lt(x, o.f(0.0))
    rf = o.d_to_f(r)
    return o.select(neg, o.neg(rf), rf), o.select(neg, o.isub(o.i(0), q), q)


def _reduce(o: MathOps[V], x: V) -> tuple[V, V]:
    fast = _reduce_fast(o, x)
    return o.branch(o.gt(o.fabs(x), o.f(FAST_TRIG_LIMIT)), lambda: _reduce_slow(o, x), fast)


def _quadrant(o: MathOps[V], x: V, q: V, s: V, c: V) -> V:
    """sin(x) from sin(r), cos(r) and the quadrant q (q + 1 gives cos(x))."""
    v = o.select(o.ieq(o.iand(q, o.i(1)), o.i(0)), s, c)
    v = o.select(o.ieq(o.iand(q, o.i(2)), o.i(0)), v, o.neg(v))
    return o.select(o.isnan(o.sub(x, x)), o.f(float("nan")), v)  # inf, NaN -> NaN


def sin(o: MathOps[V], x: V) -> V:
    r, q = _reduce(o, x)
    s, c = _sincos_poly(o, r)
    v = _quadrant(o, x, q, s, c)
    return o.select(o.eq(x, o.f(0.0)), x, v)  # sin(-0) = -0


def cos(o: MathOps[V], x: V) -> V:
    r, q = _reduce(o, x)
    s, c = _sincos_poly(o, r)
    return _quadrant(o, x, o.iadd(q, o.i(1)), s, c)


FUNCTIONS: dict[str, Callable[[MathOps[Any], Any], Any]] = {
    "exp": exp, "exp2": exp2, "log": log, "log2": log2, "sin": sin, "cos": cos}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# LLVM IR


F32 = ir.FloatType()
F64 = ir.DoubleType()
I32 = ir.IntType(32)
_TABLE_NAME = "tc_trig_reduction_table"


class LlvmOps:
    """MathOps emitting LLVM IR with a builder (intrinsics through `call`, PTX through `asm`)."""

    def __init__(self, b: ir.IRBuilder, call: Callable[[str, ir.Type, list[ir.Value]], ir.Value],
                 asm: Callable[[ir.Type, str, str, list[ir.Value]], ir.Value]) -> None:
        self.b = b
        self.call = call
        self.asm = asm

    def f(self, v: float) -> ir.Value:
        return ir.Constant(F32, v)

    def i(self, v: int) -> ir.Value:
        return ir.Constant(I32, v)

    def add(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fadd(a, b)

    def sub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fsub(a, b)

    def mul(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fmul(a, b)

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        return self.call("llvm.fma.f32", F32, [a, b, c])

    def rint(self, a: ir.Value) -> ir.Value:
        return self.call("llvm.rint.f32", F32, [a])

    def fabs(self, a: ir.Value) -> ir.Value:
        return self.call("llvm.fabs.f32", F32, [a])

    def neg(self, a: ir.Value) -> ir.Value:
        return self.b.fneg(a)

    def lt(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("<", a, b)

    def gt(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered(">", a, b)

    def eq(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_ordered("==", a, b)

    def lt_or_nan(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("<", a, b)

    def isnan(self, a: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", a, a)

    def or_(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.or_(a, b)

    def select(self, c: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(c, a, b)

    def bits(self, a: ir.Value) -> ir.Value:
        return self.b.bitcast(a, I32)

    def from_bits(self, a: ir.Value) -> ir.Value:
        return self.b.bitcast(a, F32)

    def to_int(self, a: ir.Value) -> ir.Value:
        # cvt (not fptosi, whose NaN result is poison): NaN -> 0
        if a.type == F64:
            return self.asm(I32, "cvt.rzi.s32.f64 $0, $1;", "=r,d", [a])
        return self.asm(I32, "cvt.rzi.s32.f32 $0, $1;", "=r,f", [a])

    def i_to_f(self, a: ir.Value) -> ir.Value:
        return self.b.sitofp(a, F32)

    def iadd(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.add(a, b)

    def isub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.sub(a, b)

    def iand(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.and_(a, b)

    def ior(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.or_(a, b)

    def shl(self, a: ir.Value, n: int) -> ir.Value:
        return self.b.shl(a, self.i(n))

    def ashr(self, a: ir.Value, n: int) -> ir.Value:
        return self.b.ashr(a, self.i(n))

    def ilt(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.icmp_signed("<", a, b)

    def igt(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.icmp_signed(">", a, b)

    def ieq(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.icmp_signed("==", a, b)

    def d(self, v: float) -> ir.Value:
        return ir.Constant(F64, v)

    def to_d(self, a: ir.Value) -> ir.Value:
        return self.b.fpext(a, F64)

    def i_to_d(self, a: ir.Value) -> ir.Value:
        return self.b.sitofp(a, F64)

    def d_to_f(self, a: ir.Value) -> ir.Value:
        return self.b.fptrunc(a, F32)

    # LLVM's arithmetic takes its width from the operands: the f64 steps are the same calls
    dadd = add
    dsub = sub
    dmul = mul

    def dfma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        return self.call("llvm.fma.f64", F64, [a, b, c])

    def drint(self, a: ir.Value) -> ir.Value:
        return self.call("llvm.rint.f64", F64, [a])

    def table(self, index: ir.Value, part: int) -> ir.Value:
        module = self.b.function.module
        g = module.globals.get(_TABLE_NAME)
        arr = ir.ArrayType(F64, len(TRIG_TABLE))
        if g is None:
            g = ir.GlobalVariable(module, arr, _TABLE_NAME, addrspace=1)
            g.initializer = ir.Constant(arr, list(TRIG_TABLE))
            g.global_constant = True
            g.linkage = "internal"
            g.align = 8
            g.type = ir.PointerType(addrspace=1)  # opaque, like the shared-memory global
        idx = self.b.add(self.b.mul(index, self.i(3)), self.i(part))
        return self.b.load(self.b.gep(g, [idx], source_etype=F64), typ=F64)

    def branch(self, cond: ir.Value, slow: Callable[[], tuple[ir.Value, ir.Value]],
               fast: tuple[ir.Value, ir.Value]) -> tuple[ir.Value, ir.Value]:
        b = self.b
        before = b.block
        with b.if_then(cond, likely=False):
            vals = slow()
            slow_end = b.block
        out = join(b, fast, before, vals, slow_end)
        return out[0], out[1]
