"""Alignment / contiguity / constancy analysis (the original's `align` pass, per dimension).

For every integer or pointer value and every dimension d:
- contiguity[d]: the tile splits along d into aligned runs of this many consecutive integers
  (consecutive elements for pointers);
- divisibility[d]: the first value of each run is a multiple of this (in bytes for pointers);
- constancy[d]: the tile splits along d into aligned runs of this many equal values.
All three are powers of two. Scalars are rank-1 facts of size 1. Loop-carried values are solved to
a fixpoint by meeting (gcd) the values flowing in.
"""

from __future__ import annotations

import math

import attrs
from tc_ir.ops import (
    AddPtrOp,
    AssumeOp,
    BinaryOp,
    Block,
    BroadcastOp,
    CastOp,
    CmpOp,
    ConstantOp,
    ConvertLayoutOp,
    ExpandDimsOp,
    ForOp,
    Function,
    IfOp,
    MakeRangeOp,
    Operation,
    SelectOp,
    SplatOp,
    TransOp,
    Value,
    WhileOp,
    YieldOp,
)
from tc_ir.types import IRType, PointerType, TileType, shape_of

MAX_DIV = 1 << 30


def pow2_divisor(n: int) -> int:
    """The largest power of two dividing n (MAX_DIV for 0)."""
    if n == 0:
        return MAX_DIV
    return min(MAX_DIV, abs(n) & -abs(n))


@attrs.frozen
class AxisInfo:
    """What the analysis knows of one value: contiguity, divisibility and constancy per dimension
    (see the module docstring), and the scalar or splat constant `value` when known."""

    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    constancy: tuple[int, ...]
    value: int | None = None  # the scalar/splat constant, when known

    @property
    def rank(self) -> int:
        return len(self.contiguity)


def _dims(t: IRType) -> tuple[int, ...]:
    s = shape_of(t)
    return s if s else (1,)


def unknown(t: IRType) -> AxisInfo:
    n = len(_dims(t))
    return AxisInfo((1,) * n, (1,) * n, (1,) * n)


def uniform(t: IRType, div: int, value: int | None = None) -> AxisInfo:
    """A tile (or scalar) where every element is the same value of divisibility `div`."""
    d = _dims(t)
    return AxisInfo((1,) * len(d), (div,) * len(d), d, value)


def assumed(s: AxisInfo, multiple_of: int, aligned: int) -> AxisInfo:
    """`s` with the facts of a tc.assume: every element is a multiple of both numbers, so the
    start of each run is too (the runs themselves are unchanged)."""
    fact = max(pow2_divisor(multiple_of), pow2_divisor(aligned))
    return AxisInfo(s.contiguity, tuple(max(d, fact) for d in s.divisibility), s.constancy, s.value)


def meet(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    g = math.gcd
    return AxisInfo(
        tuple(g(x, y) for x, y in zip(a.contiguity, b.contiguity)),
        tuple(g(x, y) for x, y in zip(a.divisibility, b.divisibility)),
        tuple(g(x, y) for x, y in zip(a.constancy, b.constancy)),
        a.value if a.value == b.value else None,
    )


class AxisAnalysis:
    """Runs the analysis over a function; `info(v)` answers for any value."""

    def __init__(self, function: Function) -> None:
        self.function = function
        self.facts: dict[Value, AxisInfo] = {}
        for i, arg in enumerate(function.args):
            a = function.arg_attrs[i] if i < len(function.arg_attrs) else {}
            if isinstance(arg.type, PointerType):
                div = int(a.get("aligned", arg.type.pointee.bytes))
            else:
                div = int(a.get("multiple_of", 16 if a.get("divisible_by_16") else 1))
            self.facts[arg] = uniform(arg.type, pow2_divisor(div), 1 if a.get("equal_to_1") else None)
        self._block(function.body)

    def info(self, v: Value) -> AxisInfo:
        """The facts about `v` (nothing known, all ones, where the analysis has none)."""
        f = self.facts.get(v)
        return f if f is not None else unknown(v.type)

    # -------------------------------------------------------------------------------- walking

    def _block(self, block: Block) -> None:
        for op in block.ops:
            if isinstance(op, ForOp):
                self._for(op)
            elif isinstance(op, IfOp):
                for r in op.regions:
                    self._block(r)
                self._merge_yields(op, [op.then_block, op.else_block])
            elif isinstance(op, WhileOp):
                self._while(op)
            else:
                for r in op.regions:
                    self._block(r)
                for res in op.results:
                    self.facts[res] = self._visit(op, res)

    def _merge_yields(self, op: Operation, blocks: list[Block]) -> None:
        for i, res in enumerate(op.results):
            acc: AxisInfo | None = None
            for b in blocks:
                t = b.terminator
                if isinstance(t, YieldOp) and i < len(t.operands):
                    x = self.info(t.operands[i])
                    acc = x if acc is None else meet(acc, x)
            self.facts[res] = acc if acc is not None else unknown(res.type)

    def _for(self, op: ForOp) -> None:
        lb, _ub, step = (self.info(v) for v in op.operands[:3])
        body = op.body
        iv = body.args[0]
        self.facts[iv] = AxisInfo((1,), (math.gcd(lb.divisibility[0], step.divisibility[0]),), (1,))
        carried = body.args[1:]
        for a, init in zip(carried, op.inits):
            self.facts[a] = self.info(init)
        for _ in range(6):
            self._block(body)
            y = body.terminator
            changed = False
            if isinstance(y, YieldOp):
                for a, v in zip(carried, y.operands):
                    new = meet(self.facts[a], self.info(v))
                    if new != self.facts[a]:
                        self.facts[a] = new
                        changed = True
            if not changed:
                break
        else:
            for a in carried:
                self.facts[a] = unknown(a.type)
            self._block(body)
        for res, a in zip(op.results, carried):
            self.facts[res] = self.facts[a]

    def _while(self, op: WhileOp) -> None:
        for a in op.before.args + op.after.args:
            self.facts[a] = unknown(a.type)
        for r in op.regions:
            self._block(r)
        for res in op.results:
            self.facts[res] = unknown(res.type)

    # --------------------------------------------------------------------------------- rules

    def _visit(self, op: Operation, res: Value) -> AxisInfo:
        t = res.type
        if isinstance(op, ConstantOp):
            v = op.value
            if isinstance(v, bool) or isinstance(v, int):
                return uniform(t, pow2_divisor(int(v)), int(v))
            return uniform(t, 1)
        if isinstance(op, MakeRangeOp):
            n = op.end - op.start
            return AxisInfo((n,), (pow2_divisor(op.start),), (1,))
        if isinstance(op, SplatOp):
            s = self.info(op.operands[0])
            return uniform(t, s.divisibility[0], s.value)
        if isinstance(op, BroadcastOp):
            s = self.info(op.operands[0])
            src_shape = _dims(op.operands[0].type)
            dst_shape = _dims(t)
            cs: list[int] = []
            ds: list[int] = []
            ks: list[int] = []
            for i, size in enumerate(dst_shape):
                stretched = src_shape[i] == 1 and size != 1
                cs.append(1 if stretched else s.contiguity[i])
                ds.append(s.divisibility[i])
                ks.append(size if stretched else s.constancy[i])
            return AxisInfo(tuple(cs), tuple(ds), tuple(ks), s.value)
        if isinstance(op, ExpandDimsOp):
            s = self.info(op.operands[0])
            if not shape_of(op.operands[0].type):
                return uniform(t, s.divisibility[0], s.value)
            new_div = min(s.divisibility) if all(c == 1 for c in s.contiguity) else 1
            ax = op.axis
            return AxisInfo(
                s.contiguity[:ax] + (1,) + s.contiguity[ax:],
                s.divisibility[:ax] + (new_div,) + s.divisibility[ax:],
                s.constancy[:ax] + (1,) + s.constancy[ax:],
                s.value,
            )
        if isinstance(op, TransOp):
            s = self.info(op.operands[0])
            p = op.perm
            return AxisInfo(
                tuple(s.contiguity[i] for i in p),
                tuple(s.divisibility[i] for i in p),
                tuple(s.constancy[i] for i in p),
                s.value,
            )
        if isinstance(op, ConvertLayoutOp):
            return self.info(op.operands[0])
        if isinstance(op, AssumeOp):
            return assumed(self.info(op.operands[0]), op.multiple_of, op.aligned)
        if isinstance(op, BinaryOp):
            return self._binary(op, t)
        if isinstance(op, AddPtrOp):
            pinfo, oinfo = self.info(op.operands[0]), self.info(op.operands[1])
            pt = op.operands[0].type
            elem = pt.element if isinstance(pt, TileType) else pt
            eb = elem.pointee.bytes if isinstance(elem, PointerType) else 1
            return self._add(pinfo, oinfo, t, scale_b=eb)
        if isinstance(op, CmpOp):
            return self._cmp(op, t)
        if isinstance(op, SelectOp):
            ci, ai, bi = (self.info(v) for v in op.operands)
            n = len(ai.contiguity)
            if ci.rank != n:
                ci = uniform(t, 1)
            g = math.gcd
            return AxisInfo(
                tuple(min(g(ai.contiguity[i], ci.constancy[i]), g(bi.contiguity[i], ci.constancy[i])) for i in range(n)),
                tuple(g(ai.divisibility[i], bi.divisibility[i]) for i in range(n)),
                tuple(g(g(ai.constancy[i], bi.constancy[i]), ci.constancy[i]) for i in range(n)),
            )
        if isinstance(op, CastOp):
            s = self.info(op.operands[0])
            if op.kind in ("sext", "zext", "trunc", "bitcast", "ptrtoint", "inttoptr"):
                return AxisInfo(s.contiguity, (1,) * s.rank if op.kind == "trunc" else s.divisibility, s.constancy)
            return AxisInfo((1,) * s.rank, (1,) * s.rank, s.constancy)
        if op.operands and not op.HAS_SIDE_EFFECTS:
            infos = [self.info(v) for v in op.operands if _dims(v.type) == _dims(t)]
            if infos and len(infos) == len(op.operands):
                kk = infos[0].constancy
                for x in infos[1:]:
                    kk = tuple(math.gcd(p, q) for p, q in zip(kk, x.constancy))
                return AxisInfo((1,) * len(kk), (1,) * len(kk), kk)
        return unknown(t)

    def _add(self, a: AxisInfo, b: AxisInfo, t: IRType, scale_b: int = 1, sub: bool = False) -> AxisInfo:
        n = len(a.contiguity)
        g = math.gcd
        c = []
        for i in range(n):
            x = g(a.contiguity[i], b.constancy[i])
            if not sub:
                x = max(x, g(a.constancy[i], b.contiguity[i]))
            c.append(x)
        d = tuple(min(MAX_DIV, g(a.divisibility[i], b.divisibility[i] * scale_b)) for i in range(n))
        k = tuple(g(a.constancy[i], b.constancy[i]) for i in range(n))
        value = None
        if a.value is not None and b.value is not None and scale_b == 1:
            value = a.value - b.value if sub else a.value + b.value
        return AxisInfo(tuple(c), d, k, value)

    def _binary(self, op: BinaryOp, t: IRType) -> AxisInfo:
        a, b = self.info(op.operands[0]), self.info(op.operands[1])
        n = len(a.contiguity)
        g = math.gcd
        k = tuple(g(a.constancy[i], b.constancy[i]) for i in range(n))
        ones = (1,) * n
        kind = op.kind
        if kind == "add":
            return self._add(a, b, t)
        if kind == "sub":
            return self._add(a, b, t, sub=True)
        if kind == "mul":
            if b.value == 1:
                return a
            if a.value == 1:
                return b
            da = [a.divisibility[i] if a.contiguity[i] == 1 else 1 for i in range(n)]
            db = [b.divisibility[i] if b.contiguity[i] == 1 else 1 for i in range(n)]
            d = tuple(min(MAX_DIV, da[i] * db[i]) for i in range(n))
            v = a.value * b.value if a.value is not None and b.value is not None else None
            return AxisInfo(ones, d, k, v)
        if kind in ("srem", "urem") and b.value is not None and b.value > 0 and pow2_divisor(b.value) == b.value:
            m = b.value
            return AxisInfo(
                tuple(min(g(a.contiguity[i], m), m) for i in range(n)),
                tuple(g(a.divisibility[i], m) for i in range(n)),
                tuple(max(k[i], g(a.constancy[i], m)) for i in range(n)),
            )
        if kind in ("srem", "urem") and b.value is None:
            # x % m for a runtime m that is one value along dimension i and a multiple of
            # b.divisibility[i] (M specialized as divisible by 16, say): a run of L = min(contiguity
            # of x, divisibility of x, divisibility of m) consecutive values of x starting at a
            # multiple of L holds no multiple of m past its start, so x % m is consecutive there
            # too, from a multiple of L (for x >= 0, as in `(pid * BLOCK + 0 ... BLOCK) % M`;
            # Triton assumes the same). Where x and m are each a multiple of their divisibility
            # element by element, x % m is a multiple of their gcd.
            shape = _dims(t)
            cont = tuple(min(a.contiguity[i], a.divisibility[i], b.divisibility[i])
                         if b.constancy[i] >= shape[i] else 1 for i in range(n))
            div = tuple(cont[i] if cont[i] > 1 else
                        g(a.divisibility[i], b.divisibility[i]) if a.contiguity[i] == b.contiguity[i] == 1
                        else 1 for i in range(n))
            return AxisInfo(cont, div, k)
        if kind in ("sdiv", "udiv") and b.value is not None and b.value > 0 and pow2_divisor(b.value) == b.value:
            m = b.value
            return AxisInfo(
                ones,
                tuple(max(1, a.divisibility[i] // m) if a.contiguity[i] == 1 else 1 for i in range(n)),
                tuple(max(k[i], min(g(a.contiguity[i], m), g(a.divisibility[i], m))) for i in range(n)),
            )
        if kind == "shl" and b.value is not None and 0 <= b.value < 31:
            return AxisInfo(
                ones,
                tuple(min(MAX_DIV, (a.divisibility[i] if a.contiguity[i] == 1 else 1) << b.value) for i in range(n)),
                k,
            )
        return AxisInfo(ones, ones, k)

    def _cmp(self, op: CmpOp, t: IRType) -> AxisInfo:
        a, b = self.info(op.operands[0]), self.info(op.operands[1])
        n = len(a.contiguity)
        g = math.gcd
        k = [g(a.constancy[i], b.constancy[i]) for i in range(n)]
        if op.predicate in ("slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"):
            shape = _dims(t)
            for i in range(n):
                # x contiguous in aligned runs compared with a value constant along the run: the
                # result is constant on runs where both the start of x and the bound are multiples.
                if b.constancy[i] >= shape[i] and op.predicate in ("slt", "sge", "ult", "uge"):
                    k[i] = max(k[i], g(a.contiguity[i], g(a.divisibility[i], b.divisibility[i])))
                if a.constancy[i] >= shape[i] and op.predicate in ("sgt", "sle", "ugt", "ule"):
                    k[i] = max(k[i], g(b.contiguity[i], g(b.divisibility[i], a.divisibility[i])))
        return AxisInfo((1,) * n, (1,) * n, tuple(k))
