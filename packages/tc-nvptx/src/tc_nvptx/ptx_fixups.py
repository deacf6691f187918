"""Rewrites of LLVM's PTX that keep ptxas from miscompiling it.

Integer negation. ptxas (12.8 and 13.0, and the JIT of driver 580) folds a `neg.s16/.s32/.s64`
into the instructions that read its result and at -O1 and above sometimes loses it there:
- a chain of `min.s32` over negated values became three-input minimums (VIMNMX3) that read half
  of the values without their negation;
- a `neg.s16` of 0x8000 followed by `shr.s16` was computed in 32 bits, giving 128 for -128.
Found by differential fuzzing against the interpreter (tools/fuzz_kernels.py; the reproductions
are tests/integration/test_integration_random_kernels_gpu.py's ptxas cases). Written as
`not` and `add 1` (the same two's-complement value), the negation is no longer folded and the
kernels compute what the PTX says. `sub.s32 d, 0, a` is not enough: ptxas reads it as a negation.
"""

from __future__ import annotations

import re

_NEG = re.compile(r"^(?P<indent>[ \t]*)(?P<pred>@!?%\w+[ \t]+)?neg\.s(?P<bits>16|32|64)[ \t]+(?P<d>%\w+),[ \t]*"
                  r"(?P<a>%\w+);", re.M)


def _two_instructions(m: re.Match[str]) -> str:
    pred, bits, d = m["pred"] or "", m["bits"], m["d"]
    return (f"{m['indent']}{pred}not.b{bits} \t{d}, {m['a']};\n"
            f"{m['indent']}{pred}add.s{bits} \t{d}, {d}, 1;")


def spell_out_negations(ptx: str) -> str:
    """Every integer `neg` of `ptx` as `not` then `add 1` (see the module docstring)."""
    return _NEG.sub(_two_instructions, ptx)


def fix_ptx(ptx: str) -> str:
    """LLVM's PTX with the rewrites above: what tc hands to ptxas and to the driver."""
    return spell_out_negations(ptx)
