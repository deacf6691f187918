"""Tile subscripts: `x[:, newaxis]` (expand_dims), `x[:, +]` / `x[max]` (reduce any axis) and
`x[^1, ^0]` (trans). Entries are applied left to right, so several reductions in one subscript
each remove the axis they stand on."""

from __future__ import annotations

from tc_lang import ast as A
from tc_lang import types as C

from .context import TV, Lowerer
from .errors import BAD_SHAPE, UNSUPPORTED
from .typemap import is_float, is_signed
from .values import convert_element


def _const_int(lw: Lowerer, e: A.Expr | None) -> int:
    if e is not None:
        if isinstance(e.const, int) and not isinstance(e.const, bool):
            return e.const
        if isinstance(e, A.IntLiteral):
            return e.value
    lw.fail("a permutation entry '^' needs a constant axis number", e.loc if e else None, BAD_SHAPE)


def reduce_kind(lw: Lowerer, op: str, ctype: C.Type, item: A.SubscriptItem) -> str:
    """The reduce kind for `op` ("+", "max", "min") on elements of `ctype`."""
    if op == "-":
        lw.fail(
            "the '-' reduction has no agreed meaning and is not supported",
            item.loc,
            UNSUPPORTED,
            hint="negate the tile and reduce with '+' instead: (-x)[+]",
        )
    if op == "+":
        return "fadd" if is_float(ctype) else "add"
    prefix = "f" if is_float(ctype) else ("s" if is_signed(ctype) else "u")
    return prefix + op


def lower_subscript(lw: Lowerer, e: A.Subscript) -> TV:
    base = lw.expr(e.base)
    if not isinstance(base.ctype, C.TileType):
        lw.fail(f"only tiles can be subscripted, not '{base.ctype}'", e.loc, BAD_SHAPE)
    items = e.items
    if items and all(it.kind == "^" for it in items):
        perm = [_const_int(lw, it.value) for it in items]
        if sorted(perm) != list(range(base.ctype.rank)):
            lw.fail(f"{perm} is not a permutation of the {base.ctype.rank} axes", e.loc, BAD_SHAPE)
        v = lw.b.trans(base.value, perm)
        shape = tuple(base.ctype.shape[i] for i in perm)
        return TV(v, C.TileType(shape, base.ctype.element))
    # the element type of a reduction result is the checker's (e.g. a sum of bools is an int)
    if any(it.kind in ("+", "-", "max", "min") for it in items) and e.ty is not None:
        base = convert_element(lw, base, C.element_of(e.ty))
    value, ctype = base.value, base.ctype
    pos = 0
    for it in items:
        shape = C.shape_of(ctype)
        el = C.element_of(ctype)
        if it.kind == "newaxis":
            value = lw.b.expand_dims(value, pos)
            ctype = C.with_shape(el, shape[:pos] + (1,) + shape[pos:])
            pos += 1
        elif it.kind == ":":
            pos += 1
        elif it.kind in ("+", "-", "max", "min"):
            if pos >= len(shape):
                lw.fail("the subscript has more entries than the tile has axes", it.loc, BAD_SHAPE)
            value = lw.b.reduce(reduce_kind(lw, it.kind, ctype, it), value, pos)
            ctype = C.with_shape(el, shape[:pos] + shape[pos + 1 :])
        else:
            lw.fail(f"a permutation '^' must be the only kind of entry in a subscript", it.loc, BAD_SHAPE)
        if pos > len(C.shape_of(ctype)):
            lw.fail("the subscript has more entries than the tile has axes", it.loc, BAD_SHAPE)
    return TV(value, ctype)
