"""IR types: scalars without sign, pointers with an address space, tiles with an optional layout.

Signedness is not a property of IR types: the operations say it (sdiv/udiv, slt/ult, sext/zext).
All types are frozen and hashable; a tile's `layout` is None until tc-opt assigns one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import attrs

if TYPE_CHECKING:
    from .layouts import Layout

_BITS = {
    "i1": 1,
    "i8": 8,
    "i16": 16,
    "i32": 32,
    "i64": 64,
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "f64": 64,
}

GLOBAL = 1  # address space of global memory
SHARED = 3  # address space of shared memory


@attrs.frozen
class ScalarType:
    """i1, i8, i16, i32, i64, f16, bf16, f32 or f64."""

    name: str = attrs.field()

    @name.validator
    def _check(self, _a: object, value: str) -> None:
        if value not in _BITS:
            raise ValueError(f"unknown IR scalar type {value!r}")

    @property
    def bits(self) -> int:
        return _BITS[self.name]

    @property
    def is_int(self) -> bool:
        return self.name.startswith("i")

    @property
    def is_float(self) -> bool:
        return not self.is_int

    @property
    def bytes(self) -> int:
        """Storage size in bytes (i1 is stored as one byte)."""
        return max(1, self.bits // 8)

    def __str__(self) -> str:
        return self.name


@attrs.frozen
class PointerType:
    """A pointer to `pointee` in `address_space` (1 global, 3 shared). Stored as 64 bits."""

    pointee: ScalarType | PointerType
    address_space: int = GLOBAL

    @property
    def bits(self) -> int:
        return 64

    @property
    def bytes(self) -> int:
        return 8

    def __str__(self) -> str:
        if self.address_space == GLOBAL:
            return f"ptr<{self.pointee}>"
        return f"ptr<{self.pointee}, {self.address_space}>"


ElementType = Union[ScalarType, PointerType]


@attrs.frozen
class TileType:
    """A statically shaped tile of scalars or pointers; `layout` says how threads hold it (GPU level)."""

    shape: tuple[int, ...]
    element: ElementType
    layout: Layout | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def storage_numel(self) -> int:
        """Elements a shared buffer of this type spans: numel, but where a swizzled layout cuts
        the contiguous dimension into panels of 16 * max_phase bytes and the last panel is
        partial (176 halves in panels of 64), every panel is stored whole (the hardware's
        swizzle of wgmma operands and TMA copies has rows of the panel's width)."""
        from .layouts import Shared

        lay = self.layout
        n = self.numel
        if not isinstance(lay, Shared) or lay.vec <= 1 or lay.max_phase <= 1 or len(lay.order) < 2 or n == 0 \
                or not isinstance(self.element, ScalarType):
            return n
        panel = 16 * lay.max_phase * 8 // self.element.bits
        fast = self.shape[lay.order[0]]
        if fast <= panel or fast % panel == 0:
            return n
        return n // fast * (-(-fast // panel) * panel)

    def with_layout(self, layout: Layout | None) -> TileType:
        return TileType(self.shape, self.element, layout)

    def __str__(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        text = f"{dims}x{self.element}" if self.shape else str(self.element)
        if self.layout is not None:
            return f"tile<{text}, {self.layout}>"
        return f"tile<{text}>"


IRType = Union[ScalarType, PointerType, TileType]

I1 = ScalarType("i1")
I8 = ScalarType("i8")
I16 = ScalarType("i16")
I32 = ScalarType("i32")
I64 = ScalarType("i64")
F16 = ScalarType("f16")
BF16 = ScalarType("bf16")
F32 = ScalarType("f32")
F64 = ScalarType("f64")


def element_of(t: IRType) -> ElementType:
    """The element type of a tile, or the type itself."""
    return t.element if isinstance(t, TileType) else t


def shape_of(t: IRType) -> tuple[int, ...]:
    """The shape of a tile, () for scalars and pointers."""
    return t.shape if isinstance(t, TileType) else ()


def like(t: IRType, element: ElementType) -> IRType:
    """A type of `t`'s shape and layout with another element type."""
    if isinstance(t, TileType):
        return TileType(t.shape, element, t.layout)
    return element
