"""The dot on Hopper's warpgroup tensor cores: wgmma.mma_async with its operands in shared memory.

Each group of 4 warps computes a 64-row block of the accumulator by the tile's whole N per
instruction (m64nNk16 for fp16/bf16, m64nNk8 for tf32), reading A and B through 64-bit matrix
descriptors: the operand's start
address, its swizzle (32, 64 or 128 bytes: the tile's own XOR swizzle, see swizzle.py), the byte
stride between 8-row groups (SBO) and, for an operand whose M or N dimension is contiguous
("MN-major", read transposed), the stride between its panels along that dimension (LBO).
tf32 operands are K-major only (the staging makes them so: tc_opt.k_major_operands); an
M-contiguous tf32 A, and B^T of a dot with a transposed accumulator (Mma.transposed, computed as
C^T = B^T A^T), are read into registers instead (`lower_wgmma_register_a`). wgmma takes
their fp32 bits as tf32 without the cvt.rna rounding of the mma.sync path (as Triton's tf32 dots
do; on an H100 the relative error of a 4096^3 product was 7.8e-4, cuBLAS's with allow_tf32 2.9e-4).

The instructions are asynchronous: `wgmma.fence` orders them after the accumulator's last
register writes, `commit_group` closes the batch and `wait_group 0` waits for it, passing every
accumulator register through so that nothing reads one before the wait. An asynchronous dot
(`DotOp.asynchronous`, set by the loop pipeliner) skips the wait: its `tc.dot_wait` waits later,
with one batch left in flight while the loop issues the next copies. Shared memory that the
generic proxy wrote (cp.async copies, stores of a staged tile) must be fenced for the async proxy
first: the lowering of those writes does it (`fence_for_async_proxy`).
"""

from __future__ import annotations

from collections.abc import Sequence

import llvmlite.ir as ir
from tc_ir.layouts import Mma
from tc_ir.ops import BinaryOp, ConstantOp, DotOp, DotWaitOp, Operation, OpResult, SelectOp, TmaStoreOp, Value
from tc_ir.types import ScalarType, TileType
from tc_opt.dot_layouts import is_wgmma_dot
from tc_opt.k_major_operands import reads_a_from_registers

from .context import Ctx, TileVal, lowering_error
from .llvm_types import F32, I32
from .lowerings import lowers
from .swizzle import SharedView

I64 = ir.IntType(64)

#: The descriptor's swizzle field per swizzle width in bytes.
_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


def kernel_uses_wgmma(ctx: Ctx) -> bool:
    """Whether the kernel has a dot on wgmma (its shared-memory writes need an async-proxy fence)."""
    found = getattr(ctx, "_uses_wgmma", None)
    if found is None:
        found = any(is_wgmma_dot(op) for op in ctx.function.walk())
        ctx._uses_wgmma = found  # type: ignore[attr-defined]
    return bool(found)


def fence_for_async_proxy(ctx: Ctx) -> None:
    """Make this thread's generic-proxy writes to shared memory visible to wgmma (before the
    barrier that publishes them)."""
    if kernel_uses_wgmma(ctx):
        ctx.asm(ir.VoidType(), "fence.proxy.async.shared::cta;", "~{memory}", [], side_effect=True)


def _descriptor(ctx: Ctx, view: SharedView, coords: list[ir.Value | int], lbo: int, sbo: int, mode: int) -> ir.Value:
    """The 64-bit matrix descriptor of the operand at `coords`: its start address >> 4 (a shared
    address is below 2^18, so the 14-bit field needs no mask but in clusters) plus the constant
    fields. The start is computed as (view base >> 4) + (byte offset >> 4), both 16-byte
    aligned: the base's part is one value per slot and the offsets are constants or loop
    invariants, so each descriptor of a k-step costs one 32-bit add."""
    b = ctx.b
    four = ir.Constant(I32, 4)
    eb = view.element.bits // 8  # type: ignore[union-attr]
    byte = b.mul(view.offset(ctx, coords), ir.Constant(I32, eb))
    base = b.ptrtoint(view.ptr, I32)
    if ctx.cluster > 1:  # (a CTA of rank r > 0 has r from bit 24 up in its shared addresses: keep the offset's 18 bits)
        base = b.and_(base, ir.Constant(I32, 0x3FFFF))
    start = b.add(b.lshr(base, four), b.lshr(byte, four))
    fixed = ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | mode << 62
    return b.or_(b.zext(start, I64), ir.Constant(I64, fixed))


class Operand:
    """How wgmma reads one operand: its descriptor fields and whether it is read transposed."""

    def __init__(self, view: SharedView, kdim: int, where: str) -> None:
        width = view.swizzle_bytes
        if width not in _SWIZZLE_MODE:
            raise lowering_error(f"internal error: wgmma operand {where} is not swizzled ({view.layout})", None)
        self.view = view
        self.kdim = kdim
        self.mode = _SWIZZLE_MODE[width]
        self.k_major = view.layout.order[0] == kdim
        eb = view.element.bits // 8  # type: ignore[union-attr]
        rows = view.shape[view.layout.order[1]]
        self.sbo = 8 * width  # 8 rows of one swizzle width
        # K-major: unused (an instruction's 32 bytes of K never leave a panel); MN-major: the
        # stride from one panel of the contiguous M or N dimension to the next
        self.lbo = 16 if self.k_major else (view.panel_stride * eb if view.panel else rows * width)

    def descriptor(self, ctx: Ctx, mn: ir.Value | int, k: int) -> ir.Value:
        coords: list[ir.Value | int] = [0, 0]
        coords[self.kdim] = k
        coords[1 - self.kdim] = mn
        return _descriptor(ctx, self.view, coords, self.lbo, self.sbo, self.mode)

    @property
    def transposed(self) -> int:
        return 0 if self.k_major else 1


#: The PTX operand type and the K of one instruction per element type of the operands.
_OPERAND_KINDS = {"f16": ("f16", 16), "bf16": ("bf16", 16), "f32": ("tf32", 8)}


def _wgmma_text(n: int, elem: str, k: int, trans_a: int, trans_b: int) -> str:
    """The instruction; tf32 has no transpose operands (both operands are read K-major)."""
    d = ", ".join(f"${i}" for i in range(n // 2))
    h = n // 2
    trans = f", {trans_a}, {trans_b}" if elem != "tf32" else ""
    return (f"{{ .reg .pred p; setp.ne.b32 p, ${h + 2}, 0; "
            f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{elem}.{elem} "
            f"{{{d}}}, ${h}, ${h + 1}, p, 1, 1{trans}; }}")


def _through(ctx: Ctx, text: str, vals: list[ir.Value], extra: Sequence[ir.Value] = ()) -> list[ir.Value]:
    """An asm statement that takes and returns `vals` (the accumulator) in registers, unchanged
    unless `text` writes them; `extra` (b32 inputs) follow them as $2n, $2n+1, ..."""
    n = len(vals)
    cons = ",".join(["=f"] * n + [str(i) for i in range(n)] + ["r"] * len(extra))
    r = ctx.asm(ir.LiteralStructType([F32] * n), text, cons, [*vals, *extra], side_effect=True)
    return [ctx.b.extract_value(r, i) for i in range(n)]


def lower_wgmma(ctx: Ctx, op: DotOp, a: SharedView, bv: SharedView, acc: TileVal,
                use_acc: ir.Value | None = None) -> None:
    """The dot as wgmma batches of K = 16 (8 for tf32), committed as one group. `use_acc` (i1):
    the first batches' scale-d operand, so that they do not read the accumulator where it is
    false (its registers may then be undefined); the later batches accumulate."""
    lay = acc.map.layout
    assert isinstance(lay, Mma) and lay.version == 3
    elem = a.element
    if not isinstance(elem, ScalarType) or elem.name not in _OPERAND_KINDS:
        raise lowering_error(f"internal error: wgmma of {elem} operands", op.loc)
    kind, kstep = _OPERAND_KINDS[elem.name]
    b = ctx.b
    m, n = acc.map.shape
    K = a.shape[1]
    num_warps = lay.warps_per_cta[0]
    cover = 16 * num_warps  # rows per repetition: 64 per warpgroup
    opa, opb = Operand(a, 1, "A"), Operand(bv, 0, "B")
    if kind == "tf32" and not (opa.k_major and opb.k_major):
        raise lowering_error("internal error: a tf32 wgmma operand is not K-major in shared memory", op.loc)
    group_row = b.mul(ctx.warp_part(4, num_warps // 4), ir.Constant(I32, 64))  # the warpgroup's rows
    # the register order of m64nNk16's accumulator: per 8 columns c of the instruction's N, rows
    # r and r + 8 of the warp's 16, columns c + 2 * (lane % 4) + (0, 1) (the thread map's keys)
    order = {rep: [(rep * cover + h, 8 * j + e) for j in range(n // 8) for h in (0, 8) for e in (0, 1)]
             for rep in range(m // cover)}
    vals = dict(acc.vals)
    missing = [k for ks in order.values() for k in ks if k not in vals]
    if missing:
        raise lowering_error(f"internal error: the wgmma accumulator lacks {missing[:4]}", op.loc)
    one = ir.Constant(I32, 1)
    first = b.zext(use_acc, I32) if use_acc is not None else one
    ctx.asm(ir.VoidType(), "wgmma.fence.sync.aligned;", "~{memory}", [], side_effect=True)
    text = _wgmma_text(n, kind, kstep, opa.transposed, opb.transposed)
    half = n // 2
    cons = ",".join(["=f"] * half + ["l", "l", "r"] + [str(i) for i in range(half)])
    ret = ir.LiteralStructType([F32] * half)
    for kk in range(0, K, kstep):
        db = opb.descriptor(ctx, 0, kk)
        for rep, ks in order.items():
            row: ir.Value = b.add(group_row, ir.Constant(I32, rep * cover)) if rep else group_row
            da = opa.descriptor(ctx, row, kk)
            scale_d = first if kk == 0 else one
            r = ctx.asm(ret, text, cons, [da, db, scale_d, *(vals[k] for k in ks)], side_effect=True)
            for i, k in enumerate(ks):
                vals[k] = b.extract_value(r, i)
    ctx.asm(ir.VoidType(), "wgmma.commit_group.sync.aligned;", "~{memory}", [], side_effect=True)
    result = TileVal(acc.map, vals, acc.element)
    ctx.values[op.result] = result if op.asynchronous else wait_for_wgmma(ctx, result, 0)


def _register_a_text(n: int) -> str:
    """tf32 wgmma with its A operand (4 registers per thread) in registers."""
    h = n // 2
    d = ", ".join(f"${i}" for i in range(h))
    return (f"{{ .reg .pred p; setp.ne.b32 p, ${h + 5}, 0; "
            f"wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 "
            f"{{{d}}}, {{${h}, ${h + 1}, ${h + 2}, ${h + 3}}}, ${h + 4}, p, 1, 1; }}")


def register_a_groups(op: DotOp) -> int:
    """The commit groups of a wgmma dot with its A operand in registers: one per K step of 8."""
    a = op.operands[0].type
    return max(1, int(a.shape[1]) // 8)  # type: ignore[union-attr]


def lower_wgmma_register_a(ctx: Ctx, op: DotOp, a: SharedView, bv: SharedView, acc: TileVal,
                           use_acc: ir.Value | None = None) -> None:
    """A tf32 dot with wgmma's A operand in registers, read from shared memory per K step of 8
    (rows r = 16 * warp + lane / 4 (+ 8), K columns lane % 4 (+ 4)), and its B operand K-major
    through a descriptor. Two cases:
    - a transposed accumulator (Mma.transposed, tc_opt.k_major_operands.swaps_operands): C^T =
      B^T A^T, wgmma's A is B^T read from B's N-major tile, its B is A (K-major), M the
      instruction's N. The instruction's rows r and r + 8 are the tile's N = 2 r and 2 r + 1
      (tc_nvptx.mma_layout's paired rows): 2 8-byte loads per step instead of 4 scalar ones (in
      B's 128-byte swizzle both take 8 wavefronts a warp: 2-way bank conflicts, measured harmless,
      BENCHMARKS.md twenty-eighth session);
    - otherwise A itself (staged M-contiguous) into registers, B (K-major) by descriptor.
    Each K step is its own commit group, preceded by a wgmma.fence (its registers were just
    written) and followed by a wait that leaves at most (groups per dot - 1) in flight: the
    registers a step loads were last read by the same step of the previous dot, which is then
    complete, so ptxas need not serialize anything."""
    lay = acc.map.layout
    assert isinstance(lay, Mma) and lay.version == 3
    b = ctx.b
    m, n = acc.map.shape
    K = a.shape[1]
    num_warps = lay.warps_per_cta[0]
    cover = 16 * num_warps  # rows of the instruction's product per repetition
    if lay.transposed:  # rows along the tile's N, read from B [K, N]; A [M, K] by descriptor
        desc, src, width, rows = Operand(a, 1, "A"), bv, m, n

        def coords(row: ir.Value, k: ir.Value) -> list[ir.Value | int]:
            return [k, row]

        order = {rep: [(8 * j + e, rep * cover + h) for j in range(m // 8) for h in (0, 1) for e in (0, 1)]
                 for rep in range(n // cover)}
        pair = 1  # (the instruction's rows r and r + 8: N = 2 r and 2 r + 1)
    else:  # rows along M, read from A [M, K]; B [K, N] by descriptor
        desc, src, width, rows = Operand(bv, 0, "B"), a, n, m

        def coords(row: ir.Value, k: ir.Value) -> list[ir.Value | int]:
            return [row, k]

        order = {rep: [(rep * cover + h, 8 * j + e) for j in range(n // 8) for h in (0, 8) for e in (0, 1)]
                 for rep in range(m // cover)}
        pair = 0
    if not desc.k_major:
        raise lowering_error("internal error: the shared operand of a register-operand tf32 wgmma is not K-major", op.loc)
    vals = dict(acc.vals)
    missing = [k for ks in order.values() for k in ks if k not in vals]
    if missing or rows % cover:
        raise lowering_error(f"internal error: the wgmma accumulator ({m}x{n}, {lay}) lacks {missing[:4]}", op.loc)
    gid = ctx.lane_part(4, 8)
    row = b.add(b.mul(ctx.warp_part(1, num_warps), ir.Constant(I32, 16)), b.shl(gid, ir.Constant(I32, 1)) if pair else gid)
    col = ctx.lane_part(1, 4)
    one = ir.Constant(I32, 1)
    first = b.zext(use_acc, I32) if use_acc is not None else one
    text = _register_a_text(width)
    half = width // 2
    cons = ",".join(["=f"] * half + ["r", "r", "r", "r", "l", "r"] + [str(i) for i in range(half)])
    ret = ir.LiteralStructType([F32] * half)
    groups = register_a_groups(op)
    for kk in range(0, K, 8):
        frags = {}
        for rep in order:
            base = b.add(row, ir.Constant(I32, rep * cover)) if rep else row
            regs = []
            for dk in (0, 4):
                k_at = b.add(col, ir.Constant(I32, kk + dk))
                if pair:  # rows 2 r and 2 r + 1: neighbours in one 16-byte chunk
                    v2 = b.load(src.address(ctx, coords(base, k_at)), typ=ir.VectorType(F32, 2), align=8)
                    regs += [b.bitcast(b.extract_element(v2, ir.Constant(I32, i)), I32) for i in (0, 1)]
                    continue
                for dr in (0, 8):
                    r_at = b.add(base, ir.Constant(I32, dr)) if dr else base
                    v = b.load(src.address(ctx, coords(r_at, k_at)), typ=F32)
                    regs.append(b.bitcast(v, I32))
            frags[rep] = regs
        ctx.asm(ir.VoidType(), "wgmma.fence.sync.aligned;", "~{memory}", [], side_effect=True)
        db = desc.descriptor(ctx, 0, kk)
        scale_d = first if kk == 0 else one
        for rep, ks in order.items():
            r = ctx.asm(ret, text, cons, [*frags[rep], db, scale_d, *(vals[k] for k in ks)], side_effect=True)
            for i, k in enumerate(ks):
                vals[k] = b.extract_value(r, i)
        ctx.asm(ir.VoidType(), "wgmma.commit_group.sync.aligned;", "~{memory}", [], side_effect=True)
        ctx.asm(ir.VoidType(), f"wgmma.wait_group.sync.aligned {groups - 1};", "~{memory}", [], side_effect=True)
    result = TileVal(acc.map, vals, acc.element)
    ctx.values[op.result] = result if op.asynchronous else wait_for_wgmma(ctx, result, 0)


def wait_for_wgmma(ctx: Ctx, tile: TileVal, pending: int, valid: ir.Value | None = None) -> TileVal:
    """`tile` once at most `pending` wgmma batches are in flight: its registers pass through the
    wait, so that nothing reads them (or moves them) before the hardware has written them.

    `valid` (i1): where false the registers become zeros, by selp in the same asm statement: a
    select LLVM could place (it sinks one below the narrowing of the values) makes ptxas
    serialize the loop's wgmma (C7514)."""
    keys = list(tile.vals)
    text = f"wgmma.wait_group.sync.aligned {pending};"
    extra: list[ir.Value] = []
    if valid is not None:
        n = len(keys)
        zero = "".join(f" selp.f32 ${i}, ${i}, 0f00000000, v;" for i in range(n))
        text = f"{{ .reg .pred v; setp.ne.b32 v, ${2 * n}, 0; {text}{zero} }}"
        extra = [ctx.b.zext(valid, I32)]
    done = _through(ctx, text, [tile.vals[k] for k in keys], extra)
    return TileVal(tile.map, dict(zip(keys, done)), tile.element)


def _pin_store_coordinates(ctx: Ctx, wait: DotWaitOp) -> None:
    """Compute the scalars that the bulk stores after `wait` take their coordinates from (a
    grouped tile order's divisions) again just before it.

    Why: only the epilogue's elected thread uses them, so LLVM sank their computation into its
    branch after the tile's stores to shared memory, and its warp reached the next program's first
    wgmma some 90 instructions (two integer divisions) after the rest of its warpgroup, the tensor
    cores idle meanwhile; left where the program computes them, every warp would compute them
    before its first wgmma instead. So the values they start from (the block's arguments, such as a
    persistent kernel's program index, and the results of ops other than pure scalar arithmetic)
    pass through an asm statement with side effects here, the block's i32 arithmetic from there
    to the coordinates is lowered again after it, and its results pass through another before the
    wait's asm (LLVM moves none of them past another such statement). ptxas may still issue the
    wait first (it did for the 128x256 kernels); the divisions then overlap the accumulator's
    conversion in every warp instead of delaying one warp after the barrier (H100, 4096^3:
    0.5% fewer cycles for fp16 with 3 stages)."""
    from .lowerings import LOWERINGS

    block = wait.parent
    if block is None:
        return
    at = block.ops.index(wait)
    defs: dict[Value, Operation] = {r: o for o in block.ops[:at] for r in o.results}
    later: dict[Value, Operation] = {r: o for o in block.ops[at + 1:] for r in o.results}
    frontier: list[Value] = []  # computed before the wait, read by the coordinates' ops after it
    todo = [v for o in block.ops[at + 1:] if isinstance(o, TmaStoreOp) for v in o.operands[1:]]
    while todo:
        v = todo.pop()
        if v in later:
            if _is_arithmetic(later[v]):
                todo.extend(later[v].operands)
        elif (v in defs or v in block.args) and v not in frontier and _is_i32(v):
            frontier.append(v)
    chain: set[Operation] = set()  # the arithmetic computing the frontier from the leaves
    leaves: set[Value] = set()
    todo = list(frontier)
    while todo:
        v = todo.pop()
        op = defs.get(v)
        if op is not None and _is_arithmetic(op):
            if op not in chain:
                chain.add(op)
                todo.extend(op.operands)
        elif (v in block.args or (op is not None and not isinstance(op, ConstantOp))) and _is_i32(v):
            leaves.add(v)
    if not leaves:
        return
    for v in leaves:
        ctx.values[v] = _opaque(ctx, ctx.values[v])
    for op in block.ops[:at]:
        if op in chain:
            LOWERINGS[op.NAME](ctx, op)
    for v in frontier:
        ctx.values[v] = _opaque(ctx, ctx.values[v])


def _is_i32(v: Value) -> bool:
    return isinstance(v.type, ScalarType) and v.type.name == "i32"


def _is_arithmetic(op: Operation) -> bool:
    """Pure i32 arithmetic, which lowering again only computes again."""
    return isinstance(op, (BinaryOp, SelectOp)) and all(_is_i32(r) for r in op.results)


def _opaque(ctx: Ctx, v: ir.Value) -> ir.Value:
    """`v` through an asm statement with side effects: computed before it, and the result known
    to LLVM only as a register."""
    return ctx.asm(I32, "mov.b32 $0, $1;", "=r,r", [v], side_effect=True)


@lowers("tc.dot_wait")
def lower_dot_wait(ctx: Ctx, op: DotWaitOp) -> None:
    src = ctx.tile(op.operands[0])
    lay = src.map.layout
    if not isinstance(lay, Mma) or lay.version != 3:
        raise lowering_error(f"internal error: dot_wait of a {lay} tile (only wgmma results wait)", op.loc)
    valid = ctx.values[op.operands[1]] if len(op.operands) > 1 else None
    pending = int(op.pending)
    if pending == 0:
        _pin_store_coordinates(ctx, op)
    dot = op.operands[0]
    if pending and isinstance(dot, OpResult) and isinstance(dot.op, DotOp) and reads_a_from_registers(dot.op):
        pending *= register_a_groups(dot.op)  # (a dot of several commit groups: whole dots pending)
    ctx.values[op.result] = wait_for_wgmma(ctx, src, pending, valid)
