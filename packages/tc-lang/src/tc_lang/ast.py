"""The Triton-C abstract syntax tree.

Nodes are frozen attrs classes. Every node has a `loc` (its source range); expressions also have
`ty` (their type and shape) and `const` (their value when it is a compile-time constant), both
`None` after parsing and filled in by `tc_lang.check`, which returns a new tree. `loc`, `ty` and
`const` take no part in equality, so `parse(print(tree)) == tree` compares structure only.
"""

from __future__ import annotations

from typing import Union

import attrs

from .diagnostics import UNKNOWN_LOCATION, Diagnostic, Location
from .preprocessor import Preprocessed
from .types import ScalarType, Type

# loc/ty/const: keyword-only, no part of equality or repr (spelled out per field so that mypy
# sees kw_only; a shared **dict hid it and made mypy reject every subclass).


@attrs.frozen
class Node:
    """Base of all nodes: the source range it was parsed from."""

    loc: Location = attrs.field(default=UNKNOWN_LOCATION, eq=False, kw_only=True, repr=False)


# ----------------------------------------------------------------------------------------- types


@attrs.frozen
class TypeName(Node):
    """A type as written: `const float*`, `int[TM, TN]`, `half* [TM]`.

    `base` is the resolved scalar (`unsigned int` is uint32, `char` int8, `half` fp16);
    `pointers` the number of `*`; `dims` the tile dimensions as written (None: not a tile).
    """

    base: ScalarType
    pointers: int = 0
    dims: tuple[Expr, ...] | None = None
    qualifiers: tuple[str, ...] = ()  # "const", "volatile", "restrict" before the `*`s (of the pointee)
    pointer_qualifiers: tuple[str, ...] = ()  # those after a `*` (of the pointer: `float* const p`)


# ----------------------------------------------------------------------------------- expressions


@attrs.frozen
class Expr(Node):
    """Base of expressions. `ty` and `const` are filled by the checker."""

    ty: Type | None = attrs.field(default=None, eq=False, kw_only=True, repr=False)
    const: int | float | bool | None = attrs.field(default=None, eq=False, kw_only=True, repr=False)


@attrs.frozen
class IntLiteral(Expr):
    """`42`, `0x7F800000`, `1u`, `8l` (suffix lower-cased: "", "u", "l", "ul", "ll", "ull")."""

    value: int
    suffix: str = ""
    text: str = attrs.field(default="", eq=False)  # as written (hex literals type differently)


@attrs.frozen
class FloatLiteral(Expr):
    """`0.5` (double), `0.5f` (float); `text` is the literal as written, for printing."""

    value: float
    suffix: str = ""
    text: str = attrs.field(default="", eq=False)


@attrs.frozen
class BoolLiteral(Expr):
    """`true` / `false`."""

    value: bool


@attrs.frozen
class Name(Expr):
    """A reference to a variable, parameter or built-in constant."""

    name: str


@attrs.frozen
class Unary(Expr):
    """Prefix and postfix operators.

    op: "-", "+", "!", "~", "^" (transpose: rotate axes left), "&" (address of),
    "pre++", "pre--", "post++", "post--".
    """

    op: str
    operand: Expr


@attrs.frozen
class Binary(Expr):
    """Binary operators, element-wise on tiles after broadcasting; "@" is the matrix product.

    op: "+", "-", "*", "/", "%", "<<", ">>", "<", ">", "<=", ">=", "==", "!=",
    "&", "|", "^", "&&", "||", "@".
    """

    op: str
    left: Expr
    right: Expr


@attrs.frozen
class Assign(Expr):
    """`target op value`; op: "=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^=".

    `target` is a Name, or a Deref (a store; masked when the Deref has a mask).
    """

    op: str
    target: Expr
    value: Expr


@attrs.frozen
class Conditional(Expr):
    """`cond ? then : otherwise`. With a tile condition, loads in the branches are masked by it."""

    cond: Expr
    then: Expr
    otherwise: Expr


@attrs.frozen
class Comma(Expr):
    """`a, b, c`: evaluates all, yields the last."""

    exprs: tuple[Expr, ...]


@attrs.frozen
class Call(Expr):
    """A call of a built-in (`get_program_id`, `exp`, `atomic_add`, `max`, ...) or a __device__ function."""

    func: str
    args: tuple[Expr, ...]


@attrs.frozen
class Cast(Expr):
    """`(T) x`, including tile casts `(float[TM, TN]) x` that reshape/broadcast as well as convert."""

    type: TypeName
    operand: Expr


@attrs.frozen
class Bitcast(Expr):
    """`bitcast<T>(x)`: reinterpret bits; widths must be equal."""

    type: TypeName
    operand: Expr


@attrs.frozen
class SizeOf(Expr):
    """`sizeof(T)` or `sizeof expr`: an int64 constant."""

    operand: TypeName | Expr


@attrs.frozen
class Range(Expr):
    """`start ... end`: the int tile [start, start+1, ..., end-1]; constant bounds."""

    start: Expr
    end: Expr


@attrs.frozen
class SubscriptItem(Node):
    """One entry of a tile subscript.

    kind: ":" (keep the next axis), "newaxis" (insert an axis of 1), "+", "-", "max", "min"
    (reduce the next axis), "^" (permutation: place axis `value` here; `value` a constant).
    """

    kind: str
    value: Expr | None = None


@attrs.frozen
class Subscript(Expr):
    """`x[...]`: broadcast, reduce or permute a tile (never C indexing)."""

    base: Expr
    items: tuple[SubscriptItem, ...]


@attrs.frozen
class Deref(Expr):
    """`*p` (mask None) or `*?(mask) p`, as a value (a load) or as an assignment target (a store)."""

    pointer: Expr
    mask: Expr | None = None


# ---------------------------------------------------------------------------------- declarations


@attrs.frozen
class Attribute(Node):
    """A parameter or declaration attribute: multipleof(N), aligned(N), noalias, readonly,
    writeonly, retune (written `__multipleof(8)`, `__noalias`, ... in source)."""

    name: str
    value: Expr | None = None


@attrs.frozen
class Decl(Node):
    """`T name[dims] attrs = init` inside a declaration statement. `ty` is the resolved type."""

    name: str
    type: TypeName
    init: Expr | None = None
    attributes: tuple[Attribute, ...] = ()
    ty: Type | None = attrs.field(default=None, eq=False, kw_only=True, repr=False)


@attrs.frozen
class Param(Node):
    """A function parameter; `ty` is the resolved type."""

    name: str
    type: TypeName
    attributes: tuple[Attribute, ...] = ()
    ty: Type | None = attrs.field(default=None, eq=False, kw_only=True, repr=False)


# ------------------------------------------------------------------------------------ statements


@attrs.frozen
class Stmt(Node):
    """Base of statements."""


@attrs.frozen
class Compound(Stmt):
    items: tuple[Stmt, ...]


@attrs.frozen
class DeclStmt(Stmt):
    """`T a = 1, b[4] = x;`"""

    decls: tuple[Decl, ...]


@attrs.frozen
class ExprStmt(Stmt):
    """`expr;` or the empty statement `;` (expr None)."""

    expr: Expr | None


@attrs.frozen
class If(Stmt):
    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None


@attrs.frozen
class For(Stmt):
    init: DeclStmt | ExprStmt | None
    cond: Expr | None
    step: Expr | None
    body: Stmt


@attrs.frozen
class While(Stmt):
    cond: Expr
    body: Stmt


@attrs.frozen
class DoWhile(Stmt):
    body: Stmt
    cond: Expr


@attrs.frozen
class Break(Stmt):
    pass


@attrs.frozen
class Continue(Stmt):
    pass


@attrs.frozen
class Return(Stmt):
    value: Expr | None = None


# ------------------------------------------------------------------------------------- top level


@attrs.frozen
class FunctionDef(Node):
    """A `__global__` kernel (kind "global", returns void) or a `__device__` helper (kind "device").

    A helper's return type may be a tile, written like a cast type: `__device__ float[BLOCK] f(...)`.
    `ty` of the return TypeName's resolution is `return_ty` after checking.
    """

    name: str
    kind: str
    return_type: TypeName
    params: tuple[Param, ...]
    body: Compound
    return_ty: Type | None = attrs.field(default=None, eq=False, kw_only=True, repr=False)


@attrs.frozen
class TranslationUnit(Node):
    """A whole source: its kernels and helpers in source order."""

    functions: tuple[FunctionDef, ...]
    # Added by the front end (no part of equality): warnings of the parse (e.g. an inserted ';')
    # and the preprocessor's map back to the user's files, for source lines in diagnostics.
    warnings: tuple[Diagnostic, ...] = attrs.field(default=(), eq=False, kw_only=True, repr=False)
    source_map: Preprocessed | None = attrs.field(default=None, eq=False, kw_only=True, repr=False)

    def source_line(self, loc: Location) -> str | None:
        """The text of the user's line at `loc` (None when unknown), for `Diagnostic.source_line`."""
        if self.source_map is None:
            return None
        return self.source_map.source_line(loc.file, loc.line)

    def kernels(self) -> tuple[FunctionDef, ...]:
        return tuple(f for f in self.functions if f.kind == "global")

    def function(self, name: str) -> FunctionDef | None:
        for f in self.functions:
            if f.name == name:
                return f
        return None


AnyNode = Union[Node, Expr, Stmt]
