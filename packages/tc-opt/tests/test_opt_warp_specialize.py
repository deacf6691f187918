"""Warp specialization (CompileOptions.warp_specialize, tc_opt.warp_specialize): a producer warp
issues the TMA copies of a pipelined wgmma loop, the program's warps only compute; which loops
qualify, the schedule of both sides, and the shared memory the epilogue shares with the slots."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.testing import filecheck, round_trip
from tc_ir.types import TileType
from tc_ir.verifier import IRVerificationError, verify
from tc_opt import CompileOptions
from tc_opt.pipeline import gpu_pipeline
from tc_opt.shared_alloc import scratch_bytes

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
ALIGNED = ("16", "16", "16", None, None, None, "16", "16", "16")
TILE = {"TYPE": "half", "MB": 128, "NB": 256, "KB": 64}
TUTORIAL = (KERNELS / "matmul_tutorial.tc").read_text()


def _gpu_ir(src: str = TUTORIAL, ws: bool = True, stages: int = 4, warps: int = 8,
            defines: dict[str, object] | None = None) -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(src, defines or TILE, None, "<test>")
    opts = CompileOptions(arch="sm_90", num_warps=warps, num_stages=stages, specialization=ALIGNED,
                          warp_specialize=ws)
    gpu_pipeline(opts).run(m)
    return m


def _ws(m: O.Module) -> list[O.WarpSpecializeOp]:
    return [op for op in m.walk() if isinstance(op, O.WarpSpecializeOp)]


def test_schedule_filecheck() -> None:
    m = _gpu_ir()
    assert m.attributes["producer_warps"] == 1
    filecheck(round_trip(m), """
CHECK: %[[FULL:[0-9]+]] = tc.local_alloc : tile<4xi64
CHECK-NEXT: %[[EMPTY:[0-9]+]] = tc.local_alloc : tile<4xi64
CHECK-NEXT: tc.mbarrier_init %[[FULL]]
CHECK-NEXT: tc.mbarrier_init %[[EMPTY]] {count = 8}
CHECK: tc.warp_specialize ({
CHECK: tc.for
CHECK-NEXT: ^(%{{[0-9]+}}: i32, %slot: i32, %phase: i32, %iter: i32):
CHECK: %[[FREE:[0-9]+]] = tc.binary %phase, %{{[0-9]+}} {kind = "xor"}
CHECK-NEXT: tc.mbarrier_wait %[[EMPTY]], %slot, %[[FREE]]
CHECK: tc.mbarrier_expect %[[FULL]], %slot, %{{[0-9]+}} {bytes = 49152}
CHECK: tc.tma_load {{.*}}, %[[FULL]], %slot
CHECK: tc.tma_load {{.*}}, %[[FULL]], %slot
CHECK: tc.yield
CHECK: tc.yield
CHECK-NEXT: }, {
CHECK: tc.for
CHECK-NEXT: ^({{.*}}%read_slot: i32, %phase_1: i32, %release_slot: i32):
CHECK-NEXT: tc.mbarrier_wait %[[FULL]], %read_slot, %phase_1
CHECK-NOT: tc.barrier
CHECK: tc.dot {{.*}}asynchronous = true
CHECK-NEXT: tc.dot_wait {{.*}}{pending = 1}
CHECK-NEXT: %[[LATER:[0-9]+]] = tc.cmp
CHECK-NEXT: tc.mbarrier_arrive %[[EMPTY]], %release_slot, %[[LATER]]
CHECK-NOT: tc.tma_load
CHECK: tc.yield {{.*}}, %read_slot
CHECK: tc.mbarrier_inval %[[FULL]]
CHECK-NEXT: tc.mbarrier_inval %[[EMPTY]]
CHECK-NEXT: tc.cmp {{.*}} {predicate = "slt"} : i1
CHECK-NEXT: tc.dot_wait
CHECK: tc.store
CHECK: tc.yield
CHECK-NEXT: })
CHECK-NEXT: tc.return
""")


def test_copies_only_in_the_producer() -> None:
    ws = _ws(_gpu_ir())[0]
    assert [op.NAME for op in ws.producer.walk() if op.NAME in ("tc.tma_load", "tc.mbarrier_expect")]
    assert not [op for op in ws.consumer.walk() if isinstance(op, (O.TmaLoadOp, O.MBarrierExpectOp))]
    assert not [op for op in ws.producer.walk() if isinstance(op, (O.DotOp, O.StoreOp, O.BarrierOp))]


def test_epilogue_reuses_the_slots() -> None:
    """The producer's region comes first, so the slots are dead after the consumer's loop and the
    epilogue's exchange buffer lies in them: the only extra shared memory is the empty barriers."""
    plain = _gpu_ir(ws=False)
    assert not _ws(plain)
    assert _gpu_ir().attributes["shared_bytes"] == plain.attributes["shared_bytes"] + 4 * 8


@pytest.mark.parametrize("stages,warps,nb", [(3, 8, 256), (4, 4, 128), (2, 8, 128)])
def test_other_schedules(stages: int, warps: int, nb: int) -> None:
    m = _gpu_ir(stages=stages, warps=warps, defines={**TILE, "NB": nb})
    ws = _ws(m)
    assert len(ws) == 1
    init = [op for op in m.walk() if isinstance(op, O.MBarrierInitOp)]
    assert [op.count for op in init] == [1, warps]


@pytest.mark.parametrize("warps,limit", [(4, 255), (5, 255), (8, 255), (9, 168), (12, 168), (13, 128)])
def test_registers_per_thread_follow_the_fullest_partition(warps: int, limit: int) -> None:
    from tc_opt.warp_specialize import registers_per_thread

    assert registers_per_thread(warps) == limit


def test_an_accumulator_too_large_for_nine_warps_keeps_the_plain_pipeline() -> None:
    """256x192 float over 8 warps is 192 registers a thread; 9 warps allow 168 (ptxas spilled and
    serialized the wgmma). The loop stays plain; a persistent grid does without the producer."""
    from tc_nvptx.compiler import frontend_module
    from tc_opt.warp_specialize import accumulator_registers

    wide = {**TILE, "MB": 256, "NB": 192, "KB": 32}
    m = _gpu_ir(stages=3, defines=wide)
    assert not _ws(m) and "producer_warps" not in m.attributes
    accumulators = [op.result.type for op in m.walk() if isinstance(op, O.DotOp)]
    assert accumulators and isinstance(accumulators[0], TileType)
    assert accumulator_registers(accumulators[0], 8) == 192
    persistent = frontend_module(TUTORIAL, wide, None, "<test>")
    gpu_pipeline(CompileOptions(arch="sm_90", num_warps=8, num_stages=3, specialization=ALIGNED,
                                warp_specialize=True, persistent=True)).run(persistent)
    assert not _ws(persistent) and persistent.attributes.get("persistent") is True
    # 128 registers of accumulator (128x256 over 8 warps) leave room: specialized
    assert _ws(_gpu_ir(stages=3))


MATMUL = Path(__file__).resolve().parents[2] / "tc-torch" / "src" / "tc_torch" / "kernels" / "matmul.tc"
#: tc_torch's matmul in float (tf32) with B transposed (K-contiguous), and A as given (K-contiguous)
#: or transposed (M-contiguous: wgmma reads it into registers).
A_BT = {"TYPE": "float", "ACC": "float", "USE_A": "a", "STRIDE_AK": "1", "STRIDE_AM": "lda",
        "BROADCAST_AK": "newaxis,:", "BROADCAST_AM": ":,newaxis", "SHAPE_A": "MB,KB", "USE_B": "^b",
        "STRIDE_BK": "1", "STRIDE_BN": "ldb", "BROADCAST_BK": "newaxis,:", "BROADCAST_BN": ":,newaxis",
        "SHAPE_B": "NB,KB", "MB": 128, "NB": 256, "KB": 32}
AT_BT = {**A_BT, "USE_A": "^a", "STRIDE_AK": "lda", "STRIDE_AM": "1", "BROADCAST_AK": ":,newaxis",
         "BROADCAST_AM": "newaxis,:", "SHAPE_A": "KB,MB"}


@pytest.mark.parametrize("defines,specialized", [(A_BT, True), (AT_BT, False)])
def test_a_read_into_registers_keeps_the_plain_pipeline(defines: dict[str, object], specialized: bool) -> None:
    """A tf32 A staged M-contiguous is read into registers each K step: behind a producer warp
    ptxas serialized that loop's wgmma (C7512), so only the K-contiguous A gets one."""
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(MATMUL.read_text(), defines, None, "matmul.tc")
    gpu_pipeline(CompileOptions(arch="sm_90", num_warps=8, num_stages=3, specialization=("16",) * 12,
                                fp32_dot="tf32", warp_specialize=True, persistent=True)).run(m)
    assert bool(_ws(m)) is specialized
    assert m.attributes.get("persistent") is True


#: A store before the loop: the producer warp would run it too (with the layouts of the program's
#: warps), so the loop keeps the plain TMA pipeline.
STORE_FIRST = TUTORIAL.replace("// reduction loop", "*(C + pid) = 0;\n// reduction loop")


def test_effects_before_the_loop_keep_the_plain_pipeline() -> None:
    assert STORE_FIRST != TUTORIAL
    m = _gpu_ir(STORE_FIRST)
    assert not _ws(m) and "producer_warps" not in m.attributes
    assert [op for op in m.walk() if isinstance(op, O.TmaLoadOp)]


def test_without_tma_nothing_is_specialized() -> None:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(TUTORIAL, TILE, None, "<test>")
    gpu_pipeline(CompileOptions(arch="sm_90", num_warps=8, num_stages=4, specialization=ALIGNED, tma=False,
                                warp_specialize=True)).run(m)
    assert not _ws(m)
    assert [op for op in m.walk() if isinstance(op, O.AsyncCopyOp)]


def test_verifier_checks_the_regions() -> None:
    bad = O.WarpSpecializeOp.create([], [], {"producer_warps": 0}, [O.Block(), O.Block()])
    f = O.Function("k", O.Block())
    f.body.append(bad)
    f.body.append(O.ReturnOp.create([], []))
    with pytest.raises(IRVerificationError) as e:
        verify(f)
    text = str(e.value)
    assert "producer_warps must be >= 1" in text and "a region does not end with tc.yield" in text


def _persistent(src: str = TUTORIAL, stages: int = 3) -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(src, TILE, None, "<test>")
    gpu_pipeline(CompileOptions(arch="sm_90", num_warps=8, num_stages=stages, specialization=ALIGNED,
                                warp_specialize=True, persistent=True)).run(m)
    return m


def test_persistent_schedule_filecheck() -> None:
    """Both roles loop over the programs t = cta, cta + ctas, ... of the grid the runtime passes
    (tc.grid_dim), carrying their slot and phase from one program to the next; the consumers
    release a program's last slot after its final dot_wait."""
    m = _persistent()
    assert m.attributes["persistent"] is True
    filecheck(round_trip(m), """
CHECK: %[[FULL:[0-9]+]] = tc.local_alloc : tile<3xi64
CHECK-NEXT: %[[EMPTY:[0-9]+]] = tc.local_alloc : tile<3xi64
CHECK: %[[CTA:[0-9]+]] = tc.program_id {axis = 0}
CHECK-NEXT: %[[CTAS:[0-9]+]] = tc.num_programs {axis = 0}
CHECK-NEXT: %[[GX:[0-9]+]] = tc.grid_dim {axis = 0}
CHECK-NEXT: %[[GY:[0-9]+]] = tc.grid_dim {axis = 1}
CHECK-NEXT: %[[GZ:[0-9]+]] = tc.grid_dim {axis = 2}
CHECK: %[[COUNT:[0-9]+]] = tc.binary %{{[0-9]+}}, %[[GZ]] {kind = "mul"}
CHECK: tc.warp_specialize ({
CHECK: %[[SLOTS:[0-9]+]], %{{[0-9]+}} = tc.for %[[CTA]], %[[COUNT]], %[[CTAS]]
CHECK-NEXT: ^(%program: i32, %[[S0:[0-9]+]]: i32, %[[P0:[0-9]+]]: i32):
CHECK: %[[PID:[0-9]+]] = tc.binary %program, %[[GX]] {kind = "urem"}
CHECK: %group_id = tc.binary %[[PID]], %width {kind = "sdiv"}
CHECK: tc.for %{{[0-9]+}}, %K, %{{[0-9]+}}, %[[S0]], %[[P0]], %{{[0-9]+}}
CHECK: tc.mbarrier_wait %[[EMPTY]], %slot
CHECK: tc.tma_load
CHECK: }, {
CHECK: tc.for %[[CTA]], %[[COUNT]], %[[CTAS]]
CHECK-NEXT: ^(%program_1: i32, %[[R0:[0-9]+]]: i32, %[[Q0:[0-9]+]]: i32):
CHECK: tc.binary %program_1, %[[GX]] {kind = "urem"}
CHECK: %{{.*}} = tc.for %{{[0-9]+}}, %K, %{{[0-9]+}}, %acc, %pa, %pb, %[[R0]], %[[Q0]], %{{[0-9]+}}
CHECK: tc.mbarrier_wait %[[FULL]], %read_slot
CHECK: tc.mbarrier_arrive %[[EMPTY]], %release_slot
CHECK: %[[LAST:[0-9]+]] = tc.dot_wait
CHECK-NEXT: %[[RAN:[0-9]+]] = tc.cmp
CHECK-NEXT: tc.mbarrier_arrive %[[EMPTY]], %{{[0-9]+}}, %[[RAN]]
CHECK: tc.store
CHECK-NEXT: tc.yield
CHECK: tc.mbarrier_inval %[[FULL]]
CHECK-NEXT: tc.mbarrier_inval %[[EMPTY]]
CHECK-NEXT: tc.yield
CHECK-NEXT: })
CHECK-NEXT: tc.return
""")
    # the user's program ids are all replaced (the two left are the CTA's own, at the top)
    ids = [op for op in m.walk() if isinstance(op, (O.ProgramIdOp, O.NumProgramsOp))]
    assert len(ids) == 2 and all(op.parent is m.functions[0].body for op in ids)


def test_persistent_epilogue_has_shared_memory_of_its_own() -> None:
    """The producer loads the next program's tiles during the epilogue: the slots stay reserved,
    so the exchange buffer of the epilogue needs memory beside them. With 4 stages of 128x256
    the whole tile's buffer does not fit: the exchange runs in two rounds of 128 columns
    (tc_opt.exchange_rounds), each in a buffer of its own beside the pipeline."""
    plain = _gpu_ir(stages=3)
    assert _persistent().attributes["shared_bytes"] > plain.attributes["shared_bytes"] + 128 * 256 * 2
    (exchange,) = [op for op in _persistent().walk() if isinstance(op, O.ConvertLayoutOp) and scratch_bytes(op)]
    assert exchange.columns == 0
    four = _persistent(stages=4)
    (exchange,) = [op for op in four.walk() if isinstance(op, O.ConvertLayoutOp) and scratch_bytes(op)]
    assert exchange.columns == 128
    assert four.attributes["shared_bytes"] > 4 * (128 + 256) * 64 * 2 + 128 * 128 * 2


def test_an_early_return_ends_only_its_program() -> None:
    """The front end turns `return` into structured control flow, so in a persistent kernel a
    program's early return skips the rest of that program only, not the CTA's later programs."""
    src = TUTORIAL.replace("// pointers to output", "if (M < 0) { return; }\n// pointers to output")
    assert src != TUTORIAL
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(src, TILE, None, "<test>")
    gpu_pipeline(CompileOptions(arch="sm_90", num_warps=8, num_stages=3, specialization=ALIGNED,
                                warp_specialize=True, persistent=True)).run(m)
    assert m.attributes["persistent"] is True
    f = m.functions[0]
    assert [op for op in f.walk() if isinstance(op, O.ReturnOp)] == [f.body.terminator]
    ws = _ws(m)[0]
    tiles = ws.consumer.ops[-4]
    assert isinstance(tiles, O.ForOp) and [op for op in tiles.body.walk() if isinstance(op, O.IfOp)]
