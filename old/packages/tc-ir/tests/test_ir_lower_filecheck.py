"""FileCheck tests of the lowering: one small source per language construct and the IR it must
become. Every module is verified and round-trips through the IR text (`lower_source`)."""

from __future__ import annotations

import pytest

from tc_ir.printer import print_module
from tc_ir.testing import filecheck, lower_source

# name -> (source, FileCheck directives over the printed module)
CASES: dict[str, tuple[str, str]] = {
    "variables_become_ssa_values": (
        """
__global__ void k(int* o, int a) {
  int x = a + 1;
  x = x * 2;
  x += 3;
  *o = x;
}""",
        """
CHECK: %x = tc.binary %a, {{%[0-9]+}} {kind = "add"} : i32 loc("<source>":3:11)
CHECK: %x_1 = tc.binary %x, {{%[0-9]+}} {kind = "mul"} : i32
CHECK: %x_2 = tc.binary %x_1, {{%[0-9]+}} {kind = "add"} : i32
CHECK: tc.store %o, %x_2 loc("<source>":6:3)
CHECK-NOT: tc.load
""",
    ),
    "counted_for_carries_values": (
        """
__global__ void k(float* o, int n) {
  float s = 0;
  int c = 1;
  for (int i = 0; i < n; i++) { s += i; c = c * 2; }
  *o = s + c;
}""",
        """
CHECK: [[S:%[0-9]+]], [[C:%[0-9]+]] = tc.for %i, %n, {{%[0-9]+}}, %s, %c : f32, i32 ({
CHECK-NEXT: ^(%i_1: i32, %s_1: f32, %c_1: i32):
CHECK: tc.cast %i_1 {kind = "sitofp"} : f32
CHECK: %s_2 = tc.binary %s_1, {{%[0-9]+}} {kind = "fadd"} : f32
CHECK: %c_2 = tc.binary %c_1, {{%[0-9]+}} {kind = "mul"} : i32
CHECK: tc.yield %s_2, %c_2
CHECK: tc.cast [[C]] {kind = "sitofp"} : f32
CHECK: tc.binary [[S]],
""",
    ),
    "down_counting_for": (
        """
__global__ void k(int* o, int K) {
  int s = 0;
  for (int k = K; k > 0; k -= 4) s += k;
  *o = s;
}""",
        """
CHECK: [[ZERO:%[0-9]+]] = tc.constant {value = 0} : i32
CHECK: [[FOUR:%[0-9]+]] = tc.constant {value = 4} : i32
CHECK: [[R:%[0-9]+]] = tc.for [[ZERO]], %K, [[FOUR]], %s : i32 ({
CHECK-NEXT: ^([[IV:%[0-9]+]]: i32, %s_1: i32):
CHECK-NEXT: [[K:%[0-9]+]] = tc.binary %K, [[IV]] {kind = "sub"} : i32
CHECK: tc.store %o, [[R]]
""",
    ),
    "while_loop": (
        """
__global__ void k(int* o, int n) {
  int i = 0;
  while (i * i < n) i++;
  *o = i;
}""",
        """
CHECK: [[R:%[0-9]+]] = tc.while %i : i32 ({
CHECK-NEXT: ^(%i_1: i32):
CHECK: [[C:%[0-9]+]] = tc.cmp {{%[0-9]+}}, %n {predicate = "slt"} : i1
CHECK-NEXT: tc.condition [[C]], %i_1
CHECK-NEXT: }, {
CHECK-NEXT: ^(%i_2: i32):
CHECK: %i_3 = tc.binary %i_2, {{%[0-9]+}} {kind = "add"} : i32
CHECK-NEXT: tc.yield %i_3
CHECK: tc.store %o, [[R]]
""",
    ),
    "do_while_runs_the_body_in_the_before_region": (
        """
__global__ void k(int* o, int n) {
  int i = 0;
  do { i += 3; } while (i < n);
  *o = i;
}""",
        """
CHECK: tc.while %i : i32 ({
CHECK-NEXT: ^(%i_1: i32):
CHECK: %i_2 = tc.binary %i_1, {{%[0-9]+}} {kind = "add"} : i32
CHECK-NEXT: [[C:%[0-9]+]] = tc.cmp %i_2, %n {predicate = "slt"} : i1
CHECK-NEXT: tc.condition [[C]], %i_2
CHECK: ^(%i_3: i32):
CHECK-NEXT: tc.yield %i_3
""",
    ),
    "for_without_condition_tests_its_exit_flags": (
        """
__global__ void k(int* o, int n) {
  int j = 0;
  for (;;) { j += 2; if (j > n) break; }
  *o = j;
}""",
        """
CHECK: [[J:%[0-9]+]], {{%[0-9]+}} = tc.while %j, {{%[0-9]+}} : i32, i1 ({
CHECK-NEXT: ^(%j_1: i32, %_break: i1):
CHECK-NEXT: [[TRUE:%[0-9]+]] = tc.constant {value = true} : i1
CHECK-NEXT: [[GO:%[0-9]+]] = tc.binary %_break, [[TRUE]] {kind = "xor"} : i1
CHECK-NEXT: tc.condition [[GO]], %j_1, %_break
CHECK: tc.store %o, [[J]]
""",
    ),
    "if_with_results": (
        """
__global__ void k(int* o, int a) {
  int x = 1;
  int y = 2;
  if (a > 0) { x = a; } else { y = -a; }
  *o = x + y;
}""",
        """
CHECK: [[C:%[0-9]+]] = tc.cmp %a, {{%[0-9]+}} {predicate = "sgt"} : i1
CHECK-NEXT: [[X:%[0-9]+]], [[Y:%[0-9]+]] = tc.if [[C]] : i32, i32 ({
CHECK-NEXT: tc.yield %a, %y
CHECK-NEXT: }, {
CHECK-NEXT: %y_1 = tc.unary %a {kind = "neg"} : i32
CHECK-NEXT: tc.yield %x, %y_1
CHECK: tc.binary [[X]], [[Y]] {kind = "add"}
""",
    ),
    "break_and_continue_become_flags": (
        """
__global__ void k(int* o, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    if (i % 2 == 0) continue;
    if (s > 100) break;
    s += i;
  }
  *o = s;
}""",
        """
CHECK: tc.while %i, %s, {{%[0-9]+}} : i32, i32, i1 ({
CHECK-NEXT: ^(%i_1: i32, %s_1: i32, %_break: i1):
CHECK: [[NOTBRK:%[0-9]+]] = tc.binary %_break, {{%[0-9]+}} {kind = "xor"} : i1
CHECK: [[LT:%[0-9]+]] = tc.cmp %i_1, %n {predicate = "slt"} : i1
CHECK: [[GO:%[0-9]+]] = tc.binary [[NOTBRK]], [[LT]] {kind = "and"} : i1
CHECK: tc.condition [[GO]], %i_1, %s_1, %_break
CHECK: {kind = "srem"}
CHECK: [[CONT:%[0-9]+]] = tc.if {{%[0-9]+}} : i1 ({
CHECK: tc.binary [[CONT]], {{%[0-9]+}} {kind = "xor"} : i1
CHECK: {predicate = "sgt"}
CHECK: tc.yield
""",
    ),
    "return_in_the_middle_guards_the_rest": (
        """
__global__ void k(int* o, int n) {
  if (n < 0) return;
  *o = n;
}""",
        """
CHECK: [[RET:%[0-9]+]] = tc.if {{%[0-9]+}} : i1 ({
CHECK: [[NOT:%[0-9]+]] = tc.binary [[RET]], {{%[0-9]+}} {kind = "xor"} : i1
CHECK-NEXT: tc.if [[NOT]] ({
CHECK-NEXT: tc.store %o, %n
CHECK: tc.return
""",
    ),
    "device_helpers_are_inlined": (
        """
__device__ float sq(float x) { return x * x; }
__device__ float[16] twice(float x[16]) { return x + x; }
__global__ void k(float* o) {
  float v[16] = 0 ... 16;
  *(o + (0 ... 16)) = twice(v) + sq(3.0f);
}""",
        """
CHECK: tc.func global @k(
CHECK-NOT: tc.func
CHECK: tc.binary %v, %v {kind = "fadd"} : tile<16xf32> loc("<source>":3:50)
CHECK: [[SQ:%[0-9]+]] = tc.binary [[THREE:%[0-9]+]], [[THREE]] {kind = "fmul"} : f32 loc("<source>":2:39)
CHECK: tc.splat [[SQ]] : tile<16xf32>
""",
    ),
    "implicit_splats_and_broadcasts_are_explicit": (
        """
__global__ void k(int* o, int a) {
  int r[8] = 0 ... 8;
  int c[4] = 0 ... 4;
  int m[8, 4] = r[:, newaxis] * 4 + c[newaxis, :] + a;
  *(o + m) = m;
}""",
        """
CHECK: [[COL:%[0-9]+]] = tc.expand_dims %r {axis = 1} : tile<8x1xi32>
CHECK: [[ROW:%[0-9]+]] = tc.expand_dims %c {axis = 0} : tile<1x4xi32>
CHECK: tc.broadcast {{%[0-9]+}} : tile<8x4xi32>
CHECK: tc.broadcast [[ROW]] : tile<8x4xi32>
CHECK: [[A:%[0-9]+]] = tc.splat %a : tile<8x4xi32>
CHECK: %m = tc.binary {{%[0-9]+}}, [[A]] {kind = "add"} : tile<8x4xi32>
CHECK: tc.splat %o : tile<8x4xptr<i32>>
""",
    ),
    "implicit_casts_are_explicit": (
        """
__global__ void k(half* h, float* f, int* i, unsigned char* u) {
  *f = *h + 1.5f;
  *h = *f;
  *i = *u;
  *f = *i;
  *i = *f;
  *(f + 1) = *u;
}""",
        """
CHECK: tc.cast {{%[0-9]+}} {kind = "fpext"} : f32
CHECK: tc.cast {{%[0-9]+}} {kind = "fptrunc"} : f16
CHECK: tc.load %u : i8
CHECK-NEXT: tc.cast {{%[0-9]+}} {kind = "zext"} : i32
CHECK: tc.cast {{%[0-9]+}} {kind = "sitofp"} : f32
CHECK: tc.cast {{%[0-9]+}} {kind = "fptosi"} : i32
CHECK: tc.cast {{%[0-9]+}} {kind = "uitofp"} : f32
""",
    ),
    "signedness_is_decided_per_operation": (
        """
__global__ void k(int* o, unsigned* u, int a, unsigned b) {
  *o = a / 3;   *(o + 1) = a % 3;   *(o + 2) = a >> 2;  *(o + 3) = a < 5;
  *u = b / 3;   *(u + 1) = b % 3;   *(u + 2) = b >> 2;  *(u + 3) = b < 5u;
  *(o + 4) = max(a, 7); *(u + 4) = max(b, 7u);
}""",
        """
CHECK: tc.func global @k(%o: ptr<i32>, %u: ptr<i32>, %a: i32, %b: i32 {unsigned = true})
CHECK: tc.binary %a, {{%[0-9]+}} {kind = "sdiv"}
CHECK: tc.binary %a, {{%[0-9]+}} {kind = "srem"}
CHECK: tc.binary %a, {{%[0-9]+}} {kind = "ashr"}
CHECK: tc.cmp %a, {{%[0-9]+}} {predicate = "slt"}
CHECK: tc.binary %b, {{%[0-9]+}} {kind = "udiv"}
CHECK: tc.binary %b, {{%[0-9]+}} {kind = "urem"}
CHECK: tc.binary %b, {{%[0-9]+}} {kind = "lshr"}
CHECK: tc.cmp %b, {{%[0-9]+}} {predicate = "ult"}
CHECK: tc.binary %a, {{%[0-9]+}} {kind = "smax"}
CHECK: tc.binary %b, {{%[0-9]+}} {kind = "umax"}
""",
    ),
    "masks_and_fallback_values_on_loads_and_masked_stores": (
        """
__global__ void k(float* o, float* x, int n) {
  int r[32] = 0 ... 32;
  bool m[32] = r < n;
  float v[32] = m ? *(x + r) : -1.0f;
  float w[32] = *?(m)(x + r);
  *?(m)(o + r) = v + w;
}""",
        """
CHECK: %m = tc.cmp %r, {{%[0-9]+}} {predicate = "slt"} : tile<32xi1>
CHECK: [[OTHER:%[0-9]+]] = tc.constant {value = -1.0} : tile<32xf32>
CHECK-NEXT: %v = tc.load {{%[0-9]+}}, %m, [[OTHER]] : tile<32xf32>
CHECK: %w = tc.load {{%[0-9]+}}, %m : tile<32xf32>
CHECK: tc.store {{%[0-9]+}}, {{%[0-9]+}}, %m loc("<source>":7:3)
""",
    ),
    "reductions_on_any_axis": (
        """
__global__ void k(float* o, int* p) {
  float x[4, 8] = 1.0f;
  int y[4, 8] = 1;
  float a[8] = x[+, :];
  float b[4] = x[:, max];
  int c[4] = y[:, min];
  unsigned u[4, 8] = 2;
  unsigned d[8] = u[max, :];
  *(o + (0 ... 8)) = a + d;
  *(o + (0 ... 4)) = b;
  *(p + (0 ... 4)) = c + y[+, +];
}""",
        """
CHECK: %a = tc.reduce %x {kind = "fadd", axis = 0} : tile<8xf32>
CHECK: %b = tc.reduce %x {kind = "fmax", axis = 1} : tile<4xf32>
CHECK: %c = tc.reduce %y {kind = "smin", axis = 1} : tile<4xi32>
CHECK: %d = tc.reduce %u {kind = "umax", axis = 0} : tile<8xi32>
CHECK: [[R0:%[0-9]+]] = tc.reduce %y {kind = "add", axis = 0} : tile<8xi32>
CHECK-NEXT: tc.reduce [[R0]] {kind = "add", axis = 0} : i32
""",
    ),
    "permutations": (
        """
__global__ void k(float* o) {
  float x[2, 4, 8] = 1.0f;
  float y[8, 2, 4] = x[^2, ^0, ^1];
  float m[4, 8] = 2.0f;
  float t[8, 4] = ^m;
  *o = y[+, +, +] + t[+, +];
}""",
        """
CHECK: %y = tc.trans %x {perm = [2, 0, 1]} : tile<8x2x4xf32>
CHECK: %t = tc.trans %m {perm = [1, 0]} : tile<8x4xf32>
""",
    ),
    "dot_with_accumulator_and_explicit_precision": (
        """
__global__ void k(float* o, half* a, half* b) {
  int r[16] = 0 ... 16;
  half x[16, 16] = *(a + r[:, newaxis] * 16 + r[newaxis, :]);
  half y[16, 16] = *(b + r[:, newaxis] * 16 + r[newaxis, :]);
  float acc[16, 16] = 0;
  acc += x @ y;
  float d[16, 16] = x @ y;
  *(o + r[:, newaxis] * 16 + r[newaxis, :]) = acc + d;
}""",
        """
CHECK: %acc = tc.constant {value = 0.0} : tile<16x16xf32>
CHECK-NEXT: %acc_1 = tc.dot %x, %y, %acc {precision = "ieee"} : tile<16x16xf32> loc("<source>":7:10)
CHECK-NEXT: [[ZERO:%[0-9]+]] = tc.constant {value = 0.0} : tile<16x16xf32>
CHECK-NEXT: %d = tc.dot %x, %y, [[ZERO]] {precision = "ieee"} : tile<16x16xf32>
CHECK: tc.binary %acc_1, %d {kind = "fadd"}
""",
    ),
    "atomics_with_masks": (
        """
__global__ void k(int* h, float* f, unsigned* u, int* lock) {
  int r[16] = 0 ... 16;
  bool m[16] = r < 10;
  atomic_add(h + r % 4, 1, m);
  atomic_max(f + r, 2.0f);
  atomic_max(u + r, 3u, m);
  while (atomic_cas(lock, 0, 1) == 1) {}
  atomic_xchg(lock, 0);
}""",
        """
CHECK: tc.atomic_rmw {{%[0-9]+}}, {{%[0-9]+}}, %m {kind = "add"} : tile<16xi32>
CHECK: tc.atomic_rmw {{%[0-9]+}}, {{%[0-9]+}} {kind = "fmax"} : tile<16xf32>
CHECK: tc.atomic_rmw {{%[0-9]+}}, {{%[0-9]+}}, %m {kind = "umax"} : tile<16xi32>
CHECK: tc.while ({
CHECK: tc.atomic_cas %lock, {{%[0-9]+}}, {{%[0-9]+}} : i32
CHECK: tc.condition
CHECK: tc.atomic_rmw %lock, {{%[0-9]+}} {kind = "xchg"} : i32
""",
    ),
    "argument_and_declaration_attributes_are_recorded": (
        """
__global__ void k(float* x __noalias __readonly __aligned(16), float* y __writeonly,
                  int ld __multipleof(8)) {
  int off __multipleof(4) = ld * 4;
  float* p __aligned(16) = y + off;
  *p = *(x + off);
  off = off + 4;
  *(p + off) = 0;
}""",
        """
CHECK: tc.func global @k(%x: ptr<f32> {noalias = true, readonly = true, aligned = 16}, %y: ptr<f32> {writeonly = true}, %ld: i32 {multiple_of = 8})
CHECK: %off = tc.assume {{%[0-9]+}} {multiple_of = 4} : i32 loc("<source>":4:7)
CHECK: %p = tc.assume {{%[0-9]+}} {aligned = 16} : ptr<f32>
CHECK: %off_1 = tc.assume {{%[0-9]+}} {multiple_of = 4} : i32 loc("<source>":7:3)
""",
    ),
    "tile_conditional_masks_loads_in_both_branches": (
        """
__global__ void k(float* o, float* p, float* q, int n) {
  int r[16] = 0 ... 16;
  bool c[16] = r < n;
  float a[16] = c ? *(p + r) + 1.0f : *(q + r);
  *(o + r) = a;
}""",
        """
CHECK: %c = tc.cmp
CHECK: tc.load {{%[0-9]+}}, %c : tile<16xf32>
CHECK: [[NOTC:%[0-9]+]] = tc.binary %c, {{%[0-9]+}} {kind = "xor"} : tile<16xi1>
CHECK: tc.load {{%[0-9]+}}, [[NOTC]] : tile<16xf32>
CHECK: %a = tc.select %c,
""",
    ),
    "tile_conditional_masks_smaller_loads_stores_and_atomics": (
        """
__global__ void k(float* o, float* p, int* h, int n) {
  int r[8] = 0 ... 8;
  bool c[8, 8] = r[:, newaxis] < n && r[newaxis, :] < 4;
  float a[8, 8] = c ? *(p + r) + (*(o + r[:, newaxis] * 8 + r[newaxis, :]) = 1.0f) : 0.0f;
  float s[8, 8] = c ? *p + atomic_add(h + r[:, newaxis] * 8 + r[newaxis, :], 1) : 0.0f;
  *(o + 64 + r[:, newaxis] * 8 + r[newaxis, :]) = a + s;
}""",
        """
CHECK: %c = tc.binary {{%[0-9]+}}, {{%[0-9]+}} {kind = "and"} : tile<8x8xi1>
CHECK: [[WIDE:%[0-9]+]] = tc.cast %c {kind = "zext"} : tile<8x8xi32>
CHECK-NEXT: [[ANY:%[0-9]+]] = tc.reduce [[WIDE]] {kind = "umax", axis = 0} : tile<8xi32>
CHECK-NEXT: [[ZERO:%[0-9]+]] = tc.constant {value = 0} : tile<8xi32>
CHECK-NEXT: [[M:%[0-9]+]] = tc.cmp [[ANY]], [[ZERO]] {predicate = "ne"} : tile<8xi1>
CHECK-NEXT: tc.load {{%[0-9]+}}, [[M]] : tile<8xf32>
CHECK: tc.store {{%[0-9]+}}, {{%[0-9]+}}, %c loc(
CHECK: tc.reduce {{%[0-9]+}} {kind = "umax", axis = 1} : tile<8xi32>
CHECK-NEXT: tc.reduce {{%[0-9]+}} {kind = "umax", axis = 0} : i32
CHECK: tc.load %p, {{%[0-9]+}} : f32
CHECK: tc.atomic_rmw {{%[0-9]+}}, {{%[0-9]+}}, %c {kind = "add"} : tile<8x8xi32>
""",
    ),
    "tile_and_masks_its_right_operand": (
        """
__global__ void k(int* o, float* p, int n) {
  int r[16] = 0 ... 16;
  bool ok[16] = r < n && *(p + r) > 0.0f;
  *(o + r) = ok;
}""",
        """
CHECK: [[LEFT:%[0-9]+]] = tc.cmp %r, {{%[0-9]+}} {predicate = "slt"} : tile<16xi1>
CHECK: tc.load {{%[0-9]+}}, [[LEFT]] : tile<16xf32>
CHECK: %ok = tc.binary [[LEFT]], {{%[0-9]+}} {kind = "and"} : tile<16xi1>
""",
    ),
    "scalar_conditional_with_a_load_is_an_if": (
        """
__global__ void k(float* o, float* p, int n) {
  float a = n > 0 ? *p : 1.0f;
  float b = n > 0 ? 2.0f : 3.0f;
  *o = a + b;
}""",
        """
CHECK: %a = tc.if {{%[0-9]+}} : f32 ({
CHECK-NEXT: [[V:%[0-9]+]] = tc.load %p : f32
CHECK-NEXT: tc.yield [[V]]
CHECK: %b = tc.select {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}} : f32
""",
    ),
    "program_ids_ranges_and_3d_tiles": (
        """
__global__ void k(float* o) {
  int x = get_program_id(0) + get_program_id(1) * get_num_programs(0) + get_program_id(2);
  int a[2] = 0 ... 2;
  int b[4] = 0 ... 4;
  int c[8] = 0 ... 8;
  int t[2, 4, 8] = a[:, newaxis, newaxis] * 32 + b[newaxis, :, newaxis] * 8 + c[newaxis, newaxis, :];
  *(o + x * 64 + t) = t[:, :, +][:, +][+];
}""",
        """
CHECK: tc.program_id {axis = 0} : i32
CHECK: tc.program_id {axis = 1} : i32
CHECK: tc.num_programs {axis = 0} : i32
CHECK: tc.program_id {axis = 2} : i32
CHECK: %a = tc.make_range {start = 0, end = 2} : tile<2xi32>
CHECK: tc.expand_dims {{%[0-9]+}} {axis = 2} : tile<2x1x1xi32>
CHECK: tc.reduce %t {kind = "add", axis = 2} : tile<2x4xi32>
CHECK: tc.reduce {{%[0-9]+}} {kind = "add", axis = 1} : tile<2xi32>
CHECK: tc.reduce {{%[0-9]+}} {kind = "add", axis = 0} : i32
""",
    ),
    "math_builtins": (
        """
__global__ void k(float* o) {
  float x[16] = 1.0f;
  float y[16] = exp(x) + log(x) + sqrt(x) + sqrtf(x) + rsqrt(x) + abs(-x) + fma(x, x, x)
              + sin(x) + cos(x) + exp2(x) + log2(x) + floor(x) + ceil(x) + min(x, 2.0f)
              + max(x, 0.5f) + select(x > 0.0f, x, -x);
  *(o + (0 ... 16)) = y;
}""",
        """
CHECK: tc.unary %x {kind = "exp", approx = true}
CHECK: tc.unary %x {kind = "log", approx = true}
CHECK: tc.unary %x {kind = "sqrt"}
CHECK: tc.unary %x {kind = "sqrt"}
CHECK: tc.unary %x {kind = "rsqrt"}
CHECK: {kind = "fabs"}
CHECK: tc.fma %x, %x, %x
CHECK: tc.unary %x {kind = "sin"}
CHECK: tc.unary %x {kind = "cos"}
CHECK: tc.unary %x {kind = "exp2"}
CHECK: tc.unary %x {kind = "log2"}
CHECK: tc.unary %x {kind = "floor"}
CHECK: tc.unary %x {kind = "ceil"}
CHECK: {kind = "fmin"}
CHECK: {kind = "fmax"}
CHECK: tc.select
""",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lowering(name: str) -> None:
    source, checks = CASES[name]
    module = lower_source(source)
    filecheck(print_module(module), checks)
