"""IR element types as LLVM types (registers and memory), and constants of them."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import llvmlite.ir as ir
from tc_ir.types import ElementType, PointerType, ScalarType


class BFloatType(ir.Type):  # type: ignore[misc]
    """LLVM's bfloat (llvmlite has no class for it)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFloatType)

    def __hash__(self) -> int:
        return hash("bfloat")


I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
BF16 = BFloatType()
F32 = ir.FloatType()
F64 = ir.DoubleType()
GLOBAL_PTR = ir.PointerType(addrspace=1)
SHARED_PTR = ir.PointerType(addrspace=3)

_SCALARS: dict[str, ir.Type] = {
    "i1": I1, "i8": I8, "i16": I16, "i32": I32, "i64": I64,
    "f16": F16, "bf16": BF16, "f32": F32, "f64": F64,
}  # fmt: skip


def llvm_type(t: ElementType) -> ir.Type:
    """The register type of an element."""
    if isinstance(t, PointerType):
        return ir.PointerType(addrspace=t.address_space)
    return _SCALARS[t.name]


def memory_type(t: ElementType) -> ir.Type:
    """The in-memory type of an element (i1 is stored as a byte)."""
    if isinstance(t, ScalarType) and t.name == "i1":
        return I8
    return llvm_type(t)


def bits_of(t: ElementType) -> int:
    return 64 if isinstance(t, PointerType) else (8 if t.name == "i1" else t.bits)


def int_of_bits(bits: int) -> ir.IntType:
    return ir.IntType(bits)


def constant(t: ElementType, value: int | float | bool) -> ir.Value:
    """An LLVM constant of element type `t` (floats rounded to the type first)."""
    ty = llvm_type(t)
    if isinstance(t, PointerType):
        return ir.Constant(I64, int(value)).inttoptr(ty)
    if t.is_int:
        v = int(value)
        if t.bits == 1:
            return ir.Constant(ty, 1 if v else 0)
        return ir.Constant(ty, v & ((1 << t.bits) - 1))
    f = float(value)
    if t.name == "f16":
        import numpy as np

        return ir.Constant(ty, float(np.float16(f)))
    if t.name == "bf16":
        bits = struct.unpack("<I", struct.pack("<f", f))[0]
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
        if f != f:
            rounded = 0x7FC0
        return ir.Constant(I16, rounded).bitcast(BF16)
    if t.name == "f32":
        return ir.Constant(ty, struct.unpack("<f", struct.pack("<f", f))[0] if abs(f) < 3.5e38 or f != f or f in (float("inf"), float("-inf")) else f)
    return ir.Constant(ty, f)


def join(b: ir.IRBuilder, first: Sequence[ir.Value], first_block: ir.Block,
         second: Sequence[ir.Value], second_block: ir.Block) -> list[ir.Value]:
    """At the block where two paths meet: one phi per value, taking `first` from `first_block`
    and `second` from `second_block`."""
    out: list[ir.Value] = []
    for f, s in zip(first, second, strict=True):
        phi = b.phi(f.type)
        phi.add_incoming(f, first_block)
        phi.add_incoming(s, second_block)
        out.append(phi)
    return out
