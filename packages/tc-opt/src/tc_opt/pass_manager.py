"""Passes and the pass manager: named passes run in order, verified, timed and optionally printed."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from tc_ir.ops import Module

from .options import CompileOptions


class Pass:
    """A transformation or analysis over a whole module. Subclasses set `name` and `run`."""

    name: str = "pass"

    def __init__(self, options: CompileOptions | None = None) -> None:
        self.options = options or CompileOptions()

    def run(self, module: Module) -> None:
        """Transform (or analyze) `module` in place."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<Pass {self.name}>"


def _printer() -> Callable[[Module], str] | None:
    try:
        from tc_ir.printer import print_module
    except ImportError:
        return None
    return print_module  # type: ignore[no-any-return]


def _verifier() -> Callable[[Module], object] | None:
    try:
        from tc_ir.verifier import verify
    except ImportError:
        return None
    return verify  # type: ignore[no-any-return]


def module_text(module: Module) -> str:
    """The module printed with tc_ir's printer (or a short fallback while it does not exist)."""
    printer = _printer()
    if printer is not None:
        return printer(module)
    lines = []
    for f in module.functions:
        lines.append(f"func {f.name}")
        for op in f.walk():
            ts = ", ".join(str(r.type) for r in op.results)
            lines.append(f"  {op.NAME} -> {ts}")
    return "\n".join(lines) + "\n"


def note_stage(exc: BaseException, stage: str) -> None:
    """Record on `exc` the compiler stage it escaped from (`tc_stage`), unless a stage nearer to
    its cause already did: an internal error is reported naming where it happened."""
    if getattr(exc, "tc_stage", None) is None:
        try:
            setattr(exc, "tc_stage", stage)
        except AttributeError:  # (an exception type without attributes of its own)
            pass


class PassVerificationError(RuntimeError):
    """A pass left invalid IR: an internal compiler error, naming the pass and the verifier's
    complaint (the IR after the pass is kept in `ir` for the bug report)."""

    def __init__(self, pass_name: str, cause: BaseException, ir: str) -> None:
        super().__init__(f"the IR is invalid after pass '{pass_name}': {cause}")
        self.pass_name = pass_name
        self.ir = ir


def format_timings(timings: dict[str, float], title: str = "pass timings") -> str:
    """A table of per-pass (or per-stage) wall times, slowest first, with the total."""
    total = sum(timings.values())
    width = max([len(k) for k in timings] + [5])
    lines = [f"===== {title} (total {total * 1e3:.1f} ms) ====="]
    for name, t in sorted(timings.items(), key=lambda kv: -kv[1]):
        share = 100.0 * t / total if total else 0.0
        lines.append(f"  {name:<{width}}  {t * 1e3:9.2f} ms  {share:5.1f}%")
    return "\n".join(lines) + "\n"


class PassManager:
    """Runs passes in order. After each one: verify (when asked and tc_ir has a verifier), print
    the IR when `print_after_all` or the pass is named in TC_DUMP_IR (comma list, or "all")."""

    def __init__(
        self,
        passes: Sequence[Pass] = (),
        verify: bool = True,
        print_after_all: bool = False,
        stream: TextIO | None = None,
    ) -> None:
        self.passes: list[Pass] = list(passes)
        self.verify = verify
        self.print_after_all = print_after_all
        self.print_after: set[str] = set()
        self.stream = stream
        self.timings: dict[str, float] = {}
        self.snapshots: dict[str, str] = {}
        self.keep_after: set[str] = set()

    def add(self, p: Pass) -> PassManager:
        """Append the pass `p`; returns the manager, so that calls chain."""
        self.passes.append(p)
        return self

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.passes]

    def timing_report(self) -> str:
        """The per-pass timings of every run so far (what `tcc --time-passes` prints)."""
        return format_timings(self.timings)

    def _wants_print(self, name: str) -> bool:
        env = {s.strip() for s in os.environ.get("TC_DUMP_IR", "").split(",") if s.strip()}
        return self.print_after_all or name in self.print_after or name in env or "all" in env

    def run(self, module: Module) -> Module:
        """Run the passes on `module` in order, verifying, timing and printing after each as configured;
        returns `module`, changed in place."""
        verify = _verifier() if self.verify else None
        for p in self.passes:
            start = time.perf_counter()
            try:
                p.run(module)
            except Exception as exc:  # (tc_nvptx.compiler reports it as an internal error)
                note_stage(exc, f"pass '{p.name}'")
                raise
            self.timings[p.name] = self.timings.get(p.name, 0.0) + time.perf_counter() - start
            if verify is not None:
                start = time.perf_counter()
                try:
                    verify(module)
                except Exception as exc:
                    raise PassVerificationError(p.name, exc, module_text(module)) from exc
                self.timings["(verify)"] = self.timings.get("(verify)", 0.0) + time.perf_counter() - start
            if p.name in self.keep_after:
                self.snapshots[p.name] = module_text(module)
            if self._wants_print(p.name):
                out = self.stream or sys.stderr
                out.write(f"// ----- IR after {p.name} -----\n{module_text(module)}\n")
        return module
