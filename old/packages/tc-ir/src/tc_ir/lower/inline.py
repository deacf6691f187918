"""`__device__` helpers are inlined at each call: arguments converted to the parameter types,
the body lowered in a fresh scope, `return expr;` giving the call's value."""

from __future__ import annotations

from tc_lang import ast as A
from tc_lang import types as C

from .context import TV, FnCtx, Lowerer
from .control import setup_return
from .errors import BAD_CALL, RECURSION
from .scope import Env
from .types_ast import decl_type, resolve_typename
from .values import convert


def return_type(lw: Lowerer, f: A.FunctionDef) -> C.Type | None:
    t = f.return_ty if f.return_ty is not None else resolve_typename(lw, f.return_type)
    if isinstance(t, C.ScalarType) and t.is_void:
        return None
    return t


def inline_call(lw: Lowerer, e: A.Call, helper: A.FunctionDef) -> TV | None:
    if helper.name in lw.inlining:
        chain = " -> ".join([*lw.inlining, helper.name])
        lw.fail(f"recursive call of '{helper.name}' ({chain}) cannot be inlined", e.loc, RECURSION)
    if len(e.args) != len(helper.params):
        lw.fail(
            f"'{helper.name}' takes {len(helper.params)} argument(s), not {len(e.args)}", e.loc, BAD_CALL
        )
    args = [convert(lw, lw.expr(a), decl_type(lw, p)) for a, p in zip(e.args, helper.params)]
    saved_env, saved_fn = lw.env, lw.fn
    lw.env = Env()
    for p, a in zip(helper.params, args):
        lw.env.declare(p.name, a.ctype, a.value)
    lw.fn = FnCtx(helper.name, return_type(lw, helper))
    lw.inlining.append(helper.name)
    try:
        setup_return(lw, helper.body.items)
        lw.stmts(helper.body.items)
        fn = lw.fn
    finally:
        lw.inlining.pop()
        lw.env, lw.fn = saved_env, saved_fn
    if fn.return_ctype is None:
        return None
    if fn.ret_value is None:
        lw.fail(f"'{helper.name}' does not return a value", helper.loc, BAD_CALL)
    return TV(fn.ret_value.value, fn.return_ctype)
