"""RerollPrefetch: a hand-written prefetch (`a = *pa` before the loop, `a = k > TK ? *pa : 0` at
the end of the body) becomes a load at the top of the body only where that is provably the same
value; the interpreter checks that results do not change either way."""

from __future__ import annotations

import numpy as np
import pytest
import tc_lang
from tc_ir.interpreter import interpret
from tc_ir.lower import lower
from tc_ir.ops import ForOp, IfOp, LoadOp, Module
from tc_ir.testing import filecheck, round_trip
from tc_opt import Canonicalize, DeadCodeElimination, RerollPrefetch, module_text

SRC = """
__global__ void k(float* A, float* O, int K) {
  int r[16] = 0 ... 16;
  float acc[16] = 0;
  float* pa[16] = A + r;
  float a[16] = *pa;
  for (int k = K; k > 0; k -= 16) {
    acc += a * 2;
    pa = pa + 16;
    bool check = CHECK;
    a = check ? *NEXT : 0;
    BODY_END
  }
  *(O + r) = acc AFTER;
}
"""


def kernel(check: str = "k > 16", nxt: str = "pa", body_end: str = "", after: str = "") -> Module:
    src = SRC.replace("CHECK", check).replace("NEXT", nxt).replace("BODY_END", body_end).replace("AFTER", after)
    m = lower(tc_lang.frontend(src, {}))
    Canonicalize().run(m)
    return m


def rerolled(m: Module) -> Module:
    RerollPrefetch().run(m)
    DeadCodeElimination().run(m)
    round_trip(m)
    return m


def run(m: Module, k: int) -> list[float]:
    a = np.arange(16 * 8 + 16, dtype=np.float32)  # one spare tile: a prefetch past K stays inside
    o = np.zeros(16, np.float32)
    interpret(m, [a, o, k], (1,))
    return o.tolist()


def loop_of(m: Module) -> ForOp:
    return next(op for op in m.walk() if isinstance(op, ForOp))


@pytest.mark.parametrize("check", ["k > 16", "16 < k", "k - 16 > 0", "k >= 17"])
def test_prefetch_becomes_a_load_at_the_top_of_the_body(check: str) -> None:
    m = kernel(check)
    want = {k: run(m, k) for k in (0, 16, 48, 128)}
    filecheck(module_text(m), """
CHECK: %a = tc.load %pa
CHECK: tc.for {{.*}}, %a :
CHECK: tc.if %check
CHECK: tc.load %pa_2
CHECK: tc.yield {{.*}}, %pa_2, %a_2
""")
    text = module_text(rerolled(m))
    filecheck(text, """
CHECK-NOT: tc.load
CHECK: tc.for {{.*}} : tile<16xf32>, tile<16xptr<f32>> ({
CHECK-NEXT: ^(%{{[0-9]+}}: i32, %acc_1: tile<16xf32>, %pa_1: tile<16xptr<f32>>):
CHECK-NEXT: %a{{(_[0-9]+)?}} = tc.load %pa_1 : tile<16xf32>
CHECK-NOT: tc.if
CHECK-NOT: tc.load
CHECK: tc.yield %{{[a-z0-9_]+}}, %pa_2 loc
""")
    assert {k: run(m, k) for k in want} == want


def test_unconditional_prefetch_is_rerolled() -> None:
    # `a = *pa` at the end of every iteration (matmul_fused_trans.tc): the last read is dropped
    src = SRC.replace("bool check = CHECK;", "").replace("a = check ? *NEXT : 0;", "a = *pa;")
    m = lower(tc_lang.frontend(src.replace("BODY_END", "").replace("AFTER", ""), {}))
    Canonicalize().run(m)
    want = run(m, 64)
    rerolled(m)
    loop = loop_of(m)
    assert len(loop.inits) == 2 and isinstance(loop.body.ops[0], LoadOp)
    assert run(m, 64) == want


@pytest.mark.parametrize("case", [
    dict(after="+ a"),  # the loop's result for a is used after the loop
    dict(check="k > 32"),  # not "another iteration follows": the last two read 0
    dict(check="k > 8"),  # true on the last iteration of some K too
    dict(check="k < 16"),
    dict(nxt="(pa + 1)"),  # the prefetch does not read the pointer the loop carries
    dict(body_end="*(O + r) = acc;"),  # a store after the prefetch: the load must not move past it
])
def test_loop_is_left_alone_when_not_provable(case: dict[str, str]) -> None:
    m = kernel(**case)
    before = module_text(m)
    want = {k: run(m, k) for k in (0, 16, 48)}
    RerollPrefetch().run(m)
    assert module_text(m) == before
    loop = loop_of(m)
    assert len(loop.inits) == 3 and any(isinstance(op, IfOp) for op in loop.body.ops)
    assert {k: run(m, k) for k in want} == want


def test_store_between_first_load_and_loop_blocks_it() -> None:
    src = SRC.replace("float a[16] = *pa;", "float a[16] = *pa;\n  *(O + r) = acc;")
    m = lower(tc_lang.frontend(src.replace("CHECK", "k > 16").replace("NEXT", "pa")
                               .replace("BODY_END", "").replace("AFTER", ""), {}))
    Canonicalize().run(m)
    before = module_text(m)
    RerollPrefetch().run(m)
    assert module_text(m) == before
