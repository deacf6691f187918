"""Loads, stores, assignments, ++/-- and the `?:` operator (whose tile form masks the loads of
its branches: `c ? *p : v` becomes one load(p, c, other=v))."""

from __future__ import annotations

from tc_lang import ast as A
from tc_lang import rules
from tc_lang import types as C

from .. import types as T
from ..ops import Value
from .analysis import is_pure
from .arith import binary_values
from .context import TV, Lowerer
from .errors import BAD_OPERAND, BAD_SHAPE, unknown_name
from .values import broadcast_all, constant, convert, shape_to, truth


def _shape(lw: Lowerer, *types: C.Type) -> tuple[int, ...]:
    shape: tuple[int, ...] = ()
    try:
        for t in types:
            shape = rules.broadcast_shapes(shape, C.shape_of(t))
    except rules.RuleError as err:
        lw.fail(str(err), lw.b.loc, BAD_SHAPE)
    return shape


def pointer_and_mask(lw: Lowerer, d: A.Deref) -> tuple[TV, Value | None, C.ElementType]:
    """The pointers of a dereference and its explicit mask, broadcast against each other."""
    ptr = lw.expr(d.pointer)
    pel = C.element_of(ptr.ctype)
    if not isinstance(pel, C.PointerType):
        lw.fail(f"cannot dereference a value of type '{ptr.ctype}'", d.loc, BAD_OPERAND)
    if d.mask is None:
        return ptr, None, pel.pointee
    mask = truth(lw, lw.expr(d.mask))
    shape = _shape(lw, ptr.ctype, mask.ctype)
    ptr, mask = broadcast_all(lw, [ptr, mask], shape)
    return ptr, mask.value, pel.pointee


def _and_masks(lw: Lowerer, shape: tuple[int, ...], mask: Value | None, implicit: bool) -> Value | None:
    """`mask` and-ed with the masks of enclosing tile `?:` branches that fit `shape`."""
    extra = list(lw.load_masks) if implicit else []
    for m in extra:
        mshape = T.shape_of(m.type)
        if not shape or len(mshape) > len(shape):
            continue
        try:
            if rules.broadcast_shapes(mshape, shape) != shape:
                continue
        except rules.RuleError:
            continue
        m = shape_to(lw, m, shape)
        mask = m if mask is None else lw.b.binary("and", mask, m)
    return mask


def load(lw: Lowerer, d: A.Deref) -> TV:
    ptr, mask, pointee = pointer_and_mask(lw, d)
    shape = C.shape_of(ptr.ctype)
    mask = _and_masks(lw, shape, mask, implicit=True)
    return TV(lw.b.load(ptr.value, mask), C.with_shape(pointee, shape))


def store_through(lw: Lowerer, d: A.Deref, op: str, rhs: A.Expr) -> TV:
    """`*?(m) p = v`, `*p = v` and `*p op= v` (a load, the operation, a store)."""
    ptr, mask, pointee = pointer_and_mask(lw, d)
    shape = C.shape_of(ptr.ctype)
    value = lw.expr(rhs)
    if op != "=":
        old = TV(lw.b.load(ptr.value, mask), C.with_shape(pointee, shape))
        value = binary_values(lw, op[:-1], old, value)
    vshape = C.shape_of(value.ctype)
    if not _fits(vshape, shape):
        lw.fail(
            f"cannot store a tile of shape [{', '.join(map(str, vshape))}] through pointers of "
            f"shape [{', '.join(map(str, shape))}]",
            lw.b.loc,
            BAD_SHAPE,
        )
    stored = convert(lw, value, C.with_shape(pointee, shape))
    lw.b.store(ptr.value, stored.value, mask)
    return stored


def _fits(value: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """A value of shape `value` can be stored through pointers of shape `target`."""
    try:
        if rules.broadcast_shapes(value, target) == target:
            return True
    except rules.RuleError:
        pass
    n = m = 1
    for d in value:
        n *= d
    for d in target:
        m *= d
    return bool(value) and n == m


def lower_assign(lw: Lowerer, e: A.Assign) -> TV:
    if isinstance(e.target, A.Deref):
        return store_through(lw, e.target, e.op, e.value)
    if not isinstance(e.target, A.Name):
        lw.fail("only variables and dereferenced pointers can be assigned", e.target.loc, BAD_OPERAND)
    var = lw.env.lookup(e.target.name)
    if var is None:
        unknown_name(f"unknown variable '{e.target.name}'", e.target.loc)
    value = lw.expr(e.value)
    if e.op != "=":
        value = binary_values(lw, e.op[:-1], TV(var.value, var.ctype), value)
    new = convert(lw, value, var.ctype)
    var.value = new.value
    return new


def incdec(lw: Lowerer, e: A.Unary) -> TV:
    """++x, x++, --x, x-- on variables and dereferenced pointers."""
    one = constant(lw, 1, C.INT32)
    op = "+" if e.op.endswith("++") else "-"
    target = e.operand
    if isinstance(target, A.Name):
        var = lw.env.lookup(target.name)
        if var is None:
            unknown_name(f"unknown variable '{target.name}'", target.loc)
        old = TV(var.value, var.ctype)
        new = convert(lw, binary_values(lw, op, old, one), var.ctype)
        var.value = new.value
    elif isinstance(target, A.Deref):
        ptr, mask, pointee = pointer_and_mask(lw, target)
        old = TV(lw.b.load(ptr.value, mask), C.with_shape(pointee, C.shape_of(ptr.ctype)))
        new = convert(lw, binary_values(lw, op, old, one), old.ctype)
        lw.b.store(ptr.value, new.value, mask)
    else:
        lw.fail(f"operator '{e.op[-2:]}' needs a variable or a dereferenced pointer", e.loc, BAD_OPERAND)
    return new if e.op.startswith("pre") else old


def _common(lw: Lowerer, e: A.Conditional, shape: tuple[int, ...], a: C.Type, b: C.Type) -> C.Type:
    """The type of `c ? a : b`: the checker's, or C's usual conversions at the broadcast shape."""
    if e.ty is not None:
        return e.ty
    ea, eb = C.element_of(a), C.element_of(b)
    if isinstance(ea, C.PointerType):
        el: C.ElementType = ea
    elif isinstance(eb, C.PointerType):
        el = eb
    else:
        el = ea if ea == eb else rules.common_scalar(ea, eb)
    return C.with_shape(el, _shape(lw, C.with_shape(C.BOOL, shape), a, b))


def lower_conditional(lw: Lowerer, e: A.Conditional) -> TV:
    cond = truth(lw, lw.expr(e.cond))
    if C.shape_of(cond.ctype):
        return _tile_conditional(lw, e, cond)
    if is_pure(e.then) and is_pure(e.otherwise):
        a, b = lw.expr(e.then), lw.expr(e.otherwise)
        t = _common(lw, e, (), a.ctype, b.ctype)
        av, bv = convert(lw, a, t).value, convert(lw, b, t).value
        return TV(lw.b.select(cond.value, av, bv), t)
    # effects or loads in a branch: evaluate only the branch taken (an if with a result)
    from ..ops import Block, IfOp

    then_block, else_block = Block(), Block()
    with lw.b.at_end(then_block):
        a = lw.expr(e.then)
    with lw.b.at_end(else_block):
        b = lw.expr(e.otherwise)
    t = _common(lw, e, (), a.ctype, b.ctype)
    with lw.b.at_end(then_block):
        lw.b.yield_([convert(lw, a, t).value])
    with lw.b.at_end(else_block):
        lw.b.yield_([convert(lw, b, t).value])
    op = lw.b.create(IfOp, [cond.value], [convert_type(lw, t)], [then_block, else_block])
    return TV(op.result, t)


def convert_type(lw: Lowerer, t: C.Type) -> T.IRType:
    from .typemap import ir_type

    return ir_type(t, lw.b.loc)


def _tile_conditional(lw: Lowerer, e: A.Conditional, cond: TV) -> TV:
    """Element-wise `c ? a : b`: loads in `a` are masked by c, in `b` by !c; then a select.
    `c ? *p : v` with v free of loads and effects is one load(p, c, other=v)."""
    if isinstance(e.then, A.Deref) and is_pure(e.otherwise):
        ptr, mask, pointee = pointer_and_mask(lw, e.then)
        other = lw.expr(e.otherwise)
        t = _common(lw, e, C.shape_of(cond.ctype), C.with_shape(pointee, C.shape_of(ptr.ctype)), other.ctype)
        if C.element_of(t) == pointee:
            shape = C.shape_of(t)
            ptr_s, cond_s = broadcast_all(lw, [ptr, cond], shape)
            full = cond_s.value
            if mask is not None:
                full = lw.b.binary("and", full, shape_to(lw, mask, shape))
            full_mask = _and_masks(lw, shape, full, implicit=True)
            assert full_mask is not None
            fallback = convert(lw, other, t).value
            return TV(lw.b.load(ptr_s.value, full_mask, fallback), t)
        loaded = TV(
            lw.b.load(ptr.value, _and_masks(lw, C.shape_of(ptr.ctype), _with(lw, mask, cond, ptr), True)),
            C.with_shape(pointee, C.shape_of(ptr.ctype)),
        )
        return _select(lw, e, cond, loaded, other)
    with lw.masked_loads(cond.value):
        a = lw.expr(e.then)
    not_c = lw.b.binary("xor", cond.value, lw.b.constant(True, cond.value.type))
    with lw.masked_loads(not_c):
        b = lw.expr(e.otherwise)
    return _select(lw, e, cond, a, b)


def _with(lw: Lowerer, mask: Value | None, cond: TV, ptr: TV) -> Value | None:
    """`mask` and the ternary's condition, where the condition fits the pointers' shape."""
    shape = C.shape_of(ptr.ctype)
    if C.shape_of(cond.ctype) != shape:
        return mask
    return cond.value if mask is None else lw.b.binary("and", mask, cond.value)


def _select(lw: Lowerer, e: A.Conditional, cond: TV, a: TV, b: TV) -> TV:
    t = _common(lw, e, C.shape_of(cond.ctype), a.ctype, b.ctype)
    shape = C.shape_of(t)
    av = convert(lw, a, t).value
    bv = convert(lw, b, t).value
    c = shape_to(lw, cond.value, shape)
    return TV(lw.b.select(c, av, bv), t)
