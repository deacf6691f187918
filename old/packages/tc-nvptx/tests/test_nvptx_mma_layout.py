"""Thread maps of the wgmma accumulator (no GPU): which elements each thread holds, computed here
from the DimMaps the code generator uses, for the plain layout and the transposed one of a tf32
dot computed as C^T = B^T A^T (its rows along the tile's N)."""

from __future__ import annotations

import itertools

import pytest
from tc_ir.layouts import Mma
from tc_nvptx.layout_math import DimMap, ThreadMap, thread_map


def _base(d: DimMap, lane: int, warp: int) -> int:
    """The thread's first coordinate along `d`, as Ctx.base computes it (tensor-core maps)."""
    assert d.warp_step  # (the tensor-core form)
    lane_part = (lane // d.lane_stride) % d.tpw if d.tpw > 1 else 0
    v = lane_part * d.spt
    if d.wpc > 1:
        v += ((warp // d.warp_stride) % d.wpc) * d.warp_step
    return v % d.size if d.mode == "wrap" else v


def _owned(m: ThreadMap, lane: int, warp: int) -> set[tuple[int, ...]]:
    bases = [_base(d, lane, warp) for d in m.dims]
    return {tuple(b + o for b, o in zip(bases, key)) for key in itertools.product(*(d.offsets for d in m.dims))}


def _paired(row: int) -> int:
    """The tile's N that a transposed accumulator holds in wgmma's D row `row`: in each warp's 16,
    rows r and r + 8 hold 2 r and 2 r + 1."""
    r = row % 16
    return row - r + 2 * (r % 8) + r // 8


@pytest.mark.parametrize("m,n,warps", [(256, 128, 8), (128, 256, 8), (64, 64, 4), (128, 128, 4)])
def test_transposed_accumulator_holds_the_transposed_products_elements(m: int, n: int, warps: int) -> None:
    # the tile [M, N] in the transposed layout: each thread holds the transposes of the elements
    # it holds of the plain accumulator of [N, M] (wgmma's D of C^T = B^T A^T), its rows paired
    plain = thread_map((n, m), Mma(3, (warps, 1), (64, m, 8)))
    trans = thread_map((m, n), Mma(3, (warps, 1), (64, m, 8), transposed=True))
    assert trans.per_thread == plain.per_thread == m * n // (32 * warps)
    assert sorted(_paired(r) for r in range(n)) == list(range(n))
    seen: set[tuple[int, ...]] = set()
    for warp in range(warps):
        for lane in range(32):
            mine = _owned(trans, lane, warp)
            assert mine == {(c, _paired(r)) for r, c in _owned(plain, lane, warp)}
            seen |= mine
    assert seen == set(itertools.product(range(m), range(n)))  # every element, once per thread


def test_transposed_accumulator_is_wgmma_d_fragment_of_c_transposed() -> None:
    # thread (warp w, lane l) holds wgmma's D rows l / 4 and l / 4 + 8 of its warp's 16: C^T's
    # rows (the tile's N) 16 w + 2 (l / 4) and the next (what lower_wgmma_register_a loads there),
    # and columns m = 8 j + 2 (l % 4) + (0, 1) (the tile's M)
    m, n, warps = 256, 128, 8
    trans = thread_map((m, n), Mma(3, (warps, 1), (64, m, 8), transposed=True))
    for warp, lane in ((0, 0), (3, 17), (5, 30), (7, 31)):
        rows = {16 * warp + 2 * (lane // 4), 16 * warp + 2 * (lane // 4) + 1}
        cols = {8 * j + 2 * (lane % 4) + e for j in range(m // 8) for e in (0, 1)}
        assert _owned(trans, lane, warp) == {(c, r) for r in rows for c in cols}
    assert trans.order[0] == 1  # pairs along N, as a row-major C's stores want them


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("shape", [(128, 1), (1, 128)])
def test_a_broadcast_dimension_of_an_accumulator_layout_is_replicated(shape: tuple[int, int], transposed: bool) -> None:
    # `row[newaxis, :]` meeting a [128, 128] accumulator: the [1, 128] tile takes the accumulator's
    # layout, and each thread holds, at index 0 of the broadcast dimension, the coordinate of every
    # accumulator element it holds (so the broadcast is register renaming)
    lay = Mma(3, (8, 1), (64, 128, 8), transposed=transposed)
    full = thread_map((128, 128), lay)
    part = thread_map(shape, lay)
    one = shape.index(1)
    assert part.dims[one].mode == "one" and part.dims[one].offsets == (0,)
    for warp in range(8):
        for lane in range(32):
            bases = [0 if d.mode == "one" else _base(d, lane, warp) for d in part.dims]
            mine = {tuple(b + o for b, o in zip(bases, key)) for key in itertools.product(*(d.offsets for d in part.dims))}
            wanted = {tuple(0 if i == one else c for i, c in enumerate(e)) for e in _owned(full, lane, warp)}
            assert mine == wanted
