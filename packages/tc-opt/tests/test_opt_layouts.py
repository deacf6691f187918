"""Alignment analysis and layout assignment on the spec's kernels (through the real front end)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import tc_lang
from tc_ir.layouts import Blocked, DotOperand, Slice
from tc_ir.lower import lower
from tc_ir.ops import ConvertLayoutOp, DotOp, LoadOp, Module, ReduceOp, StoreOp, TransOp
from tc_ir.types import TileType
from tc_opt import AxisAnalysis, CompileOptions, blocked_for, gpu_pipeline
from tc_opt.layout_utils import distributed_for
from tc_opt.pass_manager import module_text
from tc_opt.transpose_layout import is_register_trans, permute_blocked

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"

ADD = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
  int pid = get_program_id(0);
  int off[BLOCK] = pid * BLOCK + 0 ... BLOCK;
  bool check[BLOCK] = off < N;
  *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""


def _module(src: str, defines: dict[str, object]) -> Module:
    return lower(tc_lang.frontend(src, defines))  # type: ignore[arg-type]


def _laid_out(src: str, defines: dict[str, object], **kw: object) -> Module:
    m = _module(src, defines)
    gpu_pipeline(CompileOptions(**kw)).run(m)  # type: ignore[arg-type]
    return m


def test_axis_info_vector_add() -> None:
    m = _module(ADD, {"TYPE": "float", "BLOCK": 1024})
    from tc_opt import SpecializeArguments

    SpecializeArguments(CompileOptions(specialization=(None, None, None, "divisible_by_16"))).run(m)
    f = m.functions[0]
    axes = AxisAnalysis(f)
    loads = [op for op in f.walk() if isinstance(op, LoadOp)]
    ptr = axes.info(loads[0].operands[0])
    assert ptr.contiguity == (1024,)
    assert ptr.divisibility == (4,)  # pointers aligned to the element (no specialization)
    mask = axes.info(loads[0].operands[1])
    assert mask.constancy == (16,)  # off < N with N % 16 == 0


WRAPPED = """
__global__ void copy(half* Y, half* X, int M) {
  int off[BLOCK] = (get_program_id(0) * BLOCK + 0 ... BLOCK) % M;
  *(Y + off) = *(X + off);
}
"""


@pytest.mark.parametrize("spec, contiguity", [("divisible_by_16", 16), ("divisible_by_8", 8), (None, 1)])
def test_remainder_by_a_runtime_value_keeps_runs(spec: str | None, contiguity: int) -> None:
    # Triton's tutorial wraps rows with `% M`: with M a multiple of 16 (specialized) the offsets
    # stay 16-long aligned runs, so the loads are 16-byte vectors; a multiple of 8 gives runs of
    # 8 halves, 16 bytes too; without, nothing is known
    m = _module(WRAPPED, {"BLOCK": 256})
    from tc_opt import SpecializeArguments

    aligned = ("divisible_by_16", "divisible_by_16")
    SpecializeArguments(CompileOptions(specialization=(*aligned, spec))).run(m)
    f = m.functions[0]
    axes = AxisAnalysis(f)
    (load,) = [op for op in f.walk() if isinstance(op, LoadOp)]
    info = axes.info(load.operands[0])
    assert info.contiguity == (contiguity,)
    assert info.divisibility == ((16,) if spec else (2,))  # bytes: the 16-byte aligned X
    laid = _laid_out(WRAPPED, {"BLOCK": 1024}, specialization=(*aligned, spec))
    (load,) = [op for op in laid.walk() if isinstance(op, LoadOp)]
    layout = load.result.type.layout  # type: ignore[union-attr]
    assert isinstance(layout, Blocked) and layout.size_per_thread == ((8,) if spec else (1,))


def test_blocked_for() -> None:
    assert blocked_for((1024,), 4, vec=4) == Blocked([4], [32], [4], [0])
    assert blocked_for((128,), 4, vec=4) == Blocked([1], [32], [4], [0])
    b = blocked_for((64, 64), 4, order=(1, 0), vec=4)
    assert b.size_per_thread == (1, 4) and b.threads_per_warp == (2, 16) and b.warps_per_cta == (4, 1)


def test_vector_add_layout_reaches_128_bits() -> None:
    for type_, spt in (("float", 4), ("half", 8)):
        m = _laid_out(ADD, {"TYPE": type_, "BLOCK": 1024})
        for op in m.walk():
            for r in op.results:
                if isinstance(r.type, TileType):
                    assert r.type.layout == Blocked([spt], [32], [4], [0])
        assert m.attributes["num_warps"] == 4 and m.attributes["shared_bytes"] == 0
        assert "convert_layout" not in module_text(m)


def test_softmax_reduces_to_scalars() -> None:
    m = _laid_out((KERNELS / "softmax.tc").read_text(), {"BLOCK": 1024})
    reduces = [op for op in m.walk() if isinstance(op, ReduceOp)]
    assert len(reduces) == 2
    assert all(not isinstance(r.result.type, TileType) for r in reduces)
    assert m.attributes["shared_bytes"] > 0


def test_transpose_between_memory_accesses_keeps_whole_rows() -> None:
    # px = X + rm[:, newaxis] + rn[newaxis, :] * ldx is contiguous along dim 0, py along its dim 0
    # (rn): a layout in which the trans renames registers splits a warp's lanes between the two
    # dimensions (8 x 4), so one side reads or writes 16 of every 128 bytes per access. The loads
    # and stores keep their own coalesced layouts (32 lanes along the contiguous dimension) and
    # the trans goes through shared memory.
    from tc_opt.shared_alloc import trans_exchange_bytes

    m = _laid_out((KERNELS / "transpose.tc").read_text(), {"TYPE": "float", "TM": 32, "TN": 64})
    trans = [op for op in m.walk() if isinstance(op, TransOp)]
    assert len(trans) == 1
    src, dst = trans[0].operands[0].type, trans[0].result.type
    assert isinstance(src, TileType) and isinstance(dst, TileType)
    assert isinstance(src.layout, Blocked) and isinstance(dst.layout, Blocked)
    assert src.layout.order[0] == 0 and src.layout.threads_per_warp[0] == 32
    assert dst.layout.order[0] == 0 and dst.layout.threads_per_warp[0] == 32
    assert not is_register_trans(src, dst, trans[0].perm)
    for op in m.walk():
        if isinstance(op, StoreOp):
            assert op.operands[1].type.layout == dst.layout  # type: ignore[union-attr]
        if isinstance(op, LoadOp):
            assert op.result.type.layout == src.layout  # type: ignore[union-attr]
    assert m.attributes["shared_bytes"] == trans_exchange_bytes(src, dst, trans[0].perm) > 32 * 64 * 4
    assert not any(isinstance(op, ConvertLayoutOp) for op in m.walk())
    # the index ranges feeding both pointer tiles are re-materialized in slices, not converted
    assert any(isinstance(r.type, TileType) and isinstance(r.type.layout, Slice) for op in m.walk() for r in op.results)


SPEC6 = ("divisible_by_16",) * 6


@pytest.mark.parametrize("type_, eb, vec", [("float", 4, 4), ("half", 2, 8)])
def test_aligned_transpose_accesses_whole_lines_through_shared_memory(type_: str, eb: int, vec: int) -> None:
    # tc_torch's kernel with the runtime's specialization: 16-byte vectors on both sides, and each
    # warp-wide access covers whole 128-byte rows (a register transposition gave 8-byte stores of
    # 32 bytes of 8 rows for 16-bit 64 x 64 tiles: 0.96x Triton on an H100; this layout ~1.0x)
    from tc_opt.transpose_layout import row_bytes

    src_text = (KERNELS.parents[2] / "tc-torch" / "src" / "tc_torch" / "kernels" / "transpose.tc").read_text()
    m = _laid_out(src_text, {"TYPE": type_, "TM": 64, "TN": 64}, specialization=SPEC6)
    trans = [op for op in m.walk() if isinstance(op, TransOp)][0]
    src, dst = trans.operands[0].type, trans.result.type
    assert isinstance(src, TileType) and isinstance(dst, TileType)
    assert isinstance(src.layout, Blocked) and isinstance(dst.layout, Blocked)
    assert src.layout.size_per_thread == (1, vec) and dst.layout.size_per_thread == (1, vec)
    assert row_bytes(src.layout, 1, vec, eb, 64) >= 128 and row_bytes(dst.layout, 1, vec, eb, 64) >= 128
    assert not is_register_trans(src, dst, trans.perm)


@pytest.mark.parametrize("tm, tn", [(8, 8), (16, 16), (4, 64)])
def test_small_aligned_transpose_still_renames_registers(tm: int, tn: int) -> None:
    # tiles whose rows are short enough that lanes split between both dimensions still cover them
    # whole: the trans moves no data (no shared memory)
    src_text = (KERNELS.parents[2] / "tc-torch" / "src" / "tc_torch" / "kernels" / "transpose.tc").read_text()
    m = _laid_out(src_text, {"TYPE": "float", "TM": tm, "TN": tn}, specialization=SPEC6, num_warps=1)
    trans = [op for op in m.walk() if isinstance(op, TransOp)][0]
    src, dst = trans.operands[0].type, trans.result.type
    assert isinstance(src, TileType) and isinstance(dst, TileType)
    assert dst.layout == permute_blocked(src.layout, trans.perm)  # type: ignore[arg-type]
    assert is_register_trans(src, dst, trans.perm)
    assert m.attributes["shared_bytes"] == 0


COMPUTED_TRANSPOSE = """
__global__ void t(float* Y) {
  int rm[TM] = 0 ... TM;
  int rn[TN] = 0 ... TN;
  float a[TM, TN] = rm[:, newaxis] * 1.5f + rn[newaxis, :];
  float* py[TN, TM] = Y + rm[newaxis, :] * TN + rn[:, newaxis];
  *py = ^a;
}
"""


def test_transpose_of_a_computed_tile_goes_through_shared_memory() -> None:
    m = _laid_out(COMPUTED_TRANSPOSE, {"TM": 32, "TN": 64})
    trans = [op for op in m.walk() if isinstance(op, TransOp)]
    assert len(trans) == 1
    src, dst = trans[0].operands[0].type, trans[0].result.type
    assert isinstance(src, TileType) and isinstance(dst, TileType)
    assert not is_register_trans(src, dst, trans[0].perm)
    assert m.attributes["shared_bytes"] == 32 * (64 + 1) * 4  # rows of 256 bytes padded by 4 (smem_banks)


def test_matmul_dot_operands_are_staged() -> None:
    src = (KERNELS / "matmul.tc").read_text()
    m = _laid_out(src, {"TYPE": "float", "TM": 64, "TN": 64, "TK": 8})
    dots = [op for op in m.walk() if isinstance(op, DotOp)]
    assert len(dots) == 1
    a, b, acc = (v.type for v in dots[0].operands)
    assert isinstance(a, TileType) and isinstance(a.layout, DotOperand) and a.layout.operand_index == 0
    assert isinstance(b, TileType) and isinstance(b.layout, DotOperand) and b.layout.operand_index == 1
    assert isinstance(acc, TileType) and isinstance(acc.layout, Blocked)
    assert dots[0].result.type == acc
    assert m.attributes["shared_bytes"] == 3 * (64 * 8 + 8 * 64) * 4  # num_stages=3 buffers (pipelined)


def test_fma_dot_operands_in_shared_memory_stay_live_until_the_dot() -> None:
    # the spec's pre-fetching matmul stages loop-carried fp32 operands with local_alloc; the FMA dot
    # reads both buffers where it runs, so they must not share memory (a overwritten by b was a
    # wrong result on the GPU)
    from tc_ir.ops import LocalAllocOp
    from tc_opt import allocate

    src = (KERNELS / "matmul_prefetch.tc").read_text()
    m = _laid_out(src, {"TYPE": "float", "TM": 64, "TN": 64, "TK": 64})
    f = m.functions[0]
    allocs = [op for op in f.walk() if isinstance(op, LocalAllocOp)]
    assert len(allocs) == 2
    offsets = allocate(f).offsets
    a, b = sorted(offsets[op] for op in allocs)
    assert b - a >= 64 * 64 * 4
    assert m.attributes["shared_bytes"] >= 2 * 64 * 64 * 4


BIASED_MATMUL = """
__global__ void biased(half* A, half* B, float* bias, OUT* C, int M, int N, int K) {
  int rm[64] = get_program_id(0) * 64 + 0 ... 64;
  int rn[64] = get_program_id(1) * 64 + 0 ... 64;
  int rk[32] = 0 ... 32;
  half* pa[64, 32] = A + rm[:, newaxis] * K + rk[newaxis, :];
  half* pb[32, 64] = B + rk[:, newaxis] * N + rn[newaxis, :];
  float acc[64, 64] = 0;
  for (int k = K; k > 0; k -= 32) {
    acc += *pa @ *pb;
    pa += 32;
    pb += 32 * N;
  }
  *?(rm[:, newaxis] < M && rn[newaxis, :] < N)(C + rm[:, newaxis] * N + rn[newaxis, :]) = USE;
}
"""


@pytest.mark.parametrize("out, use, arch, ws, kept", [
    ("float", "acc", "sm_90", True, True),
    ("float", "acc", "sm_90", False, False),  # (a plain kernel's exchange reuses the pipeline's slots)
    ("float", "acc + *(bias + rn)[newaxis, :]", "sm_90", True, False),  # (an add: not the accumulator)
    ("half", "acc", "sm_90", True, False),
    ("float", "acc", "sm_80", True, False),
])
def test_a_float_wgmma_accumulator_is_stored_where_it_lies(out: str, use: str, arch: str, ws: bool,
                                                           kept: bool) -> None:
    # 32-bit accumulator pairs fill whole sectors: in a warp-specialized kernel a store of the
    # wgmma accumulator itself keeps its layout (no exchange through shared memory); 16-bit
    # results and mma.sync's are exchanged
    from tc_ir.layouts import Mma

    m = _laid_out(BIASED_MATMUL, {"OUT": out, "USE": use}, arch=arch, num_warps=4, warp_specialize=ws)
    stores = [op for op in m.walk() if isinstance(op, StoreOp)]
    assert len(stores) == 1
    layouts = [v.type.layout for v in stores[0].operands if isinstance(v.type, TileType)]
    assert len(layouts) == 3 and len(set(layouts)) == 1  # pointers, value and mask agree
    assert isinstance(layouts[0], Mma) is kept
    converts = [op for op in m.walk() if isinstance(op, ConvertLayoutOp)
                and isinstance(op.operands[0].type, TileType) and isinstance(op.operands[0].type.layout, Mma)]
    assert (not converts) is kept


ROW_MAX = """
__global__ void row_max(half* A, half* B, float* out) {
  int rm[BM] = 0 ... BM;
  int rk[32] = 0 ... 32;
  int rn[64] = 0 ... 64;
  float s[BM, 64] = *(A + rm[:, newaxis] * 32 + rk[newaxis, :]) @ *(B + rk[:, newaxis] * 64 + rn[newaxis, :]);
  *(out + rm) = s[:, max];
}
"""


@pytest.mark.parametrize("bm, arch, warps_along_n", [(32, "sm_90", 2), (64, "sm_80", 2), (64, "sm_90", 1)])
def test_a_reduction_of_an_accumulator_across_warps_gets_shared_memory(bm: int, arch: str, warps_along_n: int) -> None:
    # mma.sync's accumulator spreads N over 2 of 4 warps: the row maxima meet through shared
    # memory (the lowering found none allocated for an Mma source); wgmma's warps split M only
    from tc_ir.layouts import Mma
    from tc_opt.shared_alloc import scratch_bytes

    m = _laid_out(ROW_MAX, {"BM": bm}, arch=arch, num_warps=4)
    (red,) = [op for op in m.walk() if isinstance(op, ReduceOp)]
    src = red.operands[0].type
    assert isinstance(src, TileType) and isinstance(src.layout, Mma)
    assert scratch_bytes(red) == (warps_along_n * bm * 4 if warps_along_n > 1 else 0)


# ------------------------------------------------------ tile dimensions that are not powers of two


def _cover(lay: Blocked, d: int) -> int:
    return lay.size_per_thread[d] * lay.threads_per_warp[d] * lay.warps_per_cta[d]


@pytest.mark.parametrize("shape,warps", [((128, 192), 8), ((48, 96), 4), ((48, 96), 8), ((16, 48), 8),
                                         ((96, 64), 4), ((64, 48), 4)])
def test_blocked_layouts_cover_dimensions_of_multiples_of_16_in_whole_blocks(
        shape: tuple[int, int], warps: int) -> None:
    for vec in (1, 4, 8):
        lay = blocked_for(shape, warps, vec=vec)
        assert math.prod(lay.threads_per_warp) == 32 and math.prod(lay.warps_per_cta) == warps
        for d, n in enumerate(shape):
            cover = _cover(lay, d)
            assert n % cover == 0 or cover % n == 0, (shape, warps, vec, lay)


def test_blocked_layouts_of_power_of_two_tiles_are_unchanged() -> None:
    # the rule for multiples of 16 leaves the layouts of power-of-two tiles as they were
    assert blocked_for((128, 256), 8, vec=8) == Blocked([1, 8], [1, 32], [8, 1], [1, 0])
    assert blocked_for((64, 64), 4, vec=4) == Blocked([1, 4], [2, 16], [4, 1], [1, 0])
    assert blocked_for((1024,), 4, vec=4) == Blocked([4], [32], [4], [0])
    assert blocked_for((32,), 4) == Blocked([1], [32], [4], [0])  # (warps replicate)
    assert distributed_for((64, 64), 4, vec=4) == blocked_for((64, 64), 4, vec=4)


@pytest.mark.parametrize("n,warps", [(96, 4), (48, 4), (192, 4), (192, 8), (80, 2)])
def test_a_1d_tile_fewer_than_its_threads_gets_a_slice_whose_removed_dimension_replicates(
        n: int, warps: int) -> None:
    lay = distributed_for((n,), warps, vec=4)
    assert isinstance(lay, Slice) and lay.dim == 0 and isinstance(lay.parent, Blocked)
    parent = lay.parent
    assert math.prod(parent.threads_per_warp) == 32 and math.prod(parent.warps_per_cta) == warps
    assert n % _cover(parent, 1) == 0  # whole blocks along the tile; the rest along the removed dim
    assert distributed_for((384,), 4) == blocked_for((384,), 4) == Blocked([1], [32], [4], [0])
