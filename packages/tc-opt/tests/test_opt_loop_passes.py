"""LICM, rematerialization, dot+add combining, select-of-load folding, resource limits and the
pass manager's timings, on kernels lowered from source (the interpreter checks the semantics)."""

from __future__ import annotations

import numpy as np
import pytest
import tc_lang
from tc_ir.interpreter import interpret
from tc_ir.lower import lower
from tc_ir.ops import BinaryOp, DotOp, ForOp, LoadOp, MakeRangeOp, Module, SelectOp
from tc_ir.verifier import verify
from tc_lang.diagnostics import TcResourceError
from tc_opt import (
    Canonicalize,
    CombineDotAdd,
    CompileOptions,
    DeadCodeElimination,
    LoopInvariantCodeMotion,
    PassManager,
    Rematerialize,
    ResourceLimitError,
    fold_select_of_load,
    max_shared_bytes,
)
from tc_opt.resources import check_shared


def lower_src(src: str, **defines: object) -> Module:
    return lower(tc_lang.frontend(src, dict(defines)))  # type: ignore[arg-type]


LOOP = """
__global__ void k(int* o, int n, int s) {
  int r[16] = get_program_id(0) * 16 + (0 ... 16);
  int acc[16] = 0;
  for (int i = 0; i < n; i++) {
    acc += r * (s * 3);
  }
  *(o + r) = acc + r;
}
"""


def _run(m: Module, n: int) -> list[int]:
    o = np.zeros(32, np.int32)
    interpret(m, [o, n, 5], (2,))
    return o.tolist()


def test_licm_hoists_invariants_and_keeps_results() -> None:
    m = lower_src(LOOP)
    want = _run(m, 4)
    LoopInvariantCodeMotion().run(m)
    verify(m)
    loop = next(op for op in m.walk() if isinstance(op, ForOp))
    inside = [op for op in loop.body.walk() if isinstance(op, BinaryOp)]
    assert all(op.kind != "mul" for op in inside)  # r * (s * 3) is invariant: hoisted
    assert _run(m, 4) == want and _run(m, 0) == [i for i in range(32)]


def test_rematerialize_recomputes_cheap_tiles_after_the_loop() -> None:
    src = LOOP.replace("acc += r * (s * 3);", "acc += s;")
    m = lower_src(src)
    want = _run(m, 3)
    Rematerialize().run(m)
    DeadCodeElimination().run(m)
    verify(m)
    f = m.functions[0]
    ops = f.body.ops
    loop_at = next(i for i, op in enumerate(ops) if isinstance(op, ForOp))
    ranges = [i for i, op in enumerate(ops) if isinstance(op, MakeRangeOp)]
    assert ranges and all(i > loop_at for i in ranges)  # r lives only after the loop now
    assert _run(m, 3) == want


def test_rematerialize_keeps_tiles_the_loop_uses() -> None:
    m = lower_src(LOOP)
    Rematerialize().run(m)
    f = m.functions[0]
    loop_at = next(i for i, op in enumerate(f.body.ops) if isinstance(op, ForOp))
    assert not any(isinstance(op, MakeRangeOp) for op in f.body.ops[loop_at:])


DOT = """
__global__ void k(float* a, float* b, float* c) {
  int r[16] = 0 ... 16;
  float x[16, 16] = *(a + r[:, newaxis] * 16 + r[newaxis, :]);
  float y[16, 16] = *(b + r[:, newaxis] * 16 + r[newaxis, :]);
  float acc[16, 16] = *(c + r[:, newaxis] * 16 + r[newaxis, :]);
  float d[16, 16] = x @ y;
  *(c + r[:, newaxis] * 16 + r[newaxis, :]) = acc + d;
}
"""


def test_combine_dot_folds_the_add_into_the_accumulator() -> None:
    m = lower_src(DOT)
    rng = np.random.default_rng(0)
    a, b, c0 = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(3))
    ref = c0.copy()
    interpret(m, [a, b, ref], (1,))
    Canonicalize().run(m)
    CombineDotAdd().run(m)
    DeadCodeElimination().run(m)
    verify(m)
    dots = [op for op in m.walk() if isinstance(op, DotOp)]
    assert len(dots) == 1 and isinstance(dots[0].operands[2], type(dots[0].result))
    assert not any(isinstance(op, BinaryOp) and op.kind == "fadd" for op in m.walk())
    got = c0.copy()
    interpret(m, [a, b, got], (1,))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


SELECT_LOAD = """
__global__ void k(float* o, float* x, int n) {
  int r[64] = 0 ... 64;
  bool m[64] = r < n;
  float v[64] = *(x + r);
  float w[64] = m ? v : -1.0f;
  *(o + r) = w;
}
"""


def test_select_of_unmasked_load_becomes_one_masked_load() -> None:
    m = lower_src(SELECT_LOAD)
    Canonicalize().run(m)  # folds select(m, load(p), v) at the end
    verify(m)
    loads = [op for op in m.walk() if isinstance(op, LoadOp)]
    assert len(loads) == 1 and len(loads[0].operands) == 3
    assert not any(isinstance(op, SelectOp) for op in m.walk())
    x = np.arange(40, dtype=np.float32)  # shorter than the tile: only the masked load fits
    o = np.zeros(64, np.float32)
    interpret(m, [o, x, 40], (1,))
    assert o.tolist() == list(range(40)) + [-1.0] * 24
    assert fold_select_of_load(m.functions[0].body) == 0


def test_shared_memory_above_the_target_is_a_typed_error() -> None:
    assert max_shared_bytes("sm_80") == 163 * 1024 and max_shared_bytes("sm_90") == 227 * 1024
    check_shared(227 * 1024, CompileOptions(arch="sm_90"))
    with pytest.raises(TcResourceError) as info:
        check_shared(200 * 1024, CompileOptions(arch="sm_80"))
    e = info.value
    assert isinstance(e, ResourceLimitError)
    assert (e.needed, e.limit, e.unit) == (200 * 1024, 163 * 1024, "bytes")
    text = str(e)
    assert "204800 bytes" in text and "166912" in text and "sm_80" in text and "hint:" in text


def test_pass_manager_times_every_pass() -> None:
    m = lower_src(LOOP)
    pm = PassManager([Canonicalize(), LoopInvariantCodeMotion(), DeadCodeElimination()])
    pm.run(m)
    report = pm.timing_report()
    for name in ("canonicalize", "licm", "dce", "total"):
        assert name in report
