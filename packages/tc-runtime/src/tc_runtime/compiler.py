"""The bridge to the compiler packages (the `tc-runtime[jit]` extra), imported lazily.

Also computes the compiler's fingerprint for cache keys: the versions and a hash of the sources of
every compiler package, llvmlite's and LLVM's versions and the ptxas version, so that any change of
the toolchain gives new keys (Triton's cache bugs were missing ingredients; we hash them all).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .binary import KernelBinary

COMPILER_PACKAGES = ("tc_lang", "tc_ir", "tc_opt", "tc_nvptx")


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"compiling Triton-C source needs the tc compiler ({name} is missing: {exc}); "
            f"install tc-runtime[jit]") from None


def require(name: str, attribute: str) -> Any:
    """`name.attribute` from a compiler package, with a clear error if it is not there yet."""
    module = _import(name)
    value = getattr(module, attribute, None)
    if value is None:
        raise ImportError(f"{name}.{attribute} is not available in this version of {name}")
    return value


def _package_hash(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return "missing"
    h = hashlib.sha256()
    for root in spec.submodule_search_locations:
        base = Path(root)
        for path in sorted(base.rglob("*")):
            if path.suffix in (".py", ".json", ".txt", ".bc", ".ll") and path.is_file():
                h.update(str(path.relative_to(base)).encode())
                h.update(b"\0")
                h.update(path.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def ptxas_version() -> str:
    """`ptxas --version`'s last line, or "none" (then only PTX is produced)."""
    exe = os.environ.get("TC_PTXAS_PATH") or shutil.which("ptxas")
    if not exe:
        return "none"
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
        lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
        return lines[-1].strip() if lines else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@functools.lru_cache(maxsize=1)
def fingerprint() -> dict[str, str]:
    """Everything about the toolchain that can change a compiled kernel (computed once)."""
    out: dict[str, str] = {}
    for name in COMPILER_PACKAGES + ("tc_runtime",):
        try:
            version = str(getattr(importlib.import_module(name), "__version__", "?"))
        except ImportError:
            version = "missing"
        out[name] = f"{version}:{_package_hash(name)}"
    try:
        import llvmlite
        import llvmlite.binding as llvm

        out["llvmlite"] = str(llvmlite.__version__)
        out["llvm"] = ".".join(str(v) for v in llvm.llvm_version_info)
    except (ImportError, AttributeError):
        out["llvmlite"] = "missing"
    out["ptxas"] = ptxas_version()
    return out


def compile_source(source: str, *, defines: Mapping[str, str], kernel: str | None, arch: str,
                   num_warps: int, num_stages: int,
                   specialization: tuple[str | None, ...] | None,
                   filename: str) -> KernelBinary:
    """Source -> KernelBinary through tc_nvptx.compile (raises TcCompileError for user errors)."""
    compile_fn = require("tc_nvptx", "compile")
    options_cls = require("tc_opt", "CompileOptions")
    options = options_cls(arch=arch, num_warps=num_warps, num_stages=num_stages,
                          specialization=specialization)
    ck = compile_fn(source, defines=dict(defines), kernel=kernel, options=options,
                    filename=filename)
    return KernelBinary.from_compiled(ck)


def lower_source(source: str, *, defines: Mapping[str, str], kernel: str | None,
                 filename: str) -> Any:
    """Source -> the tc_ir Function of the kernel (front end + lowering; no optimisation)."""
    frontend = require("tc_lang", "frontend")
    lower = _lower_fn()
    unit = frontend(source, dict(defines), filename=filename)
    module = lower(unit, kernel)
    if not module.functions:
        raise ValueError("the source defines no __global__ kernel")
    if kernel is not None:
        return module.function(kernel)
    return module.functions[0]


def _lower_fn() -> Any:
    tc_ir = _import("tc_ir")
    fn = getattr(tc_ir, "lower", None)
    if callable(fn):
        return fn
    module = _import("tc_ir.lower")
    fn = getattr(module, "lower", None)
    if not callable(fn):
        raise ImportError("tc_ir.lower is not available in this version of tc_ir")
    return fn
