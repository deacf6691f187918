"""Loads, stores, assignments, ++/-- and the `?:` operator (whose tile form masks the loads of
its branches: `c ? *p : v` becomes one load(p, c, other=v))."""

from __future__ import annotations

from tc_lang import ast as A
from tc_lang import rules
from tc_lang import types as C

from .. import types as T
from ..ops import OpResult, Value
from .analysis import is_pure
from .attributes import assert_facts
from .arith import accumulates, binary_values, effect_if, matmul
from .context import TV, Lowerer, MaskBarrier
from .errors import BAD_OPERAND, BAD_SHAPE, UNSUPPORTED, unknown_name
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


def implicit_mask(lw: Lowerer, shape: tuple[int, ...], access: str) -> Value | None:
    """The mask that the enclosing tile `?:` branches (and tile && / || right operands) put on a
    memory access of `shape`, or None outside them.

    The conditions are and-ed at their common shape R. An access of shape R (or one they broadcast
    to) takes that mask lane by lane. A load of a smaller shape, whose value is broadcast up to R,
    reads a lane when any element of R that uses it is selected (an "or" over the broadcast axes).
    A store or atomic of a smaller shape has no such meaning and is refused, as is any access
    under a non-element-wise construct (see `MaskBarrier`), whose lanes do not line up with R."""
    masks: list[Value] = []
    for i in range(len(lw.load_masks) - 1, -1, -1):
        entry = lw.load_masks[i]
        if isinstance(entry, MaskBarrier):
            if masks or any(not isinstance(m, MaskBarrier) for m in lw.load_masks[:i]):
                lw.fail(
                    f"this {access} is inside {entry.what} within a branch of an element-wise '?:' "
                    "(or the right operand of a tile '&&' / '||'): its lanes do not line up with "
                    "the condition's, so the condition cannot mask it",
                    lw.b.loc,
                    UNSUPPORTED,
                    hint="do the access before the '?:', with an explicit mask: T v[...] = *?(mask) p;",
                )
            break
        masks.append(entry)
    if not masks:
        return None
    full = shape
    try:
        for m in masks:
            full = rules.broadcast_shapes(full, T.shape_of(m.type))
    except rules.RuleError:
        lw.fail(
            f"a {access} of shape [{_dims(shape)}] in a branch of an element-wise '?:' does not fit "
            f"its condition's shape [{_dims(T.shape_of(masks[0].type))}]",
            lw.b.loc,
            BAD_SHAPE,
        )
    combined: Value | None = None
    for m in reversed(masks):
        m = shape_to(lw, m, full)
        combined = m if combined is None else lw.b.binary("and", combined, m)
    assert combined is not None
    if full == shape:
        return combined
    if access != "load":
        lw.fail(
            f"a {access} of shape [{_dims(shape)}] in a branch of an element-wise '?:' whose "
            f"condition has shape [{_dims(full)}] is ambiguous: it would be done once for many "
            "selected elements",
            lw.b.loc,
            BAD_SHAPE,
            hint="make the pointers the shape of the condition, or use an explicit mask *?(m)",
        )
    # a smaller load: lane l is read when any element that the broadcast of lane l feeds is selected
    padded = (1,) * (len(full) - len(shape)) + shape
    v = lw.b.cast("zext", combined, T.TileType(full, T.I32))
    for axis in range(len(full) - 1, -1, -1):
        if padded[axis] == 1 and full[axis] != 1:
            v = lw.b.reduce("umax", v, axis)
    if T.shape_of(v.type) != shape:
        v = lw.b.reshape(v, shape)
    return lw.b.cmp("ne", v, lw.b.constant(0, v.type))


def _dims(shape: tuple[int, ...]) -> str:
    return ", ".join(str(d) for d in shape)


def _masked(lw: Lowerer, shape: tuple[int, ...], mask: Value | None, access: str) -> Value | None:
    """`mask` (explicit, may be None) and-ed with the implicit mask of enclosing `?:` branches."""
    extra = implicit_mask(lw, shape, access)
    if extra is None:
        return mask
    return extra if mask is None else lw.b.binary("and", mask, extra)


def load(lw: Lowerer, d: A.Deref) -> TV:
    ptr, mask, pointee = pointer_and_mask(lw, d)
    shape = C.shape_of(ptr.ctype)
    mask = _masked(lw, shape, mask, "load")
    return TV(lw.b.load(ptr.value, mask), C.with_shape(pointee, shape))


def store_through(lw: Lowerer, d: A.Deref, op: str, rhs: A.Expr) -> TV:
    """`*?(m) p = v`, `*p = v` and `*p op= v` (a load, the operation, a store)."""
    ptr, mask, pointee = pointer_and_mask(lw, d)
    shape = C.shape_of(ptr.ctype)
    value = lw.expr(rhs)
    mask = _masked(lw, shape, mask, "store")
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


def name_after(value: Value, name: str) -> None:
    """Give a freshly computed value the variable's name in the printed IR (x, x_1, ...)."""
    if isinstance(value, OpResult) and value.name_hint is None:
        value.name_hint = name


def lower_assign(lw: Lowerer, e: A.Assign) -> TV:
    if isinstance(e.target, A.Deref):
        return store_through(lw, e.target, e.op, e.value)
    if not isinstance(e.target, A.Name):
        lw.fail("only variables and dereferenced pointers can be assigned", e.target.loc, BAD_OPERAND)
    var = lw.env.lookup(e.target.name)
    if var is None:
        unknown_name(f"unknown variable '{e.target.name}'", e.target.loc)
    if e.op == "+=" and accumulates(var.ctype, e.value):
        assert isinstance(e.value, A.Binary)  # acc += a @ b: one dot with accumulator acc
        with lw.b.location(e.value.loc if e.value.loc.line > 0 else None):
            value = matmul(lw, lw.expr(e.value.left), lw.expr(e.value.right), TV(var.value, var.ctype))
    else:
        value = lw.expr(e.value)
        if e.op != "=":
            value = binary_values(lw, e.op[:-1], TV(var.value, var.ctype), value)
    new = convert(lw, value, var.ctype)
    var.value = assert_facts(lw, new.value, var.facts)
    name_after(var.value, var.name)
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
        var.value = assert_facts(lw, new.value, var.facts)
        name_after(var.value, var.name)
    elif isinstance(target, A.Deref):
        ptr, mask, pointee = pointer_and_mask(lw, target)
        mask = _masked(lw, C.shape_of(ptr.ctype), mask, "store")
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
    return effect_if(lw, cond.value, lambda: lw.expr(e.then), lambda: lw.expr(e.otherwise),
                     lambda a, b: _common(lw, e, (), a.ctype, b.ctype), [e.then, e.otherwise])


def _tile_conditional(lw: Lowerer, e: A.Conditional, cond: TV) -> TV:
    """Element-wise `c ? a : b`: memory accesses in `a` are masked by c, in `b` by !c (see
    `implicit_mask`); then a select. `c ? *p : v` with v free of loads and effects is one
    load(p, c, other=v)."""
    if isinstance(e.then, A.Deref) and is_pure(e.otherwise):
        with lw.masked_loads(cond.value):
            ptr, mask, pointee = pointer_and_mask(lw, e.then)
        other = lw.expr(e.otherwise)
        t = _common(lw, e, C.shape_of(cond.ctype), C.with_shape(pointee, C.shape_of(ptr.ctype)), other.ctype)
        if C.element_of(t) == pointee:
            shape = C.shape_of(t)
            ptr_s, cond_s = broadcast_all(lw, [ptr, cond], shape)
            full = cond_s.value
            if mask is not None:
                full = lw.b.binary("and", full, shape_to(lw, mask, shape))
            full_mask = _masked(lw, shape, full, "load")
            assert full_mask is not None
            fallback = convert(lw, other, t).value
            return TV(lw.b.load(ptr_s.value, full_mask, fallback), t)
        with lw.masked_loads(cond.value):
            shape = C.shape_of(ptr.ctype)
            loaded = TV(lw.b.load(ptr.value, _masked(lw, shape, mask, "load")), C.with_shape(pointee, shape))
        return _select(lw, e, cond, loaded, other)
    with lw.masked_loads(cond.value):
        a = lw.expr(e.then)
    not_c = lw.b.binary("xor", cond.value, lw.b.constant(True, cond.value.type))
    with lw.masked_loads(not_c):
        b = lw.expr(e.otherwise)
    return _select(lw, e, cond, a, b)


def _select(lw: Lowerer, e: A.Conditional, cond: TV, a: TV, b: TV) -> TV:
    t = _common(lw, e, C.shape_of(cond.ctype), a.ctype, b.ctype)
    shape = C.shape_of(t)
    av = convert(lw, a, t).value
    bv = convert(lw, b, t).value
    c = shape_to(lw, cond.value, shape)
    return TV(lw.b.select(c, av, bv), t)
