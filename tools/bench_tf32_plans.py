"""Where copying one operand K-contiguous first pays for a tf32 product (tc_torch.matmul's
`transpose_first`): wgmma reads 32-bit operands K-major only, so A^T B (both operands M- or
N-contiguous: dB = A^T dC in training) restages one operand in every K step of the kernel, while
a copy made by tc's transpose kernel lets the product run in a faster layout. Times each plan of
tc_torch.matmul against torch.matmul (allow_tf32) in interleaved rounds, per shape, and
prints a table of TFLOPS (the copy counted in tc's time) and ratios to torch; the crossing sets
tc_torch.ops.matmul.TRANSPOSE_FIRST_MIN. Every plan runs through tc_torch.matmul (its fast path).

    PYTHONPATH=<packages/*/src> python3 tools/bench_tf32_plans.py [--shapes 4096x4096x4096,...]
        [--rounds 3]

Every plan's result is checked against a float64 product first (a wrong one is reported and
makes the exit status 1).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from bench_matmul import parse_shapes  # noqa: E402
from bench_rounds import interleaved  # noqa: E402

DEFAULT_SHAPES = ("512x512x512,1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072,"
                  "4096x4096x4096,8192x8192x8192,8192x1024x8192,1024x8192x8192,4096x4096x1024,"
                  "4096x1024x4096,1024x4096x4096")
PLANS = ("none", "a", "b", "auto")


def planned(plan: str, a: Any, b: Any) -> Callable[[], Any]:
    """tc_torch.matmul(a, b, precision="tf32") with its choice of plan forced (auto: its own), so
    every plan runs through the op's fast path as a user's call does."""
    import tc_torch
    from tc_torch.ops import matmul as mm

    own = mm.pick_transpose_first

    def forced(m: int, n: int, k: int, ta: bool, tb: bool) -> str:
        return plan if ta and not tb else "none"

    def call() -> Any:
        mm.pick_transpose_first = forced if plan != "auto" else own
        mm._PLANS.clear()  # (a launch planned under another choice would skip this one's)
        try:
            return tc_torch.matmul(a, b, precision="tf32")
        finally:
            mm.pick_transpose_first = own
    return call


def main(argv: list[str] | None = None) -> int:
    import torch

    import tc_torch
    from tc_torch.ops import matmul as mm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxNxK,...")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 1
    ok = True
    lines: list[str] = []
    torch.manual_seed(0)
    for m, n, k in parse_shapes("", args.shapes):
        a, b = torch.randn(k, m, device="cuda").t(), torch.randn(k, n, device="cuda")
        exact = a.double() @ b.double()
        providers: dict[str, Callable[[], Any]] = {}
        for plan in PLANS:
            fn = planned(plan, a, b)
            fn()  # (tunes the kernels; the next call takes the fast path)
            err = float((fn().double() - exact).norm() / exact.norm())
            if not err < 2e-3:
                print(f"{m}x{n}x{k} plan {plan}: WRONG (relative error {err:.2e})", flush=True)
                ok = False
                continue
            providers[plan] = fn
        providers["torch"] = functools.partial(torch.matmul, a, b)
        # the copy of the smaller operand alone (what "auto" transposes: A^T or B, row-major)
        providers["copy"] = functools.partial(tc_torch.transpose, a.t() if m <= n else b)
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            ms = interleaved(providers, rounds=args.rounds)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        tflops = {name: 2.0 * m * n * k / (t * 1e-3) / 1e12 for name, t in ms.items()}
        chosen = mm.pick_transpose_first(m, n, k, True, False)
        cells = ", ".join(f"{p} {tflops[p]:.1f} ({tflops[p] / tflops['torch']:.3f}x)"
                          for p in PLANS if p in tflops)
        line = (f"{m}x{n}x{k} A^T B: torch {tflops['torch']:.1f} TFLOPS; {cells}; auto = {chosen}; "
                f"the copy alone {ms['copy'] * 1e3:.1f} us")
        print(line, flush=True)
        lines.append(line)
    print("\nplans (TFLOPS, x torch allow_tf32, medians of interleaved rounds; the copy counted):")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
