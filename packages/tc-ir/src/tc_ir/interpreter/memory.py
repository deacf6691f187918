"""Host memory for the interpreter: pointers are byte addresses; accesses gather and scatter.

A `Memory` knows a set of registered buffers (numpy arrays, or raw host ranges such as a CPU
tensor's storage) by their real host addresses, so the integers a kernel receives as pointers are
the same ones a user would pass (`array.ctypes.data`, `tensor.data_ptr()`). Every access is checked
against those buffers. With ``allow_raw=True`` an access outside every registered buffer goes to
the raw host address through ctypes, without bounds information (for integer pointers that the
caller vouches for); an address the process has not mapped is reported, not accessed, where the
process's mappings can be read (`host_maps`), and crashes the process elsewhere, as it would in C.
"""

from __future__ import annotations

import bisect
import ctypes
from typing import Any

import numpy as np

from .dtypes import Array
from .errors import MemoryFault
from .host_maps import HostMaps


class Buffer:
    """One registered range [base, base + nbytes) with a uint8 view of its bytes."""

    __slots__ = ("base", "nbytes", "raw", "name", "owners", "_views")

    def __init__(self, base: int, nbytes: int, raw: Array, name: str, owners: list[Any]) -> None:
        self.base = base
        self.nbytes = nbytes
        self.raw = raw
        self.name = name
        self.owners = owners  # keeps the memory alive
        self._views: dict[np.dtype[Any], Array | None] = {}

    @property
    def end(self) -> int:
        return self.base + self.nbytes

    def typed(self, dtype: np.dtype[Any]) -> Array | None:
        """The buffer viewed as `dtype` elements from its base (None when base is misaligned)."""
        view = self._views.get(dtype, False)
        if view is False:
            isz = dtype.itemsize
            view = self.raw[: self.nbytes // isz * isz].view(dtype) if self.base % isz == 0 else None
            self._views[dtype] = view
        return view  # type: ignore[return-value]

    def describe(self) -> str:
        return f"buffer '{self.name}' at 0x{self.base:x} ({self.nbytes} bytes)"


#: Raw accesses below this address are refused: a null pointer (or a small offset from one);
#: no operating system maps the first page.
NULL_PAGE = 4096


def _bytes_at(address: int, nbytes: int) -> Array:
    """A writable uint8 view of raw host memory."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))


class Memory:
    """Registered host buffers addressed by byte address; bounds-checked gather/scatter."""

    def __init__(self, *, allow_raw: bool = False) -> None:
        self.allow_raw = allow_raw
        self._maps = HostMaps() if allow_raw else None
        self._buffers: list[Buffer] = []  # sorted by base, never overlapping
        self._bases: list[int] = []
        self._np_bases = np.zeros(0, dtype=np.int64)
        self._np_ends = np.zeros(0, dtype=np.int64)
        #: registered arrays of no elements, by address: nothing is addressable there, but an
        #: access through one should be reported as such, not against a neighbouring buffer
        self._empty: dict[int, str] = {}

    # ---------------------------------------------------------------------------- registration

    @property
    def buffers(self) -> list[Buffer]:
        return list(self._buffers)

    def register(self, array: Array, name: str | None = None) -> int:
        """Make a contiguous numpy array addressable; returns its address (`array.ctypes.data`)."""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"Memory.register needs a numpy array, got {type(array).__name__}")
        if not (array.flags.c_contiguous or array.flags.f_contiguous):
            raise ValueError("Memory.register needs a contiguous array (register its base instead)")
        address = int(array.ctypes.data)
        if array.nbytes == 0:
            self._add_empty(address, name)
            return address
        raw = array.ravel(order="K").view(np.uint8)
        self._add(address, int(array.nbytes), raw, name, array)
        return address

    def register_address(self, address: int, nbytes: int, name: str | None = None, owner: Any = None) -> int:
        """Make the host range [address, address + nbytes) addressable (e.g. a CPU tensor's
        storage); `owner` is kept alive as long as the memory is."""
        if address <= 0 or nbytes < 0:
            raise ValueError(f"bad host range: address 0x{address:x}, {nbytes} bytes")
        if nbytes:
            self._add(int(address), int(nbytes), _bytes_at(address, nbytes), name, owner)
        else:
            self._add_empty(int(address), name)
        return int(address)

    def _add_empty(self, address: int, name: str | None) -> None:
        self._empty[address] = name or f"buffer{len(self._buffers) + len(self._empty)}"

    def _add(self, base: int, nbytes: int, raw: Array, name: str | None, owner: Any) -> None:
        name = name or f"buffer{len(self._buffers)}"
        end = base + nbytes
        overlapping = [b for b in self._buffers if b.base < end and base < b.end]
        owners: list[Any] = [owner]
        if overlapping:
            # Views of one allocation: merge them into one range covering all.
            lo = min([base] + [b.base for b in overlapping])
            hi = max([end] + [b.end for b in overlapping])
            if lo == overlapping[0].base and hi == overlapping[0].end and len(overlapping) == 1:
                overlapping[0].owners.append(owner)
                return
            for b in overlapping:
                owners.extend(b.owners)
                self._buffers.remove(b)
            name = "+".join([b.name for b in overlapping] + [name])
            base, nbytes, raw = lo, hi - lo, _bytes_at(lo, hi - lo)
        buf = Buffer(base, nbytes, raw, name, owners)
        i = bisect.bisect_left([b.base for b in self._buffers], base)
        self._buffers.insert(i, buf)
        self._bases = [b.base for b in self._buffers]
        self._np_bases = np.array(self._bases, dtype=np.int64)
        self._np_ends = np.array([b.end for b in self._buffers], dtype=np.int64)

    def find(self, address: int) -> Buffer | None:
        """The buffer holding `address`, if any."""
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0 and address < self._buffers[i].end:
            return self._buffers[i]
        return None

    def describe(self, address: int, size: int) -> tuple[str, str | None]:
        """Where `address` lies relative to the nearest buffer, for error messages."""
        empty = [(address - base, name) for base, name in self._empty.items() if base <= address]
        if empty:  # (an offset into an empty array, when no other buffer lies nearer)
            off, name = min(empty)
            what = f"byte offset {off}" + (f" (element {off // size})" if off % size == 0 else "")
            nearer = self.describe_registered(address, size) if self._buffers else None
            if nearer is None or nearer[0] >= off:
                return f"{what} of buffer '{name}', which is empty (0 elements)", name
        if not self._buffers:
            return "no buffer is registered with the interpreter's memory", None
        best = self.describe_registered(address, size)
        assert best is not None
        return best[1], best[2]

    def describe_registered(self, address: int, size: int) -> tuple[int, str, str] | None:
        """The registered buffer (with elements) nearest to `address`: (distance in bytes, where
        the address lies relative to it, its name)."""
        if not self._buffers:
            return None
        i = bisect.bisect_right(self._bases, address) - 1
        candidates: list[tuple[int, str, Buffer]] = []
        if i >= 0:
            b = self._buffers[i]
            off = address - b.base
            what = f"byte offset {off}" + (f" (element {off // size})" if off % size == 0 else "")
            if address < b.end:
                return 0, f"{what} of {self._sized(b, size)} runs past its end", b.name
            candidates.append((address - b.end, f"{what} of {self._sized(b, size)} is past its end", b))
        if i + 1 < len(self._buffers):
            b = self._buffers[i + 1]
            d = b.base - address
            candidates.append((d, f"it lies {d} byte(s) before the start of {self._sized(b, size)}", b))
        best = min(candidates, key=lambda c: c[0])
        return best[0], best[1], best[2].name

    @staticmethod
    def _sized(b: Buffer, size: int) -> str:
        if b.nbytes % size == 0:
            return f"buffer '{b.name}' ({b.nbytes // size} elements of {size} bytes at 0x{b.base:x})"
        return b.describe()

    # ---------------------------------------------------------------------------- access

    def _fault(self, addrs: Array, position: int, size: int) -> MemoryFault:
        address = int(addrs[position])
        detail, name = self.describe(address, size)
        return MemoryFault("bounds", position, address, detail, name)

    def _plan(self, addrs: Array, size: int, write: bool
              ) -> list[tuple[Buffer | None, Array | None]]:
        """Split flat addresses by buffer: [(buffer, positions or None for all)]. Raises
        MemoryFault for misaligned addresses, (unless allow_raw) out-of-bounds ones, and raw ones
        the process cannot access (`write`: for a store)."""
        if size > 1:
            bad = addrs & (size - 1)
            if bad.any():
                pos = int(np.flatnonzero(bad)[0])
                return self._raise_align(addrs, pos, size)
        lo = int(addrs.min())
        hi = int(addrs.max())
        b = self.find(lo)
        if b is not None and hi + size <= b.end:
            return [(b, None)]
        idx = np.searchsorted(self._np_bases, addrs, side="right") - 1
        ok = (idx >= 0) & (addrs + size <= self._np_ends[np.maximum(idx, 0)]) if len(self._buffers) else (
            np.zeros(addrs.shape, dtype=bool)
        )
        plan: list[tuple[Buffer | None, Array | None]] = []
        if not ok.all():
            if not self.allow_raw:
                raise self._fault(addrs, int(np.argmin(ok)), size)
            raw = np.flatnonzero(~ok)
            null = addrs[raw] < NULL_PAGE
            if null.any():  # (ctypes would read a NULL address as a fresh zeroed buffer)
                pos = int(raw[np.argmax(null)])
                address = int(addrs[pos])
                raise MemoryFault("bounds", pos, address, f"address 0x{address % (1 << 64):x} is a null "
                                  f"pointer or an offset from one (nothing is mapped below "
                                  f"0x{NULL_PAGE:x})", None)
            assert self._maps is not None
            unmapped = self._maps.first_unmapped(addrs[raw], size, write)
            if unmapped is not None:
                pos = int(raw[unmapped])
                address = int(addrs[pos])
                raise MemoryFault("bounds", pos, address, f"address 0x{address % (1 << 64):x} is in "
                                  f"no buffer and not {'writable' if write else 'readable'} "
                                  f"memory of this process (a raw pointer that points nowhere: "
                                  f"pass the array or tensor itself)", None)
            plan.append((None, raw))
            idx = np.where(ok, idx, -1)
        for i in np.unique(idx):
            if i >= 0:
                plan.append((self._buffers[int(i)], np.flatnonzero(idx == i)))
        return plan

    def _raise_align(self, addrs: Array, pos: int, size: int) -> list[tuple[Buffer | None, Array | None]]:
        address = int(addrs[pos])
        raise MemoryFault(
            "align", pos, address, f"address 0x{address:x} is not a multiple of the {size}-byte element size",
            None,
        )

    def gather(self, addrs: Array, dtype: np.dtype[Any]) -> Array:
        """Elements of `dtype` at each of the flat int64 byte addresses `addrs`."""
        size = dtype.itemsize
        if addrs.size == 0:
            return np.zeros(0, dtype=dtype)
        plan = self._plan(addrs, size, False)
        if len(plan) == 1 and plan[0][1] is None:
            return self._read(plan[0][0], addrs, dtype)
        out = np.empty(addrs.shape, dtype=dtype)
        for buf, positions in plan:
            assert positions is not None
            out[positions] = self._read(buf, addrs[positions], dtype)
        return out

    def scatter(self, addrs: Array, values: Array) -> None:
        """Write `values` (already in storage dtype) to the flat int64 byte addresses `addrs`."""
        if addrs.size == 0:
            return
        dtype = values.dtype
        plan = self._plan(addrs, dtype.itemsize, True)
        for buf, positions in plan:
            if positions is None:
                self._write(buf, addrs, values)
            else:
                self._write(buf, addrs[positions], values[positions])

    def _read(self, buf: Buffer | None, addrs: Array, dtype: np.dtype[Any]) -> Array:
        size = dtype.itemsize
        if buf is None:
            base = int(addrs.min())
            raw = _bytes_at(base, int(addrs.max()) - base + size)
            out: Array = raw[(addrs - base)[:, None] + np.arange(size)].view(dtype).reshape(addrs.shape)
            return out
        typed = buf.typed(dtype)
        if typed is not None:
            got: Array = typed[(addrs - buf.base) // size]
            return got
        offs = (addrs - buf.base)[:, None] + np.arange(size)
        res: Array = buf.raw[offs].view(dtype).reshape(addrs.shape)
        return res

    def _write(self, buf: Buffer | None, addrs: Array, values: Array) -> None:
        size = values.dtype.itemsize
        if buf is None:
            base = int(addrs.min())
            raw = _bytes_at(base, int(addrs.max()) - base + size)
            raw[(addrs - base)[:, None] + np.arange(size)] = values.reshape(-1, 1).view(np.uint8)
            return
        typed = buf.typed(values.dtype)
        if typed is not None:
            typed[(addrs - buf.base) // size] = values
            return
        offs = (addrs - buf.base)[:, None] + np.arange(size)
        buf.raw[offs] = values.reshape(-1, 1).view(np.uint8)


def RawMemory() -> Memory:
    """A memory without registered buffers that reads and writes raw host addresses."""
    return Memory(allow_raw=True)
