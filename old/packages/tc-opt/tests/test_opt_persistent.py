"""A persistent grid without a producer warp (CompileOptions.persistent, tc_opt.persistent): the
whole body of a kernel with a plain TMA pipeline, pipeline and epilogue included, loops over the
programs of the grid the runtime passes; each program initializes and invalidates its own
barriers, so its epilogue reuses the pipeline's shared memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.testing import filecheck, round_trip
from tc_opt import CompileOptions
from tc_opt.pipeline import gpu_pipeline

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
ALIGNED = ("16", "16", "16", None, None, None, "16", "16", "16")
TILE = {"TYPE": "half", "MB": 128, "NB": 256, "KB": 64}
TUTORIAL = (KERNELS / "matmul_tutorial.tc").read_text()


def _compile(src: str = TUTORIAL, *, persistent: bool = True, ws: bool = False, tma: bool = True,
             stages: int = 3, arch: str = "sm_90") -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(src, TILE, None, "<test>")
    gpu_pipeline(CompileOptions(arch=arch, num_warps=8, num_stages=stages, specialization=ALIGNED, tma=tma,
                                warp_specialize=ws, persistent=persistent)).run(m)
    return m


def test_schedule_filecheck() -> None:
    """The CTA's programs t = cta, cta + ctas, ... below cta's grid (tc.grid_dim); inside, the
    plain pipeline: buffers, barriers initialized, S - 1 iterations of copies ahead, the loop,
    the barriers invalidated, the epilogue."""
    m = _compile()
    assert m.attributes["persistent"] is True and "producer_warps" not in m.attributes
    filecheck(round_trip(m), """
CHECK: %[[CTA:[0-9]+]] = tc.program_id {axis = 0}
CHECK-NEXT: %[[CTAS:[0-9]+]] = tc.num_programs {axis = 0}
CHECK-NEXT: %[[GX:[0-9]+]] = tc.grid_dim {axis = 0}
CHECK-NEXT: %[[GY:[0-9]+]] = tc.grid_dim {axis = 1}
CHECK-NEXT: %[[GZ:[0-9]+]] = tc.grid_dim {axis = 2}
CHECK: %[[COUNT:[0-9]+]] = tc.binary %{{[0-9]+}}, %[[GZ]] {kind = "mul"}
CHECK-NEXT: tc.for %[[CTA]], %[[COUNT]], %[[CTAS]] ({
CHECK-NEXT: ^(%program: i32):
CHECK: %[[PID:[0-9]+]] = tc.binary %program, %[[GX]] {kind = "urem"}
CHECK: %grid_m = tc.binary
CHECK: %group_id = tc.binary %[[PID]], %width {kind = "sdiv"}
CHECK: %[[BARS:[0-9]+]] = tc.local_alloc : tile<3xi64
CHECK-NEXT: tc.mbarrier_init %[[BARS]]
CHECK: tc.tma_load
CHECK: tc.tma_load
CHECK: tc.for %{{[0-9]+}}, %K
CHECK: tc.mbarrier_wait %[[BARS]], %read_slot, %phase
CHECK: tc.dot {{.*}}asynchronous = true
CHECK: tc.yield
CHECK-NEXT: })
CHECK-NEXT: tc.mbarrier_inval %[[BARS]]
CHECK-NEXT: tc.dot_wait %{{[0-9]+}} :
CHECK: tc.store
CHECK-NEXT: tc.yield
CHECK-NEXT: })
CHECK-NEXT: tc.return
""")
    # the user's program ids are all replaced (the two left are the CTA's own, at the top)
    ids = [op for op in m.walk() if isinstance(op, (O.ProgramIdOp, O.NumProgramsOp))]
    assert len(ids) == 2 and all(op.parent is m.functions[0].body for op in ids)


@pytest.mark.parametrize("stages", [3, 4])
def test_the_epilogue_reuses_the_slots(stages: int) -> None:
    """Nothing is in flight during a program's epilogue, so it needs no shared memory beside the
    pipeline's: a 4-stage 128x256 tile fits, as in the plain kernel (with a producer warp it does
    not: the producer fills the slots during the epilogue)."""
    plain = _compile(persistent=False, stages=stages)
    assert "persistent" not in plain.attributes
    assert _compile(stages=stages).attributes["shared_bytes"] == plain.attributes["shared_bytes"]


def test_effects_before_the_loop_are_no_obstacle() -> None:
    """A store before the loop keeps the producer warp away, not the persistent grid: each program
    runs it in its turn."""
    src = TUTORIAL.replace("// reduction loop", "*(C + pid) = 0;\n// reduction loop")
    assert src != TUTORIAL
    m = _compile(src, ws=True)
    assert m.attributes["persistent"] is True and "producer_warps" not in m.attributes
    tiles = next(op for op in m.functions[0].body.ops if isinstance(op, O.ForOp))
    stores = [op for op in tiles.body.walk() if isinstance(op, O.StoreOp)]
    assert len(stores) == 2


def test_an_early_return_ends_only_its_program() -> None:
    """The front end turns `return` into structured control flow: a program's early return skips
    the rest of that program, not the CTA's later programs."""
    src = TUTORIAL.replace("// pointers to output", "if (M < 0) { return; }\n// pointers to output")
    assert src != TUTORIAL
    m = _compile(src)
    assert m.attributes["persistent"] is True
    f = m.functions[0]
    assert [op for op in f.walk() if isinstance(op, O.ReturnOp)] == [f.body.terminator]
    tiles = next(op for op in f.body.ops if isinstance(op, O.ForOp))
    assert [op for op in tiles.body.walk() if isinstance(op, O.IfOp)]


@pytest.mark.parametrize("tma,arch", [(False, "sm_90"), (True, "sm_80")])
def test_without_a_tma_pipeline_the_grid_stays_plain(tma: bool, arch: str) -> None:
    """Only a TMA-pipelined kernel persists: cp.async pipelines (tma off, or before Hopper) keep
    one program per CTA and need no grid from the runtime."""
    m = _compile(tma=tma, arch=arch)
    assert "persistent" not in m.attributes
    assert not [op for op in m.walk() if isinstance(op, O.GridDimOp)]


def test_with_a_producer_warp_the_specialized_form_persists() -> None:
    m = _compile(ws=True)
    assert m.attributes["persistent"] is True and m.attributes["producer_warps"] == 1
    assert [op for op in m.walk() if isinstance(op, O.WarpSpecializeOp)]
