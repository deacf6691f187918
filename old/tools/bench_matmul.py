"""fp16 matmul throughput: tc's tutorial kernel (several configurations, and auto-tuned over
them) vs torch.matmul (cuBLAS) and Triton's tutorial matmul, square sizes 512..8192, in TFLOPS.

    PYTHONPATH=<packages/*/src> python3 tools/bench_matmul.py [--sizes 512,1024,...]
        [--shapes 8192x8192x1024,4096x14336x4096,1024x4096x14336] [--dtype half|bf16] [--quick]
        [--rounds 5]

Prints a markdown table (the best tc configuration per size and the ratio to cuBLAS last), and
checks each result against torch first (a wrong kernel is reported, never timed). With --rounds,
a second table: the two fastest tc configurations of each shape, cuBLAS and Triton timed in
interleaved rounds (what the verdicts should be read from).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from bench_rounds import interleaved  # noqa: E402

SRC = (ROOT / "packages" / "tc-lang" / "tests" / "kernels" / "matmul_tutorial.tc").read_text()

#: (MB, NB, KB, num_warps, num_stages[, schedule]); "persistent": one program per SM looping over
#: the tiles, with a producer warp and bulk-store epilogues (tc.config options); "overlap": each
#: tile's first product issued before the previous tile's stores (CompileOptions.overlap_epilogue)
CONFIGS: list[tuple[Any, ...]] = [
    (128, 128, 32, 4, 3), (128, 128, 32, 4, 4), (128, 128, 64, 4, 3), (128, 256, 32, 8, 3), (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4), (256, 128, 32, 8, 3), (128, 128, 64, 8, 4), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4),
    (64, 64, 64, 4, 3), (128, 256, 64, 8, 3, "persistent"), (128, 256, 64, 8, 4, "persistent"),
    (128, 256, 64, 8, 4, "overlap")]
SCHEDULES = {"persistent": {"persistent": True, "tma_store": True},
             "overlap": {"persistent": True, "tma_store": True, "overlap_epilogue": True}}
#: The line before the table of interleaved rounds (tools/gpu_check.py reads the rows after it).
INTERLEAVED = "interleaved rounds"


def tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


def parse_shapes(sizes: str, shapes: str) -> list[tuple[int, int, int]]:
    """Square `sizes` ("512,1024") and `shapes` ("8192x8192x1024": M x N x K) as (M, N, K)."""
    out = [(int(s), int(s), int(s)) for s in sizes.split(",") if s]
    for sh in (x for x in shapes.split(",") if x):
        dims = [int(d) for d in sh.lower().split("x")]
        if len(dims) != 3:
            raise SystemExit(f"--shapes: {sh!r} is not MxNxK")
        out.append((dims[0], dims[1], dims[2]))
    return out


def main() -> None:
    import torch

    import tc_runtime as tc

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="512,1024,2048,4096,8192", help="square sizes ('' for none)")
    ap.add_argument("--shapes", default="", help="more shapes, MxNxK (e.g. 8192x8192x1024)")
    ap.add_argument("--dtype", default="half", choices=["half", "bf16"])
    ap.add_argument("--quick", action="store_true", help="only the first three configurations")
    ap.add_argument("--rounds", type=int, default=0,
                    help="then time the two fastest tc configurations of each shape, cuBLAS and Triton in "
                    "this many interleaved rounds (single shots after a compile are off by up to 7%%)")
    args = ap.parse_args()
    shapes = parse_shapes(args.sizes, args.shapes)
    dtype = torch.float16 if args.dtype == "half" else torch.bfloat16
    configs = CONFIGS[:3] if args.quick else CONFIGS
    triton_matmul: Any = None
    try:
        import triton_matmul as peer

        triton_matmul = peer.triton_matmul
    except Exception as exc:  # no triton on this machine
        print(f"(triton unavailable: {exc})")
    kernels = {}
    for cfg in configs:
        mb, nb, kb, w, s = cfg[:5]
        options = SCHEDULES[cfg[5]] if len(cfg) > 5 else None
        kernels[cfg] = tc.kernel(SRC, device="cuda", defines={"TYPE": args.dtype}, autotune_configs=[
            tc.config({"MB": mb, "NB": nb, "KB": kb}, num_warps=w, num_stages=s, options=options)])
    rows: list[tuple[str, float, float | None, dict[Any, float]]] = []
    inter: list[tuple[str, dict[str, float], str, float]] = []
    for m, n, k in shapes:
        runs: dict[Any, Any] = {}
        name = str(m) if m == n == k else f"{m}x{n}x{k}"
        # the tutorial kernel reads whole tiles unmasked (it only masks its store): pad the operands
        mp, np_, kp = (-(-m // 256) * 256, -(-n // 256) * 256, -(-k // 64) * 64)
        a = torch.zeros(mp, kp, device="cuda", dtype=dtype)
        b = torch.zeros(kp, np_, device="cuda", dtype=dtype)
        a[:m, :k] = torch.randn(m, k, device="cuda", dtype=dtype)
        b[:k, :n] = torch.randn(k, n, device="cuda", dtype=dtype)
        av, bv = a[:m, :k], b[:k, :n]
        c = torch.empty(m, n, device="cuda", dtype=dtype)
        ref = torch.matmul(av, bv)
        t_torch = tflops(m, n, k, tc.testing.do_bench(lambda: torch.matmul(av, bv))[0])
        t_triton = None
        if triton_matmul is not None and dtype == torch.float16:
            torch.testing.assert_close(triton_matmul(av, bv), ref, atol=0.5, rtol=2e-2)
            t_triton = tflops(m, n, k, tc.testing.do_bench(lambda: triton_matmul(av, bv))[0])
        ours: dict[Any, float] = {}
        for cfg, kern in kernels.items():
            mb, nb = cfg[0], cfg[1]

            def run(kern: Any = kern, mb: int = mb, nb: int = nb) -> None:
                kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, a.stride(0), b.stride(0), c.stride(0),
                     grid=lambda opt: (tc.cdiv(m, mb) * tc.cdiv(n, nb),))

            try:
                run()
                torch.cuda.synchronize()
                err = (c.float() - ref.float()).abs().max().item()
                if err > 0.5 + 2e-2 * ref.float().abs().max().item():
                    print(f"{name} {cfg}: WRONG (max error {err:.3g})", flush=True)
                    continue
                ours[cfg] = tflops(m, n, k, tc.testing.do_bench(run)[0])
            except Exception as exc:
                print(f"{name} {cfg}: failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                continue
            print(f"{name} tc {cfg}: {ours[cfg]:.1f} TFLOPS", flush=True)
            runs[cfg] = run
        rows.append((name, t_torch, t_triton, ours))
        if args.rounds and ours:
            peers: dict[str, Any] = {"cuBLAS": lambda: torch.matmul(av, bv)}
            if t_triton is not None:
                peers["Triton"] = lambda: triton_matmul(av, bv)
            finalists = {"/".join(map(str, c)): runs[c] for c in sorted(ours, key=lambda c: -ours[c])[:2]}
            ms = interleaved({**peers, **finalists}, rounds=args.rounds, rep=100)
            fastest = min(finalists, key=lambda label: ms[label])
            inter.append((name, {p: tflops(m, n, k, ms[p]) for p in peers}, fastest, tflops(m, n, k, ms[fastest])))
    print()
    head = "| shape | torch (cuBLAS) | triton | " + " | ".join("tc " + "/".join(map(str, c)) for c in configs)
    print(head + " | tc best | tc best / cuBLAS |")
    print("|" + "---|" * (len(configs) + 5))
    for name, tt, tr, ours in rows:
        best = max(ours.values()) if ours else 0.0
        cells = [f"{ours[c]:.1f}" if c in ours else "-" for c in configs]
        trs = f"{tr:.1f}" if tr is not None else "-"
        print(f"| {name} | {tt:.1f} | {trs} | " + " | ".join(cells) + f" | {best:.1f} | {best / tt:.2f} |")
    if inter:
        print(f"\n{INTERLEAVED} (medians of {args.rounds}, TFLOPS):")
        print("| shape | cuBLAS | Triton | tc best of two | tc | tc / cuBLAS | tc / Triton |")
        print("|---|---|---|---|---|---|---|")
        for name, peer_tflops, label, ours_tflops in inter:
            cublas, triton = peer_tflops["cuBLAS"], peer_tflops.get("Triton")
            print(f"| {name} | {cublas:.1f} | {f'{triton:.1f}' if triton else '-'} | {label} | {ours_tflops:.1f} | "
                  f"{ours_tflops / cublas:.3f} | {f'{ours_tflops / triton:.3f}' if triton else '-'} |")


if __name__ == "__main__":
    main()
