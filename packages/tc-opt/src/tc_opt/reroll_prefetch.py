"""Undo hand-written operand prefetching so that the software pipeliner sees the loop's loads.

The spec's 2020 matmul kernels load the first tile before the loop and the next one at the end of
each iteration (`a = *pa; for (...) { c += a @ b; pa += TK; a = k > TK ? *pa : 0; }`): the dot
reads a register tile carried from the previous iteration, so the loop has no load feeding the
dot in its own body and neither cp.async nor TMA pipelining applies (tc_opt.pipeline_loops looks
for loads of the body). This pass rewrites such a carried value `v` back into `v = load(p)` at the
top of the body when that is provably the same value:

* v's init is `load(p0[, m, o])` with p0 the init of a carried pointer p, in the loop's block with
  nothing that writes memory between the load and the loop (m and o are then defined outside it);
* v's yielded value is the prefetch `load(p_next[, m, o])` (same mask and other), possibly guarded
  by `c` as `if c {load} else {...}`, `select(c, load, ...)` or the masked load `load(p_next, c, .)`
  (then without m, o), where p_next is exactly the value yielded for p and `c` is true exactly
  when another iteration follows (proved from the induction variable, see `_is_continuation`);
* nothing writing memory runs in the body after the prefetch, and the loop's result for v is
  unused (its value after the last iteration, the `else` value, is never observed).

Then in iteration i > 0 the carried value was loaded from p_next of iteration i - 1, which is p of
iteration i, with no write in between, and iteration 0 reads p0 = p's init: `load(p)` at the top
of the body gives the same value. The last iteration's prefetch (zero or a read past the end) and
the load before a loop that never runs disappear, which removes reads and so cannot change results.
"""

from __future__ import annotations

from tc_ir.ops import (
    AtomicCASOp,
    AtomicRMWOp,
    BinaryOp,
    Block,
    BroadcastOp,
    CmpOp,
    ConditionOp,
    ForOp,
    IfOp,
    LoadOp,
    Module,
    Operation,
    OpResult,
    SelectOp,
    SplatOp,
    StoreOp,
    Value,
    WhileOp,
    YieldOp,
)
from tc_ir.types import ScalarType

from .ir_utils import constant_of, replace_uses, uses
from .pass_manager import Pass

#: Structured ops whose own effect flag only stands for their regions (which are checked).
_TRANSPARENT = (ForOp, IfOp, WhileOp, YieldOp, ConditionOp)
#: Largest constant offset the condition analysis accepts (keeps every partial sum in i32).
_SMALL = 1 << 30


def _writes_memory(op: Operation) -> bool:
    """True when `op` (or an op nested in it) may write memory or has another effect a load must
    not move across (stores, atomics, barriers, calls: every effect but structured control)."""
    for o in op.walk():
        if isinstance(o, (StoreOp, AtomicRMWOp, AtomicCASOp)):
            return True
        if o.HAS_SIDE_EFFECTS and not isinstance(o, _TRANSPARENT):
            return True
        if isinstance(o, LoadOp) and o.volatile:
            return True
    return False


def _is_pure(block: Block) -> bool:
    """No op of `block` (its yield aside) has effects: the region can be dropped with its op."""
    return not any(o.HAS_SIDE_EFFECTS and not isinstance(o, YieldOp) for o in block.walk()) and not any(
        isinstance(o, LoadOp) and o.volatile for o in block.walk())


# ------------------------------------------------------------------------ continuation condition

_Form = dict[str, int]  # "iv", "ub", "1" -> coefficient


def _affine(v: Value, iv: Value, ub: Value, step: int, depth: int = 0) -> _Form | None:
    """`v` as a * iv + b * ub + c over the integers, for forms whose i32 evaluation cannot wrap
    while the loop runs (lb >= 0 constant, lb <= iv < ub): c, iv + c (c <= step: iv + step wraps
    only where the loop's own increment does), ub + c and ub - iv + c (c <= 0). None otherwise."""
    if depth > 8:
        return None
    if v is iv:
        return {"iv": 1, "ub": 0, "1": 0}
    if v is ub:
        return {"iv": 0, "ub": 1, "1": 0}
    c = constant_of(v)
    if isinstance(c, int) and not isinstance(c, bool) and isinstance(v.type, ScalarType):
        return {"iv": 0, "ub": 0, "1": c} if abs(c) < _SMALL else None
    if not (isinstance(v, OpResult) and isinstance(v.op, BinaryOp) and v.op.kind in ("add", "sub")):
        return None
    lhs = _affine(v.op.operands[0], iv, ub, step, depth + 1)
    rhs = _affine(v.op.operands[1], iv, ub, step, depth + 1)
    if lhs is None or rhs is None:
        return None
    sign = 1 if v.op.kind == "add" else -1
    out = {k: lhs[k] + sign * rhs[k] for k in lhs}
    return out if _no_wrap(out, step) else None


def _no_wrap(f: _Form, step: int) -> bool:
    """The forms `_affine` accepts (see there)."""
    a, b, c = f["iv"], f["ub"], f["1"]
    if abs(c) >= _SMALL:
        return False
    if (a, b) == (0, 0):
        return True
    if (a, b) == (1, 0):
        return c <= step
    if (a, b) in ((0, 1), (-1, 1)):
        return c <= 0
    return False


def _scalar_condition(v: Value) -> Value:
    """The scalar i1 a tile condition splats (or `v` itself)."""
    while isinstance(v, OpResult) and isinstance(v.op, (SplatOp, BroadcastOp)):
        v = v.op.operands[0]
    return v


def _is_continuation(cond: Value, loop: ForOp) -> bool:
    """Whether `cond` is true exactly when another iteration follows the current one: iv + step <
    ub, written e.g. `(ub - iv) > step` (the front end's `k > TK` for `for (k = K; k > 0; k -= TK)`,
    whose loop is lb = 0, ub = K, k = K - iv). Needs lb >= 0 and step > 0 constant."""
    lb, ub, step_v = loop.operands[:3]
    lo, step = constant_of(lb), constant_of(step_v)
    if not isinstance(lo, int) or isinstance(lo, bool) or lo < 0:
        return False
    if not isinstance(step, int) or isinstance(step, bool) or not 0 < step < _SMALL:
        return False
    cond = _scalar_condition(cond)
    if not (isinstance(cond, OpResult) and isinstance(cond.op, CmpOp)):
        return False
    if not isinstance(cond.type, ScalarType):
        return False
    pred = cond.op.predicate
    x, y = cond.op.operands
    if pred in ("slt", "sle"):  # y > x, y >= x
        x, y, pred = y, x, "sgt" if pred == "slt" else "sge"
    if pred not in ("sgt", "sge"):
        return False
    iv = loop.body.args[0]
    fx, fy = _affine(x, iv, ub, step), _affine(y, iv, ub, step)
    if fx is None or fy is None:
        return False
    diff = {k: fx[k] - fy[k] for k in fx}  # cond: diff > 0 (sgt) or diff + 1 > 0 (sge)
    if pred == "sge":
        diff["1"] += 1
    return diff == {"iv": -1, "ub": 1, "1": -step}  # ub - iv - step > 0


# ------------------------------------------------------------------------------- the rewrite


def _same_load(a: LoadOp, b: LoadOp) -> bool:
    """Same mask and other operands (by identity) and neither volatile."""
    return not a.volatile and not b.volatile and len(a.operands) == len(b.operands) and all(
        x is y for x, y in zip(a.operands[1:], b.operands[1:]))


def _prefetch(yielded: Value, loop: ForOp, p_next: Value, init: LoadOp) -> Operation | None:
    """The body op that produces the prefetch yielded as `yielded` (the op whose position bounds
    the writes check), or None when it is not one of the accepted forms."""
    body = loop.body
    if not isinstance(yielded, OpResult) or yielded.op.parent is not body:
        return None
    op = yielded.op
    if isinstance(op, LoadOp):
        if op.operands[0] is not p_next or op.volatile:
            return None
        if _same_load(op, init):  # unconditional: the last iteration's read is dropped
            return op
        # load(p_next, c, other) with an unmasked first load
        if len(init.operands) == 1 and len(op.operands) >= 2 and _is_continuation(op.operands[1], loop):
            return op
        return None
    if isinstance(op, SelectOp):
        c, a, _ = op.operands
        ld = a.op if isinstance(a, OpResult) and isinstance(a.op, LoadOp) else None
        if ld is None or ld.parent is not body or ld.operands[0] is not p_next or not _same_load(ld, init):
            return None
        if len(uses(body).get(a, [])) != 1 or not _is_continuation(c, loop):
            return None
        start, stop = body.ops.index(ld), body.ops.index(op)
        if any(_writes_memory(o) for o in body.ops[start:stop]):
            return None
        return ld
    if isinstance(op, IfOp) and len(op.results) == 1:
        then, other = op.then_block, op.else_block
        term = then.terminator
        if not isinstance(term, YieldOp) or len(then.ops) != 2:
            return None
        inner = then.ops[0]
        if not isinstance(inner, LoadOp) or term.operands[0] is not inner.result:
            return None
        if inner.operands[0] is not p_next or not _same_load(inner, init):
            return None
        if not _is_pure(other) or not _is_continuation(op.operands[0], loop):
            return None
        return op
    return None


def _try(loop: ForOp, j: int, users: dict[Value, list[Operation]]) -> bool:
    """Re-roll the carried value at iter-arg index j (block argument j + 1) when provable."""
    body, parent = loop.body, loop.parent
    term = body.terminator
    if parent is None or not isinstance(term, YieldOp):
        return False
    inits = loop.inits
    init = inits[j]
    if loop.results[j] in users or not isinstance(init, OpResult) or not isinstance(init.op, LoadOp):
        return False
    first = init.op
    if first.parent is not parent or first.volatile:
        return False
    start, at = parent.ops.index(first), parent.ops.index(loop)
    if any(_writes_memory(o) for o in parent.ops[start + 1:at]):
        return False
    yielded = term.operands[j]
    for i, p0 in enumerate(inits):  # the carried pointer p whose init the first load reads
        if i == j or p0 is not first.operands[0]:
            continue
        p_next = term.operands[i]
        pre = _prefetch(yielded, loop, p_next, first)
        if pre is None:
            continue
        if len([u for u in users.get(yielded, []) if u is not term]) or term.operands.count(yielded) != 1:
            continue
        if any(_writes_memory(o) for o in body.ops[body.ops.index(pre) + 1:-1]):
            continue
        _rewrite(loop, j, i, first)
        return True
    return False


def _rewrite(loop: ForOp, j: int, i: int, first: LoadOp) -> None:
    """load(p) at the top of the body replaces carried value j; the prefetch and slot j go."""
    body, parent = loop.body, loop.parent
    term = body.terminator
    assert parent is not None and term is not None
    arg, p = body.args[j + 1], body.args[i + 1]
    load = LoadOp.create([p, *first.operands[1:]], [arg.type], first.attributes(), loc=first.loc)
    load.result.name_hint = arg.name_hint
    body.insert(0, load)
    replace_uses(body, arg, load.result)
    yielded = term.operands[j]
    term.operands = [v for k, v in enumerate(term.operands) if k != j]
    if isinstance(yielded, OpResult) and yielded.op.parent is body:
        # the prefetch (and a select's load) have no other user now
        op = yielded.op
        body.remove(op)
        if isinstance(op, SelectOp):
            ld = op.operands[1]
            if isinstance(ld, OpResult) and ld.op.parent is body and ld not in uses(body):
                body.remove(ld.op)
    body.args.pop(j + 1)
    for k, a in enumerate(body.args):
        a.index = k
    body.parent = None
    new = ForOp.create([v for k, v in enumerate(loop.operands) if k != j + 3],
                       [a.type for a in body.args[1:]], loop.attributes(), [body], loop.loc)
    parent.insert(parent.ops.index(loop), new)
    old = [r for k, r in enumerate(loop.results) if k != j]
    root = _root(parent)
    for old_r, new_r in zip(old, new.results):
        new_r.name_hint = old_r.name_hint
        replace_uses(root, old_r, new_r)
    parent.remove(loop)


def _root(block: Block) -> Block:
    """The function body holding `block`."""
    while block.parent is not None and block.parent.parent is not None:
        block = block.parent.parent
    return block


def reroll_prefetches(root: Block) -> int:
    """Rewrite every provable hand-written prefetch under `root`; returns how many."""
    count = 0
    changed = True
    while changed:
        changed = False
        users = uses(root)
        for op in list(root.walk()):
            if not isinstance(op, ForOp):
                continue
            for j in range(len(op.inits)):
                if _try(op, j, users):
                    count += 1
                    changed = True
                    break
            if changed:
                break
    return count


class RerollPrefetch(Pass):
    """Hand-prefetched loop operands back to loads at the top of the body (module docstring)."""

    name = "reroll-prefetch"

    def run(self, module: Module) -> None:
        """Rewrite each provably equivalent hand-prefetched loop operand into a load at the top of the body."""
        for f in module.functions:
            reroll_prefetches(f.body)


__all__ = ["RerollPrefetch", "reroll_prefetches"]
