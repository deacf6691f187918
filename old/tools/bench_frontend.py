"""Time the front end on the spec's matmul kernels once the parser tables are cached.

    hatch run python tools/bench_frontend.py [--repeat N] [--limit-ms 30]

For each matmul kernel of ../shared/spec (the tutorial's final kernel, the language document's
basic, pre-fetching, rematerialized and fused-transposition versions) prints the median and
minimum of preprocess, parse+check and the whole front end; exits 1 when a parse+check median is
above --limit-ms (target: under 30 ms).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import tc_lang

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "packages" / "tc-lang" / "tests" / "kernels"
# (file, variant of defines.json); the first one is the kernel the 30 ms target is stated for
MATMULS = [("matmul_tutorial.tc", "half"), ("matmul.tc", "half"), ("matmul_prefetch.tc", "half"),
           ("matmul_remat.tc", "half"), ("matmul_fused_trans.tc", "TT")]


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000.0)
    return out


def bench(
    name: str, defines: dict[str, str | int], repeat: int
) -> tuple[float, dict[str, list[float]]]:
    """(first call in ms, timings in ms of each stage) for one kernel."""
    src = (KERNELS / name).read_text()
    t0 = time.perf_counter()
    tc_lang.frontend(src, defines)  # warm: builds or loads the cached tables
    first = (time.perf_counter() - t0) * 1000.0
    pre = tc_lang.preprocess(src, defines)
    return first, {
        "preprocess": timed(lambda: tc_lang.preprocess(src, defines), repeat),
        "parse+check": timed(lambda: tc_lang.check(tc_lang.parse(pre)), repeat),
        "frontend": timed(lambda: tc_lang.frontend(src, defines), repeat),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--limit-ms", type=float, default=30.0)
    args = ap.parse_args(argv)
    variants = json.loads((KERNELS / "defines.json").read_text())
    status = 0
    for name, variant in MATMULS:
        first, rows = bench(name, variants[name][variant], args.repeat)
        print(f"{name} [{variant}]: first call {first:.1f} ms (table load or build)")
        for stage, ms in rows.items():
            print(f"  {stage:12s} median {statistics.median(ms):7.2f} ms   min {min(ms):7.2f} ms")
        median = statistics.median(rows["parse+check"])
        if median > args.limit_ms:
            print(f"  parse+check median {median:.2f} ms is above the {args.limit_ms} ms target")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
