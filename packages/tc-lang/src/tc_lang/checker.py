"""`check`: types, tile shapes, broadcasting and constant folding over a parsed unit.

Returns a new tree (attrs.evolve) where every Expr has `ty` (and `const` when it is a
compile-time constant), every Decl/Param has `ty` and every FunctionDef `return_ty`. The typing
rules are those of `tc_lang.rules`, so the IR lowering computes every operation in the same type.
All independent errors of the unit are collected and raised together; an expression whose operand
already failed gets no type (`ty` None) and reports nothing more.

Decisions worth knowing (see also builtins.py):
- A cast without dimensions of a tile converts its elements and keeps its shape:
  `(float) x` with x `half[64]` is `float[64]`. A cast with dimensions splats a scalar, reshapes
  a tile of the same element count, or broadcasts.
- Initialisation and assignment convert to the declared type and broadcast a scalar or a smaller
  tile to the declared shape; the value keeps its own `ty`, the Decl/target has the declared one.
- A load `*?(m) p` has the shape of the broadcast of p and m; a store `*?(m) p = v` broadcasts
  v to that shape.
- Kernel parameters are scalars or pointers; __device__ helpers may take and return tiles.

Codes: E03xx names, E04xx types, E05xx shapes (E02xx for misplaced break/continue). Warnings
(W03xx: what C compilers warn about, compiled as the GPU computes it) go to the unit's `warnings`.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import attrs

from . import ast, consts
from .builtins import (
    ATOMIC_RMW,
    BUILTIN_CONSTANTS,
    PROGRAM_QUERIES,
    UNARY_MATH,
    arity,
    is_builtin,
    math_result,
)
from .diagnostics import Category, Diagnostic, Location, Severity, error_for
from .printer import to_source
from .rules import (
    TILE_GRANULE,
    RuleError,
    binary_types,
    broadcast_shapes,
    common_scalar,
    integer_promotion,
    is_power_of_two,
    is_tile_dimension,
    matmul_types,
    unary_type,
)
from .types import (
    BOOL,
    FP32,
    FP64,
    INT32,
    INT64,
    UINT32,
    UINT64,
    ElementType,
    PointerType,
    ScalarType,
    TileType,
    Type,
    element_of,
    shape_of,
    with_element,
    with_shape,
)

E = TypeVar("E", bound=ast.Expr)

_ATTRIBUTES_WITH_VALUE = {"multipleof", "aligned"}
_ATTRIBUTES = {"multipleof", "aligned", "noalias", "readonly", "writeonly", "retune"}
_MAX_TILE_ELEMENTS = 1 << 24



def _readonly(t: ast.TypeName) -> bool:
    """A declaration the program may not assign: `const int n`, `float* const p`."""
    return ("const" in t.qualifiers and t.pointers == 0) or "const" in t.pointer_qualifiers


def _points_to_const(t: ast.TypeName) -> bool:
    """A pointer declared `const T*` (through which nothing may be stored)."""
    return "const" in t.qualifiers and t.pointers > 0


def _pointer_root(e: ast.Expr) -> str | None:
    """The variable a pointer expression is computed from by pointer arithmetic (`X + i`,
    `(X + i) - 1`), None for anything else (a cast may drop the const, as in C)."""
    while True:
        if isinstance(e, ast.Name):
            return e.name
        if isinstance(e, ast.Binary) and e.op in ("+", "-"):
            left_ptr = e.left.ty is not None and isinstance(element_of(e.left.ty), PointerType)
            e = e.left if left_ptr else e.right
            continue
        return None

@attrs.define
class Symbol:
    ty: Type
    kind: str  # "var", "param", "builtin"
    const: int | float | bool | None = None
    readonly: bool = False
    loc: Location | None = None
    #: a pointer declared `const T*`: nothing may be stored through it
    points_to_const: bool = False
    #: a pointer parameter declared `__readonly`: nothing may be stored through it either
    read_only_attribute: bool = False
    #: a pointer parameter declared `__writeonly`: nothing may be loaded through it
    write_only_attribute: bool = False


@attrs.define
class Signature:
    name: str
    kind: str
    params: list[Type | None]
    ret: Type | None
    loc: Location


def _fmt_shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _q(t: Type | None) -> str:
    return f"'{t}'"


class Checker:
    """Checks one translation unit; `run` returns the typed tree or raises the collected errors."""

    def __init__(self, unit: ast.TranslationUnit) -> None:
        self.unit = unit
        self.diags: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.scopes: list[dict[str, Symbol]] = []
        self.signatures: dict[str, Signature] = {}
        self.calls: dict[str, list[tuple[str, Location]]] = {}
        self.function: Signature | None = None
        self.loop_depth = 0
        self.undeclared: set[str] = set()
        #: the dereference a plain `=` stores to (the one dereference that loads nothing)
        self.store_target: ast.Expr | None = None

    # ------------------------------------------------------------------ diagnostics

    def error(
        self, category: Category, code: str, message: str, loc: Location, hint: str | None = None
    ) -> None:
        self.diags.append(
            Diagnostic(category, code, message, loc, hint=hint,
                       source_line=self.unit.source_line(loc))
        )

    def warn(self, code: str, message: str, loc: Location, hint: str | None = None) -> None:
        self.warnings.append(
            Diagnostic(Category.TYPE, code, message, loc, Severity.WARNING, hint,
                       self.unit.source_line(loc))
        )

    def type_error(self, code: str, message: str, loc: Location, hint: str | None = None) -> None:
        self.error(Category.TYPE, code, message, loc, hint)

    def shape_error(self, code: str, message: str, loc: Location, hint: str | None = None) -> None:
        self.error(Category.SHAPE, code, message, loc, hint)

    def name_error(self, code: str, message: str, loc: Location, hint: str | None = None) -> None:
        self.error(Category.NAME, code, message, loc, hint)

    # ------------------------------------------------------------------ scopes

    @contextmanager
    def scope(self) -> Iterator[None]:
        self.scopes.append({})
        try:
            yield
        finally:
            self.scopes.pop()

    def lookup(self, name: str) -> Symbol | None:
        for s in reversed(self.scopes):
            if name in s:
                return s[name]
        return None

    def declare(self, name: str, sym: Symbol, loc: Location) -> None:
        current = self.scopes[-1]
        if name in current and current[name].kind != "builtin":
            prev = current[name].loc
            where = f" (first declared at line {prev.line})" if prev is not None and prev.line else ""
            self.name_error("E0302", f"redefinition of '{name}'{where}", loc)
            return
        current[name] = sym

    def _names(self) -> list[str]:
        out: list[str] = []
        for s in self.scopes:
            out.extend(s)
        return out

    # ------------------------------------------------------------------ entry

    def run(self) -> ast.TranslationUnit:
        self.scopes = [
            {n: Symbol(t, "builtin", v, True) for n, (t, v) in BUILTIN_CONSTANTS.items()}
        ]
        for f in self.unit.functions:
            self.collect_signature(f)
        functions = tuple(self.check_function(f) for f in self.unit.functions)
        self.check_recursion()
        if self.diags:
            raise error_for(self.diags)
        # (dict: once each, as dimensions and signatures are checked more than once)
        warnings = tuple(dict.fromkeys([*self.unit.warnings, *self.warnings]))
        return attrs.evolve(self.unit, functions=functions, warnings=warnings)

    def collect_signature(self, f: ast.FunctionDef) -> None:
        if f.name in self.signatures:
            prev = self.signatures[f.name].loc
            self.name_error("E0304", f"redefinition of function '{f.name}' (first defined at "
                                     f"line {prev.line})", f.loc)
            return
        if is_builtin(f.name) or f.name in BUILTIN_CONSTANTS:
            self.name_error("E0304", f"'{f.name}' is a built-in and cannot be redefined", f.loc)
        params = [self.resolve_type(p.type, p.name, report=False) for p in f.params]
        ret = self.resolve_type(f.return_type, f.name, report=False, allow_void=True)
        self.signatures[f.name] = Signature(f.name, f.kind, params, ret, f.loc)

    def check_recursion(self) -> None:
        """Helpers are inlined, so a call cycle is an error (reported once per cycle)."""
        reported: set[str] = set()
        for start in self.calls:
            stack = [(start, [start])]
            seen: set[str] = set()
            while stack:
                fn, path = stack.pop()
                for callee, loc in self.calls.get(fn, []):
                    if callee == start:
                        if start not in reported:
                            reported.update(path)
                            cycle = " -> ".join(path + [start])
                            self.name_error("E0305", f"recursive call ({cycle}): __device__ "
                                            "functions are inlined and cannot recurse", loc)
                        continue
                    if callee not in seen:
                        seen.add(callee)
                        stack.append((callee, path + [callee]))

    # ------------------------------------------------------------------ types

    def resolve_type(
        self, tn: ast.TypeName, what: str, *, report: bool = True, allow_void: bool = False
    ) -> Type | None:
        """The Type a TypeName denotes; tile dimensions must be constant with a power-of-two
        element count."""
        base: ScalarType | PointerType = tn.base
        if tn.base.is_void and tn.pointers == 0 and not allow_void:
            if report:
                self.type_error("E0413", f"'{what}' cannot have type 'void'", tn.loc)
            return None
        for _ in range(tn.pointers):
            base = PointerType(base)
        if tn.dims is None:
            return base
        if isinstance(base, ScalarType) and base.is_void:
            if report:
                self.type_error("E0413", "a tile cannot have 'void' elements", tn.loc)
            return None
        dims: list[int] = []
        ok = True
        for d in tn.dims:
            v = self.constant_int(d, "tile dimension", report=report)
            if v is None:
                ok = False
                continue
            if v <= 0:
                if report:
                    wrapped = None if isinstance(d, ast.IntLiteral) else \
                        "the dimension is computed in C's int, which wraps around: does it overflow?"
                    self.shape_error("E0503", f"tile dimension must be positive, not {v}", d.loc, wrapped)
                ok = False
                continue
            dims.append(v)
        if not ok:
            return None
        tt = TileType(tuple(dims), base)
        bad = [v for v in dims if not is_tile_dimension(v)]
        if bad or tt.numel > _MAX_TILE_ELEMENTS:
            if report:
                if tt.numel > _MAX_TILE_ELEMENTS:
                    msg = f"tile '{what}' has {tt.numel} elements, more than {_MAX_TILE_ELEMENTS}"
                    self.shape_error("E0502", msg, tn.loc)
                else:
                    self.shape_error(
                        "E0502", f"tile '{what}' has {tt.numel} elements: a dimension of {bad[0]} is "
                        f"neither a power of two nor a multiple of {TILE_GRANULE}", tn.loc,
                        hint=f"tile dimensions must be powers of two or multiples of {TILE_GRANULE}",
                    )
            return None
        return tt

    def typed_typename(self, tn: ast.TypeName) -> ast.TypeName:
        """`tn` with its dimension expressions typed (their errors were reported already)."""
        if tn.dims is None:
            return tn
        saved = len(self.diags)
        dims = tuple(self.expr(d) for d in tn.dims)
        del self.diags[saved:]
        return attrs.evolve(tn, dims=dims)

    def constant_int(self, e: ast.Expr, what: str, *, report: bool = True) -> int | None:
        """The value of an integer constant expression (with a diagnostic when it is not one)."""
        saved, warned = len(self.diags), len(self.warnings)
        checked = self.expr(e)
        if not report:
            del self.diags[saved:]
            del self.warnings[warned:]
        if checked.ty is None:
            return None
        el = element_of(checked.ty)
        if (
            checked.const is None
            or not isinstance(el, ScalarType)
            or not el.is_integer
            or isinstance(checked.ty, TileType)
        ):
            if report:
                self.type_error("E0403", f"{what} must be an integer constant", e.loc,
                                hint="use a literal or a macro defined with -D")
            return None
        return int(checked.const)

    # ------------------------------------------------------------------ functions

    def check_function(self, f: ast.FunctionDef) -> ast.FunctionDef:
        sig = self.signatures.get(f.name)
        if sig is None or sig.loc != f.loc:
            sig = Signature(f.name, f.kind, [], None, f.loc)
        self.function = sig
        self.undeclared = set()
        self.calls.setdefault(f.name, [])
        ret = self.resolve_type(f.return_type, f.name, allow_void=True)
        if f.kind == "global" and ret is not None and ret != ScalarType("void"):
            self.type_error("E0407", f"kernel '{f.name}' must return void, not {_q(ret)}",
                            f.return_type.loc)
        sig.ret = ret
        with self.scope():
            params = []
            for p in f.params:
                ty = self.resolve_type(p.type, p.name)
                if ty is not None and f.kind == "global" and isinstance(ty, TileType):
                    self.type_error("E0416", f"kernel parameter '{p.name}' cannot be a tile",
                                    p.loc, hint="pass a pointer and load the tile in the kernel")
                attributes = self.check_attributes(p.attributes, ty)
                if ty is not None:
                    names = {a.name for a in attributes}
                    self.declare(p.name, Symbol(ty, "param", None, _readonly(p.type), p.loc,
                                                _points_to_const(p.type), "readonly" in names,
                                                "writeonly" in names), p.loc)
                params.append(attrs.evolve(p, type=self.typed_typename(p.type),
                                           attributes=attributes, ty=ty))
            body = self.compound(f.body, new_scope=False)
        if (
            f.kind == "device"
            and ret is not None
            and ret != ScalarType("void")
            and not _returns(body)
        ):
            self.type_error("E0407", f"function '{f.name}' does not return a value on every path",
                            f.loc)
        self.function = None
        return attrs.evolve(f, return_type=self.typed_typename(f.return_type),
                            params=tuple(params), body=body, return_ty=ret)

    def check_attributes(
        self, attributes: tuple[ast.Attribute, ...], ty: Type | None
    ) -> tuple[ast.Attribute, ...]:
        out = []
        for a in attributes:
            value = a.value
            if a.name not in _ATTRIBUTES:
                self.name_error("E0307", f"unknown attribute '{a.name}'", a.loc,
                                hint="known: " + ", ".join(sorted(_ATTRIBUTES)))
            elif a.name in _ATTRIBUTES_WITH_VALUE:
                if value is None:
                    self.type_error("E0415", f"attribute '{a.name}' needs a value, e.g. "
                                    f"__{a.name}(16)", a.loc)
                else:
                    n = self.constant_int(value, f"the value of '{a.name}'")
                    if n is not None and n <= 0:
                        self.type_error("E0415", f"'{a.name}' must be positive, not {n}", a.loc)
                    elif n is not None and a.name == "aligned" and not is_power_of_two(n):
                        self.type_error("E0415", f"'aligned' must be a power of two, not {n}",
                                        a.loc)
                    value = self.expr(value)
                if a.name == "multipleof" and ty is not None and not (
                    isinstance(element_of(ty), ScalarType) and element_of(ty).is_integer  # type: ignore[union-attr]
                ):
                    self.type_error("E0415", f"'multipleof' applies to integers, not {_q(ty)}",
                                    a.loc)
                if a.name == "aligned" and ty is not None and not isinstance(
                    element_of(ty), PointerType
                ):
                    self.type_error("E0415", f"'aligned' applies to pointers, not {_q(ty)}", a.loc)
            else:
                if value is not None:
                    self.type_error("E0415", f"attribute '{a.name}' takes no value", a.loc)
                if a.name in ("noalias", "readonly", "writeonly") and ty is not None and not \
                        isinstance(element_of(ty), PointerType):
                    self.type_error("E0415", f"'{a.name}' applies to pointers, not {_q(ty)}",
                                    a.loc)
                if a.name == "writeonly" and any(b.name == "readonly" for b in attributes):
                    self.type_error("E0415", "'readonly' and 'writeonly' exclude each other",
                                    a.loc)
            out.append(attrs.evolve(a, value=value))
        return tuple(out)

    # ------------------------------------------------------------------ statements

    def compound(self, c: ast.Compound, new_scope: bool = True) -> ast.Compound:
        if new_scope:
            with self.scope():
                return attrs.evolve(c, items=tuple(self.stmt(s) for s in c.items))
        return attrs.evolve(c, items=tuple(self.stmt(s) for s in c.items))

    def stmt(self, s: ast.Stmt) -> ast.Stmt:
        """The typed statement; one nested too deeply for Python's stack (a flat expression of
        thousands of terms is a deep tree) is an error at its own line, not at the file's start."""
        try:
            return self._stmt(s)
        except RecursionError:
            if os.environ.get("TC_FRONTEND_DEBUG") == "1":
                raise
            if not any(d.code == "E0211" for d in self.diags):  # (once: the enclosing ones too)
                self.error(Category.SYNTAX, "E0211", "this statement is nested too deeply to compile",
                           s.loc, hint="split long expressions into several statements")
            return s

    def _stmt(self, s: ast.Stmt) -> ast.Stmt:
        if isinstance(s, ast.Compound):
            return self.compound(s)
        if isinstance(s, ast.DeclStmt):
            return self.decl_stmt(s)
        if isinstance(s, ast.ExprStmt):
            return attrs.evolve(s, expr=self.expr(s.expr) if s.expr is not None else None)
        if isinstance(s, ast.If):
            cond = self.condition(s.cond, "if")
            with self.scope():
                then = self.stmt(s.then)
            otherwise = None
            if s.otherwise is not None:
                with self.scope():
                    otherwise = self.stmt(s.otherwise)
            return attrs.evolve(s, cond=cond, then=then, otherwise=otherwise)
        if isinstance(s, ast.For):
            with self.scope():
                init: ast.DeclStmt | ast.ExprStmt | None = None
                if s.init is not None:
                    init = self.stmt(s.init)  # type: ignore[assignment]
                fcond = self.condition(s.cond, "for") if s.cond is not None else None
                step = self.expr(s.step) if s.step is not None else None
                body = self.loop_body(s.body)
            return attrs.evolve(s, init=init, cond=fcond, step=step, body=body)
        if isinstance(s, ast.While):
            cond = self.condition(s.cond, "while")
            return attrs.evolve(s, cond=cond, body=self.loop_body(s.body))
        if isinstance(s, ast.DoWhile):
            body = self.loop_body(s.body)
            return attrs.evolve(s, body=body, cond=self.condition(s.cond, "do-while"))
        if isinstance(s, (ast.Break, ast.Continue)):
            if self.loop_depth == 0:
                word = "break" if isinstance(s, ast.Break) else "continue"
                self.error(Category.SYNTAX, "E0210", f"'{word}' outside a loop", s.loc)
            return s
        if isinstance(s, ast.Return):
            return self.return_stmt(s)
        raise TypeError(f"unknown statement {type(s).__name__}")  # pragma: no cover

    def loop_body(self, body: ast.Stmt) -> ast.Stmt:
        self.loop_depth += 1
        try:
            with self.scope():
                return self.stmt(body)
        finally:
            self.loop_depth -= 1

    def condition(self, e: ast.Expr, what: str) -> ast.Expr:
        c = self.expr(e)
        if c.ty is None:
            return c
        if isinstance(c.ty, TileType):
            self.shape_error("E0507", f"the condition of '{what}' must be a scalar, not a tile of "
                             f"shape {_fmt_shape(c.ty.shape)}", e.loc,
                             hint="reduce it first, e.g. (x != 0)[max], or use a tile ternary")
        elif isinstance(c.ty, ScalarType) and c.ty.is_void:
            self.type_error("E0413", f"the condition of '{what}' has type 'void'", e.loc)
        return c

    def return_stmt(self, s: ast.Return) -> ast.Return:
        sig = self.function
        ret = sig.ret if sig is not None else None
        is_void = ret is not None and ret == ScalarType("void")
        if s.value is None:
            if ret is not None and not is_void:
                self.type_error("E0407", f"'return' without a value in a function returning "
                                f"{_q(ret)}", s.loc)
            return s
        value = self.expr(s.value)
        if ret is None:
            return attrs.evolve(s, value=value)
        if is_void:
            self.type_error("E0407", "a void function cannot return a value", s.value.loc)
            return attrs.evolve(s, value=value)
        self.convertible(value, ret, "return value", s.value.loc)
        return attrs.evolve(s, value=value)

    def decl_stmt(self, s: ast.DeclStmt) -> ast.DeclStmt:
        return attrs.evolve(s, decls=tuple(self.decl(d) for d in s.decls))

    def decl(self, d: ast.Decl) -> ast.Decl:
        ty = self.resolve_type(d.type, d.name)
        attributes = self.check_attributes(d.attributes, ty)
        init = None
        const_value = None
        if d.init is not None:
            init = self.expr(d.init)
            if ty is not None and init.ty is not None:
                if self.convertible(init, ty, f"'{d.name}'", d.init.loc) and init.const is not None \
                        and isinstance(ty, ScalarType):
                    try:
                        const_value = consts.convert(init.const, ty)
                    except consts.FoldError:
                        const_value = None
        readonly = _readonly(d.type)
        if ty is not None:
            sym = Symbol(ty, "var", const_value if readonly and d.type.pointers == 0 else None, readonly, d.loc,
                         _points_to_const(d.type))
            self.declare(d.name, sym, d.loc)
        else:
            # Declared anyway (without a type) so later uses do not report a missing name.
            self.scopes[-1].setdefault(d.name, Symbol(INT32, "poison", None, False, d.loc))
        return attrs.evolve(d, type=self.typed_typename(d.type), init=init,
                            attributes=attributes, ty=ty)

    # ------------------------------------------------------------------ conversions

    def convertible(self, value: ast.Expr, target: Type, what: str, loc: Location) -> bool:
        """Whether `value` converts (implicitly) to `target`; reports why not."""
        src = value.ty
        if src is None:
            return False
        ss, ts = shape_of(src), shape_of(target)
        if ss and ss != ts:
            ok = False
            if ts:
                try:
                    ok = broadcast_shapes(ss, ts) == ts
                except RuleError:
                    ok = False
            elif isinstance(src, TileType) and src.numel == 1:
                ok = True
            if not ok:
                target_shape = _fmt_shape(ts) if ts else "a scalar"
                self.shape_error("E0511", f"cannot convert a tile of shape {_fmt_shape(ss)} to "
                                 f"{what} of shape {target_shape}" if ts else
                                 f"cannot convert a tile of shape {_fmt_shape(ss)} to {what}, a "
                                 "scalar", loc,
                                 hint=None if ts else "reduce the tile first, e.g. x[+] or x[max]")
                return False
        se, te = element_of(src), element_of(target)
        if isinstance(te, PointerType):
            if isinstance(se, PointerType):
                if se != te and not (_is_void_ptr(se) or _is_void_ptr(te)):
                    self.type_error("E0404", f"cannot convert {_q(se)} to {_q(te)} for {what}",
                                    loc, hint=f"cast explicitly: ({te}) ...")
                    return False
                return True
            if value.const == 0 and isinstance(se, ScalarType) and se.is_integer:
                return True
            self.type_error("E0404", f"cannot convert {_q(se)} to pointer {_q(te)} for {what}",
                            loc)
            return False
        if isinstance(se, PointerType):
            self.type_error("E0404", f"cannot convert pointer {_q(se)} to {_q(te)} for {what}",
                            loc)
            return False
        if se.is_void:
            self.type_error("E0413", f"a void value cannot initialise {what}", loc)
            return False
        return True

    # ------------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr) -> ast.Expr:
        method = getattr(self, "x_" + type(e).__name__, None)
        if method is None:  # pragma: no cover - every node class has a method
            raise TypeError(f"unknown expression {type(e).__name__}")
        result: ast.Expr = method(e)
        return result

    @staticmethod
    def typed(e: E, ty: Type | None, const: int | float | bool | None = None) -> E:
        return attrs.evolve(e, ty=ty, const=const)  # type: ignore[misc]

    def x_IntLiteral(self, e: ast.IntLiteral) -> ast.Expr:
        v = e.value
        hexlike = e.text[:1] == "0" and len(e.text) > 1
        s = e.suffix
        if v >= 1 << 64:
            self.type_error("E0405", "integer literal is too large for any integer type", e.loc)
            return self.typed(e, None)
        if s == "":
            if v < 1 << 31:
                t = INT32
            elif hexlike and v < 1 << 32:
                t = UINT32
            elif v < 1 << 63:
                t = INT64
            elif hexlike:
                t = UINT64
            else:
                self.type_error("E0405", "integer literal is too large for 'long'", e.loc,
                                hint="add a 'u' suffix for an unsigned literal")
                return self.typed(e, None)
        elif s == "u":
            t = UINT32 if v < 1 << 32 else UINT64
        elif s in ("l", "ll"):
            if v < 1 << 63:
                t = INT64
            elif hexlike:
                t = UINT64
            else:
                self.type_error("E0405", "integer literal is too large for 'long'", e.loc)
                return self.typed(e, None)
        else:
            t = UINT64
        return self.typed(e, t, v)

    def x_FloatLiteral(self, e: ast.FloatLiteral) -> ast.Expr:
        t = FP32 if e.suffix == "f" else FP64
        return self.typed(e, t, consts.round_float(e.value, t))

    def x_BoolLiteral(self, e: ast.BoolLiteral) -> ast.Expr:
        return self.typed(e, BOOL, e.value)

    def x_Name(self, e: ast.Name) -> ast.Expr:
        sym = self.lookup(e.name)
        if sym is None:
            # Reported once per function (clang does the same), later uses stay quiet.
            if e.name in self.undeclared:
                return self.typed(e, None)
            self.undeclared.add(e.name)
            hint = None
            close = difflib.get_close_matches(e.name, self._names(), n=1)
            if e.name in self.signatures or is_builtin(e.name):
                hint = f"'{e.name}' is a function; call it with ( )"
            elif e.name.isupper() and len(e.name) > 1:
                hint = f"is '{e.name}' a macro that needs a define (-D {e.name}=...)?"
            elif close:
                hint = f"did you mean '{close[0]}'?"
            self.name_error("E0301", f"use of undeclared identifier '{e.name}'", e.loc, hint)
            return self.typed(e, None)
        if sym.kind == "poison":
            return self.typed(e, None)
        return self.typed(e, sym.ty, sym.const)

    def x_Unary(self, e: ast.Unary) -> ast.Expr:
        op = e.op
        operand = self.expr(e.operand)
        t = operand.ty
        new = attrs.evolve(e, operand=operand)
        if t is None:
            return self.typed(new, None)
        if op in ("pre++", "pre--", "post++", "post--"):
            if not self.assignable(operand, e.operand.loc, op[-2:]):
                return self.typed(new, None)
            el = element_of(t)
            if isinstance(el, ScalarType) and (el.is_void or el.is_bool):
                self.type_error("E0401", f"cannot apply '{op[-2:]}' to {_q(t)}", e.loc)
                return self.typed(new, None)
            return self.typed(new, t)
        if op == "&":
            self.type_error("E0414", "cannot take the address of a value: variables and tiles "
                            "live in registers", e.loc,
                            hint="use pointer arithmetic on a pointer parameter instead")
            return self.typed(new, None)
        if op == "^":
            if not isinstance(t, TileType) or t.rank < 2:
                self.shape_error("E0509", f"transpose '^' needs a tile of rank 2 or more, not "
                                 f"{_q(t)}", e.loc)
                return self.typed(new, None)
            shape = t.shape[1:] + t.shape[:1]
            return self.typed(new, TileType(shape, t.element))
        el = element_of(t)
        if isinstance(el, ScalarType) and el.is_void:
            self.type_error("E0413", f"operator '{op}' cannot apply to a void value", e.loc)
            return self.typed(new, None)
        try:
            rt = unary_type(op, t)
        except RuleError as err:
            self.type_error("E0401", str(err), e.loc)
            return self.typed(new, None)
        const = None
        if operand.const is not None and not isinstance(rt, TileType):
            rel = element_of(rt)
            if isinstance(rel, ScalarType):
                try:
                    const = consts.unary(op, operand.const, rel)
                except consts.FoldError:
                    const = None
                if const is not None and consts.unary_overflow(op, operand.const, rel):
                    self.warn("W0301", f"integer overflow in a constant expression: -({operand.const}) "
                              f"does not fit in {_q(rel)} (folded to {const})", e.loc)
        return self.typed(new, rt, const)

    def assignable(self, target: ast.Expr, loc: Location, op: str) -> bool:
        """Whether `target` (already checked) can be assigned; reports why not."""
        if isinstance(target, ast.Name):
            sym = self.lookup(target.name)
            if sym is None or sym.kind == "poison":
                return False
            if sym.kind == "builtin":
                self.type_error("E0406", f"cannot assign to built-in constant '{target.name}'",
                                loc)
                return False
            if sym.readonly:
                self.type_error("E0412", f"cannot assign to '{target.name}': it is const", loc)
                return False
            return True
        if isinstance(target, ast.Deref):
            if op in ("++", "--"):
                self.type_error("E0406", f"'{op}' needs a variable, not a dereference", loc,
                                hint="write *p = *p + 1")
                return False
            root = _pointer_root(target.pointer)
            sym = self.lookup(root) if root is not None else None
            if sym is not None and sym.points_to_const:
                self.type_error("E0412", f"cannot store through '{root}': it points to const", loc,
                                hint=f"declare '{root}' without const to write through it")
                return False
            if sym is not None and sym.read_only_attribute:
                self.type_error("E0412", f"cannot store through '{root}': it is declared __readonly", loc,
                                hint=f"drop __readonly from '{root}' to write through it")
                return False
            return True
        self.type_error("E0406", f"the left side of '{op}' is not assignable", loc,
                        hint="assign to a variable or to a dereference *p / *?(mask) p")
        return False

    def x_Binary(self, e: ast.Binary) -> ast.Expr:
        left = self.expr(e.left)
        right = self.expr(e.right)
        new = attrs.evolve(e, left=left, right=right)
        lt, rt = left.ty, right.ty
        if lt is None or rt is None:
            return self.typed(new, None)
        if e.op == "@":
            try:
                _, res = matmul_types(lt, rt)
            except RuleError as err:
                msg = str(err)
                if "inner" in msg or "2-D" in msg or "two tiles" in msg:
                    self.shape_error("E0506", msg, e.loc)
                else:
                    self.type_error("E0401", msg, e.loc)
                return self.typed(new, None)
            return self.typed(new, res)
        for side, t in ((left, lt), (right, rt)):
            el = element_of(t)
            if isinstance(el, ScalarType) and el.is_void:
                self.type_error("E0413", "a void value used in an expression", side.loc)
                return self.typed(new, None)
        try:
            broadcast_shapes(shape_of(lt), shape_of(rt))
        except RuleError as err:
            self.shape_error("E0501", str(err) + f" for '{e.op}'", e.loc,
                             hint="insert axes with x[:, newaxis] / x[newaxis, :] to broadcast")
            return self.typed(new, None)
        try:
            operand, res = binary_types(e.op, lt, rt)
        except RuleError as err:
            self.type_error("E0401", str(err), e.loc)
            return self.typed(new, None)
        oe0 = element_of(operand)
        if e.op in ("/", "%") and right.const is not None and right.const == 0 and \
                isinstance(oe0, ScalarType) and oe0.is_integer:
            # (undefined in C whatever the dividend; the GPU gives garbage, not an error)
            self.type_error("E0410", f"integer division by zero: the divisor of '{e.op}' is 0", e.loc)
            return self.typed(new, None)
        const = None
        if left.const is not None and right.const is not None and not isinstance(res, TileType):
            oe, re_ = element_of(operand), element_of(res)
            if isinstance(oe, ScalarType) and isinstance(re_, ScalarType):
                try:
                    const = consts.binary(e.op, left.const, right.const, oe, re_)
                except consts.FoldError as err:
                    self.type_error("E0410", str(err), e.loc)
                    return self.typed(new, None)
                if consts.signed_overflow(e.op, left.const, right.const, oe):
                    self.warn("W0301", f"integer overflow in a constant expression: {left.const} "
                              f"{e.op} {right.const} does not fit in {_q(oe)} (folded to {const})",
                              e.loc, hint=_overflow_hint(oe))
        elif e.op in ("<<", ">>") and right.const is not None:
            self.check_shift_count(e.op, right, operand, e.loc, left=e.left)
        return self.typed(new, res, const)

    def check_shift_count(self, op: str, count: ast.Expr, operand: Type, loc: Location, *,
                          left: ast.Expr | None = None) -> None:
        """Warn of a constant shift count that C leaves undefined for a left operand that is not
        constant (a constant one is folded, and refused: E0410); the code is not changed."""
        el = element_of(operand)
        if not isinstance(el, ScalarType) or not el.is_integer or isinstance(count.ty, TileType):
            return
        n = int(count.const)  # type: ignore[arg-type]
        if n < 0:
            self.warn("W0302", f"negative shift count {n} for '{op}'", loc,
                      hint="the result is undefined in C")
        elif n >= el.bits:
            hint = "the result is undefined in C"
            if n < 64 and el.bits < 64 and left is not None:  # (not for `x <<= n`: x keeps its type)
                hint += f"; convert to a 64-bit type first: ((long) {to_source(left)}) {op} {n}"
            self.warn("W0302", f"shift count {n} >= width of type {_q(el)} ({el.bits} bits) for "
                      f"'{op}'", loc, hint=hint)

    def x_Assign(self, e: ast.Assign) -> ast.Expr:
        outer, self.store_target = self.store_target, e.target if e.op == "=" else None
        try:
            target = self.expr(e.target)
        finally:
            self.store_target = outer
        value = self.expr(e.value)
        new = attrs.evolve(e, target=target, value=value)
        if target.ty is None or value.ty is None:
            return self.typed(new, None)
        if not self.assignable(target, e.target.loc, e.op):
            return self.typed(new, None)
        tt = target.ty
        if e.op == "=":
            if not self.convertible(value, tt, self._target_name(target), e.value.loc):
                return self.typed(new, None)
            return self.typed(new, tt)
        op = e.op[:-1]
        try:
            broadcast_shapes(shape_of(tt), shape_of(value.ty))
            _, res = binary_types(op, tt, value.ty)
        except RuleError as err:
            if "broadcast" in str(err):
                self.shape_error("E0501", str(err) + f" for '{e.op}'", e.loc)
            else:
                self.type_error("E0401", str(err), e.loc)
            return self.typed(new, None)
        if op in ("<<", ">>") and value.const is not None:
            self.check_shift_count(op, value, res, e.loc)
        probe = self.typed(value, res)
        if not self.convertible(probe, tt, self._target_name(target), e.loc):
            return self.typed(new, None)
        return self.typed(new, tt)

    @staticmethod
    def _target_name(target: ast.Expr) -> str:
        if isinstance(target, ast.Name):
            return f"'{target.name}'"
        return "the stored value"

    def x_Conditional(self, e: ast.Conditional) -> ast.Expr:
        cond = self.expr(e.cond)
        then = self.expr(e.then)
        other = self.expr(e.otherwise)
        new = attrs.evolve(e, cond=cond, then=then, otherwise=other)
        if cond.ty is None or then.ty is None or other.ty is None:
            return self.typed(new, None)
        ce = element_of(cond.ty)
        if isinstance(ce, ScalarType) and ce.is_void:
            self.type_error("E0413", "the condition is void", e.cond.loc)
            return self.typed(new, None)
        try:
            shape = broadcast_shapes(shape_of(cond.ty), shape_of(then.ty))
            shape = broadcast_shapes(shape, shape_of(other.ty))
        except RuleError as err:
            self.shape_error("E0501", str(err) + " in '?:'", e.loc)
            return self.typed(new, None)
        el = self.common_element(then, other, e.loc, "'?:'")
        if el is None:
            return self.typed(new, None)
        ty = with_shape(el, shape)
        const = None
        if cond.const is not None and not shape:
            chosen = then if cond.const else other
            if chosen.const is not None and isinstance(el, ScalarType):
                try:
                    const = consts.convert(chosen.const, el)
                except consts.FoldError:
                    const = None
        return self.typed(new, ty, const)

    def common_element(
        self, a: ast.Expr, b: ast.Expr, loc: Location, what: str
    ) -> ElementType | None:
        assert a.ty is not None and b.ty is not None
        ae, be = element_of(a.ty), element_of(b.ty)
        if isinstance(ae, PointerType) or isinstance(be, PointerType):
            if ae == be:
                return ae
            if isinstance(ae, PointerType) and isinstance(be, ScalarType) and b.const == 0:
                return ae
            if isinstance(be, PointerType) and isinstance(ae, ScalarType) and a.const == 0:
                return be
            self.type_error("E0401", f"{what} mixes {_q(ae)} and {_q(be)}", loc)
            return None
        try:
            return common_scalar(ae, be)
        except RuleError as err:
            self.type_error("E0401", str(err), loc)
            return None

    def x_Comma(self, e: ast.Comma) -> ast.Expr:
        exprs = tuple(self.expr(x) for x in e.exprs)
        new = attrs.evolve(e, exprs=exprs)
        if any(x.ty is None for x in exprs):
            return self.typed(new, None)
        return self.typed(new, exprs[-1].ty)

    def x_Cast(self, e: ast.Cast) -> ast.Expr:
        operand = self.expr(e.operand)
        target = self.resolve_type(e.type, "cast", allow_void=True)
        new = attrs.evolve(e, type=self.typed_typename(e.type), operand=operand)
        st = operand.ty
        if st is None or target is None:
            return self.typed(new, None)
        te = element_of(target)
        se = element_of(st)
        if isinstance(te, ScalarType) and te.is_void and e.type.dims is None:
            return self.typed(new, target)
        if isinstance(se, ScalarType) and se.is_void:
            self.type_error("E0411", "cannot cast a void value", e.loc)
            return self.typed(new, None)
        if isinstance(te, PointerType) != isinstance(se, PointerType):
            integer = te if isinstance(te, ScalarType) else se
            assert isinstance(integer, ScalarType)
            if not integer.is_integer or integer.is_bool:
                self.type_error("E0411", f"cannot cast {_q(se)} to {_q(te)}", e.loc)
                return self.typed(new, None)
        ss = shape_of(st)
        if e.type.dims is None:
            result = with_element(st, te) if ss else target
        else:
            assert isinstance(target, TileType)
            ts = target.shape
            if ss and ss != ts:
                if TileType(ss, se).numel != target.numel:
                    try:
                        ok = broadcast_shapes(ss, ts) == ts
                    except RuleError:
                        ok = False
                    if not ok:
                        self.shape_error("E0511", f"cannot cast a tile of shape {_fmt_shape(ss)} "
                                         f"to shape {_fmt_shape(ts)}", e.loc,
                                         hint="a tile cast splats a scalar, reshapes a tile of "
                                         "the same size, or broadcasts")
                        return self.typed(new, None)
            result = target
        const = None
        if operand.const is not None and isinstance(result, ScalarType):
            try:
                const = consts.convert(operand.const, result)
            except consts.FoldError:
                const = None
        return self.typed(new, result, const)

    def x_Bitcast(self, e: ast.Bitcast) -> ast.Expr:
        operand = self.expr(e.operand)
        target = self.resolve_type(e.type, "bitcast")
        new = attrs.evolve(e, type=self.typed_typename(e.type), operand=operand)
        if operand.ty is None or target is None:
            return self.typed(new, None)
        se, te = element_of(operand.ty), element_of(target)
        if isinstance(target, TileType) and target.shape != shape_of(operand.ty):
            self.shape_error("E0511", f"bitcast cannot change the shape "
                             f"{_fmt_shape(shape_of(operand.ty))} to {_fmt_shape(target.shape)}",
                             e.loc)
            return self.typed(new, None)
        sb = 64 if isinstance(se, PointerType) else se.bits
        tb = 64 if isinstance(te, PointerType) else te.bits
        if (isinstance(se, ScalarType) and (se.is_bool or se.is_void)) or (
            isinstance(te, ScalarType) and (te.is_bool or te.is_void)
        ) or sb != tb:
            self.type_error("E0411", f"bitcast needs types of equal width: {_q(se)} is {sb} bits, "
                            f"{_q(te)} is {tb}", e.loc)
            return self.typed(new, None)
        result = with_shape(te, shape_of(operand.ty))
        const = None
        if operand.const is not None and isinstance(se, ScalarType) and isinstance(te, ScalarType) \
                and not shape_of(operand.ty):
            try:
                const = consts.bitcast(operand.const, se, te)
            except (consts.FoldError, KeyError, OverflowError):
                const = None
        return self.typed(new, result, const)

    def x_SizeOf(self, e: ast.SizeOf) -> ast.Expr:
        if isinstance(e.operand, ast.TypeName):
            t = self.resolve_type(e.operand, "sizeof")
            operand: ast.TypeName | ast.Expr = self.typed_typename(e.operand)
        else:
            operand = self.expr(e.operand)
            t = operand.ty
        new = attrs.evolve(e, operand=operand)
        if t is None:
            return self.typed(new, None)
        el = element_of(t)
        size = 8 if isinstance(el, PointerType) else max(1, el.bits // 8)
        if isinstance(el, ScalarType) and el.is_void:
            self.type_error("E0413", "sizeof of 'void'", e.loc)
            return self.typed(new, None)
        n = t.numel if isinstance(t, TileType) else 1
        return self.typed(new, INT64, size * n)

    def x_Range(self, e: ast.Range) -> ast.Expr:
        start = self.expr(e.start)
        end = self.expr(e.end)
        new = attrs.evolve(e, start=start, end=end)
        values = []
        for side, orig in ((start, e.start), (end, e.end)):
            if side.ty is None:
                return self.typed(new, None)
            el = element_of(side.ty)
            if side.const is None or isinstance(side.ty, TileType) or not (
                isinstance(el, ScalarType) and el.is_integer
            ):
                self.type_error("E0403", "the bounds of a range must be integer constants",
                                orig.loc, hint="write 'pid * BLOCK + 0 ... BLOCK' for an offset "
                                "range")
                return self.typed(new, None)
            values.append(int(side.const))
        n = values[1] - values[0]
        if n <= 0:
            self.shape_error("E0510", f"empty range {values[0]} ... {values[1]}", e.loc)
            return self.typed(new, None)
        if values[0] < -(2**31) or values[1] - 1 >= 2**31:
            # (a range is an int tile: its elements must be ints)
            self.type_error("E0403", f"the elements of the range {values[0]} ... {values[1]} do "
                            "not fit in 'int'", e.loc, hint="add the offset to a small range: "
                            "'OFFSET + 0 ... N'")
            return self.typed(new, None)
        if not is_tile_dimension(n) or n > _MAX_TILE_ELEMENTS:
            self.shape_error("E0502", f"range {values[0]} ... {values[1]} has {n} elements",
                             e.loc, hint=f"tile dimensions must be powers of two or multiples of "
                             f"{TILE_GRANULE}")
            return self.typed(new, None)
        return self.typed(new, TileType((n,), INT32))

    def x_Subscript(self, e: ast.Subscript) -> ast.Expr:
        base = self.expr(e.base)
        items = []
        for it in e.items:
            value = self.expr(it.value) if it.value is not None else None
            items.append(attrs.evolve(it, value=value))
        new = attrs.evolve(e, base=base, items=tuple(items))
        t = base.ty
        if t is None or any(i.value is not None and i.value.ty is None for i in items):
            return self.typed(new, None)
        if not isinstance(t, TileType):
            self.shape_error("E0508", f"subscript of a scalar {_q(t)}: subscripts broadcast, "
                             "reduce or permute tiles", e.loc,
                             hint="there is no C indexing; write *(p + i)")
            return self.typed(new, None)
        consumed = [i for i in items if i.kind != "newaxis"]
        if len(consumed) != t.rank:
            self.shape_error("E0504", f"subscript uses {len(consumed)} axes of a tile of rank "
                             f"{t.rank} (shape {_fmt_shape(t.shape)})", e.loc,
                             hint="every axis needs one of ':', '+', '-', 'max', 'min' or '^k'; "
                             "'newaxis' adds one")
            return self.typed(new, None)
        perms = [i for i in items if i.kind == "^"]
        if perms:
            if len(perms) != len(items):
                self.shape_error("E0505", "a permutation subscript must use '^k' for every axis",
                                 e.loc)
                return self.typed(new, None)
            axes = []
            for p in perms:
                assert p.value is not None
                k = p.value.const
                pel = element_of(p.value.ty) if p.value.ty is not None else None
                if k is None or not (isinstance(pel, ScalarType) and pel.is_integer) or \
                        isinstance(p.value.ty, TileType):
                    self.type_error("E0403", "a permutation axis must be an integer constant",
                                    p.loc)
                    return self.typed(new, None)
                axes.append(int(k))
            if sorted(axes) != list(range(t.rank)):
                self.shape_error("E0505", f"'^' axes {axes} are not a permutation of the "
                                 f"{t.rank} axes", e.loc)
                return self.typed(new, None)
            return self.typed(new, TileType(tuple(t.shape[a] for a in axes), t.element))
        shape: list[int] = []
        element: ElementType = t.element
        axis = 0
        for i in items:
            if i.kind == "newaxis":
                shape.append(1)
                continue
            if i.kind == ":":
                shape.append(t.shape[axis])
            else:
                if isinstance(element, PointerType) or (
                    isinstance(t.element, ScalarType) and t.element.is_void
                ):
                    self.type_error("E0401", f"cannot reduce a tile of {_q(t.element)}", i.loc)
                    return self.typed(new, None)
                if i.kind in ("+", "-") and isinstance(t.element, ScalarType):
                    element = integer_promotion(t.element)
            axis += 1
        return self.typed(new, with_shape(element, tuple(shape)))

    def x_Deref(self, e: ast.Deref) -> ast.Expr:
        pointer = self.expr(e.pointer)
        mask = self.expr(e.mask) if e.mask is not None else None
        new = attrs.evolve(e, pointer=pointer, mask=mask)
        if pointer.ty is None or (mask is not None and mask.ty is None):
            return self.typed(new, None)
        pe = element_of(pointer.ty)
        if not isinstance(pe, PointerType):
            self.type_error("E0408", f"cannot dereference {_q(pointer.ty)}: not a pointer",
                            e.pointer.loc)
            return self.typed(new, None)
        if isinstance(pe.pointee, ScalarType) and pe.pointee.is_void:
            self.type_error("E0408", "cannot dereference a 'void*'", e.pointer.loc,
                            hint="cast it to a typed pointer first")
            return self.typed(new, None)
        root = _pointer_root(pointer)
        sym = self.lookup(root) if root is not None and e is not self.store_target else None
        if sym is not None and sym.write_only_attribute:
            self.type_error("E0412", f"cannot load through '{root}': it is declared __writeonly", e.loc,
                            hint=f"drop __writeonly from '{root}' to read through it")
            return self.typed(new, None)
        shape = shape_of(pointer.ty)
        if mask is not None and mask.ty is not None:
            me = element_of(mask.ty)
            if not (isinstance(me, ScalarType) and me.is_bool):
                self.type_error("E0409", f"a mask must be bool, not {_q(mask.ty)}",
                                e.mask.loc if e.mask is not None else e.loc,
                                hint="compare to get a bool tile, e.g. *?(x != 0) p")
                return self.typed(new, None)
            try:
                shape = broadcast_shapes(shape, shape_of(mask.ty))
            except RuleError as err:
                self.shape_error("E0501", f"mask and pointer: {err}", e.loc)
                return self.typed(new, None)
        return self.typed(new, with_shape(pe.pointee, shape))

    # ------------------------------------------------------------------ calls

    def x_Call(self, e: ast.Call) -> ast.Expr:
        args = tuple(self.expr(a) for a in e.args)
        new = attrs.evolve(e, args=args)
        name = e.func
        if is_builtin(name):
            lo, hi = arity(name)
            if not lo <= len(args) <= hi:
                want = str(lo) if lo == hi else f"{lo} or {hi}"
                self.type_error("E0402", f"'{name}' takes {want} argument"
                                f"{'s' if hi != 1 else ''}, not {len(args)}", e.loc)
                return self.typed(new, None)
            if any(a.ty is None for a in args):
                return self.typed(new, None)
            return self.builtin(new, name, args)
        sig = self.signatures.get(name)
        if sig is None:
            hint = None
            close = difflib.get_close_matches(name, sorted(self.signatures) + sorted(
                ["get_program_id", "get_num_programs", "exp", "log", "sqrt", "sqrtf", "max",
                 "min", "atomic_add", "atomic_cas", "select"]), n=1)
            if close:
                hint = f"did you mean '{close[0]}'?"
            self.name_error("E0303", f"call of unknown function '{name}'", e.loc, hint)
            return self.typed(new, None)
        if sig.kind == "global":
            self.name_error("E0306", f"'{name}' is a __global__ kernel and cannot be called",
                            e.loc, hint="make it a __device__ function")
            return self.typed(new, None)
        if self.function is not None:
            self.calls.setdefault(self.function.name, []).append((name, e.loc))
        if len(args) != len(sig.params):
            self.type_error("E0402", f"'{name}' takes {len(sig.params)} argument"
                            f"{'s' if len(sig.params) != 1 else ''}, not {len(args)}", e.loc)
            return self.typed(new, None)
        ok = True
        for i, (a, p) in enumerate(zip(args, sig.params)):
            if a.ty is None or p is None:
                ok = False
                continue
            if not self.convertible(a, p, f"argument {i + 1} of '{name}'", a.loc):
                ok = False
        if not ok or sig.ret is None:
            return self.typed(new, None)
        return self.typed(new, sig.ret)

    def builtin(self, e: ast.Call, name: str, args: tuple[ast.Expr, ...]) -> ast.Expr:
        tys = [a.ty for a in args]
        assert all(t is not None for t in tys)
        if name in PROGRAM_QUERIES:
            a = args[0]
            if a.const is None or isinstance(a.ty, TileType) or not (
                isinstance(element_of(a.ty), ScalarType) and element_of(a.ty).is_integer  # type: ignore[arg-type, union-attr]
            ):
                self.type_error("E0403", f"the axis of '{name}' must be an integer constant",
                                a.loc)
                return self.typed(e, None)
            if int(a.const) not in (0, 1, 2):
                self.type_error("E0417", f"the axis of '{name}' must be 0, 1 or 2, not "
                                f"{int(a.const)}", a.loc)
                return self.typed(e, None)
            return self.typed(e, INT32)
        if name == "__debug_barrier":
            return self.typed(e, ScalarType("void"))
        shape = self.broadcast_args(e, args)
        if shape is None:
            return self.typed(e, None)
        if name in UNARY_MATH:
            el = element_of(tys[0])  # type: ignore[arg-type]
            if not isinstance(el, ScalarType) or el.is_void:
                self.type_error("E0401", f"'{name}' needs a number, not {_q(tys[0])}", args[0].loc)
                return self.typed(e, None)
            return self.typed(e, with_shape(math_result(name, el), shape))
        if name in ("min", "max"):
            el2 = self.numeric_common(args, name)
            if el2 is None:
                return self.typed(e, None)
            const = None
            if all(a.const is not None for a in args) and not shape:
                try:
                    x, y = (consts.convert(a.const, el2) for a in args)  # type: ignore[arg-type]
                    const = min(x, y) if name == "min" else max(x, y)
                except consts.FoldError:
                    const = None
            return self.typed(e, with_shape(el2, shape), const)
        if name in ("fma", "fmaf"):
            el3 = self.numeric_common(args, name)
            if el3 is None:
                return self.typed(e, None)
            if not el3.is_float or name == "fmaf":
                el3 = FP32
            return self.typed(e, with_shape(el3, shape))
        if name == "select":
            ce = element_of(tys[0])  # type: ignore[arg-type]
            if isinstance(ce, ScalarType) and ce.is_void:
                self.type_error("E0413", "the condition of 'select' is void", args[0].loc)
                return self.typed(e, None)
            el4 = self.common_element(args[1], args[2], e.loc, "'select'")
            if el4 is None:
                return self.typed(e, None)
            return self.typed(e, with_shape(el4, shape))
        # atomics
        pe = element_of(tys[0])  # type: ignore[arg-type]
        if not isinstance(pe, PointerType) or not isinstance(pe.pointee, ScalarType) or \
                pe.pointee.is_void:
            what = "a pointer to numbers" if isinstance(pe, PointerType) else "a pointer"
            self.type_error("E0408", f"the first argument of '{name}' must be {what}, not "
                            f"{_q(tys[0])}", args[0].loc)
            return self.typed(e, None)
        pointee = pe.pointee
        if pointee.is_bool:
            # (a bool is a byte in memory but one bit in registers: no atomic of the GPU fits it)
            self.type_error("E0401", f"'{name}' cannot operate on 'bool' memory; use a char or "
                            "int flag", args[0].loc)
            return self.typed(e, None)
        values = args[1:3] if name == "atomic_cas" else args[1:2]
        for v in values:
            ve = element_of(v.ty)  # type: ignore[arg-type]
            if not isinstance(ve, ScalarType) or ve.is_void:
                self.type_error("E0401", f"'{name}' needs a number to combine with "
                                f"{_q(pointee)}, not {_q(v.ty)}", v.loc)
                return self.typed(e, None)
        if name in ATOMIC_RMW and len(args) == 3:
            me = element_of(args[2].ty)  # type: ignore[arg-type]
            if not (isinstance(me, ScalarType) and me.is_bool):
                self.type_error("E0409", f"a mask must be bool, not {_q(args[2].ty)}", args[2].loc)
                return self.typed(e, None)
        return self.typed(e, with_shape(pointee, shape))

    def broadcast_args(self, e: ast.Call, args: Sequence[ast.Expr]) -> tuple[int, ...] | None:
        shape: tuple[int, ...] = ()
        for a in args:
            assert a.ty is not None
            try:
                shape = broadcast_shapes(shape, shape_of(a.ty))
            except RuleError as err:
                self.shape_error("E0501", f"arguments of '{e.func}': {err}", e.loc)
                return None
        return shape

    def numeric_common(self, args: Sequence[ast.Expr], name: str) -> ScalarType | None:
        el: ScalarType | None = None
        for a in args:
            ae = element_of(a.ty)  # type: ignore[arg-type]
            if not isinstance(ae, ScalarType) or ae.is_void:
                self.type_error("E0401", f"'{name}' needs numbers, not {_q(a.ty)}", a.loc)
                return None
            el = ae if el is None else common_scalar(el, ae)
        return el


def _overflow_hint(t: ScalarType) -> str | None:
    """How to compute a constant without the overflow: in a wider type, or unsigned."""
    if t.bits < 64:
        return "the value wraps around; compute in a wider type to keep it (e.g. an 'L' suffix)"
    return "the value wraps around; use unsigned arithmetic (a 'u' suffix) if that is intended"


def _is_void_ptr(p: PointerType) -> bool:
    return isinstance(p.pointee, ScalarType) and p.pointee.is_void


def _returns(s: ast.Stmt) -> bool:
    """Whether every path through `s` ends in a return."""
    if isinstance(s, ast.Return):
        return True
    if isinstance(s, ast.Compound):
        return any(_returns(x) for x in s.items)
    if isinstance(s, ast.If):
        return s.otherwise is not None and _returns(s.then) and _returns(s.otherwise)
    if isinstance(s, ast.DoWhile):
        return _returns(s.body)
    return False


def check(unit: ast.TranslationUnit) -> ast.TranslationUnit:
    """The typed tree of `unit`; raises the unit's errors together (a TcCompileError subclass)."""
    return Checker(unit).run()


__all__ = ["Checker", "check"]
