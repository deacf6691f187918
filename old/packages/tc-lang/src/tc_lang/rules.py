"""The typing rules of Triton-C shared by the checker and the IR lowering.

C's usual arithmetic conversions with half and bf16 ranked between long and float, and numpy
broadcasting of tile shapes. The lowering calls the same functions the checker used, so the two
never disagree about the type in which an operation is computed.
"""

from __future__ import annotations

from .types import (
    BOOL,
    FP16,
    FP32,
    INT32,
    INT64,
    PointerType,
    ScalarType,
    TileType,
    Type,
    element_of,
    shape_of,
    with_shape,
)

ARITHMETIC_OPS = frozenset({"+", "-", "*", "/", "%"})
BITWISE_OPS = frozenset({"&", "|", "^"})
SHIFT_OPS = frozenset({"<<", ">>"})
COMPARISON_OPS = frozenset({"<", ">", "<=", ">=", "==", "!="})
LOGICAL_OPS = frozenset({"&&", "||"})


class RuleError(Exception):
    """A typing rule does not apply; the message is for the user (the checker adds the location)."""


def integer_promotion(t: ScalarType) -> ScalarType:
    """bool, char, short and their unsigned forms become int."""
    if t.is_integer and t.bits < 32:
        return INT32
    return t


def _unsigned_of(t: ScalarType) -> ScalarType:
    return ScalarType("u" + t.name) if t.is_signed and t.is_integer else t


def common_scalar(a: ScalarType, b: ScalarType) -> ScalarType:
    """C's usual arithmetic conversions (half and bf16 rank between long and float; mixing
    half with bf16 gives float)."""
    if a.is_void or b.is_void:
        raise RuleError("void value used in an expression")
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if {a.name, b.name} == {"fp16", "bf16"}:
                return FP32
            return a if a.rank >= b.rank else b
        return a if a.is_float else b
    a, b = integer_promotion(a), integer_promotion(b)
    if a == b:
        return a
    if a.is_signed == b.is_signed:
        return a if a.rank >= b.rank else b
    unsigned, signed = (a, b) if not a.is_signed else (b, a)
    if unsigned.rank >= signed.rank:
        return unsigned
    if signed.bits > unsigned.bits:
        return signed
    return _unsigned_of(signed)


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy broadcasting: left-pad the shorter with 1s, stretch 1s; other mismatches fail."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + a
    pb = (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise RuleError(
                f"cannot broadcast shapes [{', '.join(map(str, a))}] and [{', '.join(map(str, b))}]"
            )
    return tuple(out)


def binary_types(op: str, left: Type, right: Type) -> tuple[Type, Type]:
    """For a binary operator: (the type both operands are converted to, the result type).

    Pointer arithmetic returns (the pointer type at the result shape, the same) for `p + i`,
    `i + p` and `p - i`; `p - q` computes in int64. Comparisons compute in the common type and
    give bool. `@` is handled by `matmul_types`.
    """
    shape = broadcast_shapes(shape_of(left), shape_of(right))
    le, re = element_of(left), element_of(right)
    if isinstance(le, PointerType) or isinstance(re, PointerType):
        return _pointer_binary_types(op, le, re, shape)
    assert isinstance(le, ScalarType) and isinstance(re, ScalarType)
    if op in LOGICAL_OPS:
        return with_shape(BOOL, shape), with_shape(BOOL, shape)
    if op in SHIFT_OPS:
        if not (le.is_integer and re.is_integer):
            raise RuleError(f"shift operands must be integers, not '{le}' and '{re}'")
        t = integer_promotion(le)
        return with_shape(t, shape), with_shape(t, shape)
    common = common_scalar(le, re)
    if op in BITWISE_OPS or op == "%":
        if not common.is_integer and op != "%":
            raise RuleError(f"operator '{op}' needs integer operands, not '{le}' and '{re}'")
        if op == "%" and not common.is_integer and not common.is_float:
            raise RuleError(f"operator '%' needs arithmetic operands, not '{le}' and '{re}'")
    if op in COMPARISON_OPS:
        return with_shape(common, shape), with_shape(BOOL, shape)
    return with_shape(common, shape), with_shape(common, shape)


def _pointer_binary_types(
    op: str, le: ScalarType | PointerType, re: ScalarType | PointerType, shape: tuple[int, ...]
) -> tuple[Type, Type]:
    if isinstance(le, PointerType) and isinstance(re, PointerType):
        if op == "-":
            # (the difference counts elements: of one type, with a size)
            if le != re:
                raise RuleError(f"cannot subtract '{re}' from '{le}': the pointee types differ")
            if _is_void(le.pointee):
                raise RuleError(f"cannot subtract two '{le}': 'void' has no size")
            return with_shape(le, shape), with_shape(INT64, shape)
        if op in COMPARISON_OPS:
            return with_shape(le, shape), with_shape(BOOL, shape)
        raise RuleError(f"operator '{op}' cannot combine two pointers")
    ptr, other = (le, re) if isinstance(le, PointerType) else (re, le)
    assert isinstance(ptr, PointerType) and isinstance(other, ScalarType)
    if op in ("+", "-") and other.is_integer:
        if _is_void(ptr.pointee):
            raise RuleError(f"operator '{op}' cannot offset a '{ptr}': 'void' has no size; "
                            "cast it to a typed pointer first")
        if op == "-" and not isinstance(le, PointerType):
            raise RuleError("cannot subtract a pointer from an integer")
        return with_shape(ptr, shape), with_shape(ptr, shape)
    if op in COMPARISON_OPS and other.is_integer:
        return with_shape(ptr, shape), with_shape(BOOL, shape)
    raise RuleError(f"operator '{op}' cannot combine '{le}' and '{re}'")


def _is_void(t: Type) -> bool:
    return isinstance(t, ScalarType) and t.is_void


def matmul_types(left: Type, right: Type) -> tuple[ScalarType, Type]:
    """For `a @ b`: (the operand element type, the result type). half @ half and bf16 @ bf16
    give float; int8 @ int8 gives int. Shapes: [M, K] @ [K, N] -> [M, N]."""
    if not (isinstance(left, TileType) and isinstance(right, TileType)):
        raise RuleError("'@' needs two tiles")
    if left.rank != 2 or right.rank != 2:
        raise RuleError(
            f"'@' needs 2-D tiles, not [{', '.join(map(str, left.shape))}] and "
            f"[{', '.join(map(str, right.shape))}]"
        )
    if left.shape[1] != right.shape[0]:
        raise RuleError(
            f"'@' inner dimensions differ: [{left.shape[0]}, {left.shape[1]}] @ "
            f"[{right.shape[0]}, {right.shape[1]}]"
        )
    le, re = left.element, right.element
    if not (isinstance(le, ScalarType) and isinstance(re, ScalarType)):
        raise RuleError("'@' needs tiles of numbers, not pointers")
    operand = common_scalar(le, re)
    if operand.name in ("fp16", "bf16"):
        result: ScalarType = FP32
    elif operand.is_integer:
        operand = integer_promotion(operand) if operand.bits > 8 else operand
        result = INT32 if operand.bits <= 32 else INT64
    else:
        result = operand
    return operand, TileType((left.shape[0], right.shape[1]), result)


def unary_type(op: str, operand: Type) -> Type:
    """Result of -x, +x, ~x, !x (integer promotion applies; ! gives bool)."""
    e = element_of(operand)
    shape = shape_of(operand)
    if op == "!":
        return with_shape(BOOL, shape)
    if isinstance(e, PointerType):
        raise RuleError(f"operator '{op}' cannot apply to pointer '{e}'")
    if op == "~" and not e.is_integer:
        raise RuleError(f"operator '~' needs an integer operand, not '{e}'")
    return with_shape(integer_promotion(e), shape)


def is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


#: A tile dimension that is not a power of two must be a multiple of this: the granule of the
#: tensor-core instructions, of 16-byte vector accesses and of TMA boxes, so that the compiler can
#: always cover the dimension with power-of-two blocks of threads (48, 96, 192: a 128x192 matmul
#: tile fills an H100's 132 SMs where 128x256 leaves most of a wave idle).
TILE_GRANULE = 16


def is_tile_dimension(n: int) -> bool:
    """Whether a tile may be `n` long along one dimension: a power of two, or a multiple of
    TILE_GRANULE."""
    return is_power_of_two(n) or (n > 0 and n % TILE_GRANULE == 0)


DEFAULT_FLOAT = FP32
HALF = FP16
