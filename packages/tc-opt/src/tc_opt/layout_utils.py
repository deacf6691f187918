"""Constructing layouts: the coalesced Blocked layout for a tile given its memory order and the
vector width its accesses can use."""

from __future__ import annotations

from collections.abc import Sequence

from tc_ir.layouts import Blocked, DotOperand, Layout, Slice


def prod(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def default_order(rank: int) -> tuple[int, ...]:
    """Row-major: the last dimension is the fastest."""
    return tuple(range(rank - 1, -1, -1))


def blocked_for(
    shape: Sequence[int], num_warps: int, order: Sequence[int] | None = None, vec: int = 1
) -> Blocked:
    """The Blocked layout that spreads `shape` over 32*num_warps threads, each holding up to `vec`
    consecutive elements along order[0] (more only when the tile is larger than one pass)."""
    rank = len(shape)
    if rank == 0:
        raise ValueError("scalars have no layout")
    order = tuple(order) if order is not None else default_order(rank)
    threads = 32 * num_warps
    spt = [1] * rank
    fast = order[0]
    per_thread = max(1, prod(shape) // threads)
    spt[fast] = max(1, min(vec, per_thread, shape[fast]))
    tpw = [1] * rank
    left = 32
    for d in order:
        t = min(left, max(1, shape[d] // spt[d]))
        tpw[d] = t
        left //= t
    tpw[order[-1]] *= left
    wpc = [1] * rank
    left = num_warps
    for d in order:
        w = min(left, max(1, shape[d] // (spt[d] * tpw[d])))
        wpc[d] = w
        left //= w
    wpc[order[-1]] *= left
    return Blocked(spt, tpw, wpc, order)


def layout_rank(layout: Layout) -> int:
    if isinstance(layout, Blocked):
        return layout.rank
    if isinstance(layout, Slice):
        return layout_rank(layout.parent) - 1
    if isinstance(layout, DotOperand):
        return layout_rank(layout.parent)
    return len(getattr(layout, "order", getattr(layout, "warps_per_cta", ())))
