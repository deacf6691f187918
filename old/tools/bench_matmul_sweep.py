"""Issue 9's "at least 1.0x Triton at every square size from 2048 up": tc_torch.matmul (auto-tuned)
against Triton's tutorial matmul (tools/triton_matmul.py) and torch.matmul (cuBLAS), fp16, square
sizes 2048 to 8192 in steps of 256 (the spec's sweep from 2048), timed in interleaved rounds.

    PYTHONPATH=<packages/*/src> python3 tools/bench_matmul_sweep.py [--sizes 2048:8192:256]
        [--rounds 5] [--rep 60] [--json FILE]

Each size is checked against torch first (a wrong result is reported, never timed, and makes the
exit status 1). Prints one line per size, then a markdown table and a summary line (`SUMMARY`:
the lowest ratio to Triton and where, the sizes below 1.0, the median ratio to cuBLAS); each size's
line also gives the quartiles of tc's speed over Triton's round by round.
bench_sweeps.py's matmul sweep times single shots; these rounds are what the verdict is read from.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

#: The line that starts the summary (tools/gpu_check.py reads it).
SUMMARY = "SUMMARY"


def parse_sizes(text: str) -> list[int]:
    """`2048:8192:256` (first:last:step, last included) or a comma list `2048,3072`."""
    text = text.strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise ValueError(f"--sizes {text!r}: expected first:last:step")
        first, last, step = (int(p) for p in parts)
        if step <= 0 or first <= 0 or last < first:
            raise ValueError(f"--sizes {text!r}: expected 0 < first <= last and step > 0")
        return list(range(first, last + 1, step))
    sizes = [int(s) for s in text.split(",") if s.strip()]
    if not sizes or min(sizes) <= 0:
        raise ValueError(f"--sizes {text!r}: expected positive sizes")
    return sizes


def summary(rows: list[dict[str, Any]]) -> str:
    """One line over the sizes' rows (each: size and TFLOPS of tc, triton, cublas)."""
    if not rows:
        return f"{SUMMARY}: no sizes timed"
    x_triton = {r["size"]: r["tc"] / r["triton"] for r in rows}
    x_cublas = [r["tc"] / r["cublas"] for r in rows]
    low = min(x_triton, key=lambda s: x_triton[s])
    below = [s for s, x in x_triton.items() if x < 1.0]
    return (f"{SUMMARY}: {len(rows)} sizes; tc / Triton min {x_triton[low]:.3f} at {low}, median "
            f"{statistics.median(x_triton.values()):.3f}; below 1.0 at {below or 'none'}; "
            f"tc / cuBLAS median {statistics.median(x_cublas):.3f}")


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| size | cuBLAS | Triton | tc | tc / cuBLAS | tc / Triton |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['size']} | {r['cublas']:.1f} | {r['triton']:.1f} | {r['tc']:.1f} | "
                     f"{r['tc'] / r['cublas']:.3f} | {r['tc'] / r['triton']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2048:8192:256", help="first:last:step or a comma list")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rep", type=float, default=60.0, help="milliseconds per provider and round")
    ap.add_argument("--json", default="", help="also write the rows to this file")
    args = ap.parse_args(argv)
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        ap.error(str(exc))

    import torch

    import tc_torch
    from bench_rounds import interleaved_rounds, paired_speedups, quartiles
    from triton_matmul import triton_matmul

    rows: list[dict[str, Any]] = []
    wrong = 0
    start = time.time()
    for size in sizes:
        a = torch.randn(size, size, device="cuda", dtype=torch.float16)
        b = torch.randn(size, size, device="cuda", dtype=torch.float16)
        ref = torch.matmul(a, b).float()
        bad = []
        for name, fn in (("tc", tc_torch.matmul), ("Triton", triton_matmul)):
            err = (fn(a, b).float() - ref).abs().max().item()
            if not err <= 0.5 + 2e-2 * ref.abs().max().item():
                bad.append(f"{name} WRONG (max error {err:.3g})")
        if bad:
            print(f"{size}: " + ", ".join(bad), flush=True)
            wrong += 1
            continue
        times = interleaved_rounds({"cublas": lambda: torch.matmul(a, b), "triton": lambda: triton_matmul(a, b),
                                    "tc": lambda: tc_torch.matmul(a, b)}, rounds=args.rounds, rep=args.rep)
        row = {"size": size, **{k: 2.0 * size ** 3 / (statistics.median(v) * 1e-3) / 1e12
                                for k, v in times.items()}}
        rows.append(row)
        q1, _, q3 = quartiles(paired_speedups(times, "tc", "triton"))
        print(f"{size}: cuBLAS {row['cublas']:.1f}, Triton {row['triton']:.1f}, tc {row['tc']:.1f} TFLOPS; "
              f"tc / Triton {row['tc'] / row['triton']:.3f} (per round {q1:.3f}-{q3:.3f}), "
              f"tc / cuBLAS {row['tc'] / row['cublas']:.3f} ({time.time() - start:.0f} s)", flush=True)
    print()
    print(table(rows))
    print(summary(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "wrong": wrong}, indent=1))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
