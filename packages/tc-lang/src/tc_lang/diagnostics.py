"""Source locations, diagnostics and the typed errors of the front end.

Every error a user can cause is a `TcCompileError` carrying one or more `Diagnostic`s. Its text is
the rendered diagnostics in the compiler style users know::

    kernel.tc:4:20: error[E0301]: cannot broadcast shapes [128] and [64]
        bool check[BLOCK] = off < M;
                            ^~~~~~~
    hint: ...

No Python traceback from inside the compiler reaches the user: `TcCompileError` is the only thing
the front end raises for bad input (set TC_FRONTEND_DEBUG=1 to see internal frames).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence

import attrs


@attrs.frozen
class Location:
    """A range of source text: 1-based line and column of the first and last character.

    `file` is the user's file name (or "<source>"); `macro` names the macro whose expansion
    produced the text, when the location was mapped back from an expansion.
    """

    file: str
    line: int
    col: int
    end_line: int = attrs.field()
    end_col: int = attrs.field()
    macro: str | None = None

    @end_line.default
    def _end_line(self) -> int:
        return self.line

    @end_col.default
    def _end_col(self) -> int:
        return self.col

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def to(self, other: Location) -> Location:
        """The range from the start of `self` to the end of `other`."""
        return attrs.evolve(self, end_line=other.end_line, end_col=other.end_col)


UNKNOWN_LOCATION = Location("<unknown>", 0, 0)


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


class Category(enum.Enum):
    """The kind of a diagnostic; selects the exception class and the code's hundreds digit."""

    PREPROCESSOR = "preprocessor"  # E01xx
    SYNTAX = "syntax"  # E02xx
    NAME = "name"  # E03xx
    TYPE = "type"  # E04xx
    SHAPE = "shape"  # E05xx
    LOWERING = "lowering"  # E06xx (IR construction refused a checked program)
    RESOURCE = "resource"  # E07xx (the target cannot run the configuration)


@attrs.frozen
class Diagnostic:
    """One message about one place in the user's source."""

    category: Category
    code: str  # "E0201"
    message: str
    location: Location
    severity: Severity = Severity.ERROR
    hint: str | None = None
    source_line: str | None = None  # the text of location.line, for the caret display

    def render(self) -> str:
        """The diagnostic as the user sees it: header, source line, caret, hint."""
        loc = self.location
        head = f"{loc}: {self.severity.value}[{self.code}]: {self.message}"
        if loc.macro:
            head += f" (in expansion of macro '{loc.macro}')"
        lines = [head]
        if self.source_line is not None and loc.line > 0:
            text = self.source_line.rstrip("\n").expandtabs(1)
            lines.append("    " + text)
            start = max(loc.col, 1)
            if loc.end_line == loc.line and loc.end_col >= start:
                width = loc.end_col - start + 1
            else:
                width = max(1, len(text) - start + 1)
            lines.append("    " + " " * (start - 1) + "^" + "~" * (width - 1))
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


#: The most diagnostics one TcCompileError's message shows.
MAX_SHOWN_DIAGNOSTICS = 50


class TcCompileError(Exception):
    """Bad input to the compiler: one or more diagnostics at the user's source lines."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        super().__init__(self.render())

    def render(self) -> str:
        """The diagnostics rendered as the user sees them, one after another: the first
        MAX_SHOWN_DIAGNOSTICS, then a count of the rest (2,000 errors made a 250 KB message);
        `diagnostics` keeps them all."""
        shown = [d.render() for d in self.diagnostics[:MAX_SHOWN_DIAGNOSTICS]]
        more = len(self.diagnostics) - len(shown)
        if more > 0:
            shown.append(f"... and {more} more error{'s' if more > 1 else ''}")
        return "\n".join(shown)

    def __str__(self) -> str:
        return self.render()

    @property
    def first(self) -> Diagnostic:
        return self.diagnostics[0]


def with_source_lines(error: TcCompileError, source_line: Callable[[Location], str | None]) -> TcCompileError:
    """`error` with the text of each diagnostic's line filled in where it has none: the lowering,
    the passes and the code generator know locations but not the user's text, which the caller
    holding the front end's result looks up (`TranslationUnit.source_line`) for the caret."""
    error.diagnostics = tuple(
        d if d.source_line is not None or d.location.line <= 0
        else attrs.evolve(d, source_line=source_line(d.location))
        for d in error.diagnostics
    )
    error.args = (error.render(),)
    return error


class TcPreprocessorError(TcCompileError):
    """#error, an unterminated #if, a bad #include, a malformed define."""


class TcSyntaxError(TcCompileError):
    """The source does not follow the grammar."""


class TcNameError(TcCompileError):
    """An unknown or redefined name."""


class TcTypeError(TcCompileError):
    """Operand types that an operation does not accept."""


class TcShapeError(TcCompileError):
    """Tile shapes that cannot be broadcast, reduced, multiplied or declared."""


class TcLoweringError(TcCompileError):
    """A checked construct the IR lowering cannot express."""


class TcResourceError(TcCompileError):
    """A configuration needs more of a hardware resource than the target has."""


_CLASS_FOR: dict[Category, type[TcCompileError]] = {
    Category.PREPROCESSOR: TcPreprocessorError,
    Category.SYNTAX: TcSyntaxError,
    Category.NAME: TcNameError,
    Category.TYPE: TcTypeError,
    Category.SHAPE: TcShapeError,
    Category.LOWERING: TcLoweringError,
    Category.RESOURCE: TcResourceError,
}


def error_for(diagnostics: Iterable[Diagnostic]) -> TcCompileError:
    """The exception to raise for a batch of diagnostics: the class of the first one's category."""
    diags = list(diagnostics)
    if not diags:
        raise ValueError("error_for needs at least one diagnostic")
    return _CLASS_FOR[diags[0].category](diags)
