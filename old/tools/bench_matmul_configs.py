"""Time tc_torch.matmul's configurations one by one, forced, two ways: as the auto-tuner's final
rounds time them (tc_runtime.autotune.median_ms: an L2 flush before each launch, 100 ms windows,
the configurations taking turns) and as the benchmarks do (tools/bench_rounds.py, do_bench,
interleaved with cuBLAS). Says whether the tuner's ranking of close configurations is the
benchmarks' (measure-only helper).

    PYTHONPATH=<packages/*/src> python3 tools/bench_matmul_configs.py [--size 8192]
        [--dtype half|bf16|tf32] [--layout nn|nt] [--configs I,J,...] [--rounds 5]
        [--order tuner-first|bench-first|interleaved] [--tune-first] [--retune N] [--specs 'MB,NB,KB,w,s,p,s,m;...']

--configs: indices into the tuner's list for the product (tc_torch.ops.matmul.configs_for:
TENSOR_CORE_CONFIGS for half and bf16; for tf32 TF32_CONFIGS, or TF32_K_MAJOR_B_CONFIGS with
--layout nt). The default (default_configs): the 8-warp tiles of 128 or 256 rows the tuner's finalists
come from at 4096^3 and 8192^3. --layout nt times A B^T (B a transposed view: dA's product).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def label(cfg: object) -> str:
    """MBxNBxKB/warps/stages, the options that are on (warp_specialize aside) and a GROUP_SIZE."""
    d = cfg.defines  # type: ignore[attr-defined]
    opts = "".join(f"/{k}" for k, v in sorted((cfg.options or {}).items()) if v and k != "warp_specialize")  # type: ignore[attr-defined]
    group = f"/group{d['GROUP_SIZE']}" if "GROUP_SIZE" in d else ""
    return f"{d['MB']}x{d['NB']}x{d['KB']}/{cfg.num_warps}/{cfg.num_stages}{opts}{group}"  # type: ignore[attr-defined]


def tuner_configs(dtype: str, layout: str) -> list[Any]:
    """The auto-tuner's configurations for a `dtype` product in `layout` (nt: B K-contiguous)."""
    import torch
    from tc_torch.ops import matmul as mm

    torch_dtype = {"half": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[dtype]
    return list(mm.configs_for(torch_dtype, torch.device("cuda"), "tf32" if dtype == "tf32" else "ieee",
                               trans_b=layout == "nt"))


def default_configs(dtype: str, layout: str) -> list[Any]:
    """The tiles compared when --configs is not given: for half and bf16 the 128x256x64 and
    128x192x64 ones with 8 warps (the 128x192 ones persistent only); for tf32 every 8-warp tile
    of 128 or 256 rows and columns (the plain, persistent and bulk-store ones)."""
    configs = tuner_configs(dtype, layout)
    if dtype == "tf32":
        return [c for c in configs if c.num_warps == 8 and {str(c.defines["MB"]), str(c.defines["NB"])} == {"128", "256"}]
    return [c for c in configs if (str(c.defines["MB"]), str(c.defines["KB"]), c.num_warps) == ("128", "64", 8)
            and str(c.defines["NB"]) in ("192", "256") and (c.options or str(c.defines["NB"]) == "256")]


def main() -> None:
    import torch
    from bench_rounds import interleaved_rounds
    from tc_runtime import driver
    from tc_runtime.autotune import FINAL_MAX_REPS, FINAL_MEASURE_MS, launch_times, median_ms
    from tc_torch.ops import matmul as mm

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--dtype", default="half", choices=("half", "bf16", "tf32"))
    ap.add_argument("--layout", default="nn", choices=("nn", "nt"), help="nt: A B^T (B a transposed view)")
    ap.add_argument("--configs", default="")
    ap.add_argument("--specs", default="",
                    help="configurations as tf32_check writes them ('MB,NB,KB,warps,stages[,p][,s][,w][,m][,g4];...'), "
                         "timed after those of --configs")
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
    cfgs = tuner_configs(args.dtype, args.layout)
    chosen = [cfgs[int(i)] for i in args.configs.split(",")] if args.configs else \
        ([] if args.specs else default_configs(args.dtype, args.layout))
    if args.specs:
        import tc_runtime
        from tf32_check import parse_config

        chosen += [parse_config(spec, tc_runtime.config) for spec in args.specs.split(";") if spec]
    n = args.size
    dtype = {"half": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[args.dtype]
    precision = "tf32" if args.dtype == "tf32" else "ieee"
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"  # (cuBLAS's tf32 against ours)
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    if args.layout == "nt":
        b = b.t()
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    ref = torch.matmul(a, b)
    if args.tune_first:
        # the auto-tuner itself on these tensors first (its rounds print with TC_PRINT_AUTOTUNING=1,
        # set here unless given): its ranking and the forced timings below then come from one process
        os.environ.setdefault("TC_PRINT_AUTOTUNING", "1")
        mm.matmul_out(c[None], a[None], b[None], precision=precision)
        torch.cuda.synchronize()
    runs = {}
    for cfg in chosen:
        def run(cfg: object = cfg) -> None:
            mm.matmul_out(c[None], a[None], b[None], configs=[cfg], precision=precision)  # type: ignore[list-item]

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

    print(f"\n{n}^3 {args.dtype} {args.layout}, medians of {args.rounds} rounds (TFLOPS; x cuBLAS in the benchmarks' rounds)")
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
        mm.matmul_out(c[None], a[None], b[None], precision=precision)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
