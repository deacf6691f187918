"""The Triton-C tokens (PLY lexer): C tokens plus `@`, `...`, the tile keywords and attributes.

Type names are keywords (there are no typedefs in Triton-C), which keeps the grammar LALR(1)
without pycparser's typedef feedback. `max` and `min` are keywords because they are both
reduction subscripts (`x[max]`) and built-in functions (`max(a, b)`).
"""

from __future__ import annotations

from typing import Any

import ply.lex as lex

from .types import ScalarType

# keyword -> scalar type it names (a single keyword; `unsigned`, `long long` are combined later)
TYPE_KEYWORDS: dict[str, str] = {
    "void": "void",
    "bool": "bool",
    "_Bool": "bool",
    "char": "int8",
    "short": "int16",
    "int": "int32",
    "long": "int64",
    "half": "fp16",
    "bf16": "bf16",
    "float": "fp32",
    "double": "fp64",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "unsigned": "uint32",
    "signed": "int32",
    # dtype spellings (torch/numpy names arrive through defines such as TYPE=float16)
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float64": "fp64",
}

ATTRIBUTE_KEYWORDS: dict[str, str] = {
    "__multipleof": "multipleof",
    "__aligned": "aligned",
    "__noalias": "noalias",
    "__readonly": "readonly",
    "__writeonly": "writeonly",
    "__retune": "retune",
}

_KEYWORDS: dict[str, str] = {
    "if": "IF",
    "else": "ELSE",
    "for": "FOR",
    "while": "WHILE",
    "do": "DO",
    "break": "BREAK",
    "continue": "CONTINUE",
    "return": "RETURN",
    "sizeof": "SIZEOF",
    "const": "CONST",
    "restrict": "RESTRICT",
    "__restrict": "RESTRICT",
    "volatile": "VOLATILE",
    "__global__": "GLOBAL",
    "__device__": "DEVICE",
    "inline": "INLINE",
    "static": "STATIC",
    "newaxis": "NEWAXIS",
    "true": "TRUE",
    "false": "FALSE",
    "bitcast": "BITCAST",
    "max": "MAX",
    "min": "MIN",
    "__attribute__": "ATTRIBUTE",
    # type keywords
    "void": "VOID",
    "bool": "BOOL",
    "_Bool": "BOOL",
    "char": "CHAR",
    "short": "SHORT",
    "int": "INT",
    "long": "LONG",
    "unsigned": "UNSIGNED",
    "signed": "SIGNED",
    "half": "TYPEKW",
    "bf16": "TYPEKW",
    "float": "TYPEKW",
    "double": "TYPEKW",
    "int8": "TYPEKW",
    "int16": "TYPEKW",
    "int32": "TYPEKW",
    "int64": "TYPEKW",
    "uint8": "TYPEKW",
    "uint16": "TYPEKW",
    "uint32": "TYPEKW",
    "uint64": "TYPEKW",
    "float16": "TYPEKW",
    "bfloat16": "TYPEKW",
    "float32": "TYPEKW",
    "float64": "TYPEKW",
}
for _k in ATTRIBUTE_KEYWORDS:
    _KEYWORDS[_k] = "ATTRKW"

KEYWORD_TOKENS = sorted(set(_KEYWORDS.values()))

tokens = tuple(
    KEYWORD_TOKENS
    + [
        "ID",
        "INT_CONST",
        "FLOAT_CONST",
        "CHAR_CONST",
        "STRING",
        # operators
        "PLUS",
        "MINUS",
        "TIMES",
        "DIVIDE",
        "MOD",
        "OR",
        "AND",
        "NOT",
        "XOR",
        "LSHIFT",
        "RSHIFT",
        "LOR",
        "LAND",
        "LNOT",
        "LT",
        "LE",
        "GT",
        "GE",
        "EQ",
        "NE",
        "EQUALS",
        "TIMESEQUAL",
        "DIVEQUAL",
        "MODEQUAL",
        "PLUSEQUAL",
        "MINUSEQUAL",
        "LSHIFTEQUAL",
        "RSHIFTEQUAL",
        "ANDEQUAL",
        "XOREQUAL",
        "OREQUAL",
        "PLUSPLUS",
        "MINUSMINUS",
        "CONDOP",
        "AT",
        "ELLIPSIS",
        "LPAREN",
        "RPAREN",
        "LBRACKET",
        "RBRACKET",
        "LBRACE",
        "RBRACE",
        "COMMA",
        "PERIOD",
        "SEMI",
        "COLON",
    ]
)

# Human names of tokens for syntax errors.
TOKEN_NAMES: dict[str, str] = {
    "ID": "identifier",
    "INT_CONST": "integer literal",
    "FLOAT_CONST": "floating literal",
    "CHAR_CONST": "character literal",
    "STRING": "string literal",
}


class LexError(Exception):
    """A character that starts no token; position in the lexer's text."""

    def __init__(self, message: str, lexpos: int, length: int = 1) -> None:
        super().__init__(message)
        self.lexpos = lexpos
        self.length = length


class _Rules:
    """The PLY token rules (PLY reads the t_ attributes and docstrings by reflection)."""

    tokens = tokens
    t_ignore = " \t\r\f\v"

    t_ELLIPSIS = r"\.\.\."
    t_PLUSPLUS = r"\+\+"
    t_MINUSMINUS = r"--"
    t_LSHIFTEQUAL = r"<<="
    t_RSHIFTEQUAL = r">>="
    t_PLUSEQUAL = r"\+="
    t_MINUSEQUAL = r"-="
    t_TIMESEQUAL = r"\*="
    t_DIVEQUAL = r"/="
    t_MODEQUAL = r"%="
    t_ANDEQUAL = r"&="
    t_OREQUAL = r"\|="
    t_XOREQUAL = r"\^="
    t_LSHIFT = r"<<"
    t_RSHIFT = r">>"
    t_LOR = r"\|\|"
    t_LAND = r"&&"
    t_LE = r"<="
    t_GE = r">="
    t_EQ = r"=="
    t_NE = r"!="
    t_LT = r"<"
    t_GT = r">"
    t_EQUALS = r"="
    t_PLUS = r"\+"
    t_MINUS = r"-"
    t_TIMES = r"\*"
    t_DIVIDE = r"/"
    t_MOD = r"%"
    t_OR = r"\|"
    t_AND = r"&"
    t_NOT = r"~"
    t_XOR = r"\^"
    t_LNOT = r"!"
    t_CONDOP = r"\?"
    t_AT = r"@"
    t_LPAREN = r"\("
    t_RPAREN = r"\)"
    t_LBRACKET = r"\["
    t_RBRACKET = r"\]"
    t_LBRACE = r"\{"
    t_RBRACE = r"\}"
    t_COMMA = r","
    t_PERIOD = r"\."
    t_SEMI = r";"
    t_COLON = r":"

    def t_newline(self, t: Any) -> None:
        r"\n+"
        t.lexer.lineno += len(t.value)

    def t_comment(self, t: Any) -> None:
        r"/\*(.|\n)*?\*/|//[^\n]*"
        t.lexer.lineno += t.value.count("\n")

    def t_FLOAT_CONST(self, t: Any) -> Any:
        r"((\d+\.(?!\.)\d*|\.\d+)([eE][-+]?\d+)?|\d+[eE][-+]?\d+)[fFlL]?"
        return t

    def t_INT_CONST(self, t: Any) -> Any:
        r"(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)[uUlL]*"
        return t

    def t_CHAR_CONST(self, t: Any) -> Any:
        r"'([^'\\\n]|\\.)'"
        return t

    def t_STRING(self, t: Any) -> Any:
        r'"([^"\\\n]|\\.)*"'
        return t

    def t_ID(self, t: Any) -> Any:
        r"[A-Za-z_][A-Za-z0-9_]*"
        t.type = _KEYWORDS.get(t.value, "ID")
        return t

    def t_error(self, t: Any) -> None:
        ch = t.value[0]
        if ch == "'" or ch == '"':
            raise LexError("unterminated literal", t.lexpos)
        if ch == "#":
            raise LexError("unexpected '#': preprocessor directives need tc_lang.preprocess",
                           t.lexpos)
        raise LexError(f"unexpected character {ch!r}", t.lexpos)


_LEXER: Any = None


def build_lexer(lexmod: Any, module: Any) -> Any:
    """A PLY lexer that never reads or writes a lextab file.

    pcpp puts its own copy of PLY first on sys.path while it imports, so `ply.lex` may be either
    copy depending on import order; pcpp's copy writes the table file when NOT optimizing, the
    original when optimizing. Pick the mode that writes nothing, with a table name never found.
    """
    vendored = "pcpp" in str(getattr(lexmod, "__file__", ""))
    return lexmod.lex(
        module=module, optimize=vendored, debug=False, lextab="tc_lang_no_lextab_module"
    )


def make_lexer() -> Any:
    """A fresh PLY lexer (the master is built once per process and cloned)."""
    global _LEXER
    if _LEXER is None:
        _LEXER = build_lexer(lex, _Rules())
    return _LEXER.clone()


def scalar_of_keywords(words: list[str]) -> ScalarType | None:
    """The scalar named by a list of type keywords (`unsigned long`, `long long`, `float`)."""
    if not words:
        return None
    ws = [w for w in words if w != "signed"] or ["int"]
    unsigned = "unsigned" in ws
    ws = [w for w in ws if w != "unsigned"] or ["int"]
    if ws.count("long") >= 1 and all(w in ("long", "int") for w in ws):
        base = "int64"
    elif ws == ["short"] or ws == ["short", "int"] or ws == ["int", "short"]:
        base = "int16"
    elif len(ws) == 1:
        base = TYPE_KEYWORDS.get(ws[0], "")
        if not base:
            return None
    else:
        return None
    if unsigned:
        if base in ("int8", "int16", "int32", "int64"):
            base = "u" + base
        else:
            return None
    return ScalarType(base)
