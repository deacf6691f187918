"""A thin, checked layer over `cuda.bindings.driver`.

Why a layer: every CUresult must be checked and turned into an error that names the CUDA error and
the kernel; the device's *primary* context must be the current one (the context torch uses, so
pointers from torch tensors are valid in our kernels); and the launch path must do as little Python
work as possible. cuda-python is imported lazily, so `import tc_runtime` works on machines without
it. `Any` is used only for cuda-python objects (it ships no type information).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from . import knobs
from .errors import TcDeviceError, TcLaunchError, TcRuntimeError

_NO_GPU = "no CUDA GPU is available"
_HINT = "; use device='cpu' to run kernels on the interpreter"

_lock = threading.Lock()
_cu: Any = None
_init_error: str | None = None
_initialized = False
_devices: dict[int, Device] = {}
_streams: dict[int, Any] = {}
#: ctypes stream arguments of the fast launch path (0, the legacy default stream, is NULL)
_cstreams: dict[int, ctypes.c_void_p | None] = {0: None}
#: True once more than one device is in use: launches must then make their context current
_several = False
#: libcuda's cuLaunchKernel through ctypes: None = not looked up yet, False = unavailable
_raw_launch: Any = None


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
        if not _current_context():  # a fresh thread: ours; never displace the caller's (torch's)
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

    def enter(self) -> Any:
        """Make this device's context current; return the context to give back to `leave`
        (None when ours was current already or none was).

        Why not just make ours current: the current context is also the CUDA runtime's current
        device, so torch's "cuda" would silently mean the device of the last launch."""
        prev = check(_module().cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(prev) == int(self.context):
            return None
        self.make_current()
        return prev if int(prev) else None

    @staticmethod
    def leave(prev: Any) -> None:
        """Give the current context back to `prev` (from `enter`)."""
        if prev is not None:
            check(_module().cuCtxSetCurrent(prev), "cuCtxSetCurrent")

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """`with device.current():` driver calls in this device's context; the caller's current
        context (and so torch's current device) is unchanged afterwards."""
        prev = self.enter()
        try:
            yield
        finally:
            self.leave(prev)

    def synchronize(self) -> None:
        with self.current():
            check(_module().cuCtxSynchronize(), "cuCtxSynchronize")

    def __repr__(self) -> str:
        return f"<cuda:{self.index} {self.name} {self.arch}>"


def get_device(index: int) -> Device:
    """The Device object of cuda:index (created once; its primary context is made current)."""
    global _several
    dev = _devices.get(index)
    if dev is None:
        with _lock:
            dev = _devices.get(index)
        if dev is None:
            dev = Device(index)
            _devices[index] = dev
            _several = len(_devices) > 1
    return dev


def _current_context() -> int:
    """The current context's handle as an int (0: none is current in this thread)."""
    return int(check(_module().cuCtxGetCurrent(), "cuCtxGetCurrent"))


def several_contexts() -> bool:
    """True once more than one device is in use: launches must then set their context."""
    return _several


def raw_launch_function() -> Any:
    """libcuda's cuLaunchKernel as a ctypes function, or None (TC_LAUNCH_BACKEND=cuda-python, or
    the library cannot be opened by ctypes).

    Why: cuda-python's wrapper converts and type-checks its eleven arguments on every call (about
    2 us on an H200); the same driver entry point called through ctypes with arguments converted
    once per kernel (c_void_p handle, the ctypes array of parameter pointers, cached stream
    objects) costs a fraction of that. Everything else stays on cuda-python. The process shares
    one libcuda, so contexts, modules and streams are the same objects for both."""
    global _raw_launch
    if _raw_launch is None:
        _raw_launch = False
        if knobs.launch_backend() == "ctypes":
            try:
                fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
                fn.restype = ctypes.c_int
                _raw_launch = fn
            except (OSError, AttributeError):
                _raw_launch = False
    return _raw_launch or None


def cstream(handle: int) -> ctypes.c_void_p | None:
    """The ctypes argument for a raw stream handle (memoized)."""
    s = _cstreams.get(handle, False)
    if s is False:
        s = _cstreams[handle] = ctypes.c_void_p(handle) if handle else None
    return s  # type: ignore[return-value]


def stream_object(handle: int) -> Any:
    """The CUstream for a raw handle (0 = the legacy default stream), memoized for launches."""
    s = _streams.get(handle)
    if s is None:
        s = _module().CUstream(handle)
        _streams[handle] = s
    return s


#: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
_STREAM_CAPTURE_IMPLICIT = 906


def stream_capturing(handle: int) -> bool:
    """Whether the stream is being captured into a CUDA graph (torch.cuda.graph, stream capture),
    where work that synchronizes (auto-tuning's timing) is not allowed. False when the driver
    cannot say."""
    cu = _module()
    try:
        res = cu.cuStreamIsCapturing(stream_object(handle))
    except Exception:
        return False
    if res[0]:  # the legacy stream while another one captures in global mode
        return int(res[0]) == _STREAM_CAPTURE_IMPLICIT
    return int(res[1]) != 0  # CU_STREAM_CAPTURE_STATUS_NONE


_torch_stream_fn: Callable[[int], int] | None = None


def _default_stream(device_index: int) -> int:
    return 0


def stream_getter(device_index: int) -> Callable[[int], int]:
    """A function device index -> raw handle of the current stream, chosen once per kernel:
    torch's own accessor when the caller has imported torch and it works for this device, else
    the default stream. The kernel calls it per launch without further checks."""
    torch = sys.modules.get("torch")
    if torch is not None:
        raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        if raw is not None:
            try:
                int(raw(device_index))
                fn: Callable[[int], int] = raw
                return fn
            except Exception:  # CPU-only torch build or CUDA not usable by torch
                pass
        else:  # a torch without the raw accessor: its public API (slower, same stream)
            def public(index: int) -> int:
                return int(torch.cuda.current_stream(index).cuda_stream)
            try:
                public(device_index)
                return public
            except Exception:  # CPU-only torch build or CUDA not usable by torch
                pass
    return _default_stream


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


class LaunchParams(Protocol):
    """The packed arguments of a launch (see `signature.ArgPacker`)."""

    @property
    def address(self) -> int: ...  # the void** kernelParams as an int (cuda-python)

    @property
    def pointers(self) -> Any: ...  # the same array as a ctypes object (the ctypes path)


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
        max_threads = self.attribute("MAX_THREADS_PER_BLOCK")
        if self.block_x > max_threads:
            regs = self.attribute("NUM_REGS")
            raise TcLaunchError(
                f"kernel '{name}' needs {self.block_x} threads per block (num_warps={num_warps}) "
                f"but with {regs} registers per thread {dev.name} runs at most {max_threads}; "
                f"use fewer warps or smaller tiles", kernel=name)
        self._launch = cu.cuLaunchKernel
        self._raw = raw_launch_function()
        self._chandle = ctypes.c_void_p(int(self.handle))
        #: ctypes stream arguments of this function's launcher (0, the legacy stream, is NULL)
        self._cstreams: dict[int, ctypes.c_void_p] = {}

    def max_active_clusters(self, cluster: int) -> int | None:
        """How many clusters of `cluster` CTAs of this kernel (its threads and shared memory) the
        GPU runs at once (cuOccupancyMaxActiveClusters; 0: none fits), or None where the driver
        does not say.
        A persistent grid launched in clusters must not be larger: a cluster's CTAs share one GPC,
        whose SMs need not be a multiple of the cluster's, and a cluster that does not fit waits
        for a whole one to finish."""
        cu = _module()
        try:
            config = cu.CUlaunchConfig()
            config.gridDimX, config.gridDimY, config.gridDimZ = cluster, 1, 1
            config.blockDimX, config.blockDimY, config.blockDimZ = self.block_x, 1, 1
            config.sharedMemBytes = self.shared_bytes
            attr = cu.CUlaunchAttribute()
            attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
            config.attrs = [attr]
            config.numAttrs = 1
            err, count = cu.cuOccupancyMaxActiveClusters(self.handle, config)
        except (AttributeError, TypeError, ValueError):  # (bindings without the call or its types)
            return None
        return None if err else int(count)

    def attribute(self, name: str) -> int:
        cu = _module()
        which = getattr(cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return int(check(cu.cuFuncGetAttribute(which, self.handle), "cuFuncGetAttribute",
                         kernel=self.name))

    def launch(self, gx: int, gy: int, gz: int, stream: int, params: LaunchParams) -> None:
        """Launch on a (gx, gy, gz) grid with the arguments packed in `params`."""
        prev = self.module.device.enter() if _several else None
        try:
            raw = self._raw
            if raw is not None:
                s = _cstreams.get(stream, False)
                if s is False:
                    s = cstream(stream)
                err = raw(self._chandle, gx, gy, gz, self.block_x, 1, 1, self.shared_bytes, s,
                          params.pointers, None)
            else:
                res = self._launch(self.handle, gx, gy, gz, self.block_x, 1, 1,
                                   self.shared_bytes, stream_object(stream), params.address, 0)
                err = res[0]
        finally:
            if prev is not None:
                Device.leave(prev)
        if err:
            self._failed(err, gx, gy, gz, stream, params)

    def launcher(self, params: LaunchParams, pack_into: Callable[..., None], buffer: object,
                 pack: Callable[[tuple[object, ...]], object],
                 foreign: Callable[[tuple[object, ...], int, int, int, int], None]
                 ) -> Callable[[tuple[object, ...], int, int, int, int], None]:
        """The hot path of a kernel launch as one closure, `run(args, gx, gy, gz, stream)`: write
        `args` into `params`' buffer (`pack_into(buffer, 0, *args)`, or the checked `pack(args)`
        when that raises) and launch on the raw stream handle. Everything that does not change
        between launches (handle, block, shared memory, parameter array, back end) is bound once,
        so a launch is a few local loads, one pack_into and one driver call.

        The buffer belongs to the thread that creates the launcher: that thread packs and
        launches without a lock (its launches are sequential); a call from any other thread goes
        to `foreign(args, gx, gy, gz, stream)`, which must use another buffer (and a lock)."""
        handle, chandle, block_x, shared = self.handle, self._chandle, self.block_x, \
            self.shared_bytes
        enter, leave, failed = self.module.device.enter, Device.leave, self._failed
        get_ident, owner = threading.get_ident, threading.get_ident()
        raw = self._raw
        if raw is not None:
            pointers = params.pointers
            cstreams = self._cstreams
            cget = cstreams.get

            def run(args: tuple[object, ...], gx: int, gy: int, gz: int, stream: int) -> None:
                if get_ident() != owner:
                    return foreign(args, gx, gy, gz, stream)
                try:
                    pack_into(buffer, 0, *args)
                except Exception:  # out-of-range ints, objects: checked, or a clear error
                    pack(args)
                if stream:
                    s = cget(stream)
                    if s is None:
                        s = cstreams[stream] = ctypes.c_void_p(stream)
                else:
                    s = None
                if _several:  # several devices in use: launch in ours, then give the caller's back
                    prev = enter()
                    err = raw(chandle, gx, gy, gz, block_x, 1, 1, shared, s, pointers, None)
                    leave(prev)
                else:
                    err = raw(chandle, gx, gy, gz, block_x, 1, 1, shared, s, pointers, None)
                if err:
                    failed(err, gx, gy, gz, stream, params)
                return None
            return run

        launch, address = self._launch, params.address
        streams = _streams
        sget = streams.get
        cu = _module()

        def run_cuda_python(args: tuple[object, ...], gx: int, gy: int, gz: int,
                            stream: int) -> None:
            if get_ident() != owner:
                return foreign(args, gx, gy, gz, stream)
            try:
                pack_into(buffer, 0, *args)
            except Exception:  # out-of-range ints, objects: checked, or a clear error
                pack(args)
            s = sget(stream)
            if s is None:
                s = streams[stream] = cu.CUstream(stream)
            if _several:
                prev = enter()
                err = launch(handle, gx, gy, gz, block_x, 1, 1, shared, s, address, 0)[0]
                leave(prev)
            else:
                err = launch(handle, gx, gy, gz, block_x, 1, 1, shared, s, address, 0)[0]
            if err:
                failed(err, gx, gy, gz, stream, params)
            return None
        return run_cuda_python

    def _launch_slow(self, gx: int, gy: int, gz: int, stream: int, params: LaunchParams) -> Any:
        res = self._launch(self.handle, gx, gy, gz, self.block_x, 1, 1, self.shared_bytes,
                           stream_object(stream), params.address, 0)
        return res[0] if isinstance(res, tuple) else res

    def _failed(self, err: Any, gx: int, gy: int, gz: int, stream: int,
                params: LaunchParams) -> None:
        cu = _module()
        if not isinstance(err, cu.CUresult):
            try:
                err = cu.CUresult(int(err))
            except ValueError:
                pass
        if err == cu.CUresult.CUDA_ERROR_INVALID_CONTEXT:
            # A thread that never used CUDA has no current context: set ours and try once more.
            self.module.device.make_current()
            err = self._launch_slow(gx, gy, gz, stream, params)
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
        image: bytes
        if cubin:
            image = cubin
        elif ptx:
            image = ptx.encode() + b"\0"
        else:
            raise TcLaunchError(f"kernel '{kernel}' has neither PTX nor cubin to load", kernel=kernel)
        with device.current():
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
        self.device = device
        self.nbytes = nbytes
        with device.current():
            self.ptr = int(check(_module().cuMemAlloc(nbytes), f"cuMemAlloc({nbytes})"))

    def copy_from_device_async(self, src: int, nbytes: int, stream: int = 0) -> None:
        copy_device_async(self.ptr, src, nbytes, stream)

    def copy_to_device_async(self, dst: int, nbytes: int, stream: int = 0) -> None:
        copy_device_async(dst, self.ptr, nbytes, stream)

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

    def __del__(self) -> None:
        handle = getattr(self, "handle", None)
        if handle is not None and _cu is not None:
            try:
                _cu.cuEventDestroy(handle)
            except Exception:  # interpreter shutdown: nothing to do
                pass

    def elapsed_ms(self, end: Event) -> float:
        return float(check(_module().cuEventElapsedTime(self.handle, end.handle),
                           "cuEventElapsedTime"))


def copy_device_async(dst: int, src: int, nbytes: int, stream: int = 0) -> None:
    check(_module().cuMemcpyDtoDAsync(dst, src, nbytes, stream_object(stream)), "cuMemcpyDtoDAsync")


def address_range(pointer: int) -> tuple[int, int] | None:
    """(base, size) of the device allocation that holds `pointer`, or None (not device memory)."""
    if not pointer:
        return None
    try:
        res = _module().cuMemGetAddressRange(pointer)
    except Exception:
        return None
    if res[0]:
        return None
    return int(res[1]), int(res[2])


def pointer_device(pointer: int) -> int | None:
    """The ordinal of the device whose memory holds `pointer`, or None when the driver does not
    know it (host memory, a raw number).

    Why the context and not CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: on a two-H200 machine (driver
    of CUDA 13, cuda-bindings 13.3) that attribute said 0 for memory torch allocated on cuda:1,
    while the allocation's context was right. The context is matched against the devices'
    primary contexts; the ordinal is only the fallback for memory of another context."""
    if not pointer:
        return None
    cu = _module()
    attrs = cu.CUpointer_attribute
    try:
        res = cu.cuPointerGetAttribute(attrs.CU_POINTER_ATTRIBUTE_CONTEXT, pointer)
    except Exception:
        return None
    if res[0]:
        return None
    owner = _primary_context_owner(int(res[1]))
    if owner is not None:
        return owner
    try:
        res = cu.cuPointerGetAttribute(attrs.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer)
        return None if res[0] else int(res[1])
    except Exception:
        return None


def pointer_mapped(pointer: int) -> bool:
    """Whether the driver maps `pointer` for the GPU (device, managed, pinned or registered host
    memory); pageable host memory it does not know reads False."""
    cu = _module()
    try:
        res = cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                       pointer)
    except Exception:
        return False
    return not res[0]


#: primary context handle -> device ordinal, for the primary contexts seen active so far
_primary_owners: dict[int, int] = {}


def _primary_context_owner(context: int) -> int | None:
    """The ordinal of the device whose primary context is `context`, or None. Only devices whose
    primary context is active are asked (retaining an inactive one would create it)."""
    if not context:
        return None
    found = _primary_owners.get(context)
    if found is not None:
        return found
    cu = _module()
    for index in range(device_count()):
        dev = _devices.get(index)
        if dev is not None:
            _primary_owners[int(dev.context)] = index
            continue
        handle = check(cu.cuDeviceGet(index), "cuDeviceGet")
        state = cu.cuDevicePrimaryCtxGetState(handle)
        if state[0] or not state[2]:  # an error, or inactive: no memory of ours can live there
            continue
        ctx = check(cu.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")
        _primary_owners[int(ctx)] = index
        check(cu.cuDevicePrimaryCtxRelease(handle), "cuDevicePrimaryCtxRelease")
    return _primary_owners.get(context)
