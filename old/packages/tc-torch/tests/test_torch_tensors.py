"""Tensors as arguments, for every op on the interpreter: strided views (row strides passed to the
kernels, other layouts copied), tensors on different devices refused, unsupported devices
refused with a clear message."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

import tc_torch

Op = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: Every op with a second tensor argument: (name, call, first input, second input).
TWO_TENSORS: list[tuple[str, Op, torch.Tensor, torch.Tensor]] = [
    ("add", tc_torch.add, torch.randn(4, 4), torch.randn(4, 4)),
    ("matmul", tc_torch.matmul, torch.randn(4, 4), torch.randn(4, 4)),
    ("cross_entropy", tc_torch.cross_entropy, torch.randn(4, 4), torch.tensor([0, 1, 2, 3])),
    ("layer_norm", lambda x, w: tc_torch.layer_norm(x, 4, w), torch.randn(4, 4), torch.randn(4)),
]


@pytest.mark.parametrize("name, op, x, y", TWO_TENSORS, ids=[t[0] for t in TWO_TENSORS])
def test_tensors_on_different_devices_are_refused(name: str, op: Op, x: torch.Tensor,
                                                  y: torch.Tensor) -> None:
    with pytest.raises(ValueError, match=r"all tensors must be on the same device, got cpu, meta"):
        op(x, y.to("meta"))
    with pytest.raises(ValueError, match=r"all tensors must be on the same device, got cpu, meta"):
        op(x.to("meta"), y)


ONE_TENSOR: list[tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = [
    ("softmax", tc_torch.softmax), ("transpose", tc_torch.transpose),
    ("add", lambda x: tc_torch.add(x, x)), ("matmul", lambda x: tc_torch.matmul(x, x)),
    ("layer_norm", lambda x: tc_torch.layer_norm(x, 4)),
]


@pytest.mark.parametrize("name, op", ONE_TENSOR, ids=[t[0] for t in ONE_TENSOR])
def test_unsupported_device_is_refused(name: str, op: Callable[[torch.Tensor], torch.Tensor]
                                       ) -> None:
    with pytest.raises(ValueError, match=r"tensors on meta are not supported \(tc runs on cuda "
                                         r"and cpu\)"):
        op(torch.randn(4, 4, device="meta"))


def test_cross_entropy_strided_logits_and_targets() -> None:
    torch.manual_seed(5)
    base = torch.randn(9, 40, dtype=torch.float64)
    targets = torch.randint(0, 30, (18,))[::2]  # a non-contiguous target vector
    for x in (base[:, :30],  # a row stride of 40, passed to the kernel as is
              torch.randn(30, 9, dtype=torch.float64).t()):  # column-major: copied first
        for reduction in ("mean", "none"):
            got = tc_torch.cross_entropy(x, targets, reduction=reduction)
            torch.testing.assert_close(got, F.cross_entropy(x, targets, reduction=reduction))
    leaf = base.clone().requires_grad_()
    assert gradcheck(lambda v: tc_torch.cross_entropy(v[:, 3:33], targets), (leaf,))


def test_layer_norm_strided_inputs() -> None:
    torch.manual_seed(6)
    x2 = torch.randn(7, 50, dtype=torch.float64)[:, 5:29]  # row stride 50
    x3 = torch.randn(3, 24, 4, dtype=torch.float64).transpose(1, 2)  # last dim not unit-stride
    w = torch.randn(48, dtype=torch.float64)[::2]  # a strided weight
    b = torch.randn(24, dtype=torch.float64)
    for x in (x2, x3):
        torch.testing.assert_close(tc_torch.layer_norm(x, 24, w, b),
                                   F.layer_norm(x, (24,), w, b))
    leaf = torch.randn(5, 30, dtype=torch.float64, requires_grad=True)
    wl = torch.randn(10, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda v, w: tc_torch.layer_norm(v[:, 2:12], 10, w), (leaf, wl))


def test_softmax_and_transpose_gradients_through_views() -> None:
    leaf = torch.randn(6, 20, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda v: tc_torch.softmax(v[:, 1:17]), (leaf,))
    assert gradcheck(lambda v: tc_torch.softmax(v.t()), (leaf,))
    assert gradcheck(lambda v: tc_torch.transpose(v[::2, 3:]), (leaf,))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs two CUDA GPUs")
@pytest.mark.parametrize("name, op", ONE_TENSOR, ids=[t[0] for t in ONE_TENSOR])
def test_ops_on_the_second_gpu(name: str, op: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Tensors on cuda:1 run on cuda:1 (the kernels of cuda:0 would fault on that memory), and the
    caller's current device stays cuda:0."""
    x = torch.randn(4, 4)
    want = op(x)  # the interpreter's answer
    got = op(x.to("cuda:1"))
    assert got.device == torch.device("cuda:1") and torch.cuda.current_device() == 0
    torch.testing.assert_close(got.cpu(), want, rtol=2e-3, atol=2e-3)
