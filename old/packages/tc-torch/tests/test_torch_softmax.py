"""tc_torch.softmax on the interpreter: values against torch, gradients, long rows, refusals."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck

import tc_torch
from tc_torch.ops import softmax as sm

TOL = {torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float64: 1e-12}


@pytest.mark.parametrize("dtype", list(TOL))
def test_softmax_matches_torch(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    x = torch.randn(37, 129, dtype=dtype)
    y = tc_torch.softmax(x)
    assert y.dtype == dtype and y.shape == x.shape
    ref = torch.softmax(x.double(), -1)
    assert (y.double() - ref).abs().max().item() <= TOL[dtype]


def test_softmax_gradcheck_float64() -> None:
    x = torch.randn(4, 19, dtype=torch.float64, requires_grad=True)
    assert gradcheck(tc_torch.softmax, (x,))


def test_softmax_long_rows_use_the_looped_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sm, "CPU_MAX_BLOCK", 32)
    monkeypatch.setattr(sm, "CPU_LOOP_BLOCK", 16)
    assert sm.plan(100, torch.device("cpu")) == (True, 16)
    x = torch.randn(3, 100, dtype=torch.float64, requires_grad=True)
    y = tc_torch.softmax(x)
    assert torch.allclose(y, torch.softmax(x, -1), atol=1e-12)
    assert gradcheck(tc_torch.softmax, (x,))


def test_softmax_views_and_batches() -> None:
    base = torch.randn(6, 40)
    x = base[:, :33]  # a row stride of 40: passed to the kernel as is
    assert torch.allclose(tc_torch.softmax(x), torch.softmax(x, -1), atol=1e-6)
    xt = torch.randn(33, 6).t()  # last dimension not unit-stride: copied first
    assert torch.allclose(tc_torch.softmax(xt), torch.softmax(xt, -1), atol=1e-6)
    x3 = torch.randn(2, 3, 5)
    assert torch.allclose(tc_torch.softmax(x3), torch.softmax(x3, -1), atol=1e-6)
    assert tc_torch.softmax(torch.empty(0, 7)).shape == (0, 7)


def test_softmax_refusals() -> None:
    with pytest.raises(ValueError, match="last dimension only"):
        tc_torch.softmax(torch.randn(3, 4), dim=0)
    with pytest.raises(TypeError, match="dtype int32 is not supported"):
        tc_torch.softmax(torch.ones(3, 4, dtype=torch.int32))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        tc_torch.softmax([1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one dimension"):
        tc_torch.softmax(torch.tensor(1.0))
