"""Turns a function into a flat list of closures over an environment list, once per kernel.

Each SSA value gets a slot in `env`; each op becomes one closure that reads its operand slots and
writes its result slots, with the element-type-specific numpy function chosen here, ahead of time.
Structured control flow (for/if/while) becomes a closure running the nested closure lists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops as O
from ..types import IRType, ScalarType, TileType, element_of, shape_of
from .dtypes import is_bf16, round_bf16, round_tf32, scalar, unsigned, value_dtype
from .elementwise import make_binary, make_cast, make_cmp, make_fma, make_unary
from .errors import AssumptionError, InterpreterError
from .memops import pid_for_message, compile_atomic_cas, compile_atomic_rmw, compile_load, compile_store
from .state import ProgramState

Env = list[Any]
Step = Callable[[Env], None]


def _scalarize(x: Any) -> Any:
    return x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x


class CompiledBlock:
    """A block's closures plus the slots of its arguments and of its terminator's operands."""

    __slots__ = ("steps", "arg_slots", "exit_slots")

    def __init__(self, steps: list[Step], arg_slots: list[int], exit_slots: list[int]) -> None:
        self.steps = steps
        self.arg_slots = arg_slots
        self.exit_slots = exit_slots

    def run(self, env: Env, args: list[Any]) -> list[Any]:
        for s, v in zip(self.arg_slots, args):
            env[s] = v
        for step in self.steps:
            step(env)
        return [env[s] for s in self.exit_slots]


class Compiler:
    def __init__(self, state: ProgramState) -> None:
        self.state = state
        self.slots: dict[int, int] = {}

    def slot(self, value: O.Value) -> int:
        key = id(value)
        s = self.slots.get(key)
        if s is None:
            s = self.slots[key] = len(self.slots)
        return s

    @property
    def num_slots(self) -> int:
        return len(self.slots)

    def block(self, block: O.Block) -> CompiledBlock:
        arg_slots = [self.slot(a) for a in block.args]
        steps: list[Step] = []
        exit_slots: list[int] = []
        for op in block.ops:
            if isinstance(op, (O.YieldOp, O.ConditionOp, O.ReturnOp)):
                exit_slots = [self.slot(v) for v in op.operands]
                break
            handler = _HANDLERS.get(type(op))
            if handler is None:
                raise InterpreterError(f"{self.state.where(op.loc)}: the interpreter cannot run {op.NAME}")
            steps.append(handler(self, op))
        return CompiledBlock(steps, arg_slots, exit_slots)


# ------------------------------------------------------------------------------- simple ops

Handler = Callable[[Compiler, Any], Step]
_HANDLERS: dict[type[O.Operation], Handler] = {}


def _handles(cls: type[O.Operation]) -> Callable[[Handler], Handler]:
    def deco(f: Handler) -> Handler:
        _HANDLERS[cls] = f
        return f

    return deco


def _unop(c: Compiler, op: O.Operation, f: Callable[[Any], Any]) -> Step:
    a, r = c.slot(op.operands[0]), c.slot(op.results[0])

    def step(env: Env) -> None:
        env[r] = f(env[a])

    return step


def _binop(c: Compiler, op: O.Operation, f: Callable[[Any, Any], Any]) -> Step:
    a, b, r = c.slot(op.operands[0]), c.slot(op.operands[1]), c.slot(op.results[0])

    def step(env: Env) -> None:
        env[r] = f(env[a], env[b])

    return step


def _const_value(t: IRType, value: Any) -> Any:
    v = scalar(value, element_of(t))
    if isinstance(t, TileType):
        arr = np.full(t.shape, v, dtype=value_dtype(t))
        arr.setflags(write=False)
        return arr
    return v


@_handles(O.ConstantOp)
def _constant(c: Compiler, op: O.ConstantOp) -> Step:
    value = _const_value(op.results[0].type, op.value)
    r = c.slot(op.results[0])

    def step(env: Env) -> None:
        env[r] = value

    return step


@_handles(O.UndefOp)
def _undef(c: Compiler, op: O.UndefOp) -> Step:
    """NaN for floats (so that a read of it shows in the results), zeros otherwise."""
    t = op.results[0].type
    e = element_of(t)
    value = _const_value(t, float("nan") if isinstance(e, ScalarType) and not e.is_int else 0)
    r = c.slot(op.results[0])

    def step(env: Env) -> None:
        env[r] = value

    return step


@_handles(O.ProgramIdOp)
def _program_id(c: Compiler, op: O.ProgramIdOp) -> Step:
    state, axis, r = c.state, op.axis, c.slot(op.results[0])
    t = value_dtype(op.results[0].type).type

    def step(env: Env) -> None:
        env[r] = t(state.pid[axis])

    return step


@_handles(O.NumProgramsOp)
def _num_programs(c: Compiler, op: O.NumProgramsOp) -> Step:
    state, axis, r = c.state, op.axis, c.slot(op.results[0])
    t = value_dtype(op.results[0].type).type

    def step(env: Env) -> None:
        env[r] = t(state.grid[axis])

    return step


@_handles(O.MakeRangeOp)
def _make_range(c: Compiler, op: O.MakeRangeOp) -> Step:
    arr = np.arange(op.start, op.end, dtype=value_dtype(op.results[0].type))
    arr.setflags(write=False)
    r = c.slot(op.results[0])

    def step(env: Env) -> None:
        env[r] = arr

    return step


@_handles(O.SplatOp)
@_handles(O.BroadcastOp)
def _broadcast(c: Compiler, op: O.Operation) -> Step:
    t = op.results[0].type
    shape, dt = shape_of(t), value_dtype(t)
    return _unop(c, op, lambda x: np.broadcast_to(np.asarray(x, dtype=dt), shape))


@_handles(O.ExpandDimsOp)
def _expand_dims(c: Compiler, op: O.ExpandDimsOp) -> Step:
    axis = op.axis
    return _unop(c, op, lambda x: np.expand_dims(x, axis))


@_handles(O.ReshapeOp)
def _reshape(c: Compiler, op: O.ReshapeOp) -> Step:
    shape = shape_of(op.results[0].type)
    if not shape:
        return _unop(c, op, lambda x: np.asarray(x).reshape(-1)[0])
    return _unop(c, op, lambda x: np.reshape(x, shape))


@_handles(O.TransOp)
def _trans(c: Compiler, op: O.TransOp) -> Step:
    perm = op.perm
    return _unop(c, op, lambda x: np.transpose(x, perm))


@_handles(O.ConvertLayoutOp)
def _convert_layout(c: Compiler, op: O.ConvertLayoutOp) -> Step:
    return _unop(c, op, lambda x: x)


@_handles(O.AssumeOp)
def _assume(c: Compiler, op: O.AssumeOp) -> Step:
    """Forward the operand after checking the facts (a broken one is undefined behaviour)."""
    n = op.multiple_of * op.aligned // np.gcd(op.multiple_of, op.aligned)
    a, r = c.slot(op.operands[0]), c.slot(op.results[0])
    state, loc = c.state, op.loc
    shape = shape_of(op.operands[0].type)
    what = f"__multipleof({op.multiple_of})" if op.multiple_of > 1 else ""
    if op.aligned > 1:
        what += (" and " if what else "") + f"__aligned({op.aligned})"

    def step(env: Env) -> None:
        x = env[a]
        if n > 1:
            bad = np.asarray(x).astype(np.int64) % n != 0
            if bad.any():
                index = tuple(int(i) for i in np.argwhere(bad)[0]) if shape else ()
                value = int(np.asarray(x)[index])
                pid = pid_for_message(state)
                at = f"element {list(index)} of the {list(shape)} tile" if shape else "the value"
                raise AssumptionError(
                    f"{state.where(loc)}: {at} is {value}, which breaks the declared {what} "
                    f"(program {pid})",
                    loc=loc, program_id=pid, index=index, value=value,
                )
        env[r] = x

    return step


@_handles(O.BarrierOp)
def _barrier(c: Compiler, op: O.BarrierOp) -> Step:
    return lambda env: None


# ------------------------------------------------------------------------------- element-wise


@_handles(O.BinaryOp)
def _binary(c: Compiler, op: O.BinaryOp) -> Step:
    return _binop(c, op, make_binary(op.kind, element_of(op.operands[0].type)))


@_handles(O.CmpOp)
def _cmp(c: Compiler, op: O.CmpOp) -> Step:
    return _binop(c, op, make_cmp(op.predicate, element_of(op.operands[0].type)))


@_handles(O.UnaryOp)
def _unary(c: Compiler, op: O.UnaryOp) -> Step:
    return _unop(c, op, make_unary(op.kind, element_of(op.operands[0].type)))


@_handles(O.CastOp)
def _cast(c: Compiler, op: O.CastOp) -> Step:
    f = make_cast(op.kind, element_of(op.operands[0].type), element_of(op.results[0].type))
    return _unop(c, op, f)


@_handles(O.FmaOp)
def _fma(c: Compiler, op: O.FmaOp) -> Step:
    f = make_fma(element_of(op.results[0].type))
    a, b, d = (c.slot(v) for v in op.operands)
    r = c.slot(op.results[0])

    def step(env: Env) -> None:
        env[r] = f(env[a], env[b], env[d])

    return step


@_handles(O.SelectOp)
def _select(c: Compiler, op: O.SelectOp) -> Step:
    k, a, b = (c.slot(v) for v in op.operands)
    r = c.slot(op.results[0])

    def step(env: Env) -> None:
        cond = env[k]
        if isinstance(cond, np.ndarray):
            env[r] = _scalarize(np.where(cond, env[a], env[b]))
        else:
            env[r] = env[a] if cond else env[b]

    return step


@_handles(O.AddPtrOp)
def _addptr(c: Compiler, op: O.AddPtrOp) -> Step:
    pointee = element_of(op.results[0].type).pointee  # type: ignore[union-attr]
    size = np.int64(pointee.bytes)

    def addptr(p: Any, off: Any) -> Any:
        return _scalarize(p + np.asarray(off).astype(np.int64) * size)

    return _binop(c, op, addptr)


# ------------------------------------------------------------------------------- tile compute


def _reducer(kind: str, t: IRType) -> Callable[[Any, int], Any]:
    e = element_of(t)
    dt = value_dtype(t)
    low = isinstance(e, ScalarType) and (e.name == "f16" or is_bf16(e))
    if kind in ("add", "fadd"):
        if low:  # f16/bf16 sums accumulate in float32, rounded once
            def add(x: Any, axis: int) -> Any:
                s = np.add.reduce(np.asarray(x, np.float32), axis=axis)
                return round_bf16(s) if is_bf16(e) else s.astype(dt)
            return add
        return lambda x, axis: np.add.reduce(x, axis=axis, dtype=dt)
    if kind in ("smax", "smin"):
        return np.max if kind == "smax" else np.min  # type: ignore[return-value]
    if kind in ("umax", "umin"):
        f = np.max if kind == "umax" else np.min
        return lambda x, axis: np.asarray(f(unsigned(np.asarray(x)), axis=axis)).view(dt)
    if kind in ("fmax", "fmin"):
        g = np.fmax if kind == "fmax" else np.fmin
        return lambda x, axis: g.reduce(x, axis=axis)
    raise InterpreterError(f"unknown reduction {kind!r}")


@_handles(O.ReduceOp)
def _reduce(c: Compiler, op: O.ReduceOp) -> Step:
    f = _reducer(op.kind, op.operands[0].type)
    axis = op.axis
    return _unop(c, op, lambda x: _scalarize(np.asarray(f(x, axis))))


@_handles(O.DotOp)
def _dot(c: Compiler, op: O.DotOp) -> Step:
    a, b, acc = (c.slot(v) for v in op.operands[:3])
    use_acc = c.slot(op.operands[3]) if len(op.operands) > 3 else None
    r = c.slot(op.results[0])
    rt = op.results[0].type
    out = value_dtype(rt)
    ea = element_of(op.operands[0].type)
    integer = isinstance(ea, ScalarType) and ea.is_int
    work = np.dtype(np.int64) if integer else np.dtype(np.float64) if out == np.float64 else np.dtype(np.float32)
    tf32 = op.precision == "tf32" and isinstance(ea, ScalarType) and ea.name == "f32"
    bf = is_bf16(rt)

    def step(env: Env) -> None:
        x = np.asarray(env[a], dtype=work)
        y = np.asarray(env[b], dtype=work)
        if tf32:
            x, y = round_tf32(x), round_tf32(y)
        res = np.matmul(x, y)
        if use_acc is None or env[use_acc]:
            res = res + np.asarray(env[acc], dtype=work)
        res = res.astype(out)
        env[r] = round_bf16(res) if bf else res

    return step


@_handles(O.DotWaitOp)
def _dot_wait(c: Compiler, op: O.DotWaitOp) -> Step:
    """Dots complete at once here: the tile itself, or zeros where `valid` is false."""
    src, r = c.slot(op.operands[0]), c.slot(op.results[0])
    valid = c.slot(op.operands[1]) if len(op.operands) > 1 else None
    zeros = _const_value(op.results[0].type, 0)

    def step(env: Env) -> None:
        env[r] = env[src] if valid is None or env[valid] else zeros

    return step


_HANDLERS[O.LoadOp] = lambda c, op: compile_load(op, c.slot, c.state)
_HANDLERS[O.StoreOp] = lambda c, op: compile_store(op, c.slot, c.state)
_HANDLERS[O.AtomicRMWOp] = lambda c, op: compile_atomic_rmw(op, c.slot, c.state)
_HANDLERS[O.AtomicCASOp] = lambda c, op: compile_atomic_cas(op, c.slot, c.state)


# ------------------------------------------------------------------------------- control flow


def _store_results(env: Env, slots: list[int], values: list[Any]) -> None:
    for s, v in zip(slots, values):
        env[s] = v


@_handles(O.ForOp)
def _for(c: Compiler, op: O.ForOp) -> Step:
    lb, ub, st = (c.slot(v) for v in op.operands[:3])
    inits = [c.slot(v) for v in op.operands[3:]]
    results = [c.slot(v) for v in op.results]
    iv_type = value_dtype(op.operands[0].type).type
    body = c.block(op.body)
    state, loc = c.state, op.loc

    def step(env: Env) -> None:
        lo, hi, s = int(env[lb]), int(env[ub]), int(env[st])
        values = [env[i] for i in inits]
        if lo < hi and s <= 0:
            raise InterpreterError(f"{state.where(loc)}: for loop step {s} is not positive (program {state.pid})")
        iv = lo
        while iv < hi:
            values = body.run(env, [iv_type(iv), *values])
            iv += s
        _store_results(env, results, values)

    return step


@_handles(O.IfOp)
def _if(c: Compiler, op: O.IfOp) -> Step:
    k = c.slot(op.operands[0])
    then, other = c.block(op.then_block), c.block(op.else_block)
    results = [c.slot(v) for v in op.results]

    def step(env: Env) -> None:
        _store_results(env, results, (then if env[k] else other).run(env, []))

    return step


@_handles(O.WhileOp)
def _while(c: Compiler, op: O.WhileOp) -> Step:
    inits = [c.slot(v) for v in op.operands]
    before, after = c.block(op.before), c.block(op.after)
    results = [c.slot(v) for v in op.results]

    def step(env: Env) -> None:
        values = [env[i] for i in inits]
        while True:
            cond, *carried = before.run(env, values)
            if not cond:
                break
            values = after.run(env, carried)
        _store_results(env, results, carried)

    return step
