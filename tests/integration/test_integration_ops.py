"""Every tc_torch op end to end through the public API: the interpreter everywhere, the GPU
(marker `gpu`) where there is one, against torch within dtype tolerances; plus autograd, devices,
and torch.cuda.graph capture on the GPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

import tc_torch

DEVICES = [pytest.param("cpu", id="cpu")]
if torch.cuda.is_available():
    DEVICES.append(pytest.param("cuda", id="cuda", marks=pytest.mark.gpu))
gpu_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

DTYPES = [pytest.param(torch.float32, id="f32"), pytest.param(torch.float16, id="f16"),
          pytest.param(torch.bfloat16, id="bf16")]
#: (rtol, atol) of a result against a float64 reference, by dtype.
TOL = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}


def close(got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> None:
    rtol, atol = TOL[dtype]
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), ref.double(), rtol=rtol, atol=atol * scale)


def backward(t: torch.Tensor, grad: torch.Tensor | None = None) -> None:
    """t.backward(grad) (torch's method is untyped)."""
    fn: Any = t.backward
    fn(grad)


def _big(device: str) -> bool:
    return device == "cuda"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_add(device: str, dtype: torch.dtype) -> None:
    n = 1 << 20 if _big(device) else 3001
    x = torch.randn(n, device=device).to(dtype).requires_grad_()
    y = torch.randn(n, device=device).to(dtype).requires_grad_()
    z = tc_torch.add(x, y)
    assert torch.equal(z, x.detach() + y.detach())
    g = torch.randn(n, device=device).to(dtype)
    backward(z, g)
    assert x.grad is not None and y.grad is not None
    assert torch.equal(x.grad, g) and torch.equal(y.grad, g)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_forward_backward(device: str, dtype: torch.dtype) -> None:
    shapes = [(1823, 781), (64, 20000), (4, 1)] if _big(device) else [(37, 129)]
    for m, n in shapes:
        x = torch.randn(m, n, device=device).to(dtype).requires_grad_()
        y = tc_torch.softmax(x)
        xr = x.detach().double().requires_grad_()
        yr = torch.softmax(xr, -1)
        close(y, yr, dtype)
        dy = torch.randn(m, n, device=device).to(dtype)
        backward(y, dy)
        backward(yr, dy.double())
        assert x.grad is not None and xr.grad is not None
        close(x.grad, xr.grad, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta", [False, True], ids=["a", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["b", "bT"])
def test_matmul_variants(device: str, dtype: torch.dtype, ta: bool, tb: bool) -> None:
    m, n, k = (512, 896, 768) if _big(device) else (64, 80, 48)
    a = (torch.randn(k, m, device=device).t() if ta else torch.randn(m, k, device=device))
    b = (torch.randn(n, k, device=device).t() if tb else torch.randn(k, n, device=device))
    a, b = a.to(dtype), b.to(dtype)  # .to keeps the strides: column-major stays column-major
    c = tc_torch.matmul(a, b)
    close(c, a.double() @ b.double(), dtype, scale=k ** 0.5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta", [False, True], ids=["a", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["b", "bT"])
def test_matmul_batched_variants(device: str, dtype: torch.dtype, ta: bool, tb: bool) -> None:
    z, m, n, k = (3, 300, 264, 200) if _big(device) else (2, 24, 20, 16)
    a = (torch.randn(z, k, m, device=device).transpose(1, 2) if ta
         else torch.randn(z, m, k, device=device))
    b = (torch.randn(z, n, k, device=device).transpose(1, 2) if tb
         else torch.randn(z, k, n, device=device))
    a, b = a.to(dtype), b.to(dtype)
    close(tc_torch.matmul(a, b), a.double() @ b.double(), dtype, scale=k ** 0.5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_batched_autograd(device: str, dtype: torch.dtype) -> None:
    z, m, n, k = (4, 200, 136, 72) if _big(device) else (2, 20, 12, 9)
    a = torch.randn(z, m, k, device=device).to(dtype).requires_grad_()
    b = torch.randn(k, n, device=device).to(dtype).requires_grad_()
    c = tc_torch.matmul(a, b)
    ar = a.detach().double().requires_grad_()
    br = b.detach().double().requires_grad_()
    cr = ar @ br
    close(c, cr, dtype, scale=k ** 0.5)
    g = torch.randn(z, m, n, device=device).to(dtype)
    backward(c, g)
    backward(cr, g.double())
    assert a.grad is not None and b.grad is not None and ar.grad is not None
    assert br.grad is not None
    close(a.grad, ar.grad, dtype, scale=n ** 0.5)
    close(b.grad, br.grad, dtype, scale=(z * m) ** 0.5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose(device: str, dtype: torch.dtype) -> None:
    m, n = (1000, 3001) if _big(device) else (37, 45)
    x = torch.randn(m, n, device=device).to(dtype).requires_grad_()
    y = tc_torch.transpose(x)
    assert torch.equal(y, x.detach().t())
    g = torch.randn(n, m, device=device).to(dtype)
    backward(y, g)
    assert x.grad is not None and torch.equal(x.grad, g.t())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy(device: str, dtype: torch.dtype) -> None:
    m, n = (512, 50257) if _big(device) else (9, 130)
    x = torch.randn(m, n, device=device).to(dtype).requires_grad_()
    t = torch.randint(0, n, (m,), device=device)
    t[1] = -100
    loss = tc_torch.cross_entropy(x, t)
    xr = x.detach().double().requires_grad_()
    ref = F.cross_entropy(xr, t)
    close(loss, ref, dtype)
    backward(loss)
    backward(ref)
    assert x.grad is not None and xr.grad is not None
    close(x.grad, xr.grad, dtype, scale=1e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm(device: str, dtype: torch.dtype) -> None:
    m, n = (4096, 1536) if _big(device) else (12, 40)
    x = torch.randn(m, n, device=device).to(dtype).requires_grad_()
    w = torch.randn(n, device=device).to(dtype).requires_grad_()
    b = torch.randn(n, device=device).to(dtype).requires_grad_()
    y = tc_torch.layer_norm(x, n, w, b, 1e-5)
    xr, wr, br = (v.detach().double().requires_grad_() for v in (x, w, b))
    yr = F.layer_norm(xr, (n,), wr, br, 1e-5)
    close(y, yr, dtype, scale=4)
    g = torch.randn(m, n, device=device).to(dtype)
    backward(y, g)
    backward(yr, g.double())
    for got, ref, scale in ((x.grad, xr.grad, 4.0), (w.grad, wr.grad, m ** 0.5),
                            (b.grad, br.grad, m ** 0.5)):
        assert got is not None and ref is not None
        close(got, ref, dtype, scale=scale)


def _f64(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


_TARGET = torch.tensor([2, 0, -100, 4])
GRADCHECKS: list[tuple[str, Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]] = [
    ("add", tc_torch.add, (_f64(3, 5), _f64(3, 5))),
    ("softmax", tc_torch.softmax, (_f64(3, 9),)),
    ("matmul", tc_torch.matmul, (_f64(2, 4, 3), _f64(3, 5))),
    ("matmul_tt", lambda a, b: tc_torch.matmul(a.t(), b.t()), (_f64(3, 4), _f64(5, 3))),
    ("transpose", tc_torch.transpose, (_f64(4, 7),)),
    ("cross_entropy", lambda x: tc_torch.cross_entropy(x, _TARGET), (_f64(4, 6),)),
    ("layer_norm", lambda x, w, b: tc_torch.layer_norm(x, 6, w, b, 1e-5),
     (_f64(4, 6), _f64(6), _f64(6))),
]


@pytest.mark.parametrize("name, op, inputs", GRADCHECKS, ids=[g[0] for g in GRADCHECKS])
def test_gradcheck_every_op_float64_on_the_interpreter(
        name: str, op: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> None:
    assert gradcheck(op, inputs)


@gpu_only
@pytest.mark.gpu
def test_tensors_on_different_devices_are_refused() -> None:
    x = torch.randn(4, 4, device="cuda")
    with pytest.raises(ValueError, match="same device"):
        tc_torch.matmul(x, torch.randn(4, 4))
    with pytest.raises(ValueError, match="same device"):
        tc_torch.add(x.view(-1), torch.randn(16))
    with pytest.raises(ValueError, match="same device"):
        tc_torch.cross_entropy(x, torch.tensor([0, 1, 2, 3]))  # targets left on the CPU
    with pytest.raises(ValueError, match="same device"):
        tc_torch.layer_norm(x, 4, torch.randn(4, device="cuda"), torch.randn(4))


@gpu_only
@pytest.mark.gpu
def test_matmul_tf32_on_the_gpu() -> None:
    # tf32 tensor cores: within tf32's error of the float64 product, and not the exact float32
    # result (which the default precision gives)
    a = torch.randn(300, 257, device="cuda")
    b = torch.randn(257, 190, device="cuda")
    ref = a.double() @ b.double()

    def rel(c: torch.Tensor) -> float:
        return float((c.double() - ref).norm() / ref.norm())

    tf32 = tc_torch.matmul(a, b, precision="tf32")
    ieee = tc_torch.matmul(a, b)
    assert rel(tf32) < 2e-3 and rel(ieee) < 1e-6 and rel(tf32) > 10 * rel(ieee)
    ga = torch.randn(300, 257, device="cuda", requires_grad=True)
    loss: Any = tc_torch.matmul(ga, b, precision="tf32").sum()
    loss.backward()
    assert ga.grad is not None
    g_ref = torch.ones(300, 190, device="cuda", dtype=torch.float64) @ b.double().t()
    assert float((ga.grad.double() - g_ref).norm() / g_ref.norm()) < 2e-3


@gpu_only
@pytest.mark.gpu
def test_ops_under_cuda_graph_capture() -> None:
    torch.manual_seed(0)
    x = torch.randn(256, 1000, device="cuda", dtype=torch.float16)
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 384, device="cuda", dtype=torch.float16)
    w = torch.randn(1000, device="cuda", dtype=torch.float16)
    t = torch.randint(0, 1000, (256,), device="cuda")
    ops: list[Callable[[], torch.Tensor]] = [
        lambda: tc_torch.add(x, x), lambda: tc_torch.softmax(x), lambda: tc_torch.matmul(a, b),
        lambda: tc_torch.transpose(x), lambda: tc_torch.cross_entropy(x, t, reduction="none"),
        lambda: tc_torch.layer_norm(x, 1000, w, w)]
    side: Any = getattr(torch.cuda, "Stream")()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        expected = [op() for op in ops]  # warm-up: compile and tune outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [op() for op in ops]
    for o in outs:
        o.zero_()
    graph.replay()
    torch.cuda.synchronize()
    for got, ref in zip(outs, expected):
        assert torch.equal(got, ref)
    # the graph reads the inputs' memory: new values in place, one replay, eager results again
    for v in (x, a, b, w):
        v.copy_(torch.randn_like(v))
    graph.replay()
    fresh = [op() for op in ops]
    torch.cuda.synchronize()
    for got, ref, old in zip(outs, fresh, expected):
        assert torch.equal(got, ref) and not torch.equal(got, old)


@gpu_only
@pytest.mark.gpu
def test_training_step_under_cuda_graph_capture() -> None:
    # a whole training step captured: the forward on the capturing stream, the backward passes
    # on torch's autograd thread (tc's launches there take a record of their own and must land
    # on the stream the engine hands that thread); replayed with new values in the inputs, the
    # gradients must be an eager step's. Products 2-D and a batch times a matrix (planned
    # backward passes after the warm-up steps), then softmax and layer_norm.
    torch.manual_seed(0)
    x = torch.randn(4, 128, 192, device="cuda", dtype=torch.float16).requires_grad_()
    w1 = torch.randn(192, 256, device="cuda", dtype=torch.float16).requires_grad_()
    w2 = torch.randn(256, 64, device="cuda", dtype=torch.float16).requires_grad_()
    g = torch.randn(256, device="cuda", dtype=torch.float16).requires_grad_()
    dy = torch.randn(512, 64, device="cuda", dtype=torch.float16)
    params = (x, w1, w2, g)

    def step() -> torch.Tensor:
        h = tc_torch.layer_norm(tc_torch.matmul(x, w1), 256, g)  # [4, 128, 256]
        y = tc_torch.softmax(tc_torch.matmul(h.reshape(512, 256), w2))
        y.backward(dy)  # type: ignore[no-untyped-call]
        return y

    def eager() -> list[torch.Tensor]:
        for p in params:
            p.grad = None
        y = step()
        return [y.detach().clone()] + [p.grad.clone() for p in params if p.grad is not None]

    side: Any = getattr(torch.cuda, "Stream")()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # (compile, tune and plan outside the capture)
            eager()
    torch.cuda.current_stream().wait_stream(side)
    for p in params:
        p.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = step()
    captured = [y] + [p.grad for p in params if p.grad is not None]
    assert len(captured) == 5
    for values in ((x, w1, w2, g, dy), ()):
        for v in values:  # (the second round replays the same inputs again)
            with torch.no_grad():
                v.copy_(torch.randn_like(v))
        graph.replay()
        torch.cuda.synchronize()
        got = [t.clone() for t in captured]
        saved = [p.grad for p in params]
        expected = eager()
        for p, s in zip(params, saved):
            p.grad = s
        torch.cuda.synchronize()
        for i, (have, want) in enumerate(zip(got, expected)):
            assert torch.equal(have, want), i
