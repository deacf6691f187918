"""The state of one lowering: builder, variables, the function being built, implicit load masks.

`Lowerer.expr` and `Lowerer.stmt` dispatch to expressions.py and statements.py; every module of
the lowering works on a `Lowerer` so they can call each other without import cycles.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import attrs
from tc_lang import ast as A
from tc_lang import types as C
from tc_lang.diagnostics import Location

from ..builder import Builder
from ..ops import Value
from .errors import BAD_OPERAND, fail
from .scope import Env, Var


@attrs.frozen
class TV:
    """A lowered value with the C type it has in the source (which says its signedness)."""

    value: Value
    ctype: C.Type


@attrs.frozen
class MaskBarrier:
    """Pushed on `Lowerer.load_masks` around a construct that is not element-wise (a reduction,
    permutation, reshape, matrix product, helper call): the lanes of a load under it do not
    line up with the lanes of the enclosing `?:`, so its condition cannot mask them."""

    what: str
    loc: Location | None


@attrs.define
class LoopCtx:
    """Flags of the innermost loop: set by break / continue (None when the loop has none)."""

    brk: Var | None = None
    cont: Var | None = None


@attrs.define
class FnCtx:
    """The function being lowered (a kernel, or a helper being inlined)."""

    name: str
    return_ctype: C.Type | None  # None: void
    ret_flag: Var | None = None  # set by a return that is not the last statement
    ret_value: Var | None = None  # the value returned (helpers)
    loops: list[LoopCtx] = attrs.field(factory=list)


class Lowerer:
    """Holds everything the statement and expression lowering share."""

    def __init__(self, unit: A.TranslationUnit) -> None:
        self.unit = unit
        self.b = Builder()
        self.env = Env()
        self.fn = FnCtx("<none>", None)
        #: Masks (i1 tiles) that memory accesses get while lowering the branches of a tile `?:`
        #: (and the right operand of a tile && / ||), with barriers where lanes stop lining up.
        self.load_masks: list[Value | MaskBarrier] = []
        #: Helpers being inlined (to refuse recursion).
        self.inlining: list[str] = []

    # ---------------------------------------------------------------------------- dispatch

    def expr_or_void(self, e: A.Expr) -> TV | None:
        from .expressions import lower_expr

        with self.b.location(e.loc if e.loc.line > 0 else None):
            barrier = self._barrier_for(e) if self.load_masks else None
            if barrier is None:
                return lower_expr(self, e)
            self.load_masks.append(MaskBarrier(barrier, e.loc if e.loc.line > 0 else self.b.loc))
            try:
                return lower_expr(self, e)
            finally:
                self.load_masks.pop()

    def _barrier_for(self, e: A.Expr) -> str | None:
        """What makes `e` not element-wise with respect to its operands (None: it is)."""
        if isinstance(e, A.Subscript):
            return "a subscript (reduction, permutation or newaxis)"
        if isinstance(e, A.Unary) and e.op == "^":
            return "a transposition '^'"
        if isinstance(e, A.Binary) and e.op == "@":
            return "a matrix product '@'"
        if isinstance(e, A.Call):
            helper = self.unit.function(e.func)
            if helper is not None and helper.kind != "global":
                return f"a call of the helper '{e.func}'"
        if isinstance(e, A.Cast):
            src = e.operand.ty
            dst = e.ty
            if src is None or dst is None:
                return None if e.type.dims is None else "a tile cast"
            s, d = C.shape_of(src), C.shape_of(dst)
            padded = (1,) * (len(d) - len(s)) + s
            if len(s) > len(d) or not all(a in (1, b) for a, b in zip(padded, d)):
                return "a reshaping tile cast"
        return None

    def expr(self, e: A.Expr) -> TV:
        tv = self.expr_or_void(e)
        if tv is None:
            self.fail("a void value cannot be used here", e.loc, BAD_OPERAND)
        return tv

    def stmt(self, s: A.Stmt) -> None:
        from .statements import lower_stmt

        with self.b.location(s.loc if s.loc.line > 0 else None):
            try:
                lower_stmt(self, s)
            except RecursionError:  # (at the innermost statement: the one too deep, not the kernel)
                self.fail("this statement is nested too deeply to compile", s.loc,
                          hint="split long expressions into several statements")

    def stmts(self, items: tuple[A.Stmt, ...] | list[A.Stmt]) -> None:
        from .control import lower_stmt_list

        lower_stmt_list(self, list(items))

    # ----------------------------------------------------------------------------- helpers

    def fail(self, message: str, loc: Location | None, code: str = "E0601", hint: str | None = None) -> NoReturn:
        fail(message, loc if loc is not None and loc.line > 0 else self.b.loc, code, hint)

    @property
    def loop(self) -> LoopCtx | None:
        return self.fn.loops[-1] if self.fn.loops else None

    @contextmanager
    def masked_loads(self, mask: Value) -> Iterator[None]:
        self.load_masks.append(mask)
        try:
            yield
        finally:
            self.load_masks.pop()

    def resolve(self, names: list[str]) -> list[Var]:
        """The Vars that `names` refer to here (names that are not variables are skipped)."""
        out: list[Var] = []
        for n in names:
            v = self.env.lookup(n)
            if v is not None and v not in out:
                out.append(v)
        return out
