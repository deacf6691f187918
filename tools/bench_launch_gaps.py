"""How long each matmul kernel runs and how long the GPU waits between two of them when they are
launched back to back, as CUPTI records them through torch.profiler (measure-only helper).

The other benchmarks time each call alone (events around one launch); a training step or a CUDA
graph runs products one after the other, where what also counts is the gap from one kernel's end
to the next one's start. An H100 at 4096³ fp16 (BENCHMARKS.md, thirty-ninth session): tc's kernel
runs as long as cuBLAS's, and the gaps are 1.4 us against cuBLAS's 4.3 us.

    PYTHONPATH=<packages/*/src> python3 tools/bench_launch_gaps.py [--sizes 4096,8192]
        [--dtype fp16|bf16] [--tiles 128,256,64,8,4,p,s,w,o/...] [--launches 40] [--rounds 2]

Providers: torch.matmul, tc_torch.matmul (tuned) and each of `--tiles` (tf32_check's notation)
forced through matmul_out. Per provider and round: the kernels recorded, their median duration,
the median and smallest gap, and the span from the first kernel's start to the last one's end per
launch (above duration + gap where the host fell behind the GPU).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))


class KernelEvent(NamedTuple):
    """One kernel on the GPU's timeline: its name, start and duration in microseconds."""
    name: str
    start_us: float
    dur_us: float


class Gaps(NamedTuple):
    """The summary of back-to-back kernels (microseconds; NaN gaps for a single kernel)."""
    kernels: int
    names: tuple[str, ...]
    median_dur_us: float
    median_gap_us: float
    min_gap_us: float
    span_per_launch_us: float


def kernel_events(trace: dict[str, Any]) -> list[KernelEvent]:
    """The kernels of a Chrome trace as torch.profiler exports it (events of category "kernel"),
    in the order they started."""
    events = [KernelEvent(str(e["name"]), float(e["ts"]), float(e["dur"]))
              for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    return sorted(events, key=lambda e: e.start_us)


def summarize(events: Sequence[KernelEvent]) -> Gaps:
    """Durations, gaps from each kernel's end to the next one's start, and the span per launch."""
    if not events:
        raise ValueError("no kernels were recorded (is the profiler's CUDA activity on?)")
    durs = [e.dur_us for e in events]
    gaps = [b.start_us - (a.start_us + a.dur_us) for a, b in zip(events, events[1:])]
    span = (events[-1].start_us + events[-1].dur_us - events[0].start_us) / len(events)
    nan = float("nan")
    return Gaps(len(events), tuple(sorted({e.name for e in events})), statistics.median(durs),
                statistics.median(gaps) if gaps else nan, min(gaps) if gaps else nan, span)


#: Launches inside the profiler before the recorded ones: the profiler's first callbacks cost the
#: host milliseconds (an H100's host: 2.7-3.3 ms in the first call), a gap that is not the kernels'.
SETTLING_LAUNCHES = 5


def profile(fn: Callable[[], object], launches: int) -> Gaps:
    """`fn` `launches` times back to back under torch.profiler (after ten calls unrecorded, and
    SETTLING_LAUNCHES more under the profiler whose kernels are left out)."""
    import torch

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(SETTLING_LAUNCHES):
            fn()
        torch.cuda.synchronize()
        for _ in range(launches):
            fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = kernel_events(json.loads(path.read_text()))
    return summarize(events[SETTLING_LAUNCHES * len(events) // (SETTLING_LAUNCHES + launches):])


def providers(size: int, dtype: str, tiles: Sequence[str]) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for torch.matmul, tc_torch.matmul and each forced tile on `size`² operands."""
    import torch

    import tc_torch
    from tc_runtime import config as make_config
    from tc_torch.ops.matmul import matmul_out
    from tf32_check import parse_config

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a = torch.randn(size, size, device="cuda", dtype=dt)
    b = torch.randn(size, size, device="cuda", dtype=dt)
    c = torch.empty(size, size, device="cuda", dtype=dt)
    ref = a.double() @ b.double()
    calls: list[tuple[str, Callable[[], object]]] = [
        ("torch", lambda: torch.matmul(a, b, out=c)), ("tc_torch.matmul", lambda: tc_torch.matmul(a, b))]
    for tile in tiles:
        cfg = parse_config(tile, make_config)
        calls.append((tile, functools.partial(matmul_out, c[None], a[None], b[None], configs=[cfg])))
    for name, fn in calls:  # (every provider's result checked once, before any timing)
        out = fn()
        got = (out if isinstance(out, torch.Tensor) and out.shape == c.shape else c).double()
        err = (got - ref).abs().max().item()
        if err > 0.5 + 2e-2 * ref.abs().max().item():
            raise SystemExit(f"{name} at {size}: max error {err:.3g}")
    return calls


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--sizes", default="4096,8192", help="square sizes, separated by commas")
    ap.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    ap.add_argument("--tiles", default="", help="tf32_check configurations separated by '/', forced")
    ap.add_argument("--launches", type=int, default=40, help="back-to-back launches recorded")
    ap.add_argument("--rounds", type=int, default=2, help="times each provider is recorded, in turns")
    args = ap.parse_args(argv)
    if args.launches < 2:
        ap.error("--launches takes at least 2 (a gap needs two kernels)")
    tiles = [t for t in args.tiles.split("/") if t]
    print("| size | provider | kernels | duration us | gap us (median / min) | span per launch us | kernel |")
    print("|---|---|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",") if s):
        calls = providers(size, args.dtype, tiles)
        for _ in range(args.rounds):
            for name, fn in calls:
                g = profile(fn, args.launches)
                print(f"| {size} | {name} | {g.kernels} | {g.median_dur_us:.1f} | {g.median_gap_us:.2f} / "
                      f"{g.min_gap_us:.2f} | {g.span_per_launch_us:.1f} | {', '.join(n[:48] for n in g.names)} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
