"""The vector-add kernel end to end: the CPU interpreter everywhere, the GPU where there is one.

Results must equal torch's `x + y` exactly (one correctly rounded addition per element)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tc_runtime as tc
import tc_torch

DEVICES = [pytest.param("cpu", id="cpu")]
if torch.cuda.is_available():
    DEVICES.append(pytest.param("cuda", id="cuda", marks=pytest.mark.gpu))

ADD_SRC = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""

UNMASKED_SRC = """
__global__ void copy(float* z, float* x, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    *(z + off) = *(x + off);
}
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("n", [1, 7, 1023, 1024, 1025, 4097])
def test_tc_torch_add_matches_torch(device: str, dtype: torch.dtype, n: int) -> None:
    torch.manual_seed(n)
    x = torch.rand(n, device=device, dtype=dtype)
    y = torch.rand(n, device=device, dtype=dtype)
    z = tc_torch.add(x, y)
    assert z.dtype == dtype and z.device == x.device and z.shape == x.shape
    assert torch.equal(z, x + y)


@pytest.mark.parametrize("device", DEVICES)
def test_raw_pointer_kernel_like_the_tutorial(device: str) -> None:
    n = 98432
    x = torch.rand(n, device=device)
    y = torch.rand(n, device=device)
    z = torch.empty_like(x)
    k = tc.kernel(ADD_SRC, device=device, defines={"TYPE": "float", "BLOCK": 1024})
    k(z.data_ptr(), x.data_ptr(), y.data_ptr(), n, grid=lambda opt: (tc.cdiv(n, opt.BLOCK),))
    assert torch.equal(z, x + y)
    with pytest.raises(TypeError, match=r"add\(z: float\*, x: float\*, y: float\*, N: int\) takes "
                                        r"4 arguments, got 3"):
        k(z.data_ptr(), x.data_ptr(), n, grid=(1,))
    with pytest.raises(TypeError, match=r"argument 4 \('N'\)"):
        k(z.data_ptr(), x.data_ptr(), y.data_ptr(), float(n), grid=(1,))


def test_interpreter_reports_out_of_bounds_on_registered_arrays() -> None:
    x = np.arange(100, dtype=np.float32)
    z = np.zeros(100, dtype=np.float32)
    k = tc.kernel(UNMASKED_SRC, device="cpu", defines={"BLOCK": 64})
    with pytest.raises(Exception, match=r"<source>:4:.*out-of-bounds load in program \(1,\).*"
                                        r"buffer 'x'"):
        k(z, x, 100, grid=(2,))  # the second program reads x[64:128]
    k(z, x, 64, grid=(1,))
    np.testing.assert_array_equal(z[:64], x[:64])


def test_numpy_arrays_on_the_interpreter() -> None:
    x = np.random.rand(3000).astype(np.float32)
    y = np.random.rand(3000).astype(np.float32)
    z = np.empty_like(x)
    k = tc.kernel(ADD_SRC, device="cpu", defines={"TYPE": "float", "BLOCK": 512})
    k(z, x, y, 3000, grid=lambda opt: (tc.cdiv(3000, opt.BLOCK),))
    np.testing.assert_array_equal(z, x + y)
    assert "add" in k.asm("ir")
    assert k.info["signature"] == ["ptr<f32>", "ptr<f32>", "ptr<f32>", "i32"]
