"""Which elements of a tile one thread holds, for a distributed (Blocked or Slice) layout.

Per tile dimension the thread holds the coordinates `base + off` for `off` in a fixed list of
compile-time offsets; `base` depends only on the thread (its lane and warp along that
dimension). A thread's elements are the Cartesian product of the per-dimension offsets, keyed by
the tuple of offsets. Two tiles of one shape and layout have the same keys, so element-wise ops
pair elements by key; broadcast/expand_dims/reduce re-key without moving data.

Modes of a dimension: "one" (size 1: base 0), "all" (the thread's block covers the dimension:
base 0, every offset), "wrap" (the threads cover the dimension more than once: base modulo the
size, replicated data), "tile" (the dimension is larger than the threads cover: repeated blocks).
"""

from __future__ import annotations

import itertools

import attrs
from tc_ir.layouts import Blocked, DotOperand, Layout, Mma, Slice
from tc_opt.layout_utils import covers


@attrs.frozen
class DimMap:
    size: int
    mode: str
    offsets: tuple[int, ...]
    spt: int
    tpw: int
    wpc: int
    lane_stride: int  # lane id = sum over dims of lane_d * lane_stride
    warp_stride: int
    root_dim: int
    #: When nonzero the base is lane_part * spt + warp_part * warp_step (tensor-core layouts,
    #: where a warp's block is not spt * tpw wide); otherwise (warp_part * tpw + lane_part) * spt.
    warp_step: int = 0

    @property
    def distinct_lanes(self) -> int:
        """How many lanes along this dimension hold different data."""
        return min(self.tpw, max(1, self.size // self.spt)) if self.mode in ("wrap", "tile") else 1

    @property
    def distinct_warps(self) -> int:
        if self.warp_step:
            return min(self.wpc, max(1, self.size // self.warp_step)) if self.mode in ("wrap", "tile") else 1
        return min(self.wpc, max(1, self.size // (self.spt * self.tpw))) if self.mode in ("wrap", "tile") else 1


@attrs.frozen
class RemovedDim:
    """A dimension of the root Blocked layout that a Slice removed (threads along it replicate)."""

    tpw: int
    wpc: int
    lane_stride: int
    warp_stride: int


def _strides(sizes: tuple[int, ...], order: tuple[int, ...]) -> list[int]:
    out = [0] * len(sizes)
    s = 1
    for d in order:
        out[d] = s
        s *= sizes[d]
    return out


@attrs.frozen
class ThreadMap:
    shape: tuple[int, ...]
    layout: Layout
    dims: tuple[DimMap, ...]
    removed: tuple[RemovedDim, ...]
    order: tuple[int, ...]  # tile dims, fastest first
    root: Layout  # Blocked, or Mma / DotOperand (see mma_layout)

    @property
    def keys(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(d.offsets for d in self.dims)))

    @property
    def per_thread(self) -> int:
        n = 1
        for d in self.dims:
            n *= len(d.offsets)
        return n


def layout_warps(root: Layout) -> int:
    """How many warps a root layout (Blocked, Mma or DotOperand) tells apart: fewer than the
    program's when 12 warps are spread in powers of two (the others repeat the first ones)."""
    lay = root.parent if isinstance(root, DotOperand) else root
    if isinstance(lay, Blocked):
        return lay.num_warps
    if isinstance(lay, Mma):
        return lay.warps_per_cta[0] * lay.warps_per_cta[1]
    raise LayoutError(f"not a root layout: {root}")


class LayoutError(ValueError):
    """A layout the code generator cannot distribute (a compiler bug, not a user error)."""


class UncoveredDimension(LayoutError):
    """A tile dimension that is not a power of two and that the program's threads cannot cover in
    whole blocks (a user's choice of tile and num_warps: reported at the operation's line)."""


def check_cover(size: int, cover: int, spt: int = 1) -> None:
    """Refuse a dimension of `size` that blocks of `cover` elements (`spt` per thread) do not
    spread evenly (tc_opt.layout_utils.covers)."""
    if not covers(size, cover, spt):
        raise UncoveredDimension(f"a tile dimension of {size} cannot be covered by whole blocks of "
                                 f"{cover} elements")


def thread_map(shape: tuple[int, ...], layout: Layout) -> ThreadMap:
    # Walk Slice layouts down to the root Blocked, recording which root dims the tile keeps.
    kept = list(range(len(shape)))
    lay: Layout = layout
    removed_root: list[int] = []
    while isinstance(lay, Slice):
        # tile dims (in the slice) map to parent dims skipping `dim`
        kept = [k if k < lay.dim else k + 1 for k in kept]
        removed_root = [r if r < lay.dim else r + 1 for r in removed_root] + [lay.dim]
        lay = lay.parent
    if isinstance(lay, (Mma, DotOperand)):
        from .mma_layout import mma_thread_map

        return mma_thread_map(tuple(shape), layout, lay, kept, removed_root)
    if not isinstance(lay, Blocked):
        raise LayoutError(f"not a distributed layout: {layout}")
    root = lay
    if len(kept) + len(removed_root) != root.rank:
        raise LayoutError(f"layout {layout} does not fit a tile of rank {len(shape)}")
    lane_strides = _strides(root.threads_per_warp, root.order)
    warp_strides = _strides(root.warps_per_cta, root.order)
    dims = []
    for size, r in zip(shape, kept):
        spt, tpw, wpc = root.size_per_thread[r], root.threads_per_warp[r], root.warps_per_cta[r]
        cta = spt * tpw * wpc
        offs: tuple[int, ...]
        if size == 1:
            mode, offs = "one", (0,)
        elif spt >= size:
            mode, offs = "all", tuple(range(size))
        elif cta >= size:
            mode, offs = "wrap", tuple(range(spt))
        else:
            mode = "tile"
            offs = tuple(rep * cta + s for rep in range(size // cta) for s in range(spt))
        check_cover(size, cta, spt)
        dims.append(DimMap(size, mode, offs, spt, tpw, wpc, lane_strides[r], warp_strides[r], r))
    removed = tuple(
        RemovedDim(root.threads_per_warp[r], root.warps_per_cta[r], lane_strides[r], warp_strides[r])
        for r in removed_root
    )
    root_to_tile = {r: i for i, r in enumerate(kept)}
    order = tuple(root_to_tile[r] for r in root.order if r in root_to_tile)
    return ThreadMap(tuple(shape), layout, tuple(dims), removed, order, root)


def row_major_strides(shape: tuple[int, ...]) -> list[int]:
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return out
