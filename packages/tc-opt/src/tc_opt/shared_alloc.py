"""Shared-memory allocation: every op that exchanges data through shared memory gets an offset
in the kernel's one dynamic shared buffer. Scratch buffers (converts, trans, reshape, reductions
across warps, the broadcast of a scalar atomic's old value) live for their op only; dot operands
staged in shared memory live until their last use (to the end of the loop using them when that
loop does not contain the definition).
Offsets come from first-fit over lifetimes; `module.attributes["shared_bytes"]` gets the total."""

from __future__ import annotations

import math

import attrs
from tc_ir.layouts import Blocked, DotOperand, Mma, Shared, Slice
from tc_ir.ops import (
    AtomicCASOp,
    AtomicRMWOp,
    Block,
    ConvertLayoutOp,
    ForOp,
    Function,
    IfOp,
    LocalAllocOp,
    Module,
    Operation,
    ReduceOp,
    ReshapeOp,
    TmaStoreOp,
    TransOp,
    WhileOp,
)
from tc_ir.types import PointerType, TileType

from .pass_manager import Pass
from .shared_buffers import buffer_bytes, buffer_users
from .smem_banks import wavefronts
from .transpose_layout import is_register_trans

ALIGN = 16
#: Bytes of padding after each row of a tile exchanged through shared memory (exchange_strides).
EXCHANGE_ROW_PAD = 16
#: The slot through which thread 0 of a scalar atomic broadcasts the old value.
SCALAR_SLOT_BYTES = 8
#: Swizzled tiles start on 1024 bytes: the hardware swizzle of wgmma operands (and of TMA) takes
#: the row phase from address bits 7..9, which the tile's own swizzle assumes start at 0.
SWIZZLED_ALIGN = 1024


def alignment(op: Operation) -> int:
    """The byte alignment of `op`'s buffer."""
    t = op.results[0].type if op.results else None
    if isinstance(op, LocalAllocOp) and isinstance(t, TileType) and isinstance(t.layout, Shared):
        if t.layout.vec > 1 and t.layout.max_phase > 1:
            return SWIZZLED_ALIGN
    if isinstance(op, TmaStoreOp):
        return SWIZZLED_ALIGN  # its panels are 128-byte swizzled
    return ALIGN


def storage_bytes(t: TileType) -> int:
    """Bytes one element takes in shared memory (i1 as a byte, pointers as 8)."""
    e = t.element
    return 8 if isinstance(e, PointerType) else e.bytes


def exchange_strides(shape: tuple[int, ...], element_bytes: int) -> tuple[int, ...]:
    """Element strides of a tile exchanged through shared memory by a layout conversion or a
    transposition: row-major, and when there are several rows (the last dimension) each a whole
    number of 128-byte bank cycles long, each padded by 16 bytes. Threads that write the same
    columns of different rows (a tensor-core accumulator, whose lanes hold 8 rows by 4 column
    pairs) then reach different banks instead of one bank group; 16 bytes keep every row as
    aligned as before, for vector accesses, and cost at most an eighth more memory."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    if len(shape) >= 2 and math.prod(shape[:-1]) > 1 and shape[-1] * element_bytes % 128 == 0:
        strides[-2] = shape[-1] + max(1, EXCHANGE_ROW_PAD // element_bytes)
        for i in range(len(shape) - 3, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
    return tuple(strides)


def exchange_bytes(shape: tuple[int, ...], element_bytes: int) -> int:
    """Shared bytes of a tile laid out with `exchange_strides`."""
    if not shape:
        return element_bytes
    return shape[0] * exchange_strides(shape, element_bytes)[0] * element_bytes


def padded_strides(shape: tuple[int, ...], pad: int) -> tuple[int, ...]:
    """Row-major element strides with `pad` elements after each row (the last dimension)."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * (shape[i + 1] + (pad if i == len(shape) - 2 else 0))
    return tuple(strides)


def trans_exchange_strides(src: TileType, dst: TileType, perm: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides at which a transposition through shared memory writes its source tile
    (row-major in the source's shape; the result is read back at the permuted strides).

    The writes follow the source layout and the reads the result layout, contiguous along
    different dimensions: a row padding that suits one side (16 bytes keeps 16-byte vector
    writes) can put every lane of the other in one bank (a warp reading a column of rows 8 apart
    whose stride is a multiple of 128 bytes: 8- or 16-way conflicts). So the padding, none or
    1..16 bytes, is the one with the fewest wavefronts of both sides together in the
    smem_banks model (the smaller on ties). Layouts other than Blocked keep `exchange_strides`."""
    eb = storage_bytes(src)
    if not (isinstance(src.layout, Blocked) and isinstance(dst.layout, Blocked)) or src.rank < 2:
        return exchange_strides(src.shape, eb)
    if math.prod(src.shape[:-1]) <= 1 or dst.numel <= 1:
        return exchange_strides(src.shape, eb)
    best: tuple[int, int] | None = None
    best_strides = exchange_strides(src.shape, eb)
    for pad in (0, 1, 2, 4, 8, 16):
        if pad * eb > EXCHANGE_ROW_PAD:
            break
        strides = padded_strides(src.shape, pad)
        read = tuple(strides[p] for p in perm)
        cost = wavefronts(src.shape, src.layout, strides, eb) + wavefronts(dst.shape, dst.layout, read, eb)
        if best is None or (cost, pad) < best:
            best, best_strides = (cost, pad), strides
    return best_strides


def exchange_shape(op: ConvertLayoutOp) -> tuple[int, ...]:
    """The shape of the part of its tile a layout conversion exchanges at once: the whole tile, or
    one round of `columns` of its last dimension (tc_opt.exchange_rounds)."""
    t = op.result.type
    assert isinstance(t, TileType)
    return (*t.shape[:-1], op.columns) if op.columns else t.shape


def trans_exchange_bytes(src: TileType, dst: TileType, perm: tuple[int, ...]) -> int:
    """Shared bytes of a transposition's buffer (`trans_exchange_strides`)."""
    return src.shape[0] * trans_exchange_strides(src, dst, perm)[0] * storage_bytes(src)


def scratch_bytes(op: Operation) -> int:
    """Shared bytes `op` needs (0 when it works in registers only)."""
    if isinstance(op, (ConvertLayoutOp, TransOp, ReshapeOp)):
        src, dst = op.operands[0].type, op.result.type
        if isinstance(src, TileType) and isinstance(dst, TileType) and dst.numel > 1:
            if isinstance(op, ConvertLayoutOp) and src.layout == dst.layout:
                return 0
            if isinstance(op, TransOp):
                if is_register_trans(src, dst, op.perm):
                    return 0
                return trans_exchange_bytes(src, dst, op.perm)
            if isinstance(op, ReshapeOp):  # (read back by linear index: unpadded)
                return dst.numel * storage_bytes(dst)
            return exchange_bytes(exchange_shape(op), storage_bytes(src))  # written in the source's shape
        return 0
    if isinstance(op, ReduceOp):
        src = op.operands[0].type
        assert isinstance(src, TileType)
        lay = src.layout
        warps = 1
        root = lay
        dims = list(range(src.rank))
        while isinstance(root, Slice):
            dims.insert(root.dim, -1)
            root = root.parent
        axis_in_root = [i for i, d in enumerate(dims) if d != -1][op.axis]
        if isinstance(root, Blocked):
            warps = root.warps_per_cta[axis_in_root]
        elif isinstance(root, Mma):
            warps = root.warps_along(axis_in_root)
        if warps <= 1:
            return 0
        res = op.result.type
        numel = res.numel if isinstance(res, TileType) else 1
        return warps * numel * max(4, storage_bytes(src))
    if isinstance(op, TmaStoreOp):
        from .tma_store import scratch_bytes as tma_store_bytes

        return tma_store_bytes(op)
    if isinstance(op, (AtomicRMWOp, AtomicCASOp)) and op.results and not isinstance(op.result.type, TileType):
        return SCALAR_SLOT_BYTES  # thread 0 broadcasts the old value of a scalar atomic
    return 0


@attrs.define
class Allocation:
    """Where `allocate` put the buffers: each op's byte offset in the kernel's one shared buffer, and
    that buffer's `size` in bytes."""

    offsets: dict[Operation, int] = attrs.field(factory=dict)
    size: int = 0


def _number(f: Function) -> tuple[dict[Operation, int], dict[Operation, int]]:
    """Pre-order index of every op, and the index where each loop op ends."""
    index: dict[Operation, int] = {}
    end: dict[Operation, int] = {}

    def visit(op: Operation) -> None:
        index[op] = len(index)
        for r in op.regions:
            for o in r.ops:
                visit(o)
        end[op] = len(index)

    for op in f.body.ops:
        visit(op)
    return index, end


def loops_of(op: Operation) -> list[Operation]:
    """The loops (for and while ops) around `op`, innermost first."""
    out: list[Operation] = []
    blk = op.parent
    while blk is not None and blk.parent is not None:
        p = blk.parent
        if isinstance(p, (ForOp, WhileOp)):
            out.append(p)
        blk = p.parent
    return out


def _branches(op: Operation) -> dict[int, Block]:
    """The if ops around `op` (by id) that run at most once (in no loop), each with the branch
    of it that holds `op`."""
    out: dict[int, Block] = {}
    blk = op.parent
    while blk is not None and blk.parent is not None:
        if isinstance(blk.parent, IfOp) and not loops_of(blk.parent):
            out[id(blk.parent)] = blk
        blk = blk.parent.parent
    return out


def exclusive(a: Operation, b: Operation) -> bool:
    """Whether `a` and `b` lie in different branches of one if op that runs at most once, so that
    no program runs both (an if's condition is a scalar, the same for all the program's threads):
    their shared memory may overlap however long either one's lives (tc_opt.overlap_epilogue's
    two versions of a loop over the programs each have an epilogue whose copies may read its
    buffers until the kernel's exit). Not in a loop: its iterations may take both branches, and
    bulk copies issued in one may still read their buffer in the next."""
    around = _branches(b)
    return any(k in around and around[k] is not blk for k, blk in _branches(a).items())


def allocate(f: Function) -> Allocation:
    """Place the shared-memory buffer of every op of `f` that needs one, first fit over their lifetimes."""
    index, end = _number(f)
    users: dict[object, list[Operation]] = {}
    for op in f.walk():
        for v in op.operands:
            users.setdefault(v, []).append(op)
    requests: list[tuple[int, int, int, Operation]] = []
    for op in f.walk():
        size = scratch_bytes(op) or buffer_bytes(op)
        if size == 0:
            continue
        start = index[op]
        stop = start
        t = op.results[0].type if op.results else None
        if isinstance(op, TmaStoreOp) and loops_of(op):
            # (in a loop its copies may still read the buffers in the next iteration and until the
            # kernel's exit: tc_nvptx.lower_tma waits for them only before reusing them and there)
            start, stop = index[loops_of(op)[-1]], len(index)
        elif isinstance(t, TileType) and isinstance(t.layout, (DotOperand, Shared)):
            def_loops = set(map(id, loops_of(op)))
            for u in buffer_users(op, users) if isinstance(op, LocalAllocOp) else users.get(op.results[0], []):  # type: ignore[arg-type]
                stop = max(stop, index[u])
                for loop in loops_of(u):
                    if id(loop) not in def_loops:
                        stop = max(stop, end[loop])
        requests.append((start, stop, (size + ALIGN - 1) // ALIGN * ALIGN, op))
    placed: list[tuple[int, int, int, int, Operation]] = []  # start, stop, offset, size, op
    alloc = Allocation()
    for start, stop, size, op in sorted(requests, key=lambda r: (r[0], -r[2])):
        live = sorted((o, o + s) for a, b, o, s, other in placed
                      if not (b < start or stop < a) and not exclusive(op, other))
        align = alignment(op)
        offset = 0
        for lo, hi in live:
            if offset + size <= lo:
                break
            offset = -(-max(offset, hi) // align) * align
        placed.append((start, stop, offset, size, op))
        alloc.offsets[op] = offset
        alloc.size = max(alloc.size, offset + size)
    return alloc


def runs_first_in_shared_memory(f: Function, alloc: Allocation, op: Operation) -> bool:
    """Whether `op` is the first op of `f` in program order with shared memory of its own and in
    no loop: no thread can have used shared memory before it, so writing its buffer needs no
    barrier first (one for what it wrote is still needed before others read it)."""
    if op not in alloc.offsets or loops_of(op):
        return False
    for o in f.walk():
        if o in alloc.offsets:
            return o is op
    return False


class AllocateShared(Pass):
    """Give every op that exchanges data through shared memory its offset in the kernel's one
    dynamic buffer (first fit over lifetimes) and record the total bytes."""

    name = "allocate-shared"

    def run(self, module: Module) -> None:
        """Allocate each function's shared memory and record the largest total in `shared_bytes`."""
        total = 0
        for f in module.functions:
            total = max(total, allocate(f).size)
        module.attributes["shared_bytes"] = total
