"""Kernel objects: Triton-C source + defines, compiled per (device arch, argument specialization),
cached in memory and on disk, launched with a grid.

    k = tc.kernel(src, device="cuda:0", defines={"TYPE": "float", "BLOCK": 1024})
    k(z_ptr, x_ptr, y_ptr, N, grid=lambda opt: (tc.cdiv(N, opt.BLOCK),))

The launch path after the first call is: specialization key of the integer/pointer arguments, a
dict look-up, the grid, one `struct.pack_into` and one cuLaunchKernel.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import compiler, driver, knobs
from .binary import KernelBinary
from .cache import KernelCache, cache_key, read_entry
from .cpu import CpuKernel
from .options import (
    DEFAULT_MAX_GRID,
    Config,
    Options,
    check_num_stages,
    check_num_warps,
    normalize_defines,
    normalize_grid,
)
from .signature import DIV16, NONE, ArgPacker, Signature, is_pointer

#: Bump when the layout of cache records written by this module changes.
_RECORD_VERSION = 1


def parse_device(device: object) -> tuple[str, int | None]:
    """"cpu" | "cuda" | "cuda:N" | N | a torch.device -> ("cpu", None) or ("cuda", N)."""
    kind: object
    index: object
    if isinstance(device, bool):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, got {device!r}")
    if isinstance(device, int):
        kind, index = "cuda", device
    elif isinstance(device, str):
        text = device.strip().lower()
        kind, _, idx = text.partition(":")
        index = None
        if idx:
            if not idx.isdigit():
                raise ValueError(f"bad device {device!r}: the index after ':' must be a number")
            index = int(idx)
    elif hasattr(device, "type"):  # torch.device (tc_runtime never imports torch)
        kind, index = getattr(device, "type"), getattr(device, "index", None)
    else:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, got "
                         f"{type(device).__name__} {device!r}")
    if kind == "cpu":
        return "cpu", None
    if kind != "cuda":
        raise ValueError(f"unsupported device {device!r}: tc runs on 'cuda' GPUs and on 'cpu' "
                         f"(the interpreter)")
    if index is None:
        index = _current_cuda_device()
    if not isinstance(index, int) or index < 0:
        raise ValueError(f"bad device index in {device!r}")
    return "cuda", index


def _current_cuda_device() -> int:
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return int(torch.cuda.current_device())
        except Exception:  # torch without CUDA: our driver gives the real error at creation
            return 0
    return 0


class _Variant:
    """One compiled and loaded GPU kernel (a specialization of the source)."""

    __slots__ = ("binary", "function", "packer", "opt", "lock", "key")

    def __init__(self, binary: KernelBinary, function: driver.Function, packer: ArgPacker,
                 opt: Options, key: tuple[int, ...]) -> None:
        self.binary = binary
        self.function = function
        self.packer = packer
        self.opt = opt
        self.key = key
        self.lock = threading.Lock()


class Kernel:
    """A Triton-C kernel bound to a device. Call it with the kernel's arguments and `grid=`."""

    def __init__(self, src: str, device: object = "cuda", defines: Mapping[str, object] | None = None,
                 num_warps: int = 4, num_stages: int = 3,
                 autotune_configs: Sequence[Config] | None = None,
                 autotune_key: Sequence[str] | None = None, name: str | None = None,
                 filename: str = "<source>") -> None:
        if not isinstance(src, str):
            raise TypeError(f"kernel source must be a str, got {type(src).__name__}")
        if not src.strip():
            raise ValueError("kernel source is empty")
        if name is not None and (not isinstance(name, str) or not name.isidentifier()):
            raise ValueError(f"name must be the identifier of a __global__ kernel, got {name!r}")
        self.source = src
        self.filename = filename
        self.name = name
        self.device_type, self.device_index = parse_device(device)
        fixed, axes = normalize_defines(defines)
        self.configs = _expand_configs(fixed, axes, check_num_warps(num_warps),
                                       check_num_stages(num_stages), autotune_configs)
        self.autotune_key = _check_key(autotune_key)
        self._lock = threading.RLock()
        self._signature: Signature | None = None
        self._variants: dict[tuple[int, ...], _Variant] = {}
        self._last: _Variant | None = None
        self._cpu: CpuKernel | None = None
        self._device: driver.Device | None = None
        self._binary_fixed: KernelBinary | None = None
        self._max_grid: tuple[int, ...] = DEFAULT_MAX_GRID
        cfg = self.select_config()
        self.opt = Options(cfg.defines, cfg.num_warps, cfg.num_stages)
        if self.device_type == "cuda":
            assert self.device_index is not None
            self._device = driver.get_device(self.device_index)  # TcDeviceError without a GPU
            self._max_grid = self._device.max_grid

    @classmethod
    def from_binary(cls, binary: KernelBinary, device: object = "cuda",
                    defines: Mapping[str, object] | None = None) -> Kernel:
        """A kernel from an already compiled binary (no compiler needed; one variant for every
        specialization). `defines` only feed `opt` for grid callables."""
        if parse_device(device)[0] != "cuda":
            raise ValueError("a precompiled kernel runs on a CUDA device, not on the CPU")
        k = cls(f"/* precompiled {binary.name} */", device, defines, binary.num_warps,
                name=binary.name, filename=f"<binary {binary.name}>")
        k._binary_fixed = binary
        k._signature = Signature(binary.name, binary.signature, binary.arg_names or None)
        return k

    # ----------------------------------------------------------------------------- properties

    @property
    def device(self) -> str:
        return "cpu" if self.device_type == "cpu" else f"cuda:{self.device_index}"

    @property
    def arch(self) -> str | None:
        return self._device.arch if self._device is not None else None

    @property
    def defines(self) -> dict[str, str]:
        return dict(self.opt.defines)

    @property
    def num_warps(self) -> int:
        return int(self.opt.num_warps)

    @property
    def num_stages(self) -> int:
        return int(self.opt.num_stages)

    def select_config(self, args: Sequence[object] = ()) -> Config:
        """The configuration to launch with. Auto-tuning hook: with several configs (list-valued
        defines or autotune_configs) this will time each on the real arguments per value of
        `autotune_key`; for now it returns the first one."""
        return self.configs[0]

    # --------------------------------------------------------------------------------- launch

    def __call__(self, *args: object, grid: object, stream: int | None = None) -> None:
        if self._device is None:
            self._call_cpu(args, grid)
            return
        sig = self._signature or self._resolve_signature()
        try:
            key = sig.specialize(args)
        except (TypeError, IndexError):
            args = tuple(sig.normalize(args))  # clear TypeError on bad arguments
            key = sig.specialize(args)
        if len(args) != len(sig.kinds):
            sig.check_count(len(args))
        v = self._variants.get(key) or self._build_variant(key)
        self._last = v
        if callable(grid):
            grid = grid(v.opt)
        # fast path: a 1-D grid of a valid size; anything else goes through the full checks
        if type(grid) is tuple and len(grid) == 1 and type(grid[0]) is int \
                and 0 < grid[0] <= self._max_grid[0]:
            gx, gy, gz = grid[0], 1, 1
        else:
            gx, gy, gz = normalize_grid(grid, v.opt, self._max_grid, v.binary.name)
            if not (gx and gy and gz):
                sig.normalize(args)  # a launch of nothing still checks its arguments
                return
        if stream is None:
            stream = driver.current_stream(self._device.index)
        with v.lock:
            v.function.launch(gx, gy, gz, stream, v.packer.pack(args))

    def _call_cpu(self, args: Sequence[object], grid: object) -> None:
        ck = self._cpu or self._build_cpu()
        g = normalize_grid(grid, self.opt, DEFAULT_MAX_GRID, ck.signature.kernel)
        ck.launch(args, g)

    # ------------------------------------------------------------------------------- building

    def _build_cpu(self) -> CpuKernel:
        with self._lock:
            if self._cpu is None:
                fn = compiler.lower_source(self.source, defines=self.opt.defines, kernel=self.name,
                                           filename=self.filename)
                self._cpu = CpuKernel(fn, self.source)
                self._signature = self._cpu.signature
            return self._cpu

    def _base_key(self) -> dict[str, Any]:
        return {"source": self.source, "filename": self.filename, "kernel": self.name,
                "defines": sorted(self.opt.defines.items()), "toolchain": compiler.fingerprint(),
                "record": _RECORD_VERSION}

    def _resolve_signature(self) -> Signature:
        """The kernel's argument kinds and names, from the disk cache or the front end."""
        with self._lock:
            if self._signature is not None:
                return self._signature
            cache = self._cache()
            key = cache_key({**self._base_key(), "what": "signature"})
            record = cache.get_record(key) if cache is not None and not knobs.always_compile() \
                else None
            if record is None:
                fn = compiler.lower_source(self.source, defines=self.opt.defines, kernel=self.name,
                                           filename=self.filename)
                record = {"name": fn.name, "kinds": [str(a.type) for a in fn.args],
                          "names": list(fn.arg_names)}
                if cache is not None:
                    cache.put_record(key, record)
            self._signature = Signature(str(record["name"]), list(record["kinds"]),
                                        list(record["names"]))
            _check_key_names(self.autotune_key, self._signature)
            return self._signature

    def _cache(self) -> KernelCache | None:
        return None if knobs.disable_cache() else KernelCache()

    def _build_variant(self, key: tuple[int, ...]) -> _Variant:
        with self._lock:
            v = self._variants.get(key)
            if v is not None:
                return v
            assert self._device is not None
            sig = self._resolve_signature()
            spec = sig.options_specialization(key)
            binary = self._binary(spec)
            if list(binary.signature) != sig.kinds:
                sig = Signature(binary.name, binary.signature, binary.arg_names or sig.names)
            module = driver.Module(self._device, ptx=binary.ptx,
                                   cubin=binary.cubin if _same_arch(binary.arch, self._device.arch)
                                   else None, kernel=binary.name)
            function = module.function(binary.name, num_warps=binary.num_warps,
                                       shared_bytes=binary.shared_bytes)
            opt = Options(self.opt.defines, binary.num_warps, self.opt.num_stages)
            v = _Variant(binary, function, sig.packer(), opt, key)
            self._variants[key] = v
            return v

    def _binary(self, spec: tuple[str | None, ...]) -> KernelBinary:
        assert self._device is not None
        if self._binary_fixed is not None:
            return self._binary_fixed
        arch = self._device.arch
        cache = self._cache()
        key = cache_key({**self._base_key(), "what": "kernel", "arch": arch,
                         "num_warps": self.opt.num_warps, "num_stages": self.opt.num_stages,
                         "specialization": list(spec)})
        if cache is not None and not knobs.always_compile():
            hit = cache.get(key)
            if hit is not None:
                return hit
        binary = compiler.compile_source(self.source, defines=self.opt.defines, kernel=self.name,
                                         arch=arch, num_warps=self.opt.num_warps,
                                         num_stages=self.opt.num_stages, specialization=spec,
                                         filename=self.filename)
        if cache is not None:
            cache.put(key, binary)
        return binary

    def _default_key(self) -> tuple[int, ...]:
        sig = self._resolve_signature()
        return tuple(DIV16 if is_pointer(sig.kinds[i]) else NONE
                     for i in sorted(sig.pointer_indices + sig.int_indices))

    # ------------------------------------------------------------------------------ inspection

    def asm(self, stage: str = "ptx") -> str:
        """The text of one compilation stage of the last launched variant ("ir", "llvm", "ptx", …;
        on the CPU only "ir"). Before any launch, the variant with 16-byte aligned pointers."""
        if self._device is None:
            if stage in ("ir", "tcir"):
                return self._cpu_or_build().ir_text()
            raise ValueError(f"stage {stage!r} is not available on the CPU interpreter; "
                             f"only 'ir' is")
        v = self._last or self._build_variant(self._default_key())
        text = v.binary.asm.get(stage)
        if text is None and stage == "cubin" and v.binary.cubin is not None:
            return v.binary.cubin.hex()
        if text is None:
            raise ValueError(f"no stage {stage!r} for kernel '{v.binary.name}'; available: "
                             f"{', '.join(sorted(v.binary.asm))}")
        return text

    def _cpu_or_build(self) -> CpuKernel:
        return self._cpu or self._build_cpu()

    @property
    def info(self) -> dict[str, Any]:
        """Metadata of the last launched (or default) variant: name, arch, signature, num_warps,
        shared_bytes, registers, spills; plus device, defines and compiled specializations."""
        out: dict[str, Any] = {"device": self.device, "defines": self.defines,
                               "num_warps": self.num_warps, "num_stages": self.num_stages}
        if self._device is None:
            ck = self._cpu_or_build()
            out.update(name=ck.signature.kernel, signature=list(ck.signature.kinds),
                       arg_names=list(ck.signature.names), backend="interpreter")
            return out
        v = self._last or self._build_variant(self._default_key())
        out.update(v.binary.metadata())
        out["backend"] = "cuda"
        out["specializations"] = [list(k) for k in self._variants]
        return out

    @property
    def signature(self) -> Signature:
        if self._device is None:
            return self._cpu_or_build().signature
        return self._resolve_signature()

    def __repr__(self) -> str:
        name = self._signature.kernel if self._signature else (self.name or "?")
        return f"<tc kernel {name} on {self.device} defines={self.defines}>"


def kernel(src: str, device: object = "cuda", defines: Mapping[str, object] | None = None,
           num_warps: int = 4, num_stages: int = 3, autotune_configs: Sequence[Config] | None = None,
           autotune_key: Sequence[str] | None = None, name: str | None = None,
           filename: str = "<source>") -> Kernel:
    """tc.kernel(src, device, defines, ...): a launchable kernel (see `Kernel`)."""
    return Kernel(src, device, defines, num_warps, num_stages, autotune_configs, autotune_key,
                  name, filename)


def load(path: str | Path | KernelBinary, device: object = "cuda",
         defines: Mapping[str, object] | None = None) -> Kernel:
    """A precompiled kernel: a KernelBinary or a directory in the cache's entry format
    (meta.json, kernel.ptx, kernel.cubin) — e.g. one copied out of the tc cache."""
    if isinstance(path, KernelBinary):
        return Kernel.from_binary(path, device, defines)
    return Kernel.from_binary(read_entry(Path(path)), device, defines)


def _same_arch(binary_arch: str, device_arch: str) -> bool:
    return binary_arch.rstrip("a") == device_arch


def _expand_configs(fixed: dict[str, str], axes: dict[str, list[str]], num_warps: int,
                    num_stages: int, autotune_configs: Sequence[Config] | None) -> list[Config]:
    """Every configuration of the tuning space: each autotune config over the kernel's defines,
    or the Cartesian product of the list-valued defines."""
    if autotune_configs:
        out = []
        for c in autotune_configs:
            if not isinstance(c, Config):
                raise TypeError(f"autotune_configs must hold tc.config(...) objects, got "
                                f"{type(c).__name__}")
            merged = {**fixed, **{k: v[0] for k, v in axes.items()}, **c.defines}
            out.append(Config(merged, c.num_warps, c.num_stages))
        return out
    if not axes:
        return [Config(fixed, num_warps, num_stages)]
    names = list(axes)
    return [Config({**fixed, **dict(zip(names, values))}, num_warps, num_stages)
            for values in itertools.product(*(axes[n] for n in names))]


def _check_key(key: Sequence[str] | None) -> list[str]:
    if key is None:
        return []
    if isinstance(key, str):
        raise TypeError(f"autotune_key must be a list of argument names, got the str {key!r}")
    out = []
    for k in key:
        if not isinstance(k, str):
            raise TypeError(f"autotune_key entries must be argument names, got {k!r}")
        out.append(k)
    return out


def _check_key_names(key: Sequence[str], sig: Signature) -> None:
    for k in key:
        if k not in sig.names:
            raise ValueError(f"autotune_key: '{k}' is not a valid argument name of "
                             f"{sig.describe()}")

