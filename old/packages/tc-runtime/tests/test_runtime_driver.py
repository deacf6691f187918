"""The driver layer: the clear no-GPU error here, real launches (from hand-written PTX) on a GPU."""

from __future__ import annotations

import ctypes
import time

import numpy as np
import pytest

import tc_runtime as tc
from tc_runtime import driver
from tc_runtime.binary import KernelBinary

HAS_GPU = driver.is_available()
gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")

# z[i] = x[i] + y[i] for i < n, one element per thread (what nvcc emits for the obvious CUDA C).
ADD_PTX = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry add(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u32 p3)
{
  .reg .pred %p<2>;
  .reg .f32 %f<4>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<11>;
  ld.param.u64 %rd1, [p0];
  ld.param.u64 %rd2, [p1];
  ld.param.u64 %rd3, [p2];
  ld.param.u32 %r2, [p3];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r1, %r3, %r4, %r5;
  setp.ge.s32 %p1, %r1, %r2;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd4, %rd2;
  mul.wide.s32 %rd5, %r1, 4;
  add.s64 %rd6, %rd4, %rd5;
  cvta.to.global.u64 %rd7, %rd3;
  add.s64 %rd8, %rd7, %rd5;
  ld.global.f32 %f1, [%rd8];
  ld.global.f32 %f2, [%rd6];
  add.f32 %f3, %f2, %f1;
  cvta.to.global.u64 %rd9, %rd1;
  add.s64 %rd10, %rd9, %rd5;
  st.global.f32 [%rd10], %f3;
DONE:
  ret;
}
"""

EMPTY_PTX = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry empty(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u32 p3)
{
  ret;
}
"""


def add_binary(num_warps: int = 4) -> KernelBinary:
    return KernelBinary(name="add", arch="sm_80", ptx=ADD_PTX, cubin=None,
                        signature=("ptr<f32>", "ptr<f32>", "ptr<f32>", "i32"),
                        arg_names=("z", "x", "y", "N"), num_warps=num_warps)


def test_cuda_device_without_gpu_is_a_clear_error() -> None:
    if HAS_GPU:
        pytest.skip("this machine has a GPU")
    with pytest.raises(tc.TcDeviceError, match="^no CUDA GPU is available: .*device='cpu'"):
        tc.kernel("__global__ void f(int n) {}", device="cuda")
    with pytest.raises(tc.TcDeviceError, match="no CUDA GPU is available"):
        tc.kernel("__global__ void f(int n) {}", device="cuda:0")
    assert driver.is_available() is False


def test_bad_device_strings() -> None:
    with pytest.raises(ValueError, match="unsupported device 'tpu'"):
        tc.kernel("__global__ void f(int n) {}", device="tpu")
    with pytest.raises(ValueError, match="index after ':'"):
        tc.kernel("__global__ void f(int n) {}", device="cuda:x")
    with pytest.raises(ValueError, match="kernel source is empty"):
        tc.kernel("   ", device="cpu")


@pytest.mark.gpu
@gpu
def test_launch_handwritten_ptx() -> None:
    k = tc.load(add_binary(), device="cuda:0", defines={"BLOCK": 128})
    dev = driver.get_device(0)
    for n in (1, 127, 128, 129, 5000):
        x = np.random.rand(n).astype(np.float32)
        y = np.random.rand(n).astype(np.float32)
        bufs = [driver.DeviceBuffer(dev, 4 * n) for _ in range(3)]
        bufs[1].copy_from_host(x.ctypes.data, 4 * n)
        bufs[2].copy_from_host(y.ctypes.data, 4 * n)
        k(bufs[0].ptr, bufs[1].ptr, bufs[2].ptr, n, grid=lambda opt: (tc.cdiv(n, opt.BLOCK),))
        z = np.empty(n, np.float32)
        dev.synchronize()
        bufs[0].copy_to_host(z.ctypes.data, 4 * n)
        np.testing.assert_array_equal(z, x + y)
        for b in bufs:
            b.free()
    assert k.info["name"] == "add"
    with pytest.raises(TypeError, match=r"add\(z: float\*, x: float\*, y: float\*, N: int\) "
                                        r"takes 4 arguments, got 3"):
        k(1, 2, 3, grid=(1,))
    with pytest.raises(TypeError, match="must be a pointer"):
        k(1.5, 2, 3, 4, grid=(1,))


@pytest.mark.gpu
@gpu
def test_launch_overhead() -> None:
    binary = KernelBinary(name="empty", arch="sm_80", ptx=EMPTY_PTX, cubin=None,
                          signature=("ptr<f32>", "ptr<f32>", "ptr<f32>", "i32"),
                          arg_names=("z", "x", "y", "N"), num_warps=4)
    k = tc.load(binary, device="cuda:0")
    dev = driver.get_device(0)
    buf = driver.DeviceBuffer(dev, 1024)
    p = buf.ptr
    total, n = 0.0, 250
    for b in range(21):  # batches below the launch-queue depth, so the GPU never throttles us
        dev.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            k(p, p, p, 1024, grid=(1,))
        if b:
            total += time.perf_counter() - t0
    per_launch_us = total / (20 * n) * 1e6
    dev.synchronize()
    buf.free()
    print(f"host overhead per launch: {per_launch_us:.2f} us")
    assert per_launch_us < 30  # target < 8 us; generous bound against noisy machines


@pytest.mark.gpu
@gpu
def test_launch_errors_name_the_kernel() -> None:
    k = tc.load(add_binary(), device="cuda:0")
    with pytest.raises(ValueError, match="above the CUDA limit"):
        k(0, 0, 0, 1, grid=(1, 70000))
    k(0, 0, 0, 0, grid=(0,))  # an empty grid launches nothing
    bad = KernelBinary(name="add", arch="sm_80", ptx="this is not ptx", cubin=None,
                       signature=("i32",), arg_names=("n",), num_warps=4)
    with pytest.raises(tc.TcLaunchError, match="kernel 'add'.*CUDA_ERROR"):
        tc.load(bad, device="cuda:0")(1, grid=(1,))
    assert ctypes.sizeof(ctypes.c_void_p) == 8
