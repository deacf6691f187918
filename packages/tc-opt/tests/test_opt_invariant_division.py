"""tc_opt.invariant_division: i32 division by a divisor that does not change in a loop becomes a
multiply by its reciprocal computed before the loop. The interpreter runs each kernel before and
after the pass over dividends and divisors at the edges of the 32-bit range (C's truncation and
remainder signs, d = 1, -1, the largest and smallest ints) and the results must be identical."""

from __future__ import annotations

import numpy as np
import pytest
import tc_lang
from tc_ir.interpreter import interpret
from tc_ir.lower import lower
from tc_ir.ops import BinaryOp, Block, ForOp, Module, WarpSpecializeOp
from tc_ir.testing import filecheck, round_trip
from tc_ir.verifier import verify
from tc_opt import CompileOptions
from tc_opt.invariant_division import InvariantDivision, nonnegative, reduce_divisions
from tc_opt.pipeline import gpu_pipeline

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
DIVISORS = [1, -1, 2, -2, 3, 7, -7, 10, 641, 65536, 1_000_003, -1_000_003, 2**30 + 1, INT_MAX, INT_MIN,
            INT_MIN + 1]
EDGES = [0, 1, -1, 2, -2, 6, 7, 8, -8, 640, 641, 642, 65535, 65536, 2**30, INT_MAX, INT_MAX - 1, INT_MIN,
         INT_MIN + 1]


def lower_src(src: str, **defines: object) -> Module:
    return lower(tc_lang.frontend(src, dict(defines)))  # type: ignore[arg-type]


def _dividends(seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    wide = rng.integers(INT_MIN, INT_MAX, 96, dtype=np.int64, endpoint=True)
    small = rng.integers(-5000, 5000, 32)
    return np.array(EDGES + wide.tolist() + small.tolist(), dtype=np.int32)


SIGNED = """
__global__ void k(int* X, int* Q, int* R, int n, int d) {
  for (int i = 0; i < n; i++) {
    int x = *(X + i);
    *(Q + i) = x / d;
    *(R + i) = x % d;
  }
}
"""

UNSIGNED = """
__global__ void k(unsigned* X, unsigned* Q, unsigned* R, int n, unsigned d) {
  for (int i = 0; i < n; i++) {
    unsigned x = *(X + i);
    *(Q + i) = x / d;
    *(R + i) = x % d;
  }
}
"""

#: dividends the pass knows are not negative: the loop index and the program id
NONNEGATIVE = """
__global__ void k(int* Q, int* R, int n, int d) {
  int p = get_program_id(0);
  for (int i = 0; i < n; i++) {
    *(Q + i) = (i * 10000019 + p) / d;  // (below 2^31 for i < 200: no overflow)
    *(R + i) = i % d;
  }
}
"""


def _divisions(m: Module) -> list[str]:
    return [op.kind for op in m.walk() if isinstance(op, BinaryOp) and op.kind in ("sdiv", "udiv", "srem", "urem")
            and str(op.result.type) == "i32"]


def _run(m: Module, x: np.ndarray, d: int, unsigned: bool = False) -> tuple[list[int], list[int]]:
    dt = np.uint32 if unsigned else np.int32
    q, r = np.zeros(len(x), dt), np.zeros(len(x), dt)
    interpret(m, [x.astype(dt), q, r, len(x), d], (1,))
    return q.tolist(), r.tolist()


@pytest.mark.parametrize("d", DIVISORS)
def test_signed_quotients_and_remainders_unchanged(d: int) -> None:
    x = _dividends()
    if d == -1:
        x = x[x != INT_MIN]  # (INT_MIN / -1 overflows: undefined in C)
    before = lower_src(SIGNED)
    after = lower_src(SIGNED)
    assert reduce_divisions(after.functions[0].body) == 2
    verify(after)
    assert _divisions(after) == []
    assert _run(after, x, d) == _run(before, x, d)


@pytest.mark.parametrize("d", [1, 2, 3, 7, 641, 65536, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1])
def test_unsigned_quotients_and_remainders_unchanged(d: int) -> None:
    x = _dividends().view(np.uint32)
    before = lower_src(UNSIGNED)
    after = lower_src(UNSIGNED)
    assert reduce_divisions(after.functions[0].body) == 2
    verify(after)
    assert _divisions(after) == []
    assert _run(after, x, d, True) == _run(before, x, d, True)


@pytest.mark.parametrize("d", [1, -1, 3, -3, 641, INT_MAX, INT_MIN])
def test_nonnegative_dividends_skip_their_sign(d: int) -> None:
    """The loop index (from 0, step 1) and the program id are not negative: no absolute value of
    the dividend is taken (the divisor's sign is still restored)."""
    before, after = lower_src(NONNEGATIVE), lower_src(NONNEGATIVE)
    loop = next(op for op in after.walk() if isinstance(op, ForOp))
    assert nonnegative(loop.body.args[0])
    assert reduce_divisions(after.functions[0].body) == 2
    verify(after)
    inside = [op for op in loop.body.walk() if isinstance(op, BinaryOp)]
    assert not any(op.kind == "xor" for op in inside)  # the quotient's sign is the divisor's
    q0, r0 = np.zeros(200, np.int32), np.zeros(200, np.int32)
    q1, r1 = np.zeros(200, np.int32), np.zeros(200, np.int32)
    interpret(before, [q0, r0, 200, d], (3,))
    interpret(after, [q1, r1, 200, d], (3,))
    assert q1.tolist() == q0.tolist() and r1.tolist() == r0.tolist()


def test_what_stays() -> None:
    """Constant divisors (LLVM's), divisors the loop computes, and divisions outside loops."""
    src = """
__global__ void k(int* Q, int n, int d) {
  int e = n / d;
  for (int i = 0; i < n; i++) {
    int v = i + d;
    *(Q + i) = i / 7 + i / v + e;
  }
}
"""
    m = lower_src(src)
    assert reduce_divisions(m.functions[0].body) == 0
    assert sorted(_divisions(m)) == ["sdiv", "sdiv", "sdiv"]


def test_reciprocal_before_the_outermost_invariant_loop() -> None:
    """The 64-bit division computing M runs once, before the outer loop the divisor does not change
    in, not per iteration of the outer loop (FileCheck of the IR)."""
    src = """
__global__ void k(int* Q, int n, int d) {
  for (int j = 0; j < n; j++) {
    for (int i = 0; i < n; i++) {
      *(Q + i) = (i + j) % d;
    }
  }
}
"""
    m = lower_src(src)
    InvariantDivision().run(m)
    verify(m)
    filecheck(round_trip(m), """
CHECK: tc.unary %d {kind = "iabs"}
CHECK: tc.binary %{{[0-9]+}}, %{{[0-9]+}} {kind = "udiv"} : i64
CHECK: tc.for
CHECK-NOT: kind = "udiv"
CHECK: tc.for
CHECK-NOT: kind = "udiv"
CHECK-NOT: kind = "srem"
CHECK: tc.return
""")


def test_persistent_matmul_divides_by_reciprocals() -> None:
    """In the gpu pipeline: the persistent tutorial matmul's consumers (sm_90, a producer warp)
    keep only the divisions by the grouped order's group size, which changes with the program;
    the producer, which runs ahead, keeps its divisions (no 64-bit division before its first
    copies)."""
    from pathlib import Path

    from tc_nvptx.compiler import frontend_module

    kernels = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
    m = frontend_module((kernels / "matmul_tutorial.tc").read_text(),
                        {"TYPE": "half", "MB": 128, "NB": 256, "KB": 64}, None, "<test>")
    aligned = ("16", "16", "16", None, None, None, "16", "16", "16")
    gpu_pipeline(CompileOptions(arch="sm_90", num_warps=8, num_stages=3, warp_specialize=True,
                                persistent=True, specialization=aligned)).run(m)
    assert m.attributes["persistent"] is True
    ws = next(op for op in m.walk() if isinstance(op, WarpSpecializeOp))

    def divisors(region: Block) -> list[str]:
        return sorted(str(op.operands[1].name_hint) for op in region.walk()
                      if isinstance(op, BinaryOp) and op.kind in ("sdiv", "srem", "udiv", "urem")
                      and str(op.result.type) == "i32" and any(isinstance(p, ForOp) for p in _loops(op)))

    assert divisors(ws.consumer) == ["group_size"] * 2  # (a quotient and a remainder)
    assert divisors(ws.producer) == ["None", "group_size", "group_size", "width", "width"]


def _loops(op: object) -> list[object]:
    out = []
    block = getattr(op, "parent", None)
    while block is not None and block.parent is not None:
        out.append(block.parent)
        block = block.parent.parent
    return out
