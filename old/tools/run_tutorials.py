"""Run every tutorial (tutorials/*.py, in name order) and fail if any fails.

    python tools/run_tutorials.py [--device cpu|cuda] [NAME_SUBSTRING ...]

Each tutorial runs in its own process from the repository root, on the GPU when one is available
and on the CPU interpreter otherwise (or on the device given); outputs go to build/tutorials.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None,
                        help="force the device (default: cuda when available, else cpu)")
    parser.add_argument("--out", default=str(ROOT / "build" / "tutorials"),
                        help="where tutorials write plots and tables")
    parser.add_argument("names", nargs="*", help="run only tutorials whose file name contains one "
                                                  "of these")
    args = parser.parse_args(argv)
    tutorials = sorted((ROOT / "tutorials").glob("*.py"))
    if args.names:
        tutorials = [t for t in tutorials if any(n in t.name for n in args.names)]
    if not tutorials:
        print("no tutorials found", file=sys.stderr)
        return 1
    env = dict(os.environ, TC_TUTORIAL_OUT=args.out, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    if args.device:
        env["TC_TUTORIAL_DEVICE"] = args.device
    failed: list[str] = []
    for path in tutorials:
        print(f"=== {path.name}", flush=True)
        start = time.perf_counter()
        rc = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env).returncode
        took = time.perf_counter() - start
        status = "ok" if rc == 0 else f"FAILED (exit {rc})"
        print(f"=== {path.name}: {status} in {took:.1f} s", flush=True)
        if rc != 0:
            failed.append(path.name)
    print(f"{len(tutorials) - len(failed)}/{len(tutorials)} tutorials passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
