"""tc-lang: the Triton-C front end (preprocessor, PLY grammar, typed AST, diagnostics)."""

from __future__ import annotations

from . import ast, types
from .frontend import check, frontend, parse, preprocess
from .preprocessor import Preprocessed
from .printer import to_source
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

__version__ = "0.1.0"

__all__ = [
    "Preprocessed",
    "check",
    "frontend",
    "parse",
    "preprocess",
    "to_source",
    "Diagnostic",
    "Location",
    "TcCompileError",
    "TcLoweringError",
    "TcNameError",
    "TcPreprocessorError",
    "TcResourceError",
    "TcShapeError",
    "TcSyntaxError",
    "TcTypeError",
    "ast",
    "types",
]
