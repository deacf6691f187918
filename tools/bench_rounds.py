"""Timing several providers of one operation fairly: in interleaved rounds.

A GPU's speed drifts during a run (clocks, temperature, the host's own load), so timing provider
A for 100 ms and then provider B for 100 ms can hand one of them a slow stretch: a single bad
interval has shown tc at a third of its bandwidth. `interleaved` times every provider once per
round, round after round, and gives each provider the median of its rounds; the peers then share
whatever the GPU was doing. `paired_speedups` gives the ratio of two providers round by round
and `quartiles` its spread, which says how far one run's median can be trusted.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping

#: Rounds per measurement and milliseconds of measurement per provider and round.
ROUNDS = 3
REP_MS = 40


def interleaved_rounds(providers: Mapping[str, Callable[[], object]], rounds: int = ROUNDS,
                       rep: float = REP_MS, clear_l2: bool = True) -> dict[str, list[float]]:
    """Milliseconds per call of each provider in each of `rounds` rounds (do_bench's median), the
    providers taking turns within each round. Each round starts one provider further along
    (round r with provider r mod n), so that no provider always follows the same one or always
    comes first: the clock a provider gets from the power limiter depends on what ran before it.
    `clear_l2` False: do_bench leaves L2 as the previous call left it (calls back to back, the
    operands partly cached) instead of flushing it before each call."""
    import tc_runtime as tc

    names = list(providers)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            ms, _, _ = tc.testing.do_bench(providers[name], warmup=10, rep=rep, clear_l2=clear_l2)
            times[name].append(ms)
    return times


def interleaved(providers: Mapping[str, Callable[[], object]], rounds: int = ROUNDS,
                rep: float = REP_MS) -> dict[str, float]:
    """Milliseconds per call of each provider: the median over `rounds` rounds of do_bench's
    median, the providers taking turns within each round."""
    times = interleaved_rounds(providers, rounds, rep)
    return {name: float(statistics.median(ts)) for name, ts in times.items()}


def paired_speedups(times: Mapping[str, list[float]], provider: str, reference: str) -> list[float]:
    """`provider`'s speed relative to `reference` in each round (the reference's time over the
    provider's, both of the same round: a stretch of low clock slows both)."""
    return [ref / ms for ms, ref in zip(times[provider], times[reference], strict=True)]


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(lower quartile, median, upper quartile) of `values` (all three the value for one)."""
    if not values:
        raise ValueError("quartiles of no values")
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


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
