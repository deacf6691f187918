"""Binary operators: arithmetic, comparisons, shifts, logical and/or, pointer arithmetic and `@`.

Operand types come from `tc_lang.rules` (the checker's own rules); the op kind is chosen from the
C type the operation is computed in: sdiv/udiv, srem/urem, ashr/lshr, slt/ult, fadd...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tc_lang import ast as A
from tc_lang import rules
from tc_lang import types as C

from .. import types as T
from ..ops import Value
from .analysis import assigned_names, is_pure
from .context import TV, Lowerer
from .errors import BAD_OPERAND
from .typemap import is_float, is_signed, size_of
from .values import broadcast_all, constant, convert, convert_element, truth, zero

_INT = {"+": "add", "-": "sub", "*": "mul", "<<": "shl", "&": "and", "|": "or", "^": "xor"}
_INT_SIGNED = {"/": ("sdiv", "udiv"), "%": ("srem", "urem"), ">>": ("ashr", "lshr")}
_FLOAT = {"+": "fadd", "-": "fsub", "*": "fmul", "/": "fdiv", "%": "frem"}
_CMP_INT = {
    "<": ("slt", "ult"),
    "<=": ("sle", "ule"),
    ">": ("sgt", "ugt"),
    ">=": ("sge", "uge"),
    "==": ("eq", "eq"),
    "!=": ("ne", "ne"),
}
_CMP_FLOAT = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}


def lower_binary(lw: Lowerer, e: A.Binary) -> TV:
    if e.op in rules.LOGICAL_OPS:
        return logical(lw, e)
    if e.op == "@":
        return matmul(lw, lw.expr(e.left), lw.expr(e.right))
    fused = add_matmul(lw, e)
    if fused is not None:
        return fused
    left = lw.expr(e.left)
    right = lw.expr(e.right)
    return binary_values(lw, e.op, left, right)


def binary_values(lw: Lowerer, op: str, left: TV, right: TV) -> TV:
    """`left op right` for an arithmetic, bitwise, shift or comparison operator."""
    try:
        operand_t, result_t = rules.binary_types(op, left.ctype, right.ctype)
    except rules.RuleError as err:
        lw.fail(str(err), lw.b.loc, BAD_OPERAND)
    if isinstance(C.element_of(left.ctype), C.PointerType) or isinstance(
        C.element_of(right.ctype), C.PointerType
    ):
        return pointer_binary(lw, op, left, right, C.shape_of(result_t))
    a = convert(lw, left, operand_t).value
    b = convert(lw, right, operand_t).value
    signed = is_signed(operand_t)
    if op in rules.COMPARISON_OPS:
        if is_float(operand_t):
            return TV(lw.b.cmp(_CMP_FLOAT[op], a, b), result_t)
        return TV(lw.b.cmp(_CMP_INT[op][0 if signed else 1], a, b), result_t)
    if is_float(operand_t):
        if op not in _FLOAT:
            lw.fail(f"operator '{op}' needs integer operands", lw.b.loc, BAD_OPERAND)
        return TV(lw.b.binary(_FLOAT[op], a, b), result_t)
    if op in _INT_SIGNED:
        kind = _INT_SIGNED[op][0 if signed else 1]
    elif op in _INT:
        kind = _INT[op]
    else:
        lw.fail(f"unknown operator '{op}'", lw.b.loc, BAD_OPERAND)
    return TV(lw.b.binary(kind, a, b), result_t)


def offset_value(lw: Lowerer, off: TV) -> TV:
    """A pointer offset in its own width: narrow ints widen to int32, uint32 to int64 (so it
    stays non-negative), int32 and 64-bit offsets are kept."""
    el = C.element_of(off.ctype)
    assert isinstance(el, C.ScalarType)
    if el.bits < 32:
        return convert_element(lw, off, C.INT32)
    if el.bits == 32 and not el.is_signed:
        return convert_element(lw, off, C.INT64)
    return off


def pointer_binary(lw: Lowerer, op: str, left: TV, right: TV, shape: tuple[int, ...]) -> TV:
    """p + i, i + p, p - i, p - q and pointer comparisons."""
    lp = isinstance(C.element_of(left.ctype), C.PointerType)
    rp = isinstance(C.element_of(right.ctype), C.PointerType)
    if op in rules.COMPARISON_OPS:
        a, b = (_as_address(lw, tv) for tv in broadcast_all(lw, [left, right], shape))
        pred = _CMP_INT[op][1]
        return TV(lw.b.cmp(pred, a, b), C.with_shape(C.BOOL, shape))
    if lp and rp:
        if op != "-":
            lw.fail(f"operator '{op}' cannot combine two pointers", lw.b.loc, BAD_OPERAND)
        pointee = C.element_of(left.ctype)
        assert isinstance(pointee, C.PointerType)
        a, b = (_as_address(lw, tv) for tv in broadcast_all(lw, [left, right], shape))
        diff = lw.b.binary("sub", a, b)
        size = size_of(pointee.pointee)
        if size != 1:
            diff = lw.b.binary("sdiv", diff, lw.b.constant(size, diff.type))
        return TV(diff, C.with_shape(C.INT64, shape))
    ptr, off = (left, right) if lp else (right, left)
    if op not in ("+", "-"):
        lw.fail(f"operator '{op}' cannot apply to a pointer", lw.b.loc, BAD_OPERAND)
    off = offset_value(lw, off)
    ptr, off = broadcast_all(lw, [ptr, off], shape)
    offset = off.value
    if op == "-":
        offset = lw.b.binary("sub", lw.b.constant(0, offset.type), offset)
    return TV(lw.b.addptr(ptr.value, offset), ptr.ctype)


def _as_address(lw: Lowerer, tv: TV) -> Value:
    """A pointer as an i64 address, an integer widened to i64 (for comparisons)."""
    if isinstance(C.element_of(tv.ctype), C.PointerType):
        return lw.b.cast("ptrtoint", tv.value, T.I64)
    return convert_element(lw, tv, C.INT64).value


def effect_if(
    lw: Lowerer, cond: Value, then: Callable[[], TV], otherwise: Callable[[], TV],
    result: Callable[[TV, TV], C.Type], nodes: Sequence[A.Node],
) -> TV:
    """An expression evaluated in one branch only (`c ? a : b`, a scalar && / || with effects):
    a tc.if whose first result is the value (of type `result(a, b)`), the others the variables
    that `nodes` assign (`n > 0 && (a = 7)`), so that their new values outlive the branch."""
    from ..ops import Block, IfOp
    from .scope import restore, snapshot
    from .typemap import ir_type

    vars = lw.resolve(assigned_names(*nodes))
    before = snapshot(vars)
    blocks, values, after = [Block(), Block()], [], []
    for block, branch in zip(blocks, (then, otherwise)):
        with lw.b.at_end(block):
            values.append(branch())
        after.append(snapshot(vars))
        restore(vars, before)
    t = result(values[0], values[1])
    for block, v, changed in zip(blocks, values, after):
        with lw.b.at_end(block):
            lw.b.yield_([convert(lw, v, t).value, *changed])
    op = lw.b.create(IfOp, [cond], [ir_type(t, lw.b.loc), *(ir_type(v.ctype) for v in vars)], blocks)
    restore(vars, list(op.results[1:]))
    return TV(op.results[0], t)


def logical(lw: Lowerer, e: A.Binary) -> TV:
    """&& and ||: element-wise i1 and/or on tiles; on scalars, short-circuit (an if) when the
    right operand has effects or memory accesses, otherwise plain i1 and/or."""
    is_and = e.op == "&&"
    left = truth(lw, lw.expr(e.left))
    result_shape = C.shape_of(e.ty) if e.ty is not None else None
    if not C.shape_of(left.ctype) and not is_pure(e.right) and not result_shape:
        def evaluated() -> TV:
            return truth(lw, lw.expr(e.right))

        def skipped() -> TV:
            return constant(lw, not is_and, C.BOOL)

        return effect_if(lw, left.value, evaluated if is_and else skipped,
                         skipped if is_and else evaluated, lambda a, b: C.BOOL, [e.right])
    if C.shape_of(left.ctype) and not is_pure(e.right):
        # element-wise short circuit: memory accesses on the right happen where the left
        # lets the right matter (left true for &&, false for ||), as in `left ? right : 0`
        guard = left.value if is_and else lw.b.binary("xor", left.value, lw.b.constant(True, left.value.type))
        with lw.masked_loads(guard):
            right = truth(lw, lw.expr(e.right))
    else:
        right = truth(lw, lw.expr(e.right))
    shape = rules.broadcast_shapes(C.shape_of(left.ctype), C.shape_of(right.ctype))
    a, b = broadcast_all(lw, [left, right], shape)
    return TV(lw.b.binary("and" if is_and else "or", a.value, b.value), a.ctype)


def matmul(lw: Lowerer, left: TV, right: TV, acc: TV | None = None) -> TV:
    """a @ b -> dot(a, b, acc or 0) with operands converted per rules.matmul_types; the precision
    is explicit in the IR ("ieee": exact fp32 products, never tf32 behind the user's back).
    `acc` is used when it is already of the result type (`acc += a @ b`), else None is passed."""
    try:
        operand, result = rules.matmul_types(left.ctype, right.ctype)
    except rules.RuleError as err:
        lw.fail(str(err), lw.b.loc, BAD_OPERAND)
    a = convert_element(lw, left, operand).value
    b = convert_element(lw, right, operand).value
    acc_v = acc.value if acc is not None and acc.ctype == result else zero(lw, result).value
    return TV(lw.b.dot(a, b, acc_v, "ieee"), result)


def is_matmul(e: A.Expr) -> bool:
    return isinstance(e, A.Binary) and e.op == "@"


def accumulates(acc: C.Type, product: A.Expr) -> bool:
    """`acc + (a @ b)` can be one dot with accumulator `acc`: the sum is computed in the
    product's type, which `acc` already has (so fusing changes no rounding)."""
    if not is_matmul(product) or not isinstance(product, A.Binary):
        return False
    lt, rt = product.left.ty, product.right.ty
    if lt is None or rt is None:
        return False
    try:
        _, result = rules.matmul_types(lt, rt)
    except rules.RuleError:
        return False
    return acc == result


def add_matmul(lw: Lowerer, e: A.Binary) -> TV | None:
    """`x + a @ b` / `a @ b + x` as dot(a, b, x) when `accumulates` allows, else None."""
    if e.op != "+":
        return None
    if is_matmul(e.right) and e.left.ty is not None and accumulates(e.left.ty, e.right):
        assert isinstance(e.right, A.Binary)
        acc = lw.expr(e.left)
        return matmul(lw, lw.expr(e.right.left), lw.expr(e.right.right), acc)
    if is_matmul(e.left) and e.right.ty is not None and accumulates(e.right.ty, e.left):
        assert isinstance(e.left, A.Binary)
        a, b = lw.expr(e.left.left), lw.expr(e.left.right)
        return matmul(lw, a, b, lw.expr(e.right))
    return None
