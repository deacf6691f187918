"""Precise math (approx=False, CompileOptions.precise_math): the PTX the sequences give, and their
accuracy measured on the CPU by running tc_nvptx.precise_math's very code over numpy arrays."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from tc_nvptx import compile
from tc_nvptx import precise_math as pm
from tc_nvptx.ptxas import find_ptxas
from tc_opt import CompileOptions

Arr = npt.NDArray[Any]
F32 = np.float32
F64 = np.float64


class NumpyOps:
    """pm.MathOps over numpy arrays: f32 ops in float32 (IEEE, as on the GPU), fma as the exact
    product in float64 plus the addend, rounded to float32 (a double rounding, off by one ulp of an
    intermediate with probability ~2^-29; exact whenever the fp32 result is exact)."""

    def f(self, v: float) -> Arr:
        return np.asarray(v, F32)

    def i(self, v: int) -> Arr:
        return np.asarray(v, np.int32)

    def add(self, a: Arr, b: Arr) -> Arr:
        return (a + b).astype(F32)

    def sub(self, a: Arr, b: Arr) -> Arr:
        return (a - b).astype(F32)

    def mul(self, a: Arr, b: Arr) -> Arr:
        return (a * b).astype(F32)

    def fma(self, a: Arr, b: Arr, c: Arr) -> Arr:
        return (a.astype(F64) * b.astype(F64) + c.astype(F64)).astype(F32)

    def rint(self, a: Arr) -> Arr:
        return np.rint(a).astype(F32)

    def fabs(self, a: Arr) -> Arr:
        return np.abs(a)

    def neg(self, a: Arr) -> Arr:
        return -a

    def lt(self, a: Arr, b: Arr) -> Arr:
        return a < b

    def gt(self, a: Arr, b: Arr) -> Arr:
        return a > b

    def eq(self, a: Arr, b: Arr) -> Arr:
        return np.asarray(a == b)

    def lt_or_nan(self, a: Arr, b: Arr) -> Arr:
        return (a < b) | np.isnan(a) | np.isnan(b)

    def isnan(self, a: Arr) -> Arr:
        return np.isnan(a)

    def or_(self, a: Arr, b: Arr) -> Arr:
        return a | b

    def select(self, c: Arr, a: Arr, b: Arr) -> Arr:
        return np.where(c, a, b)

    def bits(self, a: Arr) -> Arr:
        return np.asarray(a, F32).view(np.int32)

    def from_bits(self, a: Arr) -> Arr:
        return np.asarray(a, np.int32).view(F32)

    def to_int(self, a: Arr) -> Arr:  # cvt.rzi.s32: NaN -> 0, saturating
        a = np.nan_to_num(a.astype(F64), nan=0.0)
        return np.asarray(np.trunc(np.clip(a, -(2.0**31), 2.0**31 - 1)).astype(np.int32))

    def i_to_f(self, a: Arr) -> Arr:
        return a.astype(F32)

    def iadd(self, a: Arr, b: Arr) -> Arr:
        return (a + b).astype(np.int32)

    def isub(self, a: Arr, b: Arr) -> Arr:
        return (a - b).astype(np.int32)

    def iand(self, a: Arr, b: Arr) -> Arr:
        return a & b

    def ior(self, a: Arr, b: Arr) -> Arr:
        return a | b

    def shl(self, a: Arr, n: int) -> Arr:
        return (a.astype(np.int64) << n).astype(np.uint64).astype(np.uint32).view(np.int32)

    def ashr(self, a: Arr, n: int) -> Arr:
        return a >> n

    def ilt(self, a: Arr, b: Arr) -> Arr:
        return a < b

    def igt(self, a: Arr, b: Arr) -> Arr:
        return a > b

    def ieq(self, a: Arr, b: Arr) -> Arr:
        return np.asarray(a == b)

    def d(self, v: float) -> Arr:
        return np.asarray(v, F64)

    def to_d(self, a: Arr) -> Arr:
        return a.astype(F64)

    def i_to_d(self, a: Arr) -> Arr:
        return a.astype(F64)

    def d_to_f(self, a: Arr) -> Arr:
        return a.astype(F32)

    def dadd(self, a: Arr, b: Arr) -> Arr:
        return a + b

    def dsub(self, a: Arr, b: Arr) -> Arr:
        return a - b

    def dmul(self, a: Arr, b: Arr) -> Arr:
        return a * b

    def dfma(self, a: Arr, b: Arr, c: Arr) -> Arr:
        # the sequences only use fp64 fma where the product is exact (j * 26-bit part)
        p = a * b
        assert np.all(~np.isfinite(p) | (np.abs(a) < 2.0**27))
        return p + c

    def drint(self, a: Arr) -> Arr:
        return np.rint(a)

    def table(self, index: Arr, part: int) -> Arr:
        return np.asarray(np.asarray(pm.TRIG_TABLE, F64)[3 * index + part])

    def branch(self, cond: Arr, slow: Callable[[], tuple[Arr, Arr]], fast: tuple[Arr, Arr]) -> tuple[Arr, Arr]:
        s = slow()
        return np.where(cond, s[0], fast[0]), np.where(cond, s[1], fast[1])


def model(name: str, x: Arr) -> Arr:
    with np.errstate(all="ignore"):
        return np.asarray(pm.FUNCTIONS[name](NumpyOps(), np.asarray(x, F32)), F32)


REFERENCE: dict[str, Callable[[Arr], Arr]] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin, "cos": np.cos}  # fmt: skip


def ulp_error(got: Arr, x: Arr, name: str) -> Arr:
    """|got - f(x)| in units of the fp32 ulp at f(x) (subnormal spacing below 2^-126); special
    values must match exactly (0 ulp) or count as infinitely wrong."""
    with np.errstate(all="ignore"):
        ref = REFERENCE[name](x.astype(F64))
        ref32 = ref.astype(F32)
        e = np.maximum(np.floor(np.log2(np.abs(ref))), -126.0)
        ulp = np.exp2(e - 23)
        err = np.abs(got.astype(F64) - ref) / ulp
        special = ~np.isfinite(ref32) | ~np.isfinite(got)
        same = (got == ref32) | (np.isnan(got) & np.isnan(ref32))
        return np.where(special, np.where(same, 0.0, np.inf), err)  # type: ignore[no-any-return]


def _all_floats(step: int, lo: float, hi: float, rng: np.random.Generator) -> Arr:
    """Every step-th positive float in [lo, hi] (random offset), both signs."""
    a = np.arange(np.float32(lo).view(np.int32), np.float32(hi).view(np.int32), step, dtype=np.int64)
    a = a + rng.integers(0, step, a.shape)
    x = a.astype(np.int32).view(F32)
    return np.concatenate([x, -x])


EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, 0.5, 1e-45, -1e-45, 1.17549435e-38,
                  3.4028235e38, -3.4028235e38, 88.72283, 88.72284, -87.33654, -103.2789, -103.97208,
                  -104.0, 89.0, 127.99999, 128.0, -126.0, -149.0, -149.5, -150.0, -150.5, -151.0,
                  0.70710677, 0.7071068, 1.4142135, 1.4142137, 1.0000001, 0.99999994, 105615.0, 105616.0,
                  16777216.0, 1e30, 1.5707964, 3.1415927, 6.2831855, 0.7853982], F32)  # fmt: skip


def _near_multiples_of_pio2(limit: int) -> Arr:
    """The floats nearest j * pi/2 and their neighbours, j up to `limit`: the hard cases of the
    range reduction."""
    j = np.arange(1, limit, dtype=F64)
    x = (j * (np.pi / 2)).astype(F32)
    bits = x.view(np.int32)
    out = np.concatenate([bits - 1, bits, bits + 1]).astype(np.int32).view(F32)
    return np.concatenate([out, -out])


#: (function, description, inputs, max ulp the model is allowed)
def _cases() -> list[tuple[str, str, Arr, float]]:
    rng = np.random.default_rng(5)
    every = _all_floats(997, 1e-45, 3.4e38, rng)
    cases: list[tuple[str, str, Arr, float]] = []
    for name in ("exp", "exp2", "log", "log2", "sin", "cos"):
        cases.append((name, "edge values", EDGES, 2.0))
        cases.append((name, "every 997th float", every, 2.0))
    cases.append(("exp", "[-104, 89]", rng.uniform(-104, 89, 400000).astype(F32), 2.0))
    cases.append(("exp2", "[-151, 129]", rng.uniform(-151, 129, 400000).astype(F32), 2.0))
    for name in ("log", "log2"):
        cases.append((name, "[0.5, 2]", _all_floats(13, 0.5, 2.0, rng), 2.0))
        cases.append((name, "subnormals", _all_floats(101, 1e-45, 1.2e-38, rng), 2.0))
    for name in ("sin", "cos"):
        cases.append((name, "[-pi, pi]", rng.uniform(-np.pi, np.pi, 400000).astype(F32), 2.0))
        cases.append((name, "|x| <= 105615", _all_floats(389, 1e-30, 105615.0, rng), 2.0))
        cases.append((name, "near j*pi/2, |x| <= 105615", _near_multiples_of_pio2(67237), 2.0))
        cases.append((name, "|x| > 105615", _all_floats(211, 105616.0, 3.4e38, rng), 2.0))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("name", "what", "x", "bound"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_model_accuracy(name: str, what: str, x: Arr, bound: float) -> None:
    err = ulp_error(model(name, x), x, name)
    worst = int(np.argmax(err))
    assert err[worst] <= bound, f"{name} on {what}: {err[worst]:.3f} ulp at x={x[worst]!r}"


def test_constants() -> None:
    """The split constants add up to what they split (to their precision)."""
    assert abs(sum(pm.PIO2_F) - np.pi / 2) < 1e-15
    assert np.float32(pm.PIO2_F[0]) == pm.PIO2_F[0] and np.float32(pm.PIO2_F[1]) == pm.PIO2_F[1]
    # 22 significant bits: x - j * PIO2_F[0] is exact for |j| < 2^17 (|x| <= FAST_TRIG_LIMIT)
    assert (int(np.float32(pm.PIO2_F[0]).view(np.int32)) & 0x3) == 0
    assert abs(pm.LN2_HI + pm.LN2_LO - np.log(2)) < 1e-13  # LN2_LO is an fp32
    assert abs(pm.LOG2E_HI + pm.LOG2E_LO - 1 / np.log(2)) < 1e-15
    t = np.asarray(pm.TRIG_TABLE).reshape(-1, 3)
    for k in (1, 30, 60, 100):
        assert abs(t[k].sum() - _mod_2pi(k)) < 1e-15
    for c in pm.EXP2_POLY + pm.EXP_POLY + pm.LOG_POLY + pm.SIN_POLY + pm.COS_POLY:
        assert float(np.float32(c)) == c


def _mod_2pi(k: int) -> float:
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 300
    return float(mpmath.fmod(mpmath.mpf(2) ** k, 2 * mpmath.pi))


# ---------------------------------------------------------------------------------------------
# the PTX

MATH = """
__global__ void f(float *X, float *Y, int n) {
  int i[BLOCK] = get_program_id(0) * BLOCK + 0 ... BLOCK;
  float x[BLOCK] = *?(i < n) (X + i);
  *?(i < n) (Y + i) = FN(x);
}
"""

HALF = MATH.replace("float *X, float *Y", "half *X, half *Y").replace("float x[", "half x[")


def _ptx(fn: str, precise: bool, arch: str = "sm_90", src: str = MATH) -> str:
    options = CompileOptions(arch=arch, precise_math=precise)
    return compile(src, defines={"BLOCK": 128, "FN": fn}, options=options, assemble_cubin=False).ptx


#: the MUFU instruction the fast path of each function uses
FAST = {"exp": "ex2.approx", "exp2": "ex2.approx", "log": "lg2.approx", "log2": "lg2.approx",
        "sin": "sin.approx", "cos": "cos.approx"}  # fmt: skip


@pytest.mark.parametrize("fn", ["exp", "log"])
def test_fast_exp_log_by_default(fn: str) -> None:
    """exp and log are the fast approximate versions unless precise_math is set (the spec)."""
    ptx = _ptx(fn, False)
    assert FAST[fn] in ptx
    assert "fma.rn.f32" not in ptx


@pytest.mark.parametrize("fn", ["exp", "exp2", "log", "log2", "sin", "cos"])
def test_precise_math_ptx(fn: str) -> None:
    """precise_math: no MUFU approximation; the range reduction and the polynomial instead."""
    ptx = _ptx(fn, True)
    assert not re.search(r"\b(ex2|lg2|sin|cos)\.approx", ptx)
    assert len(re.findall(r"fma\.rn\.f32", ptx)) >= 5
    if fn in ("exp", "exp2"):
        assert "cvt.rni.f32.f32" in ptx and "cvt.rzi.s32.f32" in ptx  # n = rint(x), 2^n by bits
    if fn in ("log", "log2"):
        assert re.search(r"add\.s32\s+%r\d+, %r\d+, -1060439283;", ptx)  # ix - bits(sqrt(1/2))
    if fn in ("sin", "cos"):
        assert "cvt.rni.f32.f32" in ptx
        assert "tc_trig_reduction_table" in ptx and "fma.rn.f64" in ptx  # the exact slow path


@pytest.mark.parametrize("fn", ["sin", "cos", "exp2", "log2"])
def test_language_default_is_precise(fn: str) -> None:
    """sin, cos, exp2 and log2 are exact in the language (only exp and log are approximate), so
    they take the precise sequences without the option too."""
    assert not re.search(r"\b(ex2|lg2|sin|cos)\.approx", _ptx(fn, False))


def test_half_precise() -> None:
    """f16 is computed in f32 and rounded: the same sequence."""
    ptx = _ptx("sin", True, src=HALF)
    assert "sin.approx" not in ptx and "tc_trig_reduction_table" in ptx


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not on the PATH")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts(arch: str) -> None:
    src = MATH.replace("FN(x)", "sin(x) + cos(x) + exp(x) + exp2(x) + log(x) + log2(x)")
    options = CompileOptions(arch=arch, precise_math=True)
    ck = compile(src, defines={"BLOCK": 256}, options=options)
    assert ck.cubin and ck.spills == 0
