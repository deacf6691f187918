"""tc_torch.transpose, cross_entropy and layer_norm on the interpreter."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

import tc_torch
from tc_torch.ops import cross_entropy as ce
from tc_torch.ops import layer_norm as ln

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_exact(dtype: torch.dtype) -> None:
    x = torch.randn(37, 45).to(dtype)
    y = tc_torch.transpose(x)
    assert y.is_contiguous() and torch.equal(y, x.t())
    v = torch.randn(50, 70)[3:40:2, 5:50]  # a strided view
    assert torch.equal(tc_torch.transpose(v), v.t())


def test_transpose_gradcheck_and_refusals() -> None:
    x = torch.randn(5, 9, dtype=torch.float64, requires_grad=True)
    assert gradcheck(tc_torch.transpose, (x,))
    with pytest.raises(ValueError, match="2-D matrix"):
        tc_torch.transpose(torch.randn(2, 3, 4))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(dtype: torch.dtype, reduction: str) -> None:
    torch.manual_seed(2)
    x = torch.randn(9, 30).to(dtype)
    t = torch.randint(0, 30, (9,))
    t[4] = -100
    got = tc_torch.cross_entropy(x, t, reduction=reduction)
    ref = F.cross_entropy(x.double(), t, reduction=reduction)
    assert got.dtype == dtype
    rtol = {torch.float32: 1e-6, torch.float64: 1e-12}.get(dtype, 1e-2)
    assert torch.allclose(got.double(), ref, rtol=rtol, atol=rtol)


def test_cross_entropy_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ce, "CPU_BLOCK", 8)  # several chunks per row
    x = torch.randn(5, 19, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([1, 3, -100, 18, 0])
    for reduction in ("mean", "sum", "none"):
        assert gradcheck(lambda v: tc_torch.cross_entropy(v, t, reduction=reduction), (x,))
    t2 = torch.tensor([1, 3, 7, 18, 0])
    assert gradcheck(lambda v: tc_torch.cross_entropy(v, t2, ignore_index=7), (x,))


def test_cross_entropy_refusals() -> None:
    x = torch.randn(3, 5)
    with pytest.raises(TypeError, match="int64"):
        tc_torch.cross_entropy(x, torch.tensor([1, 2, 3], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"target\[1\] = 5 is not a class index"):
        tc_torch.cross_entropy(x, torch.tensor([1, 5, 0]))
    with pytest.raises(ValueError, match="shape"):
        tc_torch.cross_entropy(x, torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="reduction"):
        tc_torch.cross_entropy(x, torch.tensor([1, 2, 3]), reduction="avg")


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_matches_torch(dtype: torch.dtype) -> None:
    torch.manual_seed(3)
    x = torch.randn(2, 5, 24).to(dtype)
    w = torch.randn(24).to(dtype)
    b = torch.randn(24).to(dtype)
    got = tc_torch.layer_norm(x, 24, w, b, eps=1e-5)
    ref = F.layer_norm(x.double(), (24,), w.double(), b.double(), 1e-5)
    tol = {torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 5e-2)
    assert got.dtype == dtype and (got.double() - ref).abs().max().item() < tol
    got2 = tc_torch.layer_norm(x, (5, 24))
    ref2 = F.layer_norm(x.double(), (5, 24))
    assert (got2.double() - ref2).abs().max().item() < tol


def test_layer_norm_gradcheck_float64() -> None:
    x = torch.randn(7, 10, dtype=torch.float64, requires_grad=True)
    w = torch.randn(10, dtype=torch.float64, requires_grad=True)
    b = torch.randn(10, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: tc_torch.layer_norm(x, 10, w, b, 1e-3), (x, w, b))
    assert gradcheck(lambda x, w: tc_torch.layer_norm(x, 10, w), (x, w))
    assert gradcheck(lambda x: tc_torch.layer_norm(x, 10), (x,))


def test_layer_norm_refusals() -> None:
    x = torch.randn(3, 8)
    with pytest.raises(ValueError, match="trailing dimensions"):
        tc_torch.layer_norm(x, 7)
    with pytest.raises(ValueError, match="weight must have shape"):
        tc_torch.layer_norm(x, 8, torch.randn(7))
    with pytest.raises(TypeError, match="normalized_shape"):
        tc_torch.layer_norm(x, "8")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="eps"):
        tc_torch.layer_norm(x, 8, eps=-1.0)
    with pytest.raises(ValueError, match="same device"):
        tc_torch.layer_norm(x, 8, torch.randn(8, device="meta"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("affine", ["wb", "w", "b", "none"])
@pytest.mark.parametrize("n", [20, 4100])
def test_layer_norm_backward_row_groups(dtype: torch.dtype, affine: str, n: int) -> None:
    """Several programs of several rows each, the last group partial (M = 11, ROWS = 3: G = 4);
    N = 4100 (BLOCK 8192) takes the kernel's PREFETCH path (each row's loads issued one
    iteration early)."""
    torch.manual_seed(5)
    m = 11
    x = torch.randn(m, n, dtype=dtype)
    dy = torch.randn(m, n, dtype=dtype)
    w = torch.randn(n, dtype=dtype) if "w" in affine else None
    b = torch.randn(n, dtype=dtype) if "b" in affine else None
    _, mean, rstd = ln.layer_norm_forward(x, n, w, b, 1e-5)
    xr = x.double().requires_grad_()
    wr = w.double().requires_grad_() if w is not None else None
    br = b.double().requires_grad_() if b is not None else None
    params = [v for v in (xr, wr, br) if v is not None]
    grads = torch.autograd.grad(F.layer_norm(xr, (n,), wr, br, 1e-5), params, dy.double())
    for v, gv in zip(params, grads):
        v.grad = gv
    assert xr.grad is not None
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    for rows in (1, 3, 4, 11, 16):
        dx, dw, db = ln.layer_norm_backward(dy, x, n, w, b is not None, mean, rstd, True, True,
                                            True, rows=rows)
        assert dx is not None and (dx.double() - xr.grad).abs().max().item() < tol
        assert (dw is None) == (w is None) and (db is None) == (b is None)
        if dw is not None:
            assert wr is not None and wr.grad is not None
            assert dw.dtype == dtype and (dw.double() - wr.grad).abs().max().item() < tol
        if db is not None:
            assert br is not None and br.grad is not None
            assert db.dtype == dtype and (db.double() - br.grad).abs().max().item() < tol
    # only some of the results
    dx, dw, db = ln.layer_norm_backward(dy, x, n, w, b is not None, mean, rstd, False, True, False,
                                        rows=3)
    assert dx is None and db is None and (dw is None) == (w is None)
    if dw is not None:
        assert wr is not None and wr.grad is not None
        assert (dw.double() - wr.grad).abs().max().item() < tol


def test_layer_norm_backward_rows_rule() -> None:
    assert ln.backward_rows(16384, 1024) == 16 and ln.backward_rows(16384, 8192) == 64
    assert ln.backward_rows(16384, 4096) == 64 and ln.backward_rows(100, 1024) == 1
    for m in (1, 255, 256, 257, 1023, 1025, 5000, 16384, 100000):
        for block in (16, 1024, 2048, 4096, 8192, 65536):
            r = ln.backward_rows(m, block)
            assert r >= 1 and tc_cdiv(m, r) <= ln.BWD_MAX_PROGRAMS


def tc_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_layer_norm_gradcheck_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """gradcheck through autograd with 3 rows per program (M = 8: G = 3, the last group 2 rows)."""
    monkeypatch.setattr(ln, "backward_rows", lambda m, block: 3)
    x = torch.randn(2, 4, 10, dtype=torch.float64, requires_grad=True)
    w = torch.randn(10, dtype=torch.float64, requires_grad=True)
    b = torch.randn(10, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: tc_torch.layer_norm(x, 10, w, b, 1e-3), (x, w, b))
    assert gradcheck(lambda w, b: tc_torch.layer_norm(x.detach(), 10, w, b, 1e-3), (w, b))
    assert gradcheck(lambda x, b: tc_torch.layer_norm(x, 10, None, b, 1e-3), (x, b))
    assert gradcheck(lambda x: tc_torch.layer_norm(x, 10), (x,))


@pytest.mark.parametrize("type_", ["half", "float"])
def test_cross_entropy_backward_reads_the_row_scalars_in_the_loop(type_: str) -> None:
    # nothing computed before the loop from a load: T, LSE and DLOSS are read in the loop next
    # to the read of X, so that read does not wait a memory latency for them (g = t == IGNORE ?
    # 0 : dl before the loop cost 6-8% on an H100 when one chunk holds the row)
    import tc_nvptx
    from tc_opt import CompileOptions

    from tc_torch.library import source

    spec = ("divisible_by_16",) * 7 + ("equal_to_1", "divisible_by_16", "divisible_by_16")
    ck = tc_nvptx.compile(source("cross_entropy"), kernel="cross_entropy_backward",
                          defines={"TYPE": type_, "ACC": "float", "BLOCK": 1024,
                                   "IGNORE": "(-100)"},
                          options=CompileOptions(num_warps=4, specialization=spec),
                          assemble_cubin=False)
    ptx = ck.ptx
    back = [m for m in re.finditer(r"bra\s+(\$L__BB\d+_\d+);", ptx)
            if ptx.index(m.group(1) + ":") < m.start()]
    assert len(back) == 1  # the one loop
    head = ptx[:ptx.index(back[0].group(1) + ":")]
    body = ptx[ptx.index(back[0].group(1) + ":"):back[0].end()]
    assert "ld.global" not in head
    assert "ld.global.b64" in body and "ld.global.v4.b32" in body
