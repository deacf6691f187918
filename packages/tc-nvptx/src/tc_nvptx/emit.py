"""LLVM IR -> PTX with the NVPTX back end of llvmlite's LLVM (O3, new pass manager)."""

from __future__ import annotations

import re
import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir

from .ptx_fixups import fix_ptx

_init_lock = threading.Lock()
_initialized = False

#: The PTX ISA version requested from LLVM (CUDA 12+ drivers accept 8.0).
PTX_FEATURES = "+ptx80"


def _init() -> None:
    global _initialized
    with _init_lock:
        if not _initialized:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            # 32-bit shared-memory pointers (the data layout's p3:32): shared addresses, slot
            # offsets and wgmma descriptors are then computed in 32-bit registers (an option of
            # the NVPTX back end only: other users of llvmlite's LLVM on the CPU are unaffected)
            llvm.set_option("tc", "-nvptx-short-ptr")
            _initialized = True


def target_machine(arch: str) -> llvm.TargetMachine:
    _init()
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    return target.create_target_machine(cpu=arch, features=PTX_FEATURES, opt=3)


def tensor_map_params(text: str) -> str:
    """Kernel parameters holding TMA tensor maps (named tc_tma_<k> by lower_module) become
    `.param .align 64 .b8 [128]`: a byval [128 x i8] aligned to 64, and "nvvm.grid_constant" so
    that the kernel reads the parameter where it lies (the copies need its param-space address,
    not the local copy LLVM would make of a byval argument)."""

    def mark(m: re.Match[str]) -> str:
        return re.sub(r'ptr (?:noundef )?(%"?tc_tma_\d+"?)', r'ptr byval([128 x i8]) align 64 "nvvm.grid_constant" \1',
                      m.group(0))

    return re.sub(r"^define ptx_kernel .*$", mark, text, flags=re.M)


def llvm_text(module: ir.Module | str, num_warps: int | None = None, cluster: int | None = None) -> str:
    """The module's text, with the launch bound (max threads per block) of every kernel and, for
    a kernel launched in clusters, the cluster's shape (.reqnctapercluster)."""
    text = tensor_map_params(str(module))
    nw = num_warps if num_warps is not None else getattr(module, "tc_num_warps", None)
    ctas = cluster if cluster is not None else int(getattr(module, "tc_cluster", 1))
    if nw is None:
        return text
    shape = f', !"cluster_dim_x", i32 {ctas}, !"cluster_dim_y", i32 1, !"cluster_dim_z", i32 1' if ctas > 1 else ""
    kernels = re.findall(r'define ptx_kernel void @"?([\w.$]+)"?\(', text)
    if kernels:
        # .minnctapersm 1 next to .maxntid: without it ptxas aims for full occupancy and caps the
        # registers low enough to spill in kernels that need 50-64 registers per thread
        md = ", ".join(f"!{i + 1000}" for i in range(len(kernels)))
        text += f"\n!nvvm.annotations = !{{{md}}}\n"
        for i, k in enumerate(kernels):
            text += f'!{i + 1000} = !{{ptr @"{k}", !"maxntidx", i32 {32 * nw}, !"minctasm", i32 1{shape}}}\n'
    return text


def optimize(text: str, arch: str) -> llvm.ModuleRef:
    tm = target_machine(arch)
    mod = llvm.parse_assembly(text)
    mod.triple = "nvptx64-nvidia-cuda"
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def emit_ptx(module: ir.Module | str, arch: str = "sm_90", num_warps: int | None = None) -> str:
    """PTX for `arch` of an llvmlite module (or LLVM IR text), optimised at O3, with the rewrites
    of tc_nvptx.ptx_fixups that keep ptxas from miscompiling it."""
    text = module if isinstance(module, str) else llvm_text(module, num_warps)
    mod = optimize(text, arch)
    return fix_ptx(str(target_machine(arch).emit_assembly(mod)))


def optimized_llvm(module: ir.Module | str, arch: str = "sm_90", num_warps: int | None = None) -> str:
    text = module if isinstance(module, str) else llvm_text(module, num_warps)
    return str(optimize(text, arch))
