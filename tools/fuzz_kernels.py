"""Differential fuzzing: random Triton-C kernels on the GPU against the CPU interpreter.

    python3 tools/fuzz_kernels.py 0:2000 [--workers 8] [--keep DIR [--reduce]] [--wide]
                                                                     # GPU vs interpreter
    python3 tools/fuzz_kernels.py 0:200 --compile-only [--arch sm_80] # no GPU: compile + ptxas

Each seed is one kernel of packages/tc-nvptx/tests/random_kernels.py (its docstring says what
they contain). A seed ends as `ok`, `refused` (a located TcCompileError: a kernel the compiler
declines, such as a tile too large for the hardware; listed, not a failure), `crash` (any other
exception: a defect) or `mismatch` (the GPU's outputs differ from the interpreter's: a defect).
Failing kernels are written to --keep as fuzz-SEED.tc with the message. Seeds run in parallel
worker processes (fresh interpreters, each with its own CUDA context); the last lines are a
table of outcomes by feature. Exit status 1 when any seed crashed or mismatched.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import multiprocessing
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "packages" / "tc-nvptx" / "tests"


def _setup() -> None:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))


def run_seed(seed: int, gpu: bool, arch: str = "sm_90", wide: bool = False
             ) -> tuple[int, str, str, tuple[str, ...], float]:
    """(seed, outcome, message, features, seconds) of one random kernel."""
    _setup()
    import random_kernels as rk

    start = time.perf_counter()
    program = rk.generate(seed, wide)
    outcome, message = _outcome(program, gpu, arch)
    return seed, outcome, message, program.features, time.perf_counter() - start


def _outcome(program: Any, gpu: bool, arch: str = "sm_90") -> tuple[str, str]:
    """(outcome, message) of `program` (see run_seed)."""
    import random_kernels as rk
    from tc_lang import TcCompileError

    stage = "interpreter"
    try:
        want = rk.interpret(program)
        stage = "GPU" if gpu else "compiler"
        if not gpu:
            rk.compile_for(program, arch)
            return "ok", ""
        problems = rk.compare(program, want, rk.run_gpu(program))
        return ("mismatch" if problems else "ok"), "\n".join(problems)
    except TcCompileError as exc:
        return "refused", f"{stage}: {exc}"
    except Exception as exc:  # noqa: BLE001 - every other exception is what the fuzzer looks for
        return "crash", f"{stage}: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"


def reduce_source(seed: int, gpu: bool, wide: bool = False, arch: str = "sm_90") -> str:
    """The failing kernel of `seed` with every line removed whose removal keeps it failing the
    same way (a crash stays a crash, a mismatch a mismatch): a short reproduction."""
    _setup()
    import attrs

    import random_kernels as rk

    program = rk.generate(seed, wide)
    want, _ = _outcome(program, gpu, arch)
    lines = program.source.splitlines()
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("bool mask")) + 1
    i = len(lines) - 2  # the last line is the closing brace
    while i >= first:
        trial = lines[:i] + lines[i + 1:]
        outcome, _ = _outcome(attrs.evolve(program, source="\n".join(trial) + "\n"), gpu, arch)
        if outcome == want:
            lines = trial
        i -= 1
    source = "\n".join(lines) + "\n"
    _, message = _outcome(attrs.evolve(program, source=source), gpu, arch)
    return source + "/* " + message.replace("*/", "* /") + " */\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("seeds", help="A:B, the seeds A..B-1, or a list S,S,...")
    ap.add_argument("--compile-only", action="store_true", help="no GPU: compile and assemble only")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--arch", default="sm_90", help="with --compile-only: the target (sm_80 takes mma.sync)")
    ap.add_argument("--wide", action="store_true",
                    help="wide kernels: also helpers, while loops, early returns, more atomics and dots")
    ap.add_argument("--keep", type=Path, help="folder for the failing kernels")
    ap.add_argument("--reduce", action="store_true",
                    help="also write each failing kernel cut down to the lines it needs (fuzz-SEED.min.tc)")
    args = ap.parse_args(argv)
    if ":" in args.seeds:
        lo, _, hi = args.seeds.partition(":")
        seeds: list[int] = list(range(int(lo), int(hi)))
    else:
        seeds = [int(s) for s in args.seeds.split(",")]
    _setup()
    import random_kernels as rk

    counts: collections.Counter[str] = collections.Counter()
    by_feature: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    failed = []
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(args.workers, mp_context=ctx) as pool:
        futures = [pool.submit(run_seed, s, not args.compile_only, args.arch, args.wide) for s in seeds]
        for fut in cf.as_completed(futures):
            seed, outcome, message, features, seconds = fut.result()
            counts[outcome] += 1
            for f in features or ("plain",):
                by_feature[f][outcome] += 1
            if outcome != "ok":
                print(f"seed {seed}: {outcome} ({seconds:.1f} s)\n  " + message.strip().replace("\n", "\n  ")[:3000],
                      flush=True)
            if outcome in ("crash", "mismatch"):
                failed.append(seed)
                if args.keep:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    (args.keep / f"fuzz-{seed}.tc").write_text(
                        rk.generate(seed, args.wide).source + "/* " + message.replace("*/", "* /") + " */\n")
    outcomes = ["ok", "refused", "crash", "mismatch"]
    print(f"\n{'feature':<12}" + "".join(f"{o:>10}" for o in outcomes))
    for f in sorted(by_feature):
        print(f"{f:<12}" + "".join(f"{by_feature[f][o]:>10}" for o in outcomes))
    print(f"{'all':<12}" + "".join(f"{counts[o]:>10}" for o in outcomes))
    if failed:
        print("failing seeds: " + " ".join(map(str, sorted(failed))))
    if failed and args.reduce and args.keep:
        with cf.ProcessPoolExecutor(args.workers, mp_context=ctx) as pool:
            reduced = pool.map(reduce_source, failed, [not args.compile_only] * len(failed),
                               [args.wide] * len(failed), [args.arch] * len(failed))
            for seed, source in zip(failed, reduced):
                (args.keep / f"fuzz-{seed}.min.tc").write_text(source)
                print(f"\n== seed {seed}, reduced:\n{source}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
