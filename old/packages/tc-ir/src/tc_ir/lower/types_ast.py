"""The C type of a type as written (for nodes the checker did not annotate, e.g. in unit tests)."""

from __future__ import annotations

from tc_lang import ast as A
from tc_lang import types as C

from .context import Lowerer
from .errors import BAD_SHAPE


def resolve_typename(lw: Lowerer, tn: A.TypeName) -> C.Type:
    """base, pointers and constant tile dimensions -> a C type."""
    el: C.ElementType = tn.base
    for _ in range(tn.pointers):
        el = C.PointerType(el)
    if tn.dims is None:
        return el
    dims: list[int] = []
    for d in tn.dims:
        v = d.const if d.const is not None else (d.value if isinstance(d, A.IntLiteral) else None)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            lw.fail("tile dimensions must be positive integer constants", d.loc, BAD_SHAPE)
        dims.append(v)
    return C.TileType(tuple(dims), el)


def decl_type(lw: Lowerer, d: A.Decl | A.Param) -> C.Type:
    return d.ty if d.ty is not None else resolve_typename(lw, d.type)
