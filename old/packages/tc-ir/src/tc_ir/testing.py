"""Helpers for tests of tc-ir and of the packages above it: lower a source with every check on,
assert the text round-trip, run FileCheck on printed IR.

Every IR a test produces should go through `round_trip` (which `lower_source` does): the issue's
promise is that print(parse(print(m))) == print(m) for every such module.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .ir_parser import parse_module
from .lower import lower
from .ops import Function, Module
from .printer import print_module
from .verifier import verify

__all__ = ["filecheck", "lower_source", "round_trip"]


def round_trip(module: Module | Function, filename: str = "<ir>") -> str:
    """Verify `module`, print it, parse the text, verify that and print it again; raise
    AssertionError unless both texts are equal. Returns the text."""
    if isinstance(module, Function):
        module = Module([module])
    verify(module)
    text = print_module(module)
    again = parse_module(text, filename=filename)
    verify(again)
    second = print_module(again)
    if second != text:
        raise AssertionError(f"the IR text does not round-trip:\n--- printed\n{text}\n--- re-printed\n{second}")
    return text


def lower_source(
    source: str,
    defines: Mapping[str, Any] | None = None,
    *,
    kernel: str | None = None,
    filename: str = "<source>",
) -> Module:
    """Source -> tc_lang front end -> lowering -> verified, round-tripped Module in which every
    op and function has a source location."""
    import tc_lang

    unit = tc_lang.frontend(source, dict(defines) if defines else None, filename=filename)
    module = lower(unit, kernel, verify=True)
    unlocated = [op.NAME for op in module.walk() if op.loc is None or op.loc.line <= 0]
    unlocated += [f"function {f.name}" for f in module.functions if f.loc is None or f.loc.line <= 0]
    if unlocated:
        raise AssertionError(f"ops without a source location: {unlocated}")
    round_trip(module)
    return module


def filecheck(text: str, checks: str) -> None:
    """Run the `filecheck` package (LLVM FileCheck semantics) with `checks` over `text`; raise
    AssertionError with its report and the text when they do not match. Runs in-process (the
    package reads stdin and writes its report to stdout/stderr, which are redirected here)."""
    import contextlib
    import io

    from filecheck.matcher import Matcher
    from filecheck.options import parse_argv_options

    with tempfile.TemporaryDirectory() as tmp:
        check_file = Path(tmp) / "checks.txt"
        check_file.write_text(checks)
        report = io.StringIO()
        saved_stdin = sys.stdin
        sys.stdin = io.StringIO(text)
        try:
            with contextlib.redirect_stdout(report), contextlib.redirect_stderr(report):
                opts = parse_argv_options(["filecheck", str(check_file)])
                rc = Matcher.from_opts(opts).run()
        finally:
            sys.stdin = saved_stdin
    if rc != 0:
        raise AssertionError(f"FileCheck failed:\n{report.getvalue()}\n--- input\n{text}")
