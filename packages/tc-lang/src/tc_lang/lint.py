"""`tc-lint FILE [-D NAME=VALUE ...] [--kernel NAME] [--show-types]`: check a kernel source
(FILE `-` reads it from stdin, as tcc does).

Prints the diagnostics (warnings too) and exits 1 when there is an error, else 0. With
`--show-types` it prints every parameter and declaration with its type and shape, which is the
quickest way to see what a macro-parameterised kernel becomes for one set of defines.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence

from . import ast
from .diagnostics import TcCompileError
from .frontend import frontend
from .preprocessor import command_line_defines, list_define_notes, read_source_file
from .types import TileType, Type


def _parse_define(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"bad define {text!r}; use -D NAME=VALUE")
    return name, value if sep else "1"


def _decls(s: ast.Stmt) -> Iterator[ast.Decl]:
    if isinstance(s, ast.DeclStmt):
        yield from s.decls
    elif isinstance(s, ast.Compound):
        for x in s.items:
            yield from _decls(x)
    elif isinstance(s, ast.For):
        if s.init is not None:
            yield from _decls(s.init)
        yield from _decls(s.body)
    elif isinstance(s, (ast.While, ast.DoWhile)):
        yield from _decls(s.body)
    elif isinstance(s, ast.If):
        yield from _decls(s.then)
        if s.otherwise is not None:
            yield from _decls(s.otherwise)


def _describe(t: Type | None) -> str:
    if t is None:
        return "<error>"
    if isinstance(t, TileType):
        return f"{t.element} tile, shape [{', '.join(map(str, t.shape))}]"
    return str(t)


def show_types(unit: ast.TranslationUnit, out: list[str]) -> None:
    """One line per function, parameter and declaration: location, name, type and shape."""
    for f in unit.functions:
        out.append(f"{f.loc}: {f.kind} {f.name} -> {_describe(f.return_ty)}")
        for p in f.params:
            out.append(f"  {p.loc}: param {p.name}: {_describe(p.ty)}")
        for d in _decls(f.body):
            out.append(f"  {d.loc}: {d.name}: {_describe(d.ty)}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tc-lint", description="Check a Triton-C kernel source.")
    ap.add_argument("file", help="the .tc source file ('-' for stdin)")
    ap.add_argument("-D", dest="defines", action="append", default=[], type=_parse_define,
                    metavar="NAME=VALUE", help="define a macro (value: C token text)")
    ap.add_argument("-I", dest="include_dirs", action="append", default=[],
                    metavar="DIR", help="add an include directory")
    ap.add_argument("--kernel", help="only this function")
    ap.add_argument("--show-types", action="store_true",
                    help="print every declaration with its type and shape")
    args = ap.parse_args(argv)
    try:
        defines = command_line_defines(args.defines)
    except ValueError as e:
        print(f"tc-lint: {e}", file=sys.stderr)
        return 1
    try:
        # bytes: the front end reports text that is not UTF-8 at its line (E0102)
        if args.file == "-":
            source, filename = sys.stdin.buffer.read(), "<stdin>"
        else:
            source, filename = read_source_file(args.file), args.file
    except OSError as e:
        print(f"tc-lint: cannot read {args.file}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        unit = frontend(source, defines, filename=filename,
                        include_dirs=args.include_dirs)
    except TcCompileError as e:
        print("\n".join([e.render(), *list_define_notes(e, defines)]), file=sys.stderr)
        return 1
    for w in unit.warnings:
        print(w.render(), file=sys.stderr)
    if args.kernel is not None:
        f = unit.function(args.kernel)
        if f is None:
            names = ", ".join(x.name for x in unit.functions)
            print(f"tc-lint: no function '{args.kernel}' in {filename} (it has: {names})",
                  file=sys.stderr)
            return 1
        unit = ast.TranslationUnit(functions=(f,), loc=unit.loc)
    if args.show_types:
        out: list[str] = []
        show_types(unit, out)
        print("\n".join(out))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
