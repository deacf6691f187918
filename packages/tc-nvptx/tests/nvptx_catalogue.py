"""The kernel catalogue: every spec kernel (with the defines of tc-lang's defines.json) and the
source kernels of the interpreter suite, with inputs at an odd and a large size.

Used by the compile checks (every kernel compiles for sm_80 and sm_90 and ptxas accepts it) and
by tests/integration/test_integration_gpu_vs_interpreter.py (the GPU gives the interpreter's
result). Not a test module itself: tests import it after putting this folder on sys.path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

import attrs
import numpy as np

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
DEFINES: dict[str, dict[str, dict[str, Any]]] = json.loads((KERNELS / "defines.json").read_text())

Arg = Union[np.ndarray[Any, Any], int]


@attrs.frozen
class Launch:
    """Arguments (arrays are device buffers, ints are scalars), the grid, the indices of the
    arrays to compare afterwards, and whether they must match bit for bit."""

    args: list[Arg]
    grid: tuple[int, ...]
    outputs: tuple[int, ...]
    exact: bool


@attrs.frozen
class Case:
    name: str
    source: str
    defines: dict[str, Any]
    #: (rng, "odd" | "large") -> the launch; None: compile-only.
    make: Callable[[np.random.Generator, str], Launch] | None = None
    filename: str = "<catalogue>"


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


def _reduce_axes(rng: np.random.Generator, _n: int) -> Launch:
    x = _rand(rng, (32, 64), np.float32)
    return Launch([np.zeros(32, np.float32), np.zeros(64, np.float32), x, 64], (1,), (0, 1), False)


def suite_cases() -> list[Case]:
    return [
        Case("signedness", SIGNED, {}, _fixed(
            lambda: [np.zeros(4, np.int32), np.zeros(4, np.uint32), np.zeros(2, np.float32), -7, 0xFFFFFFF0],
            (0, 1, 2))),
        Case("nested_loops_return", LOOPS, {}, _fixed(lambda: [np.zeros(5, np.int32), 1], (0,))),
        Case("device_helpers", HELPERS, {"BLOCK": 16}, _fixed(
            lambda: [np.zeros(16, np.float32), np.zeros(1, np.int32), -5], (0, 1))),
        Case("reductions_3d", REDUCE3, {}, _fixed(
            lambda: [np.zeros(3, np.float32), np.zeros(1, np.int32)], (0, 1))),
        Case("int_ops", INT_OPS, {"BLOCK": 128}, _sized(1000, (1 << 16) + 3, _int_ops)),
        Case("math", MATH, {"BLOCK": 256}, _sized(999, (1 << 16) + 1, _math)),
        Case("reduce_axes", REDUCE_AXES, {"TM": 32, "TN": 64}, _sized(1, 1, _reduce_axes)),
    ]


def all_cases() -> list[Case]:
    return spec_cases() + suite_cases()


def case_ids(cases: list[Case]) -> list[str]:
    return [c.name for c in cases]
