"""The epilogue overlapped with the next program's first dot (CompileOptions.overlap_epilogue,
tc_opt.overlap_epilogue): where the peeled iteration goes, what the loop over the programs
carries, the version kept for a loop that never runs, the producer warpgroup and its registers,
and the kernels it leaves alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.ir_parser import parse_module
from tc_ir.testing import filecheck, round_trip
from tc_ir.types import F32, TileType
from tc_opt import CompileOptions
from tc_opt.overlap_epilogue import MIN_STAGES, drop_dead_carried, register_split
from tc_opt.pipeline import gpu_pipeline

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
ALIGNED = ("16", "16", "16", None, None, None, "16", "16", "16")
TUTORIAL = (KERNELS / "matmul_tutorial.tc").read_text()


def _gpu_ir(stages: int = 4, warps: int = 8, nb: int = 256, overlap: bool = True, store: bool = True,
            src: str = TUTORIAL) -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(src, {"TYPE": "half", "MB": 128, "NB": nb, "KB": 64}, None, "<test>")
    opts = CompileOptions(arch="sm_90", num_warps=warps, num_stages=stages, specialization=ALIGNED,
                          warp_specialize=True, persistent=True, tma_store=store, overlap_epilogue=overlap)
    gpu_pipeline(opts).run(m)
    return m


def _ws(m: O.Module) -> O.WarpSpecializeOp:
    (ws,) = [op for op in m.walk() if isinstance(op, O.WarpSpecializeOp)]
    return ws


def test_the_next_programs_first_dot_precedes_the_stores() -> None:
    """In the version for a loop that runs: the first program's first iteration before the loop
    over the programs, which carries its accumulator and slot; each program's loop starts at
    its second iteration; after the conversion (the accumulator's last reader) the next
    program's first iteration, then the bulk store, while its dot is in flight."""
    m = _gpu_ir()
    filecheck(round_trip(m), """
CHECK: }, {
CHECK: %[[RUNS:[0-9]+]] = tc.cmp %{{[0-9]+}}, %K {predicate = "slt"}
CHECK-NEXT: tc.if %[[RUNS]] ({
CHECK: %[[FIRST:[0-9]+]] = tc.cmp %{{[0-9]+}}, %{{[0-9]+}} {predicate = "slt"}
CHECK-NEXT: %[[P0:[0-9]+]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} = tc.if %[[FIRST]] : {{.*}} ({
CHECK-NEXT: %[[U0:[0-9]+]] = tc.undef
CHECK: tc.mbarrier_wait
CHECK: tc.dot %{{[0-9]+}}, %{{[0-9]+}}, %[[U0]], %{{[0-9]+}} {{.*}}asynchronous = true
CHECK: tc.yield
CHECK-NEXT: }, {
CHECK-NEXT: tc.undef
CHECK-NEXT: tc.yield
CHECK: tc.for {{.*}}, %[[P0]], %{{[0-9]+}} :
CHECK-NEXT: ^(%program{{.*}}, %next_acc: {{.*}}, %next_release: i32):
CHECK: %[[START:[0-9]+]] = tc.binary %{{[0-9]+}}, %{{[0-9]+}} {kind = "add"}
CHECK-NEXT: tc.for %[[START]], %K, %{{[0-9]+}}, %next_acc, %{{[0-9]+}}, %{{[0-9]+}}, %next_release
CHECK: tc.dot_wait %{{[0-9]+}} : tile
CHECK-NEXT: tc.cmp
CHECK-NEXT: tc.mbarrier_arrive
CHECK-NEXT: tc.cast %{{[0-9]+}} {kind = "fptrunc"}
CHECK-NEXT: %[[NEXT:[0-9]+]] = tc.binary %program{{.*}}, %{{[0-9]+}} {kind = "add"}
CHECK-NEXT: %[[GO:[0-9]+]] = tc.cmp %[[NEXT]], %{{[0-9]+}} {predicate = "slt"}
CHECK-NEXT: %[[P1:[0-9]+]], %[[R1:[0-9]+]], %[[Q1:[0-9]+]], %[[L1:[0-9]+]] = tc.if %[[GO]] : {{.*}} ({
CHECK: tc.dot {{.*}}asynchronous = true
CHECK: }, {
CHECK: tc.tma_store
CHECK-NEXT: tc.yield %[[R1]], %[[Q1]], %[[P1]], %[[L1]]
CHECK: }, {
CHECK: tc.for
CHECK: tc.tma_store
CHECK: tc.mbarrier_inval
""")


def test_the_loop_that_never_runs_keeps_the_old_version() -> None:
    """Its accumulator starts as zeros, so the rewritten version needs none: one dot_wait in
    each version, neither selecting zeros (no `valid` operand)."""
    m = _gpu_ir()
    versions = [op for op in _ws(m).consumer.ops if isinstance(op, O.IfOp)]
    assert len(versions) == 1
    rotated, as_it_was = versions[0].then_block, versions[0].else_block
    waits = [op for op in m.walk() if isinstance(op, O.DotWaitOp) and op.pending == 0]
    assert len(waits) == 2 and all(len(w.operands) == 1 for w in waits)
    old_loops = [op for op in as_it_was.walk() if isinstance(op, O.ForOp)]
    assert len(old_loops) == 2  # the programs and their dot loop, as warp_specialize made them
    zeros = [op for op in as_it_was.walk() if isinstance(op, O.ConstantOp) and op.value == 0.0
             and isinstance(op.result.type, TileType)]
    assert zeros
    assert not [op for op in rotated.walk() if isinstance(op, O.ConstantOp) and isinstance(op.result.type, TileType)
                and op.result.type.element == F32]


def test_the_producer_becomes_a_warpgroup_that_hands_over_registers() -> None:
    m = _gpu_ir()
    ws = _ws(m)
    assert (ws.producer_warps, ws.producer_registers, ws.consumer_registers) == (4, 40, 232)
    assert m.attributes["producer_warps"] == 4


@pytest.mark.parametrize("warps,split", [(8, (40, 232)), (4, (40, 240))])
def test_register_split(warps: int, split: tuple[int, int]) -> None:
    """12 warps launch at 168 registers a thread (three warps in the fullest partition): 64,512
    registers, 5,120 of them the producer's at 40, leave 232 for each of 256 consumer threads;
    one consumer warpgroup would get more than setmaxnreg's useful 240."""
    assert register_split(warps) == split


@pytest.mark.parametrize("stages,store,applies", [(MIN_STAGES - 1, True, False), (MIN_STAGES, True, True),
                                                  (MIN_STAGES, False, True)])
def test_which_kernels(stages: int, store: bool, applies: bool) -> None:
    """Three stages keep the plain consumer (measured slower overlapped); a plain store epilogue
    (128x128 tiles, 4 warps: its exchange fits beside four slots) overlaps too."""
    m = _gpu_ir(stages=stages, store=store, warps=8 if store else 4, nb=256 if store else 128)
    assert (_ws(m).producer_warps == 4) is applies
    assert any(isinstance(op, O.IfOp) for op in _ws(m).consumer.ops) is applies


def test_off_by_default() -> None:
    assert _ws(_gpu_ir(overlap=False)).producer_warps == 1


def test_an_accumulator_stored_as_it_is_is_left_alone() -> None:
    """Its only reader is the store itself: nothing would be left to overlap."""
    src = TUTORIAL.replace("TYPE* C,", "float* C,").replace("TYPE *pc[", "float *pc[")
    assert src != TUTORIAL
    m = _gpu_ir(src=src, warps=4, nb=128)
    assert _ws(m).producer_warps == 1


def test_shared_memory_of_the_two_versions_overlaps() -> None:
    """Each version has an epilogue with store buffers that its copies may read until the exit,
    but no program runs both: the kernel needs no more shared memory than without the rewrite."""
    assert _gpu_ir().attributes["shared_bytes"] == _gpu_ir(overlap=False).attributes["shared_bytes"]


def test_dead_carried_values_are_dropped() -> None:
    m = parse_module("""
module {
  tc.func global @k(%n: i32, %p: ptr<i32>) {
    %0 = tc.constant {value = 0} : i32
    %1 = tc.constant {value = 1} : i32
    %a, %b, %c = tc.for %0, %n, %1, %0, %0, %0 : i32, i32, i32 ({
    ^(%i: i32, %x: i32, %y: i32, %z: i32):
      %2 = tc.binary %x, %1 {kind = "add"} : i32
      %3 = tc.binary %y, %i {kind = "add"} : i32
      %4 = tc.binary %z, %1 {kind = "add"} : i32
      tc.yield %2, %3, %4
    })
    tc.store %p, %b
    tc.return
  }
}
""")
    loop = next(op for op in m.walk() if isinstance(op, O.ForOp))
    new = drop_dead_carried(loop)
    assert len(new.inits) == 1 and len(new.body.args) == 2
    filecheck(round_trip(m), """
CHECK: %[[B:[a-z0-9]+]] = tc.for %0, %n, %1, %0 : i32 ({
CHECK-NEXT: ^(%i: i32, %y: i32):
CHECK-NEXT: %[[Y:[0-9]+]] = tc.binary %y, %i {kind = "add"}
CHECK-NEXT: tc.yield %[[Y]]
CHECK: tc.store %p, %[[B]]
""")


def test_branches_of_an_if_outside_loops_are_exclusive() -> None:
    """shared_alloc.exclusive: ops in the two branches of an if that runs once may share shared
    memory; not in one branch, and not in an if inside a loop (one iteration may take the then
    branch, the next the else branch, while the first one's bulk copies still read)."""
    from tc_opt.shared_alloc import exclusive

    m = parse_module("""
module {
  tc.func global @k(%n: i32, %c: i1) {
    %0 = tc.constant {value = 0} : i32
    %1 = tc.constant {value = 1} : i32
    tc.if %c ({
      %a = tc.constant {value = 2} : i32
      %b = tc.constant {value = 3} : i32
      tc.yield
    }, {
      %d = tc.constant {value = 4} : i32
      tc.yield
    })
    tc.for %0, %n, %1 ({
    ^(%i: i32):
      tc.if %c ({
        %e = tc.constant {value = 5} : i32
        tc.yield
      }, {
        %f = tc.constant {value = 6} : i32
        tc.yield
      })
      tc.yield
    })
    tc.return
  }
}
""")
    ops = {op.result.name_hint: op for op in m.walk() if isinstance(op, O.ConstantOp) and op.result.name_hint}
    assert exclusive(ops["a"], ops["d"]) and exclusive(ops["d"], ops["b"])
    assert not exclusive(ops["a"], ops["b"])
    assert not exclusive(ops["e"], ops["f"])


def test_an_accumulator_that_starts_nonzero_is_left_alone() -> None:
    """The peeled dot does not read its accumulator, which is right only for one that starts at
    zero."""
    src = TUTORIAL.replace("float acc[MB, NB] = 0;", "float acc[MB, NB] = 1;")
    assert src != TUTORIAL
    assert _ws(_gpu_ir(src=src)).producer_warps == 1
