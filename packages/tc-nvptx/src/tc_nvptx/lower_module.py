"""Laid-out tile IR -> an llvmlite module: one `ptx_kernel` per kernel, per-thread code."""

from __future__ import annotations

import llvmlite.ir as ir
from tc_ir.ops import Function, Module, ReturnOp
from tc_ir.types import PointerType, TileType
from tc_opt.axis_info import AxisAnalysis
from tc_opt.options import CompileOptions
from tc_opt.shared_alloc import allocate

from .context import Ctx, lowering_error
from .llvm_types import I8, I32, llvm_type
from .lower_tma import return_from_kernel
from .lowerings import load_all

TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-p3:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"


#: A persistent kernel's hidden parameters after the user's: the grid's extents (x, y, z).
GRID_PARAMS = 3
#: A stream-K kernel's after those: its workspace, partial sums and flags (tc.workspace).
WORKSPACE_PARAMS = ("partials", "flags")


def _kernel(module: ir.Module, f: Function, options: CompileOptions, smem: ir.GlobalVariable,
            persistent: bool = False, cluster: int = 1, stream_k: bool = False) -> int:
    params = []
    for a in f.args:
        if isinstance(a.type, TileType):
            raise lowering_error(f"kernel argument {a.name_hint} is a tile", f.loc)
        params.append(llvm_type(a.type))
    from .lower_tma import PARAM_PREFIX, tensor_map_count

    grid = GRID_PARAMS if persistent else 0
    params += [I32] * grid
    work = len(WORKSPACE_PARAMS) if stream_k else 0
    params += [ir.PointerType()] * work
    maps = tensor_map_count(f)
    params += [ir.PointerType()] * maps  # the tensor maps of TMA copies (byval, see emit.llvm_text)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=f.name)
    fn.calling_convention = "ptx_kernel"
    for i, (a, p) in enumerate(zip(f.args, fn.args)):
        p.name = (f.arg_names[i] if i < len(f.arg_names) else None) or a.name_hint or f"arg{i}"
        if isinstance(a.type, PointerType):
            p.add_attribute("noundef")
    alloc = allocate(f)
    ctx = Ctx(module, f, fn, options, AxisAnalysis(f), alloc, smem)
    ctx.cluster = cluster
    for a, p in zip(f.args, fn.args):
        ctx.values[a] = p
    ctx.grid_params = list(fn.args[len(f.args):len(f.args) + grid])
    for axis, p in enumerate(ctx.grid_params):
        p.name = f"tc_grid_{'xyz'[axis]}"
    ctx.workspace_params = dict(zip(WORKSPACE_PARAMS, fn.args[len(f.args) + grid:len(f.args) + grid + work]))
    for part, p in ctx.workspace_params.items():
        p.name = f"tc_{part}"
    hidden = list(fn.args[len(f.args) + grid + work:])
    for k, p in enumerate(hidden):
        p.name = f"{PARAM_PREFIX}{k}"
    ctx.tma_params = hidden  # type: ignore[attr-defined]
    ctx.lower_block(f.body)
    if not isinstance(f.body.terminator, ReturnOp):
        return_from_kernel(ctx)
    ctx.finish()
    return alloc.size


def lower_to_llvm(module: Module, options: CompileOptions | None = None) -> ir.Module:
    """The LLVM module of a laid-out tc module (see tc_opt.gpu_pipeline)."""
    load_all()
    options = options or CompileOptions()
    lm = ir.Module(name="tc", context=ir.Context())  # (its own named types: Ctx.named_struct)
    lm.triple = TRIPLE
    lm.data_layout = DATA_LAYOUT
    smem = ir.GlobalVariable(lm, ir.ArrayType(I8, 0), "tc_shared", addrspace=3)
    smem.type = ir.PointerType(addrspace=3)  # an opaque pointer, so GEPs of any element type work
    smem.linkage = "external"
    smem.align = 1024  # swizzled tiles (tc_opt.shared_alloc.SWIZZLED_ALIGN)
    shared = 0
    cluster = int(module.attributes.get("cluster", 1))  # type: ignore[call-overload]
    for f in module.functions:
        shared = max(shared, _kernel(lm, f, options, smem, bool(module.attributes.get("persistent")), cluster,
                                     bool(module.attributes.get("stream_k"))))
    module.attributes["shared_bytes"] = shared
    # read by emit_ptx for .maxntid: the program's warps and a warp-specialized kernel's producers
    lm.tc_num_warps = options.num_warps + int(module.attributes.get("producer_warps", 0))
    lm.tc_cluster = cluster  # (.reqnctapercluster)
    return lm
