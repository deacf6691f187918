"""Edge cases of the ops on the interpreter (and on the GPU's warm fast paths): empty batches, extreme
arguments, clear refusals."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import tc_torch


@pytest.mark.parametrize("shape_a,shape_b", [((0, 4, 2), (2, 3)), ((0, 4, 2), (1, 2, 3)),
                                             ((1, 4, 2), (0, 2, 3)), ((4, 2), (0, 2, 3))])
def test_matmul_batch_of_zero_broadcasts(shape_a: tuple[int, ...],
                                          shape_b: tuple[int, ...]) -> None:
    # (before: a batch of 0 against a broadcast operand made a batch of 1, read out of bounds)
    a = torch.randn(shape_a, dtype=torch.float64, requires_grad=True)
    b = torch.randn(shape_b, dtype=torch.float64, requires_grad=True)
    c = tc_torch.matmul(a, b)
    ref = torch.matmul(a, b)
    assert c.shape == ref.shape == (0, 4, 3)
    da, db = torch.autograd.grad(c.sum(), (a, b))
    ra, rb = torch.autograd.grad(ref.sum(), (a, b))
    assert da.shape == ra.shape and db.shape == rb.shape
    assert torch.equal(da, ra) and torch.equal(db, rb)


@pytest.mark.parametrize("ignore_index", [-2**63, 2**63 - 1, 2**40])
def test_cross_entropy_ignore_index_at_the_int64_limits(ignore_index: int) -> None:
    # (before: -2**63 became a literal the front end refuses as too large for 'long')
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 1, 2, 3, 0])
    t[1] = ignore_index
    loss = tc_torch.cross_entropy(x, t, ignore_index=ignore_index)
    ref = F.cross_entropy(x, t, ignore_index=ignore_index)
    assert torch.allclose(loss, ref)
    (g,) = torch.autograd.grad(loss, x)
    (rg,) = torch.autograd.grad(ref, x)
    assert torch.allclose(g, rg)


@pytest.mark.parametrize("ignore_index", [2**63, -2**63 - 1])
def test_cross_entropy_ignore_index_beyond_int64(ignore_index: int) -> None:
    x, t = torch.randn(3, 4), torch.zeros(3, dtype=torch.long)
    with pytest.raises(ValueError, match=f"ignore_index {ignore_index} does not fit in int64"):
        tc_torch.cross_entropy(x, t, ignore_index=ignore_index)


def test_layer_norm_eps_beyond_the_float_range() -> None:
    with pytest.raises(ValueError, match="tc_torch.layer_norm: eps 1000.* is too large for a float"):
        tc_torch.layer_norm(torch.randn(2, 3), 3, eps=10**400)


@pytest.mark.parametrize("dim", [2, -3, 5])
def test_softmax_dim_out_of_range(dim: int) -> None:
    with pytest.raises(ValueError, match=f"dim={dim} is out of range for a 2-D tensor"):
        tc_torch.softmax(torch.randn(3, 4), dim)


@pytest.mark.parametrize("shape", [(0,), (2, 3, 0), (3, 0)])
def test_softmax_of_rows_of_no_elements(shape: tuple[int, ...]) -> None:
    # (before: RuntimeError "cannot reshape tensor of 0 elements into shape [-1, 0]" from inside)
    x = torch.randn(shape, requires_grad=True)
    y = tc_torch.softmax(x)
    assert y.shape == x.shape
    (g,) = torch.autograd.grad(y.sum(), x)  # (the gradient arrives expanded, strides 0)
    assert g.shape == x.shape


@pytest.mark.parametrize("shape,normalized", [((0,), 0), ((2, 3, 0), 0), ((2, 3, 0), (3, 0)),
                                              ((3, 0), 0)])
def test_layer_norm_of_no_elements_per_row(shape: tuple[int, ...],
                                           normalized: int | tuple[int, ...]) -> None:
    x = torch.randn(shape, requires_grad=True)
    y = tc_torch.layer_norm(x, normalized)
    ref = F.layer_norm(x, (normalized,) if isinstance(normalized, int) else normalized)
    assert y.shape == ref.shape == x.shape
    (g,) = torch.autograd.grad(y.sum(), x)
    assert g.shape == x.shape


def _sparse_csr(t: torch.Tensor) -> torch.Tensor:
    import warnings

    with warnings.catch_warnings():  # (torch: "Sparse CSR tensor support is in beta state")
        warnings.simplefilter("ignore")
        return t.to_sparse_csr()


_NOT_STRIDED = [(op, layout) for op in ("add", "softmax", "transpose", "matmul", "layer_norm", "cross_entropy",
                                       "layer_norm weight", "cross_entropy target")
                for layout in ("coo", "csr", "mkldnn")
                # (a 1-D weight has no CSR form; int64 targets only a COO one)
                if not (op == "layer_norm weight" and layout == "csr")
                and not (op == "cross_entropy target" and layout != "coo")]


@pytest.mark.parametrize("op,layout", _NOT_STRIDED)
def test_tensors_that_are_not_strided_are_refused(op: str, layout: str) -> None:
    # (before: torch's RuntimeError "unsupported memory format option Contiguous", "Sparse CSR
    # tensors do not have strides", "Cannot access data pointer ...")
    def convert(t: torch.Tensor) -> torch.Tensor:
        return t.to_sparse() if layout == "coo" else _sparse_csr(t) if layout == "csr" \
            else t.to_mkldnn()

    x = torch.randn(3, 3)
    s = convert(x)
    calls = {
        "add": lambda: tc_torch.add(s, x),
        "softmax": lambda: tc_torch.softmax(s),
        "transpose": lambda: tc_torch.transpose(s),
        "matmul": lambda: tc_torch.matmul(x, s),
        "layer_norm": lambda: tc_torch.layer_norm(s, 3),
        "cross_entropy": lambda: tc_torch.cross_entropy(s, torch.zeros(3, dtype=torch.long)),
        "layer_norm weight": lambda: tc_torch.layer_norm(x, 3, convert(torch.ones(3))),
        "cross_entropy target": lambda: tc_torch.cross_entropy(
            x, torch.zeros(3, dtype=torch.long).to_sparse()),
    }
    with pytest.raises(TypeError, match=r"tensors of layout torch\.(sparse_coo|sparse_csr|_mkldnn) "
                                        r"\(sparse, mkldnn\) are not supported"):
        calls[op]()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_tensors_on_warm_fast_paths_are_refused_on_the_gpu(layout: str) -> None:
    # each op's fast path warm (two calls with dense tensors), then a sparse tensor of cuda:0 in
    # each place: the general path's TypeError, not torch's RuntimeError from the fast path
    def convert(t: torch.Tensor) -> torch.Tensor:
        return t.to_sparse() if layout == "coo" else _sparse_csr(t)

    x = torch.randn(16, 16, device="cuda")
    w = torch.randn(16, device="cuda")
    t = torch.zeros(16, dtype=torch.long, device="cuda")
    calls: list[Callable[[torch.Tensor], object]] = [
             lambda v: tc_torch.add(v, x), lambda v: tc_torch.add(x, v), lambda v: tc_torch.softmax(v),
             lambda v: tc_torch.transpose(v), lambda v: tc_torch.matmul(v, x), lambda v: tc_torch.matmul(x, v),
             lambda v: tc_torch.layer_norm(v, 16, w, w), lambda v: tc_torch.cross_entropy(v, t)]
    for call in calls:
        call(x)
        call(x)
    s = convert(x)
    for call in calls:
        with pytest.raises(TypeError, match=r"tensors of layout torch\.sparse_(coo|csr) \(sparse, mkldnn\) are "
                                            r"not supported"):
            call(s)


def test_out_variants_check_the_output() -> None:
    # (before: a too-small output was written out of bounds, or matmul_out computed the
    # top-left corner of the product that fit in c, silently)
    from tc_torch.ops import add as add_op
    from tc_torch.ops import matmul as mm
    from tc_torch.ops import transpose as tr

    a, b = torch.randn(1, 3, 4), torch.randn(1, 4, 5)
    for c, a_ in ((torch.empty(1, 2, 2), a), (torch.empty(1, 5, 3), a),
                  (torch.empty(2, 3, 5), torch.randn(3, 3, 4))):
        with pytest.raises(ValueError, match=r"c of shape .* does not hold a @ b"):
            mm.matmul_out(c, a_, b)
    with pytest.raises(ValueError, match="c must be contiguous"):
        mm.matmul_out(torch.empty(1, 5, 3).transpose(1, 2), a, b)
    with pytest.raises(TypeError, match="must have one dtype"):
        mm.matmul_out(torch.empty(1, 3, 5, dtype=torch.float64), a, b)
    with pytest.raises(ValueError, match="matmul_out takes 3-D"):
        mm.matmul_out(torch.empty(3, 5), a, b)
    c = torch.empty(2, 3, 5)
    a2 = torch.randn(2, 3, 4)
    assert torch.allclose(mm.matmul_out(c, a2, b), a2 @ b, atol=1e-5)
    x = torch.randn(3, 5)
    with pytest.raises(ValueError, match="transpose_out needs a 2-D x and a contiguous y"):
        tr.transpose_out(torch.empty(2, 2), x)
    with pytest.raises(ValueError, match=r"\(not contiguous\)"):
        tr.transpose_out(torch.empty(3, 5).t(), x)
    y = torch.empty(5, 3)
    assert torch.equal(tr.transpose_out(y, x), x.t())
    with pytest.raises(ValueError, match=r"the output must have the inputs' shape \(5,\)"):
        add_op.add_out(torch.empty(2), torch.randn(5), torch.randn(5))
    with pytest.raises(ValueError, match="add_out takes contiguous tensors"):
        add_op.add_out(torch.empty(5, 2).t(), torch.randn(2, 5), torch.randn(2, 5))
    with pytest.raises(TypeError, match="the output z must be a torch.Tensor"):
        add_op.add_out(None, torch.randn(5), torch.randn(5))  # type: ignore[arg-type]
