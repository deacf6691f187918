"""Time tc_torch.matmul's configurations one by one, forced, two ways: as the auto-tuner's final
rounds time them (tc_runtime.autotune.median_ms: an L2 flush before each launch, 100 ms windows,
the configurations taking turns) and as the benchmarks do (tools/bench_rounds.py, do_bench,
interleaved with cuBLAS). Says whether the tuner's ranking of close configurations is the
benchmarks' (measure-only helper).

    PYTHONPATH=<packages/*/src> python3 tools/bench_matmul_configs.py [--size 8192]
        [--dtype half|bf16] [--configs I,J,...] [--rounds 5] [--order tuner-first|bench-first|interleaved]
        [--tune-first] [--retune N]

--configs: indices into tc_torch's TENSOR_CORE_CONFIGS (default: the 128x256x64/8 ones and the
persistent ones, those the tuner's finalists come from at 4096^3 and 8192^3).
"""

from __future__ import annotations

import argparse
import os
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
    from bench_rounds import interleaved_rounds
    from tc_runtime import driver
    from tc_runtime.autotune import FINAL_MAX_REPS, FINAL_MEASURE_MS, launch_times, median_ms
    from tc_torch.ops import matmul as mm

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--dtype", default="half", choices=("half", "bf16"))
    ap.add_argument("--configs", default="")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tune-first", action="store_true",
                    help="let tc_torch's auto-tuner choose among all its configurations on the same tensors "
                         "first (a fresh TC_CACHE_DIR makes it time them), then time the configurations forced")
    ap.add_argument("--order", default="tuner-first", choices=("tuner-first", "bench-first", "interleaved"),
                    help="which way is timed first (the GPU warms up over the run), or all three ways in each "
                         "round (also the tuner's way with do_bench's L2 flush)")
    ap.add_argument("--retune", type=int, default=0,
                    help="after the forced timings, run tc_torch's auto-tuner N more times on the same tensors "
                         "(no disk cache: it times every configuration again, the GPU now warm)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_matmul_configs.py times kernels on a CUDA GPU, and torch sees none")
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
    if args.tune_first:
        # the auto-tuner itself on these tensors first (its rounds print with TC_PRINT_AUTOTUNING=1,
        # set here unless given): its ranking and the forced timings below then come from one process
        os.environ.setdefault("TC_PRINT_AUTOTUNING", "1")
        mm.matmul_out(c[None], a[None], b[None])
        torch.cuda.synchronize()
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

    def cublas_mm() -> None:
        torch.matmul(a, b)

    torch_flushed: dict[str, list[float]] = {k: [] for k in runs}
    spread: dict[str, list[float]] = {k: [] for k in runs}  # every launch the tuner's way timed
    if args.order == "interleaved":
        # per round and configuration, the three ways one after the other: the tuner's (the
        # driver's memset as its L2 flush), the tuner's with torch's zero_() as the flush (what
        # do_bench uses), and do_bench itself
        import tc_runtime.testing as tc_testing
        from tc_runtime import autotune

        class TorchFlush:
            def __init__(self) -> None:
                self.cache = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")

            def zero_async(self, _stream: int) -> None:
                self.cache.zero_()

        own = autotune._flush_buffer
        torch_flush = TorchFlush()
        bench: dict[str, list[float]] = {"cuBLAS": [], **{k: [] for k in runs}}
        for _ in range(args.rounds):
            bench["cuBLAS"].append(tc_testing.do_bench(cublas_mm, warmup=10, rep=100)[0])
            for name, run in runs.items():
                samples = launch_times(run, device, stream, FINAL_MEASURE_MS, FINAL_MAX_REPS)
                tuner[name].append(statistics.median(samples))
                spread[name].extend(samples)
                autotune._flush_buffer = lambda _d: torch_flush  # type: ignore[assignment,return-value]
                try:
                    torch_flushed[name].append(median_ms(run, device, stream, FINAL_MEASURE_MS, FINAL_MAX_REPS))
                finally:
                    autotune._flush_buffer = own
                bench[name].append(tc_testing.do_bench(run, warmup=10, rep=100)[0])
    else:
        if args.order == "tuner-first":
            tuners_way()
        # the benchmarks' way: do_bench in interleaved rounds, cuBLAS among them
        bench = interleaved_rounds({"cuBLAS": cublas_mm, **runs}, rounds=args.rounds, rep=100)
        if args.order == "bench-first":
            tuners_way()
    cublas = statistics.median(bench["cuBLAS"])

    def tflops(times: list[float]) -> str:
        return f"{flops / (statistics.median(times) * 1e-3) / 1e12:.1f}" if times else "-"

    print(f"\n{n}^3 {args.dtype}, medians of {args.rounds} rounds (TFLOPS; x cuBLAS in the benchmarks' rounds)")
    print("| configuration | tuner's way | tuner's way, torch's flush | benchmarks' way | x cuBLAS |\n|---|---|---|---|---|")
    for name in runs:
        ratio = cublas / statistics.median(bench[name])
        print(f"| {name} | {tflops(tuner[name])} | {tflops(torch_flushed[name])} | {tflops(bench[name])} | {ratio:.3f} |")
    print(f"| cuBLAS | | | {tflops(bench['cuBLAS'])} | 1.000 |")
    if any(spread.values()):
        # a median of launches whose times fall in two clusters moves with the share of each
        print("\nthe tuner's way, every timed launch (ms): 10th / 25th / 50th / 75th / 90th percentile, mean")
        for name, times in spread.items():
            q = statistics.quantiles(times, n=20)
            print(f"  {name}: {q[1]:.3f} / {q[4]:.3f} / {statistics.median(times):.3f} / {q[14]:.3f} / "
                  f"{q[17]:.3f}, mean {statistics.mean(times):.3f} ({len(times)} launches)")

    for i in range(args.retune):
        # the same tuner again, now that the GPU has run for a while: if it chooses otherwise, its
        # choice follows the GPU's state (clock, temperature) rather than the kernels
        os.environ["TC_PRINT_AUTOTUNING"] = "1"
        os.environ["TC_DISABLE_CACHE"] = "1"
        for kern in mm._KERNELS.values():
            kern._fast.clear()  # type: ignore[attr-defined]
            kern._records.clear()  # type: ignore[attr-defined]
        print(f"\nthe tuner again ({i + 1} of {args.retune}):", flush=True)
        mm.matmul_out(c[None], a[None], b[None])
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
