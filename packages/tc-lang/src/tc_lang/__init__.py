"""tc-lang: the Triton-C front end (preprocessor, PLY grammar, typed AST, diagnostics)."""

from __future__ import annotations

from . import ast, types
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
