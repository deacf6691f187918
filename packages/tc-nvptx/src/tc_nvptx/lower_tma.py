"""TMA copies and the mbarriers they complete on (Hopper): tc.tma_load, tc.mbarrier_*.

A tensor map is a 128-byte kernel parameter (`.param .align 64 .b8 name[128]`, a byval pointer
marked "nvvm.grid_constant" so that LLVM passes its param-space address instead of a local copy;
lower_module appends one per `descriptor` after the user's parameters, emit.llvm_text marks them).
One thread (thread 0) issues everything: the barrier's expected bytes, then per operand one
`cp.async.bulk.tensor.Nd` per swizzle panel of the tile (N = 2, or more with outer map dimensions
such as a batch index) (a box is at most one swizzle width wide;
panel p of the buffer is a dense [rows, width] block, see swizzle.py, and lies at the map's inner
coordinate + p * width). All threads wait on the barrier's phase parity in a try_wait loop.
"""

from __future__ import annotations

import llvmlite.ir as ir
from tc_ir.ops import (
    ClusterBarrierOp,
    Function,
    MBarrierArriveOp,
    MBarrierExpectOp,
    MBarrierInitOp,
    MBarrierInvalOp,
    MBarrierWaitOp,
    Operation,
    TmaLoadOp,
    TmaStoreOp,
    WarpSpecializeOp,
)
from tc_ir.types import ScalarType, TileType
from tc_opt.shared_alloc import loops_of, runs_first_in_shared_memory
from tc_opt.tma import tensor_map_count
from tc_opt.tma_store import panel_buffers, panel_by_panel, reads_pending

from .context import Ctx, lowering_error
from .layout_math import DimMap, ThreadMap
from .llvm_types import I32, llvm_type
from .lower_async import view_of
from .lower_mma import pack_pair
from .lowerings import lowers
from .swizzle import SharedView

#: Bytes of one tensor map (CUtensorMap).
TENSOR_MAP_BYTES = 128
#: The name of the hidden kernel parameter holding tensor map k.
PARAM_PREFIX = "tc_tma_"


def _barrier(ctx: Ctx, bars: SharedView, index: ir.Value | int) -> ir.Value:
    return bars.address(ctx, [index])


def cluster_rank(ctx: Ctx) -> ir.Value:
    """This CTA's rank in its cluster (%cluster_ctarank), read once at the kernel's entry."""
    key = ("cluster_rank",)
    if key not in ctx._bases:
        fn = ctx.intrinsic("llvm.nvvm.read.ptx.sreg.cluster.ctarank", I32, [])
        ctx._bases[key] = ctx.eb.call(fn, [], name="cluster_rank")
    return ctx._bases[key]


def _tensor_map(ctx: Ctx, k: int, op: Operation) -> ir.Value:
    params = getattr(ctx, "tma_params", None) or []
    if k >= len(params):
        raise lowering_error(f"internal error: no kernel parameter for tensor map {k}", op.loc)
    return params[k]  # type: ignore[no-any-return]


@lowers("tc.mbarrier_init")
def lower_mbarrier_init(ctx: Ctx, op: MBarrierInitOp) -> None:
    bars = view_of(ctx, op.operands[0])
    if loops_of(op):
        # (a persistent kernel's next program, tc_opt.persistent: the barriers and the copies
        # after them reuse shared memory the previous program's epilogue read and wrote; every
        # thread orders its accesses before the copies' (async proxy) and is done with them)
        ctx.asm(ir.VoidType(), "fence.proxy.async.shared::cta;", "~{memory}", [], side_effect=True)
        ctx.barrier()
    pred = ctx.thread0()
    for s in range(bars.shape[0]):
        ctx.asm(ir.VoidType(), f"@$0 mbarrier.init.shared::cta.b64 [$1], {int(op.count)};", "b,r,~{memory}",
                [pred, _barrier(ctx, bars, s)], side_effect=True)
    # the initialisation (generic proxy) before any complete_tx of a copy (async proxy)
    ctx.asm(ir.VoidType(), "fence.mbarrier_init.release.cluster;", "~{memory}", [], side_effect=True)
    ctx.barrier()


@lowers("tc.mbarrier_expect")
def lower_mbarrier_expect(ctx: Ctx, op: MBarrierExpectOp) -> None:
    bars = view_of(ctx, op.operands[0])
    with ctx.b.if_then(ctx.b.and_(ctx.thread0(), ctx.scalar(op.operands[2]))):
        ctx.asm(ir.VoidType(), f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {int(op.bytes)};",
                "r,~{memory}", [_barrier(ctx, bars, ctx.scalar(op.operands[1]))], side_effect=True)


@lowers("tc.mbarrier_wait")
def lower_mbarrier_wait(ctx: Ctx, op: MBarrierWaitOp) -> None:
    bars = view_of(ctx, op.operands[0])
    text = ("{ .reg .pred done; tc_wait_${:uid}: "
            "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1; "
            "@!done bra.uni tc_wait_${:uid}; }")
    ctx.asm(ir.VoidType(), text, "r,r,~{memory}",
            [_barrier(ctx, bars, ctx.scalar(op.operands[1])), ctx.scalar(op.operands[2])], side_effect=True)


@lowers("tc.mbarrier_arrive")
def lower_mbarrier_arrive(ctx: Ctx, op: MBarrierArriveOp) -> None:
    bars = view_of(ctx, op.operands[0])
    b = ctx.b
    arrives = b.and_(b.icmp_unsigned("==", ctx.lane, ir.Constant(I32, 0)), ctx.scalar(op.operands[2]))
    in_group = b.and_(ctx.warp, ir.Constant(I32, 3)) if op.per_warpgroup else None

    def by_warp(k: int) -> ir.Value:
        """Whether this warp makes arrival k (0: here; 1 + i: on partner i's barrier): with
        `per_warpgroup`, warp k of each warpgroup; else every warp makes each."""
        if in_group is None:
            return arrives
        return b.and_(arrives, b.icmp_unsigned("==", in_group, ir.Constant(I32, k)))

    bar = _barrier(ctx, bars, ctx.scalar(op.operands[1]))
    ctx.asm(ir.VoidType(), "@$0 mbarrier.arrive.shared::cta.b64 _, [$1];", "b,r,~{memory}",
            [by_warp(0), bar], side_effect=True)
    if op.cluster:
        # the same barrier in the partner across rank bit i where `paired` i, else this one's again
        rank = cluster_rank(ctx)
        text = ("{ .reg .b32 remote; mapa.shared::cluster.u32 remote, $1, $2; "
                "@$0 mbarrier.arrive.shared::cluster.b64 _, [remote]; }")
        for i, paired in enumerate(op.operands[3:]):
            target = b.select(ctx.scalar(paired), b.xor(rank, ir.Constant(I32, 1 << i)), rank)
            ctx.asm(ir.VoidType(), text, "b,r,r,~{memory}", [by_warp(1 + i), bar, target], side_effect=True)


@lowers("tc.cluster_barrier")
def lower_cluster_barrier(ctx: Ctx, op: ClusterBarrierOp) -> None:
    ctx.asm(ir.VoidType(), "barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;",
            "~{memory}", [], side_effect=True)


@lowers("tc.warp_specialize")
def lower_warp_specialize(ctx: Ctx, op: WarpSpecializeOp) -> None:
    """Warps num_warps.. run the producer region (its "one thread" is their first), the others the
    consumer region (its barriers are named barrier 1 over the consumer threads only: the
    producer warp never reaches them); both continue after the op."""
    b = ctx.b
    consumers = 32 * ctx.num_warps
    is_producer = b.icmp_unsigned(">=", ctx.tid, ir.Constant(I32, consumers))
    producer_bb = b.append_basic_block("producer")
    consumer_bb = b.append_basic_block("consumer")
    join = b.append_basic_block("specialized_join")
    b.cbranch(is_producer, producer_bb, consumer_bb)
    handoff = op.producer_registers > 0
    for region, bb, leader, threads in ((op.producer, producer_bb, consumers, None),
                                        (op.consumer, consumer_bb, 0, consumers)):
        b.position_at_end(bb)
        if handoff:
            _set_registers(ctx, region is op.producer, op)
        saved = ctx.leader, ctx.barrier_threads
        ctx.leader, ctx.barrier_threads = leader, threads
        try:
            ctx.lower_block(region)
        finally:
            ctx.leader, ctx.barrier_threads = saved
        if handoff and region is op.producer:
            b.ret_void()  # (code after the op was allocated with the consumers' registers)
        else:
            b.branch(join)
    b.position_at_end(join)


def _set_registers(ctx: Ctx, producer: bool, op: WarpSpecializeOp) -> None:
    """setmaxnreg for this role's warpgroups; the producer's warps but its first one then leave
    (one thread issues every copy, and idle warps spinning on its barriers would take issue slots
    from the consumers)."""
    b = ctx.b
    count = op.producer_registers if producer else op.consumer_registers
    action = "dec" if producer else "inc"
    ctx.asm(ir.VoidType(), f"setmaxnreg.{action}.sync.aligned.u32 {count};", "~{memory}", [], side_effect=True)
    if producer:
        first = b.icmp_unsigned("<", ctx.tid, ir.Constant(I32, 32 * (ctx.num_warps + 1)))
        work = b.append_basic_block("producer_work")
        leave = b.append_basic_block("producer_leave")
        b.cbranch(first, work, leave)
        b.position_at_end(leave)
        b.ret_void()
        b.position_at_end(work)


@lowers("tc.mbarrier_inval")
def lower_mbarrier_inval(ctx: Ctx, op: MBarrierInvalOp) -> None:
    bars = view_of(ctx, op.operands[0])
    ctx.barrier()  # every thread is past its last wait
    pred = ctx.thread0()
    for s in range(bars.shape[0]):
        ctx.asm(ir.VoidType(), "@$0 mbarrier.inval.shared::cta.b64 [$1];", "b,r,~{memory}",
                [pred, _barrier(ctx, bars, s)], side_effect=True)


@lowers("tc.tma_load")
def lower_tma_load(ctx: Ctx, op: TmaLoadOp) -> None:
    dst = view_of(ctx, op.operands[0])
    bars = view_of(ctx, op.operands[1])
    if len(dst.shape) != 2 or not dst.swizzled:
        raise lowering_error(f"internal error: tma_load into {dst.shape} {dst.layout}", op.loc)
    b = ctx.b
    with b.if_then(b.and_(ctx.thread0(), ctx.scalar(op.operands[3]))):
        bar = _barrier(ctx, bars, ctx.scalar(op.operands[2]))
        if not op.multicast:
            _issue_tma_load(ctx, op, dst, bar)
            return
        partner = ctx.scalar(op.operands[-1])
        with b.if_else(b.icmp_unsigned("!=", partner, ir.Constant(I32, 0))) as (shared, alone):
            with shared:
                rank = cluster_rank(ctx)
                if ctx.cluster == 2:  # (the partner is rank ^ 1: this CTA copies half `rank` to both)
                    half, mask = rank, ir.Constant(ir.IntType(16), 0b11)
                else:  # the half of the CTA whose rank has the partner's bit, to ranks r and r ^ d
                    half = b.zext(b.icmp_unsigned("!=", b.and_(rank, partner), ir.Constant(I32, 0)), I32)
                    one = ir.Constant(I32, 1)
                    mask = b.trunc(b.or_(b.shl(one, rank), b.shl(one, b.xor(rank, partner))), ir.IntType(16))
                _issue_tma_load(ctx, op, dst, bar, half, mask)
            with alone:
                _issue_tma_load(ctx, op, dst, bar)


def _issue_tma_load(ctx: Ctx, op: TmaLoadOp, dst: SharedView, bar: ir.Value, half: ir.Value | None = None,
                    mask: ir.Value | None = None) -> None:
    """The copies themselves, one per swizzle panel and box of rows, in the leader's own branch:
    the other warps jump over them instead of running the uniform-register loops ptxas builds
    around each copy. `half` (0 or 1): only that half of the rows (through the map of half the
    rows, `half_descriptor`) or else of the panels, copied into the CTAs of the cluster that
    `mask` (i16, a bit per rank) names."""
    b = ctx.b
    coords = [ctx.scalar(v) for v in op.coordinates]
    fast, slow = dst.layout.order[0], dst.layout.order[1]
    outer = coords[2:]  # the map's outer dimensions (a batch index), box 1
    rank = 2 + len(outer)
    width, rows = int(op.box[0]), int(op.box[1])
    by_rows = half is not None and op.half_descriptor >= 0
    if by_rows:
        rows //= 2
    desc = _tensor_map(ctx, int(op.half_descriptor if by_rows else op.descriptor), op)
    places = ", ".join(f"${2 + d}" for d in range(rank))
    multicast = ".multicast::cluster" if half is not None else ""
    text = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes{multicast} "
            f"[$0], [$1, {{{places}}}], [${2 + rank}]" + (f", ${3 + rank};" if half is not None else ";"))
    constraints = "r,l," + "r," * rank + "r," + ("h," if half is not None else "") + "~{memory}"
    masks = [mask] if half is not None and mask is not None else []
    panels = -(-dst.shape[fast] // width)  # (a partial last panel is copied whole: TileType.storage_numel)
    # (row, column) of each box's first element in the tile: every box, or half of them
    boxes: list[tuple[ir.Value | int, ir.Value | int]]
    if half is None:
        boxes = [(c * rows, p * width) for c in range(dst.shape[slow] // rows) for p in range(panels)]
    elif by_rows:  # half of the rows
        boxes = [(b.mul(half, ir.Constant(I32, rows)), p * width) for p in range(panels)]
    else:  # half of the panels
        first = b.mul(half, ir.Constant(I32, panels // 2 * width))
        boxes = [(0, b.add(first, ir.Constant(I32, p * width)) if p else first) for p in range(panels // 2)]
    for row, col in boxes:
        at: list[ir.Value | int] = [0, 0]
        at[fast], at[slow] = col, row
        smem = dst.address(ctx, at)
        inner, across = (_moved(b, coords[d], x) for d, x in ((fast, col), (slow, row)))
        ctx.asm(ir.VoidType(), text, constraints, [smem, desc, inner, across, *outer, bar, *masks],
                side_effect=True)


def _moved(b: ir.IRBuilder, coordinate: ir.Value, by: ir.Value | int) -> ir.Value:
    """`coordinate` + `by` (the coordinate itself where `by` is 0)."""
    if isinstance(by, int):
        return coordinate if by == 0 else b.add(coordinate, ir.Constant(I32, by))
    return b.add(coordinate, by)


def _thread_span(d: DimMap) -> int:
    """The largest coordinate a thread's base takes along `d` (offsets are added to it)."""
    if d.mode in ("one", "all"):
        return 0
    if d.warp_step:
        top = (d.tpw - 1) * d.spt + (d.wpc - 1) * d.warp_step
    else:
        top = (d.wpc * d.tpw - 1) * d.spt
    return min(top, d.size - 1) if d.mode == "wrap" else top


def _along(key: tuple[int, ...], dim: int, offset: int) -> tuple[int, ...]:
    """`key` with its offset along `dim` replaced."""
    return (*key[:dim], offset, *key[dim + 1:])


def _vector_width(m: ThreadMap, fast: int, element_bytes: int) -> int:
    """Elements per shared-memory store: consecutive along the contiguous dimension in every
    thread, starting at a multiple of the width (at most 16 bytes, within one swizzle unit)."""
    d = m.dims[fast]
    keys = set(m.keys)
    vw = 16 // element_bytes
    while vw > 1:
        aligned = d.mode in ("one", "all") or (d.spt % vw == 0 and d.warp_step % vw == 0 and d.size % vw == 0)
        if aligned and all(_along(k, fast, k[fast] - k[fast] % vw + i) in keys for k in keys for i in range(vw)):
            return vw
        vw //= 2
    return 1


def _stmatrix_groups(ctx: Ctx, m: ThreadMap, fast: int, element_bytes: int) -> list[tuple[int, int]] | None:
    """The (row, column) offsets of the 16 x 16 blocks a warp writes with one `stmatrix .x4`
    each, or None where the tile's layout is not a tensor-core accumulator's (sm_90, 16-bit).

    In an accumulator layout (wgmma, mma.sync) each 8 x 8 block of a warp has lane l's two
    neighbouring elements at row l / 4, columns 2 (l % 4) and + 1: the fragment stmatrix takes.
    One instruction writes four blocks (rows s and s + 8, columns f and f + 8), each block row a
    16-byte swizzle unit whose address one lane gives: a quarter of the shared stores of 32-bit
    vectors, the same bytes."""
    if ctx.options.sm < 90 or element_bytes != 2:
        return None
    rows, cols = m.dims[1 - fast], m.dims[fast]
    if not (rows.warp_step and cols.warp_step and rows.mode == "tile" and cols.mode == "tile"
            and (rows.spt, rows.tpw, rows.lane_stride) == (1, 8, 4)
            and (cols.spt, cols.tpw, cols.lane_stride, cols.wpc) == (2, 4, 1, 1)):
        return None
    row_starts = [r for r in rows.offsets if r % 16 == 0]
    col_starts = [c for c in cols.offsets if c % 16 == 0]
    if ({r + i for r in row_starts for i in (0, 8)} != set(rows.offsets)
            or {c + i for c in col_starts for i in (0, 1, 8, 9)} != set(cols.offsets)):
        return None
    return [(r, c) for r in row_starts for c in col_starts]


def _stmatrix(ctx: Ctx, address: ir.Value, offset: int, regs: list[ir.Value]) -> None:
    """stmatrix .x4 at `address` + `offset` (an immediate: a register per constant sum would be
    hoisted out of the loops and held through them)."""
    text = f"stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0+{offset}], {{$1, $2, $3, $4}};"
    ctx.asm(ir.VoidType(), text, "r,r,r,r,r,~{memory}", [ctx.b.ptrtoint(address, I32), *regs], side_effect=True)


@lowers("tc.tma_store")
def lower_tma_store(ctx: Ctx, op: TmaStoreOp) -> None:
    """Write the tile into swizzled panel buffers (shared memory), then one thread issues a bulk
    tensor store per panel. With fewer buffers than panels (two, or in a loop as many as fit),
    panel j waits until the store of panel j - buffers has read its buffer; the issuing thread
    waits for the last reads at the end.

    In a loop (a persistent kernel) nothing waits at the end: before each write of a buffer the
    issuing thread waits for the copy that read it last (of this or the previous iteration), so
    the copies overlap the next iteration, and it waits for all of them at the kernel's exit
    (`return_from_kernel`)."""
    b = ctx.b
    src = ctx.tile(op.operands[0])
    t = op.operands[0].type
    assert isinstance(t, TileType) and isinstance(t.element, ScalarType)
    fast, slow = int(op.fast), 1 - int(op.fast)
    eb = t.element.bytes
    panel = int(op.box[0])
    panels = t.shape[fast] // panel
    nbuf = panel_buffers(op)
    width = int(op.swizzle)  # bytes per row of a panel: 128, 64 or 32
    buf_bytes = t.shape[slow] * width
    m = src.map
    span = _thread_span(m.dims[fast])
    vw = _vector_width(m, fast, eb)
    in_loop = bool(loops_of(op))
    known = panel_by_panel(op)  # each register's panel (so its buffer) known when compiling
    chunked = known and nbuf < panels  # one panel per step (buffers in turns), else the whole tile in one
    steps = [[p] for p in range(panels)] if chunked else [list(range(panels))]
    by_step: dict[int, list[tuple[int, ...]]] = {}
    blocks = _stmatrix_groups(ctx, m, fast, eb) if known else None
    for key in ((_along((r, r), fast, c) for r, c in blocks) if blocks else m.keys):
        if key[fast] % vw:
            continue  # (stored with the vector that starts before it)
        p = key[fast] // panel
        if known and (key[fast] + span) // panel != p:
            raise lowering_error("internal error: tma_store panels are not known per register", op.loc)
        by_step.setdefault(p if chunked else 0, []).append(key)
    base = ctx.smem_ptr(op)
    row0, col0 = ctx.base(m.dims[slow]), ctx.base(m.dims[fast])
    if blocks:  # the row and the 16-byte unit of the block row whose address this lane gives
        lane, rows = ctx.lane, m.dims[slow]
        warp_row = (b.mul(ctx.warp_part(rows.warp_stride, rows.wpc), ir.Constant(I32, rows.warp_step))
                    if rows.wpc > 1 else ir.Constant(I32, 0))
        stm_row = b.add(warp_row, b.add(b.and_(lane, ir.Constant(I32, 7)),  # + l % 8 + 8 (l / 16)
                                        b.and_(b.lshr(lane, ir.Constant(I32, 1)), ir.Constant(I32, 8))))
        stm_unit = b.xor(b.and_(b.lshr(lane, ir.Constant(I32, 3)), ir.Constant(I32, 1)),  # column 8 (l / 8 % 2)
                         _phase(b, stm_row, width))
        stm_base = b.gep(base, [b.mul(stm_row, ir.Constant(I32, width))], inbounds=True,
                         source_etype=ir.IntType(8))
        stm_units: dict[int, ir.Value] = {}
    leader = ctx.thread0()
    coords = [ctx.scalar(v) for v in op.operands[1:]]
    rank = len(coords)
    desc = _tensor_map(ctx, int(op.descriptor), op)
    issue: ir.Value = ir.Constant(ir.IntType(1), 1)  # (inside the leader's branch) unless C is empty
    ext = list(op.extents)
    f = ctx.function
    for arg, offset in zip(ext[::2], ext[1::2]):  # an empty matrix: the runtime's extent 1 must not be written
        if arg >= 0:
            size = b.add(ctx.scalar(f.args[arg]), ir.Constant(I32, offset)) if offset else ctx.scalar(f.args[arg])
            issue = b.and_(issue, b.icmp_signed(">", size, ir.Constant(I32, 0)))
    places = ", ".join(f"${3 + d}" for d in range(rank))
    copy = f"@$0 cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [$1, {{{places}}}], [$2];"
    etype = llvm_type(t.element)
    # With three or more buffers in turns the leader waits for the next panel's buffer before the
    # barrier that ends this panel's writes (its reader was issued at least two panels before),
    # so that one barrier per panel does for both; with two it would hold back this panel's copy
    ahead = chunked and nbuf >= 3
    for j, step in enumerate(steps):
        pending = reads_pending(j, panels, nbuf, in_loop) if chunked else (0 if in_loop else None)
        if pending is not None and not (ahead and j > 0):  # (ahead: waited for before the last barrier)
            # the copy that read this buffer last is done reading it
            with b.if_then(leader):
                _wait_for_bulk_reads(ctx, pending)
            ctx.barrier()
        elif j == 0 and not runs_first_in_shared_memory(f, ctx.alloc, op):
            ctx.barrier()  # earlier users of this shared memory are done
        for key in by_step.get(j, []):
            if blocks:
                # lane l gives the address of row l % 8 of block l / 8: blocks (+0, +0),
                # (+0, +8), (+8, +0), (+8, +8) of the warp's 16 x 16 at `key` (in this order
                # ptxas needs no more registers than for 4-byte stores; with the rows first it
                # spilled). The rows start at a multiple of 16, so the swizzle's row bits are the
                # lane's and the 16-byte unit is the lane's unit ^ an even constant: one address
                # per such constant, the rest an immediate offset (few registers stay live
                # through a persistent loop)
                unit = key[fast] % panel // 8
                if unit not in stm_units:
                    shifted = b.shl(b.xor(stm_unit, ir.Constant(I32, unit)), ir.Constant(I32, 4))
                    stm_units[unit] = b.gep(stm_base, [shifted], inbounds=True, source_etype=ir.IntType(8))
                at = (key[fast] // panel) % nbuf * buf_bytes + key[slow] * width
                tops = [_along(key, slow, key[slow] + dr) for dr in (0, 8)]
                regs = [pack_pair(ctx, src.vals[_along(t, fast, key[fast] + dc)],
                                  src.vals[_along(t, fast, key[fast] + dc + 1)]) for t in tops for dc in (0, 8)]
                _stmatrix(ctx, stm_units[unit], at, regs)
                continue
            r = b.add(row0, ir.Constant(I32, key[slow])) if key[slow] else row0
            if known:
                c = b.add(col0, ir.Constant(I32, key[fast] % panel)) if key[fast] % panel else col0
                buf: ir.Value = ir.Constant(I32, (key[fast] // panel) % nbuf * buf_bytes)
            else:
                cc = b.add(col0, ir.Constant(I32, key[fast])) if key[fast] else col0
                c = b.and_(cc, ir.Constant(I32, panel - 1))
                buf = b.mul(b.lshr(cc, ir.Constant(I32, panel.bit_length() - 1)), ir.Constant(I32, buf_bytes))
            byte = b.mul(c, ir.Constant(I32, eb))
            unit = b.xor(b.lshr(byte, ir.Constant(I32, 4)), _phase(b, r, width))
            off = b.add(b.add(buf, b.mul(r, ir.Constant(I32, width))),
                        b.add(b.shl(unit, ir.Constant(I32, 4)), b.and_(byte, ir.Constant(I32, 15))))
            ptr = b.gep(base, [off], inbounds=True, source_etype=ir.IntType(8))
            vals = [src.vals[_along(key, fast, key[fast] + i)] for i in range(vw)]
            if vw == 1:
                b.store(vals[0], ptr).align = eb
            else:
                vec: ir.Value = ir.Constant(ir.VectorType(etype, vw), None)
                for i, v in enumerate(vals):
                    vec = b.insert_element(vec, v, ir.Constant(I32, i))
                b.store(vec, ptr).align = vw * eb
        # the threads' writes (generic proxy) before the copy reads them (async proxy)
        ctx.asm(ir.VoidType(), "fence.proxy.async.shared::cta;", "~{memory}", [], side_effect=True)
        following = reads_pending(j + 1, panels, nbuf, in_loop) if ahead and j + 1 < len(steps) else None
        if following is not None:  # (this panel's copy is not issued yet: one group fewer)
            with b.if_then(leader):
                _wait_for_bulk_reads(ctx, following - 1)
        ctx.barrier()
        with b.if_then(leader):  # (the other warps jump over the copies' uniform-register loops)
            for p in step:
                smem = b.gep(base, [ir.Constant(I32, p % nbuf * buf_bytes)], inbounds=True, source_etype=ir.IntType(8))
                inner = b.add(coords[fast], ir.Constant(I32, p * panel)) if p else coords[fast]
                ctx.asm(ir.VoidType(), copy, "b,l,r," + ",".join("r" * rank) + ",~{memory}",
                        [issue, desc, smem, inner, coords[slow], *coords[2:]], side_effect=True)
            ctx.asm(ir.VoidType(), "cp.async.bulk.commit_group;", "~{memory}", [], side_effect=True)
    if not in_loop:
        with b.if_then(leader):
            _wait_for_bulk_reads(ctx, 0)


def _phase(b: ir.IRBuilder, row: ir.Value, width: int) -> ir.Value:
    """The 16-byte unit a row's unit 0 moves to in a panel of `width`-byte rows swizzled as TMA
    swizzles them (the unit index XOR address bits 7.. of the row: (row / (128 / width)) modulo
    width / 16; row % 8 for 128 bytes)."""
    shift = (128 // width).bit_length() - 1
    shifted = b.lshr(row, ir.Constant(I32, shift)) if shift else row
    return b.and_(shifted, ir.Constant(I32, width // 16 - 1))


def _wait_for_bulk_reads(ctx: Ctx, pending: int) -> None:
    """(The issuing thread) until at most `pending` of its bulk-store groups still read shared memory."""
    ctx.asm(ir.VoidType(), f"cp.async.bulk.wait_group.read {pending};", "~{memory}", [], side_effect=True)


def return_from_kernel(ctx: Ctx) -> None:
    """Return; first, where bulk stores in a loop may still read shared memory (they do not wait
    at the end, see lower_tma_store), thread 0, which issued them, waits for them: the next
    program on this SM could otherwise overwrite what they have not read yet."""
    if any(isinstance(op, TmaStoreOp) and loops_of(op) for op in ctx.function.walk()):
        with ctx.b.if_then(ctx.thread0()):
            _wait_for_bulk_reads(ctx, 0)
    ctx.b.ret_void()


__all__ = ["PARAM_PREFIX", "TENSOR_MAP_BYTES", "return_from_kernel", "tensor_map_count"]
