"""Issue 9's matmul ratios pooled over several processes: tools/bench_matmul_backward.py run
`--runs` times, each in a fresh process that tunes anew (TC_RETUNE=1; the compiled kernels are
shared through one cache), and tc_torch.matmul's speed over torch's pooled round by round for
every product (measure-only helper).

One run's ratio moves 2-3% from one process to the next with the same kernels (an H100 at
4096³, BENCHMARKS.md, twenty-fifth session: bf16 C = A B 0.981 then 1.012), so a single run
cannot say whether a product at parity is at or above 1.0. Pooled, it can: the table gives the
quartiles of every round of every run, the range of the runs' own medians, how many runs had
a median of at least 1.0, and which configurations the runs' tuners chose.

    PYTHONPATH=<packages/*/src> python3 tools/bench_matmul_pooled.py [--runs 4] [--rounds 9]
        [--shapes 4096x4096x4096] [--keep-choice] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from bench_rounds import quartiles  # noqa: E402

Key = tuple[str, str, str]  # (shape, dtype, product)


def pool(runs: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per product found in `runs` (each a list of bench_matmul_backward's JSON rows), in
    the order they first appear: every round's tc / torch ratio of every run pooled (quartiles),
    each run's median, how many runs' medians are at least 1.0, and the configurations the
    timed runs' tuners chose (`tc_config`, in run order). A run without rounds for a product (not
    timed: a wrong result, or the CPU) adds nothing to it."""
    rounds: dict[Key, list[float]] = {}
    medians: dict[Key, list[float]] = {}
    choices: dict[Key, list[str]] = {}
    for rows in runs:
        for row in rows:
            key = (row["shape"], row["dtype"], row["op"])
            rounds.setdefault(key, [])
            medians.setdefault(key, [])
            choices.setdefault(key, [])
            ratios = row.get("tc_torch_rounds")
            if ratios:
                rounds[key].extend(float(r) for r in ratios)
                medians[key].append(float(statistics.median(ratios)))
                if row.get("tc_config"):
                    choices[key].append(str(row["tc_config"]))
    out = []
    for key, values in rounds.items():
        shape, dtype, op = key
        product: dict[str, Any] = {"shape": shape, "dtype": dtype, "op": op, "rounds": len(values),
                                   "runs": len(medians[key]), "choices": choices[key]}
        if values:
            product["quartiles"] = quartiles(values)
            product["run_medians"] = medians[key]
            product["runs_at_least_1"] = sum(m >= 1.0 for m in medians[key])
        out.append(product)
    return out


def choice_counts(choices: Sequence[str]) -> str:
    """Each distinct configuration with how many runs chose it, most chosen first ("-" for none)."""
    counts = Counter(choices)
    return "; ".join(f"{c} ({n}x)" for c, n in counts.most_common()) or "-"


def table(pooled: Sequence[dict[str, Any]]) -> str:
    """The pooled rows as a markdown table."""
    lines = ["| shape | dtype | product | runs | rounds | tc / torch pooled (quartiles) | run medians "
             "| runs >= 1.0 | tuner's choices |", "|---|---|---|---|---|---|---|---|---|"]
    for row in pooled:
        q = row.get("quartiles")
        spread = f"{q[0]:.3f} / {q[1]:.3f} / {q[2]:.3f}" if q else "-"
        meds = row.get("run_medians") or []
        span = f"{min(meds):.3f}-{max(meds):.3f}" if meds else "-"
        at_least = f"{row['runs_at_least_1']} of {row['runs']}" if meds else "-"
        lines.append(f"| {row['shape']} | {row['dtype']} | {row['op']} | {row['runs']} | {row['rounds']} "
                     f"| {spread} | {span} | {at_least} | {choice_counts(row.get('choices') or [])} |")
    return "\n".join(lines)


def run_once(shapes: str, rounds: int, cache: str, retune: bool, timeout: float) -> list[dict[str, Any]]:
    """One bench_matmul_backward process with kernel cache `cache` (tuning anew with `retune`);
    its JSON rows ([] when it failed: said on stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        env = {**os.environ, "TC_CACHE_DIR": cache, "TC_RETUNE": "1" if retune else "0"}
        cmd = [sys.executable, str(ROOT / "tools" / "bench_matmul_backward.py"), "--shapes", shapes,
               "--rounds", str(rounds), "--json", str(out)]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            sys.stderr.write(f"bench_matmul_backward.py took more than {timeout:.0f} s: run left out\n")
            return []
        if proc.returncode != 0 or not out.is_file():
            sys.stderr.write(f"bench_matmul_backward.py exited {proc.returncode}: run left out\n"
                             f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}\n")
            return []
        rows: list[dict[str, Any]] = json.loads(out.read_text())["rows"]
        return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4, help="fresh processes, one after the other")
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds in each run")
    ap.add_argument("--shapes", default="4096x4096x4096")
    ap.add_argument("--keep-choice", action="store_true",
                    help="tune only where TC_CACHE_DIR (as set, else a new folder) remembers no choice: the "
                         "first run's choices are then used by all")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one run may take")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.runs < 1 or args.rounds < 1:
        ap.error("--runs and --rounds must be at least 1")
    import torch

    if not torch.cuda.is_available():
        sys.exit("bench_matmul_pooled.py times matmuls on a CUDA GPU, and torch sees none")
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.environ.get("TC_CACHE_DIR") or str(Path(tmp) / "cache")
        runs = []
        for i in range(args.runs):
            rows = run_once(args.shapes, args.rounds, cache, not args.keep_choice, args.timeout)
            print(f"run {i + 1} of {args.runs}: {len(rows)} products", flush=True)
            runs.append(rows)
            pooled = pool(runs)
            if args.json:  # (after every run: what a time limit cuts short is kept)
                Path(args.json).write_text(json.dumps({"runs": runs, "pooled": pooled}, indent=1))
    print("\n" + table(pooled))
    return 0 if any(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
