"""The persistent grid (CompileOptions.persistent): a kernel that loops over its programs.

The runtime launches as many CTAs as fit on the GPU at once (tc_runtime.kernel.persistent_ctas)
and passes the grid the user asked for as hidden parameters (tc.grid_dim); each CTA runs the
programs t = cta, cta + ctas, ... of that grid, their ids decomposed from t (x fastest). At any
moment the CTAs work on consecutive programs, so a grouped tile order keeps the operands they
share in L2: a plain grid of more programs than SMs loses that order where the hardware starts
CTAs as others retire (a tf32 A B matmul at 8192^3 read 4.0-4.3 GB from DRAM, cuBLAS's
persistent kernel 2.45).

Two forms:
- with a producer warp (tc_opt.warp_specialize) both roles loop over the programs and the
  producer runs ahead into the next program;
- without one (`persist_function`, for loops warp specialization refuses or when it is off): the
  whole body of the kernel, pipeline included, becomes the body of the loop over the programs.
  Each program allocates, initializes and invalidates its pipeline's barriers as a plain kernel
  does, so its epilogue reuses the pipeline's shared memory (a 256x128 float accumulator's
  128 KiB exchange would not fit beside the slots); tc_nvptx makes a barrier initialization inside a loop
  wait until every thread is done with the previous program's shared memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from tc_ir.ops import (
    Block,
    ForOp,
    Function,
    GridDimOp,
    NumProgramsOp,
    Operation,
    ProgramIdOp,
    ReturnOp,
    Value,
    YieldOp,
)
from tc_ir.types import I32

from .ir_utils import replace_uses
from .pipeline_loops import _Emitter


def has_early_return(f: Function) -> bool:
    """Whether `f` returns anywhere but at its end (such a kernel cannot loop over its programs)."""
    return any(isinstance(op, ReturnOp) and op is not f.body.terminator for op in f.walk())


def grid_of(e: _Emitter) -> tuple[Value, Value, list[Value], Value]:
    """This CTA's index, the number of CTAs, the program grid's extents (x, y, z) and its number
    of programs, computed at `e`."""
    cta: Value = e.add(ProgramIdOp.create([], [I32], {"axis": 0})).result
    ctas: Value = e.add(NumProgramsOp.create([], [I32], {"axis": 0})).result
    dims: list[Value] = [e.add(GridDimOp.create([], [I32], {"axis": d})).result for d in range(3)]
    count = e.binary("mul", e.binary("mul", dims[0], dims[1]), dims[2])
    return cta, ctas, dims, count


def program_ids(e: _Emitter, t: Value, dims: Sequence[Value]) -> list[Value]:
    """Program t of the grid `dims` as (x, y, z), x varying fastest. Unsigned divisions: t and the
    extents are never negative, and ptxas's unsigned sequence skips the signed one's fix-ups (it
    runs on the path between two programs)."""
    q = e.binary("udiv", t, dims[0])
    return [e.binary("urem", t, dims[0]), e.binary("urem", q, dims[1]), e.binary("udiv", q, dims[1])]


def tile_loop(e: _Emitter, first: Value, count: Value, step: Value, carried: int, loc: object
              ) -> tuple[ForOp, _Emitter]:
    """`for t = first; t < count; t += step` carrying `carried` i32 values that start at 0 (the
    caller yields)."""
    body = Block([I32] + [I32] * carried, ["program"] + [None] * carried)
    zero = e.const(I32, 0)
    op = e.add(ForOp.create([first, count, step] + [zero] * carried, [I32] * carried, {}, [body], loc))  # type: ignore[arg-type]
    assert isinstance(op, ForOp)
    return op, _Emitter(body, 0)


def user_program_ids(f: Function) -> list[ProgramIdOp | NumProgramsOp]:
    """The kernel's own program_id and num_programs ops (before the loop over the programs adds
    the CTA's)."""
    return [op for op in f.walk() if isinstance(op, (ProgramIdOp, NumProgramsOp))]


def move_into(tile_body: Block, ops: Sequence[Operation], user_ids: Sequence[ProgramIdOp | NumProgramsOp],
              ids: Sequence[Value], dims: Sequence[Value]) -> None:
    """Move `ops` (in order) to the end of `tile_body`, the user's program ids becoming the
    program's (`ids`) and its num_programs the grid's extents (`dims`)."""
    for op in ops:
        if op.parent is not None:
            op.parent.remove(op)
        if op not in user_ids:
            tile_body.append(op)
    for op in user_ids:
        value = ids[op.axis] if isinstance(op, ProgramIdOp) else dims[op.axis]
        replace_uses(tile_body, op.result, value)
        if op.parent is not None:
            op.parent.remove(op)


def persist_function(f: Function) -> None:
    """Make the whole body of `f` the body of a loop over its programs (see the module's doc);
    the caller checked `has_early_return` and records the module's `persistent` attribute."""
    outer = f.body
    term = outer.terminator
    assert term is not None and not has_early_return(f)
    user_ids = user_program_ids(f)
    ops = [op for op in outer.ops if op is not term]
    loc = next((op.loc for op in ops if isinstance(op, ForOp)), term.loc)
    e = _Emitter(outer, 0)
    cta, ctas, dims, count = grid_of(e)
    tiles, te = tile_loop(e, cta, count, ctas, 0, loc)
    ids = program_ids(te, tiles.body.args[0], dims)
    move_into(tiles.body, ops, user_ids, ids, dims)
    tiles.body.append(YieldOp.create([], []))


__all__ = ["grid_of", "has_early_return", "move_into", "persist_function", "program_ids", "tile_loop",
           "user_program_ids"]
