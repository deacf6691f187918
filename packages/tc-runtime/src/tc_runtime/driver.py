"""A thin, checked layer over `cuda.bindings.driver`.

Why a layer: every CUresult must be checked and turned into an error that names the CUDA error and
the kernel; the device's *primary* context must be the current one (the context torch uses, so
pointers from torch tensors are valid in our kernels); and the launch path must do as little Python
work as possible. cuda-python is imported lazily, so `import tc_runtime` works on machines without
it. `Any` is used only for cuda-python objects (it ships no type information).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from .errors import TcDeviceError, TcLaunchError, TcRuntimeError

_NO_GPU = "no CUDA GPU is available"
_HINT = "; use device='cpu' to run kernels on the interpreter"

_lock = threading.Lock()
_cu: Any = None
_init_error: str | None = None
_initialized = False
_devices: dict[int, Device] = {}
_streams: dict[int, Any] = {}


def _module() -> Any:
    """cuda.bindings.driver, imported on first use."""
    global _cu, _init_error
    if _cu is None:
        try:
            from cuda.bindings import driver
        except ImportError as exc:  # cuda-bindings not installed
            _init_error = f"cuda-bindings is not installed ({exc})"
            raise TcDeviceError(f"{_NO_GPU}: {_init_error}{_HINT}") from None
        _cu = driver
    return _cu


def error_name(err: Any) -> str:
    """CUDA_ERROR_... for a CUresult (falls back to its number)."""
    try:
        res = _module().cuGetErrorName(err)
        if not res[0] and res[1]:
            name = res[1]
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # the name is a courtesy; never mask the real error
        pass
    return getattr(err, "name", None) or f"CUresult {int(err)}"


def check(result: Any, what: str, *, kernel: str | None = None,
          error: type[TcRuntimeError] = TcRuntimeError) -> Any:
    """Raise `error` if a driver call failed; return its single output (or the tuple of outputs)."""
    if isinstance(result, tuple):
        err, outputs = result[0], result[1:]
    else:
        err, outputs = result, ()
    if err:
        name = error_name(err)
        where = f" for kernel '{kernel}'" if kernel else ""
        raise error(f"{what} failed{where}: {name}", cuda_error=name, kernel=kernel)
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else outputs


def init() -> Any:
    """cuInit once per process; a machine without driver or GPU gives a clear TcDeviceError."""
    global _initialized, _init_error
    cu = _module()
    if _initialized:
        return cu
    with _lock:
        if _initialized:
            return cu
        if _init_error is not None:
            raise TcDeviceError(f"{_NO_GPU}: {_init_error}{_HINT}")
        try:
            res = cu.cuInit(0)
        except RuntimeError as exc:  # cuda-bindings 13 raises when libcuda.so cannot be found
            _init_error = (f"no CUDA GPU/driver available (the driver library could not be "
                           f"loaded: {exc})")
            raise TcDeviceError(f"{_NO_GPU}: {_init_error}{_HINT}") from None
        err = res[0] if isinstance(res, tuple) else res
        if err:
            _init_error = f"no CUDA GPU/driver available (cuInit returned {error_name(err)})"
            raise TcDeviceError(f"{_NO_GPU}: {_init_error}{_HINT}")
        _initialized = True
    return cu


def is_available() -> bool:
    """True if the driver initialises and sees at least one GPU (never raises)."""
    try:
        return device_count() > 0
    except TcRuntimeError:
        return False


def device_count() -> int:
    cu = init()
    return int(check(cu.cuDeviceGetCount(), "cuDeviceGetCount"))


class Device:
    """One GPU: its handle, retained primary context and the limits the runtime checks against."""

    def __init__(self, index: int) -> None:
        cu = init()
        count = device_count()
        if count == 0:
            raise TcDeviceError(f"{_NO_GPU}: the driver sees no GPU{_HINT}")
        if not 0 <= index < count:
            raise TcDeviceError(f"no CUDA device cuda:{index}: this machine has {count} "
                                f"device(s), cuda:0 .. cuda:{count - 1}")
        self.index = index
        self.handle: Any = check(cu.cuDeviceGet(index), "cuDeviceGet", error=TcDeviceError)
        self.context: Any = check(cu.cuDevicePrimaryCtxRetain(self.handle),
                                  "cuDevicePrimaryCtxRetain", error=TcDeviceError)
        check(cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent", error=TcDeviceError)
        raw = check(cu.cuDeviceGetName(256, self.handle), "cuDeviceGetName")
        self.name: str = (raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw))
        attr = cu.CUdevice_attribute
        self.capability = (self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                           self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.max_grid = (self._attr(attr.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
                         self._attr(attr.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                         self._attr(attr.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))
        self.max_shared_optin = self._attr(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.sm_count = self._attr(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)

    def _attr(self, which: Any) -> int:
        return int(check(_module().cuDeviceGetAttribute(which, self.handle), "cuDeviceGetAttribute"))

    @property
    def arch(self) -> str:
        """The target name the compiler takes, e.g. "sm_90"."""
        return f"sm_{self.capability[0]}{self.capability[1]}"

    def make_current(self) -> None:
        check(_module().cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def synchronize(self) -> None:
        self.make_current()
        check(_module().cuCtxSynchronize(), "cuCtxSynchronize")

    def __repr__(self) -> str:
        return f"<cuda:{self.index} {self.name} {self.arch}>"


def get_device(index: int) -> Device:
    """The Device object of cuda:index (created once; its primary context is made current)."""
    dev = _devices.get(index)
    if dev is None:
        with _lock:
            dev = _devices.get(index)
        if dev is None:
            dev = Device(index)
            _devices[index] = dev
    return dev


def several_contexts() -> bool:
    """True once more than one device is in use: launches must then set their context."""
    return len(_devices) > 1


def stream_object(handle: int) -> Any:
    """The CUstream for a raw handle (0 = the legacy default stream), memoized for launches."""
    s = _streams.get(handle)
    if s is None:
        s = _module().CUstream(handle)
        _streams[handle] = s
    return s


_torch_stream_fn: Callable[[int], int] | None = None


def current_stream(device_index: int) -> int:
    """The raw handle of torch's current stream on that device if the caller has imported torch
    (tc_runtime never imports it), else 0, the default stream."""
    global _torch_stream_fn
    fn = _torch_stream_fn
    if fn is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return 0
        raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        if raw is not None:
            fn = raw
        else:
            def fn(index: int) -> int:
                return int(torch.cuda.current_stream(index).cuda_stream)
        _torch_stream_fn = fn
    try:
        return int(fn(device_index))
    except Exception:  # CPU-only torch build, or CUDA not initialised in torch: default stream
        return 0


class Function:
    """A kernel loaded in a module; `launch` is the hot path."""

    def __init__(self, module: Module, name: str, *, num_warps: int, shared_bytes: int) -> None:
        cu = _module()
        self.module = module
        self.name = name
        self.handle: Any = check(cu.cuModuleGetFunction(module.handle, name.encode()),
                                 "cuModuleGetFunction", kernel=name, error=TcLaunchError)
        self.block_x = 32 * num_warps
        self.shared_bytes = shared_bytes
        dev = module.device
        if shared_bytes > dev.max_shared_optin:
            raise TcLaunchError(
                f"kernel '{name}' needs {shared_bytes} bytes of shared memory per block but "
                f"{dev.name} allows at most {dev.max_shared_optin}; use smaller tiles or fewer "
                f"stages (num_stages)", kernel=name)
        if shared_bytes > 48 * 1024:
            check(cu.cuFuncSetAttribute(
                self.handle, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared_bytes), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", kernel=name,
                error=TcLaunchError)
        self._launch = cu.cuLaunchKernel

    def attribute(self, name: str) -> int:
        cu = _module()
        which = getattr(cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return int(check(cu.cuFuncGetAttribute(which, self.handle), "cuFuncGetAttribute",
                         kernel=self.name))

    def launch(self, gx: int, gy: int, gz: int, stream: int, params: int) -> None:
        """Launch on a (gx, gy, gz) grid; `params` is the address of the void*[] of arguments."""
        s = _streams.get(stream)
        if s is None:
            s = stream_object(stream)
        if len(_devices) > 1:  # several devices in use: ours must be the current context
            self.module.device.make_current()
        res = self._launch(self.handle, gx, gy, gz, self.block_x, 1, 1, self.shared_bytes, s,
                           params, 0)
        err = res[0] if isinstance(res, tuple) else res
        if err:
            self._failed(err, gx, gy, gz, stream, params)

    def _failed(self, err: Any, gx: int, gy: int, gz: int, stream: int, params: int) -> None:
        cu = _module()
        if err == cu.CUresult.CUDA_ERROR_INVALID_CONTEXT:
            # A thread that never used CUDA has no current context: set ours and try once more.
            self.module.device.make_current()
            res = self._launch(self.handle, gx, gy, gz, self.block_x, 1, 1, self.shared_bytes,
                               stream_object(stream), params, 0)
            err = res[0] if isinstance(res, tuple) else res
            if not err:
                return
        name = error_name(err)
        raise TcLaunchError(
            f"launch of kernel '{self.name}' failed: {name} (grid ({gx}, {gy}, {gz}), "
            f"{self.block_x} threads per block, {self.shared_bytes} bytes of shared memory)",
            cuda_error=name, kernel=self.name)


class Module:
    """A loaded CUDA module (from cubin when it matches the device, else from PTX)."""

    def __init__(self, device: Device, *, ptx: str | None, cubin: bytes | None,
                 kernel: str) -> None:
        cu = _module()
        self.device = device
        device.make_current()
        image: bytes
        if cubin:
            image = cubin
        elif ptx:
            image = ptx.encode() + b"\0"
        else:
            raise TcLaunchError(f"kernel '{kernel}' has neither PTX nor cubin to load", kernel=kernel)
        self.handle: Any = check(cu.cuModuleLoadData(image), "cuModuleLoadData (loading the "
                                 + ("cubin" if cubin else "PTX") + ")", kernel=kernel,
                                 error=TcLaunchError)

    def function(self, name: str, *, num_warps: int, shared_bytes: int) -> Function:
        return Function(self, name, num_warps=num_warps, shared_bytes=shared_bytes)

    def unload(self) -> None:
        if self.handle is not None and _cu is not None:
            try:
                _cu.cuModuleUnload(self.handle)
            finally:
                self.handle = None


# ------------------------------------------------------------------ memory and events (do_bench)


class DeviceBuffer:
    """Raw device memory from cuMemAlloc (for the L2 flush buffer and tests)."""

    def __init__(self, device: Device, nbytes: int) -> None:
        device.make_current()
        self.device = device
        self.nbytes = nbytes
        self.ptr = int(check(_module().cuMemAlloc(nbytes), f"cuMemAlloc({nbytes})"))

    def zero_async(self, stream: int = 0) -> None:
        check(_module().cuMemsetD8Async(self.ptr, 0, self.nbytes, stream_object(stream)),
              "cuMemsetD8Async")

    def copy_from_host(self, address: int, nbytes: int) -> None:
        check(_module().cuMemcpyHtoD(self.ptr, address, nbytes), "cuMemcpyHtoD")

    def copy_to_host(self, address: int, nbytes: int) -> None:
        check(_module().cuMemcpyDtoH(address, self.ptr, nbytes), "cuMemcpyDtoH")

    def free(self) -> None:
        if self.ptr:
            check(_module().cuMemFree(self.ptr), "cuMemFree")
            self.ptr = 0


class Event:
    """A CUDA event for timing on a stream."""

    def __init__(self) -> None:
        cu = _module()
        self.handle: Any = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")

    def record(self, stream: int = 0) -> None:
        check(_module().cuEventRecord(self.handle, stream_object(stream)), "cuEventRecord")

    def synchronize(self) -> None:
        check(_module().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def elapsed_ms(self, end: Event) -> float:
        return float(check(_module().cuEventElapsedTime(self.handle, end.handle),
                           "cuEventElapsedTime"))
