"""Element-wise ops: arithmetic with signedness, comparisons, casts, math, select, addptr."""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir
from tc_ir.ops import AddPtrOp, BinaryOp, CastOp, CmpOp, FmaOp, SelectOp, UnaryOp, Value
from tc_ir.types import IRType, PointerType, ScalarType, TileType, element_of

from . import precise_math
from .context import Ctx, TileVal, lowering_error
from .llvm_types import F32, I32, llvm_type, memory_type
from .lowerings import lowers

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

_ICMP = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">=",
         "ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}  # fmt: skip
_FCMP_ORDERED = {"oeq": "==", "one": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">=", "ord": "ord", "uno": "uno"}
_FCMP_UNORDERED = {"ueq": "==", "une": "!=", "ult_f": "<", "ule_f": "<=", "ugt_f": ">", "uge_f": ">="}


def apply(ctx: Ctx, result: Value, operands: list[Value], f: Callable[[list[ir.Value]], ir.Value]) -> None:
    t = result.type
    if isinstance(t, TileType):
        ctx.values[result] = ctx.elementwise(t, operands, f)
    else:
        ctx.values[result] = f([ctx.scalar(v) for v in operands])


def int_binary(b: ir.IRBuilder, kind: str, x: ir.Value, y: ir.Value) -> ir.Value:
    if kind == "add":
        return b.add(x, y)
    if kind == "sub":
        return b.sub(x, y)
    if kind == "mul":
        return b.mul(x, y)
    if kind == "sdiv":
        return b.sdiv(x, y)
    if kind == "udiv":
        return b.udiv(x, y)
    if kind == "srem":
        return b.srem(x, y)
    if kind == "urem":
        return b.urem(x, y)
    if kind == "and":
        return b.and_(x, y)
    if kind == "or":
        return b.or_(x, y)
    if kind == "xor":
        return b.xor(x, y)
    if kind in ("shl", "ashr", "lshr"):
        return shift(b, kind, x, y)
    if kind in ("smax", "smin"):
        c = b.icmp_signed(">" if kind == "smax" else "<", x, y)
        return b.select(c, x, y)
    if kind in ("umax", "umin"):
        c = b.icmp_unsigned(">" if kind == "umax" else "<", x, y)
        return b.select(c, x, y)
    raise KeyError(kind)


def shift(b: ir.IRBuilder, kind: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """Shifts with the interpreter's (and C-on-GPU's PTX) meaning for amounts >= the width
    (negative amounts count as huge unsigned ones): shl and lshr give 0, ashr fills with the
    sign bit. LLVM's own shifts would give poison there."""
    width = x.type.width
    limit = ir.Constant(x.type, width)
    in_range = b.icmp_unsigned("<", y, limit)
    if kind == "ashr":
        amount = b.select(in_range, y, ir.Constant(x.type, width - 1))
        return b.ashr(x, amount)
    safe = b.select(in_range, y, ir.Constant(x.type, 0))
    r = b.shl(x, safe) if kind == "shl" else b.lshr(x, safe)
    return b.select(in_range, r, ir.Constant(x.type, 0))


def float_binary(ctx: Ctx, kind: str, x: ir.Value, y: ir.Value) -> ir.Value:
    b = ctx.b
    if kind == "fadd":
        return b.fadd(x, y)
    if kind == "fsub":
        return b.fsub(x, y)
    if kind == "fmul":
        return b.fmul(x, y)
    if kind == "fdiv":
        if x.type == F32 and not ctx.options.precise_div:
            # Triton's `/` on fp32: div.full.f32 (at most 2 ulp), a few instructions where the
            # IEEE-rounded div.rn.f32 takes a dozen and a slow path; CompileOptions.precise_div
            # keeps the IEEE quotient
            return ctx.asm(F32, "div.full.f32 $0, $1, $2;", "=f,f,f", [x, y])
        return b.fdiv(x, y)
    if kind == "frem":
        return b.frem(x, y)
    if kind in ("fmax", "fmin"):
        name = "llvm.maxnum" if kind == "fmax" else "llvm.minnum"
        return ctx.call(f"{name}.{x.type.intrinsic_name}", x.type, [x, y])
    raise KeyError(kind)


def combine(ctx: Ctx, kind: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """The binary op of a reduction kind or a binary kind."""
    if kind.startswith("f"):
        return float_binary(ctx, kind, x, y)
    return int_binary(ctx.b, kind, x, y)


@lowers("tc.binary")
def lower_binary(ctx: Ctx, op: BinaryOp) -> None:
    elem = element_of(op.result.type)
    if not isinstance(elem, ScalarType):
        raise lowering_error("binary op on pointers", op.loc)
    if elem.is_float:
        apply(ctx, op.result, op.operands, lambda a: float_binary(ctx, op.kind, a[0], a[1]))
    else:
        apply(ctx, op.result, op.operands, lambda a: int_binary(ctx.b, op.kind, a[0], a[1]))


@lowers("tc.cmp")
def lower_cmp(ctx: Ctx, op: CmpOp) -> None:
    p = op.predicate
    elem = element_of(op.operands[0].type)
    b = ctx.b

    def f(a: list[ir.Value]) -> ir.Value:
        x, y = a
        if isinstance(elem, PointerType):
            x, y = b.ptrtoint(x, ir.IntType(64)), b.ptrtoint(y, ir.IntType(64))
        if p in ("eq", "ne", "sle", "slt", "sgt", "sge") and not (isinstance(elem, ScalarType) and elem.is_float):
            return b.icmp_signed(_ICMP[p], x, y)
        if p in ("ult", "ule", "ugt", "uge"):
            return b.icmp_unsigned(_ICMP[p], x, y)
        if p in _FCMP_ORDERED:
            return b.fcmp_ordered(_FCMP_ORDERED[p], x, y)
        if p in _FCMP_UNORDERED:
            return b.fcmp_unordered(_FCMP_UNORDERED[p], x, y)
        raise lowering_error(f"unknown comparison {p}", op.loc)

    apply(ctx, op.result, op.operands, f)


@lowers("tc.cast")
def lower_cast(ctx: Ctx, op: CastOp) -> None:
    dst = llvm_type(element_of(op.result.type))
    b = ctx.b
    k = op.kind
    table = {
        "sext": b.sext, "zext": b.zext, "trunc": b.trunc, "fpext": b.fpext, "fptrunc": b.fptrunc,
        "sitofp": b.sitofp, "uitofp": b.uitofp, "fptosi": b.fptosi, "fptoui": b.fptoui,
        "bitcast": b.bitcast, "ptrtoint": b.ptrtoint, "inttoptr": b.inttoptr,
    }  # fmt: skip
    fn = table.get(k)
    if fn is None:
        raise lowering_error(f"unknown cast {k}", op.loc)
    src = element_of(op.operands[0].type)
    if k == "fpext" and isinstance(src, ScalarType) and src.name == "bf16":
        # bf16 -> f32 is exact: shift the bits into the high half
        def bf(a: list[ir.Value]) -> ir.Value:
            w = b.zext(b.bitcast(a[0], ir.IntType(16)), I32)
            f = b.bitcast(b.shl(w, ir.Constant(I32, 16)), F32)
            return f if dst == F32 else b.fpext(f, dst)

        apply(ctx, op.result, op.operands, bf)
        return
    if k == "fptrunc" and _packs_narrowing(op):
        _narrow_in_pairs(ctx, op)
        return
    apply(ctx, op.result, op.operands, lambda a: fn(a[0], dst))


#: The packed f32 -> 16-bit float conversion (round to nearest even, like fptrunc), by result.
_PACKED_NARROWING = {"f16": "cvt.rn.f16x2.f32", "bf16": "cvt.rn.bf16x2.f32"}


def _packs_narrowing(op: CastOp) -> bool:
    """Whether a tile's f32 -> f16/bf16 conversion converts two elements per instruction (ptxas
    turns each scalar conversion into a packing instruction with a zero half, on every target tc
    supports (sm_80 on): pairing them halves the conversions, the bulk of a matmul epilogue)."""
    src, dst = element_of(op.operands[0].type), element_of(op.result.type)
    return (isinstance(op.result.type, TileType) and isinstance(src, ScalarType) and src.name == "f32"
            and isinstance(dst, ScalarType) and dst.name in _PACKED_NARROWING)


def _narrow_pair(ctx: Ctx, element: ScalarType, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """Two f32 values as one 32-bit register of two f16 or bf16 (`lo` in the low half)."""
    text = f"{_PACKED_NARROWING[element.name]} $0, $1, $2;"  # ($1 goes to the high half)
    return ctx.asm(I32, text, "=r,f,f", [hi, lo])


def _narrow_in_pairs(ctx: Ctx, op: CastOp) -> None:
    """fptrunc of a tile, each thread's elements two at a time in the order of its registers
    (neighbours along the fastest dimension, which a vector store then writes together); an odd
    one out is converted alone."""
    b = ctx.b
    t = op.result.type
    assert isinstance(t, TileType) and isinstance(t.element, ScalarType)
    dst = llvm_type(t.element)
    m = ctx.map_of(t)
    x = ctx.values[op.operands[0]]
    keys = list(m.keys)
    if not isinstance(x, TileVal):  # (a splat: one conversion serves every element)
        one = b.fptrunc(x, dst)
        ctx.values[op.result] = TileVal(m, {key: one for key in keys}, t.element)
        return
    pair_type = ir.VectorType(dst, 2)
    vals: dict[tuple[int, ...], ir.Value] = {}
    for lo_key, hi_key in zip(keys[0::2], keys[1::2]):
        pair = b.bitcast(_narrow_pair(ctx, t.element, x.vals[lo_key], x.vals[hi_key]), pair_type)
        vals[lo_key] = b.extract_element(pair, ir.Constant(I32, 0))
        vals[hi_key] = b.extract_element(pair, ir.Constant(I32, 1))
    if len(keys) % 2:
        vals[keys[-1]] = b.fptrunc(x.vals[keys[-1]], dst)
    ctx.values[op.result] = TileVal(m, vals, t.element)


def _approx(ctx: Ctx, instr: str, x: ir.Value) -> ir.Value:
    return ctx.asm(F32, f"{instr} $0, $1;", "=f,f", [x])


def unary_f32(ctx: Ctx, kind: str, x: ir.Value, approx: bool) -> ir.Value:
    """An fp32 math function. approx=True: the MUFU instructions (ex2/lg2/sin/cos.approx, a few
    ulp near 0 only in absolute terms, no range reduction for sin/cos); approx=False: the
    accurate sequences of precise_math.py (about 1 ulp, sin/cos over the whole float range)."""
    b = ctx.b
    if not approx and kind in precise_math.FUNCTIONS:
        ops = precise_math.LlvmOps(b, ctx.call, ctx.asm)
        return precise_math.FUNCTIONS[kind](ops, x)  # type: ignore[no-any-return]
    if kind == "exp":
        return _approx(ctx, "ex2.approx.f32", b.fmul(x, ir.Constant(F32, LOG2E)))
    if kind == "log":
        return b.fmul(_approx(ctx, "lg2.approx.f32", x), ir.Constant(F32, LN2))
    if kind == "exp2":
        return _approx(ctx, "ex2.approx.f32", x)
    if kind == "log2":
        return _approx(ctx, "lg2.approx.f32", x)
    if kind == "sin":
        return _approx(ctx, "sin.approx.f32", x)
    if kind == "cos":
        return _approx(ctx, "cos.approx.f32", x)
    if kind == "sqrt":
        if approx:
            return _approx(ctx, "sqrt.approx.f32", x)
        return ctx.call("llvm.sqrt.f32", F32, [x])
    if kind == "rsqrt":
        if approx:
            return _approx(ctx, "rsqrt.approx.f32", x)
        return b.fdiv(ir.Constant(F32, 1.0), ctx.call("llvm.sqrt.f32", F32, [x]))
    raise KeyError(kind)


@lowers("tc.unary")
def lower_unary(ctx: Ctx, op: UnaryOp) -> None:
    elem = element_of(op.result.type)
    assert isinstance(elem, ScalarType)
    b = ctx.b
    k = op.kind
    ty = llvm_type(elem)

    def f(a: list[ir.Value]) -> ir.Value:
        x = a[0]
        if k == "neg":
            return b.sub(ir.Constant(ty, 0), x)
        if k == "fneg":
            return b.fneg(x)
        if k == "not":
            return b.xor(x, ir.Constant(ty, -1 if elem.bits > 1 else 1))
        if k == "iabs":
            return b.select(b.icmp_signed("<", x, ir.Constant(ty, 0)), b.sub(ir.Constant(ty, 0), x), x)
        if k in ("fabs", "floor", "ceil") or (k == "sqrt" and not op.approx and elem.name == "f64"):
            name = {"fabs": "llvm.fabs", "floor": "llvm.floor", "ceil": "llvm.ceil", "sqrt": "llvm.sqrt"}[k]
            return ctx.call(f"{name}.{ty.intrinsic_name}", ty, [x])
        if elem.name == "f64":
            raise lowering_error(f"{k} on double is not supported by the code generator yet", op.loc)
        x32 = x if elem.name == "f32" else b.fpext(x, F32) if elem.name == "f16" else _bf16_to_f32(ctx, x)
        r = unary_f32(ctx, k, x32, op.approx)
        if elem.name == "f32":
            return r
        return b.fptrunc(r, ty)

    apply(ctx, op.result, op.operands, f)


def _bf16_to_f32(ctx: Ctx, x: ir.Value) -> ir.Value:
    b = ctx.b
    w = b.zext(b.bitcast(x, ir.IntType(16)), I32)
    return b.bitcast(b.shl(w, ir.Constant(I32, 16)), F32)


@lowers("tc.fma")
def lower_fma(ctx: Ctx, op: FmaOp) -> None:
    ty = llvm_type(element_of(op.result.type))
    apply(ctx, op.result, op.operands, lambda a: ctx.call(f"llvm.fma.{ty.intrinsic_name}", ty, a))


@lowers("tc.select")
def lower_select(ctx: Ctx, op: SelectOp) -> None:
    apply(ctx, op.result, op.operands, lambda a: ctx.b.select(a[0], a[1], a[2]))


@lowers("tc.addptr")
def lower_addptr(ctx: Ctx, op: AddPtrOp) -> None:
    pt = element_of(op.operands[0].type)
    assert isinstance(pt, PointerType)
    etype = memory_type(pt.pointee)
    apply(ctx, op.result, op.operands, lambda a: ctx.b.gep(a[0], [a[1]], source_etype=etype))


__all__ = ["combine", "TileVal"]
