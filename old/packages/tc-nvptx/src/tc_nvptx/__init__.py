"""tc-nvptx: laid-out tile IR -> LLVM IR (llvmlite) -> PTX -> cubin, and the tcc CLI."""

from __future__ import annotations

from .compiler import CompiledKernel, compile, compile_module, frontend_module
from .emit import emit_ptx
from .lower_module import lower_to_llvm
from .ptxas import PtxasError, PtxasInfo, assemble

__version__ = "0.1.0"

__all__ = [
    "CompiledKernel",
    "PtxasError",
    "PtxasInfo",
    "assemble",
    "compile",
    "compile_module",
    "emit_ptx",
    "frontend_module",
    "lower_to_llvm",
]
