"""Layouts: how the elements of a tile are spread over the threads of a program (GPU level).

tc-opt attaches one to every `TileType` before code generation; the target-independent IR has none.
`Blocked` is the general distributed layout (each thread holds `size_per_thread` contiguous
elements along `order[0]`, repeated to cover the tile); `Slice` is a blocked parent with one
dimension removed (what a reduction produces, what an expand_dims consumes); `Mma` is a tensor-core
accumulator; `DotOperand` an mma operand in registers; `Shared` a swizzled shared-memory tile.
"""

from __future__ import annotations

from typing import Union

import attrs


def _tuple(v: object) -> tuple[int, ...]:
    return tuple(int(x) for x in v)  # type: ignore[attr-defined]


@attrs.frozen
class Blocked:
    """Per-dimension: elements per thread, threads per warp, warps per program; order[0] is fastest."""

    size_per_thread: tuple[int, ...] = attrs.field(converter=_tuple)
    threads_per_warp: tuple[int, ...] = attrs.field(converter=_tuple)
    warps_per_cta: tuple[int, ...] = attrs.field(converter=_tuple)
    order: tuple[int, ...] = attrs.field(converter=_tuple)

    @property
    def rank(self) -> int:
        return len(self.order)

    @property
    def num_warps(self) -> int:
        n = 1
        for w in self.warps_per_cta:
            n *= w
        return n

    def __str__(self) -> str:
        def f(t: tuple[int, ...]) -> str:
            return "[" + ", ".join(str(x) for x in t) + "]"

        return (
            f"#blocked<spt={f(self.size_per_thread)}, tpw={f(self.threads_per_warp)}, "
            f"wpc={f(self.warps_per_cta)}, order={f(self.order)}>"
        )


@attrs.frozen
class Slice:
    """`parent` with dimension `dim` removed."""

    parent: Layout
    dim: int

    def __str__(self) -> str:
        return f"#slice<dim={self.dim}, parent={self.parent}>"


@attrs.frozen
class Mma:
    """A tensor-core accumulator: version 2 is mma.sync (Ampere/Hopper), 3 is wgmma (Hopper).
    `transposed` (wgmma only): the tile [M, N] is held as the accumulator of the transposed
    product [N, M] (rows N, columns M; warps_per_cta and instr_shape describe that product): a
    tf32 dot whose N-contiguous B becomes wgmma's register operand (tc_opt.k_major_operands).
    Which thread holds which element: tc_nvptx.mma_layout (a transposed one's rows are paired)."""

    version: int
    warps_per_cta: tuple[int, ...] = attrs.field(converter=_tuple)
    instr_shape: tuple[int, ...] = attrs.field(converter=_tuple)
    transposed: bool = False

    @property
    def row_dim(self) -> int:
        """The tile dimension the accumulator's rows (warps_per_cta[0]) run along."""
        return 1 if self.transposed else 0

    def warps_along(self, dim: int) -> int:
        """How many warps split tile dimension `dim`."""
        return self.warps_per_cta[0 if dim == self.row_dim else 1]

    def __str__(self) -> str:
        w = ", ".join(str(x) for x in self.warps_per_cta)
        i = ", ".join(str(x) for x in self.instr_shape)
        t = ", trans=1" if self.transposed else ""
        return f"#mma<v={self.version}, wpc=[{w}], instr=[{i}]{t}>"


@attrs.frozen
class DotOperand:
    """Operand `operand_index` (0 = A, 1 = B) of an mma with accumulator layout `parent`."""

    parent: Layout
    operand_index: int
    k_width: int

    def __str__(self) -> str:
        return f"#dot_op<idx={self.operand_index}, k_width={self.k_width}, parent={self.parent}>"


@attrs.frozen
class Shared:
    """A shared-memory tile, XOR-swizzled: `vec` elements per access, rows per phase, phases."""

    vec: int
    per_phase: int
    max_phase: int
    order: tuple[int, ...] = attrs.field(converter=_tuple)

    def __str__(self) -> str:
        o = ", ".join(str(x) for x in self.order)
        return f"#shared<vec={self.vec}, per_phase={self.per_phase}, max_phase={self.max_phase}, order=[{o}]>"


Layout = Union[Blocked, Slice, Mma, DotOperand, Shared]
