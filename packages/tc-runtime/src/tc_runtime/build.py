"""Compiling through the disk cache, without a device: what a kernel object does for each
(configuration, specialization), also usable ahead of time (`tc_runtime.build`).

Concurrent processes compiling the same kernel each compile and publish their entry atomically;
the first one published wins and the others keep it (see `cache.KernelCache.put`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from . import compiler, knobs
from .binary import KernelBinary
from .cache import KernelCache, cache_key
from .options import (check_name_and_filename, check_num_stages, check_num_warps, compile_options,
                      normalize_defines)

#: Bump when the layout of cache records written by the runtime changes.
RECORD_VERSION = 3


def base_key(source_for_key: str, filename: str, name: str | None,
             defines: Mapping[str, str], options: Mapping[str, object] | None = None
             ) -> dict[str, Any]:
    """The cache-key components shared by everything compiled from one source, defines and
    compiler options (see `options.compile_options`)."""
    key: dict[str, Any] = {"source": source_for_key, "filename": filename, "kernel": name,
                           "defines": sorted(defines.items()), "toolchain": compiler.fingerprint(),
                           "record": RECORD_VERSION}
    if options:
        key["options"] = sorted(options.items())
    return key


def kernel_key(base: Mapping[str, Any], arch: str, num_warps: int, num_stages: int,
               spec: Sequence[str | None]) -> str:
    return cache_key({**base, "what": "kernel", "arch": arch, "num_warps": num_warps,
                      "num_stages": num_stages, "specialization": list(spec)})


def source_kernel_key(source: str, *, filename: str, name: str | None, defines: Mapping[str, str], arch: str,
                      num_warps: int, num_stages: int, spec: Sequence[str | None],
                      options: Mapping[str, object] | None = None) -> str:
    """The cache key of one kernel compiled from `source` (kernel_key over its base_key)."""
    base = base_key(compiler.cache_source(source, defines, filename), filename, name, defines, options)
    return kernel_key(base, arch, num_warps, num_stages, spec)


def compile_cached(source: str, *, filename: str, name: str | None, defines: Mapping[str, str],
                   arch: str, num_warps: int, num_stages: int, spec: Sequence[str | None],
                   base: Mapping[str, Any] | None = None,
                   options: Mapping[str, object] | None = None) -> KernelBinary:
    """The compiled kernel from the disk cache, or compiled now and stored. `options` are the
    extra compiler options (`options.compile_options`); `base`, when given, must include them."""
    binary, key = cached_binary(source, filename=filename, name=name, defines=defines, arch=arch,
                                num_warps=num_warps, num_stages=num_stages, spec=spec, base=base,
                                options=options)
    return dumped_or_overridden(binary, key)


def cached_binary(source: str, *, filename: str, name: str | None, defines: Mapping[str, str],
                  arch: str, num_warps: int, num_stages: int, spec: Sequence[str | None],
                  base: Mapping[str, Any] | None = None,
                  options: Mapping[str, object] | None = None) -> tuple[KernelBinary, str]:
    """compile_cached's kernel and cache key, before TC_KERNEL_DUMP_DIR / TC_KERNEL_OVERRIDE_DIR
    (tc_runtime.precompile's workers fill the cache through this alone)."""
    key = kernel_key(base, arch, num_warps, num_stages, spec) if base is not None else \
        source_kernel_key(source, filename=filename, name=name, defines=defines, arch=arch, num_warps=num_warps,
                          num_stages=num_stages, spec=spec, options=options)
    cache = None if knobs.disable_cache() else KernelCache()
    binary = cache.get(key) if cache is not None and not knobs.always_compile() else None
    if binary is None:
        binary = compiler.compile_source(source, defines=defines, kernel=name, arch=arch,
                                         num_warps=num_warps, num_stages=num_stages,
                                         specialization=tuple(spec), filename=filename,
                                         options=options)
        if cache is not None:
            cache.put(key, binary)
    return binary, key


def kernel_file_name(name: str, key: str) -> str:
    """The file of a kernel in TC_KERNEL_DUMP_DIR and TC_KERNEL_OVERRIDE_DIR: its name and the
    first 16 hex digits of its cache key (one per source, defines, configuration and toolchain)."""
    return f"{name}-{key[:16]}.ptx"


def dumped_or_overridden(binary: KernelBinary, key: str) -> KernelBinary:
    """`binary`, its PTX written to TC_KERNEL_DUMP_DIR when that is set, or replaced by the PTX
    of its file in TC_KERNEL_OVERRIDE_DIR when there is one (then without a cubin: the driver
    compiles the PTX; a note on stderr names the file)."""
    file = kernel_file_name(binary.name, key)
    dump = knobs.kernel_dump_dir()
    if dump is not None:
        try:
            dump.mkdir(parents=True, exist_ok=True)
            (dump / file).write_text(binary.ptx)
        except OSError as exc:
            raise OSError(f"TC_KERNEL_DUMP_DIR: cannot write {dump / file}: {exc}") from exc
    override = knobs.kernel_override_dir()
    if override is None or not (override / file).is_file():
        return binary
    try:
        ptx = (override / file).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise OSError(f"TC_KERNEL_OVERRIDE_DIR: cannot read {override / file}: {exc}") from exc
    print(f"tc: kernel '{binary.name}' is loaded from {override / file} (TC_KERNEL_OVERRIDE_DIR)",
          file=sys.stderr)
    return attrs.evolve(binary, ptx=ptx, cubin=None, registers=None, spills=None,
                        asm={**binary.asm, "ptx": ptx})


def build(source: str, *, arch: str = "sm_90", defines: Mapping[str, object] | None = None,
          num_warps: int = 4, num_stages: int = 3, name: str | None = None,
          specialization: Sequence[str | None] | None = None,
          filename: str = "<source>", fp32_dot: str = "ieee",
          precise_math: bool = False, tma: bool = True,
          tma_store: bool = False) -> KernelBinary:
    """Compile one kernel ahead of time (through the disk cache) for `arch`; no GPU needed.
    `specialization` holds one entry per argument ("divisible_by_16", "divisible_by_8",
    "equal_to_1" or None);
    by default nothing is assumed. Save it with `tc_runtime.save` and launch it anywhere with
    `tc_runtime.load`. `fp32_dot`, `precise_math`, `tma` and `tma_store` as for `tc_runtime.kernel`."""
    options = compile_options(fp32_dot, precise_math, tma, tma_store)
    check_name_and_filename(name, filename)
    fixed, axes = normalize_defines(defines)
    if axes:
        raise ValueError(f"build compiles one configuration; give single values for "
                         f"{', '.join(sorted(axes))}")
    if specialization is not None and (isinstance(specialization, (str, bytes))
                                       or not isinstance(specialization, Iterable)):
        raise TypeError(f"specialization must be a sequence with one entry per kernel argument "
                        f"('divisible_by_16', 'divisible_by_8', 'equal_to_1' or None), got "
                        f"{specialization!r}")
    spec = tuple(specialization) if specialization is not None else ()
    if specialization is None:  # (a wrong length never hits the cache: the compiler refuses it)
        sig_fn = compiler.lower_source(source, defines=fixed, kernel=name, filename=filename)
        spec = (None,) * len(sig_fn.args)
    return compile_cached(source, filename=filename, name=name, defines=fixed, arch=arch,
                          num_warps=check_num_warps(num_warps),
                          num_stages=check_num_stages(num_stages), spec=spec, options=options)
