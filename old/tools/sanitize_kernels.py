"""Run the tutorial kernels once each at small, ragged sizes: the program that
`compute-sanitizer --tool memcheck` watches in tools/gpu_check.py (any out-of-bounds or
misaligned access, or a race on shared memory with --tool racecheck, is reported by it).

    python3 tools/sanitize_kernels.py        # prints one line per kernel, exits 1 on a mismatch
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "packages" / "tc-nvptx" / "tests"))

TUTORIAL = {"vector_add", "softmax", "transpose_masked", "matmul_tutorial", "matmul_autotuned", "transpose"}


def main() -> int:
    import numpy as np
    import torch

    import nvptx_catalogue as cat
    import tc_runtime as tc

    failed = 0
    for case in cat.all_cases():
        base = case.name.split("[")[0]
        if base not in TUTORIAL or case.make is None:
            continue
        launch = case.make(np.random.default_rng(1), "odd")
        args: list[Any] = [torch.from_numpy(a).cuda() if isinstance(a, np.ndarray) else a for a in launch.args]
        ref = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in launch.args]
        tc.kernel(case.source, device="cuda", defines=case.defines)(*args, grid=launch.grid)
        tc.kernel(case.source, device="cpu", defines=case.defines)(*ref, grid=launch.grid)
        torch.cuda.synchronize()
        ok = True
        for i in launch.outputs:
            got = args[i].cpu().numpy().astype(np.float64)
            want = np.asarray(ref[i]).astype(np.float64)
            ok &= bool(np.allclose(got, want, rtol=1e-2, atol=5e-2))
        failed += not ok
        print(f"{'ok ' if ok else 'BAD'} {case.name}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
