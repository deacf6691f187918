"""`to_source`: Triton-C text from an AST node, with only the parentheses precedence needs.

`parse(to_source(unit)) == unit` (structure; locations differ), which the tests check over every
kernel. Used by tc-lint and by anything that wants to show a (macro-expanded) kernel.
"""

from __future__ import annotations

from . import ast
from .types import C_SPELLING

# Precedence levels (higher binds tighter); operands print in parentheses below the level needed.
_BINARY = {
    "||": 4, "&&": 5, "|": 6, "^": 7, "&": 8, "==": 9, "!=": 9,
    "<": 10, ">": 10, "<=": 10, ">=": 10, "<<": 11, ">>": 11,
    "+": 12, "-": 12, "*": 13, "/": 13, "%": 13, "@": 14,
}
_COMMA, _ASSIGN, _COND, _RANGE, _CAST, _UNARY, _POSTFIX, _PRIMARY = 1, 2, 3, 15, 16, 17, 18, 19

_ATTRIBUTE_SPELLING = {
    "multipleof": "__multipleof", "aligned": "__aligned", "noalias": "__noalias",
    "readonly": "__readonly", "writeonly": "__writeonly", "retune": "__retune",
}


def _level(e: ast.Expr) -> int:
    if isinstance(e, ast.Comma):
        return _COMMA
    if isinstance(e, ast.Assign):
        return _ASSIGN
    if isinstance(e, ast.Conditional):
        return _COND
    if isinstance(e, ast.Binary):
        return _BINARY[e.op]
    if isinstance(e, ast.Range):
        return _RANGE
    if isinstance(e, ast.Cast):
        return _CAST
    if isinstance(e, ast.Unary):
        return _POSTFIX if e.op.startswith("post") else _UNARY
    if isinstance(e, (ast.Deref, ast.SizeOf)):
        return _UNARY
    if isinstance(e, (ast.Subscript, ast.Call)):
        return _POSTFIX
    return _PRIMARY


def expr_source(e: ast.Expr, need: int = _COMMA) -> str:
    """The text of an expression, parenthesised when its level is below `need`."""
    text = _expr(e)
    return f"({text})" if _level(e) < need else text


def _prefix(op: str, operand: str) -> str:
    if operand.startswith(op[0]) and op[0] in "+-&":
        return f"{op} {operand}"
    return op + operand


def _expr(e: ast.Expr) -> str:
    if isinstance(e, ast.IntLiteral):
        return e.text or f"{e.value}{e.suffix}"
    if isinstance(e, ast.FloatLiteral):
        if e.text:
            return e.text
        r = repr(e.value)
        if "." not in r and "e" not in r:
            r += ".0"
        return r + e.suffix
    if isinstance(e, ast.BoolLiteral):
        return "true" if e.value else "false"
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Unary):
        if e.op in ("post++", "post--"):
            return expr_source(e.operand, _POSTFIX) + e.op[4:]
        if e.op in ("pre++", "pre--"):
            return _prefix(e.op[3:], expr_source(e.operand, _UNARY))
        return _prefix(e.op, expr_source(e.operand, _CAST))
    if isinstance(e, ast.Binary):
        lvl = _BINARY[e.op]
        return f"{expr_source(e.left, lvl)} {e.op} {expr_source(e.right, lvl + 1)}"
    if isinstance(e, ast.Range):
        return f"{expr_source(e.start, _RANGE)} ... {expr_source(e.end, _RANGE + 1)}"
    if isinstance(e, ast.Assign):
        return f"{expr_source(e.target, _UNARY)} {e.op} {expr_source(e.value, _ASSIGN)}"
    if isinstance(e, ast.Conditional):
        return (f"{expr_source(e.cond, _COND + 1)} ? {expr_source(e.then, _COMMA)} : "
                f"{expr_source(e.otherwise, _COND)}")
    if isinstance(e, ast.Comma):
        return ", ".join(expr_source(x, _ASSIGN) for x in e.exprs)
    if isinstance(e, ast.Call):
        return f"{e.func}({', '.join(expr_source(a, _ASSIGN) for a in e.args)})"
    if isinstance(e, ast.Cast):
        return f"({type_source(e.type)}) {expr_source(e.operand, _CAST)}"
    if isinstance(e, ast.Bitcast):
        return f"bitcast<{type_source(e.type)}>({expr_source(e.operand, _COMMA)})"
    if isinstance(e, ast.SizeOf):
        if isinstance(e.operand, ast.TypeName):
            return f"sizeof({type_source(e.operand)})"
        return f"sizeof({expr_source(e.operand, _COMMA)})"
    if isinstance(e, ast.Subscript):
        items = ", ".join(_item(i) for i in e.items)
        return f"{expr_source(e.base, _POSTFIX)}[{items}]"
    if isinstance(e, ast.Deref):
        ptr = expr_source(e.pointer, _CAST)
        if e.mask is None:
            return _prefix("*", ptr)
        return f"*?({expr_source(e.mask, _COMMA)}) {ptr}"
    raise TypeError(f"cannot print {type(e).__name__}")


def _item(i: ast.SubscriptItem) -> str:
    if i.kind == "^":
        assert i.value is not None
        return "^" + expr_source(i.value, _CAST)
    return i.kind


def _dims(dims: tuple[ast.Expr, ...]) -> str:
    return "[" + ", ".join(expr_source(d, _COND) for d in dims) + "]"


def type_source(t: ast.TypeName) -> str:
    """A type name as written in a cast: `const float*`, `float[TM, TN]`."""
    parts = [*t.qualifiers, C_SPELLING[t.base.name]]
    text = " ".join(parts) + "*" * t.pointers
    if t.pointer_qualifiers:
        text += " " + " ".join(t.pointer_qualifiers)
    if t.dims is not None:
        text += _dims(t.dims)
    return text


def _declarator(name: str, t: ast.TypeName, attributes: tuple[ast.Attribute, ...]) -> str:
    text = "*" * t.pointers + "".join(q + " " for q in t.pointer_qualifiers) + name
    if t.dims is not None:
        text += _dims(t.dims)
    for a in attributes:
        text += " " + _attribute(a)
    return text


def _attribute(a: ast.Attribute) -> str:
    spelled = _ATTRIBUTE_SPELLING.get(a.name)
    value = f"({expr_source(a.value, _ASSIGN)})" if a.value is not None else ""
    if spelled is None:
        return f"__attribute__(({a.name}{value}))"
    return spelled + value


def _specifiers(t: ast.TypeName) -> str:
    return " ".join([*t.qualifiers, C_SPELLING[t.base.name]])


def _decl_stmt(s: ast.DeclStmt) -> str:
    first = s.decls[0]
    parts = []
    for d in s.decls:
        text = _declarator(d.name, d.type, d.attributes)
        if d.init is not None:
            text += " = " + expr_source(d.init, _ASSIGN)
        parts.append(text)
    return f"{_specifiers(first.type)} {', '.join(parts)};"


def _stmt(s: ast.Stmt, indent: int) -> list[str]:
    pad = "    " * indent
    if isinstance(s, ast.Compound):
        lines = [pad + "{"]
        for item in s.items:
            lines.extend(_stmt(item, indent + 1))
        lines.append(pad + "}")
        return lines
    if isinstance(s, ast.DeclStmt):
        return [pad + _decl_stmt(s)]
    if isinstance(s, ast.ExprStmt):
        return [pad + (expr_source(s.expr) + ";" if s.expr is not None else ";")]
    if isinstance(s, ast.If):
        lines = [pad + f"if ({expr_source(s.cond)})"] + _body(s.then, indent)
        if s.otherwise is not None:
            lines.append(pad + "else")
            lines.extend(_body(s.otherwise, indent))
        return lines
    if isinstance(s, ast.For):
        if isinstance(s.init, ast.DeclStmt):
            init = _decl_stmt(s.init)
        elif s.init is not None and s.init.expr is not None:
            init = expr_source(s.init.expr) + ";"
        else:
            init = ";"
        cond = " " + expr_source(s.cond) if s.cond is not None else ""
        step = " " + expr_source(s.step) if s.step is not None else ""
        return [pad + f"for ({init}{cond};{step})"] + _body(s.body, indent)
    if isinstance(s, ast.While):
        return [pad + f"while ({expr_source(s.cond)})"] + _body(s.body, indent)
    if isinstance(s, ast.DoWhile):
        return [pad + "do"] + _body(s.body, indent) + [pad + f"while ({expr_source(s.cond)});"]
    if isinstance(s, ast.Break):
        return [pad + "break;"]
    if isinstance(s, ast.Continue):
        return [pad + "continue;"]
    if isinstance(s, ast.Return):
        if s.value is None:
            return [pad + "return;"]
        return [pad + f"return {expr_source(s.value)};"]
    raise TypeError(f"cannot print {type(s).__name__}")


def _body(s: ast.Stmt, indent: int) -> list[str]:
    if isinstance(s, ast.Compound):
        return _stmt(s, indent)
    return _stmt(s, indent + 1)


def _function(f: ast.FunctionDef) -> list[str]:
    kind = "__global__ " if f.kind == "global" else "__device__ "
    params = ", ".join(
        f"{_specifiers(p.type)} {_declarator(p.name, p.type, p.attributes)}" for p in f.params
    )
    head = f"{kind}{type_source(f.return_type)} {f.name}({params})"
    return [head] + _stmt(f.body, 0)


def to_source(node: ast.Node) -> str:
    """Triton-C text for a unit, function, statement, expression or type name."""
    if isinstance(node, ast.TranslationUnit):
        return "\n\n".join("\n".join(_function(f)) for f in node.functions) + "\n"
    if isinstance(node, ast.FunctionDef):
        return "\n".join(_function(node)) + "\n"
    if isinstance(node, ast.Stmt):
        return "\n".join(_stmt(node, 0))
    if isinstance(node, ast.Expr):
        return expr_source(node)
    if isinstance(node, ast.TypeName):
        return type_source(node)
    if isinstance(node, ast.Attribute):
        return _attribute(node)
    raise TypeError(f"cannot print {type(node).__name__}")
