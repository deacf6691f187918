"""CompileOptions.precise_math: the PreciseMath pass clears `approx` on math ops, and the option
implies IEEE division."""

from __future__ import annotations

import attrs
from tc_ir.ops import UnaryOp
from tc_ir.testing import lower_source
from tc_opt import CompileOptions, PreciseMath, gpu_pipeline

SRC = """
__global__ void k(float *X, float *Y) {
  int i[64] = 0 ... 64;
  float x[64] = *(X + i);
  *(Y + i) = exp(x) + log(x) + sin(x) + sqrt(x);
}
"""


def _approx(precise: bool) -> dict[str, bool]:
    m = lower_source(SRC)
    PreciseMath(CompileOptions(precise_math=precise)).run(m)
    return {op.kind: op.approx for op in m.walk() if isinstance(op, UnaryOp)}


def test_precise_math_clears_approx() -> None:
    assert _approx(False) == {"exp": True, "log": True, "sin": False, "sqrt": False}  # the language
    assert _approx(True) == {"exp": False, "log": False, "sin": False, "sqrt": False}


def test_precise_math_implies_precise_div() -> None:
    assert CompileOptions().precise_div is False
    assert CompileOptions(precise_math=True).precise_div is True
    assert CompileOptions(precise_math=True) == CompileOptions(precise_math=True, precise_div=True)
    assert CompileOptions(precise_div=True).precise_math is False
    assert attrs.evolve(CompileOptions(), precise_math=True).precise_div is True


def test_pass_in_pipeline_early() -> None:
    names = gpu_pipeline(CompileOptions(precise_math=True)).names
    assert names.index("precise-math") < names.index("canonicalize")
