"""Syntactic facts about AST subtrees that the lowering needs before it emits anything:
which outer variables a statement assigns (they become loop-carried values and if results),
whether it can jump out (break / continue / return), whether an expression has effects."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from tc_lang import ast as A
from tc_lang.deep import children as children  # (re-exported: the lowering walks nodes with it)

INCDEC = frozenset({"pre++", "pre--", "post++", "post--"})

#: Built-ins without effects, that cannot fault: safe to evaluate eagerly.
PURE_BUILTINS = frozenset(
    """get_program_id get_num_programs exp expf log logf sqrt sqrtf rsqrt rsqrtf sin sinf cos cosf
    exp2 exp2f log2 log2f floor floorf ceil ceilf abs fabs fabsf fma fmaf min max select
    minimum maximum""".split()
)


def assigned_names(*nodes: A.Node | None) -> list[str]:
    """Names of variables declared outside `nodes` that `nodes` assign, in first-seen order."""
    out: dict[str, None] = {}
    for node in nodes:
        if node is not None:
            _assigned(node, set(), out)
    return list(out)


def _assigned(node: A.Node, shadowed: set[str], out: dict[str, None]) -> None:
    if isinstance(node, A.Compound):
        local = set(shadowed)
        for item in node.items:
            _assigned(item, local, out)
        return
    if isinstance(node, A.DeclStmt):
        for d in node.decls:
            if d.init is not None:
                _assigned(d.init, shadowed, out)
            shadowed.add(d.name)
        return
    if isinstance(node, A.For):
        local = set(shadowed)
        for part in (node.init, node.cond, node.step, node.body):
            if part is not None:
                _assigned(part, local, out)
        return
    target: A.Expr | None = None
    if isinstance(node, A.Assign):
        target = node.target
    elif isinstance(node, A.Unary) and node.op in INCDEC:
        target = node.operand
    if isinstance(target, A.Name) and target.name not in shadowed:
        out.setdefault(target.name, None)
    for child in children(node):
        _assigned(child, shadowed, out)


def jumps(node: A.Node, in_loop: bool = False) -> set[str]:
    """Which of break / continue / return `node` contains that leave it. Break and continue
    inside a nested loop stay in that loop; helper calls keep their returns (they are inlined)."""
    if isinstance(node, A.Break):
        return set() if in_loop else {"break"}
    if isinstance(node, A.Continue):
        return set() if in_loop else {"continue"}
    if isinstance(node, A.Return):
        return {"return"}
    if isinstance(node, A.Expr):
        return set()
    nested = in_loop or isinstance(node, (A.For, A.While, A.DoWhile))
    out: set[str] = set()
    for child in children(node):
        if isinstance(child, A.Stmt):
            out |= jumps(child, nested)
    return out


def always_jumps(stmt: A.Stmt) -> bool:
    """True when control never reaches the statement after `stmt` (a conservative test)."""
    if isinstance(stmt, (A.Break, A.Continue, A.Return)):
        return True
    if isinstance(stmt, A.Compound):
        return any(always_jumps(s) for s in stmt.items)
    if isinstance(stmt, A.If):
        return stmt.otherwise is not None and always_jumps(stmt.then) and always_jumps(stmt.otherwise)
    return False


#: is_pure's answers during one lowering, by the id of the node (kept with its node, so that the
#: id stays its own): the lowering asks again for every nested `?:` and `&&`, which made a chain of
#: n of them cost n^2 (2000 conditionals took 16 s). Set by `purity_memo`.
_PURE: contextvars.ContextVar[dict[int, tuple[A.Node, bool]] | None] = contextvars.ContextVar(
    "tc_ir_pure", default=None)


@contextlib.contextmanager
def purity_memo() -> Iterator[None]:
    """Remember is_pure's answers inside the block (one lowering of one unit)."""
    token = _PURE.set({})
    try:
        yield
    finally:
        _PURE.reset(token)


def is_pure(expr: A.Node) -> bool:
    """No assignment, increment, memory access, atomic, barrier or helper call inside: evaluating
    it eagerly (and even when C would not) changes nothing and cannot fault."""
    memo = _PURE.get()
    if memo is not None:
        known = memo.get(id(expr))
        if known is not None and known[0] is expr:
            return known[1]
    if isinstance(expr, A.Assign) or isinstance(expr, A.Deref):
        pure = False
    elif isinstance(expr, A.Unary) and expr.op in INCDEC:
        pure = False
    elif isinstance(expr, A.Call) and expr.func not in PURE_BUILTINS:
        pure = False
    else:
        pure = all(is_pure(c) for c in children(expr))
    if memo is not None:
        memo[id(expr)] = (expr, pure)
    return pure


def names_used(expr: A.Node) -> set[str]:
    """Every Name referenced in `expr`."""
    if isinstance(expr, A.Name):
        return {expr.name}
    out: set[str] = set()
    for c in children(expr):
        out |= names_used(c)
    return out
