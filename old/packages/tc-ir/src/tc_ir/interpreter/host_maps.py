"""Which host addresses this process has mapped, for the interpreter's raw pointer accesses.

An integer pointer that no registered buffer covers is read or written through ctypes; an
address the process has not mapped (a stale or made-up number, a device pointer given to a CPU
kernel) would then end the process with a segmentation fault. On Linux the interpreter checks
the pages of every such access against /proc/self/maps first (read again when an address is not
found, since the program may have mapped memory since) and reports the access instead. Elsewhere
the check is not available and raw accesses are taken on trust, as in C.
"""

from __future__ import annotations

import os

import numpy as np

from .dtypes import Array

MAPS = "/proc/self/maps"
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class HostMaps:
    """The readable and writable address ranges of this process (read lazily, then on a miss)."""

    def __init__(self, path: str = MAPS) -> None:
        self.path = path
        self.available = os.path.exists(path)
        self._starts = np.zeros(0, dtype=np.uint64)
        self._ends = np.zeros(0, dtype=np.uint64)
        self._readable = np.zeros(0, dtype=bool)
        self._writable = np.zeros(0, dtype=bool)
        self._loaded = False

    def _load(self) -> None:
        starts, ends, readable, writable = [], [], [], []
        with open(self.path) as f:
            for line in f:
                parts = line.split(maxsplit=2)
                if len(parts) < 2:
                    continue
                lo, _, hi = parts[0].partition("-")
                starts.append(int(lo, 16))
                ends.append(int(hi, 16))
                readable.append(parts[1][:1] == "r")
                writable.append(parts[1][1:2] == "w")
        order = np.argsort(np.array(starts, dtype=np.uint64), kind="stable")
        self._starts = np.array(starts, dtype=np.uint64)[order]
        self._ends = np.array(ends, dtype=np.uint64)[order]
        self._readable = np.array(readable, dtype=bool)[order]
        self._writable = np.array(writable, dtype=bool)[order]
        self._loaded = True

    def _bad(self, pages: Array, write: bool) -> Array:
        """Which page addresses lie in no mapping that allows the access."""
        if not len(self._starts):
            return np.ones(pages.shape, dtype=bool)
        idx = np.searchsorted(self._starts, pages, side="right").astype(np.int64) - 1
        safe = np.maximum(idx, 0)
        allowed = self._writable if write else self._readable
        ok = (idx >= 0) & (pages < self._ends[safe]) & allowed[safe]
        bad: Array = ~ok
        return bad

    def first_unmapped(self, addrs: Array, size: int, write: bool) -> int | None:
        """The position in `addrs` of the first access of `size` bytes the process cannot make
        (nothing mapped there, or mapped without the permission), or None when all can be made
        or the check is not available."""
        if not self.available or addrs.size == 0:
            return None
        a = addrs.astype(np.uint64)
        pages = np.unique(np.concatenate([a, a + np.uint64(size - 1)]) & ~np.uint64(PAGE - 1))
        if self._loaded and not self._bad(pages, write).any():
            return None
        try:  # first use, or memory mapped since the last reading
            self._load()
        except OSError:
            self.available = False
            return None
        if not self._bad(pages, write).any():
            return None
        bad_first = self._bad(a & ~np.uint64(PAGE - 1), write)
        bad_last = self._bad((a + np.uint64(size - 1)) & ~np.uint64(PAGE - 1), write)
        return int(np.argmax(bad_first | bad_last))
