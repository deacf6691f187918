"""Stores of whole 2-D tiles become TMA bulk stores (Hopper, CompileOptions.tma_store).

A matmul's epilogue `*?(rm[:, None] < M && rn[None, :] < N) (C + rm[:, None] * ldc + rn[None, :]) = acc`
otherwise converts the accumulator to a blocked layout through shared memory (write, barrier, read
back) and then every thread stores 16-byte vectors. As a `tc.tma_store` the tile is written once,
in the register layout it has, to shared memory in the swizzled panels a tensor map describes, and
one thread hands each panel to the TMA unit, which writes it to global memory while the threads go
on; the mask becomes the map's extents, outside which TMA writes nothing. The panels of a
tensor-core accumulator (each thread's columns within one panel per register) are written two
buffers at a time, so the epilogue needs 2 x rows x 128 bytes of shared memory instead of the
whole tile: a 4-stage 128x256x64 loop plus its epilogue then fits a persistent kernel.

The pattern is that of tc_opt.tma's loads (`matrix_tile`, `mask_extents`, outer dimensions for a
batch offset `x * s`), with the same legality from the specialization (16-byte aligned base, row
stride a multiple of 16 bytes). The store must be the kernel's last access to global memory: a
bulk store completes asynchronously, so a later load of the same address by this program could
read the old value (the issuing thread waits for the reads of shared memory only, before the
buffers are reused and at the end).
"""

from __future__ import annotations

from tc_ir.layouts import Mma, Shared
from tc_ir.ops import (
    AsyncCopyOp,
    AtomicCASOp,
    AtomicRMWOp,
    ConvertLayoutOp,
    Function,
    LoadOp,
    Module,
    OpResult,
    StoreOp,
    TmaLoadOp,
    TmaStoreOp,
)
from tc_ir.types import ScalarType, TileType

from .ir_utils import uses
from .pass_manager import Pass
from .pipeline_loops import _Emitter
from .pipeline_tma import materialize, outer_coordinate
from .resources import max_shared_bytes
from .shared_alloc import allocate, loops_of
from .tma import ELEMENTS, UNBOUNDED, mask_extents, matrix_tile, tensor_map_count

#: The swizzles of the shared panels, widest first (bytes per row of a panel: the box's inner
#: extent): the widest that divides the tile's rows (176 halves: 32-byte panels of 16 columns,
#: eleven bulk stores; a store's panels are written once per tile, not once per k-step).
SWIZZLES = (128, 64, 32)
#: Ops that access global memory through the generic proxy (a bulk store is not ordered with them).
GENERIC_MEMORY = (LoadOp, StoreOp, AtomicRMWOp, AtomicCASOp, AsyncCopyOp)


def store_swizzle(row_bytes: int) -> int | None:
    """The swizzle of the panels of a tile whose rows are `row_bytes` long (None: none divides)."""
    return next((s for s in SWIZZLES if row_bytes % s == 0), None)


def panel_count(op: TmaStoreOp) -> int:
    t = op.operands[0].type
    assert isinstance(t, TileType)
    return t.shape[int(op.fast)] // int(op.box[0])


def panel_buffers(op: TmaStoreOp) -> int:
    """How many panel buffers the store writes through: its `buffers` when set (by
    `buffers_in_loops`), else two (in turns) when every thread's elements of a panel are known
    per register (a wgmma accumulator whose warps do not split the contiguous dimension), else one
    per panel (the whole tile at once)."""
    if int(op.buffers):
        return int(op.buffers)
    panels = panel_count(op)
    return min(2, panels) if panel_by_panel(op) else panels


def panel_by_panel(op: TmaStoreOp) -> bool:
    """Whether the tile can be written one panel after the other: each thread's elements of a
    panel are known per register (a wgmma accumulator whose warps do not split the contiguous
    dimension); else it is written whole."""
    lay = getattr(op.operands[0].type, "layout", None)
    return isinstance(lay, Mma) and lay.version == 3 and not lay.transposed and lay.warps_per_cta[int(op.fast)] == 1


def scratch_bytes(op: TmaStoreOp) -> int:
    """Shared bytes of the store's panel buffers (each rows x the swizzle's bytes, 1024-byte
    aligned)."""
    t = op.operands[0].type
    assert isinstance(t, TileType)
    return panel_buffers(op) * t.shape[1 - int(op.fast)] * int(op.swizzle)


def _last_memory_access(f: Function, store: StoreOp) -> bool:
    """Whether nothing after `store` (in program order, or in a loop around it) accesses global
    memory through the generic proxy."""
    order = list(f.walk())
    after = order[order.index(store) + 1:]
    if any(isinstance(op, GENERIC_MEMORY) for op in after):
        return False
    for loop in loops_of(store):
        if any(isinstance(op, GENERIC_MEMORY) and op is not store for op in loop.walk()):
            return False
    return True


def plan_store(f: Function, store: StoreOp, descriptor: int) -> TmaStoreOp | None:
    """The tc.tma_store that replaces `store` (not inserted), None when it does not qualify."""
    ptr, value = store.operands[0], store.operands[1]
    pt, vt = ptr.type, value.type
    if not isinstance(pt, TileType) or not isinstance(vt, TileType) or pt.rank != 2:
        return None
    e = vt.element
    if not isinstance(e, ScalarType) or e.name not in ELEMENTS:
        return None
    mt = matrix_tile(f, ptr)
    if mt is None or mt.element_bytes != e.bytes:
        return None
    fast, slow = mt.fast, 1 - mt.fast
    start, outer = mt.start, mt.outer
    swizzle = store_swizzle(vt.shape[fast] * e.bytes)
    if swizzle is None or vt.shape[slow] > 256 or vt.shape[slow] % 8:
        return None
    panel = swizzle // e.bytes
    extent = mask_extents(f, store.operands[2] if len(store.operands) > 2 else None, mt.start)
    if extent is None:
        return None
    if not _last_memory_access(f, store):
        return None
    src = value
    if isinstance(value, OpResult) and isinstance(value.op, ConvertLayoutOp):
        src = value.op.operands[0]  # written to shared memory in the layout it has
    st = src.type
    if not isinstance(st, TileType) or st.layout is None or isinstance(st.layout, Shared):
        return None
    attributes = {
        "descriptor": descriptor, "base": mt.base_arg, "fast": fast,
        "extents": (*extent[fast], *extent[slow], *((-1, UNBOUNDED) * len(outer))),
        "stride": (mt.stride_arg, 1, *(x for _, arg in outer for x in (arg, 1))),
        "box": (panel, vt.shape[slow], *(1,) * len(outer)), "swizzle": swizzle,
    }
    block = store.parent
    assert block is not None
    em = _Emitter(block, block.ops.index(store))
    coords = [materialize(em, start[0]), materialize(em, start[1])]
    coords += [outer_coordinate(em, f, lin, arg) for lin, arg in outer]
    return TmaStoreOp.create([src, *coords], [], attributes, loc=store.loc)  # type: ignore[return-value]


def rewrite_stores(f: Function) -> int:
    """Replace every qualifying store of `f` by a tc.tma_store; returns how many."""
    descriptor = tensor_map_count(f)
    done = 0
    for store in [op for op in f.walk() if isinstance(op, StoreOp)]:
        new = plan_store(f, store, descriptor)
        if new is None:
            continue
        block = store.parent
        assert block is not None
        block.insert(block.ops.index(store), new)
        block.remove(store)
        value = store.operands[1]
        if isinstance(value, OpResult) and isinstance(value.op, ConvertLayoutOp) and not uses(f.body).get(value):
            cblock = value.op.parent
            assert cblock is not None
            cblock.remove(value.op)  # (the pointer and mask tiles go with the next DCE)
        descriptor += 1
        done += 1
    return done


def buffers_in_loops(f: Function, limit: int) -> None:
    """A bulk store in a loop (a persistent kernel's loop over the programs) writes through as
    many panel buffers as still fit `limit` bytes of shared memory, up to one per panel (the whole
    tile at once): its copies then read shared memory while the threads write the next panels or
    the next iteration computes, and it waits for a copy only before it writes that copy's buffer
    again (tc_nvptx.lower_tma, `reads_pending`). With two buffers in turns it would wait within
    every tile for the reads of the panels two before (a 32-bit 128x256 tile has 8 panels)."""
    for op in f.walk():
        if not isinstance(op, TmaStoreOp) or not loops_of(op) or panel_buffers(op) >= panel_count(op):
            continue
        for n in range(panel_count(op), panel_buffers(op), -1):
            op.buffers = n
            if allocate(f).size <= limit:
                break
        else:
            op.buffers = 0


def reads_pending(step: int, panels: int, buffers: int, in_loop: bool) -> int | None:
    """How many of the issuing thread's bulk-store groups may still read shared memory when panel
    `step` (one panel and one commit group per step, buffer step % buffers) is about to be
    written: all but those issued up to the copy that last read its buffer. In a loop that may be
    a copy of the previous iteration (the panels of each iteration restart at buffer 0); None
    when no earlier copy read the buffer (a first use outside a loop)."""
    if step >= buffers:
        return buffers - 1
    if not in_loop:
        return None
    last = max(q for q in range(panels) if q % buffers == step)  # the previous iteration's reader
    return (panels - 1 - last) + step


class TmaStores(Pass):
    """tc.store of a whole 2-D tile -> tc.tma_store (sm_90 with `tma` and `tma_store`)."""

    name = "tma-stores"

    def run(self, module: Module) -> None:
        o = self.options
        if o.sm < 90 or not o.tma or not o.tma_store:
            return
        for f in module.functions:
            if rewrite_stores(f):
                buffers_in_loops(f, max_shared_bytes(o.arch))
