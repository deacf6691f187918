"""Times the reference interpreter on the spec's kernels: fused softmax 1823x781 (f32) and the
tutorial matmul 512x768x896 (f16), checking each result against numpy. Each run must take under
LIMIT_S seconds (issue 4's target on a 2-core CI machine); the exit status is 1 when one does not.

    hatch run python tools/bench_interpreter.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tc_lang
from tc_ir.interpreter import Interpreter
from tc_ir.lower import lower

KERNELS = Path(__file__).resolve().parents[1] / "packages" / "tc-lang" / "tests" / "kernels"
LIMIT_S = 10.0


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_softmax(repeat: int) -> tuple[float, float]:
    src = (KERNELS / "softmax.tc").read_text()
    M, N = 1823, 781
    module = lower(tc_lang.frontend(src, {"BLOCK": 1024}, filename="softmax.tc"))
    run = Interpreter(module, source=src)
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    y = np.zeros_like(x)
    t = _best(lambda: run([y, x, N, N, M, N], (M,)), repeat)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    err = float(np.abs(y - e / e.sum(axis=1, keepdims=True)).max())
    return t, err


def bench_matmul(repeat: int, mb: int, nb: int, kb: int) -> tuple[float, float]:
    src = (KERNELS / "matmul_tutorial.tc").read_text()
    M, N, K = 512, 768, 896
    module = lower(tc_lang.frontend(src, {"TYPE": "half", "MB": mb, "NB": nb, "KB": kb}, filename="matmul.tc"))
    run = Interpreter(module, source=src)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    grid = (-(-M // mb) * -(-N // nb),)
    t = _best(lambda: run([a, b, c, M, N, K, K, N, N], grid), repeat)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    err = float(np.abs(c.astype(np.float32) - ref).max() / np.abs(ref).max())
    return t, err


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPU core(s), numpy {np.__version__}; best of {args.repeat}; limit {LIMIT_S:.0f} s")
    slowest = 0.0
    t, err = bench_softmax(args.repeat)
    slowest = max(slowest, t)
    print(f"softmax 1823x781 f32           {t * 1e3:8.1f} ms   max abs error {err:.2e}")
    for mb, nb, kb in ((128, 128, 32), (64, 64, 32), (32, 32, 32)):
        t, err = bench_matmul(args.repeat, mb, nb, kb)
        slowest = max(slowest, t)
        print(f"matmul 512x768x896 f16 {mb:>3}x{nb:>3}x{kb:<3} {t * 1e3:8.1f} ms   max rel error {err:.2e}")
    if slowest >= LIMIT_S:
        print(f"FAIL: a run took {slowest:.1f} s (limit {LIMIT_S:.0f} s)")
        sys.exit(1)
    print(f"OK: every run under {LIMIT_S:.0f} s (slowest {slowest * 1e3:.0f} ms)")


if __name__ == "__main__":
    main()
