"""The kernel catalogue: every spec kernel (with the defines of tc-lang's defines.json) and the
source kernels of the interpreter suite, with inputs at an odd and a large size.

Used by the compile checks (every kernel compiles for sm_80 and sm_90 and ptxas accepts it) and
by tests/integration/test_integration_gpu_vs_interpreter.py (the GPU gives the interpreter's
result). Not a test module itself: tests import it after putting this folder on sys.path."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

import attrs
import numpy as np

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
DEFINES: dict[str, dict[str, dict[str, Any]]] = json.loads((KERNELS / "defines.json").read_text())

Arg = Union[np.ndarray[Any, Any], int, float]
Array = np.ndarray[Any, Any]


@attrs.frozen
class Launch:
    """Arguments (arrays are device buffers, ints and floats are scalars), the grid, the indices
    of the arrays to compare afterwards, and whether they must match bit for bit (integer arrays
    always do). `view(i, array)`, when given, maps output i (the GPU's and the interpreter's
    alike) to what is compared: a slice, bf16 bits as float32 values, ...; `tolerance` (rtol,
    atol) replaces the dtype's default for inexact comparisons, of every output or (a mapping)
    of the outputs it names."""

    args: list[Arg]
    grid: tuple[int, ...]
    outputs: tuple[int, ...]
    exact: bool
    view: Callable[[int, Array], Array] | None = None
    tolerance: tuple[float, float] | dict[int, tuple[float, float]] | None = None

    def tolerance_of(self, output: int) -> tuple[float, float] | None:
        """The (rtol, atol) that replaces the default for `output`, if any."""
        if isinstance(self.tolerance, dict):
            return self.tolerance.get(output)
        return self.tolerance


@attrs.frozen
class Case:
    name: str
    source: str
    defines: dict[str, Any]
    #: (rng, "odd" | "large") -> the launch; None: compile-only.
    make: Callable[[np.random.Generator, str], Launch] | None = None
    filename: str = "<catalogue>"
    #: The warps the kernel is compiled for (12: three warpgroups, a count that is not a power of two).
    num_warps: int = 4


def _np(type_: str) -> Any:
    return {"float": np.float32, "half": np.float16}[type_]


def _rand(rng: np.random.Generator, shape: tuple[int, ...] | int, dtype: Any) -> np.ndarray[Any, Any]:
    return rng.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------------------- spec kernels


def _vector_add(d: dict[str, Any]) -> Callable[[np.random.Generator, str], Launch]:
    size = int(d.get("SIZE", 32))
    dtype = _np(str(d.get("TYPE", "float")))

    def make(rng: np.random.Generator, scale: str) -> Launch:
        n = size * (3 if scale == "odd" else 4096)  # unmasked kernel: whole programs only
        a, b = _rand(rng, n, dtype), _rand(rng, n, dtype)
        return Launch([n, a, b, np.zeros(n, dtype)], (n // size,), (3,), True)

    return make


def _softmax(d: dict[str, Any], spaced: bool) -> Callable[[np.random.Generator, str], Launch]:
    block = int(d["BLOCK"])

    def make(rng: np.random.Generator, scale: str) -> Launch:
        m, n = (37, block - 5) if scale == "odd" else (4096, block)
        x = _rand(rng, (m, n), np.float32)
        y = np.zeros((m, n), np.float32)
        return Launch([y, x, n, n, m, n], (m,), (0,), False)

    return make


def _transpose(d: dict[str, Any], masked: bool, row_major: bool = False) -> Callable[[np.random.Generator, str], Launch]:
    tm, tn, dtype = int(d["TM"]), int(d["TN"]), _np(str(d["TYPE"]))

    def make(rng: np.random.Generator, scale: str) -> Launch:
        if masked:
            m, n = (tm * 3 + 5, tn * 2 + 3) if scale == "odd" else (2048 + tm, 2048)
        else:
            m, n = (tm * 3, tn * 5) if scale == "odd" else (2048, 2048 + tn)
        grid = (-(-m // tm), -(-n // tn))
        if row_major:  # X[m, n] at m * ldx + n, Y[n, m] at n * ldy + m
            x = rng.integers(-1000, 1000, (m, n)).astype(dtype)
            return Launch([x, np.zeros((n, m), dtype), m, n, n, m], grid, (1,), True)
        x = rng.integers(-1000, 1000, (n, m)).astype(dtype)  # (m, n) at m + n * ldx
        y = np.zeros((m, n), dtype)
        return Launch([x, y, m, n, m, n], grid, (1,), True)

    return make


def _matmul_2d(d: dict[str, Any]) -> Callable[[np.random.Generator, str], Launch]:
    tm, tn, tk, dtype = int(d["TM"]), int(d["TN"]), int(d["TK"]), _np(str(d["TYPE"]))

    def make(rng: np.random.Generator, scale: str) -> Launch:
        m, n, k = (tm, tn * 3, tk * 3) if scale == "odd" else (tm * 8, tn * 8, tk * 16)
        a, b = _rand(rng, (m, k), dtype), _rand(rng, (k, n), dtype)
        c = np.zeros((m, n), dtype)
        return Launch([a, b, c, m, n, k, k, n, n], (m // tm, n // tn), (2,), False)

    return make


def _matmul_tutorial(d: dict[str, Any]) -> Callable[[np.random.Generator, str], Launch]:
    mb, nb, kb, dtype = int(d["MB"]), int(d["NB"]), int(d["KB"]), _np(str(d["TYPE"]))

    def make(rng: np.random.Generator, scale: str) -> Launch:
        # M, N ragged (the store is masked); K whole blocks; operands padded for unmasked loads
        m, n, k = (mb * 2 + 7, nb + 5, kb * 3) if scale == "odd" else (mb * 8 + 3, nb * 8 + 1, kb * 16)
        pm, pn = -(-m // mb) * mb, -(-n // nb) * nb
        a, b = _rand(rng, (pm, k), dtype), _rand(rng, (k, pn), dtype)
        c = np.zeros((m, n), dtype)
        grid = ((pm // mb) * (pn // nb),)
        return Launch([a, b, c, m, n, k, k, pn, n], grid, (2,), False)

    return make


def _fused_trans(d: dict[str, Any]) -> Callable[[np.random.Generator, str], Launch]:
    tm, tn, tk, dtype = int(d["TM"]), int(d["TN"]), int(d["TK"]), _np(str(d["TYPE"]))
    ta, tb = d["USE_A"].startswith("^"), d["USE_B"].startswith("^")

    def make(rng: np.random.Generator, scale: str) -> Launch:
        m, n, k = (tm, tn * 2, tk * 3) if scale == "odd" else (tm * 4, tn * 4, tk * 8)
        # the spec's loop pre-fetches one K block past the end without a mask: pad K by TK
        kp = k + tk
        a = _rand(rng, (kp, m) if ta else (m, kp), dtype)
        b = _rand(rng, (n, kp) if tb else (kp, n), dtype)
        c = np.zeros((m, n), dtype)
        lda, ldb = a.shape[1], b.shape[1]
        return Launch([a, b, c, m, n, k, lda, ldb, n], (m // tm, n // tn), (2,), False)

    return make


def spec_cases() -> list[Case]:
    out: list[Case] = []
    for file, variants in DEFINES.items():
        src = (KERNELS / file).read_text()
        for var, d in variants.items():
            make: Callable[[np.random.Generator, str], Launch] | None = None
            if file.startswith("vector_add"):
                make = _vector_add(d)
            elif file.startswith("softmax"):
                make = _softmax(d, file == "softmax_spaced.tc")
            elif file.startswith("transpose"):
                make = _transpose(d, file == "transpose_masked.tc", file == "transpose_multipleof.tc")
            elif file in ("matmul.tc", "matmul_prefetch.tc", "matmul_remat.tc"):
                make = _matmul_2d(d)
            elif file in ("matmul_tutorial.tc", "matmul_autotuned.tc"):
                make = _matmul_tutorial(d)
            elif file == "matmul_fused_trans.tc":
                make = _fused_trans(d)
            out.append(Case(f"{file[:-3]}[{var}]", src, dict(d), make, file))
    return out


# ---------------------------------------------------- kernels of the interpreter test suite


def _fixed(arrays: Callable[[], list[Arg]], outputs: tuple[int, ...], exact: bool = True,
           grid: tuple[int, ...] = (1,)) -> Callable[[np.random.Generator, str], Launch]:
    def make(rng: np.random.Generator, scale: str) -> Launch:
        return Launch(arrays(), grid, outputs, exact)

    return make


def _scaled(build: Callable[[str], Launch]) -> Callable[[np.random.Generator, str], Launch]:
    """A kernel without sizes (no program id, fixed tiles): other scalar values per scale."""

    def make(rng: np.random.Generator, scale: str) -> Launch:
        return build(scale)

    return make


SIGNED = """
__global__ void k(int* o, unsigned* u, float* f, int a, unsigned b) {
  *o = a / 3;        *(o + 1) = a >> 1;   *(o + 2) = a % 4;
  *u = b >> 1;       *(u + 1) = b / 3;    *(u + 2) = b % 4;
  *f = a;            *(f + 1) = b;
  *(o + 3) = a < 7;  *(u + 3) = b < 7u;
}
"""

LOOPS = """
__global__ void k(int* o, int n) {
  for (int i = 0; i < 4; i++) {
    int j = 0;
    while (1) { j++; if (j > i) break; }
    *(o + i) = j;
    if (i == n) return;
  }
  *(o + 4) = 99;
}"""

HELPERS = """
__device__ float sq(float x) { return x * x; }
__device__ float[BLOCK] twice(float x[BLOCK]) { return x + x; }
__device__ int sgn(int v) { if (v < 0) return -1; if (v == 0) return 0; return 1; }
__device__ void put(int* p, int v) { *p = v; }
__global__ void k(float* o, int* p, int v) {
  int r[BLOCK] = 0 ... BLOCK;
  float x[BLOCK] = r;
  *(o + r) = twice(x) + sq(3.0f);
  put(p, sgn(v));
}
"""

REDUCE3 = """
__global__ void k(float* o, int* io) {
  int r[8] = 0 ... 8;
  float x[2, 4, 8] = (float[2, 4, 8]) r[newaxis, newaxis, :];
  float a[4, 8] = x[+, :, :];
  float b[2, 8] = x[:, max, :];
  float c[2, 4] = x[:, :, min];
  *o = a[+, :][+];  *(o + 1) = b[:, +][+];  *(o + 2) = c[+, :][+];
  int ir[2, 8] = r[newaxis, :] - 4;
  *io = ir[:, min][max];
}
"""

#: Integer element-wise ops on a masked tile: shifts by any amount, division with signs.
INT_OPS = """
__global__ void k(int* o, int* a, int* s, int n) {
  int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
  bool m[BLOCK] = off < n;
  int x[BLOCK] = *?(m)(a + off);
  int y[BLOCK] = *?(m)(s + off);
  unsigned ux[BLOCK] = x;
  *?(m)(o + off * 6) = x << y;
  *?(m)(o + off * 6 + 1) = x >> y;
  *?(m)(o + off * 6 + 2) = (int)(ux >> y);
  *?(m)(o + off * 6 + 3) = x / (y | 1);
  *?(m)(o + off * 6 + 4) = x % (y | 1);
  *?(m)(o + off * 6 + 5) = (int)(ux / (unsigned)(y | 1));
}
"""

#: Row sums and column maxima of a 2-D tile: reductions on both axes.
REDUCE_AXES = """
__global__ void k(float* rows, float* cols, float* x, int ld) {
  int rm[TM] = 0 ... TM;
  int rn[TN] = 0 ... TN;
  float t[TM, TN] = *(x + rm[:, newaxis] * ld + rn[newaxis, :]);
  *(rows + rm) = t[:, +];
  *(cols + rn) = t[max, :];
}
"""

MATH = """
__global__ void k(float* o, float* x, int n) {
  int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
  bool m[BLOCK] = off < n;
  float v[BLOCK] = *?(m)(x + off);
  *?(m)(o + off * 4) = exp(v);
  *?(m)(o + off * 4 + 1) = log(v * v + 1.0f);
  *?(m)(o + off * 4 + 2) = sqrt(v * v);
  *?(m)(o + off * 4 + 3) = v / (v * v + 1.0f);
}
"""


def _sized(n_odd: int, n_large: int, build: Callable[[np.random.Generator, int], Launch]
           ) -> Callable[[np.random.Generator, str], Launch]:
    def make(rng: np.random.Generator, scale: str) -> Launch:
        return build(rng, n_odd if scale == "odd" else n_large)

    return make


def _int_ops(rng: np.random.Generator, n: int) -> Launch:
    a = rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    s = rng.integers(-3, 40, n).astype(np.int32)
    return Launch([np.zeros(6 * n, np.int32), a, s, n], (-(-n // 128),), (0,), True)


def _math(rng: np.random.Generator, n: int) -> Launch:
    x = (rng.standard_normal(n) * 4).astype(np.float32)
    return Launch([np.zeros(4 * n, np.float32), x, n], (-(-n // 256),), (0,), False)


def _reduce_axes(tm: int, tn: int) -> Callable[[np.random.Generator, int], Launch]:
    def build(rng: np.random.Generator, ld: int) -> Launch:
        # one unmasked tm x tn tile read out of a wider matrix: a leading dimension that is not
        # a multiple of the tile
        x = _rand(rng, (tm, ld), np.float32)
        return Launch([np.zeros(tm, np.float32), np.zeros(tn, np.float32), x, ld], (1,), (0, 1), False)

    return build


def _signedness(scale: str) -> Launch:
    a, b = (-7, 0xFFFFFFF0) if scale == "odd" else (-(2**31) + 5, 0x80000001)
    # no program id: every program writes the same values
    arrays: list[Arg] = [np.zeros(4, np.int32), np.zeros(4, np.uint32), np.zeros(2, np.float32), a, b]
    return Launch(arrays, (1,) if scale == "odd" else (8,), (0, 1, 2), True)


def _nested_loops(scale: str) -> Launch:
    # odd: returns from inside the loop at i == 1; large: the loop runs out and o[4] is written
    return Launch([np.zeros(5, np.int32), 1 if scale == "odd" else 7], (1,) if scale == "odd" else (8,),
                  (0,), True)


def _helpers(scale: str) -> Launch:
    return Launch([np.zeros(16, np.float32), np.zeros(1, np.int32), -5 if scale == "odd" else 9],
                  (1,) if scale == "odd" else (8,), (0, 1), True)


# ------------------------------------------------- the interpreter suite's own source kernels


def _load_suite() -> Any:
    path = Path(__file__).resolve().parents[2] / "tc-ir" / "tests" / "test_ir_interpreter_sources.py"
    spec = importlib.util.spec_from_file_location("_tc_ir_interpreter_sources", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SUITE = _load_suite()

#: Scalar atomics whose old value is used: each program takes a ticket (the counter's old value,
#: broadcast to the whole program), marks it taken and adds it to a total, then adds a row of
#: floats into shared sums. The outputs are order-independent: the counter ends at P, every ticket
#: 0 .. P-1 is taken exactly once, the total is P(P-1)/2; the float sums differ by rounding only.
TICKETS = """
__global__ void k(int* count, int* taken, int* total, float* fsum, float* x, int n) {
  int pid = get_program_id(0);
  int old = atomic_add(count, 1);
  atomic_add(taken + old, 1);
  atomic_add(total, old);
  int r[32] = 0 ... 32;
  bool m[32] = pid * 32 + r < n;
  atomic_add(fsum + r, *?(m)(x + pid * 32 + r), m);
}
"""


def _tickets(rng: np.random.Generator, n: int) -> Launch:
    p = -(-n // 32)
    x = _rand(rng, n, np.float32)
    arrays: list[Arg] = [np.zeros(1, np.int32), np.zeros(p, np.int32), np.zeros(1, np.int32),
                         np.zeros(32, np.float32), x, n]
    # float sums of up to P terms in any order: an absolute tolerance for sums near zero
    return Launch(arrays, (p,), (0, 1, 2, 3), False, tolerance=(1e-4, 1e-3))


def _atomics(rng: np.random.Generator, n: int) -> Launch:
    p = -(-n // 64)
    data = rng.integers(-500, -10, n).astype(np.int32)
    data[::7] = rng.integers(-(2**31), 2**31, len(data[::7]), dtype=np.int64).astype(np.int32)
    f = _rand(rng, n, np.float32)
    arrays: list[Arg] = [np.zeros(16, np.int32), data, np.full(64, -np.inf, np.float32),
                         np.array([-(2**31)], np.int32), f, np.zeros(1, np.int32), np.zeros(1, np.int32), n]
    # histogram, integer and float maxima, the lock (released: 0) and the counter it guards
    # (P(P+1)/2): all independent of the order the programs run in
    return Launch(arrays, (p,), (0, 2, 3, 5, 6), True)


def _guarded(rng: np.random.Generator, n: int) -> Launch:
    row = _rand(rng, n, np.float32)  # exact-size buffers: no lane may read beyond n
    col = _rand(rng, n, np.float32) * 10
    return Launch([np.zeros((8, 8), np.float32), row, col, np.zeros(n, np.int32), n], (1,), (0, 3), True)


def _unsigned(rng: np.random.Generator, scale: str) -> Launch:
    a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    if scale == "odd":
        a[:4] = [2**32 - 1, 2**31, 0, 5]
        b[:4] = [1, 2**31 - 1, 2**32 - 1, 5]
    else:  # values around 2^31 (sign bit) and 2^24 (float rounding)
        a[::2] = (2**31 + rng.integers(-64, 64, 32)).astype(np.uint32)
        a[1::4] = (2**24 + rng.integers(-8, 8, 16)).astype(np.uint32)
    arrays: list[Arg] = [np.zeros(258, np.uint32), np.zeros(64, np.float32), np.zeros(1, np.uint32),
                         np.full(1, 2**32 - 1, np.uint32), a, b]
    return Launch(arrays, (1,), (0, 1, 2, 3), True)


def _bf16_bits(x: Array) -> Array:
    """float32 -> bf16 bit patterns, rounded to nearest even."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def _bf16_values(i: int, a: Array) -> Array:
    if a.dtype == np.uint16:
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a


def _bf16_rounded_elementwise(i: int, a: Array) -> Array:
    # o[:48]: x * y + x, x / y, f32 -> bf16 (correctly rounded, so bit for bit); f[:16]: bf16 -> f32
    return a[:48] if i == 0 else a[:16]


def _bf16(exact: bool) -> Callable[[np.random.Generator, str], Launch]:
    def make(rng: np.random.Generator, scale: str) -> Launch:
        a = _bf16_bits(rng.standard_normal(256).astype(np.float32) * (1 if scale == "odd" else 8))
        b = _bf16_bits(rng.standard_normal(256).astype(np.float32) * (1 if scale == "odd" else 8))
        w = (rng.standard_normal(16) * 3).astype(np.float32)
        w[:2] = [1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8]  # ties: to even
        arrays: list[Arg] = [np.zeros(64 + 256, np.uint16), np.zeros(32 + 256, np.float32), a, b, w]
        if exact:
            return Launch(arrays, (1,), (0, 1), True, view=_bf16_rounded_elementwise)
        # everything as values: exp is approximate, the f32 sums may be ordered differently and
        # round to a neighbouring bf16
        return Launch(arrays, (1,), (0, 1), False, view=_bf16_values, tolerance=(2.0**-7, 1e-5))

    return make


def _loops(rng: np.random.Generator, p: int) -> Launch:
    n = 9 if p < 100 else 37
    x = _rand(rng, (p, n), np.float32)
    x[::5] = -5.0  # rows with no element above the threshold
    arrays: list[Arg] = [np.zeros(p, np.int32), np.zeros(p, np.int32), np.zeros(p, np.int32), x, n, 1.0]
    return Launch(arrays, (p,), (0, 1, 2), True)


def _forever(rng: np.random.Generator, p: int) -> Launch:
    n = 4 if p < 100 else 301
    x = rng.uniform(0.0, p * 0.25 - 1.0, n).astype(np.float32) if p >= 100 else \
        np.array([0.1, 0.3, 0.6, 0.9], np.float32)
    return Launch([np.zeros(3 * p, np.int32), x, n], (p,), (0,), True)


def _integers(rng: np.random.Generator, n: int) -> Launch:
    a = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    a[:4] = [-7, 7, -(2**31), -1]
    b = rng.integers(-1000, 1000, n).astype(np.int32)
    b[b == 0] = 3
    b[b == -1] = 5  # INT_MIN / -1 overflows (undefined in C)
    b[:4] = [2, -2, 7, 5]
    s = rng.integers(0, 32, n).astype(np.int32)
    c = rng.integers(-128, 128, n).astype(np.int8)
    arrays: list[Arg] = [np.zeros(5 * n, np.int32), np.zeros(4 * n, np.uint32), a, b, s, c, n]
    return Launch(arrays, (1,), (0, 1), True)


def _math_full(dtype: Any) -> Callable[[np.random.Generator, int], Launch]:
    def build(rng: np.random.Generator, n: int) -> Launch:
        x = rng.uniform(0.1, 8.0, n).astype(dtype)
        y = rng.uniform(-4.0, 4.0, n).astype(dtype)
        return Launch([np.zeros(16 * n, dtype), x, y, n], (1,), (0,), False)

    return build


def _tiles_3d(dtype: Any, a: int, b: int, c: int) -> Callable[[np.random.Generator, int], Launch]:
    def build(rng: np.random.Generator, p: int) -> Launch:
        x = (rng.standard_normal((p, a, b, c)) * 10).astype(dtype)
        out = np.zeros(p * (3 * b * c + 3 * a * c + 3 * a * b), dtype)
        # float sums along an axis may be ordered differently: exact for integers only
        return Launch([out, x], (p,), (0,), np.dtype(dtype).kind == "i")

    return build


def _facts(rng: np.random.Generator, p: int) -> Launch:
    ld = 8 if p < 100 else 24
    return Launch([np.zeros(p * ld, np.float32), ld], (p,), (0,), True)


WRAPPED = """
__global__ void wrapped(half* Y, half* X, int M) {
  int off[BLOCK] = get_program_id(0) * BLOCK + 0 ... BLOCK;
  *(Y + off) = *(X + off % M);
}
"""


def _wrapped(rng: np.random.Generator, m: int) -> Launch:
    # rows wrapped with `% M` as in Triton's tutorial: M = 1008 is specialized as a multiple of
    # 16, so the analysis keeps 16-long runs and the loads are vectors; M = 37 is not
    programs = 40
    x = _rand(rng, m, np.float16)
    return Launch([np.zeros(programs * 256, np.float16), x, m], (programs,), (0,), True)


#: A tensor-core product with a bias row added in the epilogue and a float or half result: the
#: bias (a [1, NB] tile before it meets the accumulator) takes the accumulator's layout.
BIAS_MATMUL = """
__global__ void biased(half* A, half* B, float* bias, OUT* C, int M, int N, int K, int lda, int ldb, int ldc) {
  int rm[MB] = get_program_id(0) * MB + 0 ... MB;
  int rn[NB] = get_program_id(1) * NB + 0 ... NB;
  int rk[KB] = 0 ... KB;
  half* pa[MB, KB] = A + rm[:, newaxis] * lda + rk[newaxis, :];
  half* pb[KB, NB] = B + rk[:, newaxis] * ldb + rn[newaxis, :];
  float acc[MB, NB] = 0;
  for (int k = K; k > 0; k -= KB) {
    acc += *pa @ *pb;
    pa += KB;
    pb += KB * ldb;
  }
  float row[NB] = *(bias + rn);
  *?(rm[:, newaxis] < M && rn[newaxis, :] < N)(C + rm[:, newaxis] * ldc + rn[newaxis, :]) = acc + row[newaxis, :];
}
"""


def _bias_matmul(out: Any, mb: int = 64, nb: int = 64) -> Callable[[np.random.Generator, str], Launch]:
    def make(rng: np.random.Generator, scale: str) -> Launch:
        # M, N ragged (the store is masked), K whole blocks; operands and bias padded to whole tiles
        m, n, k = (67, 70, 64) if scale == "odd" else (mb * 4 + 3, nb * 4 + 1, 32 * 8)
        pm, pn = -(-m // mb) * mb, -(-n // nb) * nb
        a, b = _rand(rng, (pm, k), np.float16), _rand(rng, (k, pn), np.float16)
        bias = _rand(rng, pn, np.float32)
        c = np.zeros((m, n), out)
        return Launch([a, b, bias, c, m, n, k, k, pn, n], (pm // mb, pn // nb), (3,), False)

    return make


#: Attention forward with an online softmax (flash-attention's loop) over BN keys at a time: row
#: maxima and sums of a tensor-core product (reductions of an accumulator layout, across warps
#: with mma.sync's 2x2 warps at BM = 32) broadcast back over it, and a second product.
ATTENTION = """
__global__ void attention(half* Q, half* K, half* V, half* O, int N) {
  int rm[BM] = get_program_id(0) * BM + (0 ... BM);
  int rd[D] = 0 ... D;
  int rn[BN] = 0 ... BN;
  half q[BM, D] = *(Q + rm[:, newaxis] * D + rd[newaxis, :]);
  float m[BM] = -F32_INFINITY;
  float l[BM] = 0;
  float acc[BM, D] = 0;
  for (int j = 0; j < N; j += BN) {
    half kt[D, BN] = *(K + rd[:, newaxis] + (j + rn[newaxis, :]) * D);
    float s[BM, BN] = q @ kt;
    float mn[BM] = max(m, s[:, max]);
    float p[BM, BN] = exp(s - mn[:, newaxis]);
    float alpha[BM] = exp(m - mn);
    l = l * alpha + p[:, +];
    half v[BN, D] = *(V + (j + rn[:, newaxis]) * D + rd[newaxis, :]);
    acc = acc * alpha[:, newaxis] + (half[BM, BN]) p @ v;
    m = mn;
  }
  *(O + rm[:, newaxis] * D + rd[newaxis, :]) = acc / l[:, newaxis];
}
"""


def _attention(bm: int, d: int = 64, bn: int = 64) -> Callable[[np.random.Generator, str], Launch]:
    def make(rng: np.random.Generator, scale: str) -> Launch:
        rows, n = (bm * 2, bn) if scale == "odd" else (bm * 8, bn * 6)
        q, k, v = (_rand(rng, (r, d), np.float16) for r in (rows, n, n))
        return Launch([q, k, v, np.zeros((rows, d), np.float16), n], (rows // bm,), (3,), False)

    return make


#: What kernels do with a tensor-core product besides storing it: sums along both axes (across
#: warps: wgmma's warps split M, mma.sync's 2x2 warps split both), a transposition, a row
#: normalization (reductions broadcast back), int8 operands (CUDA cores, int32 sums).
DOT_TILE = """
__global__ void k(TYPE* A, TYPE* B, ACC* O, ACC* R, ACC* C, half* L) {
  int rm[BM] = 0 ... BM;
  int rk[32] = 0 ... 32;
  int rn[64] = 0 ... 64;
  ACC s[BM, 64] = *(A + rm[:, newaxis] * 32 + rk[newaxis, :]) @ *(B + rk[:, newaxis] * 64 + rn[newaxis, :]);
  *(R + rm) = s[:, +];
  *(C + rn) = s[+, :];
  ACC t[64, BM] = ^s;
  *(O + rn[:, newaxis] * BM + rm[newaxis, :]) = t;
#if NORMALIZE
  float mean[BM] = s[:, +] / 64;
  float d[BM, 64] = s - mean[:, newaxis];
  float var[BM] = (d * d)[:, +] / 64;
  *(L + rm[:, newaxis] * 64 + rn[newaxis, :]) = d / sqrt(var[:, newaxis] + 1e-5f);
#endif
}
"""


def _dot_tile(bm: int, integer: bool) -> Callable[[np.random.Generator, str], Launch]:
    def make(rng: np.random.Generator, scale: str) -> Launch:
        if integer:
            a, b = (rng.integers(-100, 100, shape).astype(np.int8) for shape in ((bm, 32), (32, 64)))
        else:
            a, b = _rand(rng, (bm, 32), np.float16), _rand(rng, (32, 64), np.float16)
        acc = np.int32 if integer else np.float32
        outs: list[Arg] = [np.zeros((64, bm), acc), np.zeros(bm, acc), np.zeros(64, acc),
                           np.zeros((bm, 64), np.float16)]
        # the column sums add 192 products of about 5 in magnitude in another order than the
        # interpreter: fp32 rounding alone moves a sum near 0 by up to eps * 1000, about 1e-4
        sums = {4: (1e-4, 2e-4)} if bm > 64 else None
        return Launch([a, b, *outs], (1,), (2, 3, 4) if integer else (2, 3, 4, 5), integer, tolerance=sums)

    return make


#: A tensor-core tile of 12 warps added atomically: its blocked layout spreads over 8 warps (in
#: powers of two) and the other 4 hold copies that must not add theirs too.
ATOMIC_TILE = """
__global__ void k(half* A, half* B, float* R, float* T) {
  int rm[192] = 0 ... 192;
  int rk[32] = 0 ... 32;
  int rn[64] = 0 ... 64;
  float s[192, 64] = *(A + rm[:, newaxis] * 32 + rk[newaxis, :]) @ *(B + rk[:, newaxis] * 64 + rn[newaxis, :]);
  *(R + rm) = s[:, +];
  atomic_add(T + rm[:, newaxis] * 64 + rn[newaxis, :], s);
}
"""


def _atomic_tile(rng: np.random.Generator, scale: str) -> Launch:
    a, b = _rand(rng, (192, 32), np.float16), _rand(rng, (32, 64), np.float16)
    return Launch([a, b, np.zeros(192, np.float32), np.zeros((192, 64), np.float32)], (1,), (2, 3), False)


#: Constructs the robustness sweep of 2026-11-26 fixed: a [1, 128] tile reduced to its one
#: element (no shared-memory exchange), a float compare-and-swap loop (atom.cas on the bits), and
#: assignments inside `&&` and `?:` operands that outlive them.
EDGES = """
__global__ void k(float* rowmax, float* fmax, int* counts, float* x, int n) {
  int pid = get_program_id(0);
  int r1[1] = 0 ... 1;
  int rn[128] = pid * 128 + 0 ... 128;
  bool in[1, 128] = (rn < n)[newaxis, :];
  float a[1, 128] = in ? *?(in)(x + r1[:, newaxis] * 0 + rn[newaxis, :]) : -F32_INFINITY;
  float row[1] = a[:, max];
  *(rowmax + pid + r1) = row;
  float m = row[max];
  float old = *fmax;
  while (old < m) {
    float seen = atomic_cas(fmax, old, m);
    if (seen == old) break;
    old = seen;
  }
  int c = 0;
  if (pid >= 0 && (c = pid % 3 + 1) > 1) { *(counts + 3 * pid) = c * 10; }
  else { *(counts + 3 * pid) = c; }
  int d = pid % 2 == 0 ? c++ : c--;
  *(counts + 3 * pid + 1) = c;
  *(counts + 3 * pid + 2) = d;
}
"""


def _edges(rng: np.random.Generator, n: int) -> Launch:
    p = -(-n // 128)
    x = _rand(rng, n, np.float32)
    arrays: list[Arg] = [np.zeros(p, np.float32), np.full(1, -np.inf, np.float32), np.zeros(3 * p, np.int32), x, n]
    return Launch(arrays, (p,), (0, 1, 2), True)


def suite_cases() -> list[Case]:
    return [
        Case("signedness", SIGNED, {}, _scaled(_signedness)),
        Case("nested_loops_return", LOOPS, {}, _scaled(_nested_loops)),
        Case("device_helpers", HELPERS, {"BLOCK": 16}, _scaled(_helpers)),
        # no arguments and fixed tiles: one launch at both scales
        Case("reductions_3d", REDUCE3, {}, _fixed(
            lambda: [np.zeros(3, np.float32), np.zeros(1, np.int32)], (0, 1))),
        Case("int_ops", INT_OPS, {"BLOCK": 128}, _sized(1000, (1 << 16) + 3, _int_ops)),
        Case("math", MATH, {"BLOCK": 256}, _sized(999, (1 << 16) + 1, _math)),
        Case("reduce_axes", REDUCE_AXES, {"TM": 32, "TN": 64}, _sized(67, 4096 + 3, _reduce_axes(32, 64))),
        # tile dimensions that are multiples of 16, not powers of two (1-D tiles of 48 and 96
        # over 128 threads: a Slice layout whose removed dimension holds the extra threads)
        Case("reduce_axes[48x96]", REDUCE_AXES, {"TM": 48, "TN": 96}, _sized(101, 4096 + 3, _reduce_axes(48, 96))),
        Case("atomic_tickets", TICKETS, {}, _sized(37, 32 * 2000 + 5, _tickets)),
        Case("atomics", SUITE.ATOMICS, {}, _sized(1000, 64 * 1500 + 33, _atomics)),
        Case("guarded_atomics", SUITE.GUARDED, {}, _sized(5, 8, _guarded)),
        Case("unsigned", SUITE.UNSIGNED, {}, _unsigned),
        Case("bf16", SUITE.BF16, {}, _bf16(False)),
        Case("bf16_rounding", SUITE.BF16, {}, _bf16(True)),
        Case("loops_while_do_break_continue", SUITE.LOOPS, {}, _sized(12, 1000, _loops)),
        Case("for_forever", SUITE.FOREVER, {}, _sized(5, 1000, _forever)),
        Case("integers", SUITE.INTEGERS, {"BLOCK": 1024}, _sized(300, 1024, _integers)),
        Case("math_full[float]", SUITE.MATH, {"TYPE": "float", "BLOCK": 256},
             _sized(200, 256, _math_full(np.float32))),
        Case("math_full[half]", SUITE.MATH, {"TYPE": "half", "BLOCK": 256},
             _sized(200, 256, _math_full(np.float16))),
        Case("tiles_3d[int]", SUITE.TILES_3D, {"TYPE": "int", "A": 2, "B": 4, "C": 8},
             _sized(3, 1000, _tiles_3d(np.int32, 2, 4, 8))),
        Case("tiles_3d[half]", SUITE.TILES_3D, {"TYPE": "half", "A": 2, "B": 4, "C": 8},
             _sized(3, 1000, _tiles_3d(np.float16, 2, 4, 8))),
        Case("tiles_3d[float]", SUITE.TILES_3D, {"TYPE": "float", "A": 4, "B": 8, "C": 16},
             _sized(3, 1000, _tiles_3d(np.float32, 4, 8, 16))),
        Case("facts", SUITE.FACTS, {}, _sized(4, 1000, _facts)),
        Case("wrapped_rows", WRAPPED, {"BLOCK": 256}, _sized(37, 1008, _wrapped)),
        Case("edge_constructs", EDGES, {}, _sized(300, 128 * 1000 + 7, _edges)),
        Case("matmul_bias[float]", BIAS_MATMUL, {"OUT": "float", "MB": 64, "NB": 64, "KB": 32},
             _bias_matmul(np.float32)),
        Case("matmul_bias[half]", BIAS_MATMUL, {"OUT": "half", "MB": 64, "NB": 64, "KB": 32},
             _bias_matmul(np.float16)),
        Case("matmul_bias[half,NB=96]", BIAS_MATMUL, {"OUT": "half", "MB": 64, "NB": 96, "KB": 32},
             _bias_matmul(np.float16, 64, 96)),
        Case("matmul_bias[float,MB=64,NB=80]", BIAS_MATMUL, {"OUT": "float", "MB": 64, "NB": 80, "KB": 32},
             _bias_matmul(np.float32, 64, 80)),
        Case("attention[BM=64]", ATTENTION, {"BM": 64, "BN": 64, "D": 64}, _attention(64)),
        Case("attention[D=96,BN=48]", ATTENTION, {"BM": 64, "BN": 48, "D": 96}, _attention(64, 96, 48)),
        Case("attention[BM=32]", ATTENTION, {"BM": 32, "BN": 64, "D": 64}, _attention(32)),
        *(Case(f"dot_tile[{ty},BM={bm}]", DOT_TILE,
               {"TYPE": ty, "ACC": "int" if ty == "char" else "float", "BM": bm, "NORMALIZE": int(ty == "half")},
               _dot_tile(bm, ty == "char"))
          for ty in ("half", "char") for bm in (32, 64)),
        # 12 warps: on sm_90 three warpgroups share the 192 rows of the wgmma accumulator, whose
        # column sums cross 12 warps (3 on mma.sync) through shared memory
        Case("dot_tile[half,BM=192,12 warps]", DOT_TILE, {"TYPE": "half", "ACC": "float", "BM": 192, "NORMALIZE": 1},
             _dot_tile(192, False), num_warps=12),
        Case("atomic_tile[12 warps]", ATOMIC_TILE, {}, _atomic_tile, num_warps=12),
    ]


def all_cases() -> list[Case]:
    return spec_cases() + suite_cases()


def case_ids(cases: list[Case]) -> list[str]:
    return [c.name for c in cases]
