"""LICM, rematerialization, dot+add combining, select-of-load folding, resource limits and the
pass manager's timings, on kernels lowered from source (the interpreter checks the semantics)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tc_lang
from tc_ir.interpreter import interpret
from tc_ir.lower import lower
from tc_ir.ops import BinaryOp, CastOp, DotOp, ForOp, LoadOp, MakeRangeOp, Module, SelectOp
from tc_ir.types import ScalarType
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
from tc_opt.canonicalize import narrow_constant
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


SELECT_CAST_LOAD = """
__global__ void k(float* o, TYPE* x, int n) {
  int r[64] = 0 ... 64;
  bool m[64] = r < n;
  float w[64] = m ? *(x + r) : FALLBACK;
  *(o + r) = w;
}
"""


@pytest.mark.parametrize("type_, np_type", [("half", "float16"), ("bf16", None), ("short", "int16")])
def test_select_of_converted_load_takes_the_fallback_into_the_load(type_: str, np_type: str | None) -> None:
    # select(m, fpext(load(x, m)), -inf) -> fpext(load(x, m, -inf as half)): the fallback is
    # read into the load's registers, and no compare and select per element follows the
    # conversion (a half row read into float past its end, as softmax and cross_entropy do)
    m = lower_src(SELECT_CAST_LOAD, TYPE=type_, FALLBACK="-7.0f" if np_type == "int16" else "-F32_INFINITY")
    assert any(isinstance(op, SelectOp) for op in m.walk())
    Canonicalize().run(m)
    verify(m)
    loads = [op for op in m.walk() if isinstance(op, LoadOp)]
    assert len(loads) == 1 and len(loads[0].operands) == 3
    other = loads[0].operands[2]
    assert other.type == loads[0].result.type  # a constant of the narrow type
    assert not any(isinstance(op, SelectOp) for op in m.walk())
    cast = next(op for op in m.walk() if isinstance(op, CastOp))
    assert cast.operands[0] is loads[0].result
    if np_type is None:
        return  # bf16 has no numpy type: the IR is what this checks
    x = np.arange(40).astype(np.dtype(np_type))
    o = np.zeros(64, np.float32)
    interpret(m, [o, x, 40], (1,))
    assert o.tolist() == list(range(40)) + [-7.0 if np_type == "int16" else -np.inf] * 24


@pytest.mark.parametrize("type_, fallback", [
    ("half", "0.1f"),  # 0.1f is no half: the select stays
    ("bf16", "1.001f"),
    ("half", "70000.0f"),  # beyond the largest half
    ("short", "0.5f"),  # no integer converts to it
    ("short", "40000.0f"),  # beyond a short
    ("short", "-0.0f"),  # sitofp gives +0.0
    ("float", "-F32_INFINITY"),  # no conversion: the plain fold
])
def test_select_of_converted_load_keeps_a_fallback_the_load_type_cannot_hold(type_: str,
                                                                            fallback: str) -> None:
    m = lower_src(SELECT_CAST_LOAD, TYPE=type_, FALLBACK=fallback)
    Canonicalize().run(m)
    verify(m)
    folded = not any(isinstance(op, SelectOp) for op in m.walk())
    assert folded == (type_ == "float")


def test_narrow_constant_moves_only_exact_values() -> None:
    f16, bf16, f32, f64 = (ScalarType(n) for n in ("f16", "bf16", "f32", "f64"))
    i8, i32 = ScalarType("i8"), ScalarType("i32")
    assert narrow_constant("fpext", -math.inf, f16, f32) == -math.inf
    assert math.isnan(narrow_constant("fpext", math.nan, bf16, f32) or 0.0)
    assert narrow_constant("fpext", 65504.0, f16, f32) == 65504.0
    assert narrow_constant("fpext", 65505.0, f16, f32) is None
    assert narrow_constant("fpext", 1.0 + 2.0**-8, bf16, f32) is None  # 8 bits of mantissa: no
    assert narrow_constant("fpext", 1.0 + 2.0**-7, bf16, f32) == 1.0 + 2.0**-7
    assert narrow_constant("fpext", 0.1, f32, f64) is None  # 0.1 as a double is no float
    assert narrow_constant("sext", -128, i8, i32) == -128 and narrow_constant("sext", 128, i8, i32) is None
    assert narrow_constant("zext", 255, i8, i32) == -1  # the i8 bits 0xff
    assert narrow_constant("zext", -1, i8, i32) is None
    assert narrow_constant("sitofp", -3.0, i8, f32) == -3 and narrow_constant("uitofp", -3.0, i8, f32) is None
    assert narrow_constant("fptrunc", 1.0, f32, f16) is None  # not value-preserving: never


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
