"""Sustained matmul throughput with the SM clock and board power it ran at: each provider alone for
a few seconds while nvidia-smi samples the GPU (measure-only).

An H100 running a large matmul for longer than a moment sits at its power limit (700 W, throttle
reason "SW power cap"), so the clock it gets depends on the energy each FLOP costs: a kernel that
moves more bytes through DRAM runs at a lower clock with the same cycle count. The interleaved
rounds of the other benchmarks mix that with the cycles; this tool separates them.

    PYTHONPATH=<packages/*/src> python3 tools/bench_power.py \\
        "fp16:4096:128,256,64,8,3,p,s;tf32dA:8192:128,256,32,8,3/128,256,32,8,3,p" [--rounds 2]

A case is KIND:SIZE:TILES: KIND fp16, bf16 or tf32 (C = A B; with the suffix dA the product
dC B^T, both operands K-contiguous); TILES configurations of tc_torch.matmul separated by "/",
each MB,NB,KB,warps,stages with tf32_check's option letters (p persistent, s bulk-store
epilogue, w, m, o, k, n, and gN for GROUP_SIZE N). torch.matmul
runs first in each case (allow_tf32 for tf32). Each provider's result is checked against a float64
product first. With several rounds, every other round runs the providers in the reverse order.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tf32_check import parse_config  # noqa: E402  (tools/ is not a package)

#: What nvidia-smi reports each sample, in this order.
QUERY = "timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
#: Samples in the first second of a provider's window are dropped (the clock settles).
SETTLE_S = 1.0


class Sample(NamedTuple):
    """One nvidia-smi sample: seconds since the epoch, SM MHz, watts, degrees C, throttle bits."""
    time: float
    clock_mhz: float
    power_w: float
    temp_c: float
    throttle: str


def parse_sample(line: str) -> Sample | None:
    """One line of `nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits` (None for a line
    that is not a sample: a header, an "[N/A]" field, a blank line)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 5:
        return None
    stamp, clock, power, temp, throttle = parts
    try:
        whole, _, frac = stamp.partition(".")
        when = time.mktime(time.strptime(whole, "%Y/%m/%d %H:%M:%S")) + float("0." + (frac or "0"))
        return Sample(when, float(clock), float(power), float(temp), throttle)
    except ValueError:
        return None


class Window(NamedTuple):
    """A provider's run: its throughput and the GPU's state while it ran (medians)."""
    name: str
    tflops: float
    clock_mhz: float
    power_w: float
    temp_c: float
    throttle: str
    samples: int


def summarize(name: str, tflops: float, samples: Sequence[Sample], start: float, end: float) -> Window:
    """The window of one provider from the samples taken between `start` and `end`."""
    inside = [s for s in samples if start <= s.time <= end]
    if not inside:
        return Window(name, tflops, float("nan"), float("nan"), float("nan"), "-", 0)
    return Window(name, tflops, statistics.median(s.clock_mhz for s in inside),
                  statistics.median(s.power_w for s in inside), statistics.median(s.temp_c for s in inside),
                  statistics.mode(s.throttle for s in inside), len(inside))


def providers(case: str, time_wrong: bool = False) -> list[tuple[str, Callable[[], object], float, bool]]:
    """(name, call, FLOPs per call, tf32) of torch and each tile of one case, each checked (see
    judged for what becomes of a wrong one)."""
    import torch

    import tc_runtime as tc
    from tc_torch.ops import matmul as mm

    kind, size_text, tiles = case.split(":")
    size = int(size_text)
    base = kind.removesuffix("dA")
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}
    if base not in dtypes:
        raise ValueError(f"unknown kind {kind!r} (fp16, bf16, tf32, with an optional dA suffix)")
    dtype = dtypes[base]
    tf32 = base == "tf32"
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    y = b.t() if kind.endswith("dA") else b
    ref = a.double() @ y.double()
    flops = 2.0 * size ** 3
    out: list[tuple[str, Callable[[], object], float, bool]] = [
        (f"{kind} {size} torch", functools.partial(torch.matmul, a, y), flops, tf32)]
    for tile in tiles.split("/"):
        config = parse_config(tile, tc.config)
        c = torch.empty(1, size, size, device="cuda", dtype=dtype)
        out.append((f"{kind} {size} tc {tile}",
                    functools.partial(mm.matmul_out, c, a[None], y[None], [config], "tf32" if tf32 else "ieee"),
                    flops, tf32))
    checked = []
    for name, fn, fl, t in out:
        torch.backends.cuda.matmul.allow_tf32 = t
        got: Any = fn()
        got = got[0] if got.dim() == 3 else got
        err = ((got.double() - ref).abs().max() / ref.abs().max()).item()
        timed_name = judged(name, err, time_wrong)
        if timed_name is not None:
            checked.append((timed_name, fn, fl, t))
    return checked


def judged(name: str, relative_error: float, time_wrong: bool) -> str | None:
    """The name a provider is timed under, or None if it is not timed: a result off by more than
    1e-2 of the product's largest element is WRONG, reported and left out, unless `time_wrong`
    (a hand-edited kernel loaded through TC_KERNEL_OVERRIDE_DIR that skips part of the work, see
    tools/ptx_edits.py), which times it under a name that says so."""
    if relative_error <= 1e-2:
        return name
    print(f"{name}: WRONG (relative error {relative_error:.2e}), {'timed all the same' if time_wrong else 'not timed'}",
          flush=True)
    return f"{name} (WRONG)" if time_wrong else None


def run_alone(fn: Callable[[], object], seconds: float, batch: int = 5) -> tuple[float, float, float]:
    """(start, end, milliseconds per call) of `fn` called back to back for `seconds`. The host
    waits for the batch of calls before the last one it queued, never for the queue to empty:
    synchronizing after each batch left the GPU idle while the host queued the next call, a gap
    that weighed on short kernels and on providers with more host time per call."""
    import torch

    torch.cuda.synchronize()
    time.sleep(0.5)  # (a pause between providers, as between the rounds of the other benchmarks)
    event: Any = torch.cuda.Event
    begin, end = event(enable_timing=True), event(enable_timing=True)
    start = time.time()
    calls = 0
    queued: list[Any] = []
    begin.record()
    while time.time() - start < seconds:
        for _ in range(batch):
            fn()
        calls += batch
        done = event()
        done.record()
        queued.append(done)
        if len(queued) > 2:
            queued.pop(0).synchronize()
    end.record()
    torch.cuda.synchronize()
    return start, time.time(), begin.elapsed_time(end) / calls


def in_turns(runs: Sequence[Any], round_index: int) -> list[Any]:
    """The providers in the order round `round_index` runs them: as given, then reversed in the
    next round, and so on. The GPU warms during each window (the provider run second read 2-3 C
    hotter in every round of the twenty-eighth session's runs, where torch always ran first), so
    with a fixed order a provider's clock also depends on its place; an even number of rounds
    gives every provider each place equally often."""
    return list(runs) if round_index % 2 == 0 else list(reversed(runs))


def main(argv: list[str] | None = None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("cases", help="KIND:SIZE:TILES cases separated by ';' (see the module's docstring)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="times each provider runs, in turns (every other round in the reverse order)")
    ap.add_argument("--seconds", type=float, default=2.5, help="length of one provider's run")
    ap.add_argument("--time-wrong", action="store_true",
                    help="time providers whose result is wrong too (kernels edited by tools/ptx_edits.py)")
    args = ap.parse_args(argv)
    runs = [p for case in args.cases.split(";") if case for p in providers(case, args.time_wrong)]
    timed: list[tuple[str, float, float, float]] = []
    with tempfile.TemporaryFile("w+") as log:  # (a pipe would fill up and stall the sampling)
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms",
                                "50"], stdout=log)
        try:
            time.sleep(1.0)
            for r in range(args.rounds):
                for name, fn, flops, tf32 in in_turns(runs, r):
                    torch.backends.cuda.matmul.allow_tf32 = tf32
                    start, end, ms = run_alone(fn, args.seconds)
                    timed.append((name, start + SETTLE_S, end, flops / (ms * 1e-3) / 1e12))
        finally:  # (an error above must not leave the sampler running)
            smi.terminate()
            smi.wait(timeout=10)
        log.seek(0)
        samples = [s for s in map(parse_sample, log) if s is not None]
    print("\n| provider | TFLOPS | SM clock MHz | power W | temp C | throttle | samples |")
    print("|---|---|---|---|---|---|---|")
    for name, start, end, tflops in timed:
        w = summarize(name, tflops, samples, start, end)
        print(f"| {w.name} | {w.tflops:.1f} | {w.clock_mhz:.0f} | {w.power_w:.1f} | {w.temp_c:.0f} | {w.throttle} | "
              f"{w.samples} |")
    return 0 if timed else 1


if __name__ == "__main__":
    sys.exit(main())
