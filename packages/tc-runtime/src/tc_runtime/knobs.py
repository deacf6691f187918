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


def always_compile() -> bool:
    """TC_ALWAYS_COMPILE=1: never read compiled kernels from the disk cache (still write them)."""
    return _flag("TC_ALWAYS_COMPILE")


def disable_cache() -> bool:
    """TC_DISABLE_CACHE=1: neither read nor write the disk cache."""
    return _flag("TC_DISABLE_CACHE")
