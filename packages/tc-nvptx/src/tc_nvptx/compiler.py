"""The whole compiler: source -> tile IR -> laid-out IR -> LLVM -> PTX -> cubin."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from tc_ir.ops import DotOp, Module, TmaLoadOp, TmaStoreOp
from tc_lang.ast import TranslationUnit
from tc_lang.diagnostics import Category, Diagnostic, Location, TcCompileError, TcLoweringError, with_source_lines
from tc_opt.dot_layouts import is_wgmma_dot
from tc_opt.options import CompileOptions
from tc_opt.pass_manager import format_timings, module_text
from tc_opt.pipeline import gpu_pipeline
from tc_opt.resources import check_parameter_space, check_registers, check_shared

from .emit import emit_ptx, llvm_text
from .lower_module import lower_to_llvm
from .occupancy import raise_occupancy
from .ptxas import PtxasError, PtxasInfo, assemble, find_ptxas

#: Version of the metadata layout written by `CompiledKernel.to_json`.
METADATA_VERSION = 1


@attrs.define
class CompiledKernel:
    """A compiled kernel and the metadata the runtime needs to launch it."""

    name: str
    arch: str
    ptx: str
    cubin: bytes | None
    signature: list[str]
    arg_names: list[str]
    num_warps: int
    shared_bytes: int = 0
    registers: int = 0
    spills: int = 0
    num_stages: int = 3
    asm: dict[str, str] = attrs.field(factory=dict)
    #: The tensor maps of TMA copies, passed after the user's arguments (tc_runtime.tensor_maps
    #: encodes them at launch): per map base (pointer argument), element, extents, stride, box,
    #: swizzle, as the tc.tma_load attributes say.
    tensor_maps: list[dict[str, Any]] = attrs.field(factory=list)
    #: A persistent kernel (CompileOptions.persistent): launched with at most one program per SM
    #: (a 1-D grid), it steps through the grid the caller asked for, whose extents (x, y, z) it
    #: takes as three i32 parameters after the user's arguments (before the tensor maps).
    persistent: bool = False
    #: CTAs per cluster (CompileOptions.cluster_multicast: 2): the kernel's PTX requires clusters
    #: of that shape (.reqnctapercluster), so a persistent grid is a multiple of it.
    cluster: int = 1
    #: A stream-K kernel (CompileOptions.stream_k): the bytes of one CTA's partial sum. It takes
    #: two more pointers after the grid's extents: the partial sums (this many bytes per CTA)
    #: and the flags (one i32 per CTA, all 0 before a launch; the kernel leaves them 0), which
    #: the runtime allocates. 0: not stream-K.
    stream_k: int = 0
    #: The indices of the unsigned integer parameters (IR integers have no sign; the runtime
    #: checks the range of each value it passes); None in metadata older than the field.
    unsigned_args: list[int] | None = None
    #: Wall time of each compiler stage and pass, in seconds (not part of the on-disk metadata).
    timings: dict[str, float] = attrs.field(factory=dict)

    def timing_report(self) -> str:
        """The per-stage and per-pass times as a table (what `tcc --time-passes` prints)."""
        return format_timings(self.timings, f"compile times of {self.name} for {self.arch}")

    @property
    def threads(self) -> int:
        return 32 * self.num_warps

    def to_json(self) -> dict[str, Any]:
        """Plain metadata (no binaries, no stage texts): what tc_runtime reads from disk."""
        return {
            "version": METADATA_VERSION,
            "name": self.name,
            "arch": self.arch,
            "signature": list(self.signature),
            "arg_names": list(self.arg_names),
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
            "shared_bytes": self.shared_bytes,
            "registers": self.registers,
            "spills": self.spills,
            **({"tensor_maps": [dict(m) for m in self.tensor_maps]} if self.tensor_maps else {}),
            **({"persistent": True} if self.persistent else {}),
            **({"cluster": self.cluster} if self.cluster > 1 else {}),
            **({"stream_k": self.stream_k} if self.stream_k else {}),
            **({"unsigned_args": list(self.unsigned_args)} if self.unsigned_args is not None else {}),
        }

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], *, ptx: str = "", cubin: bytes | None = None, asm: dict[str, str] | None = None
    ) -> CompiledKernel:
        return cls(
            name=str(data["name"]),
            arch=str(data["arch"]),
            ptx=ptx,
            cubin=cubin,
            signature=[str(s) for s in data["signature"]],
            arg_names=[str(s) for s in data["arg_names"]],
            num_warps=int(data["num_warps"]),
            shared_bytes=int(data.get("shared_bytes", 0)),
            registers=int(data.get("registers", 0)),
            spills=int(data.get("spills", 0)),
            num_stages=int(data.get("num_stages", 3)),
            asm=dict(asm or {}),
            tensor_maps=[dict(m) for m in data.get("tensor_maps", [])],
            persistent=bool(data.get("persistent", False)),
            cluster=int(data.get("cluster", 1)),
            stream_k=int(data.get("stream_k", 0)),
            unsigned_args=[int(i) for i in data["unsigned_args"]] if "unsigned_args" in data else None,
        )

    def dumps(self) -> str:
        """Everything, PTX and cubin included, as one JSON text."""
        d = self.to_json()
        d["ptx"] = self.ptx
        d["cubin"] = base64.b64encode(self.cubin).decode() if self.cubin is not None else None
        return json.dumps(d)


def frontend(
    source: str | bytes, defines: Mapping[str, object] | None = None, kernel: str | None = None,
    filename: str = "<source>",
) -> tuple[TranslationUnit, Module]:
    """Source text to the checked translation unit and the target-independent tile IR of one
    kernel (the unit's source text lets later errors quote their line: `located_errors`)."""
    import tc_lang
    from tc_ir.lower import lower

    unit = tc_lang.frontend(source, defines, filename=filename)  # type: ignore[arg-type]
    with located_errors(unit, "IR lowering"):
        return unit, lower(unit, kernel)


def frontend_module(
    source: str | bytes, defines: Mapping[str, object] | None = None, kernel: str | None = None,
    filename: str = "<source>",
) -> Module:
    """Source text to target-independent tile IR (one kernel)."""
    return frontend(source, defines, kernel, filename)[1]


#: Set to 1 to let an internal error of the compiler through as the Python exception it is.
DEBUG_VARIABLE = "TC_COMPILER_DEBUG"
#: The code of an internal compiler error after the front end (the front end's own is E0499).
INTERNAL_ERROR = "E0699"


@contextlib.contextmanager
def located_errors(unit: TranslationUnit, stage: str = "the compiler") -> Iterator[None]:
    """Compile errors raised inside quote their source line with a caret: the lowering, the
    passes and the code generator know locations but not the user's text. Any other exception
    is a bug of the compiler: it becomes an "internal compiler error" TcLoweringError (E0699)
    at the innermost source location known and naming the stage (pass, op) it escaped from,
    instead of a traceback from inside the compiler (TC_COMPILER_DEBUG=1 lets it through)."""
    try:
        yield
    except TcCompileError as e:
        raise with_source_lines(e, unit.source_line) from None
    except (PtxasError, MemoryError):  # (ptxas's own report; the machine's limit)
        raise
    except Exception as e:
        if os.environ.get(DEBUG_VARIABLE) == "1":
            raise
        where = getattr(e, "tc_location", None)
        if not isinstance(where, Location):  # (a pass's error: the kernel's own line)
            where = unit.kernels()[0].loc if unit.kernels() else unit.loc
        error = TcLoweringError([Diagnostic(
            Category.LOWERING, INTERNAL_ERROR,
            f"internal compiler error in {getattr(e, 'tc_stage', None) or stage}: {type(e).__name__}: {e}",
            where, hint=f"please report this; {DEBUG_VARIABLE}=1 shows the Python traceback")])
        raise with_source_lines(error, unit.source_line) from None


def target_arch(module: Module, arch: str) -> str:
    """The architecture to emit for: sm_90a (its wgmma) when a dot of the module runs on wgmma
    (Mma layout version 3), else `arch`. The cubin then runs on sm_90 devices only, which are
    the ones that chose wgmma."""
    if arch != "sm_90":
        return arch
    return "sm_90a" if any(is_wgmma_dot(op) for op in module.walk()) else arch


def tensor_maps_of(module: Module) -> list[dict[str, Any]]:
    """The tensor maps the kernel's TMA copies read, in parameter order (one per descriptor)."""
    out: dict[int, dict[str, Any]] = {}
    for op in module.walk():
        if isinstance(op, (TmaLoadOp, TmaStoreOp)) and int(op.descriptor) not in out:
            t = op.operands[0].type
            out[int(op.descriptor)] = {
                "base": int(op.base), "element": str(t.element),  # type: ignore[union-attr]
                "extents": [int(x) for x in op.extents], "stride": [int(x) for x in op.stride],
                "box": [int(x) for x in op.box], "swizzle": int(op.swizzle),
            }
            if isinstance(op, TmaLoadOp) and op.half_descriptor >= 0:  # (a multicast copy's half of the rows)
                box = [int(x) for x in op.box]
                out[int(op.half_descriptor)] = {**out[int(op.descriptor)], "box": [box[0], box[1] // 2, *box[2:]]}
    return [out[k] for k in sorted(out)]


def check_options(options: object, module: Module | None = None) -> CompileOptions:
    """`options` (None: the defaults), refused before compiling when it is no CompileOptions or
    its specialization does not have one entry per argument of the module's kernel: mistakes of
    the caller, said plainly (TypeError/ValueError) rather than as an internal compiler error."""
    if options is None:
        return CompileOptions()
    if not isinstance(options, CompileOptions):
        raise TypeError(f"options must be a tc_opt.CompileOptions, not {type(options).__name__}")
    spec = options.specialization
    if spec is not None and module is not None and len(module.functions) == 1:
        f = module.functions[0]
        if len(spec) != len(f.args):
            names = ", ".join(f.arg_names) if f.arg_names else ""
            raise ValueError(f"CompileOptions.specialization has {len(spec)} entries but kernel '{f.name}' has "
                             f"{len(f.args)} arguments ({names}): give one entry per argument")
    return options


def _has_dots(module: Module) -> bool:
    return any(isinstance(op, DotOp) for f in module.functions for op in f.walk())


def assemble_at(ptx: str, arch: str, loc: Location | None) -> tuple[bytes, PtxasInfo]:
    """`assemble`, with ptxas's refusal of too many parameters as E0703 at the kernel `loc`
    (anything else as ptxas said it)."""
    try:
        return assemble(ptx, arch)
    except PtxasError as exc:
        check_parameter_space(str(exc), arch, loc)
        raise


def compile_module(
    module: Module,
    options: CompileOptions | None = None,
    *,
    assemble_cubin: bool = True,
    stop_after: str | None = None,
) -> CompiledKernel:
    """Compile tile IR (one kernel) to a CompiledKernel. A configuration that needs more shared
    memory or registers than `options.arch` has raises `tc_opt.ResourceLimitError` (a
    TcResourceError: the auto-tuner skips such configurations)."""
    if len(module.functions) != 1:
        raise ValueError(f"expected one kernel in the module, found {len(module.functions)}")
    options = check_options(options, module)
    f = module.functions[0]
    timings: dict[str, float] = {}
    asm: dict[str, str] = {"ir": module_text(module)}
    signature = [str(a.type) for a in f.args]
    arg_names = list(f.arg_names) or [a.name_hint or f"arg{i}" for i, a in enumerate(f.args)]
    pm = gpu_pipeline(options)
    if stop_after is not None:
        pm.keep_after.add(stop_after)
    pm.run(module)
    timings.update({f"pass {k}": v for k, v in pm.timings.items()})
    asm["ir-gpu"] = module_text(module)
    if stop_after is not None and stop_after in pm.snapshots:
        asm["after"] = pm.snapshots[stop_after]
    start = time.perf_counter()
    llmod = lower_to_llvm(module, options)
    # the launch's warps: the program's, and a warp-specialized kernel's producer warps
    warps = options.num_warps + int(module.attributes.get("producer_warps", 0))
    asm["llvm"] = llvm_text(llmod, warps)
    timings["lower to LLVM IR"] = time.perf_counter() - start
    check_shared(int(module.attributes.get("shared_bytes", 0)), options, f.loc)
    arch = target_arch(module, options.arch)
    start = time.perf_counter()
    ptx = emit_ptx(asm["llvm"], arch)
    timings["LLVM O3 + PTX emission"] = time.perf_counter() - start
    asm["ptx"] = ptx
    kernel = CompiledKernel(
        name=f.name,
        arch=arch,
        ptx=ptx,
        cubin=None,
        signature=signature,
        arg_names=arg_names,
        num_warps=warps,
        num_stages=options.num_stages,
        shared_bytes=int(module.attributes.get("shared_bytes", 0)),
        asm=asm,
        timings=timings,
        tensor_maps=tensor_maps_of(module),
        persistent=bool(module.attributes.get("persistent")),
        cluster=int(module.attributes.get("cluster", 1)),  # type: ignore[call-overload]
        stream_k=int(module.attributes.get("stream_k", 0)),  # type: ignore[call-overload]
        unsigned_args=f.unsigned_args,
    )
    if assemble_cubin and find_ptxas() is not None:
        start = time.perf_counter()
        cubin, info = assemble_at(ptx, arch, f.loc)
        if not _has_dots(module):  # (their register tiles are sized by their configurations)
            better = raise_occupancy(ptx, info, warps, kernel.shared_bytes, arch)
            if better is not None:
                ptx, cubin, info = better
                kernel.ptx = asm["ptx"] = ptx
        timings["ptxas"] = time.perf_counter() - start
        asm["ptxas"] = info.log  # (its advisories too, e.g. C7515: wgmma serialized)
        kernel.cubin = cubin
        kernel.registers = info.registers
        kernel.spills = info.spills
        check_registers(info.registers, warps, options.arch, f.loc)
    return kernel


def compile(  # noqa: A001 - the name the contract gives it
    source: str,
    *,
    defines: Mapping[str, object] | None = None,
    kernel: str | None = None,
    options: CompileOptions | None = None,
    filename: str = "<source>",
    assemble_cubin: bool = True,
) -> CompiledKernel:
    """Compile Triton-C source to PTX (and a cubin when ptxas is found: TC_PTXAS, else the PATH)."""
    check_options(options)
    start = time.perf_counter()
    unit, module = frontend(source, defines, kernel, filename)
    front = time.perf_counter() - start
    check_options(options, module)  # (outside located_errors: the caller's mistake, not the compiler's)
    with located_errors(unit):
        compiled = compile_module(module, options, assemble_cubin=assemble_cubin)
    compiled.timings = {"front end (preprocess, parse, check, lower)": front, **compiled.timings}
    return compiled


__all__ = ["CompiledKernel", "PtxasError", "assemble_at", "compile", "compile_module", "frontend", "frontend_module",
           "located_errors"]
