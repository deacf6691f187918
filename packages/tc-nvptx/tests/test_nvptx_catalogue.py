"""Every kernel of the catalogue (the spec kernels with their defines, the interpreter suite's
source kernels) compiles for sm_80 and sm_90, ptxas accepts the PTX, and it runs in the
interpreter on the catalogue's inputs (so the GPU comparison has a valid reference)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from tc_nvptx import compile
from tc_nvptx.ptxas import find_ptxas
from tc_opt import CompileOptions

sys.path.insert(0, str(Path(__file__).parent))
import nvptx_catalogue as cat  # noqa: E402

CASES = cat.all_cases()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", CASES, ids=cat.case_ids(CASES))
def test_compiles_and_ptxas_accepts(case: cat.Case, arch: str) -> None:
    k = compile(case.source, defines=case.defines, options=CompileOptions(arch=arch, num_warps=case.num_warps),
                filename=case.filename)
    assert ".entry" in k.ptx and f".target {arch}" in k.ptx
    if find_ptxas() is not None:
        assert k.cubin is not None and len(k.cubin) > 0


RUNNABLE = [c for c in CASES if c.make is not None and not c.name.startswith("matmul")]


@pytest.mark.parametrize("case", RUNNABLE, ids=cat.case_ids(RUNNABLE))
def test_catalogue_inputs_run_in_the_interpreter(case: cat.Case) -> None:
    from tc_ir.interpreter import interpret
    from tc_nvptx.compiler import frontend_module

    assert case.make is not None
    launch = case.make(np.random.default_rng(0), "odd")
    module = frontend_module(case.source, case.defines, None, case.filename)
    before = [np.array(a, copy=True) for a in launch.args if isinstance(a, np.ndarray)]
    interpret(module, list(launch.args), launch.grid)
    arrays = [a for a in launch.args if isinstance(a, np.ndarray)]
    assert any(not np.array_equal(a, b) for a, b in zip(arrays, before))  # something was written
