"""The tile IR: values, blocks, operations, functions and modules.

One attrs class per operation. Operands are SSA `Value`s in `operands` (optional operands come last
and are simply absent); the op's own attributes are attrs fields declared `kw_only` on the subclass;
results are `OpResult`s with types. Control flow is structured: `ForOp`, `IfOp` and `WhileOp` own
blocks (`regions`) that end in `YieldOp` / `ConditionOp`. Every op keeps the source `loc` it came
from. There are no use lists: passes that need uses walk the function (kernels are small).

Generic construction (used by the IR parser and by passes that clone): ``Cls.create(operands,
result_types, attributes, regions, loc)``. Every op class is registered in `OPS` by its `NAME`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, TypeVar

import attrs
from tc_lang.diagnostics import Location

from .types import IRType

# ------------------------------------------------------------------------------ values and blocks


class Value:
    """An SSA value: the result of an op or an argument of a block."""

    __slots__ = ("type", "name_hint")

    def __init__(self, type: IRType, name_hint: str | None = None) -> None:
        self.type = type
        self.name_hint = name_hint

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name_hint or ''}: {self.type}>"


class OpResult(Value):
    __slots__ = ("op", "index")

    def __init__(self, type: IRType, op: Operation, index: int, name_hint: str | None = None) -> None:
        super().__init__(type, name_hint)
        self.op = op
        self.index = index


class BlockArgument(Value):
    __slots__ = ("block", "index")

    def __init__(self, type: IRType, block: Block, index: int, name_hint: str | None = None) -> None:
        super().__init__(type, name_hint)
        self.block = block
        self.index = index


class Block:
    """A list of ops with typed arguments. In structured control flow each region is one block."""

    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types: Sequence[IRType] = (), arg_names: Sequence[str | None] = ()) -> None:
        names = list(arg_names) + [None] * (len(arg_types) - len(arg_names))
        self.args: list[BlockArgument] = [
            BlockArgument(t, self, i, n) for i, (t, n) in enumerate(zip(arg_types, names))
        ]
        self.ops: list[Operation] = []
        self.parent: Operation | None = None

    def add_arg(self, type: IRType, name_hint: str | None = None) -> BlockArgument:
        """Append a new argument of `type` to the block and return it."""
        arg = BlockArgument(type, self, len(self.args), name_hint)
        self.args.append(arg)
        return arg

    def append(self, op: Operation) -> Operation:
        """Add `op` at the end of the block, which becomes its parent; returns `op`."""
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        """Add `op` at position `index` of the block, which becomes its parent; returns `op`."""
        op.parent = self
        self.ops.insert(index, op)
        return op

    def remove(self, op: Operation) -> None:
        """Take `op` out of the block (uses of its results are the caller's to replace: there are no use lists)."""
        self.ops.remove(op)
        op.parent = None

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops else None

    def walk(self) -> Iterator[Operation]:
        """Every op in this block and, depth first, in the blocks it owns (pre-order)."""
        for op in list(self.ops):
            yield op
            for region in op.regions:
                yield from region.walk()


# ------------------------------------------------------------------------------------ operations

OPS: dict[str, type[Operation]] = {}

_O = TypeVar("_O", bound="Operation")


def register(cls: type[_O]) -> type[_O]:
    """Class decorator: make an op known to the generic parser by its NAME."""
    assert cls.NAME and cls.NAME not in OPS, cls
    OPS[cls.NAME] = cls
    return cls


@attrs.define(eq=False, kw_only=True)
class Operation:
    """Base of all ops. Subclasses set NAME and add attribute fields (kw_only)."""

    NAME: ClassVar[str] = ""
    #: Ops with effects besides their results (memory, barriers, control flow terminators).
    HAS_SIDE_EFFECTS: ClassVar[bool] = False
    #: Attributes printed even at their default value (choices the text must always show).
    ALWAYS_PRINTED: ClassVar[frozenset[str]] = frozenset()

    operands: list[Value] = attrs.field(factory=list)
    results: list[OpResult] = attrs.field(factory=list)
    regions: list[Block] = attrs.field(factory=list)
    loc: Location | None = None
    parent: Block | None = attrs.field(default=None, repr=False)

    @classmethod
    def create(
        cls: type[_O],
        operands: Sequence[Value],
        result_types: Sequence[IRType],
        attributes: dict[str, Any] | None = None,
        regions: Sequence[Block] = (),
        loc: Location | None = None,
    ) -> _O:
        op = cls(operands=list(operands), regions=list(regions), loc=loc, **(attributes or {}))
        op.results = [OpResult(t, op, i) for i, t in enumerate(result_types)]
        for r in op.regions:
            r.parent = op
        return op

    @classmethod
    def attribute_names(cls) -> tuple[str, ...]:
        """The op's own attributes (fields beyond the base), in declaration order."""
        base = {f.name for f in attrs.fields(Operation)}
        return tuple(f.name for f in attrs.fields(cls) if f.name not in base)

    def attributes(self) -> dict[str, Any]:
        """The op's own attributes by name, with their current values."""
        return {n: getattr(self, n) for n in self.attribute_names()}

    @property
    def result(self) -> OpResult:
        """The single result (ops with one result)."""
        assert len(self.results) == 1, f"{self.NAME} has {len(self.results)} results"
        return self.results[0]

    @property
    def type(self) -> IRType:
        return self.result.type

    def walk(self) -> Iterator[Operation]:
        """This op and, depth first, every op in the blocks it owns (pre-order)."""
        yield self
        for r in self.regions:
            yield from r.walk()


# --- constants, ids, ranges ------------------------------------------------------------------


@register
@attrs.define(eq=False, kw_only=True)
class ConstantOp(Operation):
    """A scalar constant, or a tile filled with it (result type says which)."""

    NAME = "tc.constant"
    value: int | float | bool


@register
@attrs.define(eq=False, kw_only=True)
class UndefOp(Operation):
    """A value of the result type with unspecified contents, for a place that is never read: the
    first accumulator of a loop whose first dot is told not to read it (tc_opt.accumulator_init),
    so that no instruction writes those registers before the tensor cores do."""

    NAME = "tc.undef"


@register
@attrs.define(eq=False, kw_only=True)
class ProgramIdOp(Operation):
    """The program's index along `axis` (0..2) of the launch grid: i32."""

    NAME = "tc.program_id"
    axis: int


@register
@attrs.define(eq=False, kw_only=True)
class NumProgramsOp(Operation):
    """The grid size along `axis`: i32."""

    NAME = "tc.num_programs"
    axis: int


@register
@attrs.define(eq=False, kw_only=True)
class GridDimOp(Operation):
    """The extent along `axis` of the program grid a persistent kernel (tc_opt.warp_specialize)
    was asked to run: its CTAs, as many as fit on the GPU at once, step through those programs.
    The runtime passes the extents as hidden parameters: i32."""

    NAME = "tc.grid_dim"
    axis: int


@register
@attrs.define(eq=False, kw_only=True)
class WorkspaceOp(Operation):
    """A stream-K kernel's workspace (tc_opt.stream_k), which the runtime allocates and passes as
    hidden parameters after the grid's: `part` "partials" (slots of one partial accumulator tile,
    one per program shared by stream-K) or "flags" (one i32 per slot, 0 between launches). The
    result is a scalar pointer."""

    NAME = "tc.workspace"
    part: str


@register
@attrs.define(eq=False, kw_only=True)
class PartialStoreOp(Operation):
    """operands: partials (scalar pointer), slot (i32), value (tile). Stores a partial sum into
    slot `slot` of a stream-K workspace (tc_opt.stream_k; a slot holds one tile) in the order of
    its threads' registers rather than of the tile's rows, so that every access is a coalesced
    vector: register chunk c of thread t lands at chunk c * threads + t. Only a PartialAddOp of
    the same tile type (the same layout) reads it back."""

    NAME = "tc.partial_store"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class PartialAddOp(Operation):
    """operands: partials (scalar pointer), slot (i32), acc (tile) -> acc plus the partial sum a
    PartialStoreOp of the same tile type left in slot `slot` (see there)."""

    NAME = "tc.partial_add"
    HAS_SIDE_EFFECTS = True  # (a read that must stay after the wait for the partial sum)


@register
@attrs.define(eq=False, kw_only=True)
class MakeRangeOp(Operation):
    """tile<(end-start) x i32> holding start, start+1, ..., end-1."""

    NAME = "tc.make_range"
    start: int
    end: int


# --- shape ops ---------------------------------------------------------------------------------


@register
@attrs.define(eq=False, kw_only=True)
class SplatOp(Operation):
    """Scalar -> tile of the result's shape."""

    NAME = "tc.splat"


@register
@attrs.define(eq=False, kw_only=True)
class BroadcastOp(Operation):
    """Tile -> tile of equal rank where size-1 dimensions are stretched."""

    NAME = "tc.broadcast"


@register
@attrs.define(eq=False, kw_only=True)
class ExpandDimsOp(Operation):
    """Insert a dimension of size 1 at `axis`."""

    NAME = "tc.expand_dims"
    axis: int


@register
@attrs.define(eq=False, kw_only=True)
class ReshapeOp(Operation):
    """Same elements in row-major order, another shape (or a one-element tile to a scalar)."""

    NAME = "tc.reshape"


@register
@attrs.define(eq=False, kw_only=True)
class TransOp(Operation):
    """Permute dimensions: result dim i is source dim perm[i]."""

    NAME = "tc.trans"
    perm: tuple[int, ...] = attrs.field(converter=tuple)


# --- element-wise -------------------------------------------------------------------------------

INT_BINARY = frozenset(
    "add sub mul sdiv udiv srem urem and or xor shl ashr lshr smax smin umax umin".split()
)
FLOAT_BINARY = frozenset("fadd fsub fmul fdiv frem fmax fmin".split())
INT_PREDICATES = frozenset("eq ne slt sle sgt sge ult ule ugt uge".split())
FLOAT_PREDICATES = frozenset("oeq one olt ole ogt oge ueq une ult_f ule_f ugt_f uge_f ord uno".split())
CAST_KINDS = frozenset(
    "sext zext trunc fpext fptrunc sitofp uitofp fptosi fptoui bitcast ptrtoint inttoptr".split()
)
UNARY_KINDS = frozenset(
    "neg fneg not exp log sqrt rsqrt fabs iabs sin cos exp2 log2 floor ceil".split()
)


@register
@attrs.define(eq=False, kw_only=True)
class BinaryOp(Operation):
    """Element-wise binary arithmetic on equal types. Integer kinds name their signedness
    (sdiv/udiv, srem/urem, ashr/lshr, smax/umax); float kinds start with f. On i1, and/or/xor
    are the logical operators."""

    NAME = "tc.binary"
    kind: str


@register
@attrs.define(eq=False, kw_only=True)
class CmpOp(Operation):
    """Element-wise comparison -> i1 (tile of i1). Integer predicates eq ne slt.. ult..; float
    predicates oeq one olt ole ogt oge (ordered) and une (unordered not-equal)."""

    NAME = "tc.cmp"
    predicate: str


@register
@attrs.define(eq=False, kw_only=True)
class CastOp(Operation):
    """Element-wise conversion to the result type's element: sext zext trunc fpext fptrunc
    sitofp uitofp fptosi fptoui bitcast ptrtoint inttoptr."""

    NAME = "tc.cast"
    kind: str


@register
@attrs.define(eq=False, kw_only=True)
class UnaryOp(Operation):
    """Element-wise unary op: neg fneg not (bitwise) iabs fabs and the math functions
    exp log sqrt rsqrt sin cos exp2 log2 floor ceil. `approx` picks the fast approximate
    hardware version (exp and log are approximate in Triton-C, as __expf)."""

    NAME = "tc.unary"
    kind: str
    approx: bool = False


@register
@attrs.define(eq=False, kw_only=True)
class FmaOp(Operation):
    """a * b + c, rounded once."""

    NAME = "tc.fma"


@register
@attrs.define(eq=False, kw_only=True)
class SelectOp(Operation):
    """cond ? a : b element-wise (cond i1 of the same shape, or a scalar i1)."""

    NAME = "tc.select"


@register
@attrs.define(eq=False, kw_only=True)
class AddPtrOp(Operation):
    """ptr + offset, the offset counted in pointee elements (i32 or i64, signed)."""

    NAME = "tc.addptr"


# --- memory -----------------------------------------------------------------------------------


@register
@attrs.define(eq=False, kw_only=True)
class LoadOp(Operation):
    """operands: ptr [, mask [, other]]. Where mask is false nothing is read and the result is
    `other` (undefined without it)."""

    NAME = "tc.load"
    HAS_SIDE_EFFECTS = False
    volatile: bool = False


@register
@attrs.define(eq=False, kw_only=True)
class StoreOp(Operation):
    """operands: ptr, value [, mask]. Nothing is written where mask is false."""

    NAME = "tc.store"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class AtomicRMWOp(Operation):
    """operands: ptr, value [, mask] -> old values. kind: add fadd max umax fmax min umin fmin
    and or xor xchg."""

    NAME = "tc.atomic_rmw"
    HAS_SIDE_EFFECTS = True
    kind: str


@register
@attrs.define(eq=False, kw_only=True)
class AtomicCASOp(Operation):
    """operands: ptr, cmp, value -> old values."""

    NAME = "tc.atomic_cas"
    HAS_SIDE_EFFECTS = True


# --- tile compute --------------------------------------------------------------------------------

REDUCE_KINDS = frozenset("add fadd smax umax fmax smin umin fmin".split())


@register
@attrs.define(eq=False, kw_only=True)
class ReduceOp(Operation):
    """Reduce dimension `axis` of a tile with `kind` (add fadd smax umax fmax smin umin fmin).
    A rank-1 source gives a scalar."""

    NAME = "tc.reduce"
    kind: str
    axis: int


@register
@attrs.define(eq=False, kw_only=True)
class DotOp(Operation):
    """operands: a [M, K], b [K, N], acc [M, N] [, use_acc (scalar i1)] -> acc + a @ b,
    accumulated in acc's type; where use_acc is false, acc is not read and the result is a @ b.
    precision: "ieee" (exact fp32) or "tf32" (tensor cores for fp32 inputs).
    asynchronous: the result is still being computed (a wgmma batch left in flight so that the
    next loop iteration's copies overlap it); its one reader is a `tc.dot_wait`."""

    NAME = "tc.dot"
    ALWAYS_PRINTED = frozenset({"precision"})
    precision: str = "ieee"
    asynchronous: bool = False


@register
@attrs.define(eq=False, kw_only=True)
class DotWaitOp(Operation):
    """operands: the result of an asynchronous dot (or a value carried from one) [, valid (scalar
    i1)] -> the same tile, complete once at most `pending` batches of asynchronous dots issued
    after it are in flight; zeros where `valid` is false (the accumulator of a loop that ran no
    iteration and so was never written: tc_opt.accumulator_init)."""

    NAME = "tc.dot_wait"
    HAS_SIDE_EFFECTS = True
    pending: int = 0


@register
@attrs.define(eq=False, kw_only=True)
class BarrierOp(Operation):
    """A barrier across the program's threads (`__debug_barrier()`)."""

    NAME = "tc.barrier"
    HAS_SIDE_EFFECTS = True


# --- structured control flow ----------------------------------------------------------------------


@register
@attrs.define(eq=False, kw_only=True)
class ForOp(Operation):
    """operands: lb, ub, step, *inits. regions: [body(iv, *iter_args)] ending in YieldOp.
    Runs body for iv = lb, lb+step, ... while iv < ub (signed; step > 0). Results: the final
    iter values (the inits when the body never runs)."""

    NAME = "tc.for"
    HAS_SIDE_EFFECTS = True

    @property
    def body(self) -> Block:
        return self.regions[0]

    @property
    def inits(self) -> list[Value]:
        return self.operands[3:]


@register
@attrs.define(eq=False, kw_only=True)
class IfOp(Operation):
    """operands: cond (scalar i1). regions: [then, else], each ending in YieldOp with the results."""

    NAME = "tc.if"
    HAS_SIDE_EFFECTS = True

    @property
    def then_block(self) -> Block:
        return self.regions[0]

    @property
    def else_block(self) -> Block:
        return self.regions[1]


@register
@attrs.define(eq=False, kw_only=True)
class WhileOp(Operation):
    """operands: *inits. regions: [before(*args) ending in ConditionOp(cond, *values),
    after(*values) ending in YieldOp(*next args)]. When cond is false the ConditionOp's values
    are the results."""

    NAME = "tc.while"
    HAS_SIDE_EFFECTS = True

    @property
    def before(self) -> Block:
        return self.regions[0]

    @property
    def after(self) -> Block:
        return self.regions[1]


@register
@attrs.define(eq=False, kw_only=True)
class YieldOp(Operation):
    """Ends a region of for/if/while(after), passing values on."""

    NAME = "tc.yield"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class ConditionOp(Operation):
    """Ends the `before` region of a while: operands cond, *values."""

    NAME = "tc.condition"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class ReturnOp(Operation):
    """Ends a function (kernels return nothing)."""

    NAME = "tc.return"
    HAS_SIDE_EFFECTS = True


# --- GPU level (inserted by tc-opt) ------------------------------------------------------------


@register
@attrs.define(eq=False, kw_only=True)
class ConvertLayoutOp(Operation):
    """The same tile in another layout (through shared memory when threads must exchange data).
    `columns` (0: the whole tile at once): the exchange runs in rounds of that many elements of
    the last dimension, through a buffer of one round (tc_opt.exchange_rounds), where the whole
    tile's buffer would not fit beside the rest of the kernel's shared memory."""

    NAME = "tc.convert_layout"
    columns: int = 0


# ----------------------------------------------------------------------------- functions, modules


@attrs.define(eq=False)
class Function:
    """A kernel (`kind` "global"). Argument attributes: multiple_of, aligned, noalias, readonly,
    writeonly (from the source) and divisible_by_16 / equal_to_1 (runtime specialization; a
    value divisible by 8 only raises multiple_of / aligned)."""

    name: str
    body: Block
    arg_names: list[str] = attrs.field(factory=list)
    arg_attrs: list[dict[str, int | bool]] = attrs.field(factory=list)
    kind: str = "global"
    loc: Location | None = None

    @property
    def args(self) -> list[BlockArgument]:
        return self.body.args

    @property
    def unsigned_args(self) -> list[int]:
        """The indices of the unsigned integer parameters (the lowering marks them `unsigned`:
        IR integers have no sign, and the runtime checks each value's range by it)."""
        return [i for i, a in enumerate(self.arg_attrs) if a.get("unsigned")]

    def walk(self) -> Iterator[Operation]:
        """Every op of the kernel's body, depth first (pre-order)."""
        return self.body.walk()


@attrs.define(eq=False)
class Module:
    """The unit of compilation: kernels (helpers are inlined by the lowering)."""

    functions: list[Function] = attrs.field(factory=list)
    #: Free-form facts the pipeline records (e.g. "num_warps": 4, "shared_bytes": 0).
    attributes: dict[str, Any] = attrs.field(factory=dict)

    def function(self, name: str) -> Function:
        """The function called `name` (KeyError if there is none)."""
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    def walk(self) -> Iterator[Operation]:
        """Every op of every function, depth first (pre-order)."""
        for f in self.functions:
            yield from f.walk()


def replace_all_uses(root: Block, old: Value, new: Value) -> None:
    """Replace every use of `old` by `new` in `root` and the blocks nested in it."""
    for op in root.walk():
        op.operands = [new if v is old else v for v in op.operands]


# --- facts the source vouches for (appended: op classes keep their order) ------------------------


@register
@attrs.define(eq=False, kw_only=True)
class AssumeOp(Operation):
    """The operand unchanged, with facts from an attribute on a local declaration
    (`int x __multipleof(8) = ...`, `float* p __aligned(16) = ...`): every element (an integer,
    or a pointer's byte address) is a multiple of `multiple_of` and of `aligned`. Alignment and
    contiguity analyses read the facts, code generation forwards the operand, and the
    interpreter checks them. Kernel parameters keep theirs in `Function.arg_attrs` instead."""

    NAME = "tc.assume"
    multiple_of: int = 1
    aligned: int = 1


# --- shared memory and asynchronous copies (GPU level, inserted by tc-opt's dot staging and
# --- software pipelining; the interpreter does not run them) -------------------------------------


@register
@attrs.define(eq=False, kw_only=True)
class LocalAllocOp(Operation):
    """A shared-memory buffer: result tile<..., #shared>. With an operand (a register tile of the
    same shape and element) the buffer starts with its contents; without, it is uninitialized (the
    multi-stage buffers of a pipelined loop, shape [num_stages, ...]). Each op is a distinct buffer,
    so it counts as having side effects (never merged by CSE)."""

    NAME = "tc.local_alloc"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class LocalSubviewOp(Operation):
    """operands: buffer tile<S x ..., #shared>, index i32 -> the index-th slice along dimension 0
    (a view of the same memory, rank one less)."""

    NAME = "tc.local_subview"


@register
@attrs.define(eq=False, kw_only=True)
class LocalTransOp(Operation):
    """A shared tile viewed with its dimensions permuted (result dim i is source dim perm[i]):
    no data moves; readers pick the access pattern from the Shared layout's order."""

    NAME = "tc.local_trans"
    perm: tuple[int, ...] = attrs.field(converter=tuple)


@register
@attrs.define(eq=False, kw_only=True)
class LocalLoadOp(Operation):
    """Read a shared tile into registers (result: a distributed or DotOperand layout; ldmatrix
    for tensor-core operands). Ordered against writes by barriers, so never moved or merged."""

    NAME = "tc.local_load"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class LocalStoreOp(Operation):
    """operands: value (a register tile), dst (a shared view of the same shape and element).
    Overwrites the view with the value, visible to every thread of the program (and to wgmma)
    once the op is done. Whoever emits it guarantees that no earlier reader of that memory (an
    in-flight wgmma included) is still reading it: e.g. the double-buffered K-major operand of a
    tf32 dot, which alternates buffers between iterations (tc_opt.k_major_operands)."""

    NAME = "tc.local_store"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class AsyncCopyOp(Operation):
    """operands: ptr tile (global), dst shared tile of the same shape [, mask]. Starts copying
    each element from global to shared memory (cp.async); masked-off elements are zero-filled
    and read nothing. Complete only after async_commit_group + async_wait."""

    NAME = "tc.async_copy"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class AsyncCommitGroupOp(Operation):
    """Close the group of this thread's async copies issued since the last commit."""

    NAME = "tc.async_commit_group"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class AsyncWaitOp(Operation):
    """Wait until at most `pending` of this thread's committed copy groups are still in flight
    (a barrier must follow before other threads' copies may be read)."""

    NAME = "tc.async_wait"
    HAS_SIDE_EFFECTS = True
    pending: int = 0


# --- TMA loads completing on mbarriers (GPU level, inserted by tc-opt's pipeliner on sm_90 when
# --- CompileOptions.tma is set; the interpreter does not run them) --------------------------------


@register
@attrs.define(eq=False, kw_only=True)
class MBarrierInitOp(Operation):
    """operands: barriers tile<S x i64, #shared>. One thread initialises each of the S barriers
    with an arrival count of `count`; every thread then waits for that (a CTA barrier)."""

    NAME = "tc.mbarrier_init"
    HAS_SIDE_EFFECTS = True
    count: int = 1


@register
@attrs.define(eq=False, kw_only=True)
class MBarrierExpectOp(Operation):
    """operands: barriers, index i32, pred i1. Where pred holds, one thread arrives on barrier
    `index` announcing `bytes` bytes of asynchronous copies that complete its current phase."""

    NAME = "tc.mbarrier_expect"
    HAS_SIDE_EFFECTS = True
    bytes: int = 0


@register
@attrs.define(eq=False, kw_only=True)
class MBarrierWaitOp(Operation):
    """operands: barriers, index i32, phase i32. Every thread waits until the phase of barrier
    `index` whose parity is `phase` has completed (its copies are then visible to it)."""

    NAME = "tc.mbarrier_wait"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class MBarrierArriveOp(Operation):
    """operands: barriers, index i32, pred i1 (and, with `cluster`, one `paired` i1 per partner).
    Where pred holds, one thread of each warp arrives on barrier `index` (a consumer warp telling
    the producer that it is done with a slot: the barrier's count is the number of warps that
    arrive).

    `cluster` (a kernel launched in clusters whose producers multicast into their partners'
    slots, tc_opt.warp_specialize): after pred come one or two flags; where flag i holds, the
    thread also arrives on the barrier at the same place in the CTA of rank `rank ^ (1 << i)` of
    its cluster (the partner along i: clusters of 2 have one, clusters of 4 two), and where it
    does not, once more on its own, so that the barrier's count is the same either way.

    `per_warpgroup`: only one warp of each warpgroup arrives (the first; with `cluster`, warp
    1 + i of the group makes the arrival for partner i), for a slot that only wgmma reads: a
    warpgroup's wait for its wgmma covers all four warps' reads."""

    NAME = "tc.mbarrier_arrive"
    HAS_SIDE_EFFECTS = True
    cluster: bool = False
    per_warpgroup: bool = False


@register
@attrs.define(eq=False, kw_only=True)
class ClusterBarrierOp(Operation):
    """Every thread of the CTAs of a cluster that has not exited meets here (barrier.cluster:
    arrive with release, wait with acquire): after the barriers' initialization, before any
    thread of the cluster arrives on or copies to another CTA's shared memory, and before the
    barriers that the other CTA arrives on are invalidated."""

    NAME = "tc.cluster_barrier"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class MBarrierInvalOp(Operation):
    """operands: barriers. After a CTA barrier, one thread invalidates the S barriers so that
    their shared memory may hold other data."""

    NAME = "tc.mbarrier_inval"
    HAS_SIDE_EFFECTS = True


@register
@attrs.define(eq=False, kw_only=True)
class TmaLoadOp(Operation):
    """operands: dst shared tile (2-D, swizzled), barriers, index i32, pred i1, then one i32
    coordinate per dimension of the map (the element of the global tensor at dst[0, 0]): dst's
    dimensions, then the map's outer ones (a batch index; their box is 1, up to rank 5). Where pred
    holds, one thread starts a tensor-memory-access copy of the tile through the tensor map
    `descriptor` (a hidden kernel parameter), completing on barrier `index`; elements outside the
    map's extents read as zero.

    The tensor map (built by the runtime at launch) is described by the other attributes, in the
    map's dimension order (the contiguous dimension first): `base` is the index of the pointer
    argument; `extents` holds per dimension (argument index or -1, offset): the extent is the
    argument's value plus the offset; `stride` is (argument index or -1, multiplier): the outer
    dimension's stride in elements; `box` is the copied box (the inner extent is one swizzle
    panel, several copies fill a wider tile, and its rows may be a fraction of the tile's, several
    copies filling the rest); `swizzle` the swizzle width in bytes.

    `multicast` (a kernel launched in clusters, tc_opt.warp_specialize): one more operand follows
    the coordinates, `partner` i32. Where it is some d > 0, this CTA (rank r) and the CTA of rank
    r ^ d copy the same tile and each issues half of it to the same place in both CTAs' shared
    memory, completing on both CTAs' barrier `index`: the CTA whose rank has bit d copies the
    second half, of the rows through the tensor map `half_descriptor` (its box has half the rows)
    where that is given (>= 0), else of the panels (an even number of them). Where it is 0, the
    CTA copies the whole tile for itself through `descriptor`."""

    NAME = "tc.tma_load"
    HAS_SIDE_EFFECTS = True
    descriptor: int = 0
    base: int = 0
    extents: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    stride: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    box: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    swizzle: int = 128
    multicast: bool = False
    half_descriptor: int = -1

    @property
    def coordinates(self) -> list[Value]:
        """The map coordinates of the tile's first element (one per dimension of the map)."""
        return self.operands[4:4 + len(self.box)]


@register
@attrs.define(eq=False, kw_only=True)
class TmaStoreOp(Operation):
    """operands: value (a 2-D register tile), then one i32 coordinate per dimension of the map
    (the element of the global tensor that value[0, 0] goes to): the tile's dimensions, then the
    map's outer ones (box 1). The tile is written to shared memory in swizzled panels (one per
    box: `box[0]` elements of the map's contiguous dimension `fast` of the tile), and one thread
    copies each panel to global memory with a bulk tensor store through tensor map `descriptor`;
    elements outside the map's extents are not written (the mask of the store it replaces). The
    map's attributes are those of tc.tma_load. `buffers`: how many panel buffers it writes through
    (0: tc_opt.tma_store.panel_buffers' choice)."""

    NAME = "tc.tma_store"
    HAS_SIDE_EFFECTS = True
    descriptor: int = 0
    base: int = 0
    fast: int = 1
    extents: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    stride: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    box: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    swizzle: int = 128
    buffers: int = 0


@register
@attrs.define(eq=False, kw_only=True)
class WarpSpecializeOp(Operation):
    """Warp specialization (tc_opt.warp_specialize). regions: [producer, consumer], each ending in
    an empty YieldOp. The kernel runs with `producer_warps` warps more than its layouts use: those
    extra warps run the producer region (one of their threads issues the copies), the program's
    own warps run the consumer region; both then return. Barriers in the consumer region
    synchronise the consumer warps only. `producer_registers` (0: no change) and
    `consumer_registers`: the per-thread register counts each role sets first (setmaxnreg), a
    producer warpgroup handing registers to the consumers (tc_opt.overlap_epilogue)."""

    NAME = "tc.warp_specialize"
    HAS_SIDE_EFFECTS = True
    producer_warps: int = 1
    producer_registers: int = 0
    consumer_registers: int = 0

    @property
    def producer(self) -> Block:
        return self.regions[0]

    @property
    def consumer(self) -> Block:
        return self.regions[1]
