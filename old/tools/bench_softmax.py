"""Fused softmax at issue 8's points: M = 16384 rows, N in {1024, 4096, 8192, 12288}, float32,
float16 and bfloat16 inputs; tc_torch.softmax against torch.softmax and the Triton 3.x tutorial
kernel (tools/triton_peers.py) in the same run, in GB/s (bytes read plus bytes written).

    PYTHONPATH=<packages/*/src> python3 tools/bench_softmax.py [--m 16384] [--n 1024,4096,...]
        [--dtypes float32,float16,bfloat16] [--json OUT.json]

Each provider's result is checked against torch.softmax in float32 before it is timed (a wrong
kernel is reported, never timed). Prints a markdown table with the ratios last.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def main() -> int:
    import torch

    import tc_torch
    from bench_rounds import interleaved

    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=16384)
    ap.add_argument("--n", default="1024,4096,8192,12288")
    ap.add_argument("--dtypes", default="float32,float16,bfloat16")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    providers: dict[str, Callable[[Any], Any]] = {
        "tc": tc_torch.softmax,
        "torch": lambda x: torch.softmax(x, -1),
    }
    try:
        from triton_peers import triton_softmax

        providers["triton"] = triton_softmax
    except Exception as exc:  # no triton here: tc and torch only
        print(f"triton peer unavailable: {type(exc).__name__}: {exc}")
    rows: list[dict[str, Any]] = []
    failed = False
    for dname in args.dtypes.split(","):
        dtype = getattr(torch, dname)
        for n in (int(v) for v in args.n.split(",")):
            x = torch.randn(args.m, n, device="cuda", dtype=dtype)
            ref = torch.softmax(x.float(), -1)
            nbytes = 2 * x.numel() * x.element_size()
            row: dict[str, Any] = {"dtype": dname, "M": args.m, "N": n}
            timed: dict[str, Callable[[], Any]] = {}
            for name, fn in providers.items():
                got = fn(x).float()
                err = (got - ref).abs().max().item()
                tol = 1e-5 if dtype == torch.float32 else 1e-2
                if not err <= tol:
                    print(f"{name} {dname} N={n}: WRONG (max abs error {err:.3g})")
                    row[name] = None
                    failed = True
                    continue
                timed[name] = functools.partial(fn, x)
            for name, ms in interleaved(timed).items():
                row[name] = nbytes / (ms * 1e-3) / 1e9
            rows.append(row)
            print(row, flush=True)
            del x, ref
            torch.cuda.empty_cache()
    names = list(providers)
    print("\n| dtype | M | N | " + " | ".join(f"{p} GB/s" for p in names) + " | tc/torch | tc/triton |")
    print("|---" * (5 + len(names)) + "|")
    for r in rows:
        cells = [f"{r[p]:.0f}" if r.get(p) else "-" for p in names]
        t = r.get("tc")
        ratio_torch = f"{t / r['torch']:.2f}" if t and r.get("torch") else "-"
        ratio_triton = f"{t / r['triton']:.2f}" if t and r.get("triton") else "-"
        print(f"| {r['dtype']} | {r['M']} | {r['N']} | " + " | ".join(cells)
              + f" | {ratio_torch} | {ratio_triton} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
