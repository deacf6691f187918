"""Reads the IR text that `printer` writes back into a `Module` (or a lone function / type).

A small recursive-descent parser over characters. An op's operands, attributes, types, regions and
location must start on the op's line (so that an op without operands is not confused with the next
op's results). Every mistake raises `IRParseError` naming the line and column of the text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tc_lang.diagnostics import Category, Diagnostic, Location, TcCompileError

from .layouts import Blocked, DotOperand, Layout, Mma, Shared, Slice
from .ops import OPS, Block, Function, Module, Operation, Value
from .types import ElementType, IRType, PointerType, ScalarType, TileType

_SCALARS = ("bf16", "i16", "i32", "i64", "i1", "i8", "f16", "f32", "f64")
_RE_WS_LINE = re.compile(r"[ \t]*")
_RE_WS = re.compile(r"(?:\s+|//[^\n]*)*")
_RE_VALUE = re.compile(r"%([A-Za-z0-9_.]+)")
_RE_SYMBOL = re.compile(r"@([A-Za-z_][A-Za-z0-9_.$]*)")
_RE_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_RE_NUMBER = re.compile(r"-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)")
_RE_INT = re.compile(r"-?\d+")
_RE_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_RE_DIMS = re.compile(r"(?:\d+x)*")


class IRParseError(TcCompileError):
    """The IR text is malformed; the message names line:col in the text."""

    def __init__(self, message: str, location: Location, source_line: str | None = None) -> None:
        diag = Diagnostic(Category.SYNTAX, "E0290", message, location, source_line=source_line)
        super().__init__([diag])
        self.location = location


def _hint(name: str) -> str | None:
    return None if name.isdigit() else name


class _Parser:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.pos = 0
        self.filename = filename
        self.scopes: list[dict[str, Value]] = []
        self.defined: set[str] = set()

    # ---------------------------------------------------------------------------- low level

    def error(self, message: str, pos: int | None = None) -> IRParseError:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        source = self.text[start : end if end >= 0 else len(self.text)]
        return IRParseError(message, Location(self.filename, line, pos - start + 1), source)

    def ws(self) -> None:
        m = _RE_WS.match(self.text, self.pos)
        assert m is not None
        self.pos = m.end()

    def ws_line(self) -> None:
        m = _RE_WS_LINE.match(self.text, self.pos)
        assert m is not None
        self.pos = m.end()

    def at(self, s: str, same_line: bool = False) -> bool:
        self.ws_line() if same_line else self.ws()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str, same_line: bool = False) -> bool:
        if self.at(s, same_line):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.accept(s):
            raise self.error(f"expected {what or repr(s)}, found {self.found()}")

    def found(self) -> str:
        if self.pos >= len(self.text):
            return "end of text"
        m = re.compile(r"\S+").match(self.text, self.pos)
        word = m.group(0) if m else self.text[self.pos]
        return repr(word[:30])

    def match(self, regex: re.Pattern[str], what: str, same_line: bool = False) -> re.Match[str]:
        self.ws_line() if same_line else self.ws()
        m = regex.match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = m.end()
        return m

    def integer(self) -> int:
        return int(self.match(_RE_INT, "an integer").group(0))

    # ---------------------------------------------------------------------------- types

    def type(self) -> IRType:
        self.ws()
        start = self.pos
        if self.accept("tile<"):
            dims_m = _RE_DIMS.match(self.text, self.pos)
            assert dims_m is not None
            self.pos = dims_m.end()
            shape = tuple(int(d) for d in dims_m.group(0).split("x")[:-1])
            element = self.element_type()
            layout: Layout | None = None
            if self.accept(","):
                layout = self.layout()
            self.expect(">", "'>' closing the tile type")
            if any(d <= 0 for d in shape):
                raise self.error("tile dimensions must be positive", start)
            return TileType(shape, element, layout)
        return self.element_type()

    def element_type(self) -> ElementType:
        self.ws()
        if self.accept("ptr<"):
            pointee = self.element_type()
            space = 1
            if self.accept(","):
                space = self.integer()
            self.expect(">", "'>' closing the pointer type")
            return PointerType(pointee, space)
        for name in _SCALARS:
            if self.text.startswith(name, self.pos):
                end = self.pos + len(name)
                if end < len(self.text) and (self.text[end].isalnum() or self.text[end] == "_"):
                    continue
                self.pos = end
                return ScalarType(name)
        raise self.error(f"expected a type, found {self.found()}")

    def int_list(self) -> tuple[int, ...]:
        self.expect("[")
        items: list[int] = []
        if not self.accept("]"):
            items.append(self.integer())
            while self.accept(","):
                items.append(self.integer())
            self.expect("]")
        return tuple(items)

    def layout(self) -> Layout:
        self.ws()
        start = self.pos
        self.expect("#", "a layout")
        kind = self.match(_RE_IDENT, "a layout name").group(0)
        self.expect("<")
        fields: dict[str, Any] = {}
        while True:
            key = self.match(_RE_IDENT, "a layout field").group(0)
            self.expect("=")
            if self.at("["):
                fields[key] = self.int_list()
            elif self.at("#"):
                fields[key] = self.layout()
            else:
                fields[key] = self.integer()
            if not self.accept(","):
                break
        self.expect(">", "'>' closing the layout")
        try:
            if kind == "blocked":
                return Blocked(fields.pop("spt"), fields.pop("tpw"), fields.pop("wpc"), fields.pop("order"))
            if kind == "slice":
                return Slice(fields.pop("parent"), fields.pop("dim"))
            if kind == "mma":
                return Mma(fields.pop("v"), fields.pop("wpc"), fields.pop("instr"), bool(fields.pop("trans", 0)))
            if kind == "dot_op":
                return DotOperand(fields.pop("parent"), fields.pop("idx"), fields.pop("k_width"))
            if kind == "shared":
                return Shared(
                    fields.pop("vec"), fields.pop("per_phase"), fields.pop("max_phase"), fields.pop("order")
                )
        except KeyError as e:
            raise self.error(f"layout #{kind} lacks the field {e.args[0]!r}", start) from None
        raise self.error(f"unknown layout #{kind}", start)

    # ---------------------------------------------------------------------------- attributes

    def attribute(self) -> Any:
        self.ws()
        c = self.text[self.pos : self.pos + 1]
        if c == '"':
            raw = self.match(_RE_STRING, "a string").group(0)
            return json.loads(raw)
        if c == "[":
            self.pos += 1
            items: list[Any] = []
            if not self.accept("]"):
                items.append(self.attribute())
                while self.accept(","):
                    items.append(self.attribute())
                self.expect("]")
            return tuple(items)
        if c == "{":
            return self.attribute_dict()
        if c == "#":
            return self.layout()
        for word, value in (("true", True), ("false", False), ("none", None), ("inf", float("inf")),
                            ("-inf", float("-inf")), ("nan", float("nan"))):
            if self.text.startswith(word, self.pos) and not self.text[self.pos + len(word):][:1].isalnum():
                self.pos += len(word)
                return value
        if c == "-" or c.isdigit():
            text = self.match(_RE_NUMBER, "a number").group(0)
            return int(text) if re.fullmatch(r"-?\d+", text) else float(text)
        if c.isalpha():
            return self.type()
        raise self.error(f"expected an attribute value, found {self.found()}")

    def attribute_dict(self) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        if self.accept("}"):
            return out
        while True:
            self.ws()
            start = self.pos
            key = self.match(_RE_IDENT, "an attribute name").group(0)
            if key in out:
                raise self.error(f"attribute {key!r} given twice", start)
            self.expect("=")
            out[key] = self.attribute()
            if not self.accept(","):
                break
        self.expect("}", "',' or '}' in the attribute dictionary")
        return out

    def location(self) -> Location | None:
        if not self.accept("loc(", same_line=True):
            return None
        file = json.loads(self.match(_RE_STRING, "a file name string").group(0))
        self.expect(":")
        line = self.integer()
        self.expect(":")
        col = self.integer()
        self.expect(")")
        return Location(file, line, col)

    # ---------------------------------------------------------------------------- values

    def define(self, name: str, value: Value, pos: int) -> None:
        if name in self.defined:
            raise self.error(f"value %{name} is defined twice", pos)
        self.defined.add(name)
        self.scopes[-1][name] = value

    def use(self) -> Value:
        self.ws_line()
        pos = self.pos
        name = self.match(_RE_VALUE, "a value (%name)", same_line=True).group(1)
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.error(f"use of undefined value %{name}", pos)

    # ---------------------------------------------------------------------------- ops and blocks

    def op(self) -> Operation:
        self.ws()
        start = self.pos
        result_names: list[tuple[str, int]] = []
        if self.at("%"):
            while True:
                self.ws()
                p = self.pos
                result_names.append((self.match(_RE_VALUE, "a result name").group(1), p))
                if not self.accept(","):
                    break
            self.expect("=")
        self.ws()
        name_pos = self.pos
        name = self.match(_RE_IDENT, "an op name").group(0)
        cls = OPS.get(name)
        if cls is None:
            raise self.error(f"unknown op {name!r}", name_pos)
        operands: list[Value] = []
        if self.at("%", same_line=True):
            operands.append(self.use())
            while self.accept(",", same_line=True):
                operands.append(self.use())
        attributes: dict[str, Any] = {}
        if self.at("{", same_line=True):
            attributes = self.attribute_dict()
        result_types: list[IRType] = []
        if self.accept(":", same_line=True):
            result_types.append(self.type())
            while self.accept(",", same_line=True):
                result_types.append(self.type())
        if len(result_types) != len(result_names):
            raise self.error(
                f"{name} names {len(result_names)} result(s) but gives {len(result_types)} result type(s)",
                start,
            )
        regions: list[Block] = []
        if self.accept("(", same_line=True):
            while True:
                regions.append(self.region())
                if not self.accept(","):
                    break
            self.expect(")", "')' closing the op's regions")
        loc = self.location()
        try:
            op = cls.create(operands, result_types, attributes, regions, loc)
        except (TypeError, ValueError) as e:
            raise self.error(f"bad attributes for {name}: {e}", name_pos) from None
        for (rname, p), result in zip(result_names, op.results):
            result.name_hint = _hint(rname)
            self.define(rname, result, p)
        return op

    def region(self) -> Block:
        self.expect("{", "'{' opening a region")
        block = Block()
        self.scopes.append({})
        if self.accept("^"):
            self.expect("(")
            if not self.accept(")"):
                while True:
                    self.ws()
                    p = self.pos
                    aname = self.match(_RE_VALUE, "a block argument (%name)").group(1)
                    self.expect(":")
                    arg = block.add_arg(self.type(), _hint(aname))
                    self.define(aname, arg, p)
                    if not self.accept(","):
                        break
                self.expect(")")
            self.expect(":")
        while not self.at("}"):
            if self.pos >= len(self.text):
                raise self.error("unterminated region: expected '}'")
            block.append(self.op())
        self.pos += 1
        self.scopes.pop()
        return block

    def function(self) -> Function:
        self.expect("tc.func", "'tc.func'")
        kind = self.match(_RE_IDENT, "the function kind (global)").group(0)
        fname = self.match(_RE_SYMBOL, "a function name (@name)").group(1)
        self.defined = set()
        self.scopes = [{}]
        body = Block()
        arg_names: list[str] = []
        arg_attrs: list[dict[str, int | bool]] = []
        self.expect("(")
        if not self.accept(")"):
            while True:
                self.ws()
                p = self.pos
                aname = self.match(_RE_VALUE, "an argument (%name)").group(1)
                self.expect(":")
                arg = body.add_arg(self.type(), _hint(aname))
                self.define(aname, arg, p)
                arg_names.append(_hint(aname) or "")
                arg_attrs.append(self.attribute_dict() if self.at("{", same_line=True) else {})
                if not self.accept(","):
                    break
            self.expect(")", "',' or ')' in the argument list")
        loc = self.location()
        self.expect("{", "'{' opening the function body")
        while not self.at("}"):
            if self.pos >= len(self.text):
                raise self.error("unterminated function body: expected '}'")
            body.append(self.op())
        self.pos += 1
        if not any(arg_names):
            arg_names = []
        return Function(fname, body, arg_names, arg_attrs, kind, loc)

    def module(self) -> Module:
        self.expect("module", "'module'")
        attributes: dict[str, Any] = {}
        if self.accept("attributes"):
            attributes = self.attribute_dict()
        self.expect("{")
        functions: list[Function] = []
        while not self.at("}"):
            if self.pos >= len(self.text):
                raise self.error("unterminated module: expected '}'")
            functions.append(self.function())
        self.pos += 1
        self.end()
        return Module(functions, attributes)

    def end(self) -> None:
        self.ws()
        if self.pos != len(self.text):
            raise self.error(f"unexpected text after the end: {self.found()}")


def parse_module(text: str, *, filename: str = "<ir>") -> Module:
    """The module that `print_module` printed as `text`."""
    return _Parser(text, filename).module()


def parse_function(text: str, *, filename: str = "<ir>") -> Function:
    """One function as `print_function` prints it."""
    p = _Parser(text, filename)
    fn = p.function()
    p.end()
    return fn


def parse_type(text: str) -> IRType:
    """A type as `str(type)` prints it, e.g. ``tile<128x64xf16, #blocked<...>>``."""
    p = _Parser(text, "<type>")
    t = p.type()
    p.end()
    return t
