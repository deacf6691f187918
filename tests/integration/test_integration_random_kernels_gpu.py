"""Random kernels (packages/tc-nvptx/tests/random_kernels.py) give the interpreter's results on
the GPU, and the kernels that ptxas miscompiled before tc_nvptx.ptx_fixups give numpy's.
tools/fuzz_kernels.py runs many more seeds; these (300 plain kernels, 100 wide ones) are a fixed
sample for every GPU check."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "packages" / "tc-nvptx" / "tests"))
import negation_cases as neg  # noqa: E402
import random_kernels as rk  # noqa: E402

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

#: Codes of the kernels the compiler may decline for the hardware (a layout the code generator
#: cannot build, a resource limit): a located error, never a wrong result.
DECLINED = ("E0690", "E07")


@pytest.mark.parametrize("case", neg.CASES, ids=[c.name for c in neg.CASES])
def test_negation_cases_on_the_gpu(case: neg.NegationCase) -> None:
    import tc_runtime as tc

    args, index, want = case.make()
    dev = [rk.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    tc.kernel(case.source, device="cuda", num_warps=case.num_warps)(*dev, grid=(1,))
    torch.cuda.synchronize()
    np.testing.assert_array_equal(rk.from_device(dev[index], args[index]), want)


@pytest.mark.parametrize("wide, seed", [(False, s) for s in range(300)] + [(True, s) for s in range(100)],
                         ids=[f"plain{s}" for s in range(300)] + [f"wide{s}" for s in range(100)])
def test_random_kernel_matches_the_interpreter(wide: bool, seed: int) -> None:
    from tc_lang import TcCompileError

    program = rk.generate(seed, wide)
    want = rk.interpret(program)
    try:
        got = rk.run_gpu(program)
    except TcCompileError as exc:
        assert any(d.code.startswith(DECLINED) for d in exc.diagnostics), str(exc)
        return
    problems = rk.compare(program, want, got)
    assert not problems, "\n".join(problems) + "\n" + program.source
