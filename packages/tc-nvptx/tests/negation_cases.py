"""Kernels that ptxas miscompiled when LLVM's PTX negated integers with `neg` (tc_nvptx.ptx_fixups
says how), cut down from kernels that tools/fuzz_kernels.py found, with inputs and the numpy
result. The CPU tests check their PTX and their interpreter result, the GPU test their GPU result.
With the rewrite switched off, the min and char cases gave wrong results on an H100 (2026-11-28);
the short case, the 16-bit form of the min case, was right once cut down this far (the kernel
it came from was not) and is kept beside them. Not a test module itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

Array = np.ndarray[Any, Any]


@attrs.frozen
class NegationCase:
    name: str
    source: str
    num_warps: int
    #: () -> (arguments, index of the output, the output numpy computes)
    make: Callable[[], tuple[list[Any], int, Array]]


# min over a tile of negated values: ptxas 12.8/13.0 read half of them without the negation
MIN_OF_NEGATED = """
#define TM 64
#define TN 80
__global__ void k(float* out, int* total, char* b, int* c, int M, int N) {
  int rm[TM] = 0 ... TM;
  int rn[TN] = 0 ... TN;
  bool mask[TM, TN] = (rm[:, newaxis] < M) && (rn[newaxis, :] < N);
  char y[TN] = *?(rn < N)(b + rn);
  int z[TM] = *?(rm < M)(c + rm);
  int v[TM, TN] = -z[:, newaxis];
  float w[TM, TN] = abs(v >> (y[newaxis, :] & 7));
  *?(mask)(out + rm[:, newaxis] * N + rn[newaxis, :]) = w;
  *total = v[min, min];
}
"""


def _min_of_negated() -> tuple[list[Any], int, Array]:
    rng = np.random.default_rng(802)
    m, n = 61, 77
    b = rng.integers(-100, 100, n).astype(np.int8)
    c = rng.integers(-1000, 1000, m).astype(np.int32)
    want = np.array([min(0, int((-c).min()))], np.int32)  # rows past M load 0
    return [np.zeros((m, n), np.float32), np.zeros(1, np.int32), b, c, m, n], 1, want


# max over a short tile of negated values (neg.s16 feeding max.s16)
MAX_OF_NEGATED_SHORTS = """
#define TM 32
#define TN 64
__global__ void k(short* out, short* total, long* c, int M, int N) {
  int rm[TM] = 0 ... TM;
  int rn[TN] = 0 ... TN;
  bool mask[TM, TN] = (rm[:, newaxis] < M) && (rn[newaxis, :] < N);
  long z[TM] = *?(rm < M)(c + rm);
  short v[TM, TN] = -((short) z[:, newaxis]);
  *?(mask)(out + rm[:, newaxis] * N + rn[newaxis, :]) = v;
  *total = v[max, max];
}
"""


def _max_of_negated_shorts() -> tuple[list[Any], int, Array]:
    rng = np.random.default_rng(400)
    m, n = 27, 50
    c = rng.integers(-1000, 1000, m).astype(np.int64)
    want = np.array([max(0, int((-c).max()))], np.int16)
    return [np.zeros((m, n), np.int16), np.zeros(1, np.int16), c, m, n], 1, want


# (char) of a negated int widened to short: neg.s16 then shr.s16 gave 128 for -128
CHAR_OF_NEGATED = """
__global__ void k(int* a, short* o) {
  int r[32] = 0 ... 32;
  int x[32] = *(a + r);
  short v[32] = (char) (-x);
  *(o + r) = v;
}
"""


def _char_of_negated() -> tuple[list[Any], int, Array]:
    x = np.array([128, -128, 127, 129, 255, 256, 384, -129, 0, 1, -1, 383, 640, -384, 5, 6] * 2, np.int32)
    want = (-(x.astype(np.int64))).astype(np.int8).astype(np.int16)
    return [x, np.zeros(32, np.int16)], 1, want


CASES = [
    NegationCase("min_of_negated_w2", MIN_OF_NEGATED, 2, _min_of_negated),
    NegationCase("min_of_negated_w4", MIN_OF_NEGATED, 4, _min_of_negated),
    NegationCase("max_of_negated_shorts_w8", MAX_OF_NEGATED_SHORTS, 8, _max_of_negated_shorts),
    NegationCase("max_of_negated_shorts_w1", MAX_OF_NEGATED_SHORTS, 1, _max_of_negated_shorts),
    NegationCase("char_of_negated", CHAR_OF_NEGATED, 1, _char_of_negated),
]
