"""A target for Nsight Compute: the tutorial matmul compiled in one mode (see tma_check.MODES) and
cuBLAS on the same square fp16 operands, each launched a few times, so that `ncu` can profile the
last launch of each (measure-only helper; nothing is checked here that tma_check does not check).

    PYTHONPATH=<packages/*/src> ncu --clock-control none -k regex:'^dot$' --launch-skip 3 \\
        --launch-count 1 --set full -o tc python3 tools/ncu_matmul.py --size 4096 --mode tma

`--kernel tf32nt`: tc_torch's float32 A B^T kernel with precision="tf32" (persistent
128x256x32/8/3 with a bulk store, or the stages `--config` gives; the kernel named `matmul`;
matmul_ptx_variants.build_tf32_nt) and torch.matmul
with allow_tf32 on the same operands.

`--kernel nn`: tc_torch.matmul's C = A B (`--dtype` float: precision="tf32", computed transposed
with B^T read into registers; half; bf16) forced to one configuration (`--config`, tf32_check's
notation: 256,128,32,8,4,p by default) and torch.matmul (allow_tf32), e.g. to compare what each
moves through shared memory and L2 per launch:

    ncu --clock-control none -k regex:'^matmul$' --launch-skip 2 --launch-count 1 \\
        --metrics gpc__cycles_elapsed.max,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,... \\
        python3 tools/ncu_matmul.py --kernel nn --size 8192

(and `-k regex:'gemm|xmma|nvjet'` for cuBLAS's kernel; BENCHMARKS.md, twenty-eighth session).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    import torch

    import tma_check

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--mode", default="tma", choices=tma_check.MODES)
    ap.add_argument("--config", help="MB,NB,KB,warps,stages (default 128,256,64,8,4; tf32nt: only its stages "
                    "count, 3 by default)")
    ap.add_argument("--launches", type=int, default=4)
    ap.add_argument("--kernel", default="tutorial", choices=("tutorial", "tf32nt", "nn"))
    ap.add_argument("--dtype", default="float", choices=("float", "half", "bf16"), help="--kernel nn only")
    ap.add_argument("--layout", default="nn", choices=("nn", "nt"),
                    help="--kernel nn only: nt multiplies by B^T, a transposed view (both operands K-contiguous)")
    args = ap.parse_args()
    if args.kernel == "nn":
        torch_nn(args.size, args.launches, args.config or "256,128,32,8,4,p", args.dtype, args.layout)
        return
    if args.kernel == "tf32nt":
        tf32_nt(args.size, args.launches, int(args.config.split(",")[4]) if args.config else 3)
        return
    config = args.config or "128,256,64,8,4"
    mb, nb, kb, w, s = (int(x) for x in config.split(","))
    size = args.size
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = torch.empty(size, size, device="cuda", dtype=torch.float16)
    k = tma_check.Launchable(tma_check.build(tma_check.TUTORIAL, (mb, nb, kb, w, s), args.mode, tma_check.SPEC))
    grid = -(-size // mb) * -(-size // nb)
    for _ in range(args.launches):
        k(grid, a.data_ptr(), b.data_ptr(), c.data_ptr(), size, size, size, size, size, size)
    for _ in range(args.launches):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    err = (c.float() - torch.matmul(a, b).float()).abs().max().item()
    print(f"{args.mode} {config} at {size}: max error {err:.3g}, {k.ck.registers} registers")


def tf32_nt(size: int, launches: int, stages: int) -> None:
    import torch

    import tma_check
    from matmul_ptx_variants import build_tf32_nt

    torch.backends.cuda.matmul.allow_tf32 = True
    a = torch.randn(size, size, device="cuda")
    bt = torch.randn(size, size, device="cuda")  # B^T, row-major: both operands K-contiguous
    c = torch.empty(size, size, device="cuda")
    k = tma_check.Launchable(build_tf32_nt(stages))
    grid = (size // 128) * (size // 256)
    for _ in range(launches):
        k(grid, a.data_ptr(), bt.data_ptr(), c.data_ptr(), size, size, size, size, size, size, 0, 0, 0)
    for _ in range(launches):
        torch.matmul(a, bt.t())
    torch.cuda.synchronize()
    ref = a.double() @ bt.t().double()
    err = (c.double() - ref).abs().max().item()
    print(f"tf32 A B^T at {size}: max error {err:.3g} (max |C| {ref.abs().max().item():.3g}), "
          f"{k.ck.registers} registers")


def torch_nn(size: int, launches: int, config: str, dtype: str, layout: str = "nn") -> None:
    """C = A B (A, B row-major `dtype` squares; with `layout` nt, B a transposed view of a
    row-major matrix: K-contiguous) by tc_torch.matmul_out forced to `config`, then by
    torch.matmul, `launches` times each; tc's result checked against a float64 product."""
    import torch

    from tc_runtime import config as make_config
    from tc_torch.ops.matmul import matmul_out
    from tf32_check import parse_config

    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = parse_config(config, make_config)
    dt = {"float": torch.float32, "half": torch.float16, "bf16": torch.bfloat16}[dtype]
    a = torch.randn(1, size, size, device="cuda", dtype=dt)
    b = torch.randn(1, size, size, device="cuda", dtype=dt)  # B [K, N] row-major: N-contiguous
    if layout == "nt":
        b = b.transpose(1, 2)  # B [K, N] K-contiguous
    c = torch.empty(1, size, size, device="cuda", dtype=dt)
    precision = "tf32" if dtype == "float" else "ieee"
    for _ in range(launches):
        matmul_out(c, a, b, configs=[cfg], precision=precision)
    for _ in range(launches):
        torch.matmul(a[0], b[0])
    torch.cuda.synchronize()
    ref = a[0].double() @ b[0].double()
    err = (c[0].double() - ref).abs().max().item()
    print(f"{dtype} A B ({layout}) {config} at {size}: max error {err:.3g} (max |C| {ref.abs().max().item():.3g})")


if __name__ == "__main__":
    main()
