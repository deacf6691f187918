"""The dot: tensor cores (mma.sync m16n8k16 for fp16/bf16, m16n8k8 for tf32) when the
accumulator has an Mma layout (wgmma for version 3: lower_wgmma), FMA otherwise (exact fp32, operands read from shared memory).

Tensor-core operands come from swizzled shared memory through ldmatrix (x4 where it can: four
8x8 matrices per instruction; .trans when K is not the contiguous dimension of the tile in shared
memory, e.g. B stored [K, N] row-major or the spec's transposed operands).
"""

from __future__ import annotations

from collections.abc import Sequence

import llvmlite.ir as ir
from tc_ir.layouts import DotOperand, Mma
from tc_ir.ops import DotOp
from tc_ir.types import ElementType, ScalarType, TileType
from tc_opt.k_major_operands import reads_a_from_registers

from .context import Ctx, SharedTile, TileVal, lowering_error
from .llvm_types import F32, I32, bits_of, constant, llvm_type, memory_type
from .lowerings import lowers
from .lower_wgmma import lower_wgmma, lower_wgmma_register_a
from .swizzle import SharedView

Key = tuple[int, ...]

# ------------------------------------------------------------------------------ ldmatrix


def _select_const(ctx: Ctx, q: ir.Value, values: Sequence[int]) -> ir.Value:
    """values[q] for a lane-dependent q (a short select chain; hoisted out of loops by LLVM)."""
    b = ctx.b
    out: ir.Value = ir.Constant(I32, values[0])
    for i in range(1, len(values)):
        if values[i] != values[0]:
            out = b.select(b.icmp_unsigned("==", q, ir.Constant(I32, i)), ir.Constant(I32, values[i]), out)
    return out


def _ldmatrix(ctx: Ctx, addr: ir.Value, count: int, trans: bool) -> list[ir.Value]:
    regs = ", ".join(f"${i}" for i in range(count))
    t = ".trans" if trans else ""
    text = f"ldmatrix.sync.aligned.m8n8.x{count}{t}.shared.b16 {{{regs}}}, [${count}];"
    # "~{memory}": the asm reads shared memory. Without it LLVM took it for a pure function of
    # the address and merged two ldmatrix of one address with stores and barriers between them
    # (a chained dot whose operand reused the first dot's buffer read the first dot's operand)
    cons = ",".join(["=r"] * count + ["r", "~{memory}"])
    ret: ir.Type = I32 if count == 1 else ir.LiteralStructType([I32] * count)
    r = ctx.asm(ret, text, cons, [ctx.b.ptrtoint(addr, I32)])
    if count == 1:
        return [r]
    return [ctx.b.extract_value(r, i) for i in range(count)]


def load_operand(ctx: Ctx, view: SharedView, t: TileType) -> TileVal:
    """A 16-bit tensor-core operand (DotOperand of an Mma layout) from shared memory."""
    lay = t.layout
    assert isinstance(lay, DotOperand) and isinstance(lay.parent, Mma)
    b = ctx.b
    m = ctx.map_of(t)
    idim, kdim = (0, 1) if lay.operand_index == 0 else (1, 0)
    di = m.dims[idim]
    wm, wn = lay.parent.warps_per_cta
    # the warp's first row (A) / column (B); lanes add gid through the ldmatrix row addresses
    step, count, stride = (16, wm, 1) if idim == 0 else (8, wn, wm)
    wb: ir.Value = ir.Constant(I32, 0)
    if count > 1:
        wb = b.mul(ctx.warp_part(stride, count), ir.Constant(I32, step))
        if di.mode == "wrap":
            wb = ctx.modulo(wb, di.size, b)
    i_groups = sorted(set(di.offsets))
    k_groups = list(range(0, t.shape[kdim], 8))
    if lay.operand_index == 0:  # per 16x16 block: (i, k), (i+8, k), (i, k+8), (i+8, k+8)
        mats = [(ig + hi, kg + hk) for kg in k_groups[::2] for ig in i_groups if (ig // 8) % 2 == 0
                for hk in (0, 8) for hi in (0, 8)]
        mats = [(i, k) for i, k in mats if i in i_groups]
    else:  # per two n-blocks: (n, k), (n, k+8), (n', k), (n', k+8)
        mats = [(ig, kg + hk) for kg in k_groups[::2] for ig in i_groups for hk in (0, 8)]
    k_contig = view.layout.order[0] == kdim
    lane = ctx.lane
    rr = b.and_(lane, ir.Constant(I32, 7))
    elem = t.element
    vt = ir.VectorType(llvm_type(elem), 2)
    vals: dict[Key, ir.Value] = {}
    pos = 0
    while pos < len(mats):
        n = 4 if len(mats) - pos >= 4 else 2 if len(mats) - pos >= 2 else 1
        batch = mats[pos : pos + n]
        pos += n
        q = b.and_(b.lshr(lane, ir.Constant(I32, 3)), ir.Constant(I32, n - 1))
        ig = _select_const(ctx, q, [i for i, _ in batch])
        kg = _select_const(ctx, q, [k for _, k in batch])
        i_c = b.add(wb, ig)
        if k_contig:
            i_c, k_c = b.add(i_c, rr), kg
        else:
            k_c = b.add(kg, rr)
        c: list[ir.Value | int] = [0, 0]
        c[idim], c[kdim] = i_c, k_c
        regs = _ldmatrix(ctx, view.address(ctx, c), n, not k_contig)
        for (i_off, k_off), reg in zip(batch, regs):
            pair = b.bitcast(reg, vt)
            for j in (0, 1):
                key = [0, 0]
                key[idim], key[kdim] = i_off, k_off + j
                vals[tuple(key)] = b.extract_element(pair, ir.Constant(I32, j))
    missing = [k for k in m.keys if k not in vals]
    if missing:
        raise lowering_error(f"internal error: ldmatrix does not cover {missing[:4]} of {t}", None)
    return TileVal(m, vals, elem)


# ------------------------------------------------------------------------------ mma.sync


def pack_pair(ctx: Ctx, x: ir.Value, y: ir.Value) -> ir.Value:
    """Two 16-bit values as one 32-bit register, `x` in the low half (an operand fragment's)."""
    b = ctx.b
    v: ir.Value = ir.Constant(ir.VectorType(x.type, 2), None)
    v = b.insert_element(v, x, ir.Constant(I32, 0))
    v = b.insert_element(v, y, ir.Constant(I32, 1))
    return b.bitcast(v, I32)


def _tf32(ctx: Ctx, x: ir.Value) -> ir.Value:
    return ctx.asm(I32, "cvt.rna.tf32.f32 $0, $1;", "=r,f", [x])


def lower_mma(ctx: Ctx, op: DotOp, a: TileVal, bv: TileVal, acc: TileVal) -> None:
    b = ctx.b
    elem = a.element
    assert isinstance(elem, ScalarType)
    K = a.map.shape[1]
    rows = sorted({o for o in acc.map.dims[0].offsets if o % 16 == 0})
    cols = sorted({o for o in acc.map.dims[1].offsets if o % 2 == 0})
    if elem.bits == 16:
        kinstr, shape, ab = 16, "m16n8k16", f"{elem.name}.{elem.name}"
    else:
        kinstr, shape, ab = 8, "m16n8k8", "tf32.tf32"
    text = (f"mma.sync.aligned.{shape}.row.col.f32.{ab}.f32 "
            "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")
    cons = "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3"
    ret = ir.LiteralStructType([F32] * 4)
    vals = dict(acc.vals)
    av, bvals = a.vals, bv.vals
    h = kinstr // 2
    for kb in range(0, K, kinstr):
        a_regs: dict[int, list[ir.Value]] = {}
        for mb in rows:
            if elem.bits == 16:
                a_regs[mb] = [pack_pair(ctx, av[(mb + dm, kb + dk)], av[(mb + dm, kb + dk + 1)])
                              for dk in (0, h) for dm in (0, 8)]
            else:
                a_regs[mb] = [_tf32(ctx, av[(mb + dm, kb + dk)]) for dk in (0, h) for dm in (0, 8)]
        for nb in cols:
            if elem.bits == 16:
                b_regs = [pack_pair(ctx, bvals[(kb + dk, nb)], bvals[(kb + dk + 1, nb)]) for dk in (0, h)]
            else:
                b_regs = [_tf32(ctx, bvals[(kb + dk, nb)]) for dk in (0, h)]
            for mb in rows:
                ks = [(mb, nb), (mb, nb + 1), (mb + 8, nb), (mb + 8, nb + 1)]
                r = ctx.asm(ret, text, cons, [*a_regs[mb], *b_regs, *(vals[k] for k in ks)])
                for i, k in enumerate(ks):
                    vals[k] = b.extract_value(r, i)
    ctx.values[op.result] = TileVal(acc.map, vals, acc.element)


# ------------------------------------------------------------------------------------ FMA


def _shared_elem(ctx: Ctx, t: SharedTile, coords: list[ir.Value | int]) -> ir.Value:
    b = ctx.b
    mt = memory_type(t.element)
    if isinstance(t, SharedView):
        return b.load(t.address(ctx, coords), typ=mt)
    # a row-major tile (convert_layout to a dot operand)
    idx: ir.Value = ir.Constant(I32, 0)
    stride = 1
    for c, s in reversed(list(zip(coords, t.shape))):
        cv = ir.Constant(I32, c) if isinstance(c, int) else c
        idx = b.add(idx, b.mul(cv, ir.Constant(I32, stride)))
        stride *= s
    return b.load(b.gep(t.ptr, [idx], source_etype=mt), typ=mt)


def lower_fma(ctx: Ctx, op: DotOp, a: SharedTile, bv: SharedTile, acc: TileVal) -> None:
    """Each thread computes its accumulator elements from operands in shared memory."""
    m = acc.map
    if len(m.dims) != 2:
        raise lowering_error("dot needs 2-D tiles", op.loc)
    K = a.shape[1]
    acc_ty = llvm_type(acc.element)
    b = ctx.b
    is_float = isinstance(acc.element, ScalarType) and acc.element.is_float
    dm, dn = m.dims
    rows = sorted({k[0] for k in m.keys})
    cols = sorted({k[1] for k in m.keys})
    row_base, col_base = ctx.base(dm), ctx.base(dn)
    row_c = {r: b.add(row_base, ir.Constant(I32, r)) for r in rows}
    col_c = {c: b.add(col_base, ir.Constant(I32, c)) for c in cols}
    vals = dict(acc.vals)

    def up(v: ir.Value, elem: ElementType) -> ir.Value:
        if v.type == acc_ty:
            return v
        if is_float:
            if str(v.type) == "bfloat":
                w = b.zext(b.bitcast(v, ir.IntType(16)), I32)
                f = b.bitcast(b.shl(w, ir.Constant(I32, 16)), F32)
                return f if acc_ty == F32 else b.fpext(f, acc_ty)
            return b.fpext(v, acc_ty)
        return b.sext(v, acc_ty) if bits_of(elem) < acc_ty.width else b.trunc(v, acc_ty)

    fma_name = f"llvm.fmuladd.{acc_ty.intrinsic_name}" if is_float else ""
    for k in range(K):
        avs = {r: up(_shared_elem(ctx, a, [row_c[r], k]), a.element) for r in rows}
        bvs = {c: up(_shared_elem(ctx, bv, [k, col_c[c]]), bv.element) for c in cols}
        for key in m.keys:
            x, y = avs[key[0]], bvs[key[1]]
            if is_float:
                vals[key] = ctx.call(fma_name, acc_ty, [x, y, vals[key]])
            else:
                vals[key] = b.add(vals[key], b.mul(x, y))
    ctx.values[op.result] = TileVal(m, vals, acc.element)


@lowers("tc.dot")
def lower_dot(ctx: Ctx, op: DotOp) -> None:
    a = ctx.values[op.operands[0]]
    bv = ctx.values[op.operands[1]]
    acc = ctx.tile(op.operands[2])
    use_acc = ctx.values[op.operands[3]] if len(op.operands) > 3 else None
    if isinstance(acc.map.layout, Mma) and acc.map.layout.version == 3:
        if not isinstance(a, SharedView) or not isinstance(bv, SharedView):
            raise lowering_error("internal error: wgmma operands are not in shared memory", op.loc)
        if reads_a_from_registers(op):
            lower_wgmma_register_a(ctx, op, a, bv, acc, use_acc)
        else:
            lower_wgmma(ctx, op, a, bv, acc, use_acc)
        return
    if use_acc is not None:  # (only wgmma reads the flag itself: elsewhere acc = use_acc ? acc : 0)
        zero = constant(acc.element, 0)
        acc = TileVal(acc.map, {k: ctx.b.select(use_acc, v, zero) for k, v in acc.vals.items()}, acc.element)
    if isinstance(acc.map.layout, Mma):
        if not isinstance(a, TileVal) or not isinstance(bv, TileVal):
            raise lowering_error("internal error: tensor-core dot operands are not in registers", op.loc)
        lower_mma(ctx, op, a, bv, acc)
        return
    if not isinstance(a, SharedTile) or not isinstance(bv, SharedTile):
        raise lowering_error("internal error: dot operands were not staged in shared memory", op.loc)
    lower_fma(ctx, op, a, bv, acc)
