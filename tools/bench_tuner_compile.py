"""How long a first tc_torch.matmul call spends compiling its auto-tuner's configurations, with the
configurations compiled one by one in the calling process and with TC_COMPILE_WORKERS worker
processes (tc_runtime.precompile), each time into a fresh disk cache (measure-only; no GPU needed:
it compiles for `--arch` as the tuner would on such a GPU, for an aligned C = A B).

    PYTHONPATH=<packages/*/src> python3 tools/bench_tuner_compile.py [--dtype half|tf32]
        [--workers 0,4,8] [--limit N] [--arch sm_90]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any


def jobs_for(dtype: str, arch: str, limit: int | None) -> list[dict[str, Any]]:
    """The tuner's compile jobs for tc_torch.matmul's C = A B of `dtype` (its first `limit`
    configurations), every argument divisible by 16."""
    from tc_runtime import precompile
    from tc_torch.library import source
    from tc_torch.ops import matmul as mm

    configs = mm.TENSOR_CORE_CONFIGS if dtype == "half" else mm.TF32_CONFIGS
    defines = {"TYPE": "half" if dtype == "half" else "float", "ACC": "float",
               **{k: str(v) for k, v in {**mm.A_VARIANTS[False], **mm.B_VARIANTS[False]}.items()}}
    options = {"fp32_dot": "tf32"} if dtype == "tf32" else {}
    return [precompile.job(source("matmul"), filename="matmul.tc", name="matmul", defines={**defines, **c.defines},
                           arch=arch, num_warps=c.num_warps, num_stages=c.num_stages, spec=["divisible_by_16"] * 12,
                           options={**options, **(c.options or {})} or None)
            for c in configs[:limit]]


def seconds_to_compile(jobs: list[dict[str, Any]], workers: int) -> float:
    """Seconds to have every job compiled, into a fresh cache, as the tuner does: the workers
    first, then whatever they left, one by one here."""
    from tc_runtime import precompile

    before = os.environ.get("TC_CACHE_DIR")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TC_CACHE_DIR"] = cache
        try:
            start = time.perf_counter()
            precompile.precompile(jobs, workers=workers)
            for j in jobs:
                precompile.compile_job(j)
            return time.perf_counter() - start
        finally:
            if before is None:
                del os.environ["TC_CACHE_DIR"]
            else:
                os.environ["TC_CACHE_DIR"] = before


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--dtype", default="half", choices=("half", "tf32"))
    ap.add_argument("--workers", default=f"0,{os.cpu_count() or 1}",
                    help="comma-separated worker counts to time (0: one by one in this process)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N configurations")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args(argv)
    try:
        counts = [int(w) for w in args.workers.split(",")]
    except ValueError:
        ap.error(f"--workers takes whole numbers separated by commas, got {args.workers!r}")
    jobs = jobs_for(args.dtype, args.arch, args.limit)
    print(f"{len(jobs)} {args.dtype} configurations for {args.arch}, {os.cpu_count()} CPU cores")
    for w in counts:
        print(f"workers {w}: {seconds_to_compile(jobs, w):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
