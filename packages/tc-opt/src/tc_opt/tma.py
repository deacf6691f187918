"""Which pipelined loads can be tensor-memory-access (TMA) copies, and with which tensor map.

A load in a loop qualifies when it reads a 2-D tile of a row-major matrix given by a pointer
argument, `P + (r0 + i)[:, None] * ld + (c0 + j)[None, :]` (ld an integer argument, the tile's
contiguous dimension the shared buffer's), the pointer is a loop-carried value advanced by a
constant number of rows or columns per iteration, the masked-off elements read zero, and its only
user is a swizzled shared buffer that a wgmma dot reads. The mask, if any, must be a conjunction of
`index < bound` per dimension whose bound, moved into the matrix's coordinates, is an argument (plus
a constant) for every iteration: the tensor map's extent, outside which TMA reads zeros. A
dimension without a mask gets an extent no coordinate reaches (`UNBOUNDED`): the program says
every address is valid, as with the load it replaces.

A uniform offset of the base pointer by `x * s` (`x` an int32 value computed before the loop, such
as a program id, `s` an integer argument: the batch offset `pz * stride_z` of a batched matmul)
becomes an outer dimension of the map, of stride `s` and extent `UNBOUNDED`, at coordinate `x`
(box 1): a 3-D (up to 5-D) map. Such a stride may be 0 (an operand broadcast over the batch): the
copies then read coordinate 0 (`TmaPlan.outer`, pipeline_tma) and the runtime encodes the
dimension with extent 1.

Legality that depends on arguments is read from the specialization: the base pointer must be
16-byte aligned and the stride in bytes a multiple of 16 (the runtime compiles another variant, on
cp.async, for arguments that break this). The one thing taken on trust is that coordinates are not
negative (tile starts computed from program ids): TMA reads zeros there, a plain load would read
the memory before the matrix.

The pointer tile may be written in any order and grouping (`P + (i * ld + j)`, the spec's
`P + j * 1 + i * ld`, `(P + i * ld) + j`: a chain of additions, `pointer_terms`). The loop's
counter plays no part (the frontend gives `for (k = K; k > 0; k -= TK)` as an increasing range
already); a mask's bound that follows the counter is read in the normalized loop.

Not a candidate (a different structure, not a pattern missed): loops that prefetch by hand, as the
spec's matmul_prefetch.tc, matmul_remat.tc and matmul_fused_trans.tc do (`a = *pa` before the
loop, `a = check ? *pa : 0` at the end of the body, the dot reading the loop-carried register
tile `a`). The dot's shared buffer then holds a block argument, not a load of this iteration, so
the pipeliner (tc_opt.pipeline_loops.candidates) finds no load to turn into copies, for TMA or
cp.async alike. Taking them would need a transformation first that rotates the prefetch back into
a load at the top of the body (proving that `check` is exactly "the next iteration runs").

Expressions are matched as linear forms over SSA values (`Lin`): the coordinates of the tile's
corner become IR again before the loop (`materialize`), the extents become (argument, offset).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs
from tc_ir.layouts import Blocked, DotOperand, Mma, Shared
from tc_ir.ops import (
    AddPtrOp,
    BinaryOp,
    BlockArgument,
    BroadcastOp,
    CastOp,
    CmpOp,
    ConstantOp,
    ConvertLayoutOp,
    ExpandDimsOp,
    ForOp,
    Function,
    LoadOp,
    LocalAllocOp,
    MakeRangeOp,
    OpResult,
    SplatOp,
    TmaLoadOp,
    TmaStoreOp,
    Value,
)
from tc_ir.types import PointerType, ScalarType, TileType

from .ir_utils import constant_of, uses
from .shared_buffers import buffer_users

#: The extent of a dimension no mask bounds: no int32 coordinate reaches it.
UNBOUNDED = 2**31 - 1
#: The most dimensions a tensor map has (cuTensorMapEncodeTiled).
MAX_RANK = 5
#: Element types a tensor map can copy (the wgmma operand types).
ELEMENTS = ("f16", "bf16", "f32")

#: A linear form: SSA value -> coefficient, None -> the constant term.
Lin = dict[Value | None, int]


def _lin_add(a: Lin, b: Lin, scale: int = 1) -> Lin:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + scale * v
    return {k: v for k, v in out.items() if v != 0}


def _const(lin: Lin) -> int | None:
    """The value of a constant form, None when it has variables."""
    return lin.get(None, 0) if all(k is None for k in lin) else None


def scalar_lin(v: Value) -> Lin:
    """`v` (a scalar integer) as a linear form; what is not add/sub/mul by a constant is a variable."""
    if isinstance(v, OpResult):
        op = v.op
        if isinstance(op, ConstantOp) and isinstance(op.value, int) and not isinstance(op.value, bool):
            return {None: op.value} if op.value else {}
        if isinstance(op, BinaryOp) and op.kind in ("add", "sub", "mul"):
            a, b = scalar_lin(op.operands[0]), scalar_lin(op.operands[1])
            if op.kind == "add":
                return _lin_add(a, b)
            if op.kind == "sub":
                return _lin_add(a, b, -1)
            ca, cb = _const(a), _const(b)
            if ca is not None:
                return {k: ca * c for k, c in b.items() if ca * c}
            if cb is not None:
                return {k: cb * c for k, c in a.items() if cb * c}
    return {v: 1}


@attrs.frozen
class Index:
    """An integer tile whose element at index (i_0, ..., i_n) is base + i_dim (dim None: base)."""

    dim: int | None
    base: Lin


def index_tile(v: Value) -> Index | None:
    """`v` as an Index, None when it is not one (a sum over two dimensions, a product, ...)."""
    t = v.type
    if not isinstance(t, TileType):
        return Index(None, scalar_lin(v)) if isinstance(t, ScalarType) and t.is_int else None
    if not isinstance(v, OpResult):
        return None
    op = v.op
    if isinstance(op, MakeRangeOp):
        return Index(0, {None: op.start} if op.start else {})
    if isinstance(op, ConstantOp) and isinstance(op.value, int) and not isinstance(op.value, bool):
        return Index(None, {None: op.value} if op.value else {})
    if isinstance(op, (SplatOp, ConvertLayoutOp)):
        return index_tile(op.operands[0])
    if isinstance(op, ExpandDimsOp):
        x = index_tile(op.operands[0])
        if x is None or x.dim is None:
            return x
        return Index(x.dim + (1 if x.dim >= op.axis else 0), x.base)
    if isinstance(op, BroadcastOp):
        x = index_tile(op.operands[0])
        src = op.operands[0].type
        if x is not None and x.dim is not None and isinstance(src, TileType) and src.shape[x.dim] == 1:
            return Index(None, x.base)  # a dimension of size 1: its index is always 0
        return x
    if isinstance(op, BinaryOp) and op.kind in ("add", "sub"):
        a, b = index_tile(op.operands[0]), index_tile(op.operands[1])
        if a is None or b is None:
            return None
        if op.kind == "sub" and b.dim is not None:
            return None
        if a.dim is not None and b.dim is not None:
            return None  # two dimensions (or a coefficient of 2)
        return Index(a.dim if a.dim is not None else b.dim, _lin_add(a.base, b.base, -1 if op.kind == "sub" else 1))
    return None


def _terms(v: Value) -> list[Value]:
    """The summands of a tile of offsets (through its adds; each summand may be a broadcast)."""
    if isinstance(v, OpResult) and isinstance(v.op, BinaryOp) and v.op.kind == "add":
        return _terms(v.op.operands[0]) + _terms(v.op.operands[1])
    return [v]


@attrs.frozen
class Strided:
    """One summand of an offset tile: `index * stride` (stride None: 1; else an argument)."""

    index: Index
    stride: Value | None


def _broadcast_index(i: Index, src: object) -> Index:
    """`i`, an index of tile type `src`, after a broadcast: a dimension of size 1 there is uniform."""
    if i.dim is not None and isinstance(src, TileType) and src.shape[i.dim] == 1:
        return Index(None, i.base)  # a dimension of size 1: its index is always 0
    return i


def strided_term(v: Value) -> Strided | None:
    if isinstance(v, OpResult) and isinstance(v.op, BroadcastOp):
        s = strided_term(v.op.operands[0])
        if s is None:
            return None
        return Strided(_broadcast_index(s.index, v.op.operands[0].type), s.stride)
    if isinstance(v, OpResult) and isinstance(v.op, BinaryOp) and v.op.kind == "mul":
        for x, y in (v.op.operands, reversed(v.op.operands)):
            by = index_tile(y)
            i = index_tile(x)
            if by is None or i is None or by.dim is not None:
                continue
            if _const(by.base) == 1:
                return Strided(i, None)
            (arg, coef), *rest = list(by.base.items()) or [(None, 0)]
            if not rest and coef == 1 and arg is not None:
                if isinstance(arg, BlockArgument) and arg.block.parent is None:  # a kernel argument
                    return Strided(i, arg)
        return None
    i = index_tile(v)
    return Strided(i, None) if i is not None else None


def pointer_terms(v: Value) -> tuple[Value, list[Strided]] | None:
    """A tile of pointers as (scalar base pointer, summands of its offsets), None when it is not
    built from one scalar pointer by adding offset tiles.

    Sees through the ways a source writes the same tile: one `addptr` of a sum
    (`P + (i * ld + j)`) or a chain of them (`P + i * ld + j`, `(P + j) + i * ld`, where the
    partial pointer tile is broadcast before the next addition), and splats, broadcasts and layout
    conversions of pointer tiles. A summand added to a tile with a dimension of size 1 that is
    broadcast afterwards has a uniform index along that dimension, as for an offset broadcast
    before the addition."""
    t = v.type
    if not isinstance(t, TileType):
        return (v, []) if isinstance(t, PointerType) else None
    if not isinstance(v, OpResult):
        return None
    op = v.op
    if isinstance(op, (SplatOp, ConvertLayoutOp)):
        return pointer_terms(op.operands[0])
    if isinstance(op, BroadcastOp):
        inner = pointer_terms(op.operands[0])
        if inner is None:
            return None
        src = op.operands[0].type
        return inner[0], [Strided(_broadcast_index(s.index, src), s.stride) for s in inner[1]]
    if isinstance(op, AddPtrOp):
        inner = pointer_terms(op.operands[0])
        if inner is None or not isinstance(op.operands[1].type, TileType):
            return None  # a scalar offset of a tile of pointers: splat first by the frontend
        terms = list(inner[1])
        for x in _terms(op.operands[1]):
            s = strided_term(x)
            if s is None:
                return None
            terms.append(s)
        return inner[0], terms
    return None


@attrs.frozen
class TmaPlan:
    """How one load becomes TMA copies. Tile dimension `fast` is contiguous in memory and the
    other has stride `stride` (a kernel argument). `start[d]` is the coordinate of the tile's
    corner at the first iteration along tile dimension d, `advance[d]` what an iteration adds to
    it, `extent[d]` the tensor map's extent (argument index or -1, offset)."""

    load: LoadOp
    alloc: LocalAllocOp
    base_arg: int
    stride_arg: int
    fast: int
    start: tuple[Lin, Lin]
    advance: tuple[int, int]
    extent: tuple[tuple[int, int], tuple[int, int]]
    swizzle: int
    panel: int  # elements of one swizzle panel along the fast dimension (the box's inner extent)
    #: outer map dimensions (innermost first): (coordinate, stride argument), box 1, unbounded
    outer: tuple[tuple[Lin, int], ...] = ()

    @property
    def slow(self) -> int:
        return 1 - self.fast

    def attributes(self, descriptor: int, multicast: bool = False, half_descriptor: int = -1) -> dict[str, object]:
        """The tc.tma_load attributes of this plan's tensor map (map order: fast dimension first);
        `multicast`: a copy two CTAs may share (multicast_split), `half_descriptor` the map of
        half the rows that a split by rows copies through."""
        t = self.alloc.result.type
        assert isinstance(t, TileType)
        ext = (*self.extent[self.fast], *self.extent[self.slow], *((-1, UNBOUNDED) * len(self.outer)))
        stride = (self.stride_arg, 1, *(x for _, arg in self.outer for x in (arg, 1)))
        box = (self.panel, t.shape[self.slow], *(1,) * len(self.outer))
        extra: dict[str, object] = {"multicast": True} if multicast else {}
        if multicast and self.multicast_split == "rows":
            extra["half_descriptor"] = half_descriptor
        return {"descriptor": descriptor, "base": self.base_arg, "extents": ext, "stride": stride,
                "box": box, "swizzle": self.swizzle, **extra}

    @property
    def multicast_split(self) -> str | None:
        """How two CTAs copy half of the tile each (multicast): "panels", half of its swizzle
        panels each where their number is even; else "rows", half of its rows each (through a
        second tensor map whose box has half the rows) where each half is a whole number of
        swizzle atoms (8 rows) and so lands where the whole tile's copy puts those rows; None
        where neither fits. A copy that is not shared stays the whole tile's either way."""
        t = self.alloc.result.type
        assert isinstance(t, TileType)
        if -(-t.shape[self.fast] // self.panel) % 2 == 0:
            return "panels"
        return "rows" if t.shape[self.slow] % 16 == 0 else None

    @property
    def can_halve(self) -> bool:
        """Whether two CTAs can copy half of the tile each (multicast_split)."""
        return self.multicast_split is not None


def tensor_map_count(f: Function) -> int:
    """How many tensor maps the TMA copies of `f` use (their descriptors are 0 .. count - 1: a
    multicast copy's map of half the rows among them)."""
    return max((max(int(op.descriptor), int(op.half_descriptor) if isinstance(op, TmaLoadOp) else -1) + 1
                for op in f.walk() if isinstance(op, (TmaLoadOp, TmaStoreOp))), default=0)


def _arg_index(f: Function, v: Value) -> int | None:
    return f.args.index(v) if isinstance(v, BlockArgument) and v.block is f.body else None  # type: ignore[arg-type]


def _stride_ok(f: Function, arg: int, element_bytes: int) -> bool:
    """Whether the specialization makes argument `arg`, as a stride in elements, a multiple of 16
    bytes."""
    return arg < len(f.arg_attrs) and (int(f.arg_attrs[arg].get("multiple_of", 1)) * element_bytes) % 16 == 0


def _int32_lin(v: Value) -> Lin | None:
    """`v` (an integer scalar) as a linear form over int32 values, through a sign extension from
    int32; None for a wider value (a TMA coordinate is an int32)."""
    if isinstance(v, OpResult) and isinstance(v.op, CastOp) and v.op.kind == "sext":
        v = v.op.operands[0]
    t = v.type
    return scalar_lin(v) if isinstance(t, ScalarType) and t.name == "i32" else None


def batch_offset(f: Function, off: Value) -> tuple[Lin, int] | None:
    """A scalar offset `x * s` (s an integer kernel argument) as (x's int32 form, s's index)."""
    if not (isinstance(off, OpResult) and isinstance(off.op, BinaryOp) and off.op.kind == "mul"):
        return None
    for x, s in (off.op.operands, reversed(off.op.operands)):
        arg = _arg_index(f, s)
        lin = _int32_lin(x)
        if arg is not None and lin is not None and isinstance(s.type, ScalarType) and s.type.is_int:
            return lin, arg
    return None


def _swizzle(t: TileType) -> tuple[int, int] | None:
    """(swizzle bytes, panel elements) when the buffer's layout is a hardware swizzle TMA writes."""
    lay = t.layout
    e = t.element
    if not isinstance(lay, Shared) or not isinstance(e, ScalarType) or e.name not in ELEMENTS or t.rank != 2:
        return None
    eb = e.bytes
    if lay.vec * eb != 16 or lay.per_phase * lay.max_phase != 8 or lay.max_phase not in (2, 4, 8):
        return None
    width = 16 * lay.max_phase
    panel = width // eb
    fast = t.shape[lay.order[0]]
    # (a partial last panel, as dot_layouts.shared_layout makes for wgmma operands, is copied whole)
    if (fast % panel and fast < panel) or t.shape[lay.order[1]] > 256 or t.shape[lay.order[1]] % 8:
        return None
    return width, panel


def _feeds_wgmma(alloc: LocalAllocOp, users: dict[Value, list[object]]) -> bool:
    from tc_ir.ops import LocalLoadOp, LocalStoreOp

    found = False
    for u in buffer_users(alloc, users):  # type: ignore[arg-type]
        if isinstance(u, LocalLoadOp):
            lay = u.result.type.layout  # type: ignore[union-attr]
            restaged = users.get(u.result, [])
            if isinstance(lay, Blocked) and restaged and all(isinstance(r, LocalStoreOp) for r in restaged):
                found = True  # a tf32 operand restaged K-major (k_major_operands.restage)
                continue
            if not (isinstance(lay, DotOperand) and isinstance(lay.parent, Mma) and lay.parent.version == 3):
                return False
            found = True
    return found


def _mask_bounds(v: Value) -> list[tuple[Index, Lin]] | None:
    """The mask as conjunction of `index < bound` (bound a uniform form), None when it is not."""
    if isinstance(v, OpResult) and isinstance(v.op, (BroadcastOp, ConvertLayoutOp)):
        return _mask_bounds(v.op.operands[0])
    if isinstance(v, OpResult) and isinstance(v.op, BinaryOp) and v.op.kind == "and":
        a, b = _mask_bounds(v.op.operands[0]), _mask_bounds(v.op.operands[1])
        return None if a is None or b is None else a + b
    if isinstance(v, OpResult) and isinstance(v.op, CmpOp) and v.op.predicate in ("slt", "sgt", "sle", "sge"):
        x, y = v.op.operands
        if v.op.predicate in ("sgt", "sge"):
            x, y = y, x
        i, lim = index_tile(x), index_tile(y)
        if i is None or lim is None or i.dim is None or lim.dim is not None:
            return None
        bound = lim.base if v.op.predicate in ("slt", "sgt") else _lin_add(lim.base, {None: 1})
        return [(i, bound)]
    return None


@attrs.frozen
class MatrixTile:
    """A 2-D tile of pointers `P + (r0 + i) * ld + (c0 + j)` (up to a transposition) into a matrix
    argument P that the specialization makes 16-byte aligned, with a row stride `ld` (an argument)
    that is a multiple of 16 bytes: what a tensor map can describe. `fast` is the tile dimension
    with stride 1, `start` the corner's coordinates per tile dimension, `outer` the outer map
    dimensions of base offsets `x * s` (coordinate, stride argument), innermost first."""

    base_arg: int
    stride_arg: int
    fast: int
    start: tuple[Lin, Lin]
    outer: tuple[tuple[Lin, int], ...]
    element_bytes: int


def matrix_tile(f: Function, ptr: Value) -> MatrixTile | None:
    """`ptr` (a 2-D tile of pointers) as a MatrixTile, None when a tensor map cannot describe it."""
    split = pointer_terms(ptr)
    if split is None:
        return None
    base, terms = split
    outer: list[tuple[Lin, int]] = []
    while isinstance(base, OpResult) and isinstance(base.op, AddPtrOp):  # P + x * s: an outer dimension
        found = batch_offset(f, base.op.operands[1])
        if found is None:
            return None
        outer.insert(0, found)
        base = base.op.operands[0]
    base_arg = _arg_index(f, base)
    if base_arg is None or not isinstance(base.type, PointerType) or not isinstance(base.type.pointee, ScalarType):
        return None
    eb = base.type.pointee.bytes
    if base_arg >= len(f.arg_attrs) or int(f.arg_attrs[base_arg].get("aligned", 1)) % 16:
        return None
    start: list[Lin] = [{}, {}]
    stride: Value | None = None
    fast: int | None = None
    seen: set[int] = set()
    for s in terms:
        d = s.index.dim
        if d is None or d in seen:
            return None  # a uniform offset inside the tile's offsets: not split into coordinates
        seen.add(d)
        if s.stride is None:
            fast = d  # the contiguous dimension has stride 1, the other an argument
        else:
            stride = s.stride
        start[d] = s.index.base
    if seen != {0, 1} or stride is None or fast is None:
        return None
    stride_arg = _arg_index(f, stride)
    assert stride_arg is not None
    if not all(_stride_ok(f, a, eb) for a in (stride_arg, *(arg for _, arg in outer))) or len(outer) > MAX_RANK - 2:
        return None
    return MatrixTile(base_arg, stride_arg, fast, (start[0], start[1]), tuple(outer), eb)


def plan_tma_load(f: Function, loop: ForOp, load: LoadOp, alloc: LocalAllocOp) -> TmaPlan | None:
    """The TMA plan of `load` (one of the pipeliner's candidates in `loop`), None when its pattern
    or its arguments' specialization rule TMA out."""
    body = loop.body
    term = body.terminator
    assert term is not None
    pt = load.operands[0].type
    at = alloc.result.type
    if not isinstance(pt, TileType) or pt.rank != 2 or not isinstance(at, TileType):
        return None
    sw = _swizzle(at)
    if sw is None or not _feeds_wgmma(alloc, uses(f.body)):  # type: ignore[arg-type]
        return None
    assert isinstance(at.layout, Shared)
    fast = at.layout.order[0]
    # the pointer: a loop-carried P + offsets, advanced by a uniform step
    ptr = load.operands[0]
    if not isinstance(ptr, BlockArgument) or ptr.block is not body or ptr.index == 0:
        return None
    init = loop.operands[3 + ptr.index - 1]
    step_v = term.operands[ptr.index - 1]
    if not (isinstance(step_v, OpResult) and isinstance(step_v.op, AddPtrOp) and step_v.op.operands[0] is ptr):
        return None
    mt = matrix_tile(f, init)
    if mt is None or mt.fast != fast:
        return None  # (the contiguous dimension must be the buffer's)
    start, stride, outer = list(mt.start), f.args[mt.stride_arg], list(mt.outer)
    # the advance: a uniform step of whole columns (constant) or rows (constant * stride)
    step = index_tile(step_v.op.operands[1])
    if step is None or step.dim is not None:
        return None
    advance = [0, 0]
    for k, c in step.base.items():
        if k is None:
            advance[fast] += c
        elif k is stride:
            advance[1 - fast] += c
        else:
            return None
    # the mask: per dimension, index < bound, the same condition as coordinate < extent
    lb, st = constant_of(loop.operands[0]), constant_of(loop.operands[2])
    iv = body.args[0]

    def at_first_iteration(d: int, bound: Lin) -> Lin | None:
        # coordinate(n) = start + advance * n + i and bound(iv = lb + st * n) - index base
        if not isinstance(lb, int) or not isinstance(st, int) or bound.get(iv, 0) * st + advance[d]:
            return None
        return _lin_add({k: c for k, c in bound.items() if k is not iv}, {None: bound.get(iv, 0) * lb})

    mask = load.operands[1] if len(load.operands) > 1 else None
    extent = mask_extents(f, mask, mt.start, at_first_iteration)
    if extent is None:
        return None
    return TmaPlan(load, alloc, mt.base_arg, mt.stride_arg, fast, (start[0], start[1]), (advance[0], advance[1]),
                   (extent[0], extent[1]), sw[0], sw[1], tuple(outer))


def mask_extents(f: Function, mask: Value | None, start: tuple[Lin, Lin],
                 fixed: Callable[[int, Lin], Lin | None] = lambda d, bound: bound) -> list[tuple[int, int]] | None:
    """The map extents (argument index or -1, offset) per tile dimension of a mask `index < bound`
    per dimension (unmasked: UNBOUNDED), None when the mask is not of that form. The coordinate
    of index i along d is start[d] + i - index base, so the extent is bound - base + start;
    `fixed(d, bound)` gives the bound as it holds for every copy (None: it does not)."""
    extent: list[tuple[int, int]] = [(-1, UNBOUNDED), (-1, UNBOUNDED)]
    bounds = _mask_bounds(mask) if mask is not None else []
    if bounds is None:
        return None
    done: set[int] = set()
    for idx, bound in bounds:
        d = idx.dim
        assert d is not None
        held = fixed(d, bound)
        if d in done or held is None:
            return None
        done.add(d)
        ext = _extent_of(f, _lin_add(_lin_add(held, idx.base, -1), start[d]))
        if ext is None:
            return None
        extent[d] = ext
    return extent


def _extent_of(f: Function, lin: Lin) -> tuple[int, int] | None:
    """A form the runtime can evaluate from the arguments: argument + constant, or a constant."""
    offset = lin.get(None, 0)
    vars_ = [k for k in lin if k is not None]
    if not vars_:
        return (-1, offset) if offset > 0 else None
    if len(vars_) == 1 and lin[vars_[0]] == 1:
        i = _arg_index(f, vars_[0])  # type: ignore[arg-type]
        t = vars_[0].type  # type: ignore[union-attr]
        if i is not None and isinstance(t, ScalarType) and t.name == "i32":
            return (i, offset)
    return None


def defined_before(v: Value, loop: ForOp) -> bool:
    """Whether `v` is available before `loop` (a kernel argument or a value of an enclosing block
    computed before it)."""
    if isinstance(v, BlockArgument):
        return v.block is not loop.body and not _inside(v.block.parent, loop)
    assert isinstance(v, OpResult)
    return not _inside(v.op, loop)


def _inside(op: object, loop: ForOp) -> bool:
    from tc_ir.ops import Operation

    while isinstance(op, Operation):
        if op is loop:
            return True
        blk = op.parent
        op = blk.parent if blk is not None else None
    return False


def starts_available(plan: TmaPlan, loop: ForOp) -> bool:
    """Whether the corner coordinates can be computed before the loop."""
    lins = [*plan.start, *(lin for lin, _ in plan.outer)]
    return all(k is None or defined_before(k, loop) for lin in lins for k in lin)


def plans_for(f: Function, loop: ForOp, pairs: Mapping[LoadOp, LocalAllocOp] | list[tuple[LoadOp, LocalAllocOp]]
              ) -> list[TmaPlan] | None:
    """A plan for every pair, or None if one of them cannot use TMA (the loop then keeps cp.async)."""
    items = list(pairs.items()) if isinstance(pairs, Mapping) else list(pairs)
    out = []
    for ld, alloc in items:
        p = plan_tma_load(f, loop, ld, alloc)
        if p is None or not starts_available(p, loop):
            return None
        out.append(p)
    return out or None
