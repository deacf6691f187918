"""Each language construct lowered: the ops chosen (signedness, reductions, permutations, casts,
control flow) and, through the reference interpreter, the values computed."""

from __future__ import annotations

import numpy as np
import pytest
import tc_lang

from tc_ir import ops as O
from tc_ir.interpreter import interpret
from tc_ir.testing import lower_source
from tc_ir.types import F32, TileType


def lower_src(src: str, **defines: object) -> O.Module:
    """Lowered, verified and round-tripped through the IR text."""
    return lower_source(src, defines)


def ops(m: O.Module, cls: type[O.Operation]) -> list[O.Operation]:
    return [op for op in m.walk() if isinstance(op, cls)]


def kinds(m: O.Module, cls: type[O.Operation], attr: str = "kind") -> list[str]:
    return [getattr(op, attr) for op in ops(m, cls)]


SIGNED = """
__global__ void k(int* o, unsigned* u, float* f, int a, unsigned b) {
  *o = a / 3;        *(o + 1) = a >> 1;   *(o + 2) = a % 4;
  *u = b >> 1;       *(u + 1) = b / 3;    *(u + 2) = b % 4;
  *f = a;            *(f + 1) = b;
  *(o + 3) = a < 7;  *(u + 3) = b < 7u;
}
"""


def test_signedness_picks_the_operation() -> None:
    m = lower_src(SIGNED)
    bk = kinds(m, O.BinaryOp)
    for k in ("sdiv", "ashr", "srem", "lshr", "udiv", "urem"):
        assert k in bk
    assert {"sitofp", "uitofp"} <= set(kinds(m, O.CastOp))
    assert {"slt", "ult"} <= set(kinds(m, O.CmpOp, "predicate"))
    o = np.zeros(4, np.int32)
    u = np.zeros(4, np.uint32)
    f = np.zeros(2, np.float32)
    interpret(m, [o, u, f, -7, 0xFFFFFFF0], 1)
    assert list(o) == [-2, -4, -3, 1]
    assert list(u) == [0x7FFFFFF8, 0xFFFFFFF0 // 3, 0, 0]
    assert list(f) == [-7.0, np.float32(0xFFFFFFF0)]


def test_narrow_conversions() -> None:
    m = lower_src("""
__global__ void k(char* c, uint8* b, int* o, float* f) {
  *o = *c; *(o + 1) = *b; *f = (float) *b; *(c + 1) = *(o + 2); *(o + 3) = (int) *(f + 1);
}""")
    assert {"sext", "zext", "trunc", "uitofp", "fptosi"} <= set(kinds(m, O.CastOp))
    c = np.array([-3, 0], np.int8)
    b = np.array([250], np.uint8)
    o = np.array([0, 0, 300, 0], np.int32)
    f = np.array([0.0, -2.75], np.float32)
    interpret(m, [c, b, o, f], 1)
    assert list(o) == [-3, 250, 300, -2] and c[1] == 44 and f[0] == 250.0


LOOPS = """
__global__ void k(int* o, int n) {
  int s = 0; int i = 0;
  while (i < n) { i++; if (i == 3) continue; if (i > 8) break; s += i; }
  *o = s;
  int j = 0;
  do { j += 2; } while (j < n);
  *(o + 1) = j;
  for (int q = 10; q >= 0; q -= 3) { s = s + q; }
  *(o + 2) = s;
  for (int q = 0; q < n; q++) { if (q == 2) continue; s -= 1; }
  *(o + 3) = s;
  int t = 0;
  for (int q = 0; q <= n; q += 2) t += q;
  *(o + 4) = t;
  for (int q = 0; q != 4; q++) t += 1;
  *(o + 5) = t;
}
"""


def _loops_reference(n: int) -> list[int]:
    s = i = 0
    while i < n:
        i += 1
        if i == 3:
            continue
        if i > 8:
            break
        s += i
    out = [s]
    j = 2
    while j < n:
        j += 2
    out.append(j)
    s += sum(range(10, -1, -3))
    out.append(s)
    s -= sum(1 for q in range(n) if q != 2)
    out.append(s)
    t = sum(range(0, n + 1, 2))
    out += [t, t + 4]
    return out


@pytest.mark.parametrize("n", [0, 1, 5, 10])
def test_loops_break_continue(n: int) -> None:
    m = lower_src(LOOPS)
    # the counted loops are tc.for; while, do-while, the loop with break and `!=` are tc.while
    assert len(ops(m, O.ForOp)) == 3
    assert len(ops(m, O.WhileOp)) == 3
    o = np.zeros(6, np.int32)
    interpret(m, [o, n], 1)
    assert list(o) == _loops_reference(n)


def test_loop_carried_values_are_iter_args() -> None:
    m = lower_src("""
__global__ void k(float* p, int n) {
  float acc[16] = 0;
  float* q[16] = p + 0 ... 16;
  for (int i = 0; i < n; i++) { acc += *q; q += 16; }
  *(p + 0 ... 16) = acc;
}""")
    (loop,) = ops(m, O.ForOp)
    assert isinstance(loop, O.ForOp)
    assert [str(a.type) for a in loop.body.args] == ["i32", "tile<16xf32>", "tile<16xptr<f32>>"]
    p = np.arange(48, dtype=np.float32)
    interpret(m, [p, 3], 1)
    np.testing.assert_array_equal(p[:16], np.arange(16) * 3 + 16 * 3.0)


def test_return_in_kernel_and_nested_loops() -> None:
    m = lower_src("""
__global__ void k(int* o, int n) {
  for (int i = 0; i < 4; i++) {
    int j = 0;
    while (1) { j++; if (j > i) break; }
    *(o + i) = j;
    if (i == n) return;
  }
  *(o + 4) = 99;
}""")
    for n, expect in ((10, [1, 2, 3, 4, 99]), (1, [1, 2, 0, 0, 0])):
        o = np.zeros(5, np.int32)
        interpret(m, [o, n], 1)
        assert list(o) == expect


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


@pytest.mark.parametrize("v", [-5, 0, 7])
def test_device_helpers_are_inlined(v: int) -> None:
    m = lower_src(HELPERS, BLOCK=16)
    assert len(m.functions) == 1
    o = np.zeros(16, np.float32)
    p = np.zeros(1, np.int32)
    interpret(m, [o, p, v], 1)
    np.testing.assert_array_equal(o, 2 * np.arange(16) + 9.0)
    assert p[0] == (v > 0) - (v < 0)


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


def test_reductions_on_each_axis() -> None:
    m = lower_src(REDUCE3)
    reds = [(op.kind, op.axis, op.operands[0].type) for op in ops(m, O.ReduceOp)]  # type: ignore[attr-defined]
    assert reds[:3] == [
        ("fadd", 0, TileType((2, 4, 8), F32)),
        ("fmax", 1, TileType((2, 4, 8), F32)),
        ("fmin", 2, TileType((2, 4, 8), F32)),
    ]
    assert ("smin", 1) in [(k, a) for k, a, _ in reds] and ("smax", 0) in [(k, a) for k, a, _ in reds]
    o = np.zeros(3, np.float32)
    io = np.zeros(1, np.int32)
    interpret(m, [o, io], 1)
    x = np.broadcast_to(np.arange(8, dtype=np.float32), (2, 4, 8))
    assert list(o) == [x.sum(0).sum(), x.max(1).sum(), x.min(2).sum()]
    assert io[0] == -4


def test_unsigned_reduction_and_minus_reduction_rejected() -> None:
    m = lower_src("__global__ void k(unsigned* p) { unsigned x[16] = *(p + 0 ... 16); *p = x[max]; }")
    assert kinds(m, O.ReduceOp) == ["umax"]
    with pytest.raises(tc_lang.TcCompileError) as err:
        lower_src("__global__ void k(float* p) { float x[16] = *(p + 0 ... 16); *p = x[-]; }")
    assert "'-' reduction" in str(err.value)


def test_permutations_and_transpose() -> None:
    m = lower_src("""
__global__ void k(float* o) {
  int r[8] = 0 ... 8;
  float x[2, 4, 8] = (float[2, 4, 8]) r[newaxis, newaxis, :];
  float t[8, 2, 4] = x[^2, ^0, ^1];
  float u[4, 8, 2] = ^x;
  *(o + (0 ... 64)) = (float[64]) t;
  *(o + (64 ... 128)) = (float[64]) u;
}""")
    perms = [(op.perm, op.type) for op in ops(m, O.TransOp)]  # type: ignore[attr-defined]
    assert perms == [((2, 0, 1), TileType((8, 2, 4), F32)), ((1, 2, 0), TileType((4, 8, 2), F32))]
    o = np.zeros(128, np.float32)
    interpret(m, [o], 1)
    x = np.broadcast_to(np.arange(8, dtype=np.float32), (2, 4, 8))
    np.testing.assert_array_equal(o[:64], x.transpose(2, 0, 1).ravel())
    np.testing.assert_array_equal(o[64:], x.transpose(1, 2, 0).ravel())


def test_tile_casts_reshape_broadcast_and_convert() -> None:
    m = lower_src("""
__global__ void k(half* o) {
  int r[16] = 0 ... 16;
  half y[4, 4] = (half[4, 4]) r;
  half z[16] = (half[16]) y;
  float w[16, 2] = (float[16, 2]) r[:, newaxis];
  *(o + r) = z + (half[16]) w[:, +];
}""")
    assert {"tc.reshape", "tc.broadcast"} <= {op.NAME for op in m.walk()}
    assert "sitofp" in kinds(m, O.CastOp)
    o = np.zeros(16, np.float16)
    interpret(m, [o], 1)
    np.testing.assert_array_equal(o, np.arange(16) * 3.0)


def test_ternaries_mask_loads() -> None:
    m = lower_src("""
__global__ void k(float* o, float* p, int n) {
  int r[16] = 0 ... 16;
  float a[16] = r < n ? *(p + r) : 0;
  float b[16] = r < n ? *(p + r) : *(p + r + 16);
  float s = n > 3 ? *p : 1.0f;
  *(o + r) = a + b + s;
}""")
    loads = ops(m, O.LoadOp)
    # a: one load with other; b: both branches masked (by c and !c); s: a scalar load under tc.if
    assert len(loads[0].operands) == 3
    assert all(len(ld.operands) == 2 for ld in loads[1:3])
    assert len(ops(m, O.IfOp)) == 1
    pp = np.arange(32, dtype=np.float32)
    o = np.zeros(16, np.float32)
    interpret(m, [o, pp, 5], 1)
    r = np.arange(16)
    a = np.where(r < 5, pp[:16], 0)
    b = np.where(r < 5, pp[:16], pp[16:])
    np.testing.assert_array_equal(o, a + b + pp[0])


def test_atomics() -> None:
    m = lower_src("""
__global__ void k(float* f, int* i, unsigned* u) {
  int r[16] = 0 ... 16;
  bool m[16] = r < 8;
  atomic_add(f + r, 1.0f, m);
  atomic_max(i + r, r);
  atomic_min(u + r, 3);
  atomic_xchg(i + 16, 5);
  int old = atomic_cas(i + 17, 0, 1);
  *(i + 18) = old;
  __debug_barrier();
}""")
    assert kinds(m, O.AtomicRMWOp) == ["fadd", "max", "umin", "xchg"]
    assert len(ops(m, O.AtomicCASOp)) == 1 and len(ops(m, O.BarrierOp)) == 1
    f = np.zeros(16, np.float32)
    i = np.full(19, 4, np.int32)
    i[17] = 0
    u = np.full(16, 10, np.uint32)
    interpret(m, [f, i, u], 1)
    assert list(f) == [1.0] * 8 + [0.0] * 8
    assert list(i[:16]) == [max(4, k) for k in range(16)] and i[16] == 5 and i[17] == 1 and i[18] == 0
    assert list(u) == [3] * 16


def test_a_cast_to_void_discards_the_value_and_keeps_the_effects() -> None:
    """`(void) x;` (C's way to drop a value, e.g. an atomic's old value) passed the checker and
    then failed in the lowering (E0601 "cannot convert to void")."""
    m = lower_src("""
__global__ void k(int* i, int n) {
  int r[16] = 0 ... 16;
  (void) r;
  (void) n;
  (void) atomic_add(i + r, 1);
}""")
    assert kinds(m, O.AtomicRMWOp) == ["add"]
    i = np.arange(16, dtype=np.int32)
    interpret(m, [i, 3], 1)
    assert list(i) == list(range(1, 17))


def test_math_minmax_select_pointers_sizeof_bitcast() -> None:
    m = lower_src("""
__global__ void k(float* o, long* l, unsigned* u) {
  int r[16] = 0 ... 16;
  float x[16] = r;
  *(o + r) = sqrt(x) + exp2(x) + abs(-x) + max(x, 2.0f) + fma(x, x, x) + select(r < 4, x, 1.0f)
             + exp(x) + log(x + 1.0f);
  float* p = o + 3;
  *l = p - o;
  *(l + 1) = sizeof(half);
  *(l + 2) = bitcast<int>(1.0f);
  *u = min(*u, 7u);
  *(o + 20 - 2) = 5.0f;
}""")
    unary = {(op.kind, op.approx) for op in ops(m, O.UnaryOp)}  # type: ignore[attr-defined]
    assert {("sqrt", False), ("exp2", False), ("fneg", False), ("fabs", False), ("exp", True),
            ("log", True)} <= unary
    assert {"fmax", "umin"} <= set(kinds(m, O.BinaryOp))
    assert len(ops(m, O.FmaOp)) == 1 and len(ops(m, O.SelectOp)) >= 1
    o = np.zeros(20, np.float32)
    l = np.zeros(3, np.int64)
    u = np.array([9], np.uint32)
    interpret(m, [o, l, u], 1)
    x = np.arange(16, dtype=np.float32)
    ref = np.sqrt(x) + np.exp2(x) + x + np.maximum(x, 2) + x * x + x + np.where(x < 4, x, 1) \
        + np.exp(x) + np.log(x + 1)
    np.testing.assert_allclose(o[:16], ref, rtol=1e-5)
    assert o[18] == 5.0
    assert list(l) == [3, 2, 0x3F800000] and u[0] == 7


def test_pointer_offsets_keep_their_width() -> None:
    m = lower_src("""
__global__ void k(float* p, int i, unsigned u, long w, short s) {
  *(p + i) = 1.0f; *(p + u) = 2.0f; *(p + w) = 3.0f; *(p + s) = 4.0f; *(p - i) = 5.0f;
}""")
    offsets = [str(op.operands[1].type) for op in ops(m, O.AddPtrOp)]
    assert offsets == ["i32", "i64", "i64", "i32", "i32"]
    assert "zext" in kinds(m, O.CastOp) and "sext" in kinds(m, O.CastOp)


def test_scalar_logical_operators_short_circuit_only_with_effects() -> None:
    m = lower_src("""
__global__ void k(int* p, int n) {
  bool a = n > 0 && n < 10;
  bool b = n < 4 && *(p + n) > 0;
  *p = a + b;
}""")
    assert len(ops(m, O.IfOp)) == 1  # only the operand with a load is guarded
    p = np.array([0, 1, 0], np.int32)
    interpret(m, [p, 1], 1)
    assert p[0] == 2
    p = np.array([0, 1, 0], np.int32)
    interpret(m, [p, 7], 1)  # *(p + 7) would be out of bounds: it must not be read
    assert p[0] == 1


def test_compound_assignment_through_pointers_and_increments() -> None:
    m = lower_src("""
__global__ void k(int* p) {
  int r[4] = 0 ... 4;
  *(p + r) += r;
  *p *= 3;
  int i = 5;
  int a = i++;
  int b = ++i;
  float* q = (float*) p;
  *(p + 4) = a * 10 + b;
}""")
    p = np.array([1, 1, 1, 1, 0], np.int32)
    interpret(m, [p], 1)
    assert list(p) == [3, 2, 3, 4, 57]


def test_every_op_has_a_location() -> None:
    m = lower_src(LOOPS)
    for op in m.walk():
        assert op.loc is not None and op.loc.line > 0, op.NAME


def test_general_for_helpers_with_loops_and_misc_conversions() -> None:
    m = lower_src("""
__device__ int find(int* p, int n, int v) {
  for (int i = 0; i < n; i++) { if (*(p + i) == v) return i; }
  return -1;
}
__global__ void k(int* o, long n, int* data) {
  int i;
  for (i = 0; i < 5; i++) ;
  *o = i;
  int s = 0;
  for (int j = 0; j < n; j++) s += j;
  *(o + 1) = s;
  bool f = !(s > 3);
  *(o + 2) = f;
  for (int t = 0; t < 3; t++) *(o + 3 + t) = find(data, 4, t + 7);
  half h = 1.5; bf16 bh = h; float back = bh; *(o + 6) = back * 2;
  int u;
  *(o + 7) = u;
}""")
    # `i` outlives its loop and `j < n` compares as long: both are tc.while, not tc.for
    assert len(ops(m, O.ForOp)) == 1
    o = np.full(8, 9, np.int32)
    interpret(m, [o, 6, np.array([5, 7, 8, 7], np.int32)], 1)
    assert list(o) == [5, 15, 0, 1, 2, -1, 3, 0]
