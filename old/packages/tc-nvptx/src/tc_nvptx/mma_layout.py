"""Thread maps of the tensor-core layouts (mma.sync m16n8k16 / m16n8k8 fragments).

With gid = lane / 4 and tig = lane % 4, one instruction's fp32 accumulator gives each lane the
rows gid and gid + 8 and the columns 2 tig and 2 tig + 1 of a 16x8 block; warp (wm_i, wn_j) owns
the blocks at rows 16 wm_i + 16 WM r and columns 8 wn_j + 8 WN r. The A operand (rows x K) holds
the same rows and, per 32-bit register, k_width consecutive K elements at k_width tig (+ 4
k_width); the B operand (K x columns) the same K elements and the column gid. Each dimension is
still `base + offsets`, so the generic ThreadMap (and every element-wise lowering) applies.
Warp id: wm_i = warp % WM, wn_j = warp / WM. A transposed (wgmma) accumulator swaps the roles:
its rows run along the tile's N, its columns along M, and its rows are paired: the instruction's
rows gid and gid + 8 of a warp's 16 hold N = 2 gid and 2 gid + 1 (`_rows(paired=True)`), because
the lowering reads them from B's N-major tile into wgmma's register operand (tc_nvptx.lower_wgmma)
as one 8-byte load; each thread then holds 2 x 2 blocks, neighbours along N as in the plain
accumulator (a warp-specialized kernel stores its tf32 result as it lies: 8-byte stores).
"""

from __future__ import annotations

from tc_ir.layouts import DotOperand, Layout, Mma

from .layout_math import DimMap, LayoutError, RemovedDim, ThreadMap, check_cover


def _rows(size: int, wm: int, root_dim: int, paired: bool = False) -> DimMap:
    """The accumulator / A-operand row dimension: 8 lanes, 16 rows per warp block, lane l holding
    rows l / 4 and l / 4 + 8, or (`paired`: a transposed accumulator's) 2 (l / 4) and 2 (l / 4) + 1."""
    cover = 16 * wm
    if size < 16:
        raise LayoutError(f"tensor-core tiles need at least 16 rows, not {size}")
    mode, reps = ("wrap", 1) if cover > size else ("tile", size // cover)
    check_cover(size, cover)
    second = 1 if paired else 8
    offs = tuple(r * cover + h for r in range(reps) for h in (0, second))
    return DimMap(size, mode, offs, 2 if paired else 1, 8, wm, 4, 1, root_dim, warp_step=16)


def _cols(size: int, wm: int, wn: int, per_lane: int, root_dim: int) -> DimMap:
    """Accumulator columns (2 per lane, 4 lanes) or B-operand columns (1 per lane, 8 lanes)."""
    cover = 8 * wn
    if size < 8:
        raise LayoutError(f"tensor-core tiles need at least 8 columns, not {size}")
    mode, reps = ("wrap", 1) if cover > size else ("tile", size // cover)
    check_cover(size, cover)
    offs = tuple(r * cover + j for r in range(reps) for j in range(per_lane))
    tpw, lane_stride = (4, 1) if per_lane == 2 else (8, 4)
    return DimMap(size, mode, offs, per_lane, tpw, wn, lane_stride, wm, root_dim, warp_step=8)


def _inner(size: int, k_width: int, root_dim: int) -> DimMap:
    """The K dimension of an operand: k_width elements per register, at k_width*tig and
    k_width*(tig + 4) within each instruction's K block of 8*k_width."""
    block = 8 * k_width
    if size % block:
        raise LayoutError(f"K = {size} is not a multiple of the instruction's {block}")
    offs = tuple(kk * block + h * 4 * k_width + j for kk in range(size // block) for h in (0, 1) for j in range(k_width))
    return DimMap(size, "tile", offs, k_width, 4, 1, 1, 1, root_dim)


def _dim(root: Mma | DotOperand, r: int, size: int) -> DimMap:
    if size == 1:  # a broadcast dimension (`rm[:, newaxis]` before it meets the tile): replicated
        d = _dim(root, r, 16)
        return DimMap(1, "one", (0,), 1, d.tpw, d.wpc, d.lane_stride, d.warp_stride, r, d.warp_step)
    if isinstance(root, Mma):
        wm, wn = root.warps_per_cta
        if r != root.row_dim:
            return _cols(size, wm, wn, 2, r)
        return _rows(size, wm, r, paired=root.transposed)
    parent = root.parent
    assert isinstance(parent, Mma)
    wm, wn = parent.warps_per_cta
    if root.operand_index == 0:
        return _rows(size, wm, r) if r == 0 else _inner(size, root.k_width, r)
    return _inner(size, root.k_width, r) if r == 0 else _cols(size, wm, wn, 1, r)


def _removed(root: Mma | DotOperand, r: int) -> RemovedDim:
    """A root dimension a Slice removed (its lanes and warps hold copies)."""
    d = _dim(root, r, 16)
    return RemovedDim(d.tpw, d.wpc, d.lane_stride, d.warp_stride)


def mma_thread_map(
    shape: tuple[int, ...], layout: Layout, root: Mma | DotOperand, kept: list[int], removed_root: list[int]
) -> ThreadMap:
    """The ThreadMap of an Mma or DotOperand(Mma) layout, possibly under Slices."""
    if isinstance(root, DotOperand) and not isinstance(root.parent, Mma):
        raise LayoutError(f"a dot operand of a {root.parent} accumulator lives in shared memory: {layout}")
    if len(kept) + len(removed_root) != 2:
        raise LayoutError(f"layout {layout} does not fit a tile of rank {len(shape)}")
    dims = tuple(_dim(root, r, s) for s, r in zip(shape, kept))
    removed = [_removed(root, r) for r in removed_root]
    if isinstance(root, DotOperand):
        parent = root.parent
        assert isinstance(parent, Mma)
        wm, wn = parent.warps_per_cta
        # A is the same in the warps along N, B in the warps along M
        removed.append(RemovedDim(1, wn, 1, wm) if root.operand_index == 0 else RemovedDim(1, wm, 1, 1))
        fast_root = 1 if root.operand_index == 0 else 0
    else:
        fast_root = 1  # (pairs along N in either accumulator: a transposed one's rows are paired)
    root_order = (fast_root, 1 - fast_root)
    root_to_tile = {r: i for i, r in enumerate(kept)}
    order = tuple(root_to_tile[r] for r in root_order if r in root_to_tile)
    return ThreadMap(tuple(shape), layout, dims, tuple(removed), order, root)
