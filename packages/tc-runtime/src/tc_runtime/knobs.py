"""Environment knobs of the runtime, read in one place (at call time, so tests can change them)."""

from __future__ import annotations

import os
from pathlib import Path


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def cache_dir() -> Path:
    """TC_CACHE_DIR, else the per-user cache directory of the platform (…/tc)."""
    explicit = os.environ.get("TC_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("TC_HOME")
    if home:
        return Path(home).expanduser() / "cache"
    try:
        import platformdirs
    except ImportError:  # a bare deployment: the XDG default
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "tc"
    return Path(platformdirs.user_cache_dir("tc", appauthor=False))


def _dir(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser() if value else None


def kernel_dump_dir() -> Path | None:
    """TC_KERNEL_DUMP_DIR: the folder where the runtime writes the PTX of every kernel it compiles
    or reads from the disk cache, as NAME-KEY.ptx (build.kernel_file_name), to read, or to edit
    and load back through TC_KERNEL_OVERRIDE_DIR."""
    return _dir("TC_KERNEL_DUMP_DIR")


def kernel_override_dir() -> Path | None:
    """TC_KERNEL_OVERRIDE_DIR: a kernel whose NAME-KEY.ptx lies in this folder is loaded from that
    PTX (the driver compiles it) instead of the compiler's: a hand-edited kernel timed in place of
    its original. Nothing from it reaches the disk cache."""
    return _dir("TC_KERNEL_OVERRIDE_DIR")


def compile_workers() -> int:
    """TC_COMPILE_WORKERS=N: how many processes compile an auto-tuned kernel's configurations at
    once before it is timed (tc_runtime.precompile); 0 or 1 compiles them one by one in this
    process. By default one per CPU core, at most 8 (the caller only waits for them)."""
    value = os.environ.get("TC_COMPILE_WORKERS", "").strip()
    if not value:
        return max(1, min(8, os.cpu_count() or 1))
    try:
        workers = int(value)
    except ValueError:
        workers = -1
    if workers < 0:
        raise ValueError(f"TC_COMPILE_WORKERS must be a whole number of processes (0 or more), got {value!r}")
    return workers


def always_compile() -> bool:
    """TC_ALWAYS_COMPILE=1: never read compiled kernels from the disk cache (still write them)."""
    return _flag("TC_ALWAYS_COMPILE")


def disable_cache() -> bool:
    """TC_DISABLE_CACHE=1: neither read nor write the disk cache."""
    return _flag("TC_DISABLE_CACHE")


def launch_backend() -> str:
    """TC_LAUNCH_BACKEND: "cuda-python" (default: every driver call through cuda-python) or
    "ctypes" (libcuda's cuLaunchKernel called through ctypes on the launch path only).

    Measured on an H100 (2026-11-22, BENCHMARKS.md) both cost the same per launch (6.37 and
    6.34 us), so the default is the one driver API the rest of the runtime uses."""
    value = os.environ.get("TC_LAUNCH_BACKEND", "cuda-python").strip().lower()
    return "ctypes" if value == "ctypes" else "cuda-python"


def print_autotuning() -> bool:
    """TC_PRINT_AUTOTUNING=1: print each configuration's time (or why it was skipped) and the
    choice, on stderr."""
    return _flag("TC_PRINT_AUTOTUNING")


def retune() -> bool:
    """TC_RETUNE=1: time the configurations again where a choice is remembered on disk (and
    remember the new one); compiled kernels still come from the cache. One tuning's choice among
    configurations within a few percent of each other follows the GPU's state at the time."""
    return _flag("TC_RETUNE")


def skip_autotuning() -> bool:
    """TC_SKIP_AUTOTUNING=1: launch the first configuration without timing the others."""
    return _flag("TC_SKIP_AUTOTUNING")
