"""Layout conversions exchanged in rounds of columns where a whole tile's buffer does not fit
(ConvertLayoutOp.columns).

A conversion through shared memory writes the whole source tile, then reads it back in the new
layout: a 16-bit 128x256 tensor-core result takes 64 KiB (plus row padding). A persistent
warp-specialized kernel's producer keeps filling its pipeline while the consumers convert, so
that buffer cannot reuse the pipeline's: a four-stage 128x256x64 pipeline (192 KiB) leaves no
room for it. The TMA store writes such a tile through 16 KiB panels instead, but only where C's
rows are 16-byte aligned; C with, say, 4100 columns of 16-bit elements falls back to the
conversion and the kernel did not fit.

Where the function's shared memory exceeds the target's, each conversion whose source and result
place every thread's elements in fixed column panels (layout_utils.thread_block: a tensor-core
accumulator with no warps along the columns; a store layout in panels of 128-byte columns,
layout_utils.panel_layout) is narrowed to rounds of `columns`: write one panel, barrier, read it,
barrier, the next panel. The widest rounds that fit are taken (fewest barriers); a function that
does not fit even with the narrowest is left as it was, for tc_opt.resources to report.
"""

from __future__ import annotations

from tc_ir.ops import ConvertLayoutOp, Function, Module
from tc_ir.types import TileType

from .layout_utils import thread_block
from .pass_manager import Pass
from .resources import max_shared_bytes
from .shared_alloc import allocate, scratch_bytes


def round_widths(op: ConvertLayoutOp) -> list[int]:
    """The column counts `op` can be exchanged in, widest first (narrower than its tile; empty
    when its layouts do not keep each thread's elements in fixed panels)."""
    src, dst = op.operands[0].type, op.result.type
    if not isinstance(src, TileType) or not isinstance(dst, TileType) or src.rank < 2 or src.layout is None:
        return []
    if op.columns or dst.layout is None or src.layout == dst.layout or scratch_bytes(op) == 0:
        return []
    last = src.rank - 1
    a, b = thread_block(src.layout, src.shape, last), thread_block(dst.layout, dst.shape, last)
    if a is None or b is None:
        return []
    size = src.shape[last]
    return [w for w in range(size - max(a, b), 0, -max(a, b)) if size % w == 0 and w % a == 0 and w % b == 0]


def exchange_in_rounds(f: Function, limit: int) -> bool:
    """Narrow the conversions of `f` (the largest buffer first, one step at a time) until its
    shared memory fits `limit` bytes; True when it then fits. Unchanged when it cannot."""
    if allocate(f).size <= limit:
        return True
    options = {op: round_widths(op) for op in f.walk() if isinstance(op, ConvertLayoutOp) and not op.columns}
    options = {op: widths for op, widths in options.items() if widths}
    taken = {op: 0 for op in options}
    while True:
        narrowable = [op for op in options if taken[op] < len(options[op])]
        if not narrowable:
            for op in options:
                op.columns = 0
            return False
        op = max(narrowable, key=scratch_bytes)
        op.columns = options[op][taken[op]]
        taken[op] += 1
        if allocate(f).size <= limit:
            return True


class ExchangeInRounds(Pass):
    """Conversions in rounds of columns where the kernel's shared memory would not fit otherwise
    (see the module's doc)."""

    name = "exchange-in-rounds"

    def run(self, module: Module) -> None:
        limit = max_shared_bytes(self.options.arch)
        for f in module.functions:
            exchange_in_rounds(f, limit)


__all__ = ["ExchangeInRounds", "exchange_in_rounds", "round_widths"]
