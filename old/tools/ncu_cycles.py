"""Compare compiled matmul kernels by the cycles Nsight Compute counts for each launch, a figure
that the GPU's clock and power state move far less than wall time (measure-only helper).

    PYTHONPATH=<packages/*/src> python3 tools/ncu_cycles.py [--size 4096] [--launches 7]
        [--kernel tutorial|tf32nt|torchnn] [--dtype half|bf16] [--tile 128,256,64] [--groups 8,16]
        [--stages 3,4] [--variants V,...] [--overlap] [--cache none|all] [--timeout S] NAME=FILE ...

Each FILE is a kernel saved by `matmul_ptx_variants.py --save` (e.g. by another commit's
compiler); `--stages 3,4` also builds this tree's kernels (named s3, s4; the tutorial's
persistent bulk-store kernel with `--tile` and 8 warps, for each `--groups` MAX_GROUP_SIZE;
tc_torch's tf32 A B^T kernel; or, `--kernel torchnn`, tc_torch's kernel as it runs `--dtype` C = A B
with `--tile`), and `--variants` the edits of them that matmul_ptx_variants makes
(their results are not checked here). The kernels and torch.matmul (cuBLAS; allow_tf32 for
tf32nt) run in turns, `--launches` times each, under `ncu --clock-control none --cache-control
none --metrics gpc__cycles_elapsed.max` (one replay pass a launch, only inside the profiler range
around the turns; `--cache all` flushes L2 before each launch instead). Printed last: the median
and spread of each one's cycles, and its speed relative to the first one's median. Cycles say
what a kernel does per clock, not which clock it gets under the power cap (bench_power.py).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

METRIC = "gpc__cycles_elapsed.max"


def _kernels(args: argparse.Namespace) -> dict[str, Any]:
    import tma_check
    from matmul_ptx_variants import build_overlapped, build_tf32_nt, build_torch_matmul, edited, variant_ptx
    from tc_nvptx.compiler import CompiledKernel
    from tc_opt.overlap_epilogue import MIN_STAGES

    out: dict[str, Any] = {}
    mb, nb, kb = (int(x) for x in args.tile.split(","))
    # (--groups: the tutorial's own define; tc_torch's kernels keep theirs)
    groups = ([int(g) for g in args.groups.split(",") if g] if args.kernel == "tutorial" else []) or [0]
    for s in (int(x) for x in args.stages.split(",") if x):
        for g in groups:
            if args.kernel == "tf32nt":
                ck = build_tf32_nt(s)
            elif args.kernel == "torchnn":
                ck = build_torch_matmul(args.dtype, False, s, (mb, nb, kb))
            else:
                src = tma_check.TUTORIAL.replace("#define MAX_GROUP_SIZE 8", f"#define MAX_GROUP_SIZE {g or 8}")
                ck = tma_check.build(src, (mb, nb, kb, 8, s), "persistent+store", tma_check.SPEC, args.dtype)
            name = f"s{s}" + (f" g{g}" if g else "")
            out[name] = tma_check.Launchable(ck)
            if args.overlap and s >= MIN_STAGES:  # (fewer stages: the option changes nothing)
                if args.kernel == "tutorial":
                    ov = tma_check.build(src, (mb, nb, kb, 8, s), "persistent+store+overlap", tma_check.SPEC, args.dtype)
                elif args.kernel == "torchnn":
                    ov = build_torch_matmul(args.dtype, False, s, (mb, nb, kb), overlap=True)
                else:
                    ov = build_overlapped(args.kernel, s)
                out[f"{name} ov"] = tma_check.Launchable(ov)
            for v in (v for v in args.variants.split(",") if v):
                out[f"{name} {v}"] = tma_check.Launchable(edited(ck, variant_ptx(ck.ptx, v, s)))
    for item in args.saved:
        name, _, file = item.partition("=")
        saved = json.loads(Path(file).read_text())
        out[name] = tma_check.Launchable(CompiledKernel.from_json(saved["meta"], ptx=saved["ptx"]))
    return out


def child(args: argparse.Namespace) -> None:
    """The profiled process: every kernel in turns; prints the order of the launches."""
    import torch

    kernels = _kernels(args)
    size, tf32 = args.size, args.kernel == "tf32nt"
    dtype = torch.float32 if tf32 else torch.bfloat16 if args.dtype == "bf16" else torch.float16
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    c = torch.empty(size, size, device="cuda", dtype=dtype)
    tail = (0, 0, 0) if args.kernel != "tutorial" else ()  # (tc_torch's kernel: batch strides)
    mb, nb, _ = (int(x) for x in args.tile.split(","))
    grid = -(-size // mb) * -(-size // nb)
    torch.backends.cuda.matmul.allow_tf32 = True
    bb = b.t() if tf32 else b  # (tf32nt: b is B^T, row-major)

    def launcher(k: Any) -> Callable[[], object]:
        return lambda: k(grid, a.data_ptr(), b.data_ptr(), c.data_ptr(), size, size, size, size, size, size, *tail)

    runs = {name: launcher(k) for name, k in kernels.items()}
    runs["cuBLAS"] = lambda: torch.matmul(a, bb)
    for run in runs.values():  # (warm: cuBLAS's heuristics, modules loaded)
        run()
    torch.cuda.synchronize()
    order: list[str] = []
    torch.cuda.profiler.start()  # type: ignore[no-untyped-call]
    for _ in range(args.launches):
        for name, run in runs.items():
            run()
            order.append(name)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]
    print("ORDER " + json.dumps(order), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--launches", type=int, default=7)
    ap.add_argument("--stages", default="")
    ap.add_argument("--variants", default="", help="matmul_ptx_variants' edits of each --stages kernel (not checked)")
    ap.add_argument("--overlap", action="store_true",
                    help="also each --stages kernel with CompileOptions.overlap_epilogue (named 'sN ov')")
    ap.add_argument("--kernel", default="tutorial", choices=("tutorial", "tf32nt", "torchnn"))
    ap.add_argument("--groups", default="", help="the tutorial's MAX_GROUP_SIZE values to build (default: its 8; the tutorial only)")
    ap.add_argument("--tile", default="128,256,64", help="MB,NB,KB (8 warps) of the tutorial kernel or of torchnn")
    ap.add_argument("--dtype", default="half", choices=("half", "bf16"), help="the element type of the tutorial kernel or of torchnn")
    ap.add_argument("--cache", default="none", choices=("none", "all"),
                    help="ncu's --cache-control: none keeps L2 as the previous launch left it (as in back-to-back "
                    "runs), all flushes it before each launch")
    ap.add_argument("--timeout", type=float, default=300, help="seconds the profiled process may take")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("saved", nargs="*", metavar="NAME=FILE")
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    cmd = ["ncu", "--clock-control", "none", "--cache-control", args.cache, "--profile-from-start", "off",
           "--metrics", METRIC, "--csv",
           sys.executable, __file__, "--child", *sys.argv[1:]]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, env=os.environ, timeout=args.timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        print(f"ncu did not finish in {args.timeout} s (a kernel that hangs?); its output so far:\n{out[-3000:]}")
        sys.exit(1)
    order_line = next((ln for ln in run.stdout.splitlines() if ln.startswith("ORDER ")), None)
    if run.returncode != 0 or order_line is None:
        print(run.stdout[-3000:], run.stderr[-3000:])
        sys.exit(1)
    order = json.loads(order_line[6:])
    rows = [r for r in csv.DictReader(io.StringIO("\n".join(ln for ln in run.stdout.splitlines()
                                                             if ln.startswith('"'))))
            if r.get("Metric Name") == METRIC]
    if len(rows) != len(order):
        print(f"{len(rows)} profiled launches for {len(order)} made")
        sys.exit(1)
    cycles: dict[str, list[float]] = {}
    names: dict[str, str] = {}
    for n, r in zip(order, rows):
        cycles.setdefault(n, []).append(float(r["Metric Value"].replace(",", "")))
        names.setdefault(n, r.get("Kernel Name", "?")[:60])
    first = statistics.median(next(iter(cycles.values())))
    what = args.kernel if args.kernel == "tf32nt" else f"{args.kernel} {args.dtype}"
    print(f"{what} {args.size}^3, {METRIC} over {args.launches} launches each:")
    for n, cs in cycles.items():
        med = statistics.median(cs)
        print(f"  {n:>10}: median {med:,.0f} (min {min(cs):,.0f}, max {max(cs):,.0f}), {first / med:.4f}x the "
              f"first's speed  [{names[n]}]")


if __name__ == "__main__":
    main()
