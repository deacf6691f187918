"""A layout conversion exchanged in rounds of columns (ConvertLayoutOp.columns), without a GPU:
every thread's writes and reads of each round simulated from the thread maps the code generator
uses, so that each element read back is the one written there in the same round; the generated
code's barriers; and the layouts it refuses."""

from __future__ import annotations

import re

import pytest
from tc_ir.layouts import Blocked, Mma
from tc_lang.diagnostics import TcLoweringError
from tc_nvptx.layout_math import DimMap, ThreadMap, thread_map
from tc_nvptx.lower_shared import rounds_of, thread_reach
from tc_opt.shared_alloc import exchange_strides

ACCUMULATOR = Mma(3, (8, 1), (64, 256, 16))
PAIRS = Blocked([1, 2], [1, 32], [8, 1], [1, 0])  # tc_opt.layout_utils.panel_layout's store layout
VECTORS = Blocked([1, 8], [4, 8], [8, 1], [1, 0])


def _base(d: DimMap, lane: int, warp: int) -> int:
    """The thread's first coordinate along `d`, as Ctx.base computes it."""
    if d.mode in ("one", "all"):
        return 0
    lane_part = (lane // d.lane_stride) % d.tpw if d.tpw > 1 else 0
    warp_part = (warp // d.warp_stride) % d.wpc if d.wpc > 1 else 0
    v = lane_part * d.spt + warp_part * d.warp_step if d.warp_step else (warp_part * d.tpw + lane_part) * d.spt
    return v % d.size if d.mode == "wrap" else v


def _elements(m: ThreadMap, lane: int, warp: int) -> dict[tuple[int, ...], tuple[int, ...]]:
    """key -> the element's coordinates, for one thread."""
    bases = [_base(d, lane, warp) for d in m.dims]
    return {key: tuple(b + k for b, k in zip(bases, key)) for key in m.keys}


def _simulate(src: ThreadMap, dst: ThreadMap, columns: int, warps: int) -> int:
    """Run the rounds over every thread; returns the buffer's highest index + 1."""
    rows = src.shape[0]
    strides = exchange_strides((rows, columns), 2)
    write_round, read_round = rounds_of(src, columns, None), rounds_of(dst, columns, None)
    threads = [(lane, warp) for warp in range(warps) for lane in range(32)]
    read: set[tuple[int, ...]] = set()
    top = 0
    for r in range(src.shape[1] // columns):
        buffer: dict[int, tuple[int, ...]] = {}
        for lane, warp in threads:  # (what the code writes at _linear(base, key - shift))
            for key, (i, j) in _elements(src, lane, warp).items():
                if write_round[key] == r:
                    assert r * columns <= j < (r + 1) * columns
                    at = i * strides[0] + (j - r * columns) * strides[1]
                    assert buffer.setdefault(at, (i, j)) == (i, j)  # no two elements in one place
                    top = max(top, at + 1)
        for lane, warp in threads:
            for key, (i, j) in _elements(dst, lane, warp).items():
                if read_round[key] == r:
                    assert buffer[i * strides[0] + (j - r * columns) * strides[1]] == (i, j)
                    read.add((i, j))
    assert read == {(i, j) for i in range(rows) for j in range(src.shape[1])}
    return top


@pytest.mark.parametrize("dst_layout", [PAIRS, VECTORS])
@pytest.mark.parametrize("columns", [128, 64])
def test_every_element_read_in_a_round_was_written_there_in_that_round(dst_layout: Blocked, columns: int) -> None:
    src = thread_map((128, 256), ACCUMULATOR)
    dst = thread_map((128, 256), dst_layout)
    top = _simulate(src, dst, columns, warps=8)
    assert top <= 128 * exchange_strides((128, columns), 2)[0]  # within one round's buffer


def test_thread_reach_is_the_largest_thread_offset() -> None:
    for layout in (ACCUMULATOR, PAIRS, VECTORS, Blocked([1, 1], [1, 32], [1, 8], [1, 0])):
        m = thread_map((128, 256), layout)
        for d in m.dims:
            seen = {_base(d, lane, warp) for warp in range(8) for lane in range(32)}
            assert max(seen) == thread_reach(d), layout


def test_a_layout_spread_over_the_rounds_is_refused() -> None:
    # 8 warps side by side along 256 columns: a thread's columns depend on its warp, not its key
    spread = thread_map((128, 256), Blocked([1, 1], [1, 32], [1, 8], [1, 0]))
    with pytest.raises(TcLoweringError, match="rounds of 128 columns"):
        rounds_of(spread, 128, None)


def test_each_round_adds_a_barrier_before_its_writes_and_one_before_its_reads() -> None:
    """The persistent warp-specialized matmul with an odd ldc: a 128x256 tile converts in two
    rounds, a 128x128 tile (which fits) at once; each of the kernel's two epilogues (the
    overlapped loop's two versions) has one conversion."""
    from pathlib import Path

    from tc_nvptx import compile as compile_kernel
    from tc_opt import CompileOptions

    kernels = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
    spec = ("divisible_by_16",) * 3 + (None,) * 3 + ("divisible_by_8",) * 2 + (None,)
    options = CompileOptions(arch="sm_90a", num_warps=8, num_stages=4, specialization=spec, warp_specialize=True,
                             persistent=True, tma_store=True, overlap_epilogue=True)
    ptx = {}
    for nb in (256, 128):
        ck = compile_kernel((kernels / "matmul_tutorial.tc").read_text(),
                            defines={"TYPE": "half", "MB": 128, "NB": nb, "KB": 64}, options=options)
        assert ck.shared_bytes <= 232448 and ck.spills in (0, None)
        ptx[nb] = ck.ptx
    def consumer_barriers(nb: int) -> int:
        return ptx[nb].count("bar.sync \t1, 256;")  # (the 256 consumer threads' named barrier)
    assert consumer_barriers(256) - consumer_barriers(128) == 2 * 2  # one more round, two barriers, twice
    # each thread exchanges its 128 elements as 64 pairs: 32-bit writes and reads
    pairs = r"\.shared\.(?:v2\.b16|b32)\s"
    assert len(re.findall("st" + pairs, ptx[256])) == len(re.findall("ld" + pairs, ptx[256])) == 2 * 64
    assert not re.findall(r"(?:st|ld)\.shared\.b16\s", ptx[256])
