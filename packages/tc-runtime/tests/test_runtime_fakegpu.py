"""The GPU code paths of the runtime against a simulated CUDA driver (no GPU on CI).

The fake driver keeps "device memory" in host memory, so a launch can be simulated in Python: the
kernel parameters are read back through the pointer array the runtime packed, exactly as the real
cuLaunchKernel reads them. Kernels are really compiled (PTX on the CPU); only loading and running
them is simulated. This covers specialization, auto-tuning (timing, buffer restoration, disk
records, skipped configurations), both launch back ends, several devices and launch errors.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import itertools
import statistics
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tc_runtime as tc
from tc_runtime import autotune, driver, fastcall
from tc_runtime.signature import DIV16

ACC_SRC = """
__global__ void acc(float* z, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(z + off) + 1;
}
"""


class Result(enum.IntEnum):
    """cuda-python's CUresult (the values the tests use)."""

    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701


class _Names:
    """An enum-like namespace: any CU_... attribute is its own name."""

    def __getattr__(self, name: str) -> str:
        return name


class FakeCuda:
    """The subset of cuda.bindings.driver the runtime uses, simulated."""

    CUresult = Result
    CUdevice_attribute = _Names()
    CUfunction_attribute = _Names()
    CUpointer_attribute = _Names()
    CUevent_flags = _Names()

    def __init__(self, devices: int = 1) -> None:
        self.devices = devices
        self.current_ctx: int | None = None
        self.calls: list[tuple[Any, ...]] = []
        self.functions: dict[int, str] = {}
        self.block_time: dict[int, float] = {}  # threads per block -> simulated ms per launch
        self.kernels: dict[str, Callable[[list[int], tuple[int, int, int]], None]] = {}
        self.allocations: dict[int, tuple[int, int, Any]] = {}  # base -> (size, device, buffer)
        self.fail_next: Result | None = None
        self.clock = 0.0
        self.events: dict[int, float] = {}
        self.launches = 0
        self._ids = itertools.count(1000)
        self.max_threads = 1024
        self.param_count = 8  # the kernel parameters a launch reads back for a simulated kernel
        self.tensor_maps: list[tuple[Any, ...]] = []

    # devices and contexts
    def cuInit(self, flags: int) -> tuple[Result]:
        return (Result.CUDA_SUCCESS,)

    def cuDeviceGetCount(self) -> tuple[Result, int]:
        return Result.CUDA_SUCCESS, self.devices

    def cuDeviceGet(self, index: int) -> tuple[Result, int]:
        return Result.CUDA_SUCCESS, index

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[Result, int]:
        return Result.CUDA_SUCCESS, 500 + dev

    def cuDevicePrimaryCtxGetState(self, dev: int) -> tuple[Result, int, bool]:
        return Result.CUDA_SUCCESS, 0, True

    def cuDevicePrimaryCtxRelease(self, dev: int) -> tuple[Result]:
        return (Result.CUDA_SUCCESS,)

    def cuCtxSetCurrent(self, ctx: int) -> tuple[Result]:
        self.current_ctx = ctx
        self.calls.append(("ctx", ctx))
        return (Result.CUDA_SUCCESS,)

    def cuCtxGetCurrent(self) -> tuple[Result, int]:
        return Result.CUDA_SUCCESS, self.current_ctx or 0

    def cuCtxSynchronize(self) -> tuple[Result]:
        return (Result.CUDA_SUCCESS,)

    def cuDeviceGetName(self, n: int, dev: int) -> tuple[Result, bytes]:
        return Result.CUDA_SUCCESS, b"Fake H100\0"

    def cuDeviceGetAttribute(self, which: str, dev: int) -> tuple[Result, int]:
        values = {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 9,
                  "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 0,
                  "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X": 2**31 - 1,
                  "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y": 65535,
                  "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z": 65535,
                  "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 227 * 1024,
                  "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": 132}
        return Result.CUDA_SUCCESS, values[which]

    def cuGetErrorName(self, err: int) -> tuple[Result, bytes]:
        return Result.CUDA_SUCCESS, Result(err).name.encode()

    # modules and launches
    def cuModuleLoadData(self, image: bytes) -> tuple[Result, int]:
        if image.startswith(b"this is not"):
            return (Result.CUDA_ERROR_INVALID_VALUE, 0)
        return Result.CUDA_SUCCESS, next(self._ids)

    def cuModuleGetFunction(self, module: int, name: bytes) -> tuple[Result, int]:
        h = next(self._ids)
        self.functions[h] = name.decode()
        return Result.CUDA_SUCCESS, h

    def cuFuncSetAttribute(self, *args: Any) -> tuple[Result]:
        return (Result.CUDA_SUCCESS,)

    class CUlaunchConfig:
        """A launch's configuration (the fields set are read back by cuOccupancyMaxActiveClusters)."""

    class CUlaunchAttribute:
        def __init__(self) -> None:
            self.id: object = None
            self.value = types.SimpleNamespace(clusterDim=types.SimpleNamespace(x=0, y=0, z=0))

    CUlaunchAttributeID = _Names()
    #: what cuOccupancyMaxActiveClusters answers (None: an error, as where the driver cannot say)
    cluster_capacity: int | None = None

    def cuOccupancyMaxActiveClusters(self, fn: int, config: Any) -> tuple[Result, int]:
        cluster = config.attrs[0].value.clusterDim
        self.calls.append(("max clusters", self.functions[fn], config.gridDimX, config.blockDimX,
                           config.sharedMemBytes, (cluster.x, cluster.y, cluster.z), config.numAttrs))
        if self.cluster_capacity is None:
            return Result.CUDA_ERROR_INVALID_VALUE, 0
        return Result.CUDA_SUCCESS, self.cluster_capacity

    def cuFuncGetAttribute(self, which: str, fn: int) -> tuple[Result, int]:
        return Result.CUDA_SUCCESS, {"CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK": self.max_threads,
                                       "CU_FUNC_ATTRIBUTE_NUM_REGS": 200}[which]

    def CUstream(self, handle: int) -> int:
        return handle

    #: streams being captured into a CUDA graph
    capturing: frozenset[int] = frozenset()

    def cuStreamIsCapturing(self, stream: Any) -> tuple[Result, int]:
        return Result.CUDA_SUCCESS, int(int(stream or 0) in self.capturing)

    def cuLaunchKernel(self, f: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                       shm: int, stream: Any, params: int, extra: Any) -> tuple[Result]:
        return (self.launch(int(f), (gx, gy, gz), bx, int(stream or 0), int(params)),)

    def launch(self, f: int, grid: tuple[int, int, int], bx: int, stream: int,
               params: int) -> Result:
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            return err
        name = self.functions[f]
        self.launches += 1
        self.calls.append(("launch", name, grid, bx, stream, self.current_ctx))
        self.clock += self.block_time.get(bx, 1.0)
        pointers = (ctypes.c_void_p * self.param_count).from_address(params)
        body = self.kernels.get(name)
        if body is not None:
            body([p or 0 for p in pointers], grid)
        return Result.CUDA_SUCCESS

    def raw_launch(self, f: ctypes.c_void_p, gx: int, gy: int, gz: int, bx: int, by: int,
                   bz: int, shm: int, stream: ctypes.c_void_p | None, params: Any,
                   extra: None) -> int:
        """What ctypes would hand libcuda's cuLaunchKernel."""
        assert isinstance(f, ctypes.c_void_p) and extra is None
        assert stream is None or isinstance(stream, ctypes.c_void_p)
        return int(self.launch(int(f.value or 0), (gx, gy, gz), bx,
                               int(stream.value or 0) if stream is not None else 0,
                               ctypes.addressof(params)))

    def cuTensorMapEncodeTiled(self, *args: Any) -> tuple[Result, bytes]:
        """A recognisable map: the global address it was encoded for, then zeros."""
        self.tensor_maps.append(args)
        return Result.CUDA_SUCCESS, int(args[2]).to_bytes(8, "little") + bytes(120)

    # memory
    def alloc(self, nbytes: int, device: int = 0) -> np.ndarray[Any, Any]:
        buf = np.zeros(nbytes, dtype=np.uint8)
        self.allocations[buf.ctypes.data] = (nbytes, device, buf)
        return buf

    def cuMemAlloc(self, nbytes: int) -> tuple[Result, int]:
        buf = self.alloc(nbytes)
        return Result.CUDA_SUCCESS, buf.ctypes.data

    def cuMemFree(self, ptr: int) -> tuple[Result]:
        self.allocations.pop(int(ptr))
        return (Result.CUDA_SUCCESS,)

    def cuMemsetD8Async(self, ptr: int, value: int, n: int, stream: Any) -> tuple[Result]:
        ctypes.memset(int(ptr), value, n)
        return (Result.CUDA_SUCCESS,)

    def cuMemcpyDtoDAsync(self, dst: int, src: int, n: int, stream: Any) -> tuple[Result]:
        ctypes.memmove(int(dst), int(src), n)
        return (Result.CUDA_SUCCESS,)

    def _find(self, ptr: int) -> tuple[int, int, int] | None:
        for base, (size, dev, _) in self.allocations.items():
            if base <= ptr < base + size:
                return base, size, dev
        return None

    def cuMemGetAddressRange(self, ptr: int) -> tuple[Result, int, int]:
        found = self._find(int(ptr))
        if found is None:
            return Result.CUDA_ERROR_INVALID_VALUE, 0, 0
        return Result.CUDA_SUCCESS, found[0], found[1]

    def cuPointerGetAttribute(self, which: str, ptr: int) -> tuple[Result, int]:
        """The allocation's (primary) context; DEVICE_ORDINAL says 0 whatever the device, as the
        real driver did on a two-H200 machine."""
        found = self._find(int(ptr))
        if found is None:
            return Result.CUDA_ERROR_INVALID_VALUE, 0
        if which == "CU_POINTER_ATTRIBUTE_CONTEXT":
            return Result.CUDA_SUCCESS, 500 + found[2]
        return Result.CUDA_SUCCESS, 0

    # events
    def cuEventCreate(self, flags: Any) -> tuple[Result, int]:
        return Result.CUDA_SUCCESS, next(self._ids)

    def cuEventRecord(self, ev: int, stream: Any) -> tuple[Result]:
        self.events[ev] = self.clock
        return (Result.CUDA_SUCCESS,)

    def cuEventSynchronize(self, ev: int) -> tuple[Result]:
        return (Result.CUDA_SUCCESS,)

    def cuEventElapsedTime(self, a: int, b: int) -> tuple[Result, float]:
        return Result.CUDA_SUCCESS, self.events[b] - self.events[a]

    def cuEventDestroy(self, ev: int) -> tuple[Result]:
        return (Result.CUDA_SUCCESS,)


@pytest.fixture(params=["cuda-python", "ctypes"])
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
         tmp_path: Path) -> Iterator[FakeCuda]:
    cu = FakeCuda(devices=2)
    monkeypatch.setattr(driver, "_cu", cu)
    monkeypatch.setattr(driver, "_initialized", True)
    monkeypatch.setattr(driver, "_devices", {})
    monkeypatch.setattr(driver, "_streams", {})
    monkeypatch.setattr(driver, "_cstreams", {0: None})
    monkeypatch.setattr(driver, "_several", False)
    monkeypatch.setattr(driver, "_primary_owners", {})
    monkeypatch.setattr(driver, "_raw_launch", cu.raw_launch if request.param == "ctypes"
                        else False)
    monkeypatch.setattr(driver, "stream_getter", lambda index: lambda i: 0)
    monkeypatch.setattr(autotune, "_flush", {})
    monkeypatch.setattr(autotune, "_FLUSH_BYTES", 64)
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path / "cache"))
    for knob in ("TC_SKIP_AUTOTUNING", "TC_PRINT_AUTOTUNING", "TC_ALWAYS_COMPILE"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("TC_COMPILE_WORKERS", "0")  # (compiled in this process unless a test asks)
    yield cu


def _floats(buf: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return buf.view(np.float32)


def _add_one(cu: FakeCuda) -> None:
    def body(params: list[int], grid: tuple[int, int, int]) -> None:
        z = ctypes.c_uint64.from_address(params[0]).value
        n = ctypes.c_int32.from_address(params[1]).value
        arr = np.ctypeslib.as_array((ctypes.c_float * n).from_address(z))
        arr += 1
    cu.kernels["acc"] = body


def test_a_value_that_breaks_a_declared_multiple_is_refused_on_every_path(fake: FakeCuda) -> None:
    # `int N __multipleof(8)`: the compiled code may rely on it, so 68 must never reach the driver
    _add_one(fake)
    src = ACC_SRC.replace("int N)", "int N __multipleof(8))")
    k = tc.kernel(src, device="cuda:0", defines={"BLOCK": 32})
    buf = fake.alloc(4 * 128)
    for _ in range(3):  # the general path, then the launch entry it builds
        # 24 and 68 share a specialization (neither divisible by 16): only the check tells them apart
        k(buf.ctypes.data, 24, grid=(1,))
        launches = fake.launches
        with pytest.raises(ValueError, match=r"argument 2 \('N'\) of acc\(.*\): 68 is not a multiple of 8, "
                                             r"which the kernel declares \(__multipleof\(8\)\)"):
            k(buf.ctypes.data, 68, grid=(3,))
        assert fake.launches == launches
    np.testing.assert_array_equal(_floats(buf)[:24], 3)
    np.testing.assert_array_equal(_floats(buf)[24:], 0)


def test_launch_specializes_and_packs(fake: FakeCuda) -> None:
    _add_one(fake)
    buf = fake.alloc(4 * 64)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    k(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
    assert fake.calls[-1][:4] == ("launch", "acc", (2, 1, 1), 128)
    np.testing.assert_array_equal(_floats(buf), 1)
    # the same pattern (aligned pointer, N divisible by 16) reuses the variant
    k(buf.ctypes.data, 48, grid=(2,))
    assert len(k._compiled) == 1
    # N == 1 and a misaligned pointer are new patterns: recompiled once each
    k(buf.ctypes.data, 1, grid=(1,))
    k(buf.ctypes.data + 4, 7, grid=(1,))
    k(buf.ctypes.data + 4, 9, grid=(1,))
    assert sorted(s for _, s in k._compiled) == [(0, 0), (16, 1), (16, 16)]
    z = _floats(buf)
    assert (z[0], z[1], z[7], z[8], z[9], z[10], z[48]) == (3, 4, 4, 3, 3, 2, 1)
    assert k.info["name"] == "acc" and "specializations" in k.info
    assert ".entry acc" in k.asm("ptx")


def test_argument_errors(fake: FakeCuda) -> None:
    buf = fake.alloc(256)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    with pytest.raises(TypeError, match=r"acc\(z: float\*, N: int\) takes 2 arguments, got 1"):
        k(buf.ctypes.data, grid=(1,))
    with pytest.raises(TypeError, match=r"argument 1 \('z'\) .* must be a pointer"):
        k(1.5, 4, grid=(1,))
    with pytest.raises(TypeError, match=r"argument 2 \('N'\) .* must be an integer"):
        k(buf.ctypes.data, 4.0, grid=(1,))
    with pytest.raises(ValueError, match="negative"):
        k(buf.ctypes.data, 4, grid=(-1,))
    with pytest.raises(ValueError, match="above the CUDA limit"):
        k(buf.ctypes.data, 4, grid=(1, 70000))
    with pytest.raises(AttributeError, match="opt has no attribute 'TILE'"):
        k(buf.ctypes.data, 4, grid=lambda opt: (opt.TILE,))
    with pytest.raises(TypeError, match="needs a grid"):
        k(buf.ctypes.data, 4, grid=None)
    # the fast path after a first launch still rejects bad arguments clearly
    k(buf.ctypes.data, 64, grid=(2,))
    with pytest.raises(TypeError, match="does not fit in int"):
        k(buf.ctypes.data, 2**40, grid=(1,))
    with pytest.raises(TypeError, match="must be a pointer"):
        k("x", 64, grid=(1,))


def test_launch_failure_names_error_and_kernel(fake: FakeCuda) -> None:
    buf = fake.alloc(256)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    k(buf.ctypes.data, 64, grid=(2,))
    fake.fail_next = Result.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    with pytest.raises(tc.TcLaunchError, match="launch of kernel 'acc' failed: "
                                               "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES") as info:
        k(buf.ctypes.data, 64, grid=(2,))
    assert info.value.cuda_error == "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
    # a thread without a current context: the runtime sets it and retries
    fake.fail_next = Result.CUDA_ERROR_INVALID_CONTEXT
    k(buf.ctypes.data, 64, grid=(2,))
    assert fake.calls[-1][0] == "launch"


def test_too_many_threads_is_a_clear_error(fake: FakeCuda) -> None:
    fake.max_threads = 256
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32}, num_warps=16)
    buf = fake.alloc(256)
    with pytest.raises(tc.TcLaunchError, match="needs 512 threads per block.*at most 256"):
        k(buf.ctypes.data, 64, grid=(1,))


def test_autotune_times_restores_and_remembers(fake: FakeCuda,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _add_one(fake)
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    fake.block_time = {32: 3.0, 64: 1.0, 128: 2.0}  # num_warps=2 is the fastest
    configs = [tc.config(num_warps=1), tc.config(num_warps=2), tc.config(num_warps=4)]
    buf = fake.alloc(4 * 64)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": [16, 32]},
                  autotune_configs=configs, autotune_key=["N"])
    assert len(k.configs) == 6
    opts: list[tuple[int, int]] = []

    def grid(opt: tc.Options) -> tuple[int]:
        opts.append((opt.BLOCK, opt.num_warps))
        return (tc.cdiv(64, opt.BLOCK),)

    k(buf.ctypes.data, 64, grid=grid)
    # every configuration ran many times, yet the caller's launch happened exactly once
    np.testing.assert_array_equal(_floats(buf), 1)
    assert {(16, 1), (32, 1), (16, 2), (32, 2), (16, 4), (32, 4)} <= set(opts)
    assert opts[-1] == (16, 2)  # the caller's launch: the chosen configuration's opt
    assert k.num_warps == 2 and k.info["config"].startswith("config(")
    err = capsys.readouterr().err
    assert "chose config(defines={'BLOCK': '16'}, num_warps=2" in err
    assert err.count("us\n") >= 6
    launches = fake.launches
    k(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
    assert fake.launches == launches + 1  # remembered in memory
    np.testing.assert_array_equal(_floats(buf), 2)
    # a new process (a new kernel object) finds the choice on disk
    k2 = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": [16, 32]},
                   autotune_configs=configs, autotune_key=["N"])
    launches = fake.launches
    k2(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
    assert fake.launches == launches + 1
    assert k2.num_warps == 2
    assert "remembered on disk" in capsys.readouterr().err
    # TC_RETUNE=1: a new process times the configurations again instead of reading the choice
    monkeypatch.setenv("TC_RETUNE", "1")
    k3 = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": [16, 32]},
                   autotune_configs=configs, autotune_key=["N"])
    launches = fake.launches
    k3(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
    assert fake.launches > launches + 10 and k3.num_warps == 2
    assert "remembered on disk" not in capsys.readouterr().err
    monkeypatch.delenv("TC_RETUNE")
    # a new key value tunes again
    k2(buf.ctypes.data, 32, grid=lambda opt: (tc.cdiv(32, opt.BLOCK),))
    assert fake.launches > launches + 10
    # (each call but the last added one to all 64: four of them; the last, N = 32, to the first 32)
    assert _floats(buf)[0] == 5 and _floats(buf)[40] == 4


def test_autotune_skips_configs_that_fail(fake: FakeCuda, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    fake.max_threads = 128
    configs = [tc.config(num_warps=8), tc.config(num_warps=4)]
    buf = fake.alloc(4 * 64)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32}, autotune_configs=configs)
    k(buf.ctypes.data, 64, grid=(2,))
    assert k.num_warps == 4
    assert "skipped config(defines={'BLOCK': '32'}, num_warps=8" in capsys.readouterr().err
    # a configuration the compiler rejects is skipped too
    bad = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": [3, 32]})
    bad(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
    assert bad.opt.BLOCK == 32
    assert "skipped config(defines={'BLOCK': '3'}" in capsys.readouterr().err
    # all configurations failing raises the first error
    none = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": [3, 5]})
    with pytest.raises(Exception, match="power of (two|2)|BLOCK|range"):
        none(buf.ctypes.data, 64, grid=(1,))


def test_autotune_compiles_the_configurations_in_worker_processes(fake: FakeCuda,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tc_runtime import compiler

    _add_one(fake)
    monkeypatch.setenv("TC_COMPILE_WORKERS", "2")
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    compiled_here: list[object] = []
    real = compiler.compile_source

    def counted(*args: Any, **kwargs: Any) -> Any:
        compiled_here.append(kwargs.get("defines"))
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler, "compile_source", counted)
    configs = [tc.config(num_warps=w) for w in (1, 2, 4)]
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": [16, 32, 64]}, autotune_configs=configs)
    buf = fake.alloc(4 * 64)
    k(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
    np.testing.assert_array_equal(_floats(buf), 1)
    # the nine configurations came from the workers through the disk cache: none compiled here
    assert len(k._compiled) == 9 and compiled_here == []
    assert "2 processes compiled the configurations in" in capsys.readouterr().err
    # a configuration that does not compile fails in its worker and again here, where it is
    # reported and skipped as before
    bad = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": [3, 128, 256, 512]})
    bad(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
    assert bad.opt.BLOCK in (128, 256, 512)
    assert [d["BLOCK"] for d in compiled_here] == ["3"]  # type: ignore[index]


def test_skip_autotuning_takes_the_first(fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_SKIP_AUTOTUNING", "1")
    fake.block_time = {32: 3.0, 64: 1.0}
    buf = fake.alloc(4 * 64)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32},
                  autotune_configs=[tc.config(num_warps=1), tc.config(num_warps=2)])
    k(buf.ctypes.data, 64, grid=(2,))
    assert k.num_warps == 1 and fake.launches == 1


def test_second_device_context_stream_and_pointer_check(fake: FakeCuda,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "stream_getter", lambda index: lambda i: 7000 + i)
    on0 = fake.alloc(4 * 64, device=0)
    on1 = fake.alloc(4 * 64, device=1)
    k0 = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    k1 = tc.kernel(ACC_SRC, device="cuda:1", defines={"BLOCK": 32})
    assert driver.several_contexts()
    assert fake.current_ctx == 500  # the first device's; creating cuda:1's kernel kept it
    def last_launch() -> tuple[Any, ...]:
        return [c for c in fake.calls if c[0] == "launch"][-1]

    k1(on1.ctypes.data, 64, grid=(2,))
    launch = last_launch()
    assert launch[4] == 7001 and launch[5] == 501  # cuda:1's stream, in cuda:1's context
    assert fake.current_ctx == 500  # and the caller's context (torch's device) is back
    k0(on0.ctypes.data, 64, grid=(2,))
    assert last_launch()[4] == 7000 and last_launch()[5] == 500
    for _ in range(2):  # the second launch takes the cached fast path
        k1(on1.ctypes.data, 64, grid=(2,), stream=42)
        launch = last_launch()
        assert launch[4] == 42 and launch[5] == 501 and fake.current_ctx == 500
    fake.current_ctx = 501  # the caller on cuda:1 (torch.cuda.set_device(1))
    k0(on0.ctypes.data, 64, grid=(2,))
    assert last_launch()[5] == 500 and fake.current_ctx == 501
    assert driver.pointer_device(on1.ctypes.data) == 1 and driver.pointer_device(on0.ctypes.data) == 0
    with pytest.raises(ValueError, match=r"argument 1 \('z'\).*points to memory on cuda:1, but "
                                         r"this kernel runs on cuda:0"):
        k0(on1.ctypes.data, 33, grid=(2,))  # a new key: the slow path
    with pytest.raises(ValueError, match=r"points to memory on cuda:1, but this kernel runs on "
                                         r"cuda:0"):
        k0(on1.ctypes.data, 64, grid=(2,))  # a cached key: checked while several GPUs are in use


def test_precompiled_kernel_file(fake: FakeCuda, tmp_path: Path) -> None:
    _add_one(fake)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    buf = fake.alloc(4 * 64)
    k(buf.ctypes.data, 64, grid=(2,))
    binary = k._current().binary
    for name in ("acc.ptx", "acc.json"):
        path = tc.save(binary, tmp_path / name)
        loaded = tc.load(path, device="cuda:0", defines={"BLOCK": 32})
        loaded(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
    np.testing.assert_array_equal(_floats(buf), 3)
    bad = binary.__class__(name="acc", arch="sm_90", ptx="this is not ptx", cubin=None,
                           signature=binary.signature, arg_names=binary.arg_names, num_warps=4)
    with pytest.raises(tc.TcLaunchError, match="kernel 'acc'.*CUDA_ERROR_INVALID_VALUE"):
        tc.load(bad, device="cuda:0")(buf.ctypes.data, 1, grid=(1,))


TWO_SRC = """
__global__ void first(float* z, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    *?(off < N)(z + off) = 1;
}

__global__ void second(float* z, float* x, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    *?(off < N)(z + off) = *?(off < N)(x + off) * 2;
}
"""


def test_name_picks_the_kernel_asm_and_info(fake: FakeCuda) -> None:
    buf = fake.alloc(4 * 64)
    k = tc.kernel(TWO_SRC, device="cuda:0", defines={"BLOCK": 32}, name="second")
    assert k.signature.describe() == "second(z: float*, x: float*, N: int)"
    k(buf.ctypes.data, buf.ctypes.data, 64, grid=(2,))
    assert fake.calls[-1][:2] == ("launch", "second")
    assert ".entry second" in k.asm("ptx") and ".entry first" not in k.asm("ptx")
    assert "second" in k.asm("ir") and "second" in k.asm("llvm")
    if k.info["registers"] is not None:  # ptxas ran: the cubin is there and counted
        assert bytes.fromhex(k.asm("cubin"))[:4] == b"\x7fELF"
        assert k.info["registers"] > 0 and k.info["spills"] == 0
    info = k.info
    assert info["name"] == "second" and info["num_warps"] == 4 and info["shared_bytes"] >= 0
    assert {"registers", "spills", "shared_bytes", "arch", "signature"} <= set(info)
    with pytest.raises(ValueError, match="no stage 'sass'"):
        k.asm("sass")
    first = tc.kernel(TWO_SRC, device="cuda:0", defines={"BLOCK": 32})  # the first by default
    assert first.signature.kernel == "first"
    with pytest.raises(Exception, match=r"no __global__ kernel named 'third' \(kernels: 'first', "
                                        r"'second'\)"):
        tc.kernel(TWO_SRC, device="cuda:0", defines={"BLOCK": 32}, name="third")(
            buf.ctypes.data, 64, grid=(1,))


def test_too_much_shared_memory_is_a_clear_error(fake: FakeCuda) -> None:
    binary = tc.KernelBinary(name="big", arch="sm_90", ptx=".version 8.0", cubin=None,
                             signature=("ptr<f32>", "i32"), arg_names=("z", "N"), num_warps=4,
                             shared_bytes=300 * 1024)
    k = tc.load(binary, device="cuda:0")
    with pytest.raises(tc.TcLaunchError, match=r"kernel 'big' needs 307200 bytes of shared memory "
                                               r"per block but Fake H100 allows at most 232448"):
        k(fake.alloc(64).ctypes.data, 16, grid=(1,))


def _fixed_reps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Launch counts the tests can predict: 7 timed launches per measurement of the first pass
    (per half), 9 per final round (the rounds' longer windows)."""
    monkeypatch.setattr(autotune, "_MIN_REPS", 7)
    monkeypatch.setattr(autotune, "_MAX_REPS", 7)
    monkeypatch.setattr(autotune, "FINAL_MAX_REPS", 9)


def _tuned_warps(fake: FakeCuda) -> int:
    """num_warps of the configuration the tuner chooses for a fresh kernel of two (2 or 4 warps:
    blocks of 64 or 128 threads, each launch's time `fake.block_time[threads]`)."""
    buf = fake.alloc(4 * 64)
    configs = [tc.config(num_warps=2), tc.config(num_warps=4)]
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32}, autotune_configs=configs)
    k(buf.ctypes.data, 64, grid=(2,))
    return k.num_warps


def test_autotune_timing_uses_events_warmup_and_l2_flush(fake: FakeCuda,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    memsets: list[int] = []
    events: list[int] = []
    memset, record = fake.cuMemsetD8Async, fake.cuEventRecord

    def counting_memset(ptr: int, value: int, n: int, stream: Any) -> tuple[Result]:
        memsets.append(n)
        return memset(ptr, value, n, stream)

    def counting_record(ev: int, stream: Any) -> tuple[Result]:
        events.append(ev)
        return record(ev, stream)

    monkeypatch.setattr(fake, "cuMemsetD8Async", counting_memset)
    monkeypatch.setattr(fake, "cuEventRecord", counting_record)
    _fixed_reps(monkeypatch)
    fake.block_time = {64: 2.0, 128: 1.0}
    _add_one(fake)
    seen: list[tuple[int, float]] = []  # (threads per block, z[0] before the launch)
    add_one = fake.kernels["acc"]

    def recording(params: list[int], grid: tuple[int, int, int]) -> None:
        seen.append((fake.calls[-1][3], float(_floats(buf)[0])))
        add_one(params, grid)

    fake.kernels["acc"] = recording
    buf = fake.alloc(4 * 64)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32},
                  autotune_configs=[tc.config(num_warps=2), tc.config(num_warps=4)])
    k(buf.ctypes.data, 64, grid=(2,))
    assert k.num_warps == 4
    # the first pass times the configurations in order, then in the reverse order; the buffer
    # the kernel writes is restored before each configuration's turn and before the call
    assert [bx for bx, _ in seen[::11]] == [64, 128, 128, 64, 128]
    assert seen[0] == (64, 0.0) and seen[11] == (128, 0.0) and seen[22] == (128, 0.0)
    assert seen[33] == (64, 0.0) and seen[-1] == (128, 0.0)
    assert seen[10] == (64, 10.0)
    np.testing.assert_array_equal(_floats(buf), 1)
    # per configuration and pass: 1 warm-up + 3 estimate launches, then 7 timed ones each after
    # a flush of the L2 buffer, each between its own pair of events; plus the caller's launch
    assert fake.launches == 2 * 2 * (1 + 3 + 7) + 1
    assert memsets == [autotune._FLUSH_BYTES] * 28
    assert len(events) == 2 * 2 * (2 + 2 * 7)


def test_autotune_first_pass_halves_cost_no_more_launches(fake: FakeCuda,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # a short kernel (each timed launch follows an L2 flush longer than it): each half of the
    # first pass times at most half of _MAX_REPS launches, so both halves together time as many
    # as one pass did
    monkeypatch.setattr(autotune, "_MIN_REPS", 5)
    monkeypatch.setattr(autotune, "_MAX_REPS", 20)
    fake.block_time = {64: 0.01, 128: 0.05}  # 5x apart: no final rounds
    buf = fake.alloc(4 * 64)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32},
                  autotune_configs=[tc.config(num_warps=2), tc.config(num_warps=4)])
    k(buf.ctypes.data, 64, grid=(2,))
    assert k.num_warps == 2
    # per configuration and half: 1 warm-up + 3 estimate launches + 10 timed; the caller's launch
    assert fake.launches == 2 * 2 * (1 + 3 + 10) + 1


def test_autotune_keeps_the_fastest_by_median(fake: FakeCuda,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_reps(monkeypatch)
    fake.block_time = {64: 2.0, 128: 1.0}
    launch = fake.launch
    count = itertools.count()

    def spiky(f: int, grid: tuple[int, int, int], bx: int, stream: int, params: int) -> Result:
        res = launch(f, grid, bx, stream, params)
        if bx == 128 and next(count) == 6:  # one timed launch of the faster config is very slow
            fake.clock += 99.0
        return res

    monkeypatch.setattr(fake, "launch", spiky)
    buf = fake.alloc(4 * 64)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32},
                  autotune_configs=[tc.config(num_warps=2), tc.config(num_warps=4)])
    k(buf.ctypes.data, 64, grid=(2,))
    assert k.num_warps == 4  # its mean (15 ms) is the slower one; its median (1 ms) is not


def test_autotune_times_close_configs_again_in_interleaved_rounds(
        fake: FakeCuda, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # two configurations 2% apart; the GPU is slow while the faster one is timed first (a slow
    # stretch of clocks): one pass after the other picks the wrong one, the rounds do not; a
    # configuration three times slower is not a finalist
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    _fixed_reps(monkeypatch)
    fake.block_time = {64: 1.00, 128: 1.02, 256: 3.0}
    launch = fake.launch
    count = itertools.count()

    def slow_start(f: int, grid: tuple[int, int, int], bx: int, stream: int, params: int) -> Result:
        res = launch(f, grid, bx, stream, params)
        if next(count) < 11:  # the first configuration's warm-up, estimate and timed launches
            fake.clock += 0.05
        return res

    monkeypatch.setattr(fake, "launch", slow_start)
    buf = fake.alloc(4 * 64)
    configs = [tc.config(num_warps=2), tc.config(num_warps=4), tc.config(num_warps=8)]
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32}, autotune_configs=configs)
    k(buf.ctypes.data, 64, grid=(2,))
    assert k.num_warps == 2
    err = capsys.readouterr().err
    # the first pass had num_warps=2 at 1.05 ms against 1.02: both are finalists, 8 warps not
    assert err.count(f"over {autotune.FINAL_ROUNDS} interleaved rounds") == 2 and "num_warps=8" in err
    # (the first pass: every configuration in order, then in the reverse order)
    assert fake.launches == 2 * 3 * (1 + 3 + 7) + 2 * autotune.FINAL_ROUNDS * (1 + 3 + 9) + 1
    # without the rounds the first pass decides (the configuration the drift favoured)
    monkeypatch.setattr(autotune, "FINAL_ROUNDS", 0)
    count = itertools.count()
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32}, autotune_configs=configs)
    monkeypatch.setenv("TC_ALWAYS_COMPILE", "1")
    k(buf.ctypes.data, 64, grid=(2,))
    assert k.num_warps == 4


def test_autotune_cancels_a_steady_drift_by_alternating_the_order(
        fake: FakeCuda, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the GPU slows a little with every launch (it heats): timed in one order, the configuration
    # timed first in each round would win; the second one is 1% faster and must be chosen
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    _fixed_reps(monkeypatch)
    monkeypatch.setattr(autotune, "FINAL_ROUNDS", 4)
    monkeypatch.setattr(autotune, "CLOSE_ROUNDS", 0)  # (1% apart: a close call, tested below)
    fake.block_time = {64: 1.00, 128: 0.99}
    launch = fake.launch
    count = itertools.count()
    order: list[int] = []

    def heating(f: int, grid: tuple[int, int, int], bx: int, stream: int, params: int) -> Result:
        res = launch(f, grid, bx, stream, params)
        fake.clock += 0.002 * next(count)  # each launch 2 us slower than the one before
        if not order or order[-1] != bx:
            order.append(bx)
        return res

    monkeypatch.setattr(fake, "launch", heating)
    assert _tuned_warps(fake) == 4
    # first pass: in order, then reversed (64, 128 | 128, 64); the rounds, the faster first and
    # then reversed (128, 64 | 64, 128 | ...); the caller's launch last (128)
    assert order == [64, 128, 64, 128, 64, 128, 64, 128]
    assert "over 4 interleaved rounds" in capsys.readouterr().err


def test_paired_times_compare_finalists_within_rounds() -> None:
    # X is 1% faster than Y in every round but a spike hit it in both fast rounds: the medians of
    # each one's own times put Y first (1.10 against 1.14 ms), the rounds compared one by one X
    rounds = {0: [1.14, 1.09, 1.19, 1.14, 1.09, 1.19], 1: [1.00, 1.10, 1.20, 1.00, 1.10, 1.20]}
    paired = autotune.paired_times(rounds)
    assert paired[0] < paired[1]
    # the rounds' medians: 1.07, 1.095, 1.195 (twice), their median 1.095 the unit; X's ratios
    # 1.065, 0.9954, 0.9958 (twice: median 0.9958), Y's 0.935, 1.0046, 1.0042 (median 1.0042)
    assert paired[0] == pytest.approx(1.095 * 1.19 / 1.195)
    assert paired[1] == pytest.approx(1.095 * 1.20 / 1.195)
    # rounds at one clock: the plain medians
    assert autotune.paired_times({0: [2.0, 2.0], 1: [3.0, 3.0], 2: [1.0, 1.0]}) == \
        pytest.approx({0: 2.0, 1: 3.0, 2: 1.0})


def test_autotune_compares_finalists_within_rounds(fake: FakeCuda,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the final rounds run at different clocks (+0, +0.1, +0.2 ms a launch, twice over) and the
    # 1% faster configuration (4 warps) is hit by a spike in the fast rounds: compared within the
    # rounds it wins; by the medians of each one's own rounds the slower one would
    _fixed_reps(monkeypatch)
    monkeypatch.setattr(autotune, "FINAL_ROUNDS", 6)
    fake.block_time = {64: 1.00, 128: 0.99}
    first_pass = 2 * 2 * (1 + 3 + 7)  # launches: 2 configurations, 2 halves
    per_round = 2 * (1 + 3 + 9)
    launch = fake.launch
    count = itertools.count()

    def rounds_at_other_clocks(f: int, grid: tuple[int, int, int], bx: int, stream: int,
                               params: int) -> Result:
        res = launch(f, grid, bx, stream, params)
        n = next(count)
        if first_pass <= n < first_pass + 6 * per_round:
            r = (n - first_pass) // per_round
            fake.clock += 0.1 * (r % 3) + (0.15 if bx == 128 and r % 3 == 0 else 0.0)
        return res

    monkeypatch.setattr(fake, "launch", rounds_at_other_clocks)
    assert _tuned_warps(fake) == 4
    # the same rounds judged by each one's own median choose the slower configuration
    monkeypatch.setattr(autotune, "paired_times",
                        lambda rounds: {i: statistics.median(t) for i, t in rounds.items()})
    monkeypatch.setenv("TC_ALWAYS_COMPILE", "1")
    count = itertools.count()
    assert _tuned_warps(fake) == 2


def test_do_bench_with_driver_events_and_l2_flush(fake: FakeCuda,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tc_runtime import testing

    monkeypatch.setattr(testing, "_FLUSH_BYTES", 128)
    monkeypatch.setattr(testing, "_flush_buffers", {})
    monkeypatch.setattr(testing, "_gpu_backend", lambda: "driver")
    memsets: list[int] = []
    memset = fake.cuMemsetD8Async

    def counting_memset(ptr: int, value: int, n: int, stream: Any) -> tuple[Result]:
        memsets.append(n)
        return memset(ptr, value, n, stream)

    monkeypatch.setattr(fake, "cuMemsetD8Async", counting_memset)
    durations = itertools.cycle([1.0, 1.0, 3.0, 1.0, 2.0])
    calls = []

    def fn() -> None:  # "runs" on the GPU: advances the simulated clock
        calls.append(1)
        fake.clock += next(durations)

    med, lo, hi = testing.do_bench(fn, warmup=10, rep=20)
    assert lo <= med <= hi and (lo, hi) == (1.0, 3.0)
    assert med in (1.0, 2.0)
    assert len(memsets) >= 5 and set(memsets) == {128}  # a flush before every timed call
    flushes, n = len(memsets), len(calls)
    testing.do_bench(fn, warmup=10, rep=20, clear_l2=False)
    assert len(memsets) == flushes and len(calls) > n


def test_stream_getter_follows_torch_current_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    monkeypatch.setattr(driver, "stream_getter", driver.stream_getter)  # the real one
    fake_torch = types.ModuleType("torch")
    current = {0: 11, 1: 22}
    fake_c = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda i: current[i])
    fake_torch._C = fake_c  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    get = driver.stream_getter(1)
    assert get(1) == 22 and get(0) == 11
    current[1] = 33  # `with torch.cuda.stream(s):` changes it; read per launch
    assert get(1) == 33
    # a CPU-only torch: the default stream
    fake_c._cuda_getCurrentRawStream = lambda i: (_ for _ in ()).throw(RuntimeError("no CUDA"))
    assert driver.stream_getter(0)(0) == 0
    monkeypatch.delitem(sys.modules, "torch")
    assert driver.stream_getter(0) is driver._default_stream


BF16_SRC = """
__global__ void scale(float* z, bf16 a, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    *?(off < N)(z + off) = (float) a;
}
"""


def test_bf16_scalar_is_packed_once_converted(fake: FakeCuda) -> None:
    # the first launch (the slow path) packs the normalized arguments as they are: converting
    # the bf16 bit pattern again would launch with another value
    seen: list[int] = []
    fake.kernels["scale"] = lambda params, grid: seen.append(
        ctypes.c_uint16.from_address(params[1]).value)
    k = tc.kernel(BF16_SRC, device="cuda:0", defines={"BLOCK": 32})
    buf = fake.alloc(4 * 64)
    k(buf.ctypes.data, 1.5, 64, grid=(2,))
    k(buf.ctypes.data, 1.5, 64, grid=(2,))
    assert seen == [0x3FC0, 0x3FC0]


def test_launches_from_other_threads(fake: FakeCuda) -> None:
    import threading

    _add_one(fake)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    a, b = fake.alloc(4 * 64), fake.alloc(4 * 64)
    k(a.ctypes.data, 64, grid=(2,))  # the variant is built (and its buffer owned) here
    errors: list[BaseException] = []

    def other() -> None:
        try:
            for _ in range(3):
                k(b.ctypes.data, 32, grid=(1,))
            k(b.ctypes.data, 2**40, grid=(1,))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and "does not fit in int" in str(errors[0])
    k(a.ctypes.data, 64, grid=(2,))
    np.testing.assert_array_equal(_floats(a), 2)
    np.testing.assert_array_equal(_floats(b)[:32], 3)
    np.testing.assert_array_equal(_floats(b)[32:], 0)


def test_cached_launches_take_the_generated_entry(fake: FakeCuda,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # every call of the general path is counted: after the first launch, the common forms of a
    # call (tuple or function grid of 1-3 ints, default or int stream) must launch without it
    general = _count_general(monkeypatch)
    monkeypatch.setattr(driver, "stream_getter", lambda index: lambda i: 9000 + i)
    _add_one(fake)
    buf = fake.alloc(4 * 64)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    assert isinstance(k, functools.partial) and callable(k)
    z = buf.ctypes.data
    k(z, 64, grid=(2,))
    assert len(general) == 1 and k.func is k._entry and "entry" in k._entry.__name__

    def last() -> tuple[Any, ...]:
        return [c for c in fake.calls if c[0] == "launch"][-1]

    k(z, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
    assert last()[2:5] == ((2, 1, 1), 128, 9000)
    k(z, 32, grid=(1, 3))
    assert last()[2] == (1, 3, 1)
    k(z, 32, grid=(1, 2, 2), stream=77)
    assert last()[2] == (1, 2, 2) and last()[4] == 77
    k(z, 48, grid=(2,), stream=0)
    assert last()[4] == 0
    assert len(general) == 1
    # (the simulated kernel adds 1 to the first N elements once per launch)
    np.testing.assert_array_equal(_floats(buf)[:32], 5)
    np.testing.assert_array_equal(_floats(buf)[32:48], 3)
    np.testing.assert_array_equal(_floats(buf)[48:], 2)

    # everything else goes through the general path, and still launches right
    class Stream:
        cuda_stream = 55

    launches = fake.launches
    k(z, 64, grid=[2])  # a list grid
    k(z, 64, grid=(2,), stream=Stream())  # a stream object
    assert last()[4] == 55
    k(z + 4, 8, grid=(1,))  # a misaligned pointer: another specialization
    k(z, 64, grid=(0,))  # an empty grid: checked, nothing launched
    assert len(general) == 5 and fake.launches == launches + 3
    assert sorted(s for _, s in k._compiled) == [(0, 8), (16, 16)]  # (8: N = 8, divisible by 8)
    np.testing.assert_array_equal(_floats(buf)[:10], [7, 8, 8, 8, 8, 8, 8, 8, 8, 7])
    # errors are the general path's, with nothing chained from the entry's own checks
    with pytest.raises(TypeError, match=r"takes 2 arguments, got 3") as info:
        k(z, 64, 1, grid=(2,))
    assert info.value.__context__ is None
    with pytest.raises(TypeError, match="must be a pointer"):
        k(True, 64, grid=(2,))
    with pytest.raises(ValueError, match="above the CUDA limit"):
        k(z, 64, grid=(2**31,))
    with pytest.raises(TypeError, match="needs a grid"):
        k(z, 64)
    with pytest.raises(TypeError, match="does not fit in int"):
        k(z, 2**40, grid=(1,))


def test_entry_follows_the_autotuning_key(fake: FakeCuda) -> None:
    # the entry's table is keyed like the general path: each key value launches its own choice
    k = tc.kernel(ACC_SRC, device="cuda:0", autotune_key=["N"],
                  autotune_configs=[tc.config(defines={"BLOCK": 32}),
                                    tc.config(defines={"BLOCK": 64})])
    buf = fake.alloc(4 * 256)
    fake.block_time = {128: 1.0}  # both use 4 warps: the first measured wins every key
    for n in (64, 128, 64, 128):
        k(buf.ctypes.data, n, grid=lambda opt: (tc.cdiv(n, opt.BLOCK),))
    assert len(k._fast) == 2 and len(k._records) == 2
    assert set(k._fast) == {(DIV16, DIV16, 64), (DIV16, DIV16, 128)}
    # the entry's key: N's specialization code as two bits (2: divisible by 16), then N's value
    assert set(k._records) == {(2, 64), (2, 128)}
    assert {fastcall.entry_key(k.signature, key) for key in k._fast} == set(k._records)


def test_entry_records_keep_the_variants_owner_thread(fake: FakeCuda) -> None:
    # a variant built in this thread and chosen again for another thread's new tuning key: that
    # thread's launches must not pack into this thread's buffer unlocked (the record names the
    # variant's owner, so they take the general path's locked spare packer)
    import threading

    k = tc.kernel(ACC_SRC, device="cuda:0", autotune_key=["N"],
                  autotune_configs=[tc.config(defines={"BLOCK": 32}),
                                    tc.config(defines={"BLOCK": 64})])
    buf = fake.alloc(4 * 256)
    k(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))

    def other() -> None:
        for _ in range(2):
            k(buf.ctypes.data, 128, grid=lambda opt: (tc.cdiv(128, opt.BLOCK),))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(k._records) == 2
    owners = {rec[fastcall.RECORD_FIELDS.index("owner")] for rec in k._records.values()}
    assert owners == {v.owner for v in k._fast.values()} == {threading.get_ident()}


def test_other_threads_launch_through_records_of_their_own(fake: FakeCuda,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A variant built in this thread, launched from others (a backward pass runs on torch's
    autograd thread): each other thread's first launch makes a record of its own packer and
    launches through the entry, as this thread does, never through the general path; threads
    switching every microsecond never see each other's arguments; past THREAD_RECORDS a thread
    takes the general path."""
    import sys
    import threading

    general = _count_general(monkeypatch)
    seen: list[tuple[int, int]] = []

    def body(params: list[int], grid: tuple[int, int, int]) -> None:
        seen.append((threading.get_ident(), ctypes.c_int32.from_address(params[1]).value))

    fake.kernels["acc"] = body
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    buf = fake.alloc(4 * 64)
    z = buf.ctypes.data
    k(z, 16, grid=(1,))  # (built here: this thread owns the variant's buffer)
    assert len(general) == 1
    expected: dict[int, int] = {threading.get_ident(): 16}
    release = threading.Event()  # (the threads stay alive until the end: no ident is reused)

    def launches(n: int, wait: bool = True) -> None:
        expected[threading.get_ident()] = n
        for _ in range(300):
            k(z, n, grid=(1,))
        if wait:
            release.wait()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads = [threading.Thread(target=launches, args=(32 + 16 * i,)) for i in range(4)]
    try:
        for t in threads:
            t.start()
        launches(16, wait=False)
        deadline = time.monotonic() + 60
        while len(seen) < 1 + 5 * 300 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(seen) == 1 + 5 * 300
        assert len(general) == 1  # every other thread launched through the entry
        assert all(n == expected[tid] for tid, n in seen)
        # beyond THREAD_RECORDS records for other threads: the general path (locked)
        monkeypatch.setattr(fastcall, "THREAD_RECORDS", 4)
        late = threading.Thread(target=launches, args=(128, False))
        late.start()
        late.join()
        assert len(general) == 1 + 300 and seen[-1] == (late.ident, 128)
    finally:
        sys.setswitchinterval(interval)
        release.set()
        for t in threads:
            t.join()


def _count_general(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """Record the arguments of every call of the general launch path (patch before creating the
    kernels: the entry binds it)."""
    general: list[tuple[object, ...]] = []
    original = tc.Kernel._call

    def counting(self: tc.Kernel, *args: object, grid: object = None,
                 stream: object = None) -> None:
        general.append(args)
        original(self, *args, grid=grid, stream=stream)

    monkeypatch.setattr(tc.Kernel, "_call", counting)
    return general


class _Tensor:
    """Torch-like: the address comes from data_ptr(), the element type is `dtype`."""

    def __init__(self, address: int, dtype: str = "float32", is_cuda: bool = True) -> None:
        self.address = address
        self.dtype = np.dtype(dtype)
        self.is_cuda = is_cuda

    def data_ptr(self) -> int:
        return self.address


def test_entry_takes_tensors_and_leaves_the_rest_to_the_general_path(
        fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    general = _count_general(monkeypatch)
    _add_one(fake)
    buf = fake.alloc(4 * 64)
    z = buf.ctypes.data
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    k(_Tensor(z), 64, grid=(2,))
    assert len(general) == 1
    k(_Tensor(z), 64, grid=(2,))
    k(_Tensor(z), 32, grid=lambda opt: (tc.cdiv(32, opt.BLOCK),))
    assert len(general) == 1  # tensors launch through the entry
    np.testing.assert_array_equal(_floats(buf)[:32], 3)
    np.testing.assert_array_equal(_floats(buf)[32:], 2)
    # a misaligned tensor is another specialization: the general path compiles it
    k(_Tensor(z + 4), 8, grid=(1,))
    assert len(general) == 2 and sorted(s for _, s in k._compiled) == [(0, 8), (16, 16)]
    np.testing.assert_array_equal(_floats(buf)[:10], [3, 4, 4, 4, 4, 4, 4, 4, 4, 3])

    # what is no pointer gets the general path's error, with nothing chained from the entry
    class Broken:
        def data_ptr(self) -> int:
            raise RuntimeError("no storage")

    class Floating:
        def data_ptr(self) -> float:
            return 1.5

    with pytest.raises(TypeError, match=r"argument 1 \('z'\) .* has no data pointer to give the "
                                        r"kernel \(RuntimeError: no storage\)") as info:
        k(Broken(), 64, grid=(2,))
    assert info.value.__context__ is None
    with pytest.raises(TypeError, match=r"argument 1 \('z'\) .* must be a pointer.*got float"):
        k(Floating(), 64, grid=(2,))
    with pytest.raises(TypeError, match=r"argument 1 \('z'\) .* must be a pointer") as terr:
        k(True, 64, grid=(2,))
    assert terr.value.__context__ is None
    with pytest.raises(TypeError, match=r"takes 2 arguments, got 1"):
        k(_Tensor(z), grid=(2,))
    assert fake.launches == 4


def test_entry_refuses_tensors_of_other_elements(fake: FakeCuda,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # a float64 tensor given to a float* would be read as garbage floats: refused before and
    # after the entry has learned the dtype the pointer takes, which still launches there
    general = _count_general(monkeypatch)
    _add_one(fake)
    buf = fake.alloc(4 * 64)
    z = buf.ctypes.data
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    wrong = r"argument 1 \('z'\) of acc\(z: float\*, N: int\) holds float64 elements, but the " \
        r"kernel reads it as float\*; convert it to float32 first"
    with pytest.raises(TypeError, match=wrong):
        k(_Tensor(z, "float64"), 64, grid=(2,))
    assert fake.launches == 0
    k(_Tensor(z), 64, grid=(2,))
    k(_Tensor(z), 64, grid=(2,))
    assert len(general) == 2 and fake.launches == 2
    for dtype in ("float64", "int32", "float16"):
        with pytest.raises(TypeError, match=f"holds {dtype} elements") as info:
            k(_Tensor(z, dtype), 64, grid=(2,))
        assert info.value.__context__ is None
    assert fake.launches == 2
    np.testing.assert_array_equal(_floats(buf), 2)

    # a tensor in host memory the driver does not map would fault the kernel (and end the
    # context): refused; pinned memory (mapped: here, the fake's own allocations) launches
    host = np.zeros(64, dtype=np.float32)
    cpu = r"argument 1 \('z'\) of acc\(.*\) is a tensor in CPU memory, but this kernel runs on " \
        r"cuda:0; move it to the GPU first \(tensor.to\('cuda:0'\)\)"
    for _ in range(2):
        with pytest.raises(ValueError, match=cpu):
            k(_Tensor(host.ctypes.data, is_cuda=False), 64, grid=(2,))
        k(_Tensor(z, is_cuda=False), 64, grid=(2,))
    assert fake.launches == 4
    np.testing.assert_array_equal(_floats(buf), 4)

    # a tensor on torch's meta device has no data (data_ptr() 0): refused, not launched with a
    # null pointer, on the general path and the entry alike
    import torch

    meta = r"argument 1 \('z'\) of acc\(.*\) is a tensor on the meta device, which holds no data"
    for _ in range(2):
        with pytest.raises(ValueError, match=meta):
            k(torch.zeros(64, device="meta"), 64, grid=(2,))
    assert fake.launches == 4

    # an object with data_ptr() and no dtype is an address as it is: launched (by the general
    # path), unchecked as a raw int would be
    class Bare:
        def data_ptr(self) -> int:
            return z

    k(Bare(), 64, grid=(2,))
    assert fake.launches == 5
    np.testing.assert_array_equal(_floats(buf), 5)


FILL_SRC = """
__global__ void fill(float* z, int N, float v) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    *?(off < N)(z + off) = v;
}
"""


def test_entry_reports_argument_counts_like_the_general_path(
        fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    general = _count_general(monkeypatch)
    buf = fake.alloc(4 * 64)
    z = buf.ctypes.data
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    k(z, 64, grid=(2,))
    for args, got in (((z,), 1), ((), 0), ((z, 64, 1), 3), ((z, 64, 1, 2), 4)):
        with pytest.raises(TypeError, match=rf"acc\(z: float\*, N: int\) takes 2 arguments, "
                                            rf"got {got}$") as info:
            k(*args, grid=(2,))
        assert info.value.__context__ is None
        assert general[-1] == args
    with pytest.raises(TypeError, match="N"):  # no other keyword than grid and stream
        k(z, 64, grid=(2,), N=3)  # type: ignore[call-arg]
    # the last argument is a float, which is not part of the key: a missing one is noticed too
    values: list[float] = []
    fake.kernels["fill"] = lambda params, grid: values.append(
        ctypes.c_float.from_address(params[2]).value)
    f = tc.kernel(FILL_SRC, device="cuda:0", defines={"BLOCK": 32})
    f(z, 64, 2.5, grid=(2,))
    calls = len(general)
    f(z, 64, 0.5, grid=(2,))
    assert len(general) == calls and values == [2.5, 0.5]
    with pytest.raises(TypeError, match=r"takes 3 arguments, got 2$"):
        f(z, 64, grid=(2,))
    with pytest.raises(TypeError, match=r"argument 3 \('v'\) .* must be a number"):
        f(z, 64, "x", grid=(2,))
    assert values == [2.5, 0.5]


ROWS_SRC = """
__global__ void copy_rows(float* dst, float* src, int M, int N, int stride_d, int stride_s) {
    int row = get_program_id(0);
    int off[BLOCK] = 0 ... BLOCK;
    bool mask[BLOCK] = (off < N) & (row < M);
    *?(mask)(dst + row * stride_d + off) = *?(mask)(src + row * stride_s + off);
}
"""


def test_entry_key_of_several_integers(fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    # the integers' specialization codes are two bits each of one int key
    general = _count_general(monkeypatch)
    launched: list[tuple[int, ...]] = []
    fake.kernels["copy_rows"] = lambda params, grid: launched.append(tuple(
        ctypes.c_int32.from_address(p).value for p in params[2:6]))
    buf = fake.alloc(4 * 64 * 64 * 2)
    d, s = buf.ctypes.data, buf.ctypes.data + 4 * 64 * 64
    k = tc.kernel(ROWS_SRC, device="cuda:0", defines={"BLOCK": 64})
    shapes = [(64, 64, 64, 64), (1, 17, 64, 1), (3, 16, 1, 48), (8, 24, 40, 16)]
    for shape in shapes:
        k(d, s, *shape, grid=(shape[0],))
    assert len(general) == 4
    # M, N, stride_d, stride_s at bits 0-1, 2-3, 4-5, 6-7 (2: divisible by 16, 3: by 8 only,
    # 1: equal to 1)
    assert set(k._records) == {2 | 2 << 2 | 2 << 4 | 2 << 6, 1 | 0 << 2 | 2 << 4 | 1 << 6,
                               0 | 2 << 2 | 1 << 4 | 2 << 6, 3 | 3 << 2 | 3 << 4 | 2 << 6}
    assert {fastcall.entry_key(k.signature, key) for key in k._fast} == set(k._records)
    for shape in shapes + [(32, 32, 128, 16), (7, 1, 9, 1)]:
        k(d, s, *shape, grid=(shape[0],))
    assert len(general) == 5  # only the new pattern (NONE, ONE, NONE, ONE) took it
    assert launched == shapes + shapes + [(32, 32, 128, 16), (7, 1, 9, 1)]


def test_entry_without_torch_launches_on_the_default_stream(
        fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    # no torch: the stream getter is the default one, which the entry inlines as 0
    general = _count_general(monkeypatch)
    monkeypatch.setattr(driver, "stream_getter", lambda index: driver._default_stream)
    buf = fake.alloc(4 * 64)
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32})
    for stream in (None, None, 0, 5, 5, None):
        k(buf.ctypes.data, 64, grid=(2,), stream=stream)
    assert len(general) == 1 and "stream_fn" not in k._entry.__code__.co_names
    streams = [c[4] for c in fake.calls if c[0] == "launch"]
    assert streams == [0, 0, 0, 5, 5, 0]


MATMUL_SRC = (Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels" / "matmul_tutorial.tc").read_text()


def test_persistent_configuration_launches_one_program_per_sm(fake: FakeCuda,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A configuration compiled persistent (options={"persistent": True, ...}) launches at most
    one program per SM (the fake has 132), as few as take the same number of the grid's programs
    each (512 programs: 4 each on 128, not 4 or 3 on 132), of 9 warps (8 + the producer), with the
    program grid as three i32 after the nine arguments and the tensor maps after those: the
    general path on the first call, the launch entry on the next ones, alike."""
    general = _count_general(monkeypatch)
    seen: list[tuple[tuple[int, int, int], tuple[int, ...], list[int]]] = []

    def body(params: list[int], grid: tuple[int, int, int]) -> None:
        ints = tuple(ctypes.c_int32.from_address(p).value for p in params[3:12])
        maps = [ctypes.c_uint64.from_address(p).value for p in params[12:15]]
        seen.append((grid, ints, maps))

    fake.kernels["dot"] = body
    fake.param_count = 15
    a, b, c = fake.alloc(4096), fake.alloc(4096), fake.alloc(4096)
    cfg = tc.config({"MB": 128, "NB": 256, "KB": 64}, num_warps=8, num_stages=3,
                    options={"persistent": True, "tma_store": True})
    assert cfg.options == {"persistent": True, "tma_store": True, "warp_specialize": True}
    k = tc.kernel(MATMUL_SRC, device="cuda:0", defines={"TYPE": "half"}, autotune_configs=[cfg])
    shapes = ((4096, 4096, 32 * 16, 128), (1024, 512, 8 * 2, 16), (4224, 4096, 33 * 16, 132),
              (8192, 8192, 64 * 32, 128), (4352, 4096, 34 * 16, 109))
    for m, n, programs, ctas in shapes:
        for _ in range(3):
            k(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, n, 64, 64, 64, 64,
              grid=lambda opt, m=m, n=n: (tc.cdiv(m, opt.MB) * tc.cdiv(n, opt.NB),))
            assert fake.calls[-1][:4] == ("launch", "dot", (ctas, 1, 1), 9 * 32)
            grid, ints, maps = seen[-1]
            assert ints == (m, n, 64, 64, 64, 64, programs, 1, 1)
            assert maps == [a.ctypes.data, b.ctypes.data, c.ctypes.data]  # (the fake's map: its address)
        # (a grid of programs given as a tuple takes the entry as well)
        k(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, n, 64, 64, 64, 64, grid=(programs,))
        assert fake.calls[-1][2] == (ctas, 1, 1) and seen[-1][1][6:] == (programs, 1, 1)
    assert len(general) == 1  # (the first call; every shape has the same key: one configuration)
    assert k.info["persistent"] is True
    assert len(k._records) == 1
    # a program grid of 2**31 or more is the general path's error, as on a first call
    with pytest.raises(ValueError, match=r"programs must number fewer than 2\*\*31"):
        k(a.ctypes.data, b.ctypes.data, c.ctypes.data, 4096, 4096, 64, 64, 64, 64, grid=(2**16, 2**15))
    with pytest.raises(TypeError, match="must be True or False"):
        tc.config({"MB": 128}, options={"persistent": 1})
    with pytest.raises(ValueError, match="'unroll' is not one of tma, tma_store, warp_specialize, persistent"):
        tc.config({"MB": 128}, options={"unroll": True})


def _persistent_4096(fake: FakeCuda, stages: int, options: dict[str, bool],
                     expected: dict[str, bool]) -> tc.Kernel:
    """The fp16 128x256x64 matmul with 8 warps, `stages` and schedule `options` (checked to
    read back as `expected`), launched once at 4096^2 x 64: 512 programs."""
    fake.param_count = 15
    a, b, c = fake.alloc(4096), fake.alloc(4096), fake.alloc(4096)
    cfg = tc.config({"MB": 128, "NB": 256, "KB": 64}, num_warps=8, num_stages=stages, options=options)
    assert cfg.options == expected
    k = tc.kernel(MATMUL_SRC, device="cuda:0", defines={"TYPE": "half"}, autotune_configs=[cfg])
    k(a.ctypes.data, b.ctypes.data, c.ctypes.data, 4096, 4096, 64, 64, 64, 64,
      grid=lambda opt: (tc.cdiv(4096, opt.MB) * tc.cdiv(4096, opt.NB),))
    return k


def test_persistent_configuration_without_a_producer_warp(fake: FakeCuda) -> None:
    """options={"persistent": True, "warp_specialize": False}: the kernel still loops over the
    grid's programs (tc_opt.persistent), on as few CTAs as take the same number each, but of the
    configuration's 8 warps only, with the program grid after the arguments."""
    seen: list[tuple[int, ...]] = []

    def body(params: list[int], grid: tuple[int, int, int]) -> None:
        seen.append(tuple(ctypes.c_int32.from_address(p).value for p in params[3:12]))

    fake.kernels["dot"] = body
    k = _persistent_4096(fake, 4, {"persistent": True, "warp_specialize": False},
                         {"persistent": True, "warp_specialize": False})
    assert fake.calls[-1][:4] == ("launch", "dot", (128, 1, 1), 8 * 32)
    assert seen[-1] == (4096, 4096, 64, 64, 64, 64, 512, 1, 1)
    assert k.info["persistent"] is True


def test_stream_k_configuration_launches_every_sm_with_its_workspace(fake: FakeCuda) -> None:
    """options={"persistent": True, "stream_k": True}: one CTA per SM (132 for 512 programs: the
    last waves are shared, not balanced away on 128), the grid's extents and then the workspace
    (partial sums of 128x256 floats and i32 flags for 132 programs, zeroed) as two u64 before
    the tensor maps; the workspace is allocated once per stream."""
    seen: list[tuple[tuple[int, ...], int, int]] = []

    def body(params: list[int], grid: tuple[int, int, int]) -> None:
        ints = tuple(ctypes.c_int32.from_address(p).value for p in params[3:12])
        partials, flags = (ctypes.c_uint64.from_address(p).value for p in params[12:14])
        seen.append((ints, partials, flags))

    fake.kernels["dot"] = body
    fake.param_count = 17
    allocs = len(fake.allocations)
    k = _persistent_4096(fake, 3, {"persistent": True, "stream_k": True},
                         {"persistent": True, "stream_k": True, "warp_specialize": True})
    assert fake.calls[-1][:4] == ("launch", "dot", (132, 1, 1), 8 * 32)
    ints, partials, flags = seen[-1]
    assert ints == (4096, 4096, 64, 64, 64, 64, 512, 1, 1)
    assert flags - partials == 132 * 128 * 256 * 4
    size, _, buf = fake.allocations[partials]
    assert size == flags - partials + 4 * 132 and not buf.any()
    assert len(fake.allocations) == allocs + 4  # (the workspace, and the three operands)
    a = fake.alloc(4096)
    k(a.ctypes.data, a.ctypes.data, a.ctypes.data, 4096, 4096, 64, 64, 64, 64,
      grid=lambda opt: (tc.cdiv(4096, opt.MB) * tc.cdiv(4096, opt.NB),))
    assert seen[-1][1:] == (partials, flags) and len(fake.allocations) == allocs + 5
    assert k.info["persistent"] is True
    with pytest.raises(ValueError, match="'stream_k' needs 'persistent'"):
        tc.config({"MB": 128}, options={"stream_k": True})


def test_persistent_configuration_with_a_producer_warpgroup(fake: FakeCuda) -> None:
    """options={"persistent": True, "producer_warpgroup": True}: the producer is a warpgroup
    that hands its registers to the consumers (tc_opt.warp_specialize.register_split), so the
    launch has 12 warps (8 + 4) on the persistent grid."""
    k = _persistent_4096(fake, 3, {"persistent": True, "producer_warpgroup": True},
                         {"persistent": True, "producer_warpgroup": True, "warp_specialize": True})
    assert fake.calls[-1][:4] == ("launch", "dot", (128, 1, 1), 12 * 32)
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in k.asm("ptx")


def test_persistent_configuration_in_clusters_launches_whole_clusters(fake: FakeCuda) -> None:
    """options={"persistent": True, "cluster_multicast": True}: the PTX requires clusters of 2
    (.reqnctapercluster), so the persistent grid is rounded up to an even number of CTAs: 512
    programs run on 128 CTAs as before, 131 programs on 132 (the last CTA has none), and the
    kernel still gets the grid the caller asked for."""
    seen: list[tuple[int, ...]] = []

    def body(params: list[int], grid: tuple[int, int, int]) -> None:
        seen.append(tuple(ctypes.c_int32.from_address(p).value for p in params[9:12]))

    fake.kernels["dot"] = body
    k = _persistent_4096(fake, 3, {"persistent": True, "cluster_multicast": True},
                         {"persistent": True, "cluster_multicast": True, "warp_specialize": True})
    assert fake.calls[-1][:4] == ("launch", "dot", (128, 1, 1), 9 * 32)
    assert k.info["cluster"] == 2 and ".reqnctapercluster 2, 1, 1" in k.asm("ptx")
    a = fake.alloc(4096)
    k(a.ctypes.data, a.ctypes.data, a.ctypes.data, 4096, 4096, 64, 64, 64, 64, grid=(131,))
    assert fake.calls[-1][:4] == ("launch", "dot", (132, 1, 1), 9 * 32)
    assert seen[-1] == (131, 1, 1)


def test_clusters_of_four_launch_no_more_clusters_than_fit(fake: FakeCuda) -> None:
    """options={"persistent": True, "cluster_multicast": True, "cluster_2x2": True}: the PTX
    requires clusters of 4, and the persistent grid is a multiple of 4 CTAs no larger than the
    clusters cuOccupancyMaxActiveClusters says run at once (asked with the kernel's threads,
    shared memory and cluster shape): with 31 of them 124 CTAs, so 512 programs run 5 to a CTA
    on 104 CTAs; where the driver cannot say, whole clusters of the SMs (132 -> 128 programs on
    128 CTAs)."""
    fake.cluster_capacity = 31
    options = {"persistent": True, "cluster_multicast": True, "cluster_2x2": True}
    k = _persistent_4096(fake, 3, options, {**options, "warp_specialize": True})
    asked = [c for c in fake.calls if c[0] == "max clusters"]
    assert len(asked) == 1 and asked[0][1:3] == ("dot", 4) and asked[0][3] == 9 * 32 and asked[0][5:] == ((4, 1, 1), 1)
    assert asked[0][4] == k.info["shared_bytes"] > 48 * 1024
    assert fake.calls[-1][:4] == ("launch", "dot", (104, 1, 1), 9 * 32)
    assert k.info["cluster"] == 4 and ".reqnctapercluster 4, 1, 1" in k.asm("ptx")
    fake.cluster_capacity = None
    fake2 = _persistent_4096(fake, 4, options, {**options, "warp_specialize": True})
    assert fake.calls[-1][:4] == ("launch", "dot", (128, 1, 1), 9 * 32) and fake2.info["cluster"] == 4
    with pytest.raises(ValueError, match="'cluster_2x2' needs 'cluster_multicast'"):
        tc.config({"MB": 128}, options={"persistent": True, "cluster_2x2": True})
    fake.cluster_capacity = 0  # (none fits: a clear error, not the driver's launch failure)
    with pytest.raises(tc.TcLaunchError, match=r"kernel 'dot' runs in clusters of 4 CTAs, but the GPU fits no such "
                       r"cluster with 288 threads and \d+ bytes of shared memory a CTA"):
        _persistent_4096(fake, 2, options, {**options, "warp_specialize": True})
    pairs = {"persistent": True, "cluster_multicast": True}
    with pytest.raises(tc.TcLaunchError, match=r"clusters of 2 CTAs.*or no clusters \(config option cluster_multicast off\)"):
        _persistent_4096(fake, 2, pairs, {**pairs, "warp_specialize": True})


def test_persistent_ctas_round_up_to_whole_clusters() -> None:
    from tc_runtime.kernel import persistent_ctas

    assert [persistent_ctas(p, 132) for p in (1, 7, 131, 132, 512, 2048)] == [1, 7, 131, 132, 128, 128]
    assert [persistent_ctas(p, 132, 2) for p in (1, 7, 131, 132, 512, 2048, 133)] == [2, 8, 132, 132, 128, 128, 68]


def test_cluster_multicast_needs_a_persistent_producer() -> None:
    with pytest.raises(ValueError, match="cluster_multicast.*persistent"):
        tc.config({"MB": 128}, options={"cluster_multicast": True})
    with pytest.raises(ValueError, match="cluster_multicast.*persistent"):
        tc.config({"MB": 128}, options={"cluster_multicast": True, "persistent": True, "warp_specialize": False})


def test_autotuning_inside_graph_capture_is_refused_with_a_way_out(
        fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    # timing configurations synchronizes, which would invalidate a capture: a new tuning key on a
    # capturing stream is refused before any work; keys tuned before capture launch as usual
    k = tc.kernel(ACC_SRC, device="cuda:0", autotune_key=["N"],
                  autotune_configs=[tc.config(defines={"BLOCK": 32}),
                                    tc.config(defines={"BLOCK": 64})])
    buf = fake.alloc(4 * 256)
    z = buf.ctypes.data
    k(z, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),), stream=7)  # warm-up: tuned for N = 64
    launches = fake.launches
    monkeypatch.setattr(fake, "capturing", frozenset({7}))
    k(z, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),), stream=7)
    assert fake.launches == launches + 1
    with pytest.raises(tc.TcLaunchError, match=r"kernel 'acc' would auto-tune inside CUDA graph "
                                              r"capture \(for N = 128\).*call it once with arguments of the same "
                                              r"shape before capturing"):
        k(z, 128, grid=lambda opt: (tc.cdiv(128, opt.BLOCK),), stream=7)
    assert fake.launches == launches + 1
    k(z, 128, grid=lambda opt: (tc.cdiv(128, opt.BLOCK),), stream=8)  # another stream: tuned
    assert fake.launches > launches + 1


def test_autotune_settles_a_close_call_with_more_rounds(fake: FakeCuda, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # three finalists: 4 warps 1% faster than 2 warps, 8 warps 5% slower; a spike slows 4 warps
    # in three of the four final rounds, so that those rounds rank it behind 2 warps. The two
    # are a close call (within CLOSE_MARGIN): four more rounds among them alone find 4 warps
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    _fixed_reps(monkeypatch)
    monkeypatch.setattr(autotune, "FINAL_ROUNDS", 4)
    monkeypatch.setattr(autotune, "CLOSE_ROUNDS", 4)
    fake.block_time = {64: 1.00, 128: 0.99, 256: 1.05}
    first_pass = 3 * 2 * (1 + 3 + 7)  # launches: 3 configurations, 2 halves
    per_round = 3 * (1 + 3 + 9)
    launch = fake.launch
    count = itertools.count()
    threads: list[int] = []

    def spiky(f: int, grid: tuple[int, int, int], bx: int, stream: int, params: int) -> Result:
        res = launch(f, grid, bx, stream, params)
        n = next(count)
        threads.append(bx)
        if first_pass <= n < first_pass + 3 * per_round and bx == 128:
            fake.clock += 0.02
        return res

    monkeypatch.setattr(fake, "launch", spiky)
    buf = fake.alloc(4 * 64)
    configs = [tc.config(num_warps=2), tc.config(num_warps=4), tc.config(num_warps=8)]

    def tuned() -> int:
        k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32}, autotune_configs=configs)
        k(buf.ctypes.data, 64, grid=(2,))
        return k.num_warps

    assert tuned() == 4
    err = capsys.readouterr().err
    assert err.count("over 4 interleaved rounds") == 3
    assert err.count("over 8 interleaved rounds (a close call)") == 2 and "num_warps=4" in err
    # the extra rounds ran the close two alone: 8 warps only in the first pass and the 4 rounds
    close_rounds = 4 * 2 * (1 + 3 + 9)
    assert len(threads) == first_pass + 4 * per_round + close_rounds + 1
    assert 256 not in threads[first_pass + 4 * per_round:]
    # without them the four rounds decide, and the spikes win
    monkeypatch.setattr(autotune, "CLOSE_ROUNDS", 0)
    monkeypatch.setenv("TC_ALWAYS_COMPILE", "1")
    count = itertools.count()
    assert tuned() == 2


def _launched_blocks(fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The block size (threads) of every launch from now on, in order (the list fills as the
    fake GPU launches; a test may clear it)."""
    launch = fake.launch
    threads: list[int] = []

    def counting(f: int, grid: tuple[int, int, int], bx: int, stream: int, params: int) -> Result:
        threads.append(bx)
        return launch(f, grid, bx, stream, params)

    monkeypatch.setattr(fake, "launch", counting)
    return threads


def test_autotune_times_only_the_configurations_added_since_the_last_tuning(
        fake: FakeCuda, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # the remembered times are kept per configuration: a configuration added to the list is timed
    # against the remembered choice alone (Triton re-tunes the whole list: triton#9822)
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    _fixed_reps(monkeypatch)
    fake.block_time = {64: 1.10, 128: 0.99, 256: 0.95}
    threads = _launched_blocks(fake, monkeypatch)
    buf = fake.alloc(4 * 64)

    def tuned(*configs: tc.Config) -> int:
        threads.clear()
        k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 32}, autotune_configs=list(configs))
        k(buf.ctypes.data, 64, grid=(2,))
        return k.num_warps

    two, four, eight = (tc.config(num_warps=w) for w in (2, 4, 8))
    assert tuned(two, four) == 4 and set(threads) == {64, 128}
    capsys.readouterr()
    assert tuned(two, four, eight) == 8
    assert set(threads) == {128, 256}  # 2 warps (10% behind) is not timed again
    assert "1 configurations not timed before, timed against the choice remembered" in capsys.readouterr().err
    # the same configurations in another order: nothing is new, nothing is timed
    assert tuned(eight, two, four) == 8 and threads == [256]  # (the caller's launch)
    assert "(remembered on disk; no configuration is new)" in capsys.readouterr().err
    # the remembered choice removed (from a list not tuned before): all are timed again
    assert tuned(four, two) == 4 and set(threads) == {64, 128}
    # TC_RETUNE=1 times them all too
    monkeypatch.setenv("TC_RETUNE", "1")
    assert tuned(two, four, eight) == 8 and set(threads) == {64, 128, 256}


def test_autotune_history_keeps_close_calls_and_compile_failures(
        fake: FakeCuda, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    _fixed_reps(monkeypatch)
    fake.block_time = {64: 1.00, 128: 0.99, 256: 1.20}  # 2 and 4 warps within CLOSE_MARGIN
    threads = _launched_blocks(fake, monkeypatch)
    buf = fake.alloc(4 * 64)
    bad = tc.config({"BLOCK": 3}, num_warps=2)  # the compiler rejects a block of 3

    def tuned(*configs: tc.Config) -> int:
        threads.clear()
        k = tc.kernel(ACC_SRC, device="cuda:0", autotune_configs=list(configs))
        k(buf.ctypes.data, 64, grid=lambda opt: (tc.cdiv(64, opt.BLOCK),))
        return k.num_warps

    two, four, eight = (tc.config({"BLOCK": 32}, num_warps=w) for w in (2, 4, 8))
    assert tuned(bad, two, four) == 4
    assert "skipped config(defines={'BLOCK': '3'}" in capsys.readouterr().err
    # 8 warps added: the close call (2 warps) is timed again beside the choice; the configuration
    # that did not compile is not compiled again
    assert tuned(bad, two, four, eight) == 4 and set(threads) == {64, 128, 256}
    err = capsys.readouterr().err
    assert "1 configurations not timed before" in err and "BLOCK': '3'" not in err


def test_autotune_histories_of_one_source_with_other_defines_stay_apart(
        fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    # tc_torch's matmul is one source with TYPE=half or bf16: the tuning of one must not replace
    # the history of the other (each would then time every configuration again)
    _fixed_reps(monkeypatch)
    fake.block_time = {64: 1.10, 128: 0.99, 256: 0.95}
    threads = _launched_blocks(fake, monkeypatch)
    buf = fake.alloc(4 * 64)

    def tuned(block: int, *warps: int) -> None:
        threads.clear()
        k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": block},
                      autotune_configs=[tc.config(num_warps=w) for w in warps])
        k(buf.ctypes.data, 64, grid=(64 // block,))

    tuned(32, 2, 4)
    tuned(16, 2, 4)
    tuned(32, 2, 4, 8)
    assert set(threads) == {128, 256}


def test_incremental_plan_ignores_records_it_cannot_use() -> None:
    reprs = ["a", "b", "c"]
    for bad in (None, {}, {"config": "a"}, {"config": "z", "times_ms": {"a": 1.0}},
                {"config": "a", "times_ms": [1.0]}, {"config": 3, "times_ms": {"a": 1.0}},
                {"config": "a", "times_ms": {"a": 1.0}, "failed": "b"}):
        assert autotune.incremental_plan(reprs, bad) is None, bad
    plan = autotune.incremental_plan(reprs, {"config": "b", "times_ms": {"a": 2.0, "b": 1.0}, "failed": ["c"]})
    assert plan is not None and plan.winner == 1 and plan.indices == [] and plan.new == []
    plan = autotune.incremental_plan(reprs, {"config": "b", "times_ms": {"a": 1.01, "b": 1.0}})
    assert plan is not None and plan.indices == [0, 1, 2] and plan.new == [2]  # a: a close call
