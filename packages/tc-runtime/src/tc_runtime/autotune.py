"""The auto-tuner: choose a kernel's configuration per (specialization, auto-tuning key values).

On a GPU every configuration that compiles and loads is timed on the caller's arguments with CUDA
events (a warm-up launch, then repetitions each after an L2 flush) and the fastest by median wins.
Those missing from the disk cache are compiled first by worker processes, several at once
(tc_runtime.precompile, TC_COMPILE_WORKERS).
A GPU's speed drifts while it is timed one configuration after another: heavy kernels heat it and
its clocks fall, so the configurations timed first look faster (an H100 timing 8192^3 matmuls saw
the first 10% faster than the same kernel in interleaved rounds), far more than the few percent
that separate a matmul's best tiles. So the first pass times the configurations in their order,
then again in the reverse order (half the window each), and takes the mean of the two medians:
a drift that is linear over the pass then adds the same to every configuration. The FINALISTS
fastest configurations of that first pass (those within FINAL_MARGIN of the fastest) are timed
again, taking turns for FINAL_ROUNDS rounds, every other round in the reverse order (without it
the first in each round gained most while the GPU heated: an H100 tuning 8192^3 at the start of
a process chose a matmul that its own rounds timed 3% ahead and every later measurement 1-4%
behind), and they are compared within each round (paired_times: the median over the rounds of
each one's time relative to the round's median), since the clock a GPU at its power cap gives a
100 ms window moves by a few percent from one round to the next (an H100's matmul rounds spread
0.82-1.09x), as much as separates the finalists. Tiles within ~1% of each other are still a
toss-up: an H100 tuning tf32 8192^3 A B^T in three processes chose tiles that do_bench's rounds
put 1-3% behind the bulk-store 128x256x32/8/3 (BENCHMARKS.md, twenty-sixth session). So the
finalists that end within CLOSE_MARGIN of the fastest take CLOSE_ROUNDS more rounds among
themselves, and the fastest over all their rounds wins.
The memory behind the pointer arguments is saved first and restored before each configuration and
at the end, so that a kernel that writes its inputs (accumulators, in-place updates) is timed from
the same state each time and the caller's launch then runs exactly once on the original data (the
original runtime benchmarked on live data). The choice is remembered in memory and on disk
(TC_RETUNE=1 tunes again rather than read it), and so is every configuration's time, keyed by the
kernel rather than by its list of configurations: when configurations are added to the list, only
they are timed, against the remembered choice and its close calls (tuning_history_key).

On the CPU (the interpreter) the configurations are run from the same inputs and their results
must agree (with a float tolerance): a configuration that computes something else is a bug in the
kernel, reported with the configuration and the buffer. The first configuration is then used.

A configuration that does not compile (tc_lang's TcCompileError, TcResourceError included) or that
the driver refuses to load or launch (TcLaunchError) is skipped; TC_PRINT_AUTOTUNING=1 says which
and why, and prints every time. TC_SKIP_AUTOTUNING=1 takes the first configuration that works.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from . import driver, knobs
from .build import base_key
from .cache import cache_key
from .cpu import regions as cpu_regions
from .errors import TcLaunchError, TcRuntimeError

if TYPE_CHECKING:
    from .kernel import Kernel, Variant
    from .options import Config
    from .signature import Signature

#: Time spent measuring one configuration (after its warm-up), in milliseconds, and the bounds
#: on the number of timed launches.
_MEASURE_MS = 20.0
_MIN_REPS, _MAX_REPS = 5, 100
_FLUSH_BYTES = 256 * 1024 * 1024
#: Finalists: the FINALISTS fastest configurations of the first pass that are within this
#: fraction of the fastest, timed again in FINAL_ROUNDS interleaved rounds (an even number: the
#: rounds alternate between the two orders). Six, not four: a first pass's short windows can
#: rank tiles far from their sustained speed (an H100 tuning tf32 8192^3 A B^T, 2026-11-26: the
#: bulk-store tiles 8-12% behind the fastest there in two processes of three, so that four
#: finalists left them out, while in the rounds all read within 1.5% of each other).
FINAL_MARGIN = 0.25
FINALISTS = 6
FINAL_ROUNDS = 4
#: A finalist's window per round (ms of the kernel's own time) and its bound on timed launches:
#: about a benchmark's (tools/bench_rounds.py), since a GPU kept busy for 100 ms settles at other
#: clocks than in 20 ms, and the ranking of close configurations followed (H100, 8192^3: with
#: 20 ms windows the tuner preferred a tile that interleaved 100 ms benchmarks put 2-5% behind).
#: The bound keeps short kernels cheap to tune: each launch follows an L2 flush of ~0.1 ms.
FINAL_MEASURE_MS = 100.0
FINAL_MAX_REPS = 300
#: Close calls: the finalists within CLOSE_MARGIN of the fastest after the final rounds take turns
#: for CLOSE_ROUNDS more rounds (an even number), and the fastest of them over all their rounds
#: wins. One 100 ms window of a matmul at the power cap moves by 2-3% (H100), so four rounds
#: rank finalists 1-2% apart by chance: tuners of fresh processes chose 256x192x64/8/3 for fp16
#: 8192^3 once and a persistent 128x256 tile once, which interleaved benchmarks put at 0.977 and
#: 1.002x cuBLAS (BENCHMARKS.md, thirty-second session). Only the close ones pay for the rounds.
CLOSE_MARGIN = 0.02
CLOSE_ROUNDS = 4
_flush: dict[int, driver.DeviceBuffer | None] = {}


def skippable_errors() -> tuple[type[BaseException], ...]:
    """The errors that rule out one configuration: the compiler's user errors (only when the
    compiler is loaded; a precompiled kernel never imports it) and the driver's refusals."""
    out: list[type[BaseException]] = [TcLaunchError]
    diagnostics = sys.modules.get("tc_lang.diagnostics")
    error = getattr(diagnostics, "TcCompileError", None)
    if isinstance(error, type) and issubclass(error, BaseException):
        out.append(error)
    return tuple(out)


def _say(text: str) -> None:
    if knobs.print_autotuning():
        sys.stderr.write(f"tc autotune: {text}\n")
        sys.stderr.flush()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _label(kernel: Kernel, values: Sequence[Any]) -> str:
    sig = kernel.signature
    keys = ", ".join(f"{sig.names[i]}={v!r}" for i, v in zip(kernel._key_indices, values))
    return f"kernel '{sig.kernel}'" + (f" ({keys})" if keys else "")


# ------------------------------------------------------------------------------------ GPU


def tune_gpu(kernel: Kernel, spec: tuple[int, ...], values: tuple[Any, ...],
             args: Sequence[object], grid: object, stream: int) -> Variant:
    """The fastest configuration of `kernel` for these arguments (see the module docstring)."""
    label = _label(kernel, values)
    cache = kernel.cache()
    reprs = [repr(c) for c in kernel.configs]
    record_key = cache_key({**kernel.base_key(0), "what": "autotune", "arch": kernel.arch,
                            "spec": list(spec), "values": [repr(v) for v in values], "configs": reprs})
    history_key = tuning_history_key(kernel, spec, values)
    reading = cache is not None and not knobs.always_compile() and not knobs.retune()
    if reading:
        assert cache is not None
        record = cache.get_record(record_key)
        index = record.get("index") if record else None
        if isinstance(index, int) and 0 <= index < len(kernel.configs) \
                and record is not None and record.get("config") == reprs[index]:
            try:
                v = kernel.variant(index, spec)
                _say(f"{label}: {kernel.configs[index]} (remembered on disk)")
                return v
            except skippable_errors():
                pass
    history = cache.get_record(history_key) if reading and cache is not None else None
    plan = incremental_plan(reprs, history)
    if plan is not None and not plan.indices:
        try:
            v = kernel.variant(plan.winner, spec)
            _say(f"{label}: {v.config} (remembered on disk; no configuration is new)")
            _remember(kernel, reprs, record_key, history_key, v, {}, [], history)
            return v
        except skippable_errors():
            plan = None
    indices = plan.indices if plan is not None else list(range(len(kernel.configs)))
    if plan is not None:
        _say(f"{label}: {len(plan.new)} configurations not timed before, timed against the choice "
             f"remembered on disk ({kernel.configs[plan.winner]}) and its close calls")
    candidates: list[Variant] = []
    errors: list[BaseException] = []
    failed: list[str] = []
    start = time.perf_counter()
    workers = kernel.precompile(spec, indices)  # (in parallel processes, into the disk cache read below)
    if workers:
        _say(f"{label}: {workers} processes compiled the configurations in "
             f"{time.perf_counter() - start:.1f} s (TC_COMPILE_WORKERS)")
    for i in indices:
        config = kernel.configs[i]
        try:
            candidates.append(kernel.variant(i, spec))
        except skippable_errors() as exc:
            errors.append(exc)
            failed.append(reprs[i])
            _say(f"{label}: skipped {config}: {_reason(exc)}")
    if not candidates:
        _say(f"{label}: no configuration compiles")
        raise errors[0]
    timed: list[tuple[float, Variant]] = []
    finals: list[tuple[float, Variant]] = []
    if len(candidates) == 1:
        timed.append((0.0, candidates[0]))
    else:
        dev = kernel._device
        assert dev is not None
        backup = Backup(dev, [int(args[i]) for i in kernel.signature.pointer_indices],  # type: ignore[call-overload]
                        stream)

        def run(v: Variant) -> None:
            kernel.launch_variant(v, args, grid, stream)

        try:
            timed = _first_pass(candidates, run, backup, dev, stream, label, errors)
            finals = _final_rounds(timed, run, backup, dev, stream, label)
            backup.restore(stream)
        finally:
            backup.free()
        if not timed:
            raise errors[0]
    # (once finalists were re-timed, only they compete, and after a close call only the close
    # ones: the others' times are the first pass's)
    ms, best = min(finals or timed, key=lambda t: t[0])
    _say(f"{label}: chose {best.config}" + (f" ({ms * 1000:.1f} us)" if ms else ""))
    times = {repr(v.config): t for t, v in [*timed, *finals]}
    _remember(kernel, reprs, record_key, history_key, best, times, failed, history)
    return best


@attrs.frozen
class IncrementalPlan:
    """What to time when a kernel's configurations changed since a tuning remembered on disk:
    `indices` (of kernel.configs: the configurations never timed, `new`, with the remembered
    choice `winner` and the configurations that were its close calls); none when nothing is new."""

    winner: int
    indices: list[int]
    new: list[int]


def tuning_history_key(kernel: Kernel, spec: Sequence[int], values: Sequence[Any]) -> str:
    """The disk record of every configuration's time for one (specialization, key values): keyed
    by the kernel's source, name, fixed defines and options but not by its list of configurations
    (nor by its auto-tuning axes' values), so that a configuration added to the list is timed
    alone against the remembered choice instead of all of them again (Triton's tuning cache keys
    the whole list: triton-lang/triton#9822)."""
    base = base_key(kernel.source, kernel.filename, kernel.name, kernel.fixed_defines, kernel.compile_options)
    return cache_key({**base, "what": "autotune history", "arch": kernel.arch, "spec": list(spec),
                      "values": [repr(v) for v in values]})


def incremental_plan(reprs: Sequence[str], history: dict[str, Any] | None) -> IncrementalPlan | None:
    """The plan for configurations `reprs` (their reprs, in the kernel's order) given the history
    record of an earlier tuning; None (time them all) without a usable record or where the
    remembered choice is no longer among them."""
    if not history:
        return None
    times, winner, failed = history.get("times_ms"), history.get("config"), history.get("failed", [])
    if not isinstance(times, dict) or not isinstance(winner, str) or winner not in reprs \
            or not isinstance(failed, list):
        return None
    known = set(times) | {f for f in failed if isinstance(f, str)}
    new = [i for i, r in enumerate(reprs) if r not in known]
    w = reprs.index(winner)
    if not new:
        return IncrementalPlan(w, [], [])
    best = times.get(winner)
    close = set()
    if isinstance(best, (int, float)) and best > 0:
        close = {i for i, r in enumerate(reprs) if isinstance(times.get(r), (int, float)) and _close(times[r], best)}
    return IncrementalPlan(w, sorted({w, *close, *new}), new)


def _remember(kernel: Kernel, reprs: Sequence[str], record_key: str, history_key: str, best: Variant,
              times: dict[str, float], failed: list[str], history: dict[str, Any] | None) -> None:
    """Write the choice for this list of configurations (`reprs`) and the history of every
    configuration still in the list: the times measured now over those of earlier tunings, and
    the ones that did not compile."""
    cache = kernel.cache()
    if cache is None:
        return
    present = set(reprs)
    old_times = history.get("times_ms") if history else None
    old_failed = history.get("failed") if history else None
    merged = {r: t for r, t in (old_times.items() if isinstance(old_times, dict) else ()) if r in present}
    merged.update(times)
    gone = [r for r in (old_failed if isinstance(old_failed, list) else []) if r in present and r not in times]
    choice = {"index": best.index, "config": repr(best.config), "times_ms": merged}
    cache.put_record(record_key, choice)
    cache.put_record(history_key, {**choice, "failed": sorted(set(gone) | set(failed))})


def _first_pass(candidates: list[Variant], launch: Callable[[Variant], None], backup: Backup,
                device: driver.Device, stream: int, label: str,
                errors: list[BaseException]) -> list[tuple[float, Variant]]:
    """Each candidate's time: the mean of its medians over half a window in the candidates' order
    and half a window in the reverse order (see the module docstring), each half with at most half
    the timed launches (a short kernel's launches each follow an L2 flush that takes longer than
    it). A candidate whose launch fails is left out, its error appended to `errors`."""
    reps = max(_MAX_REPS // 2, _MIN_REPS)
    halves: dict[int, list[float]] = {v.index: [] for v in candidates}
    failed: set[int] = set()
    for order in (candidates, candidates[::-1]):
        for v in order:
            if v.index in failed:
                continue
            backup.restore(stream)
            try:
                halves[v.index].append(median_ms(functools.partial(launch, v), device, stream,
                                                 _MEASURE_MS / 2, reps))
            except TcLaunchError as exc:
                failed.add(v.index)
                errors.append(exc)
                _say(f"{label}: skipped {v.config}: {_reason(exc)}")
    timed = [(float(statistics.mean(halves[v.index])), v) for v in candidates if v.index not in failed]
    for ms, v in timed:
        _say(f"{label}: {v.config}: {ms * 1000:.1f} us")
    return timed


def _final_rounds(timed: list[tuple[float, Variant]], launch: Callable[[Variant], None],
                  backup: Backup, device: driver.Device, stream: int,
                  label: str) -> list[tuple[float, Variant]]:
    """The finalists of the first pass `timed`, each with the median of FINAL_ROUNDS more
    measurements, the finalists taking turns in each round, in the reverse order every other
    round (see the module docstring); [] when fewer than two qualify. The first pass only chooses
    the finalists: its windows are short, and what drifts during them biases it. Where several
    finalists end within CLOSE_MARGIN of the fastest, only they are returned, compared over
    CLOSE_ROUNDS more rounds besides."""
    if not timed:
        return []
    fastest = min(t for t, _ in timed)
    finalists = [v for t, v in sorted(timed, key=lambda tv: tv[0]) if t <= fastest * (1 + FINAL_MARGIN)][:FINALISTS]
    if len(finalists) < 2 or FINAL_ROUNDS < 1:
        return []
    rounds: dict[int, list[float]] = {v.index: [] for v in finalists}

    def take_turns(among: list[Variant], count: int) -> None:
        for r in range(count):
            for v in (among if r % 2 == 0 else among[::-1]):
                backup.restore(stream)
                rounds[v.index].append(median_ms(functools.partial(launch, v), device, stream,
                                                 FINAL_MEASURE_MS, FINAL_MAX_REPS))

    take_turns(finalists, FINAL_ROUNDS)
    paired = paired_times(rounds)
    out = [(paired[v.index], v) for v in finalists]
    for ms, v in out:
        _say(f"{label}: {v.config}: {ms * 1000:.1f} us over {FINAL_ROUNDS} interleaved rounds")
    close = close_calls(out)
    if len(close) < 2 or CLOSE_ROUNDS < 1:
        return out
    take_turns(close, CLOSE_ROUNDS)
    paired = paired_times({v.index: rounds[v.index] for v in close})
    out = [(paired[v.index], v) for v in close]
    for ms, v in out:
        _say(f"{label}: {v.config}: {ms * 1000:.1f} us over {FINAL_ROUNDS + CLOSE_ROUNDS} interleaved rounds "
             f"(a close call)")
    return out


def close_calls(timed: list[tuple[float, Variant]]) -> list[Variant]:
    """The variants of `timed` within CLOSE_MARGIN of the fastest, fastest first: the ones the
    final rounds could not tell apart."""
    fastest = min(t for t, _ in timed)
    return [v for t, v in sorted(timed, key=lambda tv: tv[0]) if _close(t, fastest)]


def _close(ms: float, fastest: float) -> bool:
    """Whether a time within CLOSE_MARGIN of the fastest: a close call."""
    return ms <= fastest * (1 + CLOSE_MARGIN)


def paired_times(rounds: dict[int, list[float]]) -> dict[int, float]:
    """Each configuration's time from rounds in which all took turns (`rounds[i][r]`: config i's
    time in round r), compared within rounds: the median over rounds of its time over that
    round's median, times the median of the rounds' medians. A round whose clocks were low slows
    every finalist alike, so comparing within the round cancels it, where the median of each
    one's own times mixes fast and slow rounds (its ms stays comparable to a plain median's)."""
    count = len(next(iter(rounds.values()), []))
    refs = [float(statistics.median(times[r] for times in rounds.values())) for r in range(count)]
    scale = float(statistics.median(refs)) if refs else 0.0
    return {i: float(statistics.median(t / ref for t, ref in zip(times, refs, strict=True))) * scale
            for i, times in rounds.items()}


class Backup:
    """Device copies of the allocations behind the pointer arguments (each allocation once)."""

    def __init__(self, device: driver.Device, pointers: Sequence[int], stream: int) -> None:
        self.saved: list[tuple[int, int, driver.DeviceBuffer]] = []
        ranges: dict[int, int] = {}
        for p in pointers:
            r = driver.address_range(p)
            if r is not None:
                ranges[r[0]] = r[1]
        try:
            for base, size in ranges.items():
                buf = driver.DeviceBuffer(device, size)
                self.saved.append((base, size, buf))
                buf.copy_from_device_async(base, size, stream)
        except TcRuntimeError as exc:  # out of memory: tune on live data rather than fail
            self.free()
            warnings.warn(f"tc auto-tuning without restoring the arguments' memory between "
                          f"configurations (cannot allocate a copy: {exc})", RuntimeWarning,
                          stacklevel=4)

    def restore(self, stream: int) -> None:
        for base, size, buf in self.saved:
            buf.copy_to_device_async(base, size, stream)

    def free(self) -> None:
        for _, _, buf in self.saved:
            try:
                buf.free()
            except TcRuntimeError:
                pass
        self.saved = []


def _flush_buffer(device: driver.Device) -> driver.DeviceBuffer | None:
    if device.index not in _flush:
        try:
            _flush[device.index] = driver.DeviceBuffer(device, _FLUSH_BYTES)
        except TcRuntimeError:
            _flush[device.index] = None
    return _flush[device.index]


def median_ms(launch: Callable[[], None], device: driver.Device, stream: int,
              measure_ms: float | None = None, max_reps: int | None = None) -> float:
    """Median time of `launch` in milliseconds, by CUDA events on `stream`, L2 flushed first;
    about `measure_ms` of timed launches (default _MEASURE_MS), at most `max_reps` of them."""
    return float(statistics.median(launch_times(launch, device, stream, measure_ms, max_reps)))


def launch_times(launch: Callable[[], None], device: driver.Device, stream: int,
                 measure_ms: float | None = None, max_reps: int | None = None) -> list[float]:
    """The milliseconds of each timed launch that `median_ms` takes the median of."""
    launch()
    start, end = driver.Event(), driver.Event()
    start.record(stream)
    for _ in range(3):
        launch()
    end.record(stream)
    end.synchronize()
    estimate = max(start.elapsed_ms(end) / 3, 1e-4)
    window = _MEASURE_MS if measure_ms is None else measure_ms
    n = min(max(int(window / estimate), _MIN_REPS), _MAX_REPS if max_reps is None else max_reps)
    flush = _flush_buffer(device)
    events = [(driver.Event(), driver.Event()) for _ in range(n)]
    for s, e in events:
        if flush is not None:
            flush.zero_async(stream)
        s.record(stream)
        launch()
        e.record(stream)
    events[-1][1].synchronize()
    return [s.elapsed_ms(e) for s, e in events]


# ------------------------------------------------------------------------------------ CPU


def changed_arguments(config: Config, kernel: str, kinds: Sequence[str],
                      expected: Sequence[str]) -> TcLaunchError:
    """The error for a configuration whose defines change the kernel's argument types: it cannot
    run on the caller's arguments (TcLaunchError: skippable, on the GPU and the CPU alike)."""
    return TcLaunchError(
        f"configuration {config} changes the arguments of kernel '{kernel}' to "
        f"({', '.join(kinds)}); every configuration must keep ({', '.join(expected)})",
        kernel=kernel)


def _same_arguments(own: Signature, sig: Signature, config: Config) -> None:
    if own.kinds != sig.kinds:
        raise changed_arguments(config, own.kernel, own.kinds, sig.kinds)


def check_cpu(kernel: Kernel, args: Sequence[object], grid: object) -> int:
    """Run every configuration on the interpreter from the same inputs; their results must
    agree. Leaves the first working configuration's results in the buffers; returns its index."""
    sig = kernel.cpu_signature()
    label = _label(kernel, [args[i] for i in kernel._key_indices])
    skip = knobs.skip_autotuning()
    regions = None if skip else cpu_regions(sig, args)
    if regions is None and not skip:
        _say(f"{label}: raw integer pointers on the CPU: configurations not compared, the first "
             f"one runs")
    errors: list[BaseException] = []
    initial = [r.read() for r in regions] if regions else []
    chosen: int | None = None
    reference: list[bytes] = []
    mismatches: list[str] = []
    for i, config in enumerate(kernel.configs):
        try:
            ck = kernel.cpu_kernel(i)
            _same_arguments(ck.signature, sig, config)
        except skippable_errors() as exc:
            errors.append(exc)
            _say(f"{label}: skipped {config}: {_reason(exc)}")
            continue
        if regions:
            for r, data in zip(regions, initial):
                r.write(data)
        kernel.run_cpu(ck, args, grid)
        if chosen is None:
            chosen = i
            if not regions:
                break
            reference = [r.read() for r in regions]
            continue
        assert regions is not None
        for r, a in zip(regions, reference):
            if not r.equal(a, r.read()):
                mismatches.append(f"{config} differs from {kernel.configs[chosen]} in '{r.name}'")
        _say(f"{label}: {config}: " + ("differs" if mismatches else "same results"))
    if chosen is None:
        raise errors[0]
    if regions:
        for r, data in zip(regions, reference):
            r.write(data)
    if mismatches:
        raise TcRuntimeError(f"auto-tuning configurations of {label} compute different results "
                             f"on the interpreter: " + "; ".join(mismatches))
    _say(f"{label}: using {kernel.configs[chosen]}")
    return chosen
