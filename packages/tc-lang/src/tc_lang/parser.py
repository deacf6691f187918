"""`parse`: preprocessed Triton-C text to an AST, with errors at the user's source positions.

The LALR tables are built once and cached on disk (`$XDG_CACHE_HOME/tc` or `~/.cache/tc`), keyed
by a hash of the grammar, so a new process does not rebuild them; nothing is written into the
source tree. The spec's vector-add kernels omit `;` at the end of some lines: when a syntax error
follows a line break after a complete expression, the parser inserts the `;`, records a warning on
the unit and goes on (a missing `;` that this does not explain is still an error).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import tempfile
from pathlib import Path
from typing import Any

import ply.yacc as yacc

from . import ast
from .diagnostics import (
    Category,
    Diagnostic,
    Location,
    Severity,
    TcSyntaxError,
)
from .grammar import Grammar, GrammarError, SyntaxAbort
from .lexer import TOKEN_NAMES, LexError, make_lexer
from .preprocessor import Preprocessed, decode_source, unterminated_comment_error

MAX_NESTING = 200
MAX_INSERTIONS = 16

_PARSER: Any = None
_GRAMMAR: Grammar | None = None

# Tokens that can end an expression statement / start a new statement.
_ENDERS = {"ID", "INT_CONST", "FLOAT_CONST", "CHAR_CONST", "RPAREN", "RBRACKET", "PLUSPLUS",
           "MINUSMINUS", "TRUE", "FALSE"}
_STARTERS = {"ID", "TIMES", "LPAREN", "RBRACE", "LBRACE", "IF", "FOR", "WHILE", "DO", "RETURN",
             "BREAK", "CONTINUE", "PLUSPLUS", "MINUSMINUS", "VOID", "BOOL", "CHAR", "SHORT",
             "INT", "LONG", "UNSIGNED", "SIGNED", "TYPEKW", "CONST", "VOLATILE", "SEMI", "XOR"}

_PUNCT = {
    "SEMI": ";", "COMMA": ",", "RPAREN": ")", "LPAREN": "(", "RBRACKET": "]", "LBRACKET": "[",
    "RBRACE": "}", "LBRACE": "{", "COLON": ":", "EQUALS": "=", "GT": ">", "LT": "<",
}


def cache_dir() -> Path:
    """Where the parser tables live: $TC_CACHE_DIR/parser, $XDG_CACHE_HOME/tc or ~/.cache/tc."""
    if os.environ.get("TC_CACHE_DIR"):
        return Path(os.environ["TC_CACHE_DIR"]) / "parser"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tc"


def _grammar_hash() -> str:
    from . import grammar, lexer

    h = hashlib.sha256()
    for mod in (grammar, lexer):
        h.update(inspect.getsource(mod).encode())
    h.update(yacc.__version__.encode())
    return h.hexdigest()[:16]


def get_parser() -> tuple[Any, Grammar]:
    """The LALR parser, from the disk cache when its tables are there."""
    global _PARSER, _GRAMMAR
    if _PARSER is not None and _GRAMMAR is not None:
        return _PARSER, _GRAMMAR
    g = Grammar()
    directory = cache_dir()
    path = directory / f"tc_lang_parser_{_grammar_hash()}.pickle"
    parser = None
    if path.exists():
        try:
            parser = yacc.yacc(
                module=g, picklefile=str(path), write_tables=False, debug=False,
                errorlog=yacc.NullLogger(),
            )
        except Exception:
            parser = None
    if parser is None:
        tmp: str | None = None
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
            os.close(fd)
            os.unlink(tmp)
            parser = yacc.yacc(
                module=g, picklefile=tmp, write_tables=True, debug=False,
                errorlog=yacc.NullLogger(),
            )
            os.replace(tmp, path)
        except OSError:
            parser = yacc.yacc(
                module=g, write_tables=False, debug=False, errorlog=yacc.NullLogger()
            )
        finally:
            if tmp is not None and os.path.exists(tmp):
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
    g.parser = parser
    _PARSER, _GRAMMAR = parser, g
    return parser, g


class _Tok:
    """A token as the parser sees it (PLY needs type, value, lineno, lexpos)."""

    __slots__ = ("type", "value", "lineno", "lexpos", "loc", "lexer")

    def __init__(self, type: str, value: str, lineno: int, lexpos: int, loc: Location) -> None:
        self.type = type
        self.value = value
        self.lineno = lineno
        self.lexpos = lexpos
        self.loc = loc
        self.lexer: Any = None

    def __repr__(self) -> str:
        return f"_Tok({self.type}, {self.value!r}, {self.loc})"


class _Feed:
    """Feeds a token list to PLY."""

    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = toks
        self.i = 0

    def token(self) -> _Tok | None:
        if self.i < len(self.toks):
            t = self.toks[self.i]
            self.i += 1
            return t
        self.i += 1
        return None


def _diag(
    pre: Preprocessed, code: str, msg: str, loc: Location, hint: str | None = None,
    severity: Severity = Severity.ERROR,
) -> Diagnostic:
    return Diagnostic(
        Category.SYNTAX, code, msg, loc, severity=severity, hint=hint,
        source_line=pre.source_line(loc.file, loc.line),
    )


def tokenize(pre: Preprocessed) -> list[_Tok]:
    """All tokens of the preprocessed text, each located in the user's source."""
    text = pre.text
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    lexer = make_lexer()
    lexer.input(text)
    out: list[_Tok] = []
    depth = 0
    import bisect

    def locate(lexpos: int, length: int) -> Location:
        line = bisect.bisect_right(starts, lexpos)
        col = lexpos - starts[line - 1] + 1
        return pre.locate(line, col, length)

    while True:
        try:
            t = lexer.token()
        except LexError as e:
            loc = locate(e.lexpos, e.length)
            raise TcSyntaxError([_diag(pre, "E0201", str(e), loc)]) from None
        if t is None:
            break
        loc = locate(t.lexpos, len(t.value))
        if t.type in ("LPAREN", "LBRACKET", "LBRACE"):
            depth += 1
            if depth > MAX_NESTING:
                raise TcSyntaxError(
                    [_diag(pre, "E0211", f"nesting deeper than {MAX_NESTING} levels", loc)]
                )
        elif t.type in ("RPAREN", "RBRACKET", "RBRACE"):
            depth -= 1
        line = bisect.bisect_right(starts, t.lexpos)
        out.append(_Tok(t.type, t.value, line, t.lexpos, loc))
    return out


def _describe(tok: _Tok | None) -> str:
    if tok is None:
        return "end of input"
    if tok.type in TOKEN_NAMES:
        return f"{TOKEN_NAMES[tok.type]} '{tok.value}'"
    return f"'{tok.value}'"


def _expected_text(expected: list[str]) -> str | None:
    names = [f"'{_PUNCT[e]}'" for e in expected if e in _PUNCT]
    if expected and len(names) == len(expected) and len(names) <= 3:
        return " or ".join(names)
    return None


def _run(parser: Any, toks: list[_Tok]) -> list[ast.FunctionDef]:
    result = parser.parse(lexer=_Feed(toks), tracking=False)
    return list(result or [])


def parse(
    source: str | bytes | Preprocessed, *, filename: str = "<source>"
) -> ast.TranslationUnit:
    """Parse Triton-C (preprocessed, or plain text taken as is) into a TranslationUnit.

    Raises `TcSyntaxError` with the position of the first error.
    """
    if isinstance(source, Preprocessed):
        pre = source
    else:
        pre = Preprocessed.plain(decode_source(source, filename), filename)
        # (the preprocessor reports it for preprocessed text, where comments are gone)
        comment = unterminated_comment_error(pre.text, filename)
        if comment is not None:
            raise TcSyntaxError([comment])
    parser, _ = get_parser()
    toks = tokenize(pre)
    if not toks:
        loc = Location(pre.filename, 1, 1)
        raise TcSyntaxError([_diag(pre, "E0202", "no kernel in the source", loc,
                                   hint="define a kernel: __global__ void name(...) { ... }")])
    warnings: list[Diagnostic] = []
    first: SyntaxAbort | None = None
    first_index = 0
    inserted_after = -1
    for _ in range(MAX_INSERTIONS + 1):
        try:
            functions = _run(parser, toks)
            break
        except GrammarError as e:
            raise TcSyntaxError([_diag(pre, e.code, str(e), e.loc, e.hint)]) from None
        except SyntaxAbort as e:
            index = _index_of(toks, e.token)
            if first is None:
                first, first_index = e, index
            fix = _try_semicolon(parser, toks, index, inserted_after)
            if fix is None:
                raise _syntax_error(pre, toks, first, first_index) from None
            toks, at = fix
            inserted_after = at
            prev = toks[at - 1]
            loc = Location(prev.loc.file, prev.loc.end_line, prev.loc.end_col + 1,
                           prev.loc.end_line, prev.loc.end_col + 1, prev.loc.macro)
            warnings.append(_diag(pre, "W0201", "missing ';' at the end of the line (inserted)",
                                  loc, severity=Severity.WARNING))
            first = None
    else:
        assert first is not None
        raise _syntax_error(pre, toks, first, first_index)
    loc = toks[0].loc.to(toks[-1].loc)
    return ast.TranslationUnit(
        functions=tuple(functions), loc=loc, warnings=tuple(warnings), source_map=pre
    )


def _index_of(toks: list[_Tok], tok: Any) -> int:
    if tok is None:
        return len(toks)
    for i, t in enumerate(toks):
        if t is tok:
            return i
    return len(toks)


def _try_semicolon(
    parser: Any, toks: list[_Tok], index: int, after: int
) -> tuple[list[_Tok], int] | None:
    """Insert a ';' at one of the last two line breaks before token `index`, if that gets the
    parse past the error; returns the new token list and the insertion index."""
    candidates: list[int] = []
    j = min(index, len(toks))
    while j > max(after, 1) and len(candidates) < 2:
        prev, nxt = toks[j - 1], (toks[j] if j < len(toks) else None)
        if nxt is None or prev.lineno < nxt.lineno:
            if prev.type in _ENDERS and (nxt is None or nxt.type in _STARTERS):
                candidates.append(j)
            elif nxt is not None:
                candidates.append(-1)  # a line break that cannot take a ';'
        j -= 1
    for j in candidates:
        if j < 0:
            continue
        prev = toks[j - 1]
        semi = _Tok("SEMI", ";", prev.lineno, prev.lexpos + len(prev.value), prev.loc)
        trial = toks[:j] + [semi] + toks[j:]
        try:
            _run(parser, trial)
            return trial, j + 1
        except SyntaxAbort as e:
            if _index_of(trial, e.token) > index + 1:
                return trial, j + 1
        except GrammarError:
            return trial, j + 1
    return None


def _syntax_error(
    pre: Preprocessed, toks: list[_Tok], e: SyntaxAbort, index: int
) -> TcSyntaxError:
    tok = toks[index] if index < len(toks) else None
    expected = _expected_text(e.expected)
    hint = None
    if tok is None:
        last = toks[-1]
        loc = Location(last.loc.file, last.loc.end_line, last.loc.end_col + 1, macro=last.loc.macro)
        msg = "unexpected end of input"
        if "RBRACE" in e.expected:
            msg += ", expected '}'"
        elif expected:
            msg += f", expected {expected}"
    else:
        loc = tok.loc
        if expected:
            msg = f"expected {expected} before {_describe(tok)}"
        else:
            msg = f"unexpected {_describe(tok)}"
        if tok.type == "ID" and ("TYPEKW" in e.expected or "INT" in e.expected) and not (
            "ID" in e.expected
        ):
            msg = f"unknown type name '{tok.value}'"
            if tok.value.isupper():
                hint = f"is '{tok.value}' a macro that needs a define (-D {tok.value}=float)?"
            else:
                hint = ("types are bool, char, short, int, long, unsigned ..., int8..uint64, "
                        "half, bf16, float, double")
        elif tok.type == "ID" and index > 0 and toks[index - 1].type == "LBRACKET":
            hint = ("tile subscripts take ':', 'newaxis', '+', '-', 'max', 'min' or '^k'; "
                    "there is no C indexing: write *(p + i)")
        elif expected == "';'" and index > 0 and toks[index - 1].lineno < tok.lineno:
            prev = toks[index - 1].loc
            loc = Location(prev.file, prev.end_line, prev.end_col + 1, macro=prev.macro)
            msg = f"expected ';' after {_describe(toks[index - 1])}"
    return TcSyntaxError([_diag(pre, "E0201", msg, loc, hint)])
