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
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .binary import KernelBinary

COMPILER_PACKAGES = ("tc_lang", "tc_ir", "tc_opt", "tc_nvptx")
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include", re.MULTILINE)


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


#: The files of a compiler package whose content goes into its hash.
_HASHED_SUFFIXES = (".py", ".json", ".txt", ".bc", ".ll")


def _package_files(base: str) -> list[tuple[str, str]]:
    """(path relative to `base` with "/" separators, full path) of the hashed files under `base`,
    sorted; os.scandir, not pathlib: a new process computes this before finding a cached kernel,
    and pathlib's objects cost it about 10 ms over five packages."""
    out: list[tuple[str, str]] = []
    todo = [("", base)]
    while todo:
        rel, path = todo.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                name = f"{rel}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        todo.append((f"{name}/", entry.path))
                elif entry.name.endswith(_HASHED_SUFFIXES) and entry.is_file():
                    out.append((name, entry.path))
    return sorted(out)


def _package_hash(name: str) -> str:
    """sha256 over the relative paths and contents of a package's source and data files."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return "missing"
    h = hashlib.sha256()
    for root in spec.submodule_search_locations:
        if not os.path.isdir(root):
            continue
        for rel, path in _package_files(root):
            h.update(rel.encode())
            h.update(b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def _start_ptxas_version() -> subprocess.Popen[str] | str:
    """`ptxas --version` started (its answer read by `_ptxas_version`), or the answer when there is
    none to run: "none" (then only PTX is produced) or "unknown"."""
    exe = os.environ.get("TC_PTXAS") or shutil.which("ptxas")
    if not exe:
        return "none"
    try:
        return subprocess.Popen([exe, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return "unknown"


def _ptxas_version(started: subprocess.Popen[str] | str) -> str:
    """`ptxas --version`'s last line (see `_start_ptxas_version`)."""
    if isinstance(started, str):
        return started
    try:
        out, _ = started.communicate(timeout=30)
    except subprocess.SubprocessError:
        started.kill()
        started.communicate()
        return "unknown"
    lines = [ln for ln in out.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "unknown"


def _llvmlite_fingerprint() -> str:
    """llvmlite's version text and the size/mtime of its LLVM library, without importing it
    (importing llvmlite costs a new process tens of milliseconds it may not need)."""
    spec = importlib.util.find_spec("llvmlite")
    if spec is None or not spec.submodule_search_locations:
        return "missing"
    base = Path(next(iter(spec.submodule_search_locations)))
    parts = []
    for rel in ("_version.py", "binding/libllvmlite.so", "binding/llvmlite.dll",
                "binding/libllvmlite.dylib"):
        path = base / rel
        if path.is_file():
            st = path.stat()
            data = path.read_bytes() if rel.endswith(".py") else b""
            parts.append(f"{rel}:{st.st_size}:{st.st_mtime_ns}:{_sha(data)}")
    return ";".join(parts) or "unknown"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=1)
def fingerprint() -> dict[str, str]:
    """Everything about the toolchain that can change a compiled kernel (computed once per
    process, in a few milliseconds: no compiler package is imported)."""
    started = _start_ptxas_version()  # (it runs while the packages are hashed)
    out: dict[str, str] = {}
    for name in COMPILER_PACKAGES + ("tc_runtime",):
        out[name] = _package_hash(name)
    out["llvmlite"] = _llvmlite_fingerprint()
    out["ptxas"] = _ptxas_version(started)
    return out


def cache_source(source: str, defines: Mapping[str, str], filename: str) -> str:
    """What of the source goes into cache keys: the source itself, or, when it #includes other
    files, the preprocessed text and every file it read (so that editing an included header gives
    a new key). Sources without #include skip the preprocessor: a new process finds its cached
    kernel without importing the front end."""
    if not _INCLUDE.search(source):
        return source
    preprocess = require("tc_lang", "preprocess")
    pre = preprocess(source, dict(defines), filename=filename)
    files = "".join(f"\0{name}\0{text}" for name, text in sorted(dict(pre.sources).items()))
    return f"{pre.text}\0{_sha(files.encode())}"


def compile_error_types() -> tuple[type[BaseException], ...]:
    """The compiler's user-error class (TcCompileError and its subclasses such as
    TcResourceError), for the auto-tuner to skip a configuration that fails to compile."""
    try:
        return (require("tc_lang.diagnostics", "TcCompileError"),)
    except ImportError:
        return ()


def compile_source(source: str, *, defines: Mapping[str, str], kernel: str | None, arch: str,
                   num_warps: int, num_stages: int,
                   specialization: tuple[str | None, ...] | None,
                   filename: str, options: Mapping[str, object] | None = None) -> KernelBinary:
    """Source -> KernelBinary through tc_nvptx.compile (raises TcCompileError for user errors).
    `options`: extra tc_opt.CompileOptions fields (fp32_dot, precise_math)."""
    compile_fn = require("tc_nvptx", "compile")
    options_cls = require("tc_opt", "CompileOptions")
    options = options_cls(arch=arch, num_warps=num_warps, num_stages=num_stages,
                          specialization=specialization, **dict(options or {}))
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
