"""TMA copies for pipelined loads (CompileOptions.tma): which loads qualify (tc_opt.tma), the
tensor maps they describe, and the mbarrier schedule the pipeliner builds (tc_opt.pipeline_tma)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.testing import filecheck, round_trip
from tc_opt import CompileOptions
from tc_opt.pipeline import gpu_pipeline
from tc_opt.tma import UNBOUNDED, scalar_lin

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
TORCH_MATMUL = Path(__file__).resolve().parents[2] / "tc-torch" / "src" / "tc_torch" / "kernels" / "matmul.tc"
ALIGNED = ("16", "16", "16", None, None, None, "16", "16", "16")
TILE = {"TYPE": "half", "MB": 128, "NB": 256, "KB": 64}

#: The tc_torch matmul without its batch offset: loads masked along M/N and along K by `k`.
MASKED = """
__global__ void mm(TYPE* A, TYPE* B, TYPE* C, int M, int N, int K, int lda, int ldb, int ldc) {
    int pid = get_program_id(0);
    int grid_n = (N + NB - 1) / NB;
    int rm[MB] = pid / grid_n * MB + (0 ... MB);
    int rn[NB] = pid % grid_n * NB + (0 ... NB);
    int rk[KB] = 0 ... KB;
    TYPE* pa[MB, KB] = A + (rk[newaxis, :] + rm[:, newaxis] * lda);
    TYPE* pb[KB, NB] = B + (rk[:, newaxis] * ldb + rn[newaxis, :]);
    float acc[MB, NB] = 0;
    for (int k = K; k > 0; k -= KB) {
        TYPE a[MB, KB] = rk[newaxis, :] < k && rm[:, newaxis] < M ? *pa : 0;
        TYPE b[KB, NB] = rk[:, newaxis] < k && rn[newaxis, :] < N ? *pb : 0;
        acc += a @ b;
        pa += KB;
        pb += KB * ldb;
    }
    TYPE* pc[MB, NB] = C + (rm[:, newaxis] * ldc + rn[newaxis, :]);
    *?(rm[:, newaxis] < M && rn[newaxis, :] < N) pc = acc;
}
"""


def _gpu_ir(src: str, spec: object = ALIGNED, tma: bool = True, stages: int = 4, warps: int = 8,
            defines: dict[str, object] | None = None, arch: str = "sm_90") -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(src, defines or TILE, None, "<test>")
    opts = CompileOptions(arch=arch, num_warps=warps, num_stages=stages, specialization=spec, tma=tma)  # type: ignore[arg-type]
    gpu_pipeline(opts).run(m)
    return m


def _ops(m: O.Module, cls: type[O.Operation]) -> list[O.Operation]:
    return [op for op in m.walk() if isinstance(op, cls)]


def _maps(m: O.Module) -> dict[int, O.TmaLoadOp]:
    return {int(op.descriptor): op for op in m.walk() if isinstance(op, O.TmaLoadOp)}


def test_tutorial_loads_become_tma_with_unbounded_maps() -> None:
    m = _gpu_ir((KERNELS / "matmul_tutorial.tc").read_text())
    assert not _ops(m, O.AsyncCopyOp) and not _ops(m, O.AsyncWaitOp)
    maps = _maps(m)
    a, b = maps[0], maps[1]
    # A: 128 x 64 tile of f16 at P = A (arg 0), rows of stride_a_0 (arg 6): one 64-column box
    assert (a.base, a.stride, a.box, a.swizzle) == (0, (6, 1), (64, 128), 128)
    assert a.extents == (-1, UNBOUNDED, -1, UNBOUNDED)  # unmasked: no extent bounds a coordinate
    # B: 64 x 256, four panels of 64 columns copied with a 64 x 64 box
    assert (b.base, b.stride, b.box) == (1, (7, 1), (64, 64))
    # 3 prologue copies + 1 in the loop per operand
    assert len(_ops(m, O.TmaLoadOp)) == 2 * 4
    expects = _ops(m, O.MBarrierExpectOp)
    assert len(expects) == 4 and all(op.bytes == 2 * (128 * 64 + 64 * 256) for op in expects)  # type: ignore[attr-defined]


def test_masks_become_extents() -> None:
    m = _gpu_ir(MASKED, spec=("16", "16", "16", None, None, None, "16", "16", "16"))
    maps = _maps(m)
    # A: K (arg 5) along its contiguous dimension, M (arg 3) along rows; B: N (4), then K (5)
    assert maps[0].extents == (5, 0, 3, 0)
    assert maps[1].extents == (4, 0, 5, 0)


#: The spec's matmul.tc pointers and forms of the same tiles a source may write instead: a chain
#: of additions (the partial pointer tile broadcast in between), either term order, a `* 1`.
POINTER_FORMS = {
    "spec": ("A + rk[newaxis, :] * 1 + rm[:, newaxis] * lda", "B + rk[:, newaxis] * ldb + rn[newaxis, :] * 1"),
    "rows first": ("A + rm[:, newaxis] * lda + rk[newaxis, :]", "B + rn[newaxis, :] + rk[:, newaxis] * ldb"),
    "one sum": ("A + (rk[newaxis, :] * 1 + rm[:, newaxis] * lda)", "B + (rk[:, newaxis] * ldb + rn[newaxis, :])"),
    "nested": ("(A + rm[:, newaxis] * lda) + (rk[newaxis, :] + 0)", "(B + rn[newaxis, :]) + ldb * rk[:, newaxis]"),
}
SPEC_TILE = {"TYPE": "half", "TM": 64, "TN": 64, "TK": 32}


def _spec_matmul(pa: str, pb: str) -> str:
    src = (KERNELS / "matmul.tc").read_text()
    src = src.replace("A + rk[newaxis, :] * 1 + rm[:, newaxis] * lda", pa)
    return src.replace("B + rk[:, newaxis] * ldb + rn[newaxis, :] * 1", pb)


@pytest.mark.parametrize("form", list(POINTER_FORMS))
def test_spec_matmul_loads_become_tma(form: str) -> None:
    """The spec's matmul.tc (a decreasing loop counter, `lda __multipleof(8)` specialized to 16,
    pointers `A + rk * 1 + rm * lda` built by two additions, advances `TK * 1` and `TK * ldb`):
    both loads are TMA copies with the maps of the tutorial's row-major operands, starting at the
    program's rows of A and columns of B, whichever way the source writes the pointers."""
    m = _gpu_ir(_spec_matmul(*POINTER_FORMS[form]), defines=SPEC_TILE, stages=3, warps=4)
    assert not _ops(m, O.AsyncCopyOp) and not _ops(m, O.AsyncWaitOp)
    a, b = _maps(m)[0], _maps(m)[1]
    # A: 64 x 32 (one 64-byte swizzle panel of 32 columns), rows of lda (arg 6)
    assert (a.base, a.stride, a.box, a.swizzle) == (0, (6, 1), (32, 64), 64)
    assert a.extents == (-1, UNBOUNDED, -1, UNBOUNDED)  # unmasked loads
    # B: 32 x 64, rows of ldb (arg 7)
    assert (b.base, b.stride, b.box, b.swizzle) == (1, (7, 1), (64, 32), 128)
    # the prologue's first copies (iteration 0), coordinates (row, column): A at (pm * 64, 0), B at
    # (0, pn * 64)
    first_a, first_b = _ops(m, O.TmaLoadOp)[:2]
    f = m.functions[0]
    pids = {op.result: op.axis for op in f.walk() if isinstance(op, O.ProgramIdOp)}  # type: ignore[attr-defined]

    def scaled_pid(v: O.Value) -> int | None:
        lin = scalar_lin(v)
        (k, c), = lin.items()
        return pids[k] if c == 64 and k in pids else None

    assert scaled_pid(first_a.operands[4]) == 0 and scalar_lin(first_a.operands[5]) == {}
    assert scalar_lin(first_b.operands[4]) == {} and scaled_pid(first_b.operands[5]) == 1


@pytest.mark.parametrize("what,pa", [
    ("columns of stride 2", "A + rk[newaxis, :] * 2 + rm[:, newaxis] * lda"),
    ("the rows' offset added twice", "A + rk[newaxis, :] + rm[:, newaxis] * lda + rm[:, newaxis] * lda"),
    ("a uniform offset inside the chain", "A + rk[newaxis, :] + rm[:, newaxis] * lda + K"),
])
def test_spec_matmul_pointer_chains_that_are_not_tiles_keep_cp_async(what: str, pa: str) -> None:
    m = _gpu_ir(_spec_matmul(pa, POINTER_FORMS["spec"][1]), defines=SPEC_TILE, stages=3, warps=4)
    assert not _ops(m, O.TmaLoadOp) and _ops(m, O.AsyncCopyOp), what


def test_masks_of_chained_pointers_become_extents() -> None:
    src = MASKED.replace("A + (rk[newaxis, :] + rm[:, newaxis] * lda)", "A + rk[newaxis, :] + rm[:, newaxis] * lda")
    src = src.replace("B + (rk[:, newaxis] * ldb + rn[newaxis, :])", "B + rn[newaxis, :] + rk[:, newaxis] * ldb")
    assert src.count("(") == MASKED.count("(") - 2
    maps = _maps(_gpu_ir(src))
    assert maps[0].extents == (5, 0, 3, 0) and maps[1].extents == (4, 0, 5, 0)


def test_tma_ignores_the_vector_width_of_the_masks() -> None:
    """K not a multiple of 16: cp.async could only copy 2 bytes at a time and leaves the loop
    alone; TMA copies whole boxes and zero-fills past K."""
    spec = ("16", "16", "16", None, None, None, "16", "16", "16")
    assert not _ops(_gpu_ir(MASKED, spec=spec, tma=False), O.AsyncCopyOp)
    assert len(_ops(_gpu_ir(MASKED, spec=spec), O.TmaLoadOp)) == 8


def test_schedule_filecheck() -> None:
    m = _gpu_ir((KERNELS / "matmul_tutorial.tc").read_text())
    text = round_trip(m)
    filecheck(text, """
CHECK: %[[BARS:[0-9]+]] = tc.local_alloc : tile<4xi64, #shared<vec=1, per_phase=1, max_phase=1, order=[0]>>
CHECK-NEXT: tc.mbarrier_init %[[BARS]]
CHECK: tc.mbarrier_expect %[[BARS]], %{{.*}} {bytes = 49152}
CHECK: tc.tma_load %{{.*}}, %[[BARS]], {{.*}} {extents = [-1, 2147483647, -1, 2147483647], stride = [6, 1], box = [64, 128]}
CHECK: tc.tma_load %{{.*}}, %[[BARS]], {{.*}} {descriptor = 1, base = 1, {{.*}}, box = [64, 64]}
CHECK: tc.mbarrier_expect
CHECK: tc.mbarrier_expect
CHECK: tc.for
CHECK-NEXT: ^(%{{.*}}%read_slot: i32, %write_slot: i32, %phase: i32, %ahead_iter: i32):
CHECK-NEXT: tc.mbarrier_wait %[[BARS]], %read_slot, %phase
CHECK: tc.dot {{.*}}asynchronous = true
CHECK-NEXT: tc.dot_wait
CHECK-NEXT: tc.barrier
CHECK: tc.mbarrier_expect %[[BARS]], %write_slot
CHECK: tc.tma_load {{.*}}%write_slot
CHECK: tc.binary %phase, %{{.*}} {kind = "xor"}
CHECK: tc.yield
CHECK: tc.mbarrier_inval %[[BARS]]
CHECK-NEXT: tc.cmp {{.*}} {predicate = "slt"} : i1
CHECK-NEXT: tc.dot_wait
""")


def test_one_warpgroup_in_flight_dot_needs_no_cta_barrier() -> None:
    """One warpgroup with the dot in flight (4 stages): its own dot_wait(1) proves that the slot
    the next copies overwrite is no longer read, so the loop holds no CTA barrier; with two
    warpgroups one follows the dot_wait (test_schedule_filecheck)."""
    m = _gpu_ir((KERNELS / "matmul_tutorial.tc").read_text(), stages=4, warps=4,
                defines={"TYPE": "half", "MB": 128, "NB": 128, "KB": 64})
    loop = next(op for op in m.walk() if isinstance(op, O.ForOp))
    names = [op.NAME for op in loop.body.ops]
    assert "tc.barrier" not in names
    assert names.index("tc.dot") < names.index("tc.dot_wait") < names.index("tc.mbarrier_expect")


def test_synchronous_dot_keeps_a_barrier_before_the_copies() -> None:
    """One warpgroup and three stages: the copies go at the top, after the wait and a barrier
    that proves every warp is done with the slot they overwrite."""
    m = _gpu_ir((KERNELS / "matmul_tutorial.tc").read_text(), stages=3, warps=4,
                defines={"TYPE": "half", "MB": 128, "NB": 128, "KB": 64})
    loop = next(op for op in m.walk() if isinstance(op, O.ForOp))
    names = [op.NAME for op in loop.body.ops]
    assert names.index("tc.mbarrier_wait") < names.index("tc.barrier") < names.index("tc.tma_load")
    assert names.index("tc.tma_load") < names.index("tc.dot")


@pytest.mark.parametrize(
    "what,spec,arch",
    [
        ("option off", ALIGNED, "sm_90"),
        ("row stride not a multiple of 16 bytes", ("16", "16", "16", None, None, None, None, None, "16"), "sm_90"),
        ("base pointer not 16-byte aligned", (None, None, "16", None, None, None, "16", "16", "16"), "sm_90"),
        ("no TMA before Hopper", ALIGNED, "sm_80"),
    ],
)
def test_falls_back_to_cp_async(what: str, spec: tuple[str | None, ...], arch: str) -> None:
    m = _gpu_ir((KERNELS / "matmul_tutorial.tc").read_text(), spec=spec, tma=what != "option off", arch=arch,
                warps=4, defines={"TYPE": "half", "MB": 64, "NB": 64, "KB": 32})
    assert not _ops(m, O.TmaLoadOp), what


#: tc_torch's operand variants (tc_torch.ops.matmul.A_VARIANTS / B_VARIANTS).
A_VARIANTS = {
    False: {"USE_A": "a", "STRIDE_AK": 1, "STRIDE_AM": "lda", "BROADCAST_AK": "newaxis, :",
            "BROADCAST_AM": ":, newaxis", "SHAPE_A": "MB, KB"},
    True: {"USE_A": "^a", "STRIDE_AK": "lda", "STRIDE_AM": 1, "BROADCAST_AK": ":, newaxis",
           "BROADCAST_AM": "newaxis, :", "SHAPE_A": "KB, MB"},
}
B_VARIANTS = {
    False: {"USE_B": "b", "STRIDE_BK": "ldb", "STRIDE_BN": 1, "BROADCAST_BK": ":, newaxis",
            "BROADCAST_BN": "newaxis, :", "SHAPE_B": "KB, NB"},
    True: {"USE_B": "^b", "STRIDE_BK": 1, "STRIDE_BN": "ldb", "BROADCAST_BK": "newaxis, :",
           "BROADCAST_BN": ":, newaxis", "SHAPE_B": "NB, KB"},
}


def _torch_matmul(trans_a: bool = False, trans_b: bool = False, spec: tuple[str | None, ...] = ("16",) * 12,
                  src: str | None = None) -> O.Module:
    d = {**TILE, **A_VARIANTS[trans_a], **B_VARIANTS[trans_b], "ACC": "float"}
    return _gpu_ir(src or TORCH_MATMUL.read_text(), spec=spec, defines=d)


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_offset_becomes_a_third_map_dimension(trans_a: bool, trans_b: bool) -> None:
    """tc_torch's matmul adds pz * stride_az (program id 1 times a long argument) to the base:
    the batch index becomes the map's third coordinate, its stride the batch stride. The
    transposed variants (M- or N-contiguous tiles) qualify too: the box follows the contiguous
    dimension."""
    m = _torch_matmul(trans_a, trans_b)
    assert not _ops(m, O.AsyncCopyOp)
    a, b = _maps(m)[0], _maps(m)[1]
    # A (arg 0): rows of lda (arg 6), batches of stride_az (arg 9), extents K/M (args 5, 3) per order
    assert a.base == 0 and a.stride == (6, 1, 9, 1)
    assert a.extents == ((3, 0, 5, 0) if trans_a else (5, 0, 3, 0)) + (-1, UNBOUNDED)
    assert a.box == ((64, 64, 1) if trans_a else (64, 128, 1))
    assert b.base == 1 and b.stride == (7, 1, 10, 1)
    assert b.extents == ((5, 0, 4, 0) if trans_b else (4, 0, 5, 0)) + (-1, UNBOUNDED)
    assert b.box == ((64, 256, 1) if trans_b else (64, 64, 1))
    # every copy names the batch coordinate: the program id, or 0 where the batch stride is 0
    for op in _ops(m, O.TmaLoadOp):
        assert len(op.operands) == 4 + 3
        z = op.operands[6]
        assert isinstance(z, O.OpResult) and isinstance(z.op, O.SelectOp)
        cond, pz, zero = z.op.operands
        assert isinstance(pz, O.OpResult) and isinstance(pz.op, O.ProgramIdOp) and pz.op.axis == 1
        assert isinstance(cond, O.OpResult) and isinstance(cond.op, O.CmpOp) and cond.op.predicate == "ne"
        assert cond.op.operands[0] is m.functions[0].args[9 + int(op.descriptor)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("what,spec", [
    ("batch stride not a multiple of 16 elements", ("16",) * 9 + (None, "16", "16")),
    ("row stride not a multiple of 16 elements", ("16",) * 6 + (None, "16", "16", "16", "16", "16")),
])
def test_batched_loads_keep_cp_async(what: str, spec: tuple[str | None, ...]) -> None:
    m = _torch_matmul(spec=spec)
    assert not _ops(m, O.TmaLoadOp) and _ops(m, O.AsyncCopyOp), what


def test_offset_not_a_product_by_an_argument_keeps_cp_async() -> None:
    src = TORCH_MATMUL.read_text().replace("A + pz * stride_az + (", "A + (long)(pz * pz) * stride_az + pz + (")
    m = _torch_matmul(src=src)
    assert not _ops(m, O.TmaLoadOp)


def test_mask_against_a_value_computed_in_the_loop_is_rejected() -> None:
    src = MASKED.replace("rk[newaxis, :] < k &&", "rk[newaxis, :] < k * 2 &&")
    m = _gpu_ir(src)
    assert not _ops(m, O.TmaLoadOp)


def test_scalar_lin() -> None:
    from tc_ir.builder import Builder  # noqa: F401  (the forms are read off real IR below)

    m = _gpu_ir(MASKED, tma=False, stages=1)
    f = m.functions[0]
    k_minus_iv = next(op for op in f.walk() if isinstance(op, O.BinaryOp) and op.kind == "sub"
                      and op.operands[0] is f.args[5])
    lin = scalar_lin(k_minus_iv.result)
    assert lin == {f.args[5]: 1, k_minus_iv.operands[1]: -1}


def test_rows_only_a_narrow_swizzle_divides_take_partial_128_byte_panels() -> None:
    # 176 halves (352 bytes): 32-byte swizzle alone, or 128-byte panels of 64, 64 and 48 stored
    # whole for wgmma operands (16 halves of padding), 160 (32 of 192) too; 96 halves (32 of 128,
    # too much) keep the 64-byte swizzle; 128-byte multiples are whole panels either way
    from tc_ir.layouts import Shared
    from tc_ir.types import F16
    from tc_opt.dot_layouts import shared_layout

    assert shared_layout((64, 176), (1, 0), F16, True) == Shared(8, 4, 2, (1, 0))
    assert shared_layout((64, 176), (1, 0), F16, True, partial_panels=True) == Shared(8, 1, 8, (1, 0))
    assert shared_layout((64, 160), (1, 0), F16, True, partial_panels=True) == Shared(8, 1, 8, (1, 0))
    assert shared_layout((64, 96), (1, 0), F16, True, partial_panels=True) == Shared(8, 2, 4, (1, 0))
    assert shared_layout((64, 256), (1, 0), F16, True, partial_panels=True) == Shared(8, 1, 8, (1, 0))
    assert shared_layout((64, 48), (1, 0), F16, True, partial_panels=True) == Shared(8, 4, 2, (1, 0))  # (one row of 96 bytes)


def test_storage_of_partial_panels() -> None:
    from tc_ir.layouts import Shared
    from tc_ir.types import F16, F32, TileType

    wide = Shared(8, 1, 8, (2, 1, 0))  # 128-byte panels along the last dimension
    assert TileType((3, 64, 176), F16, wide).storage_numel == 3 * 64 * 192  # panels 64, 64, 48 (+16)
    assert TileType((3, 64, 256), F16, wide).storage_numel == 3 * 64 * 256
    assert TileType((3, 64, 40), F16, wide).storage_numel == 3 * 64 * 40  # (narrower than a panel)
    assert TileType((3, 64, 176), F16, Shared(8, 4, 2, (2, 1, 0))).storage_numel == 3 * 64 * 176  # 32-byte panels
    assert TileType((64, 40), F32, Shared(4, 1, 8, (1, 0))).storage_numel == 64 * 64  # 32 floats a panel
    assert TileType((64, 176), F16, None).storage_numel == 64 * 176


def test_partial_panels_copy_whole_boxes() -> None:
    # a 128 x 176 tile of B (rows N-contiguous): three 64-column boxes per stage, and the barrier
    # expects the bytes of the whole boxes (the columns past the tile are read and not used)
    m = _gpu_ir((KERNELS / "matmul_tutorial.tc").read_text(), defines={"TYPE": "half", "MB": 128, "NB": 176, "KB": 64})
    a, b = _maps(m)[0], _maps(m)[1]
    assert (a.box, a.swizzle) == ((64, 128), 128) and (b.box, b.swizzle) == ((64, 64), 128)
    expects = _ops(m, O.MBarrierExpectOp)
    assert expects and all(op.bytes == 2 * (128 * 64 + 64 * 192) for op in expects)  # type: ignore[attr-defined]
    from tc_ir.types import TileType

    types = [op.results[0].type for op in _ops(m, O.LocalAllocOp)]
    wide = [t for t in types if isinstance(t, TileType) and t.shape[-1] == 176]
    assert wide and all(t.storage_numel == 4 * 64 * 192 for t in wide)  # (4 stages)
