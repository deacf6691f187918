"""A model of shared-memory bank conflicts, for choosing how a tile exchanged through shared
memory is laid out there.

Shared memory has 32 banks of 4-byte words. One warp's access is served in phases (all 32 lanes
for accesses of up to 4 bytes each, 16 lanes at a time for 8 bytes, 8 for 16 bytes); a phase takes
as many wavefronts as the most distinct words any one bank holds among its lanes' addresses
(lanes reading the same word share it). `wavefronts` counts them for every access one warp makes
to a tile held in a Blocked layout and stored at given element strides, with each thread's
contiguous elements merged into vectors as wide as their alignment allows (what LLVM's
load/store vectorizer makes of the lowering's per-element accesses).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from tc_ir.layouts import Blocked

BANKS = 32
WORD_BYTES = 4
#: The widest shared-memory access of one thread (ld/st.shared.v4.b32).
MAX_VECTOR_BYTES = 16
#: At most this many of a thread's accesses are simulated (evenly spread over them), the count
#: scaled to all of them: a layout's accesses repeat one pattern, and this bounds compile time.
MAX_SIMULATED = 64


def _lane_strides(layout: Blocked) -> list[int]:
    out = [0] * layout.rank
    s = 1
    for d in layout.order:
        out[d] = s
        s *= layout.threads_per_warp[d]
    return out


def _dims(shape: Sequence[int], layout: Blocked) -> list[tuple[tuple[int, ...], Callable[[int], int], int]]:
    """Per dimension: the offsets a thread holds, its base coordinate as a function of the lane
    (warp 0) and the length of its contiguous runs; as tc_nvptx.layout_math distributes tiles."""
    lane_strides = _lane_strides(layout)
    out: list[tuple[tuple[int, ...], Callable[[int], int], int]] = []
    for d, size in enumerate(shape):
        spt, tpw, wpc = layout.size_per_thread[d], layout.threads_per_warp[d], layout.warps_per_cta[d]
        cta = spt * tpw * wpc
        ls = lane_strides[d]

        def lane_base(lane: int, tpw: int = tpw, ls: int = ls, spt: int = spt, size: int = size) -> int:
            return (lane // ls % tpw) * spt % size

        if size == 1:
            out.append(((0,), lambda lane: 0, 1))
        elif spt >= size:
            out.append((tuple(range(size)), lambda lane: 0, size))
        elif cta >= size:
            out.append((tuple(range(spt)), lane_base, spt))
        else:
            offs = tuple(rep * cta + s for rep in range(size // cta) for s in range(spt))
            out.append((offs, lane_base, spt))
    return out


def vector_elements(shape: Sequence[int], layout: Blocked, strides: Sequence[int], element_bytes: int) -> int:
    """Elements per shared-memory access of a thread: its contiguous run along the dimension of
    stride 1, as far as alignment allows (16-byte aligned buffer, rows at `strides`)."""
    dims = _dims(shape, layout)
    fast = [d for d, s in enumerate(strides) if s == 1 and shape[d] > 1]
    if not fast:
        return 1
    c = fast[0]
    align = MAX_VECTOR_BYTES
    for d, s in enumerate(strides):
        if d != c and shape[d] > 1:
            align = math.gcd(align, s * element_bytes)
    run = dims[c][2]
    align = math.gcd(align, run * element_bytes)
    v = 1
    while v * 2 <= run and v * 2 * element_bytes <= align and run % (v * 2) == 0:
        v *= 2
    return v


def wavefronts(shape: Sequence[int], layout: Blocked, strides: Sequence[int], element_bytes: int) -> int:
    """Shared-memory wavefronts of one warp accessing its elements of a `shape` tile in `layout`
    stored at element `strides` (one access per vector of `vector_elements`)."""
    dims = _dims(shape, layout)
    v = vector_elements(shape, layout, strides, element_bytes)
    fast = [d for d, s in enumerate(strides) if s == 1 and shape[d] > 1]
    offsets = [list(o) for o, _, _ in dims]
    if v > 1:
        offsets[fast[0]] = offsets[fast[0]][::v]
    accesses = list(itertools.product(*offsets))
    step = max(1, len(accesses) // MAX_SIMULATED)
    sampled = accesses[::step]
    nbytes = v * element_bytes
    per_phase = BANKS * WORD_BYTES // max(WORD_BYTES, nbytes)
    bases = [[base(lane) for _, base, _ in dims] for lane in range(32)]
    total = 0
    for key in sampled:
        for first in range(0, 32, per_phase):
            banks: dict[int, set[int]] = {}
            for lane in range(first, first + per_phase):
                addr = sum((b + o) * s for b, o, s in zip(bases[lane], key, strides)) * element_bytes
                for word in range(addr // WORD_BYTES, (addr + nbytes - 1) // WORD_BYTES + 1):
                    banks.setdefault(word % BANKS, set()).add(word)
            total += max(len(w) for w in banks.values())
    return total * len(accesses) // len(sampled)
