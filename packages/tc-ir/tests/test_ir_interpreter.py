"""The reference interpreter on hand-written IR: the semantics every backend must match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tc_ir.interpreter import (
    Interpreter,
    InterpreterError,
    Memory,
    MisalignedAccessError,
    OutOfBoundsError,
    RawMemory,
    interpret,
)
from tc_ir.interpreter.dtypes import bits_to_bf16, round_bf16
from tc_ir.ir_parser import parse_module
from tc_ir.ops import Function
from tc_ir.testing import round_trip
from tc_ir.verifier import IRVerificationError


def kernel(args: str, body: str) -> Function:
    """A verified kernel from IR text (and a check that its text round-trips)."""
    text = f'module {{\n  tc.func global @k({args}) loc("k.tc":1:1) {{\n{body}\n    tc.return\n  }}\n}}\n'
    m = parse_module(text)
    round_trip(m)
    return m.functions[0]


def elementwise(ty: str, n: int, op_lines: str) -> Function:
    """out[i] = f(a[i], b[i]) for one tile of n elements; op_lines define %r from %a and %b."""
    return kernel(
        f"%pa: ptr<{ty}>, %pb: ptr<{ty}>, %po: ptr<{ty}>",
        f"""
    %i = tc.make_range {{start = 0, end = {n}}} : tile<{n}xi32>
    %sa = tc.splat %pa : tile<{n}xptr<{ty}>>
    %qa = tc.addptr %sa, %i : tile<{n}xptr<{ty}>>
    %sb = tc.splat %pb : tile<{n}xptr<{ty}>>
    %qb = tc.addptr %sb, %i : tile<{n}xptr<{ty}>>
    %so = tc.splat %po : tile<{n}xptr<{ty}>>
    %qo = tc.addptr %so, %i : tile<{n}xptr<{ty}>>
    %a = tc.load %qa : tile<{n}x{ty}>
    %b = tc.load %qb : tile<{n}x{ty}>
{op_lines}
    tc.store %qo, %r""",
    )


def run_binary(ty: str, kind: str, a: Any, b: Any, np_dtype: Any) -> Any:
    a = np.asarray(a, dtype=np_dtype)
    b = np.asarray(b, dtype=np_dtype)
    out = np.zeros_like(a)
    fn = elementwise(ty, a.size, f'    %r = tc.binary %a, %b {{kind = "{kind}"}} : tile<{a.size}x{ty}>')
    interpret(fn, [a, b, out], (1,))
    return out


VECADD = """
    %pid = tc.program_id {axis = 0} : i32 loc("add.tc":2:13)
    %c = tc.constant {value = 128} : i32
    %base = tc.binary %pid, %c {kind = "mul"} : i32
    %r = tc.make_range {start = 0, end = 128} : tile<128xi32>
    %bs = tc.splat %base : tile<128xi32>
    %off = tc.binary %bs, %r {kind = "add"} : tile<128xi32>
    %ns = tc.splat %n : tile<128xi32>
    %m = tc.cmp %off, %ns {predicate = "slt"} : tile<128xi1> loc("add.tc":4:20)
    %sx = tc.splat %x : tile<128xptr<f32>>
    %px = tc.addptr %sx, %off : tile<128xptr<f32>>
    %sy = tc.splat %y : tile<128xptr<f32>>
    %py = tc.addptr %sy, %off : tile<128xptr<f32>>
    %sz = tc.splat %z : tile<128xptr<f32>>
    %pz = tc.addptr %sz, %off : tile<128xptr<f32>>
    %a = tc.load %px, %m : tile<128xf32> loc("add.tc":5:10)
    %b = tc.load %py, %m : tile<128xf32> loc("add.tc":6:10)
    %v = tc.binary %a, %b {kind = "fadd"} : tile<128xf32>
    tc.store %pz, %v, %m loc("add.tc":7:3)"""


@pytest.mark.parametrize("n", [1, 127, 128, 1000, 1025])
def test_vector_add_odd_sizes(n: int) -> None:
    fn = kernel("%x: ptr<f32>, %y: ptr<f32>, %z: ptr<f32>, %n: i32", VECADD)
    rng = np.random.default_rng(n)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    z = np.zeros(n, np.float32)
    interpret(fn, [x, y, z, n], ((n + 127) // 128,))
    np.testing.assert_array_equal(z, x + y)


def test_out_of_bounds_names_line_program_and_element() -> None:
    body = VECADD.replace('%a = tc.load %px, %m', '%a = tc.load %px').replace(
        '%b = tc.load %py, %m', '%b = tc.load %py')
    fn = kernel("%x: ptr<f32>, %y: ptr<f32>, %z: ptr<f32>, %n: i32", body)
    x, y, z = (np.zeros(1000, np.float32) for _ in range(3))
    mem = Memory()
    ax = mem.register(x, "x")
    mem.register(y, "y")
    mem.register(z, "z")
    with pytest.raises(OutOfBoundsError) as info:
        Interpreter(fn)([ax, y, z, 1000], (8,), mem)
    err = info.value
    text = str(err)
    assert "add.tc:5:10" in text and "out-of-bounds load" in text
    assert "program (7,)" in text and "element [104] of the [128] tile" in text
    assert "buffer 'x'" in text and f"0x{ax + 4000:x}" in text
    assert err.program_id == (7,) and err.index == (104,) and err.address == ax + 4000 and err.buffer == "x"


def test_out_of_bounds_store_before_a_buffer_and_source_line() -> None:
    fn = kernel("%x: ptr<f32>", """
    %c = tc.constant {value = -2} : i32
    %p = tc.addptr %x, %c : ptr<f32>
    %v = tc.constant {value = 1.0} : f32
    tc.store %p, %v loc("s.tc":2:5)""")
    x = np.zeros(4, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        interpret(fn, [x], 1, source="void k(float* x) {\n    *(x - 2) = 1.0;\n}\n")
    text = str(info.value)
    assert "s.tc:2:5 (`*(x - 2) = 1.0;`)" in text and "8 byte(s) before the start of buffer" in text
    assert "the scalar access" in text


def test_out_of_bounds_access_of_an_empty_buffer_names_it() -> None:
    # an array of no elements is not addressable; reading it was reported against whichever
    # buffer lay nearest, as if that one had been overrun
    fn = kernel("%e: ptr<f32>, %y: ptr<f32>", """
    %c = tc.constant {value = 1} : i32
    %p = tc.addptr %e, %c : ptr<f32>
    %v = tc.load %p : f32
    tc.store %y, %v""")
    empty, y = np.zeros(0, np.float32), np.zeros(4, np.float32)
    memory = Memory()
    memory.register(empty, "e")
    memory.register(y, "y")
    with pytest.raises(OutOfBoundsError) as info:
        interpret(fn, [empty, y], 1, memory)
    text = str(info.value)
    assert "byte offset 4 (element 1) of buffer 'e', which is empty (0 elements)" in text and "'y'" not in text
    assert info.value.buffer == "e"


def test_masked_off_lanes_never_touch_memory_and_take_other() -> None:
    fn = kernel("%x: ptr<i32>, %y: ptr<i32>", """
    %r = tc.make_range {start = 0, end = 8} : tile<8xi32>
    %c = tc.constant {value = 100000} : tile<8xi32>
    %two = tc.constant {value = 2} : tile<8xi32>
    %rem = tc.binary %r, %two {kind = "srem"} : tile<8xi32>
    %zero = tc.constant {value = 0} : tile<8xi32>
    %m = tc.cmp %rem, %zero {predicate = "eq"} : tile<8xi1>
    %far = tc.select %m, %r, %c : tile<8xi32>
    %sx = tc.splat %x : tile<8xptr<i32>>
    %px = tc.addptr %sx, %far : tile<8xptr<i32>>
    %other = tc.constant {value = -7} : tile<8xi32>
    %v = tc.load %px, %m, %other : tile<8xi32>
    %sy = tc.splat %y : tile<8xptr<i32>>
    %py = tc.addptr %sy, %far : tile<8xptr<i32>>
    tc.store %py, %v, %m""")
    x = np.arange(10, 18, dtype=np.int32)
    y = np.full(8, 99, np.int32)
    interpret(fn, [x, y], 1)
    np.testing.assert_array_equal(y, [10, 99, 12, 99, 14, 99, 16, 99])


def test_signed_division_truncates_like_c() -> None:
    a = [7, -7, 7, -7, -2**31, 5, -5, 0]
    b = [2, 2, -2, -2, -1, 0, 0, 3]
    assert run_binary("i32", "sdiv", a, b, np.int32).tolist() == [3, -3, -3, 3, -2**31, -1, -1, 0]
    assert run_binary("i32", "srem", a, b, np.int32).tolist() == [1, -1, 1, -1, 0, 5, -5, 0]


def test_unsigned_division_uses_unsigned_bits() -> None:
    a = [-1, -8, 7, 5]
    b = [2, 3, -1, 0]
    q = run_binary("i32", "udiv", a, b, np.int32)
    assert q.view(np.uint32).tolist() == [0x7FFFFFFF, (2**32 - 8) // 3, 0, 0xFFFFFFFF]
    r = run_binary("i32", "urem", a, b, np.int32)
    assert r.view(np.uint32).tolist() == [1, (2**32 - 8) % 3, 7, 5]
    assert run_binary("i8", "udiv", [-1], [16], np.int8).tolist() == [15]


def test_shifts_on_negative_values_and_large_amounts() -> None:
    a = [-16, -16, -16, 1, -1, 3]
    s = [2, 31, 32, 40, -1, 0]
    assert run_binary("i32", "ashr", a, s, np.int32).tolist() == [-4, -1, -1, 0, -1, 3]
    lshr = run_binary("i32", "lshr", a, s, np.int32).view(np.uint32).tolist()
    assert lshr == [(2**32 - 16) >> 2, 1, 0, 0, 0, 3]
    assert run_binary("i32", "shl", a, s, np.int32).tolist() == [-64, 0, 0, 0, 0, 3]
    assert run_binary("i8", "shl", [1, 1], [7, 8], np.int8).tolist() == [-128, 0]


def test_integer_arithmetic_wraps() -> None:
    big = 2**31 - 1
    assert run_binary("i32", "add", [big], [1], np.int32).tolist() == [-(2**31)]
    assert run_binary("i32", "mul", [65536], [65536], np.int32).tolist() == [0]
    assert run_binary("i8", "sub", [-128], [1], np.int8).tolist() == [127]
    assert run_binary("i32", "umax", [-1], [5], np.int32).tolist() == [-1]
    assert run_binary("i32", "smax", [-1], [5], np.int32).tolist() == [5]
    assert run_binary("i32", "umin", [-1], [5], np.int32).tolist() == [5]


def test_half_rounds_after_each_op() -> None:
    a = np.array([2048, 1, 0.1, 65504], np.float16)
    b = np.array([1, 2**-11, 0.2, 65504], np.float16)
    out = run_binary("f16", "fadd", a, b, np.float16)
    assert out.tolist() == [2048.0, 1.0, float(np.float16(np.float16(0.1) + np.float16(0.2))), float("inf")]
    fn = elementwise("f16", 2, """
    %t = tc.binary %a, %b {kind = "fmul"} : tile<2xf16>
    %r = tc.binary %t, %b {kind = "fdiv"} : tile<2xf16>""")
    a2, b2, o2 = np.array([300.0, 1.0], np.float16), np.array([300.0, 3.0], np.float16), np.zeros(2, np.float16)
    interpret(fn, [a2, b2, o2], 1)
    assert o2.tolist() == [float("inf"), float(np.float16(np.float16(3.0) / np.float16(3.0)))]


def test_bf16_rounds_to_nearest_even_and_is_stored_as_bits() -> None:
    def bits(x: list[float]) -> Any:
        return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)

    one = 1.0
    a = bits([one, one + 2**-7, 3.0, one])
    b = bits([2**-8, 2**-8, 2**-9 * 0, -one])
    out = np.zeros(4, np.uint16)
    fn = elementwise("bf16", 4, '    %r = tc.binary %a, %b {kind = "fadd"} : tile<4xbf16>')
    interpret(fn, [a, b, out], 1)
    # 1 + 2^-8 is a tie: to even (1.0); 1 + 2^-7 + 2^-8 is a tie: to even (1 + 2^-6)
    assert bits_to_bf16(out).tolist() == [1.0, 1.0 + 2**-6, 3.0, 0.0]
    assert float(round_bf16(np.float32(1.0 + 2**-8 + 2**-20))) == 1.0 + 2**-7


def test_float_compare_with_nan() -> None:
    nan = float("nan")
    fn = elementwise("f32", 4, """
    %c1 = tc.cmp %a, %b {predicate = "olt"} : tile<4xi1>
    %c2 = tc.cmp %a, %b {predicate = "une"} : tile<4xi1>
    %one = tc.constant {value = 1.0} : tile<4xf32>
    %two = tc.constant {value = 2.0} : tile<4xf32>
    %zero = tc.constant {value = 0.0} : tile<4xf32>
    %s1 = tc.select %c1, %one, %zero : tile<4xf32>
    %s2 = tc.select %c2, %two, %zero : tile<4xf32>
    %r = tc.binary %s1, %s2 {kind = "fadd"} : tile<4xf32>""")
    a = np.array([1, nan, 2, 1], np.float32)
    b = np.array([2, 1, 2, nan], np.float32)
    out = np.zeros(4, np.float32)
    interpret(fn, [a, b, out], 1)
    assert out.tolist() == [3.0, 2.0, 0.0, 2.0]


def test_casts_saturate_truncate_and_extend() -> None:
    fn = kernel("%pa: ptr<f32>, %po: ptr<i32>, %pu: ptr<i8>, %pq: ptr<i64>", """
    %i = tc.make_range {start = 0, end = 6} : tile<6xi32>
    %sa = tc.splat %pa : tile<6xptr<f32>>
    %qa = tc.addptr %sa, %i : tile<6xptr<f32>>
    %a = tc.load %qa : tile<6xf32>
    %s = tc.cast %a {kind = "fptosi"} : tile<6xi32>
    %so = tc.splat %po : tile<6xptr<i32>>
    %qo = tc.addptr %so, %i : tile<6xptr<i32>>
    tc.store %qo, %s
    %u = tc.cast %a {kind = "fptoui"} : tile<6xi8>
    %su = tc.splat %pu : tile<6xptr<i8>>
    %qu = tc.addptr %su, %i : tile<6xptr<i8>>
    tc.store %qu, %u
    %w = tc.cast %u {kind = "zext"} : tile<6xi64>
    %sx = tc.cast %u {kind = "sext"} : tile<6xi64>
    %d = tc.binary %w, %sx {kind = "sub"} : tile<6xi64>
    %sq = tc.splat %pq : tile<6xptr<i64>>
    %qq = tc.addptr %sq, %i : tile<6xptr<i64>>
    tc.store %qq, %d""")
    a = np.array([2.9, -2.9, 1e10, -1e10, np.nan, 200.5], np.float32)
    o, u, q = np.zeros(6, np.int32), np.zeros(6, np.int8), np.zeros(6, np.int64)
    interpret(fn, [a, o, u, q], 1)
    assert o.tolist() == [2, -2, 2**31 - 1, -(2**31), 0, 200]
    assert u.view(np.uint8).tolist() == [2, 0, 255, 0, 0, 200]
    assert q.tolist() == [0, 0, 256, 0, 0, 256]


def test_bool_casts_and_trunc() -> None:
    fn = kernel("%po: ptr<i32>", """
    %t = tc.constant {value = true} : i1
    %s = tc.cast %t {kind = "sext"} : i32
    %z = tc.cast %t {kind = "zext"} : i32
    %sum = tc.binary %s, %z {kind = "add"} : i32
    %big = tc.constant {value = 300} : i32
    %tr = tc.cast %big {kind = "trunc"} : i8
    %back = tc.cast %tr {kind = "sext"} : i32
    %r = tc.binary %sum, %back {kind = "add"} : i32
    tc.store %po, %r""")
    o = np.zeros(1, np.int32)
    interpret(fn, [o], 1)
    assert o[0] == -1 + 1 + 44


def _reduce_kernel(kind: str, axis: int, ty: str, shape: tuple[int, int, int]) -> Function:
    d0, d1, d2 = shape
    out_shape = [d for i, d in enumerate(shape) if i != axis]
    o = "x".join(map(str, out_shape))
    return kernel(f"%pa: ptr<{ty}>, %po: ptr<{ty}>", f"""
    %i0 = tc.make_range {{start = 0, end = {d0}}} : tile<{d0}xi32>
    %i1 = tc.make_range {{start = 0, end = {d1}}} : tile<{d1}xi32>
    %i2 = tc.make_range {{start = 0, end = {d2}}} : tile<{d2}xi32>
    %e0a = tc.expand_dims %i0 {{axis = 1}} : tile<{d0}x1xi32>
    %e0 = tc.expand_dims %e0a {{axis = 2}} : tile<{d0}x1x1xi32>
    %e1a = tc.expand_dims %i1 {{axis = 0}} : tile<1x{d1}xi32>
    %e1 = tc.expand_dims %e1a {{axis = 2}} : tile<1x{d1}x1xi32>
    %e2a = tc.expand_dims %i2 {{axis = 0}} : tile<1x{d2}xi32>
    %e2 = tc.expand_dims %e2a {{axis = 0}} : tile<1x1x{d2}xi32>
    %b0 = tc.broadcast %e0 : tile<{d0}x{d1}x{d2}xi32>
    %b1 = tc.broadcast %e1 : tile<{d0}x{d1}x{d2}xi32>
    %b2 = tc.broadcast %e2 : tile<{d0}x{d1}x{d2}xi32>
    %s0 = tc.constant {{value = {d1 * d2}}} : tile<{d0}x{d1}x{d2}xi32>
    %s1 = tc.constant {{value = {d2}}} : tile<{d0}x{d1}x{d2}xi32>
    %t0 = tc.binary %b0, %s0 {{kind = "mul"}} : tile<{d0}x{d1}x{d2}xi32>
    %t1 = tc.binary %b1, %s1 {{kind = "mul"}} : tile<{d0}x{d1}x{d2}xi32>
    %t01 = tc.binary %t0, %t1 {{kind = "add"}} : tile<{d0}x{d1}x{d2}xi32>
    %off = tc.binary %t01, %b2 {{kind = "add"}} : tile<{d0}x{d1}x{d2}xi32>
    %sa = tc.splat %pa : tile<{d0}x{d1}x{d2}xptr<{ty}>>
    %qa = tc.addptr %sa, %off : tile<{d0}x{d1}x{d2}xptr<{ty}>>
    %a = tc.load %qa : tile<{d0}x{d1}x{d2}x{ty}>
    %red = tc.reduce %a {{kind = "{kind}", axis = {axis}}} : tile<{o}x{ty}>
    %flat = tc.reshape %red : tile<{out_shape[0] * out_shape[1]}x{ty}>
    %j = tc.make_range {{start = 0, end = {out_shape[0] * out_shape[1]}}} : tile<{out_shape[0] * out_shape[1]}xi32>
    %so = tc.splat %po : tile<{out_shape[0] * out_shape[1]}xptr<{ty}>>
    %qo = tc.addptr %so, %j : tile<{out_shape[0] * out_shape[1]}xptr<{ty}>>
    tc.store %qo, %flat""")


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize(
    ("kind", "ty", "ref"),
    [
        ("add", "i32", lambda a, ax: a.sum(axis=ax, dtype=np.int32)),
        ("smax", "i32", lambda a, ax: a.max(axis=ax)),
        ("umin", "i32", lambda a, ax: a.view(np.uint32).min(axis=ax).view(np.int32)),
        ("fadd", "f32", lambda a, ax: a.sum(axis=ax)),
        ("fmax", "f32", lambda a, ax: np.fmax.reduce(a, axis=ax)),
        ("fmin", "f32", lambda a, ax: np.fmin.reduce(a, axis=ax)),
    ],
)
def test_reductions_along_each_axis_of_a_3d_tile(kind: str, ty: str, ref: Any, axis: int) -> None:
    shape = (2, 4, 8)
    rng = np.random.default_rng(axis)
    if ty == "i32":
        a = rng.integers(-2**31, 2**31, size=shape, dtype=np.int64).astype(np.int32)
    else:
        a = rng.standard_normal(shape).astype(np.float32)
        a[0, 0, 0] = np.nan  # fmax/fmin skip NaN
    expect = ref(a, axis).reshape(-1)
    out = np.zeros(expect.size, a.dtype)
    interpret(_reduce_kernel(kind, axis, ty, shape), [a, out], 1)
    if ty == "i32":
        np.testing.assert_array_equal(out, expect)
    else:
        np.testing.assert_allclose(out, expect, rtol=1e-6, equal_nan=True)


def _tile_pointers(name: str, rows: int, cols: int, t: str) -> str:
    """IR text defining %{name}p: the pointers to a row-major rows x cols matrix at argument %{name}."""
    return f"""
    %{name}r = tc.make_range {{start = 0, end = {rows}}} : tile<{rows}xi32>
    %{name}c = tc.make_range {{start = 0, end = {cols}}} : tile<{cols}xi32>
    %{name}re = tc.expand_dims %{name}r {{axis = 1}} : tile<{rows}x1xi32>
    %{name}ce = tc.expand_dims %{name}c {{axis = 0}} : tile<1x{cols}xi32>
    %{name}rb = tc.broadcast %{name}re : tile<{rows}x{cols}xi32>
    %{name}cb = tc.broadcast %{name}ce : tile<{rows}x{cols}xi32>
    %{name}ld = tc.constant {{value = {cols}}} : tile<{rows}x{cols}xi32>
    %{name}rm = tc.binary %{name}rb, %{name}ld {{kind = "mul"}} : tile<{rows}x{cols}xi32>
    %{name}off = tc.binary %{name}rm, %{name}cb {{kind = "add"}} : tile<{rows}x{cols}xi32>
    %{name}s = tc.splat %{name} : tile<{rows}x{cols}xptr<{t}>>
    %{name}p = tc.addptr %{name}s, %{name}off : tile<{rows}x{cols}xptr<{t}>>"""


def _dot_kernel(m: int, k: int, n: int, ty: str, precision: str = "ieee") -> Function:
    return kernel(f"%a: ptr<{ty}>, %b: ptr<{ty}>, %c: ptr<f32>", f"""
{_tile_pointers("a", m, k, ty)}
{_tile_pointers("b", k, n, ty)}
{_tile_pointers("c", m, n, "f32")}
    %x = tc.load %ap : tile<{m}x{k}x{ty}>
    %y = tc.load %bp : tile<{k}x{n}x{ty}>
    %acc = tc.load %cp : tile<{m}x{n}xf32>
    %d = tc.dot %x, %y, %acc {{precision = "{precision}"}} : tile<{m}x{n}xf32>
    tc.store %cp, %d""")


def test_dot_f16_accumulates_in_f32() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 32)).astype(np.float16)
    b = rng.standard_normal((32, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    expect = a.astype(np.float64) @ b.astype(np.float64) + c
    interpret(_dot_kernel(16, 32, 8, "f16"), [a, b, c], 1)
    np.testing.assert_allclose(c, expect, rtol=1e-5, atol=1e-5)


def test_dot_tf32_rounds_inputs() -> None:
    a = np.full((16, 16), 1.0 + 2**-12, np.float32)  # below tf32 precision: rounds to 1.0
    b = np.eye(16, dtype=np.float32)
    c = np.zeros((16, 16), np.float32)
    interpret(_dot_kernel(16, 16, 16, "f32", "tf32"), [a, b, c], 1)
    assert np.all(c == 1.0)
    c[:] = 0
    interpret(_dot_kernel(16, 16, 16, "f32", "ieee"), [a, b, c], 1)
    assert np.all(c == np.float32(1.0 + 2**-12))


def test_undefined_accumulator_unread_by_the_first_dot_and_zeroed_by_the_wait() -> None:
    # the form tc_opt.accumulator_init gives a loop: the accumulator starts undefined (NaN here),
    # the first dot does not read it (iv != lb), and the final wait gives zeros unless lb < ub
    pointers = "".join(_tile_pointers(name, 4, 4, "f32") for name in "abc")
    fn = kernel("%a: ptr<f32>, %b: ptr<f32>, %c: ptr<f32>, %n: i32", pointers + """
    %x = tc.load %ap : tile<4x4xf32>
    %y = tc.load %bp : tile<4x4xf32>
    %c0 = tc.constant {value = 0} : i32
    %c1 = tc.constant {value = 1} : i32
    %u = tc.undef : tile<4x4xf32>
    %acc = tc.for %c0, %n, %c1, %u : tile<4x4xf32> ({
    ^(%k: i32, %sum: tile<4x4xf32>):
      %later = tc.cmp %k, %c0 {predicate = "ne"} : i1
      %d = tc.dot %x, %y, %sum, %later {precision = "ieee", asynchronous = true} : tile<4x4xf32>
      tc.yield %d
    })
    %ran = tc.cmp %c0, %n {predicate = "slt"} : i1
    %done = tc.dot_wait %acc, %ran : tile<4x4xf32>
    tc.store %cp, %done""")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    b = rng.standard_normal((4, 4)).astype(np.float32)
    for n, times in ((3, 3), (1, 1), (0, 0), (-2, 0)):
        c = np.full((4, 4), 7.0, np.float32)
        interpret(fn, [a, b, c, n], 1)
        np.testing.assert_allclose(c, times * (a.astype(np.float64) @ b), rtol=1e-5, atol=1e-5)
        assert not np.isnan(c).any()


def test_for_loop_with_loop_carried_values() -> None:
    fn = kernel("%po: ptr<i32>, %n: i32", """
    %c0 = tc.constant {value = 0} : i32
    %c3 = tc.constant {value = 3} : i32
    %one = tc.constant {value = 1} : i32
    %s, %cnt = tc.for %c0, %n, %c3, %c0, %c0 : i32, i32 ({
    ^(%k: i32, %acc: i32, %count: i32):
      %a = tc.binary %acc, %k {kind = "add"} : i32
      %c = tc.binary %count, %one {kind = "add"} : i32
      tc.yield %a, %c
    })
    %r = tc.binary %s, %cnt {kind = "mul"} : i32
    tc.store %po, %r""")
    o = np.zeros(1, np.int32)
    interpret(fn, [o, 10], 1)
    assert o[0] == (0 + 3 + 6 + 9) * 4
    interpret(fn, [o, -5], 1)  # no iteration: the inits
    assert o[0] == 0


def test_while_and_if() -> None:
    # Collatz steps of n, with the step chosen by an if with results.
    fn = kernel("%po: ptr<i32>, %n: i32", """
    %c0 = tc.constant {value = 0} : i32
    %one = tc.constant {value = 1} : i32
    %two = tc.constant {value = 2} : i32
    %three = tc.constant {value = 3} : i32
    %x, %steps = tc.while %n, %c0 : i32, i32 ({
    ^(%v: i32, %s: i32):
      %go = tc.cmp %v, %one {predicate = "ne"} : i1
      tc.condition %go, %v, %s
    }, {
    ^(%v2: i32, %s2: i32):
      %r = tc.binary %v2, %two {kind = "srem"} : i32
      %even = tc.cmp %r, %c0 {predicate = "eq"} : i1
      %next = tc.if %even : i32 ({
        %h = tc.binary %v2, %two {kind = "sdiv"} : i32
        tc.yield %h
      }, {
        %t = tc.binary %v2, %three {kind = "mul"} : i32
        %t1 = tc.binary %t, %one {kind = "add"} : i32
        tc.yield %t1
      })
      %s3 = tc.binary %s2, %one {kind = "add"} : i32
      tc.yield %next, %s3
    })
    tc.store %po, %steps""")
    o = np.zeros(1, np.int32)
    interpret(fn, [o, 27], 1)
    assert o[0] == 111


def test_grid_2d_program_ids_and_num_programs() -> None:
    fn = kernel("%po: ptr<i32>", """
    %x = tc.program_id {axis = 0} : i32
    %y = tc.program_id {axis = 1} : i32
    %nx = tc.num_programs {axis = 0} : i32
    %row = tc.binary %y, %nx {kind = "mul"} : i32
    %i = tc.binary %row, %x {kind = "add"} : i32
    %p = tc.addptr %po, %i : ptr<i32>
    %ten = tc.constant {value = 10} : i32
    %v = tc.binary %y, %ten {kind = "mul"} : i32
    %w = tc.binary %v, %x {kind = "add"} : i32
    tc.store %p, %w""")
    o = np.zeros(12, np.int32)
    interpret(fn, [o], (4, 3))
    assert o.reshape(3, 4).tolist() == [[10 * y + x for x in range(4)] for y in range(3)]
    interpret(fn, [o], (4, 3, 1))
    with pytest.raises(InterpreterError, match="1 to 3 dimensions"):
        interpret(fn, [o], (1, 1, 1, 1))


ATOMIC = """
    %pid = tc.program_id {axis = 0} : i32
    %r = tc.make_range {start = 0, end = 4} : tile<4xi32>
    %sc = tc.splat %cnt : tile<4xptr<i32>>
    %one = tc.constant {value = 1} : tile<4xi32>
    %two = tc.constant {value = 2} : tile<4xi32>
    %rem = tc.binary %r, %two {kind = "srem"} : tile<4xi32>
    %z = tc.constant {value = 0} : tile<4xi32>
    %m = tc.cmp %rem, %z {predicate = "eq"} : tile<4xi1>
    %old = tc.atomic_rmw %sc, %one, %m {kind = "add"} : tile<4xi32>
    %c4 = tc.constant {value = 4} : i32
    %base = tc.binary %pid, %c4 {kind = "mul"} : i32
    %bs = tc.splat %base : tile<4xi32>
    %off = tc.binary %bs, %r {kind = "add"} : tile<4xi32>
    %so = tc.splat %out : tile<4xptr<i32>>
    %po = tc.addptr %so, %off : tile<4xptr<i32>>
    tc.store %po, %old"""


def test_atomic_add_with_mask_returns_old_values_in_order() -> None:
    fn = kernel("%cnt: ptr<i32>, %out: ptr<i32>", ATOMIC)
    cnt = np.zeros(1, np.int32)
    out = np.full(4 * 5, -1, np.int32)
    interpret(fn, [cnt, out], 5)
    assert cnt[0] == 10
    olds = out.reshape(5, 4)
    assert olds[:, 0].tolist() == [0, 2, 4, 6, 8] and olds[:, 2].tolist() == [1, 3, 5, 7, 9]
    assert np.all(olds[:, 1::2] == 0)  # masked-off lanes


def test_atomic_fmax_xchg_and_cas() -> None:
    fn = kernel("%p: ptr<f32>, %q: ptr<i32>, %o: ptr<i32>", """
    %v = tc.constant {value = 5.0} : f32
    %a = tc.atomic_rmw %p, %v {kind = "fmax"} : f32
    %c1 = tc.constant {value = 1} : i32
    %c7 = tc.constant {value = 7} : i32
    %old1 = tc.atomic_cas %q, %c1, %c7 : i32
    %old2 = tc.atomic_rmw %q, %c1 {kind = "xchg"} : i32
    %s = tc.binary %old1, %old2 {kind = "add"} : i32
    tc.store %o, %s""")
    p, q, o = np.array([3.0], np.float32), np.array([1], np.int32), np.zeros(1, np.int32)
    interpret(fn, [p, q, o], 1)
    assert p[0] == 5.0 and q[0] == 1 and o[0] == 1 + 7


def test_math_functions_in_f32_and_f16() -> None:
    fn = elementwise("f16", 4, """
    %e = tc.unary %a {kind = "exp", approx = true} : tile<4xf16>
    %l = tc.unary %b {kind = "log"} : tile<4xf16>
    %r = tc.binary %e, %l {kind = "fadd"} : tile<4xf16>""")
    a = np.array([0.0, 1.0, -1.0, 2.0], np.float16)
    b = np.array([1.0, 2.0, 3.0, 4.0], np.float16)
    out = np.zeros(4, np.float16)
    interpret(fn, [a, b, out], 1)
    e = np.exp(a.astype(np.float32)).astype(np.float16)
    lg = np.log(b.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(out, e + lg)


def test_fma_rounds_once() -> None:
    fn = kernel("%po: ptr<f32>", """
    %a = tc.constant {value = 1.0000001192092896} : f32
    %c = tc.constant {value = -1.0000002384185791} : f32
    %r = tc.fma %a, %a, %c : f32
    tc.store %po, %r""")
    o = np.zeros(1, np.float32)
    interpret(fn, [o], 1)
    assert o[0] == np.float32(2.0**-46)  # (1+e)^2 - (1+2e) = e^2, lost without fma


def test_memory_raw_addresses_and_registered_ranges() -> None:
    fn = kernel("%x: ptr<f32>, %y: ptr<f32>", """
    %v = tc.load %x : f32
    %two = tc.constant {value = 2.0} : f32
    %w = tc.binary %v, %two {kind = "fmul"} : f32
    tc.store %y, %w""")
    x = np.array([21.0], np.float32)
    y = np.zeros(1, np.float32)
    # raw addresses without registration: refused, then allowed explicitly
    with pytest.raises(OutOfBoundsError, match="no buffer is registered"):
        interpret(fn, [x.ctypes.data, y.ctypes.data], 1)
    interpret(fn, [x.ctypes.data, y.ctypes.data], 1, allow_raw=True)
    assert y[0] == 42.0
    # a registered (address, nbytes) range, as the runtime does for CPU tensors
    y[0] = 0
    mem = Memory()
    mem.register_address(x.ctypes.data, 4, "x", owner=x)
    mem.register_address(y.ctypes.data, 4, "y", owner=y)
    interpret(fn, [x.ctypes.data, y.ctypes.data], 1, mem)
    assert y[0] == 42.0


def test_overlapping_registrations_merge() -> None:
    base = np.arange(8, dtype=np.float32)
    mem = Memory()
    mem.register(base[:4], "lo")
    mem.register(base[2:], "hi")
    assert len(mem.buffers) == 1 and mem.buffers[0].nbytes == 32
    mem.register(base[1:3], "mid")
    assert len(mem.buffers) == 1


def test_misaligned_access_is_an_error() -> None:
    fn = kernel("%x: ptr<i32>", """
    %v = tc.load %x : i32
    tc.store %x, %v""")
    buf = np.zeros(8, np.uint8)
    with pytest.raises(MisalignedAccessError, match="not a multiple of the 4-byte"):
        Interpreter(fn)([buf.ctypes.data + 1], 1, _registered(buf))


def _registered(a: Any) -> Memory:
    mem = Memory()
    mem.register(a)
    return mem


def test_bad_arguments() -> None:
    fn = kernel("%x: ptr<f32>, %n: i32", "")
    with pytest.raises(InterpreterError, match="takes 2 arguments, got 1"):
        interpret(fn, [np.zeros(1, np.float32)], 1)
    with pytest.raises(InterpreterError, match="argument x of k is a pointer"):
        interpret(fn, ["nope", 1], 1)
    with pytest.raises(InterpreterError, match="argument n of k is i32: pass an integer"):
        interpret(fn, [np.zeros(1, np.float32), 1.5], 1)


def test_malformed_ir_is_refused_before_running() -> None:
    m = parse_module(
        "module {\n  tc.func global @k(%x: ptr<f32>) {\n"
        '    %v = tc.binary %x, %x {kind = "fadd"} : ptr<f32>\n    tc.return\n  }\n}\n'
    )
    with pytest.raises(IRVerificationError, match="float op 'fadd' on ptr<f32>"):
        interpret(m, [np.zeros(1, np.float32)], 1)


def test_scalar_int_arguments_wrap_to_their_width() -> None:
    fn = kernel("%po: ptr<i32>, %n: i32", "    tc.store %po, %n")
    o = np.zeros(1, np.int32)
    interpret(fn, [o, 2**32 + 5], 1)
    assert o[0] == 5


def test_register_refuses_non_contiguous_arrays_and_raw_memory_reads_anywhere() -> None:
    mem = Memory()
    with pytest.raises(ValueError, match="contiguous"):
        mem.register(np.zeros((4, 4), np.float32)[:, 1])
    fn = kernel("%x: ptr<i64>, %y: ptr<i64>", """
    %v = tc.load %x : i64
    tc.store %y, %v""")
    x, y = np.array([2**40 + 3], np.int64), np.zeros(1, np.int64)
    Interpreter(fn)([x.ctypes.data, y.ctypes.data], 1, RawMemory())
    assert y[0] == 2**40 + 3


def test_grid_3d() -> None:
    fn = kernel("%po: ptr<i32>", """
    %z = tc.program_id {axis = 2} : i32
    %nz = tc.num_programs {axis = 2} : i32
    %w = tc.binary %z, %nz {kind = "mul"} : i32
    %p = tc.addptr %po, %z : ptr<i32>
    %old = tc.atomic_rmw %p, %w {kind = "add"} : i32""")
    o = np.zeros(3, np.int32)
    interpret(fn, [o], (2, 2, 3))
    assert o.tolist() == [0, 4 * 3, 4 * 6]


def test_host_maps_read_the_mappings_and_their_permissions(tmp_path: Path) -> None:
    from tc_ir.interpreter.host_maps import PAGE, HostMaps

    maps = tmp_path / "maps"
    maps.write_text(f"{0x10 * PAGE:x}-{0x12 * PAGE:x} r-xp 00000000 00:00 0 /lib/code.so\n"
                    f"{0x20 * PAGE:x}-{0x30 * PAGE:x} rw-p 00000000 00:00 0 [heap]\n")
    m = HostMaps(str(maps))
    at = np.array([0x20 * PAGE, 0x2F * PAGE + PAGE - 4], dtype=np.int64)
    assert m.first_unmapped(at, 4, write=True) is None
    assert m.first_unmapped(np.array([0x11 * PAGE], dtype=np.int64), 4, write=False) is None
    assert m.first_unmapped(np.array([0x20 * PAGE, 0x11 * PAGE], dtype=np.int64), 4, write=True) == 1
    # an access that runs past the end of a mapping, and one between mappings
    assert m.first_unmapped(np.array([0x30 * PAGE - 2], dtype=np.int64), 4, write=False) == 0
    assert m.first_unmapped(np.array([0x20 * PAGE, 0x18 * PAGE], dtype=np.int64), 4, write=False) == 1
    # memory mapped since the last reading is found by reading the maps again
    maps.write_text(maps.read_text() + f"{0x40 * PAGE:x}-{0x41 * PAGE:x} rw-p 0 00:00 0\n")
    assert m.first_unmapped(np.array([0x40 * PAGE], dtype=np.int64), 8, write=True) is None
    assert HostMaps(str(tmp_path / "none")).first_unmapped(at, 4, write=True) is None
