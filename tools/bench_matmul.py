"""fp16 matmul throughput: tc's tutorial kernel (several configurations, and auto-tuned over
them) vs torch.matmul (cuBLAS) and Triton's tutorial matmul, square sizes 512..8192, in TFLOPS.

    PYTHONPATH=<packages/*/src> python3 tools/bench_matmul.py [--sizes 512,1024,...] [--quick]

Prints a markdown table (the best tc configuration per size and the ratio to cuBLAS last), and
checks each result against torch first (a wrong kernel is reported, never timed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
SRC = (ROOT / "packages" / "tc-lang" / "tests" / "kernels" / "matmul_tutorial.tc").read_text()

#: (MB, NB, KB, num_warps, num_stages)
CONFIGS = [(128, 128, 32, 4, 3), (128, 128, 32, 4, 4), (128, 128, 64, 4, 3), (128, 256, 32, 8, 3),
           (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 32, 8, 3), (128, 128, 64, 8, 4), (64, 128, 32, 4, 4),
           (128, 64, 32, 4, 4), (64, 64, 64, 4, 3)]


def tflops(n: int, ms: float) -> float:
    return 2.0 * n**3 / (ms * 1e-3) / 1e12


def main() -> None:
    import torch

    import tc_runtime as tc

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="512,1024,2048,4096,8192")
    ap.add_argument("--quick", action="store_true", help="only the first three configurations")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    configs = CONFIGS[:3] if args.quick else CONFIGS
    triton_matmul: Any = None
    try:
        import triton_matmul as peer

        triton_matmul = peer.triton_matmul
    except Exception as exc:  # no triton on this machine
        print(f"(triton unavailable: {exc})")
    kernels = {}
    for cfg in configs:
        mb, nb, kb, w, s = cfg
        kernels[cfg] = tc.kernel(SRC, device="cuda", defines={"TYPE": "half", "MB": mb, "NB": nb, "KB": kb},
                                 num_warps=w, num_stages=s)
    rows: list[tuple[int, float, float | None, dict[Any, float]]] = []
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        ref = torch.matmul(a, b)
        t_torch = tflops(n, tc.testing.do_bench(lambda: torch.matmul(a, b))[0])
        t_triton = None
        if triton_matmul is not None:
            torch.testing.assert_close(triton_matmul(a, b), ref, atol=0.5, rtol=2e-2)
            t_triton = tflops(n, tc.testing.do_bench(lambda: triton_matmul(a, b))[0])
        ours: dict[Any, float] = {}
        for cfg, k in kernels.items():
            mb, nb = cfg[0], cfg[1]

            def run(k: Any = k, mb: int = mb, nb: int = nb) -> None:
                k(a.data_ptr(), b.data_ptr(), c.data_ptr(), n, n, n, n, n, n,
                  grid=lambda opt: (tc.cdiv(n, mb) * tc.cdiv(n, nb),))

            try:
                run()
                torch.cuda.synchronize()
                err = (c.float() - ref.float()).abs().max().item()
                if err > 0.5 + 2e-2 * ref.float().abs().max().item():
                    print(f"n={n} {cfg}: WRONG (max error {err:.3g})", flush=True)
                    continue
                ours[cfg] = tflops(n, tc.testing.do_bench(run)[0])
            except Exception as exc:
                print(f"n={n} {cfg}: failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                continue
            print(f"n={n} tc {cfg}: {ours[cfg]:.1f} TFLOPS", flush=True)
        rows.append((n, t_torch, t_triton, ours))
    print()
    head = "| N | torch (cuBLAS) | triton | " + " | ".join("tc " + "/".join(map(str, c)) for c in configs)
    print(head + " | tc best | tc best / cuBLAS |")
    print("|" + "---|" * (len(configs) + 5))
    for n, tt, tr, ours in rows:
        best = max(ours.values()) if ours else 0.0
        cells = [f"{ours[c]:.1f}" if c in ours else "-" for c in configs]
        trs = f"{tr:.1f}" if tr is not None else "-"
        print(f"| {n} | {tt:.1f} | {trs} | " + " | ".join(cells) + f" | {best:.1f} | {best / tt:.2f} |")


if __name__ == "__main__":
    main()
