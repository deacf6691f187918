"""Tensor maps of TMA copies: encoded at launch from the kernel's arguments, passed by value.

A kernel compiled with TMA copies (tc_opt.tma; `CompiledKernel.tensor_maps`) takes, after the
user's parameters, one 128-byte CUtensorMap per copied matrix (`.param .align 64 .b8 [128]`, read
in place by the kernel: cheaper than a map in global memory, which would need its own upload and a
prefetch). Each map describes a row-major matrix: its base pointer (an argument), its extents per
dimension, contiguous first (an argument plus a constant, or a constant: the mask's bound; outside
them TMA reads zeros, which is what the masked load read), the byte stride of its rows (an
argument times a multiplier), the box one copy moves and the swizzle, which matches the one wgmma
reads the shared buffer with. Maps of rank 3 to 5 have outer dimensions of box 1 (a batch index
with its stride argument); an outer stride of 0 (an operand broadcast over the batch, read at
coordinate 0) is encoded as extent 1, stride 16 bytes.

Encoding is a driver call (cuTensorMapEncodeTiled): `TensorMapCache` keeps the bytes per (map,
address, extents, stride), so repeated launches on the same tensors only look them up.
`TmaArgPacker` is the ArgPacker of such a kernel: its parameter array has one more entry per
map, pointing at a 64-byte aligned host copy of the map for the launch's arguments, which each
`pack` brings up to date.
"""

from __future__ import annotations

import ctypes
import operator
import struct
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import TcLaunchError
from .signature import ArgPacker, Signature

#: Bytes of a CUtensorMap.
MAP_BYTES = 128
#: CUtensorMapDataType of each element kind.
DATA_TYPES = {"f16": 6, "f32": 7, "bf16": 9}
ELEMENT_BYTES = {"f16": 2, "f32": 4, "bf16": 2}
#: CUtensorMapSwizzle of each swizzle width in bytes.
SWIZZLES = {32: 1, 64: 2, 128: 3}
#: CU_TENSOR_MAP_L2_PROMOTION_L2_128B: a miss in L2 fetches the 128-byte line of the box's row.
#: With 256 bytes (Triton's maps; tc's until the thirty-eighth session) rows 16 bytes but not 32
#: apart (4104, 5000, 3000 halves) fetched and moved more than they used. H100, fp16 TFLOPS forced,
#: 256 -> 128 bytes: 4104^3 192x192 p,s,m,g1 563 -> 597, without multicast 448 -> 523; 5000^3
#: 128x256 p,s,o,m 561 -> 564-602, 256x160 p 425 -> 482-498; 3000^3 192x192 g1 556-560 -> 586-591;
#: rows 32 bytes apart (4096^3, 4112^3, 8192^3) the same within the noise.
L2_PROMOTION = 2
#: CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros outside the tensor.
OOB_FILL_ZEROS = 0
#: CUDA_ERROR_INVALID_CONTEXT: cuTensorMapEncodeTiled in a thread with no current context.
INVALID_CONTEXT = 201
#: The largest extent a map may have (cuTensorMapEncodeTiled: at most 2^32).
MAX_EXTENT = 1 << 32
#: Argument values a packer remembers the placed bytes of, per map (forgotten all at once beyond).
PLACED_PER_MAP = 64


def map_geometry(spec: Mapping[str, Any], args: Sequence[object]) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(base address, extents contiguous first, byte strides of the outer dimensions) of one map
    for these (normalized) arguments; raises TcLaunchError when TMA cannot describe them (the
    compiler only emits TMA for arguments specialized as 16-byte aligned, so this is a guard)."""
    element = str(spec["element"])
    eb = ELEMENT_BYTES[element]
    base = int(args[int(spec["base"])])  # type: ignore[call-overload]
    ext = list(spec["extents"])
    extents = []
    for arg, offset in zip(ext[::2], ext[1::2]):
        value = (int(args[arg]) if arg >= 0 else 0) + int(offset)  # type: ignore[call-overload]
        extents.append(min(max(value, 1), MAX_EXTENT))  # (an empty matrix: no copy is issued)
    st = list(spec["stride"])
    strides = []
    for d, (arg, mult) in enumerate(zip(st[::2], st[1::2]), start=1):
        stride = ((int(args[arg]) if arg >= 0 else 1) * int(mult)) * eb  # type: ignore[call-overload]
        if stride == 0 and d >= 2:
            # an outer (batch) dimension of stride 0: the kernel reads coordinate 0 there
            # (tc_opt.pipeline_tma.outer_coordinate); TMA wants a positive stride
            stride, extents[d] = 16, 1
        strides.append(stride)
    if base % 16 or any(s % 16 or s <= 0 or s >= 1 << 40 for s in strides):
        raise TcLaunchError(f"a TMA tensor map needs a 16-byte aligned base and row strides that are positive "
                            f"multiples of 16 bytes (base {base:#x}, strides {strides})")
    return base, tuple(extents), tuple(strides)


def _as_bytes(tensor_map: Any) -> bytes:
    """The 128 bytes of cuda-python's CUtensorMap (or of a bytes-like fake)."""
    if isinstance(tensor_map, (bytes, bytearray)):
        return bytes(tensor_map)
    get_ptr = getattr(tensor_map, "getPtr", None)
    if callable(get_ptr):
        return ctypes.string_at(int(get_ptr()), MAP_BYTES)
    return struct.pack(f"{MAP_BYTES // 8}Q", *(int(x) for x in tensor_map.opaque))


def encode(cu: Any, spec: Mapping[str, Any], base: int, extents: Sequence[int], strides: Sequence[int],
           make_current: Callable[[], None] | None = None) -> bytes:
    """cuTensorMapEncodeTiled for one map (driver module `cu`); the 128 bytes of the map. In a
    thread that has no current context yet (one that never used CUDA: the driver refuses to
    encode there), `make_current` sets the kernel's device's and the encoding is tried again."""
    box = [int(b) for b in spec["box"]]
    rank = len(extents)

    def enum(name: str, value: int) -> Any:
        cls = getattr(cu, name, None)
        return cls(value) if cls is not None else value

    u32, u64 = getattr(cu, "cuuint32_t", int), getattr(cu, "cuuint64_t", int)  # cuda-python's own ints

    def call() -> Any:
        return cu.cuTensorMapEncodeTiled(
            enum("CUtensorMapDataType", DATA_TYPES[str(spec["element"])]), u32(rank), base,
            [u64(e) for e in extents], [u64(s) for s in strides], [u32(b) for b in box], [u32(1)] * rank,
            enum("CUtensorMapInterleave", 0), enum("CUtensorMapSwizzle", SWIZZLES[int(spec["swizzle"])]),
            enum("CUtensorMapL2promotion", L2_PROMOTION), enum("CUtensorMapFloatOOBfill", OOB_FILL_ZEROS))

    res = call()
    if make_current is not None and int(res[0]) == INVALID_CONTEXT:
        make_current()
        res = call()
    err, tensor_map = res[0], res[1]
    if err:
        raise TcLaunchError(f"cuTensorMapEncodeTiled failed ({err}) for a map of {spec['element']} at {base:#x}, "
                            f"extents {list(extents)}, strides {list(strides)}, box {box}")
    return _as_bytes(tensor_map)


class TensorMapCache:
    """Encoded maps by (map spec, address, extents, strides), the least recently used dropped first.
    `make_current` sets the context of the kernel's device (`encode`)."""

    def __init__(self, cu: Any, capacity: int = 256, make_current: Callable[[], None] | None = None) -> None:
        self.cu = cu
        self.capacity = capacity
        self.make_current = make_current
        self._maps: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()
        self.encoded = 0  # driver calls made (tests read it)

    def get(self, spec: Mapping[str, Any], args: Sequence[object]) -> bytes:
        base, extents, strides = map_geometry(spec, args)
        key = (str(spec["element"]), tuple(spec["box"]), int(spec["swizzle"]), base, extents, strides)
        found = self._maps.get(key)
        if found is not None:
            self._maps.move_to_end(key)
            return found
        data = encode(self.cu, spec, base, extents, strides, self.make_current)
        self.encoded += 1
        self._maps[key] = data
        if len(self._maps) > self.capacity:
            self._maps.popitem(last=False)
        return data


class PlacedMap:
    """One encoded map in a 64-byte aligned host buffer of its own, which a parameter points at."""

    __slots__ = ("buffer", "address")

    def __init__(self, data: bytes) -> None:
        self.buffer = ctypes.create_string_buffer(MAP_BYTES + 64)
        self.address = ctypes.addressof(self.buffer) + (-ctypes.addressof(self.buffer) % 64)
        ctypes.memmove(self.address, data, MAP_BYTES)


class TmaArgPacker(ArgPacker):
    """The argument packer of a kernel with tensor maps: the user's arguments as ArgPacker packs
    them, then one pointer per map to a 64-byte aligned host copy of it, brought up to date by
    every `pack` (so launch paths that call `pack`, as they do for `_always_normalize` packers,
    need nothing else).

    Each map's copies are kept by the values of the arguments it is made of (`PLACED_PER_MAP` of
    them): a launch on tensors seen before points the parameter at their copy again, without
    deriving the map (`map_geometry`, TensorMapCache) or copying its bytes. tc_torch.matmul's
    output is a new tensor per call, whose address alternates between two in a loop; re-deriving
    the three maps of the 4096^3 persistent matmul cost that launch 10 us of host time on top of
    2 (the simulated driver, tools/bench_launch_host.py)."""

    def __init__(self, sig: Signature, maps: Sequence[Mapping[str, Any]], cache: TensorMapCache) -> None:
        super().__init__(sig)
        self.maps = [dict(m) for m in maps]
        self.cache = cache
        n = len(self.maps)
        empty = PlacedMap(bytes(MAP_BYTES))  # (until the first pack)
        user = list(self.pointers)[: len(sig.kinds)]
        self._first_map = len(user)
        self.pointers = (ctypes.c_void_p * max(len(user) + n, 1))(*user, *[empty.address] * n)
        self.address = ctypes.addressof(self.pointers)
        self._always_normalize = True  # every launch goes through `pack`
        # each map's arguments; the values all maps were last placed for (a launch with the same
        # values, the common case, leaves them in place), and each map's own
        per_map = [sorted({int(i) for i in [m["base"], *list(m["extents"])[::2], *list(m["stride"])[::2]]
                           if int(i) >= 0}) for m in self.maps]
        used = sorted({i for args in per_map for i in args})
        self._map_args = operator.itemgetter(*used, *used[:1])  # (always a tuple)
        self._map_key: tuple[object, ...] | None = None
        self._own_args = [operator.itemgetter(*args, *args[:1]) for args in per_map]
        self._own_key: list[tuple[object, ...] | None] = [None] * n
        self._placed: list[dict[tuple[object, ...], PlacedMap]] = [{} for _ in range(n)]
        self._in_place = [empty] * n  # (what the parameters point at, kept alive)
        # the raw arguments pack directly when every pointer is an int (no bf16 scalar to convert)
        self._raw_ok = not sig._has_bf16
        self._pointer_args = tuple(sig.pointer_indices)

    def another(self) -> TmaArgPacker:
        """Buffers and a map cache of its own (another thread's launches)."""
        cache = TensorMapCache(self.cache.cu, self.cache.capacity, self.cache.make_current)
        return TmaArgPacker(self.sig, self.maps, cache)

    def pack(self, args: Sequence[object]) -> int:
        """Pack the caller's arguments: as they are when the pointers are ints and struct takes
        the rest (a launch's host time is mostly this; `Signature.normalize` costs microseconds),
        else normalized first."""
        if self._raw_ok:
            for i in self._pointer_args:
                if type(args[i]) is not int:
                    break
            else:
                try:
                    self._pack_into(self.buffer, 0, *args)
                except struct.error:
                    pass
                else:
                    self._place_maps(args)
                    return self.address
        return self.pack_normalized(self.sig.normalize(args))

    def pack_normalized(self, values: Sequence[object]) -> int:
        self._pack_into(self.buffer, 0, *values)
        self._place_maps(values)
        return self.address

    def _place_maps(self, values: Sequence[object]) -> None:
        """Point the map parameters at copies of the maps for these argument values."""
        key = self._map_args(values)
        if key == self._map_key:
            return
        self._map_key = None  # (until every map is in place: a failed encoding leaves it unknown)
        for k, own in enumerate(self._own_args):
            own_key = own(values)
            if own_key == self._own_key[k]:
                continue
            placed = self._placed[k]
            found = placed.get(own_key)
            if found is None:
                found = PlacedMap(self.cache.get(self.maps[k], values))
                if len(placed) >= PLACED_PER_MAP:
                    placed.clear()
                placed[own_key] = found
            self._in_place[k] = found
            self.pointers[self._first_map + k] = found.address
            self._own_key[k] = own_key
        self._map_key = key

    def map_bytes(self, k: int) -> bytes:
        """The map now in parameter k (after the user's), as the kernel will read it."""
        return ctypes.string_at(self._in_place[k].address, MAP_BYTES)


def packer_for(sig: Signature, maps: Sequence[Mapping[str, Any]], cu: Any,
               cache: TensorMapCache | None = None,
               make_current: Callable[[], None] | None = None) -> ArgPacker:
    """The packer a launch of a kernel with these tensor maps needs (a plain ArgPacker when none);
    `make_current` sets the kernel's device's context for an encoding in a thread without one."""
    if not maps:
        return sig.packer()
    return TmaArgPacker(sig, maps, cache or TensorMapCache(cu, make_current=make_current))


__all__ = ["MAP_BYTES", "PlacedMap", "TensorMapCache", "TmaArgPacker", "encode", "map_geometry", "packer_for"]
