"""Structured control flow: if/else with results, counted `for` -> tc.for, other loops -> tc.while,
and break / continue / return as boolean flags.

Variables assigned inside a construct (and declared outside it) become its results: iter args of
loops, results of ifs. A jump sets its flag (a variable like any other) and every statement after
a statement that may jump is wrapped in `if (!flag)`; loop conditions test `!break && !return`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tc_lang import ast as A
from tc_lang import types as C

from .. import types as T
from ..ops import Block, IfOp, Value
from .analysis import always_jumps, assigned_names, is_pure, jumps, names_used
from .context import LoopCtx, Lowerer
from .errors import BAD_OPERAND, UNSUPPORTED
from .scope import Var, restore, snapshot
from .typemap import ir_type
from .values import convert, truth, zero


# ------------------------------------------------------------------------------ statement lists


def lower_stmt_list(lw: Lowerer, items: list[A.Stmt]) -> None:
    """Lower `items`; after one that may jump, the rest runs under `if (no flag set)`."""
    for i, s in enumerate(items):
        lw.stmt(s)
        if always_jumps(s):
            return  # the rest is unreachable
        kinds = jumps(s) if lw.loop is not None else jumps(s) - {"break", "continue"}
        rest = items[i + 1 :]
        if kinds and rest:
            flags = _flags(lw, kinds)
            if flags:
                ok = _none_set(lw, flags)
                structured_if(lw, ok, lambda: lower_stmt_list(lw, rest), None, carried(lw, *rest))
                return


def _flags(lw: Lowerer, kinds: set[str]) -> list[Var]:
    out: list[Var] = []
    loop = lw.loop
    if loop is not None:
        if "break" in kinds and loop.brk is not None:
            out.append(loop.brk)
        if "continue" in kinds and loop.cont is not None:
            out.append(loop.cont)
    if "return" in kinds and lw.fn.ret_flag is not None:
        out.append(lw.fn.ret_flag)
    return out


def _none_set(lw: Lowerer, flags: Sequence[Var]) -> Value:
    """i1: none of `flags` is true."""
    any_set = flags[0].value
    for f in flags[1:]:
        any_set = lw.b.binary("or", any_set, f.value)
    return lw.b.binary("xor", any_set, lw.b.constant(True, T.I1))


def carried(lw: Lowerer, *nodes: A.Node | None) -> list[Var]:
    """Variables (and jump flags) that `nodes` may change: the results of a construct."""
    out = lw.resolve(assigned_names(*nodes))
    kinds: set[str] = set()
    for n in nodes:
        if isinstance(n, A.Stmt):
            kinds |= jumps(n)
    extra = _flags(lw, kinds)
    if "return" in kinds and lw.fn.ret_value is not None:
        extra.append(lw.fn.ret_value)
    for v in extra:
        if v not in out:
            out.append(v)
    return out


def structured_if(
    lw: Lowerer,
    cond: Value,
    then: Callable[[], None],
    otherwise: Callable[[], None] | None,
    vars: list[Var],
) -> None:
    """tc.if on `cond`; `vars` changed by either branch become the if's results."""
    before = snapshot(vars)
    blocks = []
    for branch in (then, otherwise):
        block = Block()
        with lw.b.at_end(block), lw.env.scope():
            if branch is not None:
                branch()
            lw.b.yield_(snapshot(vars))
        restore(vars, before)
        blocks.append(block)
    op = lw.b.create(IfOp, [cond], [ir_type(v.ctype) for v in vars], blocks)
    restore(vars, list(op.results))


def _scalar_condition(lw: Lowerer, e: A.Expr) -> Value:
    c = truth(lw, lw.expr(e))
    if C.shape_of(c.ctype):
        lw.fail(
            "a condition of if/for/while must be a scalar, not a tile",
            e.loc,
            BAD_OPERAND,
            hint="use a mask (*?(m) p) or c ? a : b for element-wise choices",
        )
    return c.value


# ------------------------------------------------------------------------------------ if / jumps


def lower_if(lw: Lowerer, s: A.If) -> None:
    if isinstance(s.cond.const, (int, float, bool)) and is_pure(s.cond):
        taken = s.then if s.cond.const else s.otherwise
        if taken is not None:
            with lw.env.scope():
                lw.stmt(taken)
        return
    cond = _scalar_condition(lw, s.cond)
    other = s.otherwise
    structured_if(
        lw,
        cond,
        lambda: lw.stmt(s.then),
        (lambda: lw.stmt(other)) if other is not None else None,
        carried(lw, s.then, s.otherwise),
    )


def lower_break_continue(lw: Lowerer, s: A.Break | A.Continue) -> None:
    loop = lw.loop
    word = "break" if isinstance(s, A.Break) else "continue"
    if loop is None:
        lw.fail(f"'{word}' outside a loop", s.loc, UNSUPPORTED)
    flag = loop.brk if isinstance(s, A.Break) else loop.cont
    assert flag is not None, "loop flags are created from the same analysis"
    flag.value = lw.b.constant(True, T.I1)


def setup_return(lw: Lowerer, items: Sequence[A.Stmt]) -> None:
    """Create the return flag (and value) when some return is not a top-level statement."""
    if any("return" in jumps(s) and not isinstance(s, A.Return) for s in items):
        lw.fn.ret_flag = Var("%returned", C.BOOL, lw.b.constant(False, T.I1))
        if lw.fn.return_ctype is not None:
            lw.fn.ret_value = Var("%result", lw.fn.return_ctype, zero(lw, lw.fn.return_ctype).value)


def lower_return(lw: Lowerer, s: A.Return) -> None:
    fn = lw.fn
    if s.value is not None:
        if fn.return_ctype is None:
            lw.fail(f"'{fn.name}' returns void but 'return' has a value", s.loc, BAD_OPERAND)
        value = convert(lw, lw.expr(s.value), fn.return_ctype).value
        if fn.ret_value is None:
            fn.ret_value = Var("%result", fn.return_ctype, value)
        else:
            fn.ret_value.value = value
    elif fn.return_ctype is not None:
        lw.fail(f"'{fn.name}' must return a value", s.loc, BAD_OPERAND)
    if fn.ret_flag is not None:
        fn.ret_flag.value = lw.b.constant(True, T.I1)


# ----------------------------------------------------------------------------------------- loops


def lower_for(lw: Lowerer, s: A.For) -> None:
    with lw.env.scope():
        if s.init is not None:
            lw.stmt(s.init)
        if not _counted_for(lw, s):
            lower_loop(lw, s.init, s.cond, s.step, s.body, do_while=False)


def _loop_flags(lw: Lowerer, body: A.Stmt) -> LoopCtx:
    kinds = jumps(body)
    loop = LoopCtx()
    if "break" in kinds:
        loop.brk = Var("%break", C.BOOL, lw.b.constant(False, T.I1))
    if "continue" in kinds:
        loop.cont = Var("%continue", C.BOOL, lw.b.constant(False, T.I1))
    return loop


def _body(lw: Lowerer, loop: LoopCtx, body: A.Stmt) -> None:
    lw.fn.loops.append(loop)
    try:
        if loop.cont is not None:
            loop.cont.value = lw.b.constant(False, T.I1)
        with lw.env.scope():
            lw.stmt(body)
    finally:
        lw.fn.loops.pop()


def _exit_flags(lw: Lowerer, loop: LoopCtx) -> list[Var]:
    return [f for f in (loop.brk, lw.fn.ret_flag) if f is not None]


def _guarded(lw: Lowerer, flags: list[Var], fn: Callable[[], None], vars: list[Var]) -> None:
    """Run `fn` only while none of `flags` is set."""
    if not flags:
        fn()
        return
    structured_if(lw, _none_set(lw, flags), fn, None, vars)


def lower_loop(
    lw: Lowerer,
    init: A.Stmt | None,
    cond: A.Expr | None,
    step: A.Expr | None,
    body: A.Stmt,
    do_while: bool,
) -> None:
    """while / do-while / general for as tc.while (init already lowered by the caller)."""
    loop = _loop_flags(lw, body)
    kinds = jumps(body)
    vars = lw.resolve(assigned_names(cond, step, body))
    extra = [loop.brk] + ([lw.fn.ret_flag, lw.fn.ret_value] if "return" in kinds else [])
    for v in extra:
        if v is not None and v not in vars:
            vars.append(v)
    types = [ir_type(v.ctype) for v in vars]
    entry = snapshot(vars)
    op = lw.b.while_(entry, types, [v.name for v in vars])
    exit_flags = _exit_flags(lw, loop) if ("break" in kinds or "return" in kinds) else []

    def condition() -> Value:
        if cond is None:  # `for (;;)`: runs until a break or a return sets its flag
            return _none_set(lw, exit_flags) if exit_flags else lw.b.constant(True, T.I1)
        if not exit_flags:
            return _scalar_condition(lw, cond)
        ok = _none_set(lw, exit_flags)
        if is_pure(cond):
            return lw.b.binary("and", ok, _scalar_condition(lw, cond))
        result = Var("%cond", C.BOOL, lw.b.constant(False, T.I1))

        def evaluate() -> None:
            result.value = _scalar_condition(lw, cond)

        structured_if(lw, ok, evaluate, None, [*lw.resolve(assigned_names(cond)), result])
        return result.value

    restore(vars, list(op.before.args))
    with lw.b.at_end(op.before):
        if do_while:
            _body(lw, loop, body)
        c = condition()
        lw.b.condition(c, snapshot(vars))
    restore(vars, list(op.after.args))
    with lw.b.at_end(op.after):
        if not do_while:
            _body(lw, loop, body)
            if step is not None:
                _guarded(lw, exit_flags, lambda: _expr_stmt(lw, step), lw.resolve(assigned_names(step)))
        lw.b.yield_(snapshot(vars))
    restore(vars, list(op.results))


def _expr_stmt(lw: Lowerer, e: A.Expr) -> None:
    lw.expr_or_void(e)


# ------------------------------------------------------------------------------- counted loops


def _const_int(e: A.Expr) -> int | None:
    v = e.const if e.const is not None else (e.value if isinstance(e, A.IntLiteral) else None)
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


def _step_delta(step: A.Expr | None, name: str) -> int | None:
    """The constant change of `name` per iteration: i++, --i, i += c, i -= c, i = i + c ..."""
    if isinstance(step, A.Unary) and isinstance(step.operand, A.Name) and step.operand.name == name:
        return {"pre++": 1, "post++": 1, "pre--": -1, "post--": -1}.get(step.op)
    if not isinstance(step, A.Assign) or not isinstance(step.target, A.Name) or step.target.name != name:
        return None
    if step.op in ("+=", "-="):
        c = _const_int(step.value)
        return None if c is None else (c if step.op == "+=" else -c)
    if step.op == "=" and isinstance(step.value, A.Binary) and step.value.op in ("+", "-"):
        l, r = step.value.left, step.value.right
        if isinstance(l, A.Name) and l.name == name:
            c = _const_int(r)
            return None if c is None else (c if step.value.op == "+" else -c)
        if step.value.op == "+" and isinstance(r, A.Name) and r.name == name:
            return _const_int(l)
    return None


_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_INT32_OK = frozenset({"bool", "int8", "uint8", "int16", "uint16", "int32"})


def _counted_for(lw: Lowerer, s: A.For) -> bool:
    """`for (int i = a; i < b; i += c)` (also <=, and i > b; i -= c with >=) -> tc.for."""
    if not isinstance(s.init, A.DeclStmt) or len(s.init.decls) != 1:
        return False
    name = s.init.decls[0].name
    var = lw.env.lookup(name)
    if var is None or var.ctype != C.INT32 or jumps(s.body) & {"break", "return"}:
        return False
    body_assigns = set(assigned_names(s.body))
    if name in body_assigns or not isinstance(s.cond, A.Binary) or s.cond.op not in _MIRROR:
        return False
    op, left, right = s.cond.op, s.cond.left, s.cond.right
    if isinstance(right, A.Name) and right.name == name and not (isinstance(left, A.Name) and left.name == name):
        op, left, right = _MIRROR[op], right, left
    if not (isinstance(left, A.Name) and left.name == name):
        return False
    bound_expr = right
    if not is_pure(bound_expr) or names_used(bound_expr) & (body_assigns | {name}):
        return False
    if bound_expr.ty is not None and not (
        isinstance(bound_expr.ty, C.ScalarType) and bound_expr.ty.name in _INT32_OK
    ):
        return False
    delta = _step_delta(s.step, name)
    if delta is None or delta == 0 or not -(1 << 31) < delta < (1 << 31):
        return False
    up = delta > 0
    if up != (op in ("<", "<=")):
        return False
    zero_bound = _const_int(bound_expr) == 0
    with lw.b.location(s.cond.loc if s.cond.loc.line > 0 else None):
        bound_v = init_v = var.value
        if up or not zero_bound:
            bound = lw.expr(bound_expr)
            if not (isinstance(bound.ctype, C.ScalarType) and bound.ctype.name in _INT32_OK):
                return False  # pragma: no cover - only for unannotated trees
            bound_v = convert(lw, bound, C.INT32).value

        def one() -> Value:
            return lw.b.constant(1, T.I32)

        if up:
            lb = init_v
            ub = bound_v if op == "<" else lw.b.binary("add", bound_v, one())
        else:
            lb = lw.b.constant(0, T.I32)
            ub = init_v if zero_bound else lw.b.binary("sub", init_v, bound_v)
            if op == ">=":
                ub = lw.b.binary("add", ub, one())
        step_v = lw.b.constant(abs(delta), T.I32)
    _emit_for(lw, s, var, lb, ub, step_v, up, init_v)
    return True


def _emit_for(
    lw: Lowerer, s: A.For, ivar: Var, lb: Value, ub: Value, step: Value, up: bool, init: Value
) -> None:
    loop = _loop_flags(lw, s.body)
    vars = [v for v in lw.resolve(assigned_names(s.body)) if v is not ivar]
    op = lw.b.for_(lb, ub, step, snapshot(vars), iv_name=ivar.name if up else None,
                   arg_names=[v.name for v in vars])
    restore(vars, list(op.body.args[1:]))
    with lw.b.at_end(op.body):
        iv = op.body.args[0]
        ivar.value = iv if up else lw.b.binary("sub", init, iv)
        _body(lw, loop, s.body)
        lw.b.yield_(snapshot(vars))
    restore(vars, list(op.results))

