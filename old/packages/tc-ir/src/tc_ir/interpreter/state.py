"""What the ops of a running program can see besides their operands: program id, grid, memory."""

from __future__ import annotations

from tc_lang.diagnostics import Location

from .memory import Memory


class ProgramState:
    """Mutable: the grid driver updates `pid` before running each program."""

    __slots__ = ("pid", "grid", "memory", "source_lines")

    def __init__(self, source: str | None = None) -> None:
        self.pid: tuple[int, int, int] = (0, 0, 0)
        self.grid: tuple[int, int, int] = (1, 1, 1)
        self.memory: Memory = Memory()
        self.source_lines = source.splitlines() if source is not None else None

    def where(self, loc: Location | None) -> str:
        """`file:line:col` of an op (and its source line when the source is known)."""
        if loc is None:
            return "<unknown location>"
        text = str(loc)
        if self.source_lines is not None and 0 < loc.line <= len(self.source_lines):
            text += f" (`{self.source_lines[loc.line - 1].strip()}`)"
        return text
