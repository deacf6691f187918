"""Time tc_torch.matmul's configurations forced one at a time at any M x N x K against torch.matmul
(cuBLAS), fp16 C = A B, in interleaved rounds: where a shape loses, and whether it is the tile
count or the operands' rows (measure-only helper).

    PYTHONPATH=<packages/*/src> python3 tools/bench_matmul_shapes.py 4096x4104x4096,4104x4104x4104ab \\
        '128,256,64,8,4,p,s,o;256,192,64,8,3;128,256,64,8,3,T' [--rounds 3] [--dtype half|bf16]

A shape may end in the letters `a` and `b`: that operand is then a view of rows padded to a
multiple of 64 elements (the same values; only its leading dimension changes). Configurations are
written as tools/tf32_check.py writes them (MB,NB,KB,warps,stages and option letters); a final
`T` keeps the operands on cp.async copies instead of TMA (option `tma` off). Every product runs
with `pad="off"` (matmul_out copies nothing), and its result is checked against a float32 product
before it is timed. Prints one line per shape: TFLOPS of torch and of each configuration.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

#: The row length an operand marked `a` or `b` is padded to a multiple of.
PAD_TO = 64


def parse_shape(text: str) -> tuple[int, int, int, str]:
    """(M, N, K, padded operands) of `MxNxK` followed by any of the letters a and b."""
    found = re.fullmatch(r"(\d+)x(\d+)x(\d+)([ab]*)", text.strip())
    if found is None:
        raise ValueError(f"a shape is MxNxK followed by any of the letters a and b, got {text!r}")
    m, n, k, padded = found.groups()
    return int(m), int(n), int(k), padded


def operand(rows: int, cols: int, padded: bool, dtype: Any, device: str) -> Any:
    """A random rows x cols matrix, row-major; with `padded` a view of rows of a multiple of PAD_TO
    elements."""
    import torch

    ld = -(-cols // PAD_TO) * PAD_TO if padded else cols
    return torch.randn(rows, ld, device=device, dtype=dtype)[:, :cols]


def parse_spec(text: str) -> Any:
    """A tc_runtime config from tf32_check's notation, with a final `T` for cp.async copies."""
    import tc_runtime
    from tf32_check import parse_config

    cp_async = text.endswith(",T")
    cfg = parse_config(text[:-2] if cp_async else text, tc_runtime.config)
    if not cp_async:
        return cfg
    return tc_runtime.config(defines=cfg.defines, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                             options={**(cfg.options or {}), "tma": False})


def main() -> None:
    import torch
    from bench_rounds import interleaved
    from tc_lang.diagnostics import TcCompileError
    from tc_torch.ops import matmul as mm

    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", help="MxNxK[a][b],...")
    ap.add_argument("specs", help="configurations: 'MB,NB,KB,warps,stages[,letters][,T];...'")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtype", default="half", choices=("half", "bf16"))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_matmul_shapes.py times kernels on a CUDA GPU, and torch sees none")
    dtype = {"half": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    specs = [s for s in args.specs.split(";") if s]
    configs = [(s, parse_spec(s)) for s in specs]
    for text in args.shapes.split(","):
        m, n, k, padded = parse_shape(text)
        a = operand(m, k, "a" in padded, dtype, "cuda")
        b = operand(k, n, "b" in padded, dtype, "cuda")
        c = torch.empty(m, n, device="cuda", dtype=dtype)
        ref = a.float() @ b.float()
        providers: dict[str, Any] = {"torch": lambda: torch.matmul(a, b)}
        for spec, cfg in configs:
            def run(cfg: Any = cfg) -> None:
                mm.matmul_out(c[None], a[None], b[None], configs=[cfg], pad="off")

            c.zero_()
            try:
                run()
            except TcCompileError as exc:  # (a tile that does not fit: the tuner skips it too)
                print(f"{text} {spec}: does not compile ({str(exc).splitlines()[0][-100:]})", flush=True)
                continue
            torch.cuda.synchronize()
            err = float((c.float() - ref).abs().max())
            if err > 0.5 + 2e-2 * float(ref.abs().max()):
                print(f"{text} {spec}: WRONG (max error {err:.3g}), not timed", flush=True)
                continue
            providers[spec] = run
        times = interleaved(providers, rounds=args.rounds)
        flops = 2.0 * m * n * k
        print(f"{text}: " + "  ".join(f"{p}={flops / ms / 1e9:.0f}" for p, ms in times.items()), flush=True)


if __name__ == "__main__":
    main()
