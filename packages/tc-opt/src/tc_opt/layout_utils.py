"""Constructing layouts: the coalesced Blocked layout for a tile given its memory order and the
vector width its accesses can use."""

from __future__ import annotations

from collections.abc import Sequence

from tc_ir.layouts import Blocked, DotOperand, Layout, Mma, Slice


def prod(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def default_order(rank: int) -> tuple[int, ...]:
    """Row-major: the last dimension is the fastest."""
    return tuple(range(rank - 1, -1, -1))


def pow2_part(n: int, cap: int) -> int:
    """The largest power of two that divides n and is at most cap (1 when cap < 2)."""
    p = 1
    while p * 2 <= cap and n % (p * 2) == 0:
        p *= 2
    return p


def blocked_for(
    shape: Sequence[int], num_warps: int, order: Sequence[int] | None = None, vec: int = 1
) -> Blocked:
    """The Blocked layout that spreads `shape` over 32*num_warps threads, each holding up to `vec`
    consecutive elements along order[0] (more only when the tile is larger than one pass).

    Along a dimension that is not a power of two (a multiple of 16, tc_lang's rule) the
    per-thread, per-warp and per-CTA blocks divide it, so that it is covered by whole blocks
    repeated along it. Threads left over once every dimension is covered replicate the slowest
    power-of-two dimension (or, with none, fail in the code generator's thread map)."""
    order = _order(shape, order)
    spt, tpw, wpc, lanes, warps = _fit(shape, num_warps, order, vec, any(_pow2(n) for n in shape))
    slow = next((d for d in reversed(order) if _pow2(shape[d])), order[-1])
    tpw[slow] *= lanes
    wpc[slow] *= warps
    return Blocked(spt, tpw, wpc, order)


def distributed_for(
    shape: Sequence[int], num_warps: int, order: Sequence[int] | None = None, vec: int = 1
) -> Layout:
    """blocked_for's layout, or, when its threads cannot cover a dimension that is not a power of
    two in whole blocks (a 1-D tile of 96 over 128 threads), the same blocks as a Slice of a
    Blocked layout whose extra, removed dimension holds the left-over lanes and warps: they
    replicate the tile, as the warps along the other dimension of a 2-D tile's row do."""
    lay = blocked_for(shape, num_warps, order, vec)
    if all(covers(n, lay.size_per_thread[d] * lay.threads_per_warp[d] * lay.warps_per_cta[d],
                  lay.size_per_thread[d]) for d, n in enumerate(shape)):
        return lay
    spt, tpw, wpc, lanes, warps = _fit(shape, num_warps, lay.order, vec, False)
    parent = Blocked([1, *spt], [lanes, *tpw], [warps, *wpc], (*(d + 1 for d in lay.order), 0))
    return Slice(dim=0, parent=parent)


def _order(shape: Sequence[int], order: Sequence[int] | None) -> tuple[int, ...]:
    if not shape:
        raise ValueError("scalars have no layout")
    return tuple(order) if order is not None else default_order(len(shape))


def covers(size: int, cover: int, spt: int) -> bool:
    """Whether blocks of `cover` elements (`spt` per thread) spread a dimension of `size` evenly:
    one thread holds it all, repeated blocks divide it, or replicated blocks are a multiple of it
    (never otherwise for a dimension that is not a power of two: covers are powers of two)."""
    return size == 1 or spt >= size or size % cover == 0 or cover % size == 0


def _fit(shape: Sequence[int], num_warps: int, order: tuple[int, ...], vec: int, keep_width: bool
         ) -> tuple[list[int], list[int], list[int], int, int]:
    """_spread with up to `vec` elements per thread, halved while threads are left over (unless
    `keep_width`: a power-of-two dimension can take them)."""
    per_thread = max(1, prod(shape) // (32 * num_warps))
    width = max(1, min(vec, per_thread, shape[order[0]]))
    while True:
        spt, tpw, wpc, lanes, warps = _spread(shape, num_warps, order, width)
        if keep_width or (lanes == 1 and warps == 1) or width == 1:
            return spt, tpw, wpc, lanes, warps
        width //= 2


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _spread(shape: Sequence[int], num_warps: int, order: tuple[int, ...], width: int
            ) -> tuple[list[int], list[int], list[int], int, int]:
    """Per-thread elements (`width` along order[0]), lanes and warps per dimension, each block
    dividing the dimension, fastest dimension first; and the lanes and warps left over."""
    rank = len(shape)
    spt = [1] * rank
    spt[order[0]] = pow2_part(shape[order[0]], width)
    tpw = [1] * rank
    lanes = 32
    for d in order:
        tpw[d] = pow2_part(max(1, shape[d] // spt[d]), lanes)
        lanes //= tpw[d]
    wpc = [1] * rank
    warps = num_warps
    for d in order:
        wpc[d] = pow2_part(max(1, shape[d] // (spt[d] * tpw[d])), warps)
        warps //= wpc[d]
    return spt, tpw, wpc, lanes, warps


def layout_rank(layout: Layout) -> int:
    if isinstance(layout, Blocked):
        return layout.rank
    if isinstance(layout, Slice):
        return layout_rank(layout.parent) - 1
    if isinstance(layout, DotOperand):
        return layout_rank(layout.parent)
    return len(getattr(layout, "order", getattr(layout, "warps_per_cta", ())))


def thread_block(layout: Layout, shape: Sequence[int], dim: int) -> int | None:
    """The elements of dimension `dim` within which a thread's position depends on its lane and
    warp: every element a thread holds lies at `block * r + (its own offset < block)` for a
    register-fixed r. 1 when one thread holds the whole dimension; None when the threads cover
    it more than once (replicas) or the layout is not a Blocked or tensor-core accumulator one.
    A buffer of a whole number of blocks then serves each thread's elements of one part of the
    dimension at a time (tc_opt.exchange_rounds)."""
    size = shape[dim]
    if isinstance(layout, Blocked):
        spt = layout.size_per_thread[dim]
        cover = spt * layout.threads_per_warp[dim] * layout.warps_per_cta[dim]
    elif isinstance(layout, Mma) and len(shape) == 2:  # (tc_nvptx.mma_layout's thread map)
        wm, wn = layout.warps_per_cta
        spt, cover = 1, 16 * wm if dim == layout.row_dim else 8 * wn
    else:
        return None
    if size == 1 or spt >= size:
        return 1
    return cover if cover <= size else None


def panel_layout(layout: Layout, shape: Sequence[int], element_bytes: int, panel_bytes: int = 128) -> Layout:
    """`layout` (a row-major Blocked layout of a 2-D tile) with at least 4 bytes per thread along
    the columns, and warps, then lanes, moved from the columns to the rows until one block of the
    columns is at most `panel_bytes` wide, as far as whole blocks still cover both dimensions.
    Every warp still writes whole contiguous pieces of rows; a buffer of one panel of columns
    serves an exchange into it (tc_opt.exchange_rounds); and 16-bit elements read back from it
    stay packed in pairs until they are stored (an unaligned store still splits them), which
    halves the registers the exchanged tile takes. Without the pairs where they do not cover the
    columns (160 = 5 x 32); other layouts are returned as they are."""
    if not isinstance(layout, Blocked) or layout.rank != 2 or layout.order[0] != 1:
        return layout
    pair = max(1, 4 // element_bytes)
    for width in ((pair, 1) if pair > 1 and layout.size_per_thread[1] < pair else (1,)):
        spt = [layout.size_per_thread[0], max(layout.size_per_thread[1], width)]
        tpw, wpc = list(layout.threads_per_warp), list(layout.warps_per_cta)
        moved = _narrow_columns(spt, tpw, wpc, shape, element_bytes, panel_bytes)
        if moved is not None:
            return moved
    return layout


def _whole_blocks(spt: Sequence[int], tpw: Sequence[int], wpc: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether the blocks cover each dimension of `shape` whole, without replicas."""
    return all(spt[d] * tpw[d] * wpc[d] <= shape[d] and covers(shape[d], spt[d] * tpw[d] * wpc[d], spt[d])
               for d in range(2))


def _narrow_columns(spt: list[int], tpw: list[int], wpc: list[int], shape: Sequence[int], element_bytes: int,
                    panel_bytes: int) -> Blocked | None:
    """panel_layout's moves of warps, then lanes, from the columns to the rows (while the rows
    take twice as many in whole blocks); None when the result does not cover the tile in whole
    blocks."""
    for per in (wpc, tpw):
        while spt[1] * tpw[1] * wpc[1] * element_bytes > panel_bytes and per[1] > 1:
            rows = spt[0] * tpw[0] * wpc[0] * 2
            if rows > shape[0] or shape[0] % rows:
                break
            per[0], per[1] = per[0] * 2, per[1] // 2
    return Blocked(spt, tpw, wpc, (1, 0)) if _whole_blocks(spt, tpw, wpc, shape) else None
