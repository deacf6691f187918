"""How IR element types live in numpy: value dtypes, storage dtypes, wrap-around and rounding.

Values: i1 is bool, iN is intN (two's complement, wrapping), f16/f32/f64 are numpy floats, pointers
are int64 byte addresses. numpy has no bfloat16: bf16 *values* are float32 numbers that are always
exactly representable in bf16 (every op rounds its result to nearest even), and bf16 *memory* holds
the 16 high bits (uint16). Unsigned operations reinterpret the same bits through `unsigned()`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..types import ElementType, IRType, PointerType, ScalarType, TileType, element_of

_VALUE = {
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.float32),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
}
_STORAGE = dict(_VALUE, i1=np.dtype(np.uint8), bf16=np.dtype(np.uint16))
_UNSIGNED = {
    np.dtype(np.int8): np.dtype(np.uint8),
    np.dtype(np.int16): np.dtype(np.uint16),
    np.dtype(np.int32): np.dtype(np.uint32),
    np.dtype(np.int64): np.dtype(np.uint64),
    np.dtype(np.bool_): np.dtype(np.bool_),
}
PTR_DTYPE = np.dtype(np.int64)

Array = npt.NDArray[Any]


def value_dtype(t: IRType | ElementType) -> np.dtype[Any]:
    """The numpy dtype that holds values of `t` (its element, for tiles)."""
    e = element_of(t) if isinstance(t, TileType) else t
    if isinstance(e, PointerType):
        return PTR_DTYPE
    return _VALUE[e.name]


def storage_dtype(t: IRType | ElementType) -> np.dtype[Any]:
    """The numpy dtype of `t`'s elements in memory (bf16 as uint16 bits, i1 as one byte)."""
    e = element_of(t) if isinstance(t, TileType) else t
    if isinstance(e, PointerType):
        return PTR_DTYPE
    return _STORAGE[e.name]


def is_bf16(t: IRType | ElementType) -> bool:
    e = element_of(t) if isinstance(t, TileType) else t
    return isinstance(e, ScalarType) and e.name == "bf16"


def unsigned(a: Any) -> Any:
    """The same bits as the unsigned integer of the same width (a view, no copy)."""
    return a.view(_UNSIGNED[a.dtype])


def round_bf16(x: Any) -> Any:
    """float32 -> float32 rounded to the nearest bf16 (ties to even); NaN stays NaN."""
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    out = np.where(np.isnan(a), a, rounded.view(np.float32))
    return out[()] if out.ndim == 0 else out


def round_tf32(x: Any) -> Any:
    """float32 -> float32 with a 10-bit mantissa, rounded to nearest, ties away from zero
    (what cvt.rna.tf32.f32 does before a tf32 tensor-core mma)."""
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    out = np.where(np.isfinite(a), rounded.view(np.float32), a)
    return out[()] if out.ndim == 0 else out


def bf16_to_bits(x: Any) -> Any:
    """bf16 values (float32 holding bf16) -> uint16 memory bits."""
    a = np.asarray(x, dtype=np.float32)
    return (a.view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def bits_to_bf16(bits: Any) -> Any:
    """uint16 memory bits -> bf16 values (float32)."""
    b = np.asarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << np.uint32(16)).view(np.float32)


def wrap_int(value: int, bits: int) -> int:
    """A Python int wrapped to a signed `bits`-bit two's complement integer."""
    if bits == 1:
        return value & 1
    m = 1 << bits
    v = value % m
    return v - m if v >= m >> 1 else v


def scalar(value: Any, t: IRType | ElementType) -> Any:
    """A Python number as the numpy scalar of IR type `t` (ints wrap, bf16 rounds)."""
    dt = value_dtype(t)
    e = element_of(t) if isinstance(t, TileType) else t
    if dt == np.bool_:
        return np.bool_(bool(value))
    if dt.kind == "i":
        bits = 64 if isinstance(e, PointerType) else dt.itemsize * 8
        return dt.type(wrap_int(int(value), bits))
    v = dt.type(value)
    return round_bf16(v) if is_bf16(t) else v


def from_storage(raw: Any, t: IRType | ElementType) -> Any:
    """Memory elements (storage dtype) -> values."""
    if is_bf16(t):
        return bits_to_bf16(raw)
    dt = storage_dtype(t)
    if dt == np.uint8 and value_dtype(t) == np.bool_:
        return raw != 0
    return raw


def to_storage(values: Any, t: IRType | ElementType) -> Any:
    """Values -> memory elements (storage dtype)."""
    if is_bf16(t):
        return bf16_to_bits(values)
    return np.asarray(values).astype(storage_dtype(t), copy=False)
