"""Statements: blocks, declarations, expression statements; control flow lives in control.py."""

from __future__ import annotations

from tc_lang import ast as A

from ..ops import OpResult
from . import control
from .context import Lowerer
from .attributes import assert_facts, local_facts
from .types_ast import decl_type
from .values import convert, zero


def lower_stmt(lw: Lowerer, s: A.Stmt) -> None:
    if isinstance(s, A.Compound):
        with lw.env.scope():
            lw.stmts(s.items)
    elif isinstance(s, A.DeclStmt):
        for d in s.decls:
            declare(lw, d)
    elif isinstance(s, A.ExprStmt):
        if s.expr is not None:
            lw.expr_or_void(s.expr)
    elif isinstance(s, A.If):
        control.lower_if(lw, s)
    elif isinstance(s, A.For):
        control.lower_for(lw, s)
    elif isinstance(s, A.While):
        control.lower_loop(lw, None, s.cond, None, s.body, do_while=False)
    elif isinstance(s, A.DoWhile):
        control.lower_loop(lw, None, s.cond, None, s.body, do_while=True)
    elif isinstance(s, (A.Break, A.Continue)):
        control.lower_break_continue(lw, s)
    elif isinstance(s, A.Return):
        control.lower_return(lw, s)
    else:
        lw.fail(f"statements of kind '{type(s).__name__}' are not supported", s.loc)


def declare(lw: Lowerer, d: A.Decl) -> None:
    """`T x[dims] attrs = init`: the initialiser converted to the declared type (0 without one),
    through a tc.assume when the attributes state facts about the value."""
    t = decl_type(lw, d)
    facts = local_facts(lw, d, t)
    with lw.b.location(d.loc if d.loc.line > 0 else None):
        value = convert(lw, lw.expr(d.init), t) if d.init is not None else zero(lw, t)
        v = value.value
        if facts:
            v = assert_facts(lw, v, facts)
            v.name_hint = None
    if isinstance(v, OpResult) and v.name_hint is None:
        v.name_hint = d.name
    lw.env.declare(d.name, t, v, facts)
