"""Copies of a dumped kernel's PTX with one part of its work removed (or done another way), to
load in its place through TC_KERNEL_OVERRIDE_DIR and measure what that part costs in cycles, clock or power (measure-only;
the copies compute wrong results: time them with `bench_power.py --time-wrong`). An edit must
leave the products something to feed (a store, an exchange), or ptxas drops them as dead code.

    python3 tools/ptx_edits.py DUMPED.ptx OUT_DIR [--a-bytes 32768 --b-bytes 16384]

writes OUT_DIR/<edit>/<the dumped file's name> for each edit in EDITS that applies to the kernel
(an edit that finds nothing to remove is skipped, with a note), so that
`TC_KERNEL_OVERRIDE_DIR=OUT_DIR/<edit>` runs that copy wherever tc builds the kernel.

The refill edits drop one operand's TMA copies from the main loop's refill (the last block of
bulk tensor copies, after the last `mbarrier.arrive.expect_tx`) and lower that block's expected
byte count by the operand's bytes per stage (--a-bytes for the operand read through one copy,
--b-bytes for the one read in several panels), so the barrier still completes; the stages keep
the data of the program's first copies. The `untransposed` edit reads a 16-bit product's
transposed (M- or N-major) operand as if it were K-major: the same bytes without the transpose.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

_GLOBAL_STORE = re.compile(r"^\s*(@!?%p\d+\s+)?st\.global\.")
_SHARED_STORE = re.compile(r"^\s*(@!?%p\d+\s+)?st\.shared\.")
_WIDE_SHARED_LOAD = re.compile(r"^\s*ld\.shared\.v4\.")
_FRAGMENT_LOAD = re.compile(r"^\s*ld\.shared\.v2\.")
_EXPECT_TX = re.compile(r"^(\s*mbarrier\.arrive\.expect_tx\.\S+\s+_,\s*\[[^\]]+\],\s*)(\d+);")
_TENSOR_COPY = re.compile(r"^\s*cp\.async\.bulk\.tensor\.\S+\s+\[[^\]]+\],\s*\[(%rd\d+),")


def _drop(lines: list[str], *patterns: re.Pattern[str]) -> tuple[list[str], int]:
    kept = [line for line in lines if not any(p.match(line) for p in patterns)]
    return kept, len(lines) - len(kept)


def no_global_stores(lines: list[str], a_bytes: int, b_bytes: int) -> tuple[list[str], int]:
    """The epilogue exchanges the tile through shared memory but writes nothing to C. Only for a
    kernel with such an exchange: where the accumulator goes straight from registers to C,
    nothing would read it, ptxas would drop the products with it and the copy would time the
    loads alone (a tf32 kernel so edited ran at 1980 MHz, under the power cap: H100, 2026-11-27)."""
    if not any(_SHARED_STORE.match(line) for line in lines):
        return lines, 0
    return _drop(lines, _GLOBAL_STORE, _WIDE_SHARED_LOAD)


def no_fragment_loads(lines: list[str], a_bytes: int, b_bytes: int) -> tuple[list[str], int]:
    """The register operand's loads from shared memory are gone (its registers keep whatever
    they held: the products use undefined values)."""
    return _drop(lines, _FRAGMENT_LOAD)


#: a 16-bit wgmma with both operands in shared memory: ..., descA, descB, scale-d, imm-scale-a,
#: imm-scale-b, tnsp-a, tnsp-b;
_TRANSPOSED_WGMMA = re.compile(r"^(.*wgmma\.mma_async\.\S+\.b?f16\.b?f16 .*, %rd\d+, %rd\d+, \S+, -?1, -?1, )"
                               r"([01]), ([01]);(.*)$")


def untransposed(lines: list[str], a_bytes: int, b_bytes: int) -> tuple[list[str], int]:
    """The 16-bit products read their operands from shared memory as K-major where the compiler
    asked for a transposed (M- or N-major) read: the same bytes, in another order, without the
    transposition (tf32 products have no such flag and are left alone). Whether the transposed
    read costs power: tc's C = A B (B N-major) ran 3% behind its dA (both K-major) at the same
    cycles, 4096³ fp16 on an H100 (BENCHMARKS.md, thirty-second session)."""
    out, changed = [], 0
    for line in lines:
        m = _TRANSPOSED_WGMMA.match(line)
        if m is not None and (m.group(2), m.group(3)) != ("0", "0"):
            line = f"{m.group(1)}0, 0;{m.group(4)}"
            changed += 1
        out.append(line)
    return out, changed


def _refill(lines: list[str]) -> tuple[int, list[int]]:
    """(index of the refill's expect_tx line, indices of its tensor copies)."""
    arrives = [i for i, line in enumerate(lines) if _EXPECT_TX.match(line)]
    if not arrives:
        return -1, []
    start = arrives[-1]
    copies = []
    for i in range(start + 1, len(lines)):
        if _TENSOR_COPY.match(lines[i]):
            copies.append(i)
        elif re.match(r"^\s*(@!?%p\d+\s+)?bra", lines[i]) or lines[i].startswith("$"):
            break
    return start, copies


def _without_refill_of(single: bool) -> Callable[[list[str], int, int], tuple[list[str], int]]:
    def edit(lines: list[str], a_bytes: int, b_bytes: int) -> tuple[list[str], int]:
        start, copies = _refill(lines)
        by_map: dict[str, list[int]] = {}
        for i in copies:
            m = _TENSOR_COPY.match(lines[i])
            assert m is not None
            by_map.setdefault(m.group(1), []).append(i)
        if len(by_map) != 2:
            return lines, 0
        one, many = sorted(by_map.values(), key=len)
        drop, less = (one, a_bytes) if single else (many, b_bytes)
        m = _EXPECT_TX.match(lines[start])
        assert m is not None
        out = list(lines)
        out[start] = f"{m.group(1)}{int(m.group(2)) - less};"
        return [line for i, line in enumerate(out) if i not in set(drop)], len(drop)

    edit.__doc__ = ("The main loop refills only the operand read in several panels." if single else
                    "The main loop refills only the operand read through one copy.")
    return edit


#: name -> edit: (the PTX's lines, A's and B's bytes per stage) -> (edited lines, lines removed).
EDITS: dict[str, Callable[[list[str], int, int], tuple[list[str], int]]] = {
    "same": lambda lines, a, b: (lines, 1),  # (the override path itself: the driver compiles the PTX)
    "no-global-stores": no_global_stores,
    "no-fragment-loads": no_fragment_loads,
    "no-a-refill": _without_refill_of(single=True),
    "no-b-refill": _without_refill_of(single=False),
    "untransposed": untransposed,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("ptx", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--a-bytes", type=int, default=256 * 32 * 4, help="bytes per stage of the one-copy operand")
    ap.add_argument("--b-bytes", type=int, default=128 * 32 * 4, help="bytes per stage of the panelled operand")
    args = ap.parse_args(argv)
    try:
        lines = args.ptx.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"ptx_edits: cannot read {args.ptx}: {exc}", file=sys.stderr)
        return 2
    for name, edit in EDITS.items():
        edited, removed = edit(lines, args.a_bytes, args.b_bytes)
        if not removed:
            print(f"{name}: nothing to remove, skipped", file=sys.stderr)
            continue
        folder = args.out / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / args.ptx.name).write_text("\n".join(edited) + "\n")
        print(f"{name}: {removed} lines removed or changed -> {folder / args.ptx.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
