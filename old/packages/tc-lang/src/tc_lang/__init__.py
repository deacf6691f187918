"""tc-lang: the Triton-C front end (preprocessor, PLY grammar, typed AST, diagnostics).

    preprocess(source, defines=None, *, filename="<source>", include_dirs=()) -> Preprocessed
    parse(source_or_preprocessed, *, filename="<source>") -> ast.TranslationUnit
    check(unit) -> ast.TranslationUnit          (typed: Expr.ty/.const, Decl.ty, return_ty)
    frontend(source, defines=None, *, filename="<source>", include_dirs=()) -> TranslationUnit
    to_source(node) -> str                      (parse(to_source(t)) == t)

Every bad input raises a `TcCompileError` subclass with the user's file, line and column.
"""

from __future__ import annotations

from . import ast, builtins, consts, rules, types
from .diagnostics import (
    Diagnostic,
    Location,
    TcCompileError,
    TcLoweringError,
    TcNameError,
    TcPreprocessorError,
    TcResourceError,
    TcShapeError,
    TcSyntaxError,
    TcTypeError,
)
from .frontend import check, frontend, parse, preprocess
from .preprocessor import Preprocessed
from .printer import to_source

__version__ = "0.1.0"

__all__ = [
    "Diagnostic",
    "Location",
    "Preprocessed",
    "TcCompileError",
    "TcLoweringError",
    "TcNameError",
    "TcPreprocessorError",
    "TcResourceError",
    "TcShapeError",
    "TcSyntaxError",
    "TcTypeError",
    "ast",
    "builtins",
    "check",
    "consts",
    "frontend",
    "parse",
    "preprocess",
    "rules",
    "to_source",
    "types",
]
