"""The built-in functions and names of Triton-C and how they are typed.

Built-in names (constants, usable anywhere an expression is): F32_INFINITY (float +inf),
F16_INFINITY (half +inf), F32_NAN (float NaN). They are names the checker knows, not preamble
macros, so they can be shadowed and their uses keep their spelling in diagnostics; the checker
sets their `const`, and the lowering materialises any expression with a `const` as a constant.

Functions (all element-wise on tiles, scalars broadcast):
- get_program_id(axis), get_num_programs(axis): int; axis a constant 0, 1 or 2.
- min(a, b), max(a, b): the common type of a and b.
- exp log sqrt rsqrt abs fabs sin cos exp2 log2 floor ceil (x): same float type as x (an integer
  x converts to float; abs keeps integer types); C's float forms expf logf sqrtf rsqrtf sinf cosf
  exp2f log2f floorf ceilf fabsf (x): float (fp32), as in C.
- fma(a, b, c): the common float type; fmaf(a, b, c): float.
- select(c, a, b): like `c ? a : b` but both sides evaluated; c converts to bool.
- atomic_add/atomic_max/atomic_min/atomic_xchg(ptr, value[, mask]): the old values (type of
  `*ptr`, shape of the broadcast of the operands); atomic_cas(ptr, cmp, value) likewise. On the
  GPU each is acquire-release among the GPU's threads (PTX scope .gpu, Triton's default): enough
  for programs of a launch, and later launches, to hand data over; not ordered with the host.
- __debug_barrier(): void.
"""

from __future__ import annotations

import math

from .types import FP16, FP32, ScalarType, Type

BUILTIN_CONSTANTS: dict[str, tuple[ScalarType, float]] = {
    "F32_INFINITY": (FP32, math.inf),
    "F16_INFINITY": (FP16, math.inf),
    "F32_NAN": (FP32, math.nan),
}

#: C's float forms of the math functions: fp32 results whatever the argument's type.
FLOAT_MATH = frozenset(
    {"expf", "logf", "sqrtf", "rsqrtf", "sinf", "cosf", "exp2f", "log2f", "floorf", "ceilf", "fabsf"}
)
UNARY_MATH = frozenset(
    {"exp", "log", "sqrt", "rsqrt", "abs", "fabs", "sin", "cos", "exp2", "log2", "floor", "ceil"}
) | FLOAT_MATH
ATOMIC_RMW = frozenset({"atomic_add", "atomic_max", "atomic_min", "atomic_xchg"})
PROGRAM_QUERIES = frozenset({"get_program_id", "get_num_programs"})
OTHER = frozenset({"min", "max", "fma", "fmaf", "select", "atomic_cas", "__debug_barrier"})

BUILTIN_FUNCTIONS = UNARY_MATH | ATOMIC_RMW | PROGRAM_QUERIES | OTHER


def is_builtin(name: str) -> bool:
    return name in BUILTIN_FUNCTIONS


def arity(name: str) -> tuple[int, int]:
    """(min, max) number of arguments of a built-in."""
    if name in UNARY_MATH or name in PROGRAM_QUERIES:
        return 1, 1
    if name in ("min", "max"):
        return 2, 2
    if name in ("fma", "fmaf", "select", "atomic_cas"):
        return 3, 3
    if name in ATOMIC_RMW:
        return 2, 3
    if name == "__debug_barrier":
        return 0, 0
    raise KeyError(name)


def math_result(name: str, element: ScalarType) -> ScalarType:
    """Element type of a unary math built-in applied to `element`."""
    if name in FLOAT_MATH:
        return FP32
    if name == "abs" and element.is_integer and not element.is_bool:
        return element if element.bits >= 32 else ScalarType("int32")
    if element.is_float:
        return element
    return FP32


def describe(t: Type | None) -> str:
    return "<error>" if t is None else f"'{t}'"
