"""Kernel objects: Triton-C source + defines, compiled per (configuration, argument
specialization), cached in memory and on disk, auto-tuned, launched with a grid.

    k = tc.kernel(src, device="cuda:0", defines={"TYPE": "float", "BLOCK": 1024})
    k(z_ptr, x_ptr, y_ptr, N, grid=lambda opt: (tc.cdiv(N, opt.BLOCK),))

A Kernel is a functools.partial of its entry function with no bound arguments: CPython calls a
partial through vectorcall straight into the function, where a class's own `__call__` would cost a
slot wrapper, an argument tuple and a keyword dict per launch (a fifth of a launch's host time).
`_set_entry` swaps the function (partial's `__setstate__`, keeping the instance's __dict__). Once a GPU kernel has its signature, the entry is
the kernel's generated launch function (tc_runtime.fastcall): the specialization key, the
variant's launch record, grid, stream, `struct.pack_into` and cuLaunchKernel in one frame. Until
then, on the CPU, and for everything the entry does not handle, `_call` runs: the general path
(one generated look-up function, then the grid, the stream and the variant's launch closure), and
from it the slow path (argument checking with clear errors, compiling, tuning) when the look-up
misses or raises.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import autotune, compiler, driver, fastcall, knobs, precompile, tensor_maps
from .binary import KernelBinary
from .binary import read as read_binary
from .build import base_key, compile_cached
from .cache import KernelCache, cache_key, read_entry
from .configs import check_key, expand_configs, key_indices
from .cpu import CpuKernel
from .devices import parse_device
from .errors import TcLaunchError
from .options import (
    DEFAULT_MAX_GRID,
    Config,
    Options,
    check_name_and_filename,
    check_num_stages,
    check_num_warps,
    compile_options,
    normalize_defines,
    normalize_grid,
)
from .signature import DIV16, NONE, ArgPacker, Signature, declared_multiples, is_pointer

# kept importable from here (older tests and tools)
_expand_configs = expand_configs
__all__ = ["Kernel", "kernel", "load", "parse_device"]


def _no_key(*args: object) -> tuple[Any, ...]:
    raise TypeError("the kernel's signature is not known yet")


def _cpu_keyed(*args: object) -> tuple[Any, ...]:
    raise TypeError("the CPU path does not use the generated key function")


def _normalized_pack_into_of(packer: ArgPacker) -> Callable[..., None]:
    """`pack_into(buffer, offset, *values)` for normalized arguments: struct's own, or the
    packer's `pack_normalized` where packing does more (tensor maps of TMA copies)."""
    if type(packer) is ArgPacker:
        return packer._pack_into

    def pack(buffer: object, offset: int, *values: object) -> None:
        packer.pack_normalized(values)
    return pack


def _pack_into_of(packer: ArgPacker) -> Callable[..., None]:
    """packer's `pack_into(buffer, offset, *args)` for the caller's arguments: struct's own; with
    tensor maps struct's own, then the maps for these arguments (struct refuses what is not an
    int where an int goes, a tensor for a pointer: the launch paths then pack through `pack`);
    with bf16 scalars (packed as their bit pattern) always the checked packer."""
    if not packer._always_normalize:
        return packer._pack_into
    if isinstance(packer, tensor_maps.TmaArgPacker) and packer._raw_ok:
        pack_into, place = packer._pack_into, packer._place_maps

        def pack_with_maps(buffer: Any, offset: int, *args: object) -> None:
            pack_into(buffer, offset, *args)
            place(args)
        return pack_with_maps

    def pack(buffer: object, offset: int, *args: object) -> None:
        packer.pack(args)
    return pack


class Variant:
    """One compiled and loaded GPU kernel: a configuration for one specialization pattern."""

    __slots__ = ("binary", "function", "packer", "pack_into", "buffer", "opt", "lock", "owner",
                 "config", "index", "spec", "run", "run_normalized", "programs")

    def __init__(self, binary: KernelBinary, function: driver.Function, packer: ArgPacker,
                 opt: Options, config: Config, index: int, spec: tuple[int, ...]) -> None:
        self.binary = binary
        self.function = function
        self.packer = packer
        self.buffer = packer.buffer
        self.pack_into: Callable[..., None] = _pack_into_of(packer)
        self.opt = opt
        self.config = config
        self.index = index
        self.spec = spec
        self.lock = threading.Lock()
        #: the thread whose launches use `buffer` without the lock (the one building the variant)
        self.owner = threading.get_ident()
        # The launch closures (driver.Function.launcher): run(args, gx, gy, gz, stream) packs
        # the caller's arguments and launches; run_normalized does the same for arguments the
        # signature has normalized already (the slow path's, the auto-tuner's), packed as they
        # are (normalizing a bf16 scalar's bit pattern again would change it). They use
        # `packer` in the thread that built the variant; other threads share a second packer
        # under `lock`.
        spare = packer.another()
        spare_pack_into = _pack_into_of(spare)

        def foreign(args: tuple[object, ...], gx: int, gy: int, gz: int, stream: int) -> None:
            with self.lock:
                try:
                    spare_pack_into(spare.buffer, 0, *args)
                except Exception:  # out-of-range ints, objects: checked, or a clear error
                    spare.pack(args)
                function.launch(gx, gy, gz, stream, spare)  # type: ignore[arg-type]

        def foreign_normalized(args: tuple[object, ...], gx: int, gy: int, gz: int,
                               stream: int) -> None:
            with self.lock:
                spare.pack_normalized(args)
                function.launch(gx, gy, gz, stream, spare)  # type: ignore[arg-type]

        self.run = function.launcher(packer, self.pack_into, self.buffer, packer.pack, foreign)
        self.run_normalized = function.launcher(packer, _normalized_pack_into_of(packer),
                                                self.buffer, packer.pack, foreign_normalized)
        #: a persistent kernel's CTAs for a grid of programs, `programs(gx, gy, gz)` (set by
        #: launch_persistently; None for other kernels and for stream-K, whose launches also
        #: take a workspace): the launch entry packs the grid after the arguments and launches these
        self.programs: Callable[[int, int, int], int] | None = None


#: The hidden parameters of a persistent kernel: the extents of the program grid it runs.
GRID_PARAMS = ("tc_grid_x", "tc_grid_y", "tc_grid_z")


def persistent_ctas(programs: int, sms: int, cluster: int = 1) -> int:
    """The CTAs a persistent kernel runs its `programs` on: as few as take the same number of
    programs each as one CTA per SM would (512 programs on 132 SMs: 4 each on 128 CTAs rather than
    4 or 3 on 132). The slowest CTA decides the time either way; on an H100 the balanced grid made
    the 4096^3 and 8192^3 matmuls 1.5-2% faster (its waves are whole groups of the grouped program
    order, and SMs without a program draw no power). A kernel launched in clusters gets a multiple
    of the cluster's CTAs (rounded up: the last CTAs may have a program fewer, or none)."""
    if programs <= sms:
        ctas = programs
    else:
        per_cta = -(-programs // sms)
        ctas = -(-programs // per_cta)
    return -(-ctas // cluster) * cluster


def resident_ctas(function: driver.Function, sms: int, cluster: int) -> int:
    """The most CTAs of a persistent kernel (one per SM) that run at once: `sms`, or in clusters
    as many whole clusters as the GPU holds at once (Function.max_active_clusters: a cluster's
    CTAs share one GPC, whose SMs need not be a multiple of the cluster's; an H100 holds 66
    clusters of 2 of the 16-bit matmul's CTAs but 30 of 4, thirty-eighth session)."""
    if cluster <= 1:
        return sms
    clusters = function.max_active_clusters(cluster)
    if clusters is None:
        return sms // cluster * cluster
    if clusters <= 0:
        smaller = "clusters of 2 (config option cluster_2x2 off)" if cluster > 2 else \
            "no clusters (config option cluster_multicast off)"
        raise TcLaunchError(
            f"kernel '{function.name}' runs in clusters of {cluster} CTAs, but the GPU fits no such cluster "
            f"with {function.block_x} threads and {function.shared_bytes} bytes of shared memory a CTA; "
            f"use fewer stages or smaller tiles, or {smaller}", kernel=function.name)
    return min(sms // cluster, clusters) * cluster


#: A stream-K kernel's hidden parameters after the grid's: its workspace (partial sums, flags).
WORKSPACE_PARAMS = ("tc_partials", "tc_flags")


class Workspace:
    """A stream-K kernel's workspace on one stream (tc_opt.stream_k): a partial sum of
    `partial_bytes` and an i32 flag for each of up to `ctas` programs shared by stream-K (a grid
    of `ctas` CTAs shares its last wave, fewer programs than CTAs). Allocated and zeroed, in
    stream order, by the first launch on that stream; the kernel leaves the flags 0, so later
    launches on the same stream reuse it (launches on one stream never overlap)."""

    def __init__(self, device: driver.Device, ctas: int, partial_bytes: int, stream: int) -> None:
        self.partials_bytes = -(-ctas * partial_bytes // 256) * 256
        self.buffer = driver.DeviceBuffer(device, self.partials_bytes + 4 * ctas)
        self.buffer.zero_async(stream)
        self.partials = self.buffer.ptr
        self.flags = self.buffer.ptr + self.partials_bytes


def launch_persistently(v: Variant, ctas: int, device: driver.Device | None = None) -> None:
    """Make `v` (a persistent kernel) launch at most `ctas` programs (one per SM: its shared memory
    holds a whole pipeline; `persistent_ctas` balances them), which loop over the grid's programs,
    given to the kernel as three hidden parameters after the caller's arguments. A stream-K kernel
    (binary.stream_k) launches min(programs, ctas) CTAs, which share the last waves, and takes its
    workspace (one per stream, `Workspace`, on `device`) as two more. (The launch entry launches
    the others itself through `v.programs`, and leaves stream-K to the general path:
    fastcall.launch_record.)"""
    run, run_normalized = v.run, v.run_normalized
    partial_bytes = v.binary.stream_k
    workspaces: dict[int, Workspace] = {}

    def programs(gx: int, gy: int, gz: int) -> int:
        total = gx * gy * gz
        if total >= 2**31:
            raise ValueError(f"kernel '{v.binary.name}' is persistent: its {gx}x{gy}x{gz} programs must "
                             f"number fewer than 2**31 (they are counted in 32 bits)")
        if partial_bytes:
            return min(total, ctas)
        return persistent_ctas(total, ctas, v.binary.cluster)

    def workspace(stream: int) -> tuple[int, int]:
        w = workspaces.get(stream)
        if w is None:
            assert device is not None, "a stream-K kernel needs its device"
            w = workspaces[stream] = Workspace(device, ctas, partial_bytes, stream)
        return w.partials, w.flags

    def persistent(args: tuple[object, ...], gx: int, gy: int, gz: int, stream: int) -> None:
        run((*args, gx, gy, gz), programs(gx, gy, gz), 1, 1, stream)

    def persistent_normalized(args: tuple[object, ...], gx: int, gy: int, gz: int, stream: int) -> None:
        run_normalized((*args, gx, gy, gz), programs(gx, gy, gz), 1, 1, stream)

    def stream_k(args: tuple[object, ...], gx: int, gy: int, gz: int, stream: int) -> None:
        run((*args, gx, gy, gz, *workspace(stream)), programs(gx, gy, gz), 1, 1, stream)

    def stream_k_normalized(args: tuple[object, ...], gx: int, gy: int, gz: int, stream: int) -> None:
        run_normalized((*args, gx, gy, gz, *workspace(stream)), programs(gx, gy, gz), 1, 1, stream)

    v.run, v.run_normalized = (stream_k, stream_k_normalized) if partial_bytes else (persistent, persistent_normalized)
    v.programs = None if partial_bytes else programs


def _not_initialized(*args: object, **kwargs: object) -> None:
    raise TypeError("this tc Kernel was not initialized (Kernel.__init__ did not run)")


class Kernel(functools.partial[None]):
    """A Triton-C kernel bound to a device. Call it with the kernel's arguments and `grid=`:
    `k(*args, grid=..., stream=None)` (`grid`: a tuple of 1 to 3 ints, or a function of the
    chosen configuration's options returning one; `stream`: a raw handle or a stream object,
    by default the current stream of torch or the legacy default stream)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Kernel:  # (partial.__new__ takes the function)
        return super().__new__(cls, _not_initialized)

    def __init__(self, src: str, device: object = "cuda", defines: Mapping[str, object] | None = None,
                 num_warps: int = 4, num_stages: int = 3,
                 autotune_configs: Sequence[Config] | None = None,
                 autotune_key: Sequence[str] | None = None, name: str | None = None,
                 filename: str = "<source>", *, fp32_dot: str = "ieee",
                 precise_math: bool = False, tma: bool = True,
                 tma_store: bool = False) -> None:
        if not isinstance(src, str):
            raise TypeError(f"kernel source must be a str, got {type(src).__name__}")
        if not src.strip():
            raise ValueError("kernel source is empty")
        check_name_and_filename(name, filename)
        self.source = src
        self.filename = filename
        #: extra compiler options (non-default fp32_dot / precise_math), part of the cache key;
        #: the interpreter ignores them (it computes float32 products and math exactly)
        self.compile_options = compile_options(fp32_dot, precise_math, tma, tma_store)
        self.name = name
        self.device_type, self.device_index = parse_device(device)
        fixed, axes = normalize_defines(defines)
        #: the defines given as single values (every configuration has them): part of the key of
        #: the auto-tuner's history, which the list of configurations is not
        self.fixed_defines = fixed
        self.configs = expand_configs(fixed, axes, check_num_warps(num_warps),
                                      check_num_stages(num_stages), autotune_configs)
        self.autotune_key = check_key(autotune_key)
        self._lock = threading.RLock()
        self._signature: Signature | None = None
        self._key_fn: Callable[..., tuple[Any, ...]] = _no_key
        #: _fast[_key_fn(*args)] as one generated function (raises on a miss or odd arguments)
        self._lookup: Callable[..., Variant] = _no_key  # type: ignore[assignment]
        self._key_indices: list[int] = []
        self._nspec = 0
        self._fast: dict[tuple[Any, ...], Variant] = {}
        #: the launch entry's table: fastcall.entry_key(key) -> launch_record(_fast[key])
        self._records: dict[Any, tuple[Any, ...]] = {}
        self._ctypes_backend = False
        self._entry_made = False
        self._set_entry(self._call)  # until _setup generates the entry
        self._compiled: dict[tuple[int, tuple[int, ...]], Variant] = {}
        self._failed: dict[tuple[int, tuple[int, ...]], BaseException] = {}
        self._last: Variant | None = None
        self._cpu: dict[int, CpuKernel] = {}
        self._cpu_choice: dict[tuple[Any, ...], int] = {}
        self._cpu_last = 0
        self._device: driver.Device | None = None
        self._binary_fixed: KernelBinary | None = None
        self._max_grid: tuple[int, ...] = DEFAULT_MAX_GRID
        self._max_x = DEFAULT_MAX_GRID[0]
        self._max_y = DEFAULT_MAX_GRID[1]
        self._max_z = DEFAULT_MAX_GRID[2]
        self._index = 0
        self._stream_fn: Callable[[int], int] = driver._default_stream
        self._sources: dict[int, str] = {}
        first = self.configs[0]
        self._opt0 = Options(first.defines, first.num_warps, first.num_stages)
        if self.device_type == "cuda":
            assert self.device_index is not None
            self._device = driver.get_device(self.device_index)  # TcDeviceError without a GPU
            self._max_grid = self._device.max_grid
            self._max_x, self._max_y, self._max_z = self._max_grid
            self._index = self.device_index

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickling and copying are refused with the reason (they recursed through the launch
        entry, a RecursionError): a kernel holds compiled code, a lock and its device's state."""
        raise TypeError("a tc Kernel cannot be pickled or copied: it holds compiled code, a lock and "
                        "its device's state; make it again with tc_runtime.kernel(...) where it is "
                        "needed (the disk cache keeps that fast), or save its binary (tc_runtime.build)")

    @classmethod
    def from_binary(cls, binary: KernelBinary, device: object = "cuda",
                    defines: Mapping[str, object] | None = None) -> Kernel:
        """A kernel from an already compiled binary (no compiler needed; one variant for every
        specialization). `defines` only feed `opt` for grid callables."""
        if not isinstance(binary, KernelBinary):
            raise TypeError(f"Kernel.from_binary takes a KernelBinary (from tc_runtime.build or "
                            f"the cache), got {type(binary).__name__}")
        if parse_device(device)[0] != "cuda":
            raise ValueError("a precompiled kernel runs on a CUDA device, not on the CPU")
        k = cls(f"/* precompiled {binary.name} */", device, defines, binary.num_warps,
                name=binary.name, filename=f"<binary {binary.name}>")
        k._binary_fixed = binary
        k._signature = Signature(binary.name, binary.signature, binary.arg_names or None,
                                 binary.unsigned_args)
        return k

    # ----------------------------------------------------------------------------- properties

    @property
    def device(self) -> str:
        return "cpu" if self.device_type == "cpu" else f"cuda:{self.device_index}"

    @property
    def arch(self) -> str | None:
        return self._device.arch if self._device is not None else None

    @property
    def opt(self) -> Options:
        """The options of the configuration launched last (the first one before any launch)."""
        if self._last is not None:
            return self._last.opt
        if self._device is None and self._cpu_last:
            c = self.configs[self._cpu_last]
            return Options(c.defines, c.num_warps, c.num_stages)
        return self._opt0

    @property
    def defines(self) -> dict[str, str]:
        return dict(self.opt.defines)

    @property
    def num_warps(self) -> int:
        return int(self.opt.num_warps)

    @property
    def num_stages(self) -> int:
        return int(self.opt.num_stages)

    # --------------------------------------------------------------------------------- launch

    def _set_entry(self, entry: Callable[..., None]) -> None:
        """Make calls of the kernel run `entry` (see the module's docstring)."""
        functools.partial.__setstate__(self, (entry, (), None, self.__dict__))  # type: ignore[attr-defined]

    @property
    def _entry(self) -> Callable[..., None]:
        """What a call of the kernel runs: `_call`, or the generated entry (tools time it)."""
        return self.func

    def _call(self, *args: object, grid: object = None, stream: object = None,
              **unknown: object) -> None:
        """The general launch path: any arguments, grid and stream; the slow path from here."""
        if unknown:
            raise self._unknown_keywords(unknown)
        if grid is None:
            raise TypeError(f"launching '{self.name or 'kernel'}' needs a grid: "
                            f"k(*args, grid=lambda opt: (...,))")
        try:
            v: Variant | None = self._lookup(*args)  # self._fast[self._key_fn(*args)]
        except Exception:  # a new key, arguments that need checking, or the CPU: the slow path
            v = None  # (taken outside this handler, so that its errors chain to nothing)
        if v is None:
            if self._device is None:
                self._call_cpu(args, grid, stream)
                return
            v, args = self._slow(args, grid, stream)
            run = v.run_normalized
        else:
            run = v.run
            if driver._several:  # memory of another GPU would fault: checked on every launch
                self._check_devices(self._signature or self._resolve_signature(), args)
        if type(grid) is not tuple:
            if callable(grid):
                grid = grid(v.opt)
            if type(grid) is not tuple:
                grid = normalize_grid(grid, v.opt, self._max_grid, v.binary.name)
        if len(grid) == 1 and type(gx := grid[0]) is int and 0 < gx <= self._max_x:
            gy = gz = 1
        else:
            gx, gy, gz = self._grid(grid, v)
            if not (gx and gy and gz):
                return  # a launch of nothing (its arguments were checked above)
        if stream is None:
            stream = self._stream_fn(self._index)
        elif type(stream) is not int:
            stream = _stream_handle(stream)
        run(args, gx, gy, gz, stream)  # type: ignore[arg-type]

    def _unknown_keywords(self, unknown: Mapping[str, object]) -> TypeError:
        """The error of a launch given keywords other than grid= and stream= (a misspelt `grid`,
        an argument by its name): naming the kernel, not the Python function that got them."""
        try:
            sig = self.cpu_signature() if self._device is None else (
                self._signature or self._resolve_signature())
            name, params, arguments = sig.kernel, sig.names, f" {sig.describe()}"
        except Exception:  # (a source that does not compile: its own error comes at a launch)
            name, params, arguments = self.name or "kernel", [], ""
        bad = ", ".join(f"'{k}'" for k in unknown)
        by_name = ", ".join(f"'{k}'" for k in unknown if k in params)
        return TypeError(
            f"kernel '{name}' got an unexpected keyword argument{'s' if len(unknown) > 1 else ''} "
            f"{bad}: a launch takes the kernel's arguments{arguments} by position and accepts only "
            f"the keywords 'grid' and 'stream'" + (f"; pass {by_name} by position" if by_name else ""))

    def _grid(self, grid: tuple[object, ...], v: Variant) -> tuple[int, int, int]:
        """A grid tuple other than one valid int: 2-D and 3-D tuples of valid ints cheaply,
        everything else checked (and explained) by normalize_grid."""
        n = len(grid)
        gx: Any
        gy: Any
        gz: Any
        if n == 2:
            gx, gy = grid
            gz = 1
        elif n == 3:
            gx, gy, gz = grid
        else:
            gx = gy = gz = None
        if type(gx) is int and type(gy) is int and type(gz) is int \
                and 0 < gx <= self._max_x and 0 < gy <= self._max_y and 0 < gz <= self._max_z:
            return gx, gy, gz
        return normalize_grid(grid, v.opt, self._max_grid, v.binary.name)

    def _slow(self, args: Sequence[object], grid: object,
              stream: object) -> tuple[Variant, tuple[object, ...]]:
        """Check and convert the arguments, then find (compile, tune) the variant for them."""
        if grid is None:
            raise TypeError(f"launching '{self.name or 'kernel'}' needs a grid: "
                            f"k(*args, grid=lambda opt: (...,))")
        sig = self._setup()
        normalized = tuple(sig.normalize(args))
        for i in sig.pointer_indices:
            if type(args[i]) is not int:
                fastcall.check_gpu_memory(sig, i, args[i], self._index)
        key = self._key_fn(*normalized)
        v = self._fast.get(key)
        if v is None:
            with self._lock:
                v = self._fast.get(key)
                if v is None:
                    self._check_devices(sig, normalized)
                    v = self._choose(key, normalized, grid, stream)
                    self._fast[key] = v
                    ekey = fastcall.entry_key(sig, key)
                    record = fastcall.launch_record(v, self._ctypes_backend)
                    if ekey is not None and record is not None:
                        self._records[ekey] = record
        self._last = v
        return v, normalized

    def _setup(self) -> Signature:
        """Once per kernel: the signature, the generated key function, the stream getter."""
        sig = self._signature or self._resolve_signature()
        if self._key_fn is _no_key:
            with self._lock:
                indices = key_indices(self.autotune_key, sig, len(self.configs))
                self._key_indices = indices
                self._nspec = len(sig.pointer_indices) + len(sig.int_indices)
                self._key_fn = sig.key_function(indices)
                self._lookup = sig.lookup_function(self._fast, indices)
        if self._stream_fn is driver._default_stream:
            self._stream_fn = driver.stream_getter(self._index)
        if not self._entry_made:
            with self._lock:
                self._ctypes_backend = driver.raw_launch_function() is not None
                self._set_entry(fastcall.make_entry(
                    sig, self._key_indices, self._records, self._call, self._stream_fn,
                    self._index, self._max_grid, self._ctypes_backend, _pack_into_of))
                self._entry_made = True
        return sig

    def _check_devices(self, sig: Signature, args: Sequence[object]) -> None:
        """Pointers into another GPU's memory would fault (or silently read the wrong device
        through peer mappings): say so once per new key instead."""
        for i in sig.pointer_indices:
            where = driver.pointer_device(int(args[i]))  # type: ignore[call-overload]
            if where is not None and where != self.device_index:
                raise ValueError(
                    f"argument {i + 1} ('{sig.names[i]}') of {sig.describe()} points to memory on "
                    f"cuda:{where}, but this kernel runs on cuda:{self.device_index}; create a "
                    f"kernel with device='cuda:{where}' for those tensors")

    def _choose(self, key: tuple[Any, ...], args: tuple[object, ...], grid: object,
                stream: object) -> Variant:
        spec = tuple(key[:self._nspec])
        values = tuple(key[self._nspec:])
        if len(self.configs) == 1 or self._binary_fixed is not None:
            return self.variant(0, spec)
        if knobs.skip_autotuning():
            return self.first_working(spec)
        handle = self._stream_fn(self._index) if stream is None else (
            stream if type(stream) is int else _stream_handle(stream))
        if driver.stream_capturing(handle):
            sig = self._signature or self._resolve_signature()
            new = ", ".join(f"{sig.names[i]} = {v}" for i, v in zip(self._key_indices, values))
            raise TcLaunchError(
                f"kernel '{sig.kernel}' would auto-tune inside CUDA graph capture (for "
                f"{new or 'a new specialization of its arguments'}), and timing its "
                f"configurations synchronizes, which capture does not allow: call it once with "
                f"arguments of the same shape before capturing (a warm-up), or give one "
                f"configuration")
        assert self._device is not None
        with self._device.current():  # its events, copies and flushes belong to our device
            return autotune.tune_gpu(self, spec, values, args, grid, handle)

    def first_working(self, spec: tuple[int, ...]) -> Variant:
        """The first configuration that compiles and loads (TC_SKIP_AUTOTUNING=1)."""
        errors: list[BaseException] = []
        for i in range(len(self.configs)):
            try:
                return self.variant(i, spec)
            except autotune.skippable_errors() as exc:
                errors.append(exc)
        raise errors[0]

    def launch_variant(self, v: Variant, args: Sequence[object], grid: object, stream: int) -> None:
        """Launch a given variant (the auto-tuner's timing runs); the arguments are normalized."""
        gx, gy, gz = normalize_grid(grid, v.opt, self._max_grid, v.binary.name)
        if not (gx and gy and gz):
            return
        v.run_normalized(tuple(args), gx, gy, gz, stream)

    def _call_cpu(self, args: Sequence[object], grid: object, stream: object = None) -> None:
        if grid is None:
            raise TypeError(f"launching '{self.name or 'kernel'}' needs a grid: "
                            f"k(*args, grid=lambda opt: (...,))")
        if stream is not None and type(stream) is not int:
            _stream_handle(stream)  # the interpreter has no streams, but a bad one is an error
        sig = self.cpu_signature()
        sig.check_count(len(args))
        if self._key_fn is _no_key:  # (checks the autotune_key names, as the GPU path does)
            self._key_indices = key_indices(self.autotune_key, sig, len(self.configs))
            self._key_fn = _cpu_keyed
        if len(self.configs) == 1:
            ck = self.cpu_kernel(0)
        else:
            values = tuple(_hashable(args[i]) for i in self._key_indices)
            index = self._cpu_choice.get(values)
            if index is None:
                index = autotune.check_cpu(self, args, grid)
                self._cpu_choice[values] = index
                self._cpu_last = index
                return  # the check left the chosen configuration's results in the buffers
            self._cpu_last = index
            ck = self.cpu_kernel(index)
        self.run_cpu(ck, args, grid)

    def run_cpu(self, ck: CpuKernel, args: Sequence[object], grid: object) -> None:
        """Launch the interpreter's kernel `ck` on `args` over `grid` (a tuple, or a callable of the options)."""
        g = normalize_grid(grid, ck.opt, DEFAULT_MAX_GRID, ck.signature.kernel)
        ck.launch(args, g)

    # ------------------------------------------------------------------------------- building

    def cpu_kernel(self, index: int) -> CpuKernel:
        """The interpreter's kernel for configuration `index` (lowered once)."""
        ck = self._cpu.get(index)
        if ck is None:
            with self._lock:
                ck = self._cpu.get(index)
                if ck is None:
                    c = self.configs[index]
                    fn = compiler.lower_source(self.source, defines=c.defines, kernel=self.name,
                                               filename=self.filename)
                    ck = CpuKernel(fn, self.source)
                    ck.opt = Options(c.defines, c.num_warps, c.num_stages)
                    self._cpu[index] = ck
                    if self._signature is None:
                        self._signature = ck.signature
        return ck

    def _source_for_key(self, index: int) -> str:
        text = self._sources.get(index)
        if text is None:
            text = compiler.cache_source(self.source, self.configs[index].defines, self.filename)
            self._sources[index] = text
        return text

    def base_key(self, index: int = 0) -> dict[str, Any]:
        """The cache-key components shared by everything compiled for configuration `index`."""
        return base_key(self._source_for_key(index), self.filename, self.name,
                        self.configs[index].defines, self.options_of(index))

    def options_of(self, index: int) -> dict[str, object]:
        """The compiler options of configuration `index`: its own over the kernel's."""
        own = self.configs[index].options
        return {**self.compile_options, **own} if own else self.compile_options

    def _resolve_signature(self) -> Signature:
        """The kernel's argument kinds and names, from the disk cache or the front end."""
        with self._lock:
            if self._signature is not None:
                return self._signature
            cache = self.cache()
            key = cache_key({**self.base_key(0), "what": "signature"})
            record = cache.get_record(key) if cache is not None and not knobs.always_compile() \
                else None
            if record is None:
                fn = self._lower_any()
                record = {"name": fn.name, "kinds": [str(a.type) for a in fn.args],
                          "names": list(fn.arg_names), "unsigned": fn.unsigned_args,
                          "multiples": sorted(declared_multiples(fn.arg_attrs).items())}
                if cache is not None:
                    cache.put_record(key, record)
            unsigned = record.get("unsigned")
            multiples = record.get("multiples")
            self._signature = Signature(str(record["name"]), list(record["kinds"]),
                                        list(record["names"]),
                                        unsigned if isinstance(unsigned, list) else None,
                                        {int(i): int(m) for i, m in multiples} if isinstance(multiples, list) else None)
            return self._signature

    def _lower_any(self) -> Any:
        """The lowered kernel of the first configuration the front end accepts (a tuning space
        may hold configurations that do not compile; they are skipped later)."""
        errors: list[BaseException] = []
        for c in self.configs:
            try:
                return compiler.lower_source(self.source, defines=c.defines, kernel=self.name,
                                             filename=self.filename)
            except autotune.skippable_errors() as exc:
                errors.append(exc)
                if len(self.configs) == 1:
                    raise
        raise errors[0]

    def cpu_signature(self) -> Signature:
        """The signature on the CPU: from the first configuration that lowers."""
        if self._signature is None:
            errors: list[BaseException] = []
            for i in range(len(self.configs)):
                try:
                    return self.cpu_kernel(i).signature
                except autotune.skippable_errors() as exc:
                    errors.append(exc)
                    if len(self.configs) == 1:
                        raise
            raise errors[0]
        return self._signature

    def cache(self) -> KernelCache | None:
        """The disk cache of compiled kernels, or None when TC_DISABLE_CACHE is set."""
        return None if knobs.disable_cache() else KernelCache()

    def variant(self, index: int, spec: tuple[int, ...]) -> Variant:
        """Configuration `index` compiled for specialization `spec` and loaded (memoized; a
        failure is remembered too, so the auto-tuner does not retry it)."""
        v = self._compiled.get((index, spec))
        if v is not None:
            return v
        failed = self._failed.get((index, spec))
        if failed is not None:
            raise failed
        with self._lock:
            v = self._compiled.get((index, spec))
            if v is not None:
                return v
            try:
                v = self._build_variant(index, spec)
            except autotune.skippable_errors() as exc:
                self._failed[(index, spec)] = exc
                raise
            self._compiled[(index, spec)] = v
            return v

    def _build_variant(self, index: int, spec: tuple[int, ...]) -> Variant:
        assert self._device is not None
        sig = self._resolve_signature()
        config = self.configs[index]
        binary = self._binary(index, sig.options_specialization(spec))
        if list(binary.signature) != sig.kinds:
            if index:
                raise autotune.changed_arguments(config, binary.name, binary.signature, sig.kinds)
            sig = Signature(binary.name, binary.signature, binary.arg_names or sig.names,
                            binary.unsigned_args, sig.multiples)
            self._signature = sig
        module = driver.Module(self._device, ptx=binary.ptx,
                               cubin=binary.cubin if _same_arch(binary.arch, self._device.arch)
                               else None, kernel=binary.name)
        function = module.function(binary.name, num_warps=binary.num_warps,
                                   shared_bytes=binary.shared_bytes)
        opt = Options(config.defines, binary.num_warps, config.num_stages)
        if binary.persistent:  # (the program grid: three i32 after the arguments)
            work = WORKSPACE_PARAMS if binary.stream_k else ()
            sig = Signature(sig.kernel, [*sig.kinds, *("i32",) * 3, *("i64",) * len(work)],
                            [*sig.names, *GRID_PARAMS, *work], sig.unsigned, sig.multiples)
        packer = tensor_maps.packer_for(sig, binary.tensor_maps, driver.init(),
                                        make_current=self._device.make_current)
        v = Variant(binary, function, packer, opt, config, index, spec)
        if binary.persistent:
            launch_persistently(v, resident_ctas(function, self._device.sm_count, binary.cluster), self._device)
        return v

    def precompile(self, spec: tuple[int, ...], indices: Sequence[int] | None = None) -> int:
        """Compile the configurations not built yet for specialization `spec` (those of `indices`,
        or all) into the disk cache, in parallel processes (tc_runtime.precompile), so that the
        auto-tuner's one-by-one build then reads them; returns how many worker processes ran."""
        if self._device is None or self._binary_fixed is not None:
            return 0
        options_spec = self._resolve_signature().options_specialization(spec)
        jobs = [precompile.job(self.source, filename=self.filename, name=self.name, defines=c.defines,
                               arch=self._device.arch, num_warps=c.num_warps, num_stages=c.num_stages,
                               spec=options_spec, options=self.options_of(i))
                for i, c in enumerate(self.configs)
                if (indices is None or i in indices) and (i, spec) not in self._compiled
                and (i, spec) not in self._failed]
        return precompile.precompile(jobs)

    def _binary(self, index: int, spec: tuple[str | None, ...]) -> KernelBinary:
        assert self._device is not None
        if self._binary_fixed is not None:
            return self._binary_fixed
        config = self.configs[index]
        return compile_cached(self.source, filename=self.filename, name=self.name,
                              defines=config.defines, arch=self._device.arch,
                              num_warps=config.num_warps, num_stages=config.num_stages,
                              spec=spec, base=self.base_key(index),
                              options=self.options_of(index))

    def _default_spec(self) -> tuple[int, ...]:
        sig = self._resolve_signature()
        return tuple(DIV16 if is_pointer(sig.kinds[i]) else NONE
                     for i in sorted(sig.pointer_indices + sig.int_indices))

    def _current(self) -> Variant:
        if self._last is not None:
            return self._last
        return self.first_working(self._default_spec())

    # ------------------------------------------------------------------------------ inspection

    def asm(self, stage: str = "ptx") -> str:
        """The text of one compilation stage ("ir", "ir-gpu", "llvm", "ptx", "cubin" as hex) of
        the configuration launched last (before any launch: the first configuration with 16-byte
        aligned pointers). On the CPU only "ir"."""
        if self._device is None:
            if stage in ("ir", "tcir"):
                return self.cpu_kernel(self._cpu_last).ir_text()
            raise ValueError(f"stage {stage!r} is not available on the CPU interpreter; "
                             f"only 'ir' is")
        v = self._current()
        if stage == "cubin":
            if v.binary.cubin is None:
                raise ValueError(f"kernel '{v.binary.name}' has no cubin (ptxas was not found when "
                                 f"it was compiled, or its PTX came from TC_KERNEL_OVERRIDE_DIR)")
            return v.binary.cubin.hex()
        text = v.binary.asm.get(stage)
        if text is None:
            raise ValueError(f"no stage {stage!r} for kernel '{v.binary.name}'; available: "
                             f"{', '.join(sorted(v.binary.asm) + ['cubin'])}")
        return text

    @property
    def info(self) -> dict[str, Any]:
        """Metadata of the configuration launched last (or the default one): name, arch,
        signature, num_warps, shared_bytes, registers, spills; plus device, defines, the
        compiled specializations and the auto-tuning choices."""
        if self._device is None:
            ck = self.cpu_kernel(self._cpu_last)
            out: dict[str, Any] = {"device": self.device, "defines": self.defines,
                                   "num_warps": self.num_warps, "num_stages": self.num_stages}
            out.update(name=ck.signature.kernel, signature=list(ck.signature.kinds),
                       arg_names=list(ck.signature.names), backend="interpreter")
            return out
        v = self._current()
        out = {"device": self.device, "defines": dict(v.opt.defines),
               "num_warps": v.opt.num_warps, "num_stages": v.opt.num_stages}
        out.update(v.binary.metadata())
        out["backend"] = "cuda"
        out["config"] = repr(v.config)
        out["specializations"] = [list(s) for s in sorted({s for (_, s) in self._compiled})]
        out["autotuned"] = {repr(k[self._nspec:]): repr(x.config) for k, x in self._fast.items()
                            if len(self.configs) > 1}
        return out

    @property
    def signature(self) -> Signature:
        if self._device is None:
            return self.cpu_signature()
        return self._resolve_signature()

    def __repr__(self) -> str:
        name = self._signature.kernel if self._signature else (self.name or "?")
        return f"<tc kernel {name} on {self.device} defines={self.defines}>"


def _stream_handle(stream: object) -> int:
    """A raw stream handle from an int, a torch.cuda.Stream (`.cuda_stream`) or a CUstream."""
    if isinstance(stream, bool):
        raise TypeError(f"stream must be a raw handle (int) or a stream object, got {stream!r}")
    handle = getattr(stream, "cuda_stream", stream)
    if isinstance(handle, (bool, float, complex, str, bytes)):  # (int() would take 1.5 as 1)
        raise TypeError(f"stream must be a raw handle (int) or a stream object with "
                        f".cuda_stream, got {type(stream).__name__} {stream!r}")
    try:
        return int(handle)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        raise TypeError(f"stream must be a raw handle (int) or a stream object with "
                        f".cuda_stream, got {type(stream).__name__}") from None


def _hashable(value: object) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return id(value)


def kernel(src: str, device: object = "cuda", defines: Mapping[str, object] | None = None,
           num_warps: int = 4, num_stages: int = 3, autotune_configs: Sequence[Config] | None = None,
           autotune_key: Sequence[str] | None = None, name: str | None = None,
           filename: str = "<source>", *,
           autotune_vals: Sequence[Config] | None = None, fp32_dot: str = "ieee",
           precise_math: bool = False, tma: bool = True,
           tma_store: bool = False) -> Kernel:
    """tc.kernel(src, device, defines, ...): a launchable kernel (see `Kernel`).
    `autotune_vals` is the matmul tutorial's spelling of `autotune_configs`. `fp32_dot="tf32"`
    makes float32 `@` products use tf32 tensor cores (exact float32 by default);
    `precise_math=True` compiles accurate exp and log (the language's are the fast approximate
    versions; sin, cos, exp2 and log2 are always accurate) and IEEE-rounded division. `tma=False` keeps
    Hopper's dot operands on cp.async copies; `tma_store=True` makes whole-tile stores (a matmul's
    epilogue) TMA bulk stores (tc_opt.tma_store)."""
    if autotune_vals is not None:
        if autotune_configs is not None:
            raise TypeError("give autotune_configs or autotune_vals, not both")
        autotune_configs = autotune_vals
    return Kernel(src, device, defines, num_warps, num_stages, autotune_configs, autotune_key,
                  name, filename, fp32_dot=fp32_dot, precise_math=precise_math, tma=tma,
                  tma_store=tma_store)


def load(path: str | Path | KernelBinary, device: object = "cuda",
         defines: Mapping[str, object] | None = None) -> Kernel:
    """A precompiled kernel, launched without any compiler package: a KernelBinary, a file
    written by `tcc ... -o OUT` (OUT.ptx/OUT.cubin with OUT.*.json metadata, or one OUT.json),
    or a directory in the cache's entry format (meta.json, kernel.ptx, kernel.cubin)."""
    if isinstance(path, KernelBinary):
        return Kernel.from_binary(path, device, defines)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load takes a path (str or os.PathLike) or a KernelBinary, got "
                        f"{type(path).__name__}")
    p = Path(path)
    binary = read_entry(p) if p.is_dir() else read_binary(p)
    return Kernel.from_binary(binary, device, defines)


def _same_arch(binary_arch: str, device_arch: str) -> bool:
    return binary_arch.rstrip("a") == device_arch

