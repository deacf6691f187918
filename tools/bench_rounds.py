"""Timing several providers of one operation fairly: in interleaved rounds.

A GPU's speed drifts during a run (clocks, temperature, the host's own load), so timing provider
A for 100 ms and then provider B for 100 ms can hand one of them a slow stretch: a single bad
interval has shown tc at a third of its bandwidth. `interleaved` times every provider once per
round, round after round, and gives each provider the median of its rounds; the peers then share
whatever the GPU was doing.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping

#: Rounds per measurement and milliseconds of measurement per provider and round.
ROUNDS = 3
REP_MS = 40


def interleaved(providers: Mapping[str, Callable[[], object]], rounds: int = ROUNDS,
                rep: float = REP_MS) -> dict[str, float]:
    """Milliseconds per call of each provider: the median over `rounds` rounds of do_bench's
    median, the providers taking turns within each round."""
    import tc_runtime as tc

    times: dict[str, list[float]] = {name: [] for name in providers}
    for _ in range(rounds):
        for name, fn in providers.items():
            ms, _, _ = tc.testing.do_bench(fn, warmup=10, rep=rep)
            times[name].append(ms)
    return {name: float(statistics.median(ts)) for name, ts in times.items()}


def report_fastest(label: str, flops: float, reference: tuple[str, Callable[[], object]],
                   speeds: Mapping[str, float], runs: Mapping[str, Callable[[], object]], keep: int,
                   rounds: int) -> dict[str, float]:
    """Time the `keep` fastest of `runs` (by `speeds`, single shots) with the reference provider
    in interleaved rounds and print one line: each provider's TFLOPS (`flops` per call) and its
    ratio to the reference. Returns the milliseconds per call."""
    best = sorted(speeds, key=lambda name: -speeds[name])[:keep]
    ref_name, ref_fn = reference
    ms = interleaved({ref_name: ref_fn, **{name: runs[name] for name in best}}, rounds=rounds, rep=100)
    print(f"{label}: medians of {rounds} interleaved rounds: " + ", ".join(
        f"{name} {flops / (t * 1e-3) / 1e12:.1f} TFLOPS ({ms[ref_name] / t:.3f}x {ref_name})"
        for name, t in ms.items()), flush=True)
    return ms
