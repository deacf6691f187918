"""Addresses in swizzled shared memory: a `SharedView` is a tile of a local_alloc buffer (or a
subview / permuted view of one) and maps element coordinates to shared addresses.

Layout `Shared(vec, per_phase, max_phase, order)`: dimension order[0] is contiguous; along it the
elements form chunks of `vec` (16 bytes); in row r (the coordinate along order[1]) chunk c is
stored at chunk position c XOR ((r / per_phase) % max_phase). Rows are dense otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import llvmlite.ir as ir
from tc_ir.layouts import Shared
from tc_ir.types import TileType

from .context import Ctx, SharedTile
from .llvm_types import I32, memory_type

Coord = "ir.Value | int"


def dense_strides(shape: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    out = [0] * len(shape)
    s = 1
    for d in order:
        out[d] = s
        s *= shape[d]
    return tuple(out)


def _log2(n: int) -> int:
    return n.bit_length() - 1


@attrs.define
class SharedView(SharedTile):
    """`ptr` points at element (0, ..., 0) before swizzling; `strides` are in elements."""

    strides: tuple[int, ...]
    layout: Shared

    @classmethod
    def of(cls, ptr: ir.Value, t: TileType) -> SharedView:
        lay = t.layout
        assert isinstance(lay, Shared)
        return cls(ptr, t.shape, t.element, dense_strides(t.shape, lay.order), lay)

    @property
    def swizzled(self) -> bool:
        return self.layout.vec > 1 and self.layout.max_phase > 1

    def subview(self, ctx: Ctx, index: ir.Value) -> SharedView:
        """Slice `index` along dimension 0."""
        b = ctx.b
        off = b.mul(index, ir.Constant(I32, self.strides[0]))
        ptr = b.gep(self.ptr, [off], inbounds=True, source_etype=memory_type(self.element))
        order = tuple(d - 1 for d in self.layout.order if d != 0)
        lay = Shared(self.layout.vec, self.layout.per_phase, self.layout.max_phase, order)
        return SharedView(ptr, self.shape[1:], self.element, self.strides[1:], lay)

    def permute(self, perm: Sequence[int], layout: Shared) -> SharedView:
        return SharedView(
            self.ptr, tuple(self.shape[p] for p in perm), self.element, tuple(self.strides[p] for p in perm), layout
        )

    def offset(self, ctx: Ctx, coords: Sequence[ir.Value | int]) -> ir.Value:
        """The element offset (i32) of `coords` from `ptr`, swizzle applied."""
        b = ctx.b

        def val(x: ir.Value | int) -> ir.Value:
            return ir.Constant(I32, x) if isinstance(x, int) else x

        total: ir.Value | int = 0
        fast = self.layout.order[0]
        for d, (c, s) in enumerate(zip(coords, self.strides)):
            if d == fast and self.swizzled:
                continue
            if isinstance(c, int):
                term: ir.Value | int = c * s
            else:
                term = b.mul(c, ir.Constant(I32, s)) if s != 1 else c
            if isinstance(total, int) and isinstance(term, int):
                total += term
            elif isinstance(total, int) and total == 0:
                total = term
            else:
                total = b.add(val(total), val(term))
        if self.swizzled:
            lay = self.layout
            row = coords[lay.order[1]]
            col = coords[fast]
            phase = b.and_(b.lshr(val(row), ir.Constant(I32, _log2(lay.per_phase))), ir.Constant(I32, lay.max_phase - 1))
            chunk = b.lshr(val(col), ir.Constant(I32, _log2(lay.vec)))
            inner = b.and_(val(col), ir.Constant(I32, lay.vec - 1))
            sw = b.or_(b.shl(b.xor(chunk, phase), ir.Constant(I32, _log2(lay.vec))), inner)
            total = b.add(val(total), sw)
        return val(total)

    def address(self, ctx: Ctx, coords: Sequence[ir.Value | int]) -> ir.Value:
        off = self.offset(ctx, coords)
        return ctx.b.gep(self.ptr, [off], inbounds=True, source_etype=memory_type(self.element))
