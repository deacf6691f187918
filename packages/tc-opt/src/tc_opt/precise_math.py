"""CompileOptions.precise_math: every math op (tc.unary exp, log, ...) takes its accurate version."""

from __future__ import annotations

from tc_ir.ops import Module, UnaryOp

from .pass_manager import Pass


class PreciseMath(Pass):
    """With `precise_math`, clears `approx` on every unary math op, so that exp and log (fast
    approximate in the language, like __expf) lower to the accurate sequences as the other math
    functions do. Without it the IR is left alone."""

    name = "precise-math"

    def run(self, module: Module) -> None:
        """Clear `approx` on every unary math op when `precise_math` is set."""
        if not self.options.precise_math:
            return
        for op in module.walk():
            if isinstance(op, UnaryOp) and op.approx:
                op.approx = False
