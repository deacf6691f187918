"""The one way the lowering reports a construct it cannot express: a located TcLoweringError."""

from __future__ import annotations

from typing import NoReturn

from tc_lang.diagnostics import (
    UNKNOWN_LOCATION,
    Category,
    Diagnostic,
    Location,
    TcLoweringError,
    TcNameError,
)

# E06xx: lowering. Codes are stable so tests and users can refer to them.
UNSUPPORTED = "E0601"
BAD_OPERAND = "E0602"
BAD_SHAPE = "E0603"
BAD_CALL = "E0604"
RECURSION = "E0605"
NO_KERNEL = "E0606"


def fail(message: str, loc: Location | None, code: str = UNSUPPORTED, hint: str | None = None) -> NoReturn:
    """Raise a TcLoweringError at `loc`."""
    raise TcLoweringError(
        [Diagnostic(Category.LOWERING, code, message, loc or UNKNOWN_LOCATION, hint=hint)]
    )


def unknown_name(message: str, loc: Location | None, hint: str | None = None) -> NoReturn:
    """Raise a TcNameError (E0301, an unknown name) at `loc`."""
    raise TcNameError([Diagnostic(Category.NAME, "E0301", message, loc or UNKNOWN_LOCATION, hint=hint)])
