"""The types of Triton-C as the front end sees them: C scalars with their signedness, pointers and tiles.

Signedness lives here (and in the operations the IR lowering chooses from it); the IR's integer
types carry no sign. Promotion follows C, with half and bf16 ranked between long and float.
"""

from __future__ import annotations

from typing import Union

import attrs

# name -> (bits, is_integer, is_signed, promotion rank)
_SCALARS: dict[str, tuple[int, bool, bool, int]] = {
    "void": (0, False, False, -1),
    "bool": (1, True, False, 0),
    "int8": (8, True, True, 1),
    "uint8": (8, True, False, 1),
    "int16": (16, True, True, 2),
    "uint16": (16, True, False, 2),
    "int32": (32, True, True, 3),
    "uint32": (32, True, False, 3),
    "int64": (64, True, True, 4),
    "uint64": (64, True, False, 4),
    "fp16": (16, False, True, 5),
    "bf16": (16, False, True, 5),
    "fp32": (32, False, True, 6),
    "fp64": (64, False, True, 7),
}

# How each scalar is spelled in Triton-C source (the canonical spelling, for printing).
C_SPELLING: dict[str, str] = {
    "void": "void",
    "bool": "bool",
    "int8": "char",
    "uint8": "uint8",
    "int16": "short",
    "uint16": "uint16",
    "int32": "int",
    "uint32": "uint32",
    "int64": "long",
    "uint64": "uint64",
    "fp16": "half",
    "bf16": "bf16",
    "fp32": "float",
    "fp64": "double",
}


@attrs.frozen
class ScalarType:
    """A C scalar: bool, signed/unsigned integers of 8..64 bits, half, bf16, float, double, void."""

    name: str = attrs.field()

    @name.validator
    def _check(self, _a: object, value: str) -> None:
        if value not in _SCALARS:
            raise ValueError(f"unknown scalar type {value!r}")

    @property
    def bits(self) -> int:
        return _SCALARS[self.name][0]

    @property
    def is_integer(self) -> bool:
        """bool and the integer types."""
        return _SCALARS[self.name][1]

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @property
    def is_float(self) -> bool:
        return self.name in ("fp16", "bf16", "fp32", "fp64")

    @property
    def is_signed(self) -> bool:
        return _SCALARS[self.name][2]

    @property
    def is_void(self) -> bool:
        return self.name == "void"

    @property
    def rank(self) -> int:
        return _SCALARS[self.name][3]

    def __str__(self) -> str:
        return C_SPELLING[self.name]


@attrs.frozen
class PointerType:
    """A pointer to a scalar (or to a pointer). Address space 1 is global memory."""

    pointee: ScalarType | PointerType
    address_space: int = 1

    def __str__(self) -> str:
        return f"{self.pointee}*"


ElementType = Union[ScalarType, PointerType]


@attrs.frozen
class TileType:
    """A tile: a statically shaped multi-dimensional array of scalars or pointers."""

    shape: tuple[int, ...]
    element: ElementType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return f"{self.element}[{', '.join(str(d) for d in self.shape)}]"


Type = Union[ScalarType, PointerType, TileType]

VOID = ScalarType("void")
BOOL = ScalarType("bool")
INT8 = ScalarType("int8")
UINT8 = ScalarType("uint8")
INT16 = ScalarType("int16")
UINT16 = ScalarType("uint16")
INT32 = ScalarType("int32")
UINT32 = ScalarType("uint32")
INT64 = ScalarType("int64")
UINT64 = ScalarType("uint64")
FP16 = ScalarType("fp16")
BF16 = ScalarType("bf16")
FP32 = ScalarType("fp32")
FP64 = ScalarType("fp64")


def element_of(t: Type) -> ElementType:
    """The element type of a tile, or the type itself for a scalar or pointer."""
    return t.element if isinstance(t, TileType) else t


def shape_of(t: Type) -> tuple[int, ...]:
    """The shape of a tile, () for a scalar or pointer."""
    return t.shape if isinstance(t, TileType) else ()


def with_element(t: Type, element: ElementType) -> Type:
    """`t` with its element type replaced (a tile stays a tile of the same shape)."""
    return TileType(t.shape, element) if isinstance(t, TileType) else element


def with_shape(element: ElementType, shape: tuple[int, ...]) -> Type:
    """A tile of `shape`, or the element itself when shape is ()."""
    return TileType(shape, element) if shape else element
