"""Time tc_torch.matmul's configurations one by one, forced, two ways: as the auto-tuner's final
rounds time them (tc_runtime.autotune.median_ms: an L2 flush before each launch, 100 ms windows,
the configurations taking turns) and as the benchmarks do (tools/bench_rounds.py, do_bench,
interleaved with cuBLAS). Says whether the tuner's ranking of close configurations is the
benchmarks' (measure-only helper).

    PYTHONPATH=<packages/*/src> python3 tools/bench_matmul_configs.py [--size 8192]
        [--dtype half|bf16] [--configs I,J,...] [--rounds 5] [--order tuner-first|bench-first]

--configs: indices into tc_torch's TENSOR_CORE_CONFIGS (default: the 128x256x64/8 ones and the
persistent ones, those the tuner's finalists come from at 4096^3 and 8192^3).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def label(cfg: object) -> str:
    d = cfg.defines  # type: ignore[attr-defined]
    opts = "".join(f"/{k}" for k, v in sorted((cfg.options or {}).items()) if v and k != "warp_specialize")  # type: ignore[attr-defined]
    return f"{d['MB']}x{d['NB']}x{d['KB']}/{cfg.num_warps}/{cfg.num_stages}{opts}"  # type: ignore[attr-defined]


def main() -> None:
    import torch
    import tc_torch
    from bench_rounds import interleaved_rounds
    from tc_runtime import driver
    from tc_runtime.autotune import FINAL_MAX_REPS, FINAL_MEASURE_MS, median_ms
    from tc_torch.ops import matmul as mm

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--dtype", default="half", choices=("half", "bf16"))
    ap.add_argument("--configs", default="")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--order", default="tuner-first", choices=("tuner-first", "bench-first"),
                    help="which way is timed first (the GPU warms up over the run)")
    args = ap.parse_args()
    cfgs = mm.TENSOR_CORE_CONFIGS
    if args.configs:
        chosen = [cfgs[int(i)] for i in args.configs.split(",")]
    else:
        chosen = [c for c in cfgs if (str(c.defines["MB"]), str(c.defines["KB"]), c.num_warps) == ("128", "64", 8)
                  and str(c.defines["NB"]) in ("192", "256") and (c.options or str(c.defines["NB"]) == "256")]
    n = args.size
    dtype = torch.float16 if args.dtype == "half" else torch.bfloat16
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    ref = torch.matmul(a, b)
    runs = {}
    for cfg in chosen:
        def run(cfg: object = cfg) -> None:
            mm.matmul_out(c[None], a[None], b[None], configs=[cfg])  # type: ignore[list-item]

        c.zero_()
        run()
        torch.cuda.synchronize()
        err = (c.float() - ref.float()).abs().max().item()
        print(f"{label(cfg)}: max error against torch {err:.3g}", flush=True)
        runs[label(cfg)] = run
    flops = 2.0 * n ** 3
    device = driver.Device(torch.cuda.current_device())
    stream = torch.cuda.current_stream().cuda_stream
    tuner: dict[str, list[float]] = {k: [] for k in runs}

    def tuners_way() -> None:
        """The configurations take turns, each timed by median_ms's 100 ms windows."""
        for _ in range(args.rounds):
            for name, run in runs.items():
                tuner[name].append(median_ms(run, device, stream, FINAL_MEASURE_MS, FINAL_MAX_REPS))

    if args.order == "tuner-first":
        tuners_way()
    # the benchmarks' way: do_bench in interleaved rounds, cuBLAS among them
    bench = interleaved_rounds({"cuBLAS": lambda: torch.matmul(a, b), **runs}, rounds=args.rounds, rep=100)
    if args.order == "bench-first":
        tuners_way()
    cublas = statistics.median(bench["cuBLAS"])
    print(f"\n{n}^3 {args.dtype}, medians of {args.rounds} rounds (TFLOPS; x cuBLAS in the benchmarks' rounds)")
    print("| configuration | tuner's way | benchmarks' way | x cuBLAS |\n|---|---|---|---|")
    for name in runs:
        t, m = statistics.median(tuner[name]), statistics.median(bench[name])
        print(f"| {name} | {flops / (t * 1e-3) / 1e12:.1f} | {flops / (m * 1e-3) / 1e12:.1f} | {cublas / m:.3f} |")
    print(f"| cuBLAS | | {flops / (cublas * 1e-3) / 1e12:.1f} | 1.000 |")


if __name__ == "__main__":
    main()
