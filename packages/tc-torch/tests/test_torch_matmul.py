"""tc_torch.matmul on the interpreter: the four transposition variants, batches, gradients."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck

import tc_torch
from tc_torch.ops.matmul import _layout

TOL = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 0.2, torch.float64: 1e-10}


def _operand(rows: int, cols: int, transposed: bool, dtype: torch.dtype) -> torch.Tensor:
    if transposed:  # column-major: the transposed variant reads it without a copy
        return torch.randn(cols, rows, dtype=dtype).t()
    return torch.randn(rows, cols, dtype=dtype)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_variants(ta: bool, tb: bool) -> None:
    torch.manual_seed(1)
    a = _operand(64, 48, ta, torch.float32)
    b = _operand(48, 80, tb, torch.float32)
    assert _layout(a)[1] == ta and _layout(b)[1] == tb
    c = tc_torch.matmul(a, b)
    assert c.shape == (64, 80) and c.is_contiguous()
    assert (c - a @ b).abs().max().item() < TOL[torch.float32]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_matmul_dtypes_and_ragged_shapes(dtype: torch.dtype) -> None:
    a = torch.randn(37, 21, dtype=dtype)
    b = torch.randn(21, 45, dtype=dtype)
    c = tc_torch.matmul(a, b)
    assert c.dtype == dtype
    ref = a.double() @ b.double()
    assert (c.double() - ref).abs().max().item() < TOL[dtype] * max(1.0, ref.abs().max().item())


def test_matmul_batched_and_broadcast() -> None:
    a = torch.randn(3, 10, 7)
    b = torch.randn(3, 7, 9)
    assert torch.allclose(tc_torch.matmul(a, b), a @ b, atol=1e-5)
    b2 = torch.randn(7, 9)
    assert torch.allclose(tc_torch.matmul(a, b2), a @ b2, atol=1e-5)
    a1 = torch.randn(1, 10, 7)
    assert torch.allclose(tc_torch.matmul(a1, b), a1 @ b, atol=1e-5)
    at = torch.randn(3, 7, 10).transpose(1, 2)  # batched transposed variant
    assert torch.allclose(tc_torch.matmul(at, b), at @ b, atol=1e-5)


def test_matmul_gradcheck_float64() -> None:
    a = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    assert gradcheck(tc_torch.matmul, (a, b))
    a3 = torch.randn(2, 4, 5, dtype=torch.float64, requires_grad=True)
    assert gradcheck(tc_torch.matmul, (a3, b))  # b broadcast over the batch
    b3 = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    assert gradcheck(tc_torch.matmul, (a, b3))  # a broadcast over the batch


def test_matmul_degenerate_shapes() -> None:
    assert tc_torch.matmul(torch.randn(0, 4), torch.randn(4, 3)).shape == (0, 3)
    c = tc_torch.matmul(torch.randn(2, 0), torch.randn(0, 3))
    assert torch.equal(c, torch.zeros(2, 3))
    a, b = torch.randn(1, 5), torch.randn(5, 1)
    assert torch.allclose(tc_torch.matmul(a, b), a @ b, atol=1e-5)


def test_matmul_refusals() -> None:
    with pytest.raises(ValueError, match="incompatible dimensions"):
        tc_torch.matmul(torch.randn(3, 4), torch.randn(5, 6))
    with pytest.raises(TypeError, match="different dtypes"):
        tc_torch.matmul(torch.randn(3, 4), torch.randn(4, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="2-D matrices or 3-D"):
        tc_torch.matmul(torch.randn(4), torch.randn(4, 2))
    with pytest.raises(ValueError, match="do not broadcast"):
        tc_torch.matmul(torch.randn(2, 3, 4), torch.randn(3, 4, 2))
    with pytest.raises(ValueError, match="precision must be"):
        tc_torch.matmul(torch.randn(3, 4), torch.randn(4, 2), precision="fast")
    with pytest.raises(NotImplementedError, match="tf32"):
        tc_torch.matmul(torch.randn(3, 4), torch.randn(4, 2), precision="tf32")


def test_matmul_expanded_operands_read_in_place() -> None:
    row = torch.randn(1, 6)
    a = row.expand(5, 6)  # row stride 0: every row of A is the same memory
    b = torch.randn(6, 1).expand(6, 4)  # column stride 0
    torch.testing.assert_close(tc_torch.matmul(a, b), a @ b, atol=1e-5, rtol=1e-5)
