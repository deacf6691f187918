"""The GPU gives the interpreter's result for every kernel of the catalogue (the spec kernels and
the interpreter suite's kernels), at an odd and at a large size: bit for bit for integer and
data-movement kernels, within the dtype's tolerance otherwise (float sums may be ordered
differently, exp/log are approximate in Triton-C)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "packages" / "tc-nvptx" / "tests"))
import nvptx_catalogue as cat  # noqa: E402
from random_kernels import from_device, to_device  # noqa: E402

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CASES = [c for c in cat.all_cases() if c.make is not None]


def _tolerance(dtype: Any, case: cat.Case) -> tuple[float, float]:
    if dtype == np.float16:
        return 1e-2, 5e-2
    if case.name.startswith("matmul"):
        return 1e-4, 1e-3
    return 1e-4, 1e-5


@pytest.mark.parametrize("scale", ["odd", "large"])
@pytest.mark.parametrize("case", CASES, ids=cat.case_ids(CASES))
def test_gpu_matches_interpreter(case: cat.Case, scale: str) -> None:
    import tc_runtime as tc

    assert case.make is not None
    launch = case.make(np.random.default_rng(42), scale)
    cpu_args: list[Any] = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in launch.args]
    gpu_args: list[Any] = [to_device(a) if isinstance(a, np.ndarray) else a for a in launch.args]
    tc.kernel(case.source, device="cpu", defines=case.defines)(*cpu_args, grid=launch.grid)
    tc.kernel(case.source, device="cuda", defines=case.defines, num_warps=case.num_warps)(*gpu_args, grid=launch.grid)
    torch.cuda.synchronize()
    for i in launch.outputs:
        want = cpu_args[i]
        got = from_device(gpu_args[i], want)
        if launch.view is not None:
            want, got = launch.view(i, want), launch.view(i, got)
        if launch.exact or want.dtype.kind in "iub":
            np.testing.assert_array_equal(got, want, err_msg=f"{case.name} output {i} ({scale})")
        else:
            rtol, atol = launch.tolerance_of(i) or _tolerance(want.dtype, case)
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"{case.name} output {i} ({scale})")
