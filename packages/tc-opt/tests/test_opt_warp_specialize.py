"""Warp specialization (CompileOptions.warp_specialize, tc_opt.warp_specialize): a producer warp
issues the TMA copies of a pipelined wgmma loop, the program's warps only compute; which loops
qualify, the schedule of both sides, and the shared memory the epilogue shares with the slots."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.testing import filecheck, round_trip
from tc_ir.verifier import IRVerificationError, verify
from tc_opt import CompileOptions
from tc_opt.pipeline import gpu_pipeline

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
