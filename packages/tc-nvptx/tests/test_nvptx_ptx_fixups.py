"""tc_nvptx.ptx_fixups: integer negations reach ptxas as `not` + `add 1` (ptxas miscompiled
`neg`), and the kernels where that mattered compute the right values on the interpreter."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from tc_nvptx import compile
from tc_nvptx.ptx_fixups import spell_out_negations
from tc_nvptx.ptxas import find_ptxas
from tc_opt import CompileOptions

sys.path.insert(0, str(Path(__file__).parent))
import negation_cases as neg  # noqa: E402


def test_negations_become_not_and_add() -> None:
    ptx = ("\tneg.s32 \t%r5, %r4;\n"
           "\t@%p1 neg.s16 \t%rs2, %rs2;\n"
           "\t@!%p3 neg.s64 %rd7, %rd1;\n"
           "\tneg.f32 \t%f1, %f2;\n"
           "\tneg.ftz.f32 \t%f3, %f2;\n")
    # a blank line before stays where it was; the two instructions keep the line's indentation
    assert spell_out_negations("\n\n\tneg.s32 %r1, %r2;\n") == "\n\n\tnot.b32 \t%r1, %r2;\n\tadd.s32 \t%r1, %r1, 1;\n"
    assert spell_out_negations(ptx) == (
        "\tnot.b32 \t%r5, %r4;\n\tadd.s32 \t%r5, %r5, 1;\n"
        "\t@%p1 not.b16 \t%rs2, %rs2;\n\t@%p1 add.s16 \t%rs2, %rs2, 1;\n"
        "\t@!%p3 not.b64 \t%rd7, %rd1;\n\t@!%p3 add.s64 \t%rd7, %rd7, 1;\n"
        "\tneg.f32 \t%f1, %f2;\n"
        "\tneg.ftz.f32 \t%f3, %f2;\n")
    # a blank line before stays where it was; the two instructions keep the line's indentation
    assert spell_out_negations("\n\n\tneg.s32 %r1, %r2;\n") == "\n\n\tnot.b32 \t%r1, %r2;\n\tadd.s32 \t%r1, %r1, 1;\n"


@pytest.mark.parametrize("case", neg.CASES, ids=[c.name for c in neg.CASES])
def test_compiled_kernels_have_no_integer_neg(case: neg.NegationCase) -> None:
    k = compile(case.source, options=CompileOptions(arch="sm_90", num_warps=case.num_warps))
    assert not re.search(r"\bneg\.s(16|32|64)\b", k.ptx)
    assert re.search(r"\bnot\.b(16|32)\b", k.ptx)
    if find_ptxas() is not None:
        assert k.cubin


@pytest.mark.parametrize("case", neg.CASES, ids=[c.name for c in neg.CASES])
def test_negation_cases_run_right_on_the_interpreter(case: neg.NegationCase) -> None:
    import tc_runtime as tc

    args, index, want = case.make()
    tc.kernel(case.source, device="cpu")(*args, grid=(1,))
    np.testing.assert_array_equal(args[index], want)
