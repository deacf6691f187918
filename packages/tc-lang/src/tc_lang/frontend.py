"""The front end's public entry points, guarded so that no internal Python exception reaches
the user as a traceback: an unexpected exception becomes a `TcCompileError` "internal compiler
error" at the best known location (set TC_FRONTEND_DEBUG=1 to let it through instead).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import ParamSpec, TypeVar

from . import ast
from .checker import check as _check
from .deep import run_deep
from .diagnostics import Category, Diagnostic, Location, TcCompileError, TcSyntaxError
from .parser import parse as _parse
from .preprocessor import ArgumentTypeError, DefineValue, Preprocessed
from .preprocessor import preprocess as _preprocess

P = ParamSpec("P")
R = TypeVar("R")


def _where(args: tuple[object, ...], kwargs: dict[str, object]) -> Location:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, ast.Node):
            return a.loc
        if isinstance(a, Preprocessed):
            return Location(a.filename, 1, 1)
    name = kwargs.get("filename")
    return Location(name if isinstance(name, str) else "<source>", 1, 1)


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn unexpected exceptions of a front-end entry point into TcCompileError."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (TcCompileError, ArgumentTypeError):
            raise
        except RecursionError:
            if os.environ.get("TC_FRONTEND_DEBUG") == "1":
                raise
            raise TcSyntaxError([Diagnostic(
                Category.SYNTAX, "E0211", "the program is nested too deeply to compile",
                _where(args, kwargs), hint="split long expressions into several statements",
            )]) from None
        except (TypeError, ValueError) as e:
            if os.environ.get("TC_FRONTEND_DEBUG") == "1":
                raise
            # Bad arguments from the Python caller (e.g. a define of an unsupported type) are
            # reported as such; everything else is an internal error.
            raise TcCompileError([Diagnostic(
                Category.TYPE, "E0499", f"internal compiler error: {type(e).__name__}: {e}",
                _where(args, kwargs),
                hint="please report this; TC_FRONTEND_DEBUG=1 shows the Python traceback",
            )]) from None
        except Exception as e:
            if os.environ.get("TC_FRONTEND_DEBUG") == "1":
                raise
            raise TcCompileError([Diagnostic(
                Category.TYPE, "E0499", f"internal compiler error: {type(e).__name__}: {e}",
                _where(args, kwargs),
                hint="please report this; TC_FRONTEND_DEBUG=1 shows the Python traceback",
            )]) from None

    return wrapper


@guarded
def preprocess(
    source: str | bytes,
    defines: Mapping[str, DefineValue] | None = None,
    *,
    filename: str = "<source>",
    include_dirs: Sequence[str | os.PathLike[str]] = (),
) -> Preprocessed:
    """Run the C preprocessor (see tc_lang.preprocessor)."""
    return _preprocess(source, defines, filename=filename, include_dirs=include_dirs)


@guarded
def parse(
    source_or_preprocessed: str | bytes | Preprocessed, *, filename: str = "<source>"
) -> ast.TranslationUnit:
    """Parse Triton-C into an AST (see tc_lang.parser)."""
    return _parse(source_or_preprocessed, filename=filename)


@guarded
def check(unit: ast.TranslationUnit) -> ast.TranslationUnit:
    """Type- and shape-check a unit; returns the typed tree (see tc_lang.checker)."""
    return run_deep(unit, _check, unit)


@guarded
def frontend(
    source: str | bytes,
    defines: Mapping[str, DefineValue] | None = None,
    *,
    filename: str = "<source>",
    include_dirs: Sequence[str | os.PathLike[str]] = (),
) -> ast.TranslationUnit:
    """preprocess + parse + check: source text to the typed AST."""
    pre = _preprocess(source, defines, filename=filename, include_dirs=include_dirs)
    unit = _parse(pre, filename=filename)
    return run_deep(unit, _check, unit)  # (a flat sum of 2000 terms is a tree 2000 deep)
