"""C types of the front end -> IR types. Signedness is dropped here; the ops keep it."""

from __future__ import annotations

from tc_lang import types as C
from tc_lang.diagnostics import Location

from .. import types as T
from .errors import fail

_SCALARS = {
    "bool": T.I1,
    "int8": T.I8,
    "uint8": T.I8,
    "int16": T.I16,
    "uint16": T.I16,
    "int32": T.I32,
    "uint32": T.I32,
    "int64": T.I64,
    "uint64": T.I64,
    "fp16": T.F16,
    "bf16": T.BF16,
    "fp32": T.F32,
    "fp64": T.F64,
}


def ir_element(t: C.ElementType, loc: Location | None = None) -> T.ElementType:
    """bool->i1, char/int8/uint8->i8 ... half->f16, bf16, float->f32, double->f64, T*->ptr<T>,
    void*->ptr<i8>."""
    if isinstance(t, C.PointerType):
        if isinstance(t.pointee, C.ScalarType) and t.pointee.is_void:
            # void* (an untyped kernel argument, cast before use) is a byte pointer, as in LLVM
            return T.PointerType(T.I8, t.address_space)
        return T.PointerType(ir_element(t.pointee, loc), t.address_space)
    if t.name not in _SCALARS:
        fail(f"a value of type '{t}' cannot be used here", loc)
    return _SCALARS[t.name]


def ir_scalar(t: C.ScalarType, loc: Location | None = None) -> T.ScalarType:
    e = ir_element(t, loc)
    assert isinstance(e, T.ScalarType)
    return e


def ir_type(t: C.Type, loc: Location | None = None) -> T.IRType:
    """The IR type of a C type (tiles keep their shape; layouts come later)."""
    if isinstance(t, C.TileType):
        return T.TileType(t.shape, ir_element(t.element, loc))
    return ir_element(t, loc)


def is_signed(t: C.Type) -> bool:
    """Whether integer elements of `t` are read as signed (bool and pointers are not)."""
    e = C.element_of(t)
    return isinstance(e, C.ScalarType) and e.is_integer and e.is_signed and not e.is_bool


def is_float(t: C.Type) -> bool:
    e = C.element_of(t)
    return isinstance(e, C.ScalarType) and e.is_float


def is_pointer(t: C.Type) -> bool:
    return isinstance(C.element_of(t), C.PointerType)


def size_of(t: C.ElementType) -> int:
    """Bytes of one element (bool counts as one byte, pointers as eight)."""
    if isinstance(t, C.PointerType):
        return 8
    return max(1, t.bits // 8)
