"""Addresses in swizzled shared memory: a `SharedView` is a tile of a local_alloc buffer (or a
subview / permuted view of one) and maps element coordinates to shared addresses.

Layout `Shared(vec, per_phase, max_phase, order)`: dimension order[0] is contiguous; along it the
elements form chunks of `vec` (16 bytes); in row r (the coordinate along order[1]) chunk c is
stored at chunk position c XOR ((r / per_phase) % max_phase). Rows are dense otherwise.

A swizzled row is at most W = 16 * max_phase bytes (the swizzle's period: 32, 64 or 128). A longer
one is cut into panels of W bytes: the tile is stored as panels (each a dense [rows, W] block),
one after the other. With tiles 1024-byte aligned, this is exactly the hardware's 32/64/128-byte
swizzle of wgmma's shared-memory operands (a row of W bytes at r * W has address bits 7..9 equal
to r / per_phase), so the same buffers serve ldmatrix, cp.async and wgmma.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import llvmlite.ir as ir
from tc_ir.layouts import Shared
from tc_ir.types import TileType

from .context import Ctx, SharedTile
from .llvm_types import I32, bits_of, memory_type

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


def panel_elements(shape: Sequence[int], layout: Shared, elem_bytes: int) -> int:
    """Elements per panel along layout.order[0]; 0 when the rows are not cut into panels."""
    if layout.vec <= 1 or layout.max_phase <= 1:
        return 0
    width = 16 * layout.max_phase // elem_bytes
    return width if shape[layout.order[0]] > width else 0


@attrs.define
class SharedView(SharedTile):
    """`ptr` points at element (0, ..., 0) before swizzling; `strides` are in elements (along
    order[1] the row pitch: the panel width when the rows are cut into panels). `panel` is the
    panel width in elements (0: none) and `panel_stride` the elements from one panel to the next."""

    strides: tuple[int, ...]
    layout: Shared
    panel: int = 0
    panel_stride: int = 0

    @classmethod
    def of(cls, ptr: ir.Value, t: TileType) -> SharedView:
        lay = t.layout
        assert isinstance(lay, Shared)
        panel = panel_elements(t.shape, lay, bits_of(t.element) // 8)
        if not panel or len(lay.order) < 2:
            return cls(ptr, t.shape, t.element, dense_strides(t.shape, lay.order), lay)
        strides = [0] * len(t.shape)
        fast, row = lay.order[0], lay.order[1]
        strides[fast], strides[row] = 1, panel
        s = -(-t.shape[fast] // panel) * panel * t.shape[row]  # (a partial last panel is stored whole)
        for d in lay.order[2:]:
            strides[d] = s
            s *= t.shape[d]
        return cls(ptr, t.shape, t.element, tuple(strides), lay, panel, t.shape[row] * panel)

    @property
    def swizzled(self) -> bool:
        return self.layout.vec > 1 and self.layout.max_phase > 1

    @property
    def swizzle_bytes(self) -> int:
        """The swizzle's period in bytes (32, 64 or 128; 0 when not swizzled)."""
        return 16 * self.layout.max_phase if self.swizzled else 0

    def subview(self, ctx: Ctx, index: ir.Value) -> SharedView:
        """Slice `index` along dimension 0."""
        b = ctx.b
        off = b.mul(index, ir.Constant(I32, self.strides[0]))
        ptr = b.gep(self.ptr, [off], inbounds=True, source_etype=memory_type(self.element))
        order = tuple(d - 1 for d in self.layout.order if d != 0)
        lay = Shared(self.layout.vec, self.layout.per_phase, self.layout.max_phase, order)
        return SharedView(ptr, self.shape[1:], self.element, self.strides[1:], lay, self.panel, self.panel_stride)

    def permute(self, perm: Sequence[int], layout: Shared) -> SharedView:
        return SharedView(
            self.ptr, tuple(self.shape[p] for p in perm), self.element, tuple(self.strides[p] for p in perm), layout,
            self.panel, self.panel_stride,
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
            if self.panel:  # the panel, then the column within it
                if isinstance(col, int):
                    total = b.add(val(total), ir.Constant(I32, col // self.panel * self.panel_stride))
                    col = col % self.panel
                else:
                    which = b.lshr(col, ir.Constant(I32, _log2(self.panel)))
                    total = b.add(val(total), b.mul(which, ir.Constant(I32, self.panel_stride)))
                    col = b.and_(col, ir.Constant(I32, self.panel - 1))
            phase = b.and_(b.lshr(val(row), ir.Constant(I32, _log2(lay.per_phase))), ir.Constant(I32, lay.max_phase - 1))
            chunk = b.lshr(val(col), ir.Constant(I32, _log2(lay.vec)))
            inner = b.and_(val(col), ir.Constant(I32, lay.vec - 1))
            sw = b.or_(b.shl(b.xor(chunk, phase), ir.Constant(I32, _log2(lay.vec))), inner)
            total = b.add(val(total), sw)
        return val(total)

    def address(self, ctx: Ctx, coords: Sequence[ir.Value | int]) -> ir.Value:
        off = self.offset(ctx, coords)
        return ctx.b.gep(self.ptr, [off], inbounds=True, source_etype=memory_type(self.element))
