"""The one textual form of the tile IR (MLIR-like), printed generically from the op registry.

Every op prints as::

    %r0, %r1 = tc.name %a, %b {attr = value, ...} : type0, type1 ({
    ^(%arg: type, ...):
      ...
    }, {
      ...
    }) loc("file.tc":3:22)

Operands are names only (their types are known from their definitions); the types after the colon
are the result types. Attributes come from `Op.attribute_names()` and print in declaration order.
Values print as their name hints made unique within the function (``%acc``, ``%acc_1``) or as
numbers (``%0``, ``%1``) in definition order, so the text is deterministic. `ir_parser` reads
exactly this form back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

import attrs

from tc_lang.diagnostics import Location

from .layouts import Blocked, DotOperand, Mma, Shared, Slice
from .ops import Block, Function, Module, Operation, Value
from .types import PointerType, ScalarType, TileType

_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_INDENT = "  "


def format_location(loc: Location | None) -> str:
    """`loc("file":line:col)`, or the empty string when the op has no location."""
    if loc is None:
        return ""
    return f"loc({json.dumps(loc.file)}:{loc.line}:{loc.col})"


def format_attribute(value: Any) -> str:
    """An attribute value: int, float (always with '.', 'e', inf or nan), bool, str, None,
    a list/tuple of those, or an IR type / layout."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attribute(v) for v in value) + "]"
    if isinstance(value, (ScalarType, PointerType, TileType, Blocked, Slice, Mma, DotOperand, Shared)):
        return str(value)
    if isinstance(value, dict):
        return format_attribute_dict(value)
    raise TypeError(f"cannot print IR attribute value {value!r} of type {type(value).__name__}")


def format_attribute_dict(attributes: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k} = {format_attribute(v)}" for k, v in attributes.items()) + "}"


class Namer:
    """Unique, deterministic SSA names for the values of one function."""

    def __init__(self, define_unknown: bool = False) -> None:
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        #: per base name, the suffix its next value tries first (those before it are used, and a
        #: name stays used): without it a hint shared by thousands of values is quadratic
        self.suffix: dict[str, int] = {}
        self.counter = 0
        self.define_unknown = define_unknown

    def define(self, value: Value, hint: str | None = None) -> str:
        hint = hint if hint is not None else value.name_hint
        if hint:
            base = re.sub(r"[^A-Za-z0-9_.]", "_", hint)
            if not _NAME_OK.match(base):
                base = "v" + base
            n = self.suffix.get(base, 0)
            name = base if n == 0 else f"{base}_{n}"
            while name in self.used:
                n += 1
                name = f"{base}_{n}"
            self.suffix[base] = n
        else:
            while str(self.counter) in self.used:
                self.counter += 1
            name = str(self.counter)
            self.counter += 1
        self.used.add(name)
        self.names[id(value)] = name
        return "%" + name

    def use(self, value: Value) -> str:
        name = self.names.get(id(value))
        if name is None and self.define_unknown:
            return self.define(value)
        # A value not defined in this function (a verifier error) still prints, visibly.
        return "%" + name if name is not None else f"%<undefined {value.type}>"


def _non_default_attributes(op: Operation) -> dict[str, Any]:
    """The op's attributes, leaving out those equal to their declared default (less noise)."""
    out: dict[str, Any] = {}
    for f in attrs.fields(type(op)):
        if f.name not in op.attribute_names():
            continue
        value = getattr(op, f.name)
        default = f.default
        if f.name in op.ALWAYS_PRINTED:
            pass
        elif default is not attrs.NOTHING and not isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            if type(value) is type(default) and value == default:
                continue
        out[f.name] = value
    return out


def _join(parts: Iterable[str]) -> str:
    return ", ".join(parts)


class _Printer:
    def __init__(self, define_unknown: bool = False) -> None:
        self.namer = Namer(define_unknown)
        self.lines: list[str] = []

    def block(self, block: Block, depth: int) -> None:
        if block.args:
            args = _join(f"{self.namer.define(a)}: {a.type}" for a in block.args)
            self.lines.append(_INDENT * (depth - 1) + f"^({args}):")
        for op in block.ops:
            self.op(op, depth)

    def op(self, op: Operation, depth: int) -> None:
        pad = _INDENT * depth
        text = ""
        operands = [self.namer.use(v) for v in op.operands]
        if op.results:
            text = _join(self.namer.define(r) for r in op.results) + " = "
        text += op.NAME
        if operands:
            text += " " + _join(operands)
        attrs = _non_default_attributes(op)
        if attrs:
            text += " " + format_attribute_dict(attrs)
        if op.results:
            text += " : " + _join(str(r.type) for r in op.results)
        loc = format_location(op.loc)
        if not op.regions:
            self.lines.append(pad + text + (" " + loc if loc else ""))
            return
        self.lines.append(pad + text + " ({")
        for i, region in enumerate(op.regions):
            if i:
                self.lines.append(pad + "}, {")
            self.block(region, depth + 1)
        self.lines.append(pad + "})" + (" " + loc if loc else ""))

    def function(self, fn: Function, depth: int) -> None:
        pad = _INDENT * depth
        args = []
        for i, arg in enumerate(fn.args):
            hint = fn.arg_names[i] if i < len(fn.arg_names) else None
            text = f"{self.namer.define(arg, hint)}: {arg.type}"
            attrs = fn.arg_attrs[i] if i < len(fn.arg_attrs) else {}
            if attrs:
                text += " " + format_attribute_dict(attrs)
            args.append(text)
        head = f"tc.func {fn.kind} @{fn.name}({_join(args)})"
        loc = format_location(fn.loc)
        self.lines.append(pad + head + (" " + loc if loc else "") + " {")
        for op in fn.body.ops:
            self.op(op, depth + 1)
        self.lines.append(pad + "}")


def print_op(op: Operation) -> str:
    """One op (and its regions) on its own, for messages; values defined outside it get names."""
    p = _Printer(define_unknown=True)
    p.op(op, 0)
    return "\n".join(p.lines)


def print_function(fn: Function) -> str:
    """The function's text on its own, outside a module; `ir_parser.parse_function` reads it back."""
    p = _Printer()
    p.function(fn, 0)
    return "\n".join(p.lines) + "\n"


def print_module(module: Module) -> str:
    """The module's text; `ir_parser.parse_module` reads it back to an equal module."""
    head = "module"
    if module.attributes:
        head += " attributes " + format_attribute_dict(module.attributes)
    lines = [head + " {"]
    for fn in module.functions:
        p = _Printer()
        p.function(fn, 1)
        lines.extend(p.lines)
    lines.append("}")
    return "\n".join(lines) + "\n"
