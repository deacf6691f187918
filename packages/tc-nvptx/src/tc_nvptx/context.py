"""Per-function state of the LLVM lowering: builders, thread ids, the values of tile IR values,
per-thread layout bases, shared memory and small helpers (intrinsics, inline PTX)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Union

import attrs
import llvmlite.ir as ir
from tc_ir.ops import Block, Function, Operation, Value
from tc_ir.types import ElementType, TileType
from tc_lang.diagnostics import Category, Diagnostic, Location, TcCompileError, TcLoweringError
from tc_opt.axis_info import AxisAnalysis
from tc_opt.options import CompileOptions
from tc_opt.pass_manager import note_stage
from tc_opt.shared_alloc import Allocation

from .layout_math import DimMap, ThreadMap, UncoveredDimension, layout_warps, thread_map
from .llvm_types import I1, I32, SHARED_PTR, llvm_type


def is_power_of_two(n: int) -> bool:
    """Whether a positive count is a power of two (shifts and masks serve it)."""
    return n > 0 and n & (n - 1) == 0


@attrs.define
class TileVal:
    """The part of a tile one thread holds: element values keyed by per-dimension offsets."""

    map: ThreadMap
    vals: dict[tuple[int, ...], ir.Value]
    element: ElementType


@attrs.define
class SharedTile:
    """A tile staged in shared memory (dot operands): row-major at `ptr`."""

    ptr: ir.Value
    shape: tuple[int, ...]
    element: ElementType


LVal = Union[ir.Value, TileVal, SharedTile]

#: Literal structs of at least this many elements of one type are named (`Ctx.named_struct`).
NAMED_STRUCT_MIN = 8


def lowering_error(message: str, loc: Location | None, hint: str | None = None) -> TcLoweringError:
    return TcLoweringError(
        [Diagnostic(Category.LOWERING, "E0690", message, loc or Location("<unknown>", 0, 0), hint=hint)]
    )


class Ctx:
    """Lowers one kernel. `lower_op` is looked up in LOWERINGS by op NAME."""

    def __init__(
        self,
        module: ir.Module,
        function: Function,
        fn: ir.Function,
        options: CompileOptions,
        axes: AxisAnalysis,
        alloc: Allocation,
        smem: ir.GlobalVariable,
    ) -> None:
        self.module = module
        self.function = function
        self.fn = fn
        self.options = options
        self.axes = axes
        self.alloc = alloc
        self.smem = smem
        self.entry = fn.append_basic_block("entry")
        self.eb = ir.IRBuilder(self.entry)
        self.body_block = fn.append_basic_block("body")
        self.b = ir.IRBuilder(self.body_block)
        self.values: dict[Value, LVal] = {}
        self.num_warps = options.num_warps
        self.tid = self.eb.call(self.intrinsic("llvm.nvvm.read.ptx.sreg.tid.x", I32, []), [], name="tid")
        self.lane = self.eb.and_(self.tid, ir.Constant(I32, 31), name="lane")
        self.warp = self.eb.lshr(self.tid, ir.Constant(I32, 5), name="warp")
        self._bases: dict[object, ir.Value] = {}
        self.smem_base: ir.Value = smem
        self._maps: dict[tuple[tuple[int, ...], object], ThreadMap] = {}
        #: The thread that does what "one thread" does (thread0): a producer warp's first thread
        #: inside a warp-specialized producer region.
        self.leader = 0
        #: Threads that `barrier` synchronises: None for all of the CTA, or the consumer warps'
        #: count inside a warp-specialized consumer region (named barrier 1).
        self.barrier_threads: int | None = None
        #: A persistent kernel's hidden parameters: the extents of the grid it steps through.
        self.grid_params: list[ir.Value] = []
        #: A stream-K kernel's workspace parameters by part ("partials", "flags"; tc.workspace).
        self.workspace_params: dict[str, ir.Value] = {}
        #: CTAs per cluster the kernel is launched in (tc_opt.warp_specialize's multicast: 2).
        self.cluster = 1
        #: Ops another op's lowering already emitted (a load's accumulating add): skipped.
        self.lowered_early: set[Operation] = set()
        self._users: dict[Value, list[Operation]] | None = None

    def users_of(self, v: Value) -> list[Operation]:
        """The ops of the function that use `v` (one entry per use)."""
        if self._users is None:
            self._users = {}
            for op in self.function.walk():
                for w in op.operands:
                    self._users.setdefault(w, []).append(op)
        return self._users.get(v, [])

    def finish(self) -> None:
        self.eb.branch(self.body_block)

    # ---------------------------------------------------------------------------- helpers

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        existing = self.module.globals.get(name)
        if isinstance(existing, ir.Function):
            return existing
        return ir.Function(self.module, ir.FunctionType(ret, list(args)), name=name)

    def call(self, name: str, ret: ir.Type, args: Sequence[ir.Value]) -> ir.Value:
        return self.b.call(self.intrinsic(name, ret, [a.type for a in args]), list(args))

    def asm(
        self, ret: ir.Type, text: str, constraints: str, args: Sequence[ir.Value], side_effect: bool = False
    ) -> ir.Value:
        """An inline asm statement. One with a `.aligned` instruction (stmatrix, ldmatrix,
        mma.sync, the wgmma family), which every thread of a warp must execute at the same
        instruction, is a convergent call: LLVM then never duplicates it into the two sides of
        a branch that only some threads take. It did, threading two branches on "thread 0" across
        the stmatrix between them, and a persistent bulk-store kernel (fp16 128x256x32, 7 stages,
        3 panel buffers) hung on the H100."""
        fty = ir.FunctionType(self.named_struct(ret), [a.type for a in args])
        call = self.b.asm(fty, text, constraints, list(args), side_effect)
        if ".aligned" in text:
            call.attributes.add("convergent")
        return call

    def named_struct(self, ty: ir.Type) -> ir.Type:
        """`ty`, when it is a literal struct of NAMED_STRUCT_MIN or more elements of one type (an
        asm statement's results: a wgmma accumulator is 128 floats), as a struct type named once
        in the module (`%"float_x128" = type {...}`); any other type as it is. Each of the
        struct's extractvalues then names it in the LLVM text instead of spelling out every
        element: a persistent 128x256 fp16 matmul's LLVM text went from 3.0 MB (2.75 MB of it
        those spelled-out types) to a tenth of that, and its compile time by about a quarter
        (llvmlite's printing and LLVM's parsing)."""
        if not isinstance(ty, ir.LiteralStructType) or ty.packed or len(ty.elements) < NAMED_STRUCT_MIN:
            return ty
        first = ty.elements[0]
        if any(e != first for e in ty.elements):
            return ty
        named = self.module.context.get_identified_type(f"{first}_x{len(ty.elements)}")
        if named.is_opaque:
            named.set_body(*ty.elements)
        return named

    def i32(self, v: int) -> ir.Constant:
        return ir.Constant(I32, v)

    def barrier(self) -> None:
        # The intrinsic, not inline asm: LLVM knows it is convergent, so it never duplicates it
        # into the two sides of a branch that only some threads take (bar.sync is .aligned:
        # reached from different instructions by one warp's threads, it hangs the block).
        if self.barrier_threads is None:
            self.call("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [ir.Constant(I32, 0)])
        else:
            self.call("llvm.nvvm.barrier.cta.sync.aligned.count", ir.VoidType(),
                      [ir.Constant(I32, 1), ir.Constant(I32, self.barrier_threads)])

    def map_of(self, t: TileType) -> ThreadMap:
        if t.layout is None:
            raise lowering_error("internal error: a tile reached code generation without a layout", None)
        key = (t.shape, t.layout)
        m = self._maps.get(key)
        if m is None:
            m = thread_map(t.shape, t.layout)
            self._maps[key] = m
        return m

    # ------------------------------------------------------------------ per-thread indices

    def lane_part(self, stride: int, count: int) -> ir.Value:
        key = ("lane", stride, count)
        if key not in self._bases:
            v = self.eb.lshr(self.lane, ir.Constant(I32, stride.bit_length() - 1)) if stride > 1 else self.lane
            self._bases[key] = self.eb.and_(v, ir.Constant(I32, count - 1)) if count < 32 else v
        return self._bases[key]

    def warp_part(self, stride: int, count: int) -> ir.Value:
        """(warp / stride) % count: the thread's warp coordinate along a layout dimension. Shifts
        and masks where stride and count are powers of two; a division and a remainder otherwise
        (12 warps: 3 warpgroups)."""
        key = ("warp", stride, count)
        if key not in self._bases:
            if count == 1:
                self._bases[key] = ir.Constant(I32, 0)
            else:
                e = self.eb
                v = self.warp if stride == 1 else (
                    e.lshr(self.warp, ir.Constant(I32, stride.bit_length() - 1)) if is_power_of_two(stride)
                    else e.udiv(self.warp, ir.Constant(I32, stride)))
                self._bases[key] = self.modulo(v, count)
        return self._bases[key]

    def modulo(self, v: ir.Value, n: int, builder: ir.IRBuilder | None = None) -> ir.Value:
        """v % n for an unsigned v (built by `builder`, the entry block's by default): a mask
        where n is a power of two, a remainder otherwise (the threads of 12 warps cover a tile
        dimension of 192 twice)."""
        e = builder or self.eb
        return e.and_(v, ir.Constant(I32, n - 1)) if is_power_of_two(n) else e.urem(v, ir.Constant(I32, n))

    def base(self, d: DimMap) -> ir.Value:
        """The thread's first coordinate along a dimension (offsets are added to it)."""
        if d.mode in ("one", "all"):
            return ir.Constant(I32, 0)
        key = ("base", d)
        if key not in self._bases:
            e = self.eb
            t = self.lane_part(d.lane_stride, d.tpw) if d.tpw > 1 else ir.Constant(I32, 0)
            if d.warp_step:  # tensor-core layouts (mma_layout)
                v = e.mul(t, ir.Constant(I32, d.spt)) if d.spt > 1 else t
                if d.wpc > 1:
                    w = self.warp_part(d.warp_stride, d.wpc)
                    v = e.add(e.mul(w, ir.Constant(I32, d.warp_step)), v)
            else:
                if d.wpc > 1:
                    w = self.warp_part(d.warp_stride, d.wpc)
                    t = e.add(e.mul(w, ir.Constant(I32, d.tpw)), t)
                v = e.mul(t, ir.Constant(I32, d.spt)) if d.spt > 1 else t
            if d.mode == "wrap":
                v = self.modulo(v, d.size)
            self._bases[key] = v
        return self._bases[key]

    def linear_base(self, m: ThreadMap, strides: Sequence[int]) -> ir.Value:
        """sum(base_d * strides[d]): the thread's part of a linear index."""
        key = ("linear", m, tuple(strides))
        if key not in self._bases:
            acc: ir.Value = ir.Constant(I32, 0)
            for d, s in zip(m.dims, strides):
                if d.mode in ("one", "all") or s == 0:
                    continue
                acc = self.eb.add(acc, self.eb.mul(self.base(d), ir.Constant(I32, s)))
            self._bases[key] = acc
        return self._bases[key]

    def owner(self, m: ThreadMap) -> ir.Value:
        """True in exactly one of the threads holding each element (for atomics)."""
        key = ("owner", m)
        if key in self._bases:
            return self._bases[key]
        e = self.eb
        cond: ir.Value = ir.Constant(I1, 1)

        def zero(v: ir.Value) -> None:
            nonlocal cond
            cond = e.and_(cond, e.icmp_unsigned("==", v, ir.Constant(I32, 0)))

        for d in m.dims:
            if d.mode in ("one", "all"):
                if d.tpw > 1:
                    zero(self.lane_part(d.lane_stride, d.tpw))
                if d.wpc > 1:
                    zero(self.warp_part(d.warp_stride, d.wpc))
            elif d.mode == "wrap" and d.warp_step:  # tensor-core layouts: warps may wrap
                if d.wpc * d.warp_step > d.size:
                    w = self.warp_part(d.warp_stride, d.wpc)
                    cond = e.and_(cond, e.icmp_unsigned("<", e.mul(w, ir.Constant(I32, d.warp_step)), ir.Constant(I32, d.size)))
            elif d.mode == "wrap" and d.spt * d.tpw * d.wpc > d.size:  # (== size: no replicas)
                t = self.lane_part(d.lane_stride, d.tpw) if d.tpw > 1 else ir.Constant(I32, 0)
                if d.wpc > 1:
                    t = e.add(e.mul(self.warp_part(d.warp_stride, d.wpc), ir.Constant(I32, d.tpw)), t)
                cond = e.and_(cond, e.icmp_unsigned("<", e.mul(t, ir.Constant(I32, d.spt)), ir.Constant(I32, d.size)))
        for r in m.removed:
            if r.tpw > 1:
                zero(self.lane_part(r.lane_stride, r.tpw))
            if r.wpc > 1:
                zero(self.warp_part(r.warp_stride, r.wpc))
        spread = layout_warps(m.root)
        if spread < self.num_warps:  # (12 warps in a layout of 8: warps 8-11 repeat warps 0-3)
            cond = e.and_(cond, e.icmp_unsigned("<", self.warp, ir.Constant(I32, spread)))
        self._bases[key] = cond
        return cond

    def thread0(self) -> ir.Value:
        key = ("thread0", self.leader)
        if key not in self._bases:
            self._bases[key] = self.eb.icmp_unsigned("==", self.tid, ir.Constant(I32, self.leader))
        return self._bases[key]

    def smem_ptr(self, op: Operation) -> ir.Value:
        offset = self.alloc.offsets.get(op)
        if offset is None:
            raise lowering_error(f"internal error: no shared memory allocated for {op.NAME}", op.loc)
        base = self.smem_base
        if offset == 0:
            return base
        return self.b.gep(base, [ir.Constant(I32, offset)], inbounds=True, source_etype=ir.IntType(8))

    # -------------------------------------------------------------------------- values

    def tile(self, v: Value) -> TileVal:
        x = self.values[v]
        assert isinstance(x, TileVal), f"expected a tile for {v}"
        return x

    def scalar(self, v: Value) -> ir.Value:
        x = self.values[v]
        assert not isinstance(x, (TileVal, SharedTile)), f"expected a scalar for {v}"
        return x

    def elementwise(
        self,
        result_type: TileType,
        operands: Sequence[Value],
        f: Callable[[list[ir.Value]], ir.Value],
    ) -> TileVal:
        """Apply f to each element of the operands (tiles of the result's layout, or scalars)."""
        m = self.map_of(result_type)
        vals = {}
        for key in m.keys:
            args = []
            for v in operands:
                x = self.values[v]
                args.append(x.vals[key] if isinstance(x, TileVal) else x)
            vals[key] = f(args)
        return TileVal(m, vals, result_type.element)

    def splat_tile(self, t: TileType, value: ir.Value) -> TileVal:
        m = self.map_of(t)
        return TileVal(m, {k: value for k in m.keys}, t.element)

    def lower_block(self, block: Block) -> None:
        from .lowerings import LOWERINGS

        for op in block.ops:
            if op in self.lowered_early:
                continue
            fn = LOWERINGS.get(op.NAME)
            if fn is None:
                raise lowering_error(f"code generation does not support {op.NAME} yet", op.loc)
            try:
                fn(self, op)
            except UncoveredDimension as exc:
                raise lowering_error(
                    f"{exc} over the program's {32 * self.num_warps} threads", op.loc,
                    "a tile dimension that is not a power of two needs whole blocks of threads "
                    "along it: use fewer warps (num_warps), a larger tile or a power of two") from None
            except TcCompileError:
                raise
            except Exception as exc:  # a bug: tc_nvptx.compiler reports it at the innermost op
                if getattr(exc, "tc_location", None) is None and op.loc is not None:
                    setattr(exc, "tc_location", op.loc)
                note_stage(exc, f"code generation of {op.NAME}")
                raise


def element_llvm(t: TileType | ElementType) -> ir.Type:
    return llvm_type(t.element if isinstance(t, TileType) else t)


def smem_type() -> ir.Type:
    return SHARED_PTR
