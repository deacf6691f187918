"""Kernels written in Triton-C, through tc_lang, the lowering and the interpreter, against numpy
references with dtype-aware tolerances: vector add at odd sizes, transpositions, loops with
break, atomics, C integer semantics, every math built-in, 3-D tiles, declared facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tc_ir.interpreter import AssumptionError, InterpreterError, OutOfBoundsError, interpret
from tc_ir.ops import Module
from tc_ir.testing import lower_source

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"

#: (rtol, atol) per element type: a few ulps of the type (f16 has 11 significant bits).
TOLERANCE = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float16): (2e-3, 1e-3)}


def assert_close(actual: Any, expected: Any, dtype: Any) -> None:
    rtol, atol = TOLERANCE[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=rtol, atol=atol)


def spec_kernel(name: str, defines: dict[str, Any]) -> tuple[Module, str]:
    src = (KERNELS / name).read_text()
    return lower_source(src, defines, filename=name), src


# ------------------------------------------------------------------------------ vector add

MASKED_ADD = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
  int pid = get_program_id(0);
  int off[BLOCK] = pid * BLOCK + 0 ... BLOCK;
  bool check[BLOCK] = off < N;
  *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""


@pytest.mark.parametrize("n", [1, 7, 1000, 4097])
@pytest.mark.parametrize(("ty", "dtype"), [("float", np.float32), ("half", np.float16)])
def test_vector_add_odd_sizes(n: int, ty: str, dtype: Any) -> None:
    module = lower_source(MASKED_ADD, {"TYPE": ty, "BLOCK": 1024})
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    z = np.zeros(n, dtype)
    interpret(module, [z, x, y, n], (-(-n // 1024),), source=MASKED_ADD)
    np.testing.assert_array_equal(z, x + y)  # one rounding of the exact sum, as numpy does


# ---------------------------------------------------------------------------- transposition


@pytest.mark.parametrize(("M", "N"), [(37, 53), (100, 3), (1, 64)])
@pytest.mark.parametrize(("ty", "dtype"), [("float", np.float32), ("half", np.float16)])
def test_transpose_masked_odd_sizes(M: int, N: int, ty: str, dtype: Any) -> None:
    TM, TN = 16, 32
    module, src = spec_kernel("transpose_masked.tc", {"TYPE": ty, "TM": TM, "TN": TN})
    # X(m, n) is at m + n * ldx (column major), Y(m, n) at m * ldy + n
    x = np.random.default_rng(M * N).standard_normal((N, M)).astype(dtype)
    y = np.zeros((M, N), dtype)
    interpret(module, [x, y, M, N, M, N], (-(-M // TM), -(-N // TN)), source=src)
    np.testing.assert_array_equal(y, x.T)


@pytest.mark.parametrize("name", ["transpose.tc", "transpose_multipleof.tc"])
@pytest.mark.parametrize(("ty", "dtype"), [("float", np.float32), ("half", np.float16)])
def test_transpose_unmasked_at_multiples_of_the_tile(name: str, ty: str, dtype: Any) -> None:
    M, N, TM, TN = 64, 96, 32, 32
    module, src = spec_kernel(name, {"TYPE": ty, "TM": TM, "TN": TN})
    rng = np.random.default_rng(9)
    if name == "transpose.tc":  # X column major (ldx = M), Y row major (ldy = N)
        x = rng.standard_normal((N, M)).astype(dtype)
        y = np.zeros((M, N), dtype)
        interpret(module, [x, y, M, N, M, N], (M // TM, N // TN), source=src)
    else:  # X row major (ldx = N), Y column major (ldy = M)
        x = rng.standard_normal((M, N)).astype(dtype)
        y = np.zeros((N, M), dtype)
        interpret(module, [x, y, M, N, N, M], (M // TM, N // TN), source=src)
    np.testing.assert_array_equal(y, x.T)


def test_matmul_autotuned_kernel_grouped_and_masked() -> None:
    M, N, K = 80, 72, 64  # ragged M and N: the store is masked; K is a multiple of KB
    MB, NB, KB = 32, 32, 32
    module, src = spec_kernel("matmul_autotuned.tc", {"TYPE": "half", "MB": MB, "NB": NB, "KB": KB})
    rng = np.random.default_rng(10)
    # the operand loads are unmasked: A and B are padded to whole tiles, with the true strides
    a = rng.standard_normal((96, K)).astype(np.float16)
    b = rng.standard_normal((K, 96)).astype(np.float16)
    c = np.full((M, N), 7.0, np.float16)
    interpret(module, [a, b, c, M, N, K, K, 96, N], (3 * 3,), source=src)
    ref = (a.astype(np.float32) @ b.astype(np.float32))[:M, :N]
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-3, atol=2e-2)


# --------------------------------------------------------------------------- loops, break

LOOPS = """
__global__ void k(int* first, int* steps, int* odd_sum, float* x, int n, float threshold) {
  int pid = get_program_id(0);
  // while with break: the first index of row pid whose value exceeds the threshold (-1: none)
  int i = 0;
  int found = -1;
  while (i < n) {
    if (*(x + pid * n + i) > threshold) { found = i; break; }
    i++;
  }
  *(first + pid) = found;
  // do-while: Collatz steps of pid + 1
  int v = pid + 1;
  int s = 0;
  do { if (v == 1) break; v = v % 2 == 0 ? v / 2 : 3 * v + 1; s++; } while (1);
  *(steps + pid) = s;
  // for with continue and break
  int acc = 0;
  for (int j = 0; j < 100; j++) {
    if (j % 2 == 0) continue;
    if (j > pid * 3) break;
    acc += j;
  }
  *(odd_sum + pid) = acc;
}
"""


def test_while_do_while_break_continue() -> None:
    module = lower_source(LOOPS)
    P, n = 12, 9
    x = np.random.default_rng(11).standard_normal((P, n)).astype(np.float32)
    first, steps, odd = (np.zeros(P, np.int32) for _ in range(3))
    interpret(module, [first, steps, odd, x, n, 1.0], (P,), source=LOOPS)

    def collatz(v: int) -> int:
        s = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += 1
        return s

    above = x > np.float32(1.0)
    assert list(first) == [int(np.argmax(r)) if r.any() else -1 for r in above]
    assert list(steps) == [collatz(p + 1) for p in range(P)]
    assert list(odd) == [sum(j for j in range(1, p * 3 + 1, 2)) for p in range(P)]


EFFECTS_IN_BRANCHES = """
__global__ void k(int* o, int n) {
  int a = 0;
  int b = 10;
  int c = n > 0 ? a++ : b--;            // only the branch taken assigns
  int d = (n > 1 || (a += 5) > 0) && (b += 2) > 0;
  int i = 0;
  int s = 0;
  while (i < n && (s += i) < 100) i++;
  *(o + 0) = a; *(o + 1) = b; *(o + 2) = c; *(o + 3) = d; *(o + 4) = i; *(o + 5) = s;
}
"""


@pytest.mark.parametrize(("n", "expected"), [(0, [5, 11, 10, 1, 0, 0]), (1, [6, 12, 0, 1, 1, 0]),
                                             (5, [1, 12, 0, 1, 5, 10])])
def test_assignments_in_conditionally_evaluated_operands_outlive_them(n: int, expected: list[int]) -> None:
    # (they failed IR verification: the new values were defined inside the if's regions)
    module = lower_source(EFFECTS_IN_BRANCHES)
    o = np.zeros(6, np.int32)
    interpret(module, [o, n], (1,), source=EFFECTS_IN_BRANCHES)
    assert o.tolist() == expected


FOREVER = """
__device__ int first_above(float* x, int n, float t) {
  for (int i = 0;; i++) { if (i >= n) return -1; if (*(x + i) > t) return i; }
  return -2;
}
__global__ void k(int* o, float* x, int n) {
  int pid = get_program_id(0);
  int j = 0;
  for (;;) { j += pid + 1; if (j > 7) break; }
  *(o + 3 * pid) = j;
  *(o + 3 * pid + 1) = first_above(x, n, pid * 0.25f);
  for (;;) { if (j > 20) return; j = j * 2; }
  *(o + 3 * pid + 2) = 99;  // never reached: the loop above only ends by returning
}
"""


def test_for_without_condition_ends_at_break_or_return() -> None:
    module = lower_source(FOREVER)
    P, n = 5, 4
    x = np.array([0.1, 0.3, 0.6, 0.9], np.float32)
    o = np.zeros(3 * P, np.int32)
    interpret(module, [o, x, n], (P,), source=FOREVER)
    got = o.reshape(P, 3)
    assert list(got[:, 0]) == [(7 // (p + 1) + 1) * (p + 1) for p in range(P)]  # first multiple > 7
    above = [int(np.argmax(x > p * 0.25)) if (x > p * 0.25).any() else -1 for p in range(P)]
    assert list(got[:, 1]) == above and above[-1] == -1
    assert list(got[:, 2]) == [0] * P


# --------------------------------------------------------------------------------- atomics

ATOMICS = """
__global__ void k(int* hist, int* data, float* fmax_out, int* imax_out, float* f, int* lock,
                  int* counter, int n) {
  int pid = get_program_id(0);
  int off[64] = pid * 64 + 0 ... 64;
  bool in[64] = off < n;
  int v[64] = *?(in)(data + off);
  atomic_add(hist + (v % 16 + 16) % 16, 1, in);          // many lanes hit the same bin
  atomic_max(imax_out, in ? v : -2147483647 - 1);        // a scalar pointer, a tile of values
  atomic_max(fmax_out + 0 ... 64, *?(in)(f + off), in);  // element-wise, masked
  while (atomic_cas(lock, 0, 1) == 1) {}                 // spin lock around a plain update
  *counter = *counter + pid + 1;
  atomic_xchg(lock, 0);
}
"""


def test_atomics_histogram_max_and_spin_lock() -> None:
    module = lower_source(ATOMICS)
    n, P = 1000, 16
    rng = np.random.default_rng(12)
    data = rng.integers(-500, -10, n).astype(np.int32)  # all negative: C's % is negative too
    f = rng.standard_normal(n).astype(np.float32)
    hist = np.zeros(16, np.int32)
    fmax = np.full(64, -np.inf, np.float32)
    imax = np.array([-(2**31)], np.int32)
    lock = np.zeros(1, np.int32)
    counter = np.zeros(1, np.int32)
    interpret(module, [hist, data, fmax, imax, f, lock, counter, n], (P,), source=ATOMICS)
    c_rem = data - 16 * np.trunc(data / 16).astype(np.int32)
    np.testing.assert_array_equal(hist, np.bincount((c_rem + 16) % 16, minlength=16))
    assert imax[0] == data.max()
    padded = np.full(P * 64, -np.inf, np.float32)
    padded[:n] = f
    np.testing.assert_array_equal(fmax, padded.reshape(P, 64).max(axis=0))
    assert lock[0] == 0 and counter[0] == P * (P + 1) // 2


# ---------------------------------------------------------------- C integer semantics

INTEGERS = """
__global__ void k(int* out, unsigned* uout, int* a, int* b, int* s, char* c, int n) {
  int r[BLOCK] = 0 ... BLOCK;
  bool in[BLOCK] = r < n;
  int x[BLOCK] = *?(in)(a + r);
  int y[BLOCK] = *?(in)(b + r);
  int sh[BLOCK] = *?(in)(s + r);
  unsigned ux[BLOCK] = x;
  unsigned uy[BLOCK] = y;
  char cx[BLOCK] = *?(in)(c + r);
  *?(in)(out + r) = x / y;
  *?(in)(out + n + r) = x % y;
  *?(in)(out + 2 * n + r) = x >> sh;
  *?(in)(out + 3 * n + r) = x << sh;
  *?(in)(out + 4 * n + r) = cx / 3 + cx % 5;
  *?(in)(uout + r) = ux / uy;
  *?(in)(uout + n + r) = ux % uy;
  *?(in)(uout + 2 * n + r) = ux >> sh;
  *?(in)(uout + 3 * n + r) = ux < uy;
}
"""


def _c_div(a: Any, b: Any) -> tuple[Any, Any]:
    """C's truncating division and remainder (in int64, then wrapped to int32)."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    q = np.sign(a64) * np.sign(b64) * (np.abs(a64) // np.abs(b64))
    return q.astype(np.int32), (a64 - b64 * q).astype(np.int32)


def test_division_remainder_and_shifts_on_negative_and_unsigned_values() -> None:
    n = 300
    module = lower_source(INTEGERS, {"BLOCK": 512})
    rng = np.random.default_rng(13)
    a = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    a[:4] = [-7, 7, -(2**31), -1]
    b = rng.integers(-1000, 1000, n).astype(np.int32)
    b[b == 0] = 3
    b[:4] = [2, -2, 7, 5]
    s = rng.integers(0, 32, n).astype(np.int32)
    c = rng.integers(-128, 128, n).astype(np.int8)
    out = np.zeros(5 * n, np.int32)
    uout = np.zeros(4 * n, np.uint32)
    interpret(module, [out, uout, a, b, s, c, n], (1,), source=INTEGERS)
    q, rem = _c_div(a, b)
    np.testing.assert_array_equal(out[:n], q)
    np.testing.assert_array_equal(out[n : 2 * n], rem)
    np.testing.assert_array_equal(out[2 * n : 3 * n], a >> s)  # arithmetic shift on int32
    np.testing.assert_array_equal(out[3 * n : 4 * n], (a.view(np.uint32) << s.astype(np.uint32)).view(np.int32))
    cq, _ = _c_div(c.astype(np.int32), np.full(n, 3, np.int32))
    _, cr = _c_div(c.astype(np.int32), np.full(n, 5, np.int32))
    np.testing.assert_array_equal(out[4 * n :], cq + cr)
    ua, ub = a.view(np.uint32), b.view(np.uint32)
    np.testing.assert_array_equal(uout[:n], ua // ub)
    np.testing.assert_array_equal(uout[n : 2 * n], ua % ub)
    np.testing.assert_array_equal(uout[2 * n : 3 * n], ua >> s.astype(np.uint32))  # logical shift
    np.testing.assert_array_equal(uout[3 * n :], (ua < ub).astype(np.uint32))


# ----------------------------------------------------------------------- math built-ins

MATH = """
__global__ void k(TYPE* out, TYPE* xs, TYPE* ys, int n) {
  int r[BLOCK] = 0 ... BLOCK;
  bool in[BLOCK] = r < n;
  TYPE x[BLOCK] = *?(in)(xs + r);   // positive
  TYPE y[BLOCK] = *?(in)(ys + r);   // any sign
  *?(in)(out + 0 * n + r) = exp(y);
  *?(in)(out + 1 * n + r) = log(x);
  *?(in)(out + 2 * n + r) = sqrt(x);
  *?(in)(out + 3 * n + r) = sqrtf(x);
  *?(in)(out + 4 * n + r) = rsqrt(x);
  *?(in)(out + 5 * n + r) = abs(y);
  *?(in)(out + 6 * n + r) = fma(x, y, x);
  *?(in)(out + 7 * n + r) = sin(y);
  *?(in)(out + 8 * n + r) = cos(y);
  *?(in)(out + 9 * n + r) = exp2(y);
  *?(in)(out + 10 * n + r) = log2(x);
  *?(in)(out + 11 * n + r) = floor(y);
  *?(in)(out + 12 * n + r) = ceil(y);
  *?(in)(out + 13 * n + r) = min(x, y);
  *?(in)(out + 14 * n + r) = max(x, y);
  *?(in)(out + 15 * n + r) = select(y > 0, x, y);
}
"""


@pytest.mark.parametrize(("ty", "dtype"), [("float", np.float32), ("half", np.float16)])
def test_every_math_builtin(ty: str, dtype: Any) -> None:
    n = 200
    module = lower_source(MATH, {"TYPE": ty, "BLOCK": 256})
    rng = np.random.default_rng(14)
    x = rng.uniform(0.1, 8.0, n).astype(dtype)
    y = rng.uniform(-4.0, 4.0, n).astype(dtype)
    out = np.zeros(16 * n, dtype)
    interpret(module, [out, x, y, n], (1,), source=MATH)
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    refs = [np.exp(yd), np.log(xd), np.sqrt(xd), np.sqrt(xd), 1 / np.sqrt(xd), np.abs(yd), xd * yd + xd,
            np.sin(yd), np.cos(yd), np.exp2(yd), np.log2(xd), np.floor(yd), np.ceil(yd),
            np.minimum(xd, yd), np.maximum(xd, yd), np.where(yd > 0, xd, yd)]
    for i, ref in enumerate(refs):
        got = out[i * n : (i + 1) * n]
        # exp and log are the fast approximate versions (a few ulps); the others are exact
        # but computed in f32 for half and rounded once
        assert_close(got, ref.astype(dtype), dtype)


# ------------------------------------------------------------------------------- 3-D tiles

TILES_3D = """
__global__ void k(TYPE* out, TYPE* x) {
  int a[A] = 0 ... A;
  int b[B] = 0 ... B;
  int c[C] = 0 ... C;
  int off[A, B, C] = a[:, newaxis, newaxis] * B * C + b[newaxis, :, newaxis] * C + c[newaxis, newaxis, :];
  TYPE t[A, B, C] = *(x + get_program_id(0) * A * B * C + off);
  TYPE* o = out + get_program_id(0) * (3 * B * C + 3 * A * C + 3 * A * B);
  int bc[B, C] = b[:, newaxis] * C + c[newaxis, :];
  int ac[A, C] = a[:, newaxis] * C + c[newaxis, :];
  int ab[A, B] = a[:, newaxis] * B + b[newaxis, :];
  *(o + bc) = t[+, :, :];
  *(o + B * C + bc) = t[max, :, :];
  *(o + 2 * B * C + bc) = t[min, :, :];
  o = o + 3 * B * C;
  *(o + ac) = t[:, +, :];
  *(o + A * C + ac) = t[:, max, :];
  *(o + 2 * A * C + ac) = t[:, min, :];
  o = o + 3 * A * C;
  *(o + ab) = t[:, :, +];
  *(o + A * B + ab) = t[:, :, max];
  *(o + 2 * A * B + ab) = t[:, :, min];
}
"""


@pytest.mark.parametrize(("ty", "dtype"), [("float", np.float32), ("int", np.int32), ("half", np.float16)])
def test_3d_tiles_reduce_along_each_axis(ty: str, dtype: Any) -> None:
    A, B, C, P = 2, 4, 8, 3
    module = lower_source(TILES_3D, {"TYPE": ty, "A": A, "B": B, "C": C})
    rng = np.random.default_rng(15)
    x = (rng.standard_normal((P, A, B, C)) * 10).astype(dtype)
    per = 3 * B * C + 3 * A * C + 3 * A * B
    out = np.zeros(P * per, dtype)
    interpret(module, [out, x], (P,), source=TILES_3D)
    for p in range(P):
        t = x[p]
        wide = t.astype(np.float32) if dtype == np.float16 else t
        want = []
        for axis in range(3):
            s = wide.sum(axis=axis)
            want += [s.astype(dtype).ravel(), t.max(axis=axis).ravel(), t.min(axis=axis).ravel()]
        got = out[p * per : (p + 1) * per]
        if dtype == np.int32:
            np.testing.assert_array_equal(got, np.concatenate(want))
        else:
            assert_close(got, np.concatenate(want), dtype)


# ------------------------------------------------------------------- declared facts checked

FACTS = """
__global__ void k(float* x, int ld) {
  int off __multipleof(8) = get_program_id(0) * ld;
  *(x + off) = 1.0f;
}
"""


def test_declared_multiple_of_is_checked_by_the_interpreter() -> None:
    module = lower_source(FACTS)
    x = np.zeros(64, np.float32)
    interpret(module, [x, 8], (4,), source=FACTS)
    assert list(np.flatnonzero(x)) == [0, 8, 16, 24]
    with pytest.raises(AssumptionError) as info:
        interpret(module, [np.zeros(64, np.float32), 6], (4,), source=FACTS)
    text = str(info.value)
    assert "<source>:3:" in text and "__multipleof(8)" in text and "is 6" in text and "program (1,)" in text
    assert info.value.program_id == (1,) and info.value.value == 6


# ----------------------------------------------- conditions mask the accesses they guard

GUARDED = """
__global__ void k(float* o, float* row, float* col, int* hits, int n) {
  int r[8] = 0 ... 8;
  bool c[8, 8] = r[:, newaxis] < n && r[newaxis, :] < n;
  // row and col hold n elements: a lane is read only where some selected element needs it
  float t[8, 8] = c ? *(col + r[:, newaxis]) + *(row + r[newaxis, :]) : -1.0f;
  *(o + r[:, newaxis] * 8 + r[newaxis, :]) = t;
  bool pos[8] = r < n && *(row + r) > 0.0f;    // element-wise short circuit
  int one[8] = 1;
  int old[8] = pos ? atomic_add(hits + r, one) : 0;
}
"""


def test_tile_conditions_mask_smaller_loads_and_atomics() -> None:
    n = 5
    module = lower_source(GUARDED)
    row = np.arange(n, dtype=np.float32) - 2  # -2 -1 0 1 2
    col = np.arange(n, dtype=np.float32) * 10
    out = np.zeros((8, 8), np.float32)
    hits = np.zeros(n, np.int32)
    interpret(module, [out, row, col, hits, n], (1,))  # exact-size buffers: no access beyond n
    want = np.full((8, 8), -1.0, np.float32)
    want[:n, :n] = col[:, None] + row[None, :]
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(hits, (row > 0).astype(np.int32))


# --------------------------------------------------------------------- unsigned values

UNSIGNED = """
__global__ void k(unsigned* o, float* f, unsigned* umax, unsigned* umin, unsigned* a, unsigned* b) {
  int r[64] = 0 ... 64;
  unsigned x[64] = *(a + r);
  unsigned y[64] = *(b + r);
  *(o + r) = max(x, y);
  *(o + 64 + r) = min(x, y);
  *(o + 128 + r) = x > y;
  *(o + 192 + r) = x - y;            // wraps modulo 2^32
  *(o + 256) = x[max];
  *(o + 257) = x[min];
  *(f + r) = x;                       // uitofp: values >= 2^31 stay positive
  atomic_max(umax, x);
  atomic_min(umin, x);
}
"""


def test_unsigned_min_max_compare_reduce_convert_and_atomics() -> None:
    module = lower_source(UNSIGNED)
    rng = np.random.default_rng(16)
    a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    a[:4] = [2**32 - 1, 2**31, 0, 5]
    b[:4] = [1, 2**31 - 1, 2**32 - 1, 5]
    o = np.zeros(258, np.uint32)
    f = np.zeros(64, np.float32)
    umax = np.zeros(1, np.uint32)
    umin = np.full(1, 2**32 - 1, np.uint32)
    interpret(module, [o, f, umax, umin, a, b], (1,), source=UNSIGNED)
    np.testing.assert_array_equal(o[:64], np.maximum(a, b))
    np.testing.assert_array_equal(o[64:128], np.minimum(a, b))
    np.testing.assert_array_equal(o[128:192], (a > b).astype(np.uint32))
    np.testing.assert_array_equal(o[192:256], a - b)
    assert o[256] == a.max() and o[257] == a.min()
    np.testing.assert_array_equal(f, a.astype(np.float32))
    assert umax[0] == a.max() and umin[0] == a.min()


# --------------------------------------------------------------- bf16 against torch

BF16 = """
__global__ void k(bf16* o, float* f, bf16* a, bf16* b, float* w) {
  int r[16] = 0 ... 16;
  bf16 x[16] = *(a + r);
  bf16 y[16] = *(b + r);
  *(o + r) = x * y + x;                // rounded to bf16 after each op
  *(o + 16 + r) = x / y;
  *(o + 32 + r) = *(w + r);            // f32 -> bf16, to nearest even
  *(o + 48 + r) = exp(y);
  *(f + r) = x;                        // exact
  *(f + 16) = x[+];                    // a bf16 sum (accumulated in f32, rounded once)
  int m[16, 16] = r[:, newaxis] * 16 + r[newaxis, :];
  bf16 A[16, 16] = *(a + m);
  bf16 B[16, 16] = *(b + m);
  *(f + 32 + m) = A @ B;               // fp32 accumulation
  *(o + 64 + m) = A @ B;
}
"""


def test_bf16_kernel_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    module = lower_source(BF16)
    gen = torch.Generator().manual_seed(17)
    ta = torch.randn(256, generator=gen).to(torch.bfloat16)
    tb = torch.randn(256, generator=gen).to(torch.bfloat16)
    tw = torch.randn(16, generator=gen, dtype=torch.float32) * 3
    tw[:2] = torch.tensor([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8])  # ties: to even

    def bits(t: Any) -> Any:
        return t.view(torch.int16).numpy().view(np.uint16).copy()

    def bf16(u: Any) -> Any:
        return torch.from_numpy(np.ascontiguousarray(u).view(np.int16).copy()).view(torch.bfloat16)

    o = np.zeros(64 + 256, np.uint16)
    f = np.zeros(32 + 256, np.float32)
    interpret(module, [o, f, bits(ta), bits(tb), tw.numpy()], (1,), source=BF16)
    x, y = ta[:16], tb[:16]
    assert torch.equal(bf16(o[:16]), x * y + x)
    assert torch.equal(bf16(o[16:32]), x / y)
    assert torch.equal(bf16(o[32:48]), tw.to(torch.bfloat16))
    torch.testing.assert_close(bf16(o[48:64]), torch.exp(y.float()).to(torch.bfloat16), rtol=2.0**-7, atol=0)
    assert torch.equal(torch.from_numpy(f[:16]), x.float())
    torch.testing.assert_close(torch.tensor(f[16]).to(torch.bfloat16), x.double().sum().to(torch.bfloat16),
                               rtol=2.0**-8, atol=0)
    ref = ta.view(16, 16).double() @ tb.view(16, 16).double()
    torch.testing.assert_close(torch.from_numpy(f[32:]).view(16, 16).double(), ref, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(bf16(o[64:]).view(16, 16), ref.to(torch.bfloat16), rtol=2.0**-8, atol=1e-5)


# ------------------------------------------------ out-of-bounds in 2-D tiles and atomics

OOB_2D = """
__global__ void k(float* x, float* y, int* hits, int ld) {
  int pm = get_program_id(0);
  int pn = get_program_id(1);
  int r[4] = pm * 4 + 0 ... 4;
  int c[8] = pn * 8 + 0 ... 8;
  float t[4, 8] = *(x + r[:, newaxis] * ld + c[newaxis, :]);
  *(y + r[:, newaxis] * ld + c[newaxis, :]) = t * 2.0f;
  atomic_add(hits + pm * 4 + 0 ... 4, 1);
}
"""


def test_out_of_bounds_in_a_2d_tile_and_an_atomic_name_line_program_and_element() -> None:
    module = lower_source(OOB_2D, filename="oob.tc")
    ld = 16  # x is an 8 x 16 matrix short of its last 3 elements
    x = np.arange(8 * ld - 3, dtype=np.float32)
    y = np.zeros(8 * ld, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        interpret(module, [x, y, np.zeros(8, np.int32), ld], (2, 2), source=OOB_2D)
    err = info.value
    # programs run in x-fastest order; (1, 1) is the last and reads rows 4..7, columns 8..15;
    # the first missing element, row-major in the tile, is row 7 column 13: tile index [3, 5]
    assert err.program_id == (1, 1) and err.index == (3, 5)
    text = str(err)
    assert "oob.tc:7:19" in text and "*(x + r[:, newaxis] * ld + c[newaxis, :])" in text
    assert "out-of-bounds load in program (1, 1): element [3, 5] of the [4, 8] tile" in text
    # the earlier programs' stores happened, in full
    np.testing.assert_array_equal(y.reshape(8, ld)[:4], 2 * x[: 4 * ld].reshape(4, ld))
    # an atomic past the end of a 6-element buffer: program (1, 0), element [2]
    x = np.zeros(8 * ld, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        interpret(module, [x, y, np.zeros(6, np.int32), ld], (2, 2), source=OOB_2D)
    assert info.value.program_id == (1, 0) and info.value.index == (2,)
    assert "oob.tc:9:3" in str(info.value) and "atomic add" in str(info.value)


# ---------------------------------------------------------------- CPU torch tensors

UNMASKED_ADD = """
__global__ void add(float* z, float* x, float* y) {
  int off[128] = get_program_id(0) * 128 + 0 ... 128;
  *(z + off) = *(x + off) + *(y + off);
}
"""


def test_cpu_torch_tensors_are_arguments_and_bounds_checked() -> None:
    torch = pytest.importorskip("torch")
    module = lower_source(UNMASKED_ADD, filename="add.tc")
    gen = torch.Generator().manual_seed(18)
    x, y = torch.randn(512, generator=gen), torch.randn(512, generator=gen)
    z = torch.zeros(512)
    interpret(module, [z, x, y], (4,), source=UNMASKED_ADD)
    assert torch.equal(z, x + y)
    # a view: addresses are the view's, bounded by its own elements (as a numpy view's are)
    big = torch.zeros(1024)
    interpret(module, [big[128:], x, y], (4,), source=UNMASKED_ADD)
    assert torch.equal(big[128:640], x + y) and not big[:128].any() and not big[640:].any()
    with pytest.raises(OutOfBoundsError) as info:  # (the storage goes on; the view does not)
        interpret(module, [big[640:896], x, y], (4,), source=UNMASKED_ADD)
    assert info.value.program_id == (2,) and "buffer 'z' (256 elements" in str(info.value)
    assert not big[896:].any()
    # 300 elements: program 2 reads x past its end, at element [44] of its tile (element 300)
    with pytest.raises(OutOfBoundsError) as info:
        interpret(module, [torch.zeros(384), torch.randn(300), torch.randn(384)], (3,), source=UNMASKED_ADD)
    assert info.value.program_id == (2,) and info.value.index == (44,)
    assert "add.tc:4:16" in str(info.value) and "buffer 'x' (300 elements" in str(info.value)


def test_tensors_off_the_cpu_are_refused() -> None:
    class Device:
        type = "cuda"

        def __str__(self) -> str:
            return "cuda:0"

    class CudaTensor:  # what the interpreter sees of a torch.Tensor on a GPU
        device = Device()

        def data_ptr(self) -> int:
            return 1 << 40

        def untyped_storage(self) -> object:
            raise AssertionError("never read")

    module = lower_source(UNMASKED_ADD)
    z = np.zeros(128, np.float32)
    with pytest.raises(InterpreterError, match="argument x of add is a tensor on cuda:0"):
        interpret(module, [z, CudaTensor(), z], (1,))


C_FLOAT_MATH = """
__global__ void k(float* z, half* h, half* hz) {
  int r[8] = 0 ... 8;
  float x[8] = *(z + r);
  half y[8] = *(h + r);
  *(z + r) = expf(x) + logf(x + 2.0) + sinf(x) + cosf(y) + fabsf(-x) + fabs(x) + fmaf(x, x, 1.0)
      + exp2f(x) + log2f(x + 1.0) + floorf(x) + ceilf(y) + rsqrtf(x + 1.0) + sqrtf(y);
  *(hz + r) = fabs(-y);
}
"""


def test_cs_float_math_functions_are_built_ins() -> None:
    # expf, logf, fabsf ... (fp32 results, as in C) were in the lowering's tables but unknown to
    # the checker (E0303); fabs keeps a half argument half, as abs does
    module = lower_source(C_FLOAT_MATH)
    z = np.linspace(0.1, 1, 8).astype(np.float32)
    h, hz = z.astype(np.float16), np.zeros(8, np.float16)
    x, y = z.astype(np.float64), h.astype(np.float64)
    interpret(module, [z, h, hz], (1,))
    ref = (np.exp(x) + np.log(x + 2) + np.sin(x) + np.cos(y) + 2 * x + x * x + 1 + np.exp2(x) + np.log2(x + 1)
           + np.floor(x) + np.ceil(y) + 1 / np.sqrt(x + 1) + np.sqrt(y))
    np.testing.assert_allclose(z, ref, rtol=1e-5)
    np.testing.assert_array_equal(hz, h)
