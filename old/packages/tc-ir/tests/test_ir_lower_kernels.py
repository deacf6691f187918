"""The spec's kernels lowered to tile IR: the ops they become (FileCheck on the printed IR) and,
through the reference interpreter, the numbers they compute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tc_ir import ops as O
from tc_ir.interpreter import interpret
from tc_ir.testing import filecheck as check_ir
from tc_ir.testing import lower_source
from tc_ir.printer import print_module
from tc_ir.types import F32, I1, I32, PointerType, TileType

VECTOR_ADD = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
  int pid = get_program_id(0);
  int off[BLOCK] = pid * BLOCK + 0 ... BLOCK;
  bool check[BLOCK] = off < N;
  *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""

SOFTMAX = """
__global__ void softmax(float* Y, float* X, int stride_ym, int stride_xm, int M, int N){
  int m = get_program_id(0);
  int n [BLOCK] = 0 ... BLOCK;
  float* px [BLOCK] = X + m*stride_xm + n;
  bool check[BLOCK] = n < N;
  float x [BLOCK] = check ? *px : -F32_INFINITY;
  float z [BLOCK] = x - x[max];
  float num [BLOCK] = exp(z);
  float denom = num[+];
  float y [BLOCK] = num / denom;
  float* py [BLOCK] = Y + m*stride_ym + n;
  *?(check)py = y;
}
"""

MATMUL = """
#define MAX_GROUP_SIZE 8
__global__ void dot(TYPE* A, TYPE* B, TYPE* C, int M, int N, int K,
                    int lda __multipleof(8), int ldb __multipleof(8), int ldc __multipleof(8)) {
  int pid = get_program_id(0);
  int grid_m = (M + MB - 1) / MB;
  int grid_n = (N + NB - 1) / NB;
  int width = MAX_GROUP_SIZE * grid_n;
  int group_id = pid / width;
  int group_size = min(grid_m - group_id * MAX_GROUP_SIZE, MAX_GROUP_SIZE);
  int pid_m = group_id * MAX_GROUP_SIZE + (pid % group_size);
  int pid_n = (pid % width) / (group_size);
  int rm[MB] = pid_m * MB + 0 ... MB;
  int rn[NB] = pid_n * NB + 0 ... NB;
  int rk[KB] = 0 ... KB;
  TYPE *pa[MB, KB] = A + (rk [newaxis, :] * 1 + rm[:, newaxis] * lda);
  TYPE *pb[KB, NB] = B + (rk[:, newaxis] * ldb + rn [newaxis, :] * 1);
  float acc[MB, NB] = 0;
  for (int k = K; k > 0; k -= KB) {
    acc += (*pa) @ (*pb);
    pa += KB * 1;
    pb += KB * ldb;
  }
  rm = pid_m * MB + 0 ... MB;
  rn = pid_n * NB + 0 ... NB;
  TYPE *pc[MB, NB] = C + (rm[:, newaxis] * ldc + rn[newaxis, :]);
  *? (rm[:, newaxis] < M && rn [newaxis, :] < N) pc = acc;
}
"""

TRANSPOSE = """
__global__ void transpose(TYPE * X, TYPE * Y, int M, int N, int ldx, int ldy) {
  int pidm = get_program_id(0);
  int pidn = get_program_id(1);
  int rm[TM] = pidm * TM + 0 ... TM;
  int rn[TN] = pidn * TN + 0 ... TN;
  TYPE* px[TM, TN] = X + rm[:, newaxis] * ldx + rn[newaxis, :];
  TYPE* py[TN, TM] = Y + rm[newaxis, :] + rn[:, newaxis] * ldy;
  bool checkx[TM, TN] = (rm[:, newaxis] < M) && (rn[newaxis, :] < N);
  bool checky[TN, TM] = (rm[newaxis, :] < M) && (rn[:, newaxis] < N);
  *?(checky)py = ^(*?(checkx)px);
}
"""


def lower_src(src: str, kernel: str | None = None, **defines: object) -> O.Module:
    """Lowered, verified and round-tripped through the IR text."""
    return lower_source(src, defines, kernel=kernel)


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    check_ir(text, checks)


def test_vector_add_ops_and_types() -> None:
    m = lower_src(VECTOR_ADD, TYPE="float", BLOCK=1024)
    fn = m.function("add")
    assert fn.arg_names == ["z", "x", "y", "N"]
    assert [a.type for a in fn.args] == [PointerType(F32)] * 3 + [I32]
    kinds = [op.NAME for op in fn.walk()]
    assert kinds.count("tc.load") == 2 and kinds.count("tc.store") == 1
    assert kinds.count("tc.make_range") == 1 and kinds[-1] == "tc.return"
    tile = TileType((1024,), F32)
    loads = [op for op in fn.walk() if isinstance(op, O.LoadOp)]
    for ld in loads:
        assert ld.type == tile
        assert ld.operands[1].type == TileType((1024,), I1)  # masked by check
    (add,) = [op for op in fn.walk() if isinstance(op, O.BinaryOp) and op.kind == "fadd"]
    (store,) = [op for op in fn.walk() if isinstance(op, O.StoreOp)]
    assert store.operands[1] is add.result and store.operands[2] is loads[0].operands[1]
    cmp = store.operands[2]
    assert isinstance(cmp, O.OpResult) and isinstance(cmp.op, O.CmpOp) and cmp.op.predicate == "slt"
    for op in fn.walk():
        assert op.loc is not None and op.loc.line > 0


def test_vector_add_filecheck_and_run(tmp_path: Path) -> None:
    m = lower_src(VECTOR_ADD, TYPE="half", BLOCK=256)
    filecheck(
        print_module(m),
        """
CHECK: tc.func global @add(%z: ptr<f16>, %x: ptr<f16>, %y: ptr<f16>, %N: i32)
CHECK: %pid = tc.program_id {axis = 0} : i32
CHECK: tc.make_range {start = 0, end = 256} : tile<256xi32>
CHECK: %off = tc.binary {{.*}} {kind = "add"} : tile<256xi32>
CHECK: %check = tc.cmp %off, {{.*}} {predicate = "slt"} : tile<256xi1>
CHECK: tc.addptr {{.*}}, %off : tile<256xptr<f16>>
CHECK: tc.load {{.*}}, %check : tile<256xf16>
CHECK: tc.load {{.*}}, %check : tile<256xf16>
CHECK: tc.binary {{.*}} {kind = "fadd"} : tile<256xf16>
CHECK: tc.store {{.*}}, %check
CHECK: tc.return
""",
        tmp_path,
    )
    n = 1000
    x = np.random.rand(n).astype(np.float16)
    y = np.random.rand(n).astype(np.float16)
    z = np.zeros(n, np.float16)
    interpret(m, [z, x, y, n], (4,))
    np.testing.assert_array_equal(z, x + y)


def test_softmax(tmp_path: Path) -> None:
    m = lower_src(SOFTMAX, BLOCK=128)
    filecheck(
        print_module(m),
        """
CHECK: %check = tc.cmp %n, {{.*}} {predicate = "slt"} : tile<128xi1>
CHECK: [[NEGINF:%[0-9]+]] = tc.constant {value = -inf} : tile<128xf32>
CHECK: %x = tc.load %px, %check, [[NEGINF]] : tile<128xf32>
CHECK: tc.reduce %x {kind = "fmax", axis = 0} : f32
CHECK: %z = tc.binary %x, {{.*}} {kind = "fsub"}
CHECK: %num = tc.unary %z {kind = "exp", approx = true} : tile<128xf32>
CHECK: %denom = tc.reduce %num {kind = "fadd", axis = 0} : f32
CHECK: %y = tc.binary %num, {{.*}} {kind = "fdiv"} : tile<128xf32>
CHECK: tc.store %py, %y, %check
""",
        tmp_path,
    )
    x = np.random.randn(7, 100).astype(np.float32)
    y = np.zeros_like(x)
    interpret(m, [y, x, 100, 100, 7, 100], (7,))
    ref = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, ref / ref.sum(1, keepdims=True), rtol=1e-5)


def test_matmul_structure(tmp_path: Path) -> None:
    m = lower_src(MATMUL, TYPE="half", MB=64, NB=64, KB=32)
    fn = m.functions[0]
    assert fn.arg_attrs[6] == {"multiple_of": 8} and fn.arg_attrs[0] == {}
    text = print_module(m)
    filecheck(
        text,
        """
CHECK: %group_id = tc.binary %pid, %width {kind = "sdiv"} : i32
CHECK: %group_size = tc.binary {{.*}} {kind = "smin"} : i32
CHECK: tc.binary %pid, %group_size {kind = "srem"} : i32
CHECK: %acc = tc.constant {value = 0.0} : tile<64x64xf32>
CHECK: tc.for {{.*}}, %K, {{.*}}, %acc, %pa, %pb : tile<64x64xf32>, tile<64x32xptr<f16>>, tile<32x64xptr<f16>>
CHECK-NEXT: ^({{%[0-9a-z_]+}}: i32, [[ACC:%acc_?[0-9]*]]: tile<64x64xf32>,
CHECK: tc.load {{.*}} : tile<64x32xf16>
CHECK: tc.load {{.*}} : tile<32x64xf16>
CHECK: tc.dot {{%[0-9]+}}, {{%[0-9]+}}, [[ACC]] {precision = "ieee"} : tile<64x64xf32>
CHECK-NOT: "fadd"
CHECK: tc.addptr
CHECK: tc.addptr
CHECK: tc.yield
CHECK: tc.cast {{.*}} {kind = "fptrunc"} : tile<64x64xf16>
CHECK: tc.store %pc
""",
        tmp_path,
    )
    (loop,) = [op for op in fn.walk() if isinstance(op, O.ForOp)]
    lb, ub, step = loop.operands[:3]
    assert isinstance(lb, O.OpResult) and isinstance(lb.op, O.ConstantOp) and lb.op.value == 0
    assert ub is fn.args[5]  # K: the down-counting loop runs over [0, K) step KB
    assert isinstance(step, O.OpResult) and isinstance(step.op, O.ConstantOp) and step.op.value == 32
    (dot,) = [op for op in fn.walk() if isinstance(op, O.DotOp)]
    assert dot.precision == "ieee"


def test_matmul_runs() -> None:
    m = lower_src(MATMUL, TYPE="float", MB=16, NB=16, KB=8)
    M, N, K = 40, 24, 32
    a = np.random.rand(M, K).astype(np.float32)
    b = np.random.rand(K, N).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    # the kernel does not mask its loads: pad A and B to whole tiles
    ap = np.zeros((48, K), np.float32)
    ap[:M] = a
    bp = np.zeros((K, 32), np.float32)
    bp[:, :N] = b
    interpret(m, [ap, bp, c, M, N, K, K, 32, N], (3 * 2,))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_transpose_with_masks() -> None:
    m = lower_src(TRANSPOSE, TYPE="float", TM=16, TN=8)
    (trans,) = [op for op in m.walk() if isinstance(op, O.TransOp)]
    assert trans.perm == (1, 0) and trans.type == TileType((8, 16), F32)
    M, N = 20, 13
    x = np.random.rand(M, N).astype(np.float32)
    y = np.zeros((N, M), np.float32)
    interpret(m, [x, y, M, N, N, M], (2, 2))
    np.testing.assert_array_equal(y, x.T)


PREFETCH_FUSED = """
__global__ void dot(TYPE * A, TYPE * B, TYPE * C, int M, int N, int K,
                    int lda __multipleof(8), int ldb __multipleof(8), int ldc __multipleof(8)) {
  int pm = get_program_id(0);
  int pn = get_program_id(1);
  int rm[TM] = pm * TM + 0 ... TM;
  int rn[TN] = pn * TN + 0 ... TN;
  int rk[TK] = 0 ... TK;
  float c[TM, TN] = 0;
  TYPE* pa[SHAPE_A] = A + rk[BROADCAST_AK] * STRIDE_AK + rm[BROADCAST_AM] * STRIDE_AM;
  TYPE* pb[SHAPE_B] = B + rk[BROADCAST_BK] * STRIDE_BK + rn[BROADCAST_BN] * STRIDE_BN;
  TYPE a[SHAPE_A] = *pa;
  TYPE b[SHAPE_B] = *pb;
  for(int k = K; k > 0; k-= TK){
    c += USE_A @ USE_B;
    pa = pa + TK * STRIDE_AK;
    pb = pb + TK * STRIDE_BK;
    bool check = k > TK;
    a = check ? *pa : 0;
    b = check ? *pb : 0;
  }
  int rcm[TM] = pm * TM + 0 ... TM;
  int rcn[TN] = pn * TN + 0 ... TN;
  TYPE* pc[TM, TN] = C + rcn[newaxis, :] + rcm[:, newaxis] * ldc;
  *pc = c;
}
"""

_A = {
    False: dict(USE_A="a", STRIDE_AK="1", STRIDE_AM="lda", BROADCAST_AK="newaxis, :",
                BROADCAST_AM=":, newaxis", SHAPE_A="TM, TK"),
    True: dict(USE_A="^a", STRIDE_AK="lda", STRIDE_AM="1", BROADCAST_AK=":, newaxis",
               BROADCAST_AM="newaxis, :", SHAPE_A="TK, TM"),
}
_B = {
    False: dict(USE_B="b", STRIDE_BK="ldb", STRIDE_BN="1", BROADCAST_BK=":, newaxis",
                BROADCAST_BN="newaxis, :", SHAPE_B="TK, TN"),
    True: dict(USE_B="^b", STRIDE_BK="1", STRIDE_BN="ldb", BROADCAST_BK="newaxis, :",
               BROADCAST_BN=":, newaxis", SHAPE_B="TN, TK"),
}


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_prefetching_matmul_with_fused_transpositions(trans_a: bool, trans_b: bool) -> None:
    m = lower_src(PREFETCH_FUSED, TYPE="float", TM=16, TN=16, TK=8, **_A[trans_a], **_B[trans_b])
    (loop,) = [op for op in m.walk() if isinstance(op, O.ForOp)]
    # a, b, c, pa, pb are carried; the prefetch loads sit under a scalar tc.if (k > TK)
    assert len(loop.inits) == 5
    assert len([op for op in loop.body.walk() if isinstance(op, O.IfOp)]) == 2
    assert len([op for op in m.walk() if isinstance(op, O.TransOp)]) == int(trans_a) + int(trans_b)
    M, N, K = 32, 48, 40
    a = np.random.rand(M, K).astype(np.float32)
    b = np.random.rand(K, N).astype(np.float32)
    A = a.T.copy() if trans_a else a
    B = b.T.copy() if trans_b else b
    c = np.zeros((M, N), np.float32)
    interpret(m, [A, B, c, M, N, K, A.shape[1], B.shape[1], N], (M // 16, N // 16))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_kernel_selection() -> None:
    src = VECTOR_ADD + "\n__global__ void other(int* p) { *p = 1; }\n"
    assert lower_src(src, TYPE="float", BLOCK=16).functions[0].name == "add"
    assert lower_src(src, "other", TYPE="float", BLOCK=16).functions[0].name == "other"
