"""tc_torch.matmul on the interpreter: the four transposition variants, batches, gradients."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from torch.autograd import gradcheck

import tc_runtime
import tc_torch
from tc_torch import library
from tc_torch.ops import matmul as mm
from tc_torch.ops import pad_rows
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
    with pytest.raises(ValueError, match="tf32' applies to float32"):
        tc_torch.matmul(torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 2,
                        dtype=torch.float64), precision="tf32")


def test_matmul_tf32_on_the_interpreter_is_exact_and_differentiable() -> None:
    # the interpreter computes float32 products exactly, tf32 or not; the option must still
    # reach a kernel of its own (not the ieee one) and the backward
    a = torch.randn(9, 7, requires_grad=True)
    b = torch.randn(7, 5, requires_grad=True)
    c = tc_torch.matmul(a, b, precision="tf32")
    torch.testing.assert_close(c, a @ b, atol=1e-5, rtol=1e-5)
    loss: Any = c.sum()
    loss.backward()
    assert a.grad is not None and b.grad is not None
    torch.testing.assert_close(a.grad, torch.ones(9, 5) @ b.detach().t(), atol=1e-5, rtol=1e-5)
    from tc_torch.ops.matmul import kernel_for

    dev = torch.device("cpu")
    assert kernel_for(torch.float32, False, False, dev, precision="tf32").compile_options == {
        "fp32_dot": "tf32"}
    assert kernel_for(torch.float32, False, False, dev).compile_options == {}


def test_matmul_expanded_operands_read_in_place() -> None:
    row = torch.randn(1, 6)
    a = row.expand(5, 6)  # row stride 0: every row of A is the same memory
    b = torch.randn(6, 1).expand(6, 4)  # column stride 0
    torch.testing.assert_close(tc_torch.matmul(a, b), a @ b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("plan", ["a", "b", "none"])
def test_matmul_copies_an_operand_k_contiguous_first(plan: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A^T B with both operands MN-contiguous: the plan copies A (row-major) or B (column-major)
    # with tc's transpose kernel and runs the other variant; the product is the same
    from tc_torch.ops import transpose as tr

    copies: list[tuple[int, ...]] = []
    real = tr.transpose_out

    def recorded(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        copies.append(tuple(x.shape))
        return real(y, x)

    monkeypatch.setattr(tr, "transpose_out", recorded)
    torch.manual_seed(5)
    a = torch.randn(19, 23).t()  # (23, 19), M-contiguous
    b = torch.randn(19, 29)  # N-contiguous
    c = torch.empty(1, 23, 29)
    mm.matmul_out(c, a.unsqueeze(0), b.unsqueeze(0), transpose_first=plan)
    torch.testing.assert_close(c[0], a @ b, atol=1e-5, rtol=1e-5)
    assert copies == {"a": [(19, 23)], "b": [(19, 29)], "none": []}[plan]


def test_matmul_transpose_first_choice_and_refusal() -> None:
    big = mm.TRANSPOSE_FIRST_MIN
    k = int(mm.TRANSPOSE_FIRST_MIN_FLOPS / (2 * big * big)) + 1  # (just enough flops at big^2)
    # only A^T B (A M-contiguous, B N-contiguous) is copied; the smaller operand, A on a tie
    assert mm.pick_transpose_first(big, big, k, True, False) == "a"
    assert mm.pick_transpose_first(2 * big, big, k, True, False) == "b"  # B is the smaller
    assert mm.pick_transpose_first(big, 2 * big, k, True, False) == "a"
    # ... when the other operand's free dimension pays for the copy
    assert mm.pick_transpose_first(big - 1, big - 1, 2 * k, True, False) == "none"
    assert mm.pick_transpose_first(big - 1, big // 2, 4 * k, True, False) == "none"
    # ... and the product is large enough
    assert mm.pick_transpose_first(big, big, k - 2, True, False) == "none"
    for ta, tb in ((False, False), (False, True), (True, True)):
        assert mm.pick_transpose_first(4 * big, 4 * big, 4 * big, ta, tb) == "none"
    c = torch.empty(1, 2, 2)
    with pytest.raises(ValueError, match="transpose_first must be one of"):
        mm.matmul_out(c, torch.randn(1, 2, 3), torch.randn(1, 3, 2), transpose_first="yes")
    # a batched operand (its own matrix per batch) is read in place whatever the plan says
    a = torch.randn(2, 5, 4).transpose(1, 2)
    b = torch.randn(2, 5, 3)
    c = torch.empty(2, 4, 3)
    mm.matmul_out(c, a, b, transpose_first="a")
    torch.testing.assert_close(c, a @ b, atol=1e-5, rtol=1e-5)


def test_matmul_pads_rows_that_are_not_multiples_of_8_before_large_gpu_products() -> None:
    big = int((mm.PAD_MIN_FLOPS / 2) ** (1 / 3)) + 1  # (just enough flops at big^3)
    # (what the runtime's specialization tells a kernel: divisible by 8 or 16, whatever the dtype)
    assert mm.rows_aligned(4104) and mm.rows_aligned(1024)
    assert not mm.rows_aligned(4100) and not mm.rows_aligned(4095) and not mm.rows_aligned(1028)
    assert mm.pads(big, big, big, (4100, 64)) == (True, False)  # each operand on its own
    assert mm.pads(big, big, big, (64, 4100)) == (False, True)
    assert mm.pads(big, big, big, (64, 4104)) == (False, False)  # both multiples of 8: nothing to copy
    assert mm.pads(big, big, big // 2, (4100, 64)) == (False, False)  # too small a product
    assert mm.pads(big, big, big, (4100, 64), gpu=False) == (False, False)  # "auto" on the interpreter
    assert mm.pads(2, 2, 2, (3, 64), "on", gpu=False) == (True, False)
    assert mm.pads(big, big, big, (4100, 4100), "off") == (False, False)


def test_matmul_pads_b_whose_16_bit_rows_split_sectors_when_a_has_many_rows() -> None:
    # rows of 4104 halves are 16 bytes apart but not 32; rows of 4112 are 32 apart, and rows of
    # 4104 floats (or of 4100 halves, not 16-byte aligned at all) are another case
    assert mm.sectors_split(4104, 2) and mm.sectors_split(1000, 2)
    assert not mm.sectors_split(4112, 2) and not mm.sectors_split(4096, 2)
    assert not mm.sectors_split(4104, 4) and not mm.sectors_split(4100, 2)
    rows = mm.PAD_SPLIT_MIN_ROWS
    assert mm.pads(rows, 4104, 4096, (4096, 4104), itemsize=2) == (False, True)
    assert mm.pads(rows - 1, 4104, 4096, (4096, 4104), itemsize=2) == (False, False)  # too few rows of A
    assert mm.pads(rows, 4096, 4104, (4104, 4096), itemsize=2) == (False, False)  # A is left as it is
    assert mm.pads(rows, 4104, 4096, (4096, 4104), itemsize=4) == (False, False)  # float rows: 32-byte aligned
    assert mm.pads(rows, 4104, 4096, (4096, 4104), "off", itemsize=2) == (False, False)
    assert mm.pads(8, 8, 8, (4096, 4104), "on", gpu=False, itemsize=2) == (False, True)  # "on": whatever the size


def test_matmul_on_a_b_with_split_sectors_copies_b_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # pad "on" with rows of 24 halves (48 bytes): B is copied into rows of 64, A (rows of 24 too) is
    # not, and the product is the same
    copied: list[tuple[int, ...]] = []
    real = pad_rows.padded

    def recorded(x: torch.Tensor, transposed: bool, ld: int, device: torch.device) -> tuple[torch.Tensor, int]:
        y, new_ld = real(x, transposed, ld, device)
        assert y is not x and new_ld == pad_rows.PAD_ROWS_TO and torch.equal(y, x)
        copied.append(tuple(x.shape))
        return y, new_ld

    monkeypatch.setattr(mm, "padded", recorded)
    torch.manual_seed(10)
    a = torch.randn(1, 5, 24, dtype=torch.float16)
    b = torch.randn(1, 24, 24, dtype=torch.float16)
    c = torch.empty(1, 5, 24, dtype=torch.float16)
    mm.matmul_out(c, a, b, pad="on")
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=1e-2, rtol=1e-2)
    assert copied == [(1, 24, 24)]


def test_matmul_rejects_an_unknown_pad() -> None:
    with pytest.raises(ValueError, match="pad must be one of"):
        mm.matmul_out(torch.empty(1, 2, 2), torch.randn(1, 2, 3), torch.randn(1, 3, 2), pad="yes")


CPU = torch.device("cpu")


@pytest.mark.parametrize("transposed", [False, True])
def test_padded_copy_keeps_the_layout_in_rows_of_64(transposed: bool) -> None:
    torch.manual_seed(8)
    x = torch.randn(2, 37, 29, dtype=torch.float16)  # (Z, R, C) with rows of 29 (58 bytes)
    if transposed:
        x = torch.randn(2, 29, 37, dtype=torch.float16).transpose(1, 2)  # each matrix column-major
    _, trans, ld = _layout(x)
    assert trans == transposed and not mm.rows_aligned(ld)
    y, padded_ld = pad_rows.padded(x, trans, ld, CPU)
    assert padded_ld == 64 and torch.equal(y, x)
    assert _layout(y)[1:] == (transposed, 64)
    aligned = torch.randn(1, 5, 64, dtype=torch.float16)
    assert pad_rows.padded(aligned, False, 64, CPU)[0] is aligned  # (16-byte rows: no copy)


#: Rows of `cols` elements `ld` apart, with the piece torch copies them in on the interpreter
#: and the piece the copy kernel moves them in (bytes).
PIECE_CASES = [
    (torch.float16, 24, 24, torch.complex128, 8),  # rows of 48 bytes, 16 apart
    (torch.bfloat16, 20, 20, torch.int64, 8),      # rows 8 bytes apart
    (torch.float16, 26, 30, torch.int32, 4),       # 4
    (torch.float32, 6, 10, torch.int64, 8),
    (torch.float16, 29, 29, None, 2),              # odd: one element at a time
]


def _bit_patterns(dtype: torch.dtype, rows: int, cols: int, ld: int, transposed: bool
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """(x as matmul reads it, its row-major matrices, the integer type of its bits): random bits,
    NaN payloads included, in 2 matrices of `rows` rows of `cols` elements `ld` apart."""
    bits = {2: torch.int16, 4: torch.int32}[dtype.itemsize]
    raw = torch.randint(-2 ** 15, 2 ** 15, (2 * rows * ld,), dtype=torch.int32).to(bits)
    mat = raw.view(dtype).as_strided((2, rows, cols), (rows * ld, ld, 1))
    return (mat.transpose(1, 2) if transposed else mat), mat, bits


@pytest.mark.parametrize("dtype, cols, ld, wide, width", PIECE_CASES)
@pytest.mark.parametrize("transposed", [False, True])
def test_padded_copy_moves_the_widest_pieces_its_rows_allow_bit_for_bit(
        dtype: torch.dtype, cols: int, ld: int, wide: torch.dtype | None, width: int, transposed: bool) -> None:
    x, mat, bits = _bit_patterns(dtype, 7, cols, ld, transposed)
    assert pad_rows._torch_piece(mat) == wide and pad_rows.piece_width(mat) == width
    y, padded_ld = pad_rows.padded(x, transposed, ld, CPU)
    assert padded_ld == 64 and torch.equal(y.view(bits), x.view(bits) if not transposed else
                                           x.transpose(1, 2).view(bits).transpose(1, 2))


ON_GPU = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                        reason="needs a CUDA GPU")])


@pytest.mark.parametrize("dtype, cols, ld, wide, width", PIECE_CASES)
@pytest.mark.parametrize("device", ["cpu", ON_GPU])
def test_the_copy_kernel_moves_bits_in_pieces(
        dtype: torch.dtype, cols: int, ld: int, wide: torch.dtype | None, width: int, device: str) -> None:
    # pad_rows.tc on the interpreter (launch's pointers become tensors there) and on the GPU:
    # every bit of two matrices lands in rows of 64, the padding past each row untouched; on
    # the GPU also matrices of many tiles (rows and columns)
    dev = torch.device(device)
    for rows, cols_, ld_ in ((9, cols, ld), *(((300, cols * 37, ld * 37),) if device == "cuda" else ())):
        _, mat, bits = _bit_patterns(dtype, rows, cols_, ld_, False)  # (9 rows: a partial tile)
        mat = mat.to(dev)
        row = pad_rows.padded_length(cols_)
        buf = torch.full((2, rows, row), 77, dtype=bits, device=dev).view(dtype)
        y = buf[..., :cols_]
        pad_rows.copy_rows(y, mat, dev)
        assert torch.equal(y.view(bits), mat.view(bits))
        assert bool((buf.view(bits)[..., cols_:] == 77).all())
        one = torch.zeros_like(y)[1:2, 3:5]  # a batch of one matrix, as 3-D: copied as a 2-D one
        pad_rows.copy_rows(one, mat[:1, 2:4], dev)
        assert torch.equal(one.view(bits), mat[:1, 2:4].view(bits))


def test_a_batch_of_one_with_an_odd_matrix_stride_copies_in_wide_pieces() -> None:
    # (1, 3, 8) halves whose matrix stride (5) no wider piece divides: a single matrix, copied
    # as one (longs on the interpreter: torch's view would refuse the stride)
    x = torch.randn(100).half().as_strided((1, 3, 8), (5, 8, 1))
    y = torch.zeros(1, 3, 64, dtype=torch.float16)[..., :8]
    pad_rows.copy_rows(y, x, CPU)
    assert torch.equal(y, x) and pad_rows.piece_width(x) == 8
    assert torch.equal(pad_rows.padded(x, False, 8, CPU)[0], x)


def test_copies_past_the_kernels_int_offsets_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # a limit of 100 elements stands for 2**31: the kernel refuses such a copy by name (the
    # general path copies with torch instead, and matmul's check_extent refuses the product)
    monkeypatch.setattr(pad_rows, "INT32_LIMIT", 100)
    assert pad_rows.offsets_fit(99, 50) and not pad_rows.offsets_fit(99, 100)
    with pytest.raises(ValueError, match="int offsets"):
        pad_rows.copy_rows(torch.zeros(3, 64)[:, :40], torch.ones(3, 40), CPU)


def test_the_copy_kernel_refuses_what_it_cannot_copy() -> None:
    x = torch.zeros(3, 5)
    with pytest.raises(ValueError, match="of one shape and dtype"):
        pad_rows.copy_rows(torch.zeros(3, 6), x, CPU)
    with pytest.raises(ValueError, match="contiguous rows"):
        pad_rows.copy_rows(torch.zeros(5, 3).t(), x, CPU)
    rows = pad_rows.MAX_GRID * pad_rows.ROW_BYTES // 4 + 1  # floats: one column block too many
    assert not pad_rows.fits_grid(rows, 4, 1) and pad_rows.fits_grid(rows - 1, 4, 1)
    assert not pad_rows.fits_grid(5, 4, pad_rows.MAX_GRID + 1)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_on_padded_copies_equals_the_product(ta: bool, tb: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # every layout with leading dimensions of odd lengths, padded ("on") and not: the same product
    copied: list[tuple[int, ...]] = []
    real = pad_rows.padded

    def recorded(x: torch.Tensor, transposed: bool, ld: int, device: torch.device) -> tuple[torch.Tensor, int]:
        y, new_ld = real(x, transposed, ld, device)
        if y is not x:
            copied.append(tuple(x.shape))
        return y, new_ld

    monkeypatch.setattr(mm, "padded", recorded)
    torch.manual_seed(9)
    a = _operand(21, 19, ta, torch.float32).unsqueeze(0)
    b = _operand(19, 13, tb, torch.float32).unsqueeze(0)
    for pad in ("on", "off"):
        c = torch.full((1, 21, 13), float("nan"))
        mm.matmul_out(c, a, b, pad=pad)
        torch.testing.assert_close(c[0], a[0] @ b[0], atol=1e-4, rtol=1e-4)
    assert copied == [(1, 21, 19), (1, 19, 13)]  # both operands, with pad "on" only


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_batched_variants(ta: bool, tb: bool) -> None:
    """The four variants on batches (each matrix column-major inside a contiguous batch)."""
    torch.manual_seed(4)
    a = torch.randn(3, 9, 20).transpose(1, 2) if ta else torch.randn(3, 20, 9)
    b = torch.randn(3, 11, 9).transpose(1, 2) if tb else torch.randn(3, 9, 11)
    assert _layout(a)[1] == ta and _layout(b)[1] == tb
    torch.testing.assert_close(tc_torch.matmul(a, b), a @ b, atol=1e-5, rtol=1e-5)


def test_matmul_other_layouts_are_copied() -> None:
    a = torch.randn(20, 30)[:, ::2]  # neither dimension unit-stride: copied, then variant "a"
    b = torch.randn(3, 15, 7)[:, :, :5]  # a batch of row-major slices, row stride 7 passed as is
    assert _layout(a)[0].is_contiguous() and not _layout(b)[1] and _layout(b)[2] == 7
    torch.testing.assert_close(tc_torch.matmul(a, b), a @ b, atol=1e-5, rtol=1e-5)


def test_matmul_gradcheck_transposed_variants() -> None:
    a = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda a, b: tc_torch.matmul(a.t(), b.t()), (a, b))
    a3 = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    b3 = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda a, b: tc_torch.matmul(a.transpose(1, 2), b), (a3, b3))


def test_matmul_grouped_ordering_over_several_groups() -> None:
    """More than GROUP_SIZE rows of tiles and a partial last group: every tile written once."""
    m = 10 * 32 + 5  # 11 row tiles of 32 (CPU_CONFIG): a group of 8 and a partial group of 3
    assert int(mm.CPU_CONFIG.defines["MB"]) == 32
    a = torch.randint(-3, 4, (m, 24)).double()
    b = torch.randint(-3, 4, (24, 70)).double()  # 3 column tiles
    assert torch.equal(tc_torch.matmul(a, b), a @ b)


def test_matmul_is_auto_tuned_per_shape(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """With several configurations the runtime tunes once per (M, N, K) (on the interpreter it
    checks that they agree and keeps the first), and the result is right for each shape."""
    cfgs = [mm._cfg(32, 32, 16, 4, 1), mm._cfg(16, 64, 8, 2, 1)]
    monkeypatch.setattr(mm, "configs_for", lambda dtype, device, precision="ieee", trans_b=False: cfgs)
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    for m, n, k in ((40, 24, 20), (40, 24, 20), (17, 70, 33)):
        a = torch.randint(-3, 4, (m, k)).float()
        b = torch.randint(-3, 4, (k, n)).float()
        assert torch.equal(tc_torch.matmul(a, b), a @ b)
    err = capsys.readouterr().err
    assert err.count("kernel 'matmul' (M=40, N=24, K=20): using") == 1
    assert err.count("kernel 'matmul' (M=17, N=70, K=33): using") == 1


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every tc.kernel call tc_torch's library makes (recorded, not
    called: GPU kernels' configurations checked without a GPU)."""
    calls: list[dict[str, Any]] = []

    def fake_kernel(*args: object, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return object()

    monkeypatch.setattr(library, "_kernels", {})
    monkeypatch.setattr(tc_runtime, "kernel", fake_kernel)  # what library calls
    return calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matmul_gpu_kernels_are_tuned_on_m_n_k(dtype: torch.dtype,
                                              kernel_calls: list[dict[str, Any]]) -> None:
    """On a CUDA device the kernel gets the dtype's configuration list and the key (M, N, K)
    (checked without a GPU: tc.kernel is recorded, not called)."""
    mm.kernel_for(dtype, True, False, torch.device("cuda", 0))
    (kw,) = kernel_calls
    assert kw["autotune_key"] == ["M", "N", "K"]
    expected = mm.FMA_CONFIGS if dtype == torch.float32 else mm.TENSOR_CORE_CONFIGS
    assert kw["autotune_configs"] == expected and len(expected) > 1
    assert kw["defines"]["USE_A"] == "^a" and kw["defines"]["USE_B"] == "b"


def _tf32_shared_bytes(c: Any, restaged: bool) -> int:
    mb, nb, kb = (int(c.defines[d]) for d in ("MB", "NB", "KB"))
    return int((c.num_stages * (mb + nb) + (2 * nb if restaged else 0)) * kb * 4)


def test_matmul_tf32_kernels_tune_over_the_tf32_tiles(kernel_calls: list[dict[str, Any]]) -> None:
    mm.kernel_for(torch.float32, False, False, torch.device("cuda", 0), precision="tf32")
    mm.kernel_for(torch.float32, False, True, torch.device("cuda", 0), precision="tf32")
    n_major_b, k_major_b = kernel_calls
    assert n_major_b["autotune_configs"] == mm.TF32_CONFIGS and n_major_b["fp32_dot"] == "tf32"
    assert k_major_b["autotune_configs"] == mm.TF32_K_MAJOR_B_CONFIGS
    # every tile fits the shared memory of an sm_90 program (227 KiB) with its stages and, where
    # B is N-contiguous, the two buffers B is restaged K-major into (tc_opt.k_major_operands)
    for c in mm.TF32_CONFIGS:
        assert _tf32_shared_bytes(c, restaged=True) <= 227 * 1024 - 1024
    extra = [c for c in mm.TF32_K_MAJOR_B_CONFIGS if c not in mm.TF32_CONFIGS]
    assert extra and all(_tf32_shared_bytes(c, restaged=False) <= 227 * 1024 - 1024 for c in extra)
    assert not all(_tf32_shared_bytes(c, restaged=True) <= 227 * 1024 - 1024 for c in extra)


def test_matmul_one_configuration_keeps_its_schedule_options(kernel_calls: list[dict[str, Any]]) -> None:
    # matmul_out(..., configs=[one]) builds that configuration alone; a persistent bulk-store
    # schedule lives in the config's options, which the single-kernel route used to drop
    persistent = mm._cfg(128, 256, 64, 8, 3, **mm.PERSISTENT)
    plain = mm._cfg(128, 256, 64, 8, 3)
    mm.kernel_for(torch.float16, False, False, torch.device("cuda", 0), configs=[persistent])
    mm.kernel_for(torch.float16, False, False, torch.device("cuda", 0), configs=[plain])
    with_options, without = kernel_calls
    assert with_options["autotune_configs"] == [persistent]
    assert with_options["autotune_configs"][0].options == {"persistent": True, "tma_store": True,
                                                           "warp_specialize": True}
    assert without["autotune_configs"] is None and without["defines"]["MB"] == "128"


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_kernel_copies_operands_asynchronously_without_spills(ta: bool, tb: bool) -> None:
    # the GPU code of the op's kernel, for its largest tensor-core tile: every operand load a
    # 16-byte cp.async (operands masked, not wrapped with % M / % N, keep their contiguity) and no
    # local-memory spills (ptxas -v)
    import shutil

    import tc_nvptx
    from tc_opt import CompileOptions

    from tc_torch.library import source
    from tc_torch.ops.matmul import A_VARIANTS, B_VARIANTS

    defines = {"TYPE": "half", "ACC": "float", **A_VARIANTS[ta], **B_VARIANTS[tb], "MB": 128,
               "NB": 256, "KB": 64}
    # (on sm_90 the loads are TMA copies by default, 3-D: the batch index is the third coordinate)
    ck = tc_nvptx.compile(source("matmul"), defines=defines, options=CompileOptions(
        arch="sm_90", num_warps=8, num_stages=3, specialization=("divisible_by_16",) * 12, tma=False))
    assert "ld.global" not in ck.ptx and "cp.async.cg.shared.global" in ck.ptx
    assert set(re.findall(r"cp\.async\.\w+\.shared\.global \[%r\d+\], \[%rd\d+\], (\d+)",
                          ck.ptx)) == {"16"}
    tma = tc_nvptx.compile(source("matmul"), defines=defines, options=CompileOptions(
        arch="sm_90", num_warps=8, num_stages=3, specialization=("divisible_by_16",) * 12))
    assert "ld.global" not in tma.ptx and "cp.async.cg" not in tma.ptx
    assert "cp.async.bulk.tensor.3d" in tma.ptx and len(tma.tensor_maps) == 2
    if shutil.which("ptxas"):
        assert ck.spills == 0 and tma.spills == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_tf32_on_the_gpu_matches_torch_tf32(ta: bool, tb: bool) -> None:
    # precision="tf32" in each operand layout (on sm_90: wgmma with the operands K-major in shared
    # memory), as close to the exact product as torch.matmul with allow_tf32
    torch.manual_seed(0)
    a = _operand(512, 384, ta, torch.float32).cuda()
    b = _operand(384, 640, tb, torch.float32).cuda()
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        ref = torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    got = tc_torch.matmul(a, b, precision="tf32")
    exact = a.double() @ b.double()
    err = float((got.double() - exact).norm() / exact.norm())
    ref_err = float((ref.double() - exact).norm() / exact.norm())
    # tf32's error, not exact fp32; at most 4 times torch's: wgmma reads the fp32 bits of shared
    # memory as tf32 (truncated, as Triton's tf32 dots are), cuBLAS rounds them (H100: 7.8e-4 and
    # 2.9e-4 relative at 4096^3)
    assert 1e-5 < err < 4 * ref_err
    assert float((got - ref).abs().max()) < 1e-2 * float(ref.abs().max())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("plan", ["auto", "a", "b", "none"])
def test_matmul_tf32_transpose_first_on_the_gpu(plan: str) -> None:
    # dB = A^T dC in tf32 at sizes that are not multiples of any tile, with and without the copy
    # of one operand K-contiguous first ("auto" copies A here: N >= TRANSPOSE_FIRST_MIN on sm_90)
    torch.manual_seed(6)
    m, n = 1000, mm.TRANSPOSE_FIRST_MIN + 100
    k = int(mm.TRANSPOSE_FIRST_MIN_FLOPS / (2 * m * n)) + 7
    a = torch.randn(k, m, device="cuda").t()
    b = torch.randn(k, n, device="cuda")
    c = torch.empty(1, m, n, device="cuda")
    mm.matmul_out(c, a.unsqueeze(0), b.unsqueeze(0), precision="tf32", transpose_first=plan)
    exact = a.double() @ b.double()
    err = float((c[0].double() - exact).norm() / exact.norm())
    assert 1e-5 < err < 2e-3
    auto = tc_torch.matmul(a, b, precision="tf32")  # (the op's fast path leaves the plan to it)
    assert float((auto.double() - exact).norm() / exact.norm()) < 2e-3


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("shape", [(70, 45, 100), (33, 80, 130), (100, 20, 300)])
def test_matmul_stream_k_on_the_interpreter(ta: bool, tb: bool, shape: tuple[int, int, int]) -> None:
    # CPU_STREAM_K_PROGRAMS programs over 32x32 tiles: 70x45 has whole tiles round robin first,
    # and every shape cuts tiles between programs (partials passed through the workspace)
    torch.manual_seed(2)
    m, n, k = shape
    dtype = torch.bfloat16 if ta else torch.float16
    a = _operand(m, k, ta, dtype)
    b = _operand(k, n, tb, dtype)
    c = torch.empty(1, m, n, dtype=dtype)
    mm.matmul_out(c, a.unsqueeze(0), b.unsqueeze(0), stream_k="on")
    ref = a.double() @ b.double()
    assert (c[0].double() - ref).abs().max().item() < TOL[dtype] * max(1.0, ref.abs().max().item())
    _, flags = mm._workspace(c.device, mm.CPU_STREAM_K_PROGRAMS, 32 * 32)
    assert flags.tolist() == [0] * mm.CPU_STREAM_K_PROGRAMS


def test_matmul_stream_k_refusal() -> None:
    a = torch.randn(8, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match="stream_k must be one of on, off"):
        mm.matmul_out(torch.empty(1, 8, 8, dtype=torch.float16), a.unsqueeze(0), a.unsqueeze(0), stream_k="auto")


@pytest.mark.parametrize("configs,error,message", [
    ([{"MB": 16}], TypeError, r"configs\[0\] must be a tc_runtime.config\(...\), got dict"),
    ([], TypeError, "configs must be a non-empty list"),
    (mm.CPU_CONFIG, TypeError, "configs must be a non-empty list"),
    ([mm.CPU_CONFIG, tc_runtime.config({"MB": 16, "NB": 16})], ValueError, r"configs\[1\] must set the tile defines "
                                                                    "MB, NB, KB; it lacks KB"),
])
def test_matmul_out_checks_its_configurations(configs: Any, error: type[Exception], message: str) -> None:
    # (before: AttributeError from the tuner for a dict, an undeclared 'MB' inside matmul.tc for [])
    a, b = torch.randn(1, 3, 4), torch.randn(1, 4, 5)
    with pytest.raises(error, match=message):
        mm.matmul_out(torch.empty(1, 3, 5), a, b, configs=configs)
    got = mm.matmul_out(torch.empty(1, 3, 5), a, b, configs=[mm.CPU_CONFIG])
    assert torch.allclose(got, a @ b, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape", [(1000, 777, 3000), (3072, 3072, 3072), (129, 4100, 520)])
def test_matmul_stream_k_on_the_gpu(shape: tuple[int, int, int]) -> None:
    torch.manual_seed(3)
    m, n, k = shape
    for dtype in (torch.float16, torch.bfloat16):
        for ta in (False, True):
            for tb in (False, True):
                a = _operand(m, k, ta, dtype).cuda()
                b = _operand(k, n, tb, dtype).cuda()
                c = torch.empty(1, m, n, dtype=dtype, device="cuda")
                ref = a.double() @ b.double()
                for _ in range(2):  # (the flags reset themselves between launches)
                    c.zero_()
                    mm.matmul_out(c, a.unsqueeze(0), b.unsqueeze(0), configs=mm.STREAM_K_CONFIGS[:1],
                                  stream_k="on")  # (one configuration: no tuning)
                    err = (c[0].double() - ref).abs().max().item()
                    assert err < 0.5 + 2e-2 * ref.abs().max().item(), (dtype, ta, tb, err)


#: The tensor-core configurations whose tiles are not powers of two (192, 160 or 96 columns, 192 rows).
WIDE_CONFIGS = [c for c in mm.TENSOR_CORE_CONFIGS
                if any(int(c.defines[d]) & (int(c.defines[d]) - 1) for d in ("MB", "NB"))]  # type: ignore[call-overload]


#: The 64x128x64 tensor-core configurations (for products too small to fill the SMs with larger
#: tiles), with 3, 4 and 6 stages.
SMALL_CONFIGS = [c for c in mm.TENSOR_CORE_CONFIGS
                 if (c.defines["MB"], c.defines["NB"], c.defines["KB"]) == ("64", "128", "64")]


def test_matmul_configurations_include_tiles_of_192_columns_that_compile_for_wgmma() -> None:
    # 128x192, 256x192, 256x160, 192x96 and 192x192 (12 warps) tiles: wgmma m64n192k16
    # (m64n160k16, m64n96k16) reading TMA copies, no local-memory spills
    assert {(int(c.defines["MB"]), int(c.defines["NB"])) for c in WIDE_CONFIGS} == {  # type: ignore[call-overload]
        (128, 192), (256, 192), (256, 160), (192, 96), (192, 192)}
    assert {c.num_warps for c in WIDE_CONFIGS if c.defines["MB"] == "192" and c.defines["NB"] == "192"} == {12}
    _assert_compiled_for_wgmma(WIDE_CONFIGS)


def test_matmul_configurations_include_small_tiles_that_compile_for_wgmma() -> None:
    assert sorted(c.num_stages for c in SMALL_CONFIGS) == [3, 4, 6]
    _assert_compiled_for_wgmma(SMALL_CONFIGS)


ALIGNED_SPEC = ("divisible_by_16",) * 12
#: C's rows not 16-byte aligned (ldc odd): no bulk store; a warp-specialized kernel's epilogue
#: exchanges its tile through shared memory in panels (tc_opt.exchange_rounds)
UNALIGNED_C_SPEC = ("divisible_by_16",) * 8 + (None,) + ("divisible_by_16",) * 3


@pytest.mark.parametrize("type_,b_transposed,configs,fp32_dot,spec", [
    ("half", False, mm.TENSOR_CORE_CONFIGS, "ieee", ALIGNED_SPEC),
    ("float", False, mm.TF32_CONFIGS, "tf32", ALIGNED_SPEC),
    ("float", True, [c for c in mm.TF32_K_MAJOR_B_CONFIGS if c not in mm.TF32_CONFIGS], "tf32", ALIGNED_SPEC),
    ("half", False, [c for c in mm.TENSOR_CORE_CONFIGS if (c.options or {}).get("warp_specialize")], "ieee",
     UNALIGNED_C_SPEC),
], ids=["16-bit A B", "tf32 A B", "tf32 A B^T extras", "16-bit warp-specialized, C rows unaligned"])
def test_every_tuner_configuration_compiles_for_sm_90a_without_spills(
        type_: str, b_transposed: bool, configs: list[Any], fp32_dot: str, spec: tuple[str | None, ...]) -> None:
    # the tuner skips a configuration that does not compile and times one that spills: either
    # would cost speed without a word, so each is compiled here as the runtime compiles it for a
    # product whose arguments are divisible by 16 (ldc too, or not), with all of its options
    import shutil

    import tc_nvptx
    from tc_opt import CompileOptions

    from tc_torch.library import source

    assert configs
    for c in configs:
        defines = {"TYPE": type_, "ACC": "float", **mm.A_VARIANTS[False], **mm.B_VARIANTS[b_transposed], **c.defines}
        options = CompileOptions(arch="sm_90a", num_warps=c.num_warps, num_stages=c.num_stages,
                                 specialization=spec, fp32_dot=fp32_dot, **(c.options or {}))
        ck = tc_nvptx.compile(source("matmul"), defines=defines, options=options)
        assert "mma" in ck.ptx, (c.defines, c.num_warps, c.num_stages, c.options)
        if shutil.which("ptxas"):
            assert ck.spills == 0, (c.defines, c.num_warps, c.num_stages, c.options, ck.spills)


def _assert_compiled_for_wgmma(configs: list[Any]) -> None:
    """Each of `configs` compiled for sm_90a (fp16 A B^T): one wgmma m64n{NB}k16 reading TMA copies,
    no plain global loads, no local-memory spills (where ptxas is there to say)."""
    import shutil

    import tc_nvptx
    from tc_opt import CompileOptions

    from tc_torch.library import source
    from tc_torch.ops.matmul import A_VARIANTS, B_VARIANTS

    for c in configs:
        defines = {"TYPE": "half", "ACC": "float", **A_VARIANTS[False], **B_VARIANTS[True], **c.defines}
        flags = c.options or {}
        options = CompileOptions(arch="sm_90a", num_warps=c.num_warps, num_stages=c.num_stages,
                                 specialization=("divisible_by_16",) * 12,
                                 persistent=bool(flags.get("persistent")), tma_store=bool(flags.get("tma_store")),
                                 warp_specialize=bool(flags.get("warp_specialize")),
                                 cluster_multicast=bool(flags.get("cluster_multicast")))
        ck = tc_nvptx.compile(source("matmul"), defines=defines, options=options)
        assert f"wgmma.mma_async.sync.aligned.m64n{c.defines['NB']}k16.f32.f16.f16" in ck.ptx
        assert ck.cluster == (2 if flags.get("cluster_multicast") else 1)  # (192x192: B multicast)
        assert "cp.async.bulk.tensor" in ck.ptx and "ld.global" not in ck.ptx
        if shutil.which("ptxas"):
            assert ck.spills == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_tiles_of_192_columns_on_the_gpu(ta: bool, tb: bool, dtype: torch.dtype) -> None:
    # each configuration alone, at shapes that cut its tiles in M, N and K
    _each_configuration_alone(WIDE_CONFIGS, [(1000, 777, 3000), (129, 4100, 520), (3072, 3072, 256)], ta, tb, dtype)


def _each_configuration_alone(configs: list[Any], shapes: list[tuple[int, int, int]], ta: bool, tb: bool,
                              dtype: torch.dtype) -> None:
    """Each of `configs` forced alone on (M, N, K) products of `shapes`, against torch in float32."""
    torch.manual_seed(0)
    for m, n, k in shapes:
        a = _operand(m, k, ta, dtype).cuda()
        b = _operand(k, n, tb, dtype).cuda()
        ref = a.float() @ b.float()
        for c in configs:
            got = torch.full((1, m, n), float("nan"), device="cuda", dtype=dtype)
            mm.matmul_out(got, a.unsqueeze(0), b.unsqueeze(0), configs=[c])
            err = float((got[0].float() - ref).abs().max())
            assert err <= 0.5 + 2e-2 * float(ref.abs().max()), (m, n, k, c.defines, c.num_stages)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_small_tiles_on_the_gpu(ta: bool, tb: bool, dtype: torch.dtype) -> None:
    # each configuration alone, at shapes that cut its tiles in M, N and K (K of one step, of
    # fewer steps than stages, and of many)
    _each_configuration_alone(SMALL_CONFIGS, [(1000, 777, 300), (65, 129, 40), (1024, 1024, 1024), (200, 3000, 130)],
                              ta, tb, dtype)


#: The tensor-core configurations that overlap a program's epilogue with the next one's first
#: product (tc_opt.overlap_epilogue).
OVERLAP_CONFIGS = [c for c in mm.TENSOR_CORE_CONFIGS if (c.options or {}).get("overlap_epilogue")]


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_overlapped_configurations_compile_with_a_producer_warpgroup(ta: bool, tb: bool) -> None:
    """Each layout's kernel takes the rewrite (four producer warps beside the configuration's) and
    keeps its wgmma in flight without spills."""
    import re
    import shutil

    import tc_nvptx
    from tc_opt import CompileOptions

    from tc_torch.library import source
    from tc_torch.ops.matmul import A_VARIANTS, B_VARIANTS

    assert {(int(c.defines["MB"]), int(c.defines["NB"])) for c in OVERLAP_CONFIGS} == {  # type: ignore[call-overload]
        (128, 256), (128, 192)}
    for c in OVERLAP_CONFIGS:
        defines = {"TYPE": "half", "ACC": "float", **A_VARIANTS[ta], **B_VARIANTS[tb], **c.defines}
        flags = c.options or {}
        options = CompileOptions(arch="sm_90a", num_warps=c.num_warps, num_stages=c.num_stages,
                                 specialization=("divisible_by_16",) * 12, persistent=bool(flags.get("persistent")),
                                 tma_store=bool(flags.get("tma_store")), warp_specialize=bool(flags.get("warp_specialize")),
                                 overlap_epilogue=bool(flags.get("overlap_epilogue")))
        ck = tc_nvptx.compile(source("matmul"), defines=defines, options=options)
        assert ck.num_warps == c.num_warps + 4 and "setmaxnreg.inc.sync.aligned.u32 232;" in ck.ptx
        if shutil.which("ptxas"):
            assert ck.spills == 0 and not re.search(r"C751[0-6]", ck.asm["ptxas"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_overlapped_configurations_on_the_gpu(ta: bool, tb: bool, dtype: torch.dtype) -> None:
    # each configuration alone, batched (the programs' z), at shapes that cut its tiles in M, N
    # and K, with more programs than SMs and K of one k-step
    torch.manual_seed(0)
    def batch(z: int, rows: int, cols: int, transposed: bool) -> torch.Tensor:
        if transposed:  # each matrix column-major, as _operand's
            return torch.randn(z, cols, rows, dtype=dtype, device="cuda").transpose(1, 2)
        return torch.randn(z, rows, cols, dtype=dtype, device="cuda")

    for z, m, n, k in [(2, 1000, 777, 3000), (1, 129, 4100, 520), (3, 1536, 2048, 64)]:
        a, b = batch(z, m, k, ta), batch(z, k, n, tb)
        ref = a.float() @ b.float()
        for c in OVERLAP_CONFIGS:
            got = torch.full((z, m, n), float("nan"), device="cuda", dtype=dtype)
            mm.matmul_out(got, a, b, configs=[c])
            err = float((got.float() - ref).abs().max())
            assert err <= 0.5 + 2e-2 * float(ref.abs().max()), (z, m, n, k, c.defines)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_rows_divisible_by_8_take_the_tma_kernels_on_the_gpu(ta: bool, tb: bool, dtype: torch.dtype) -> None:
    # 16-bit operands and result whose leading dimensions are 8 mod 16 (16-byte rows): the
    # runtime's divisible_by_8 specialization compiles them with TMA copies and bulk stores, as
    # for multiples of 16, and the results are right
    from tc_runtime.signature import DIV8

    torch.manual_seed(0)
    z, m, n, k = 2, 1000, 4104, 520
    a = torch.randn(z, k, m, dtype=dtype, device="cuda").transpose(1, 2) if ta else \
        torch.randn(z, m, k, dtype=dtype, device="cuda")
    b = torch.randn(z, n, k, dtype=dtype, device="cuda").transpose(1, 2) if tb else \
        torch.randn(z, k, n, dtype=dtype, device="cuda")
    ref = a.float() @ b.float()
    for c in [mm._cfg(128, 256, 64, 8, 4, **mm.PERSISTENT, overlap_epilogue=True), mm._cfg(128, 128, 64, 4, 4)]:
        got = torch.full((z, m, n), float("nan"), device="cuda", dtype=dtype)
        mm.matmul_out(got, a, b, configs=[c])
        err = float((got.float() - ref).abs().max())
        assert err <= 0.5 + 2e-2 * float(ref.abs().max()), c
        kern = mm.kernel_for(dtype, ta, tb, got.device, [c])
        # (the variants of these leading dimensions, lda, ldb and ldc all 8 mod 16: other tests'
        # products may have left variants of this configuration whose rows are not aligned)
        variants = [v for (_, spec), v in kern._compiled.items() if spec[6] == spec[7] == spec[8] == DIV8]
        assert variants and all(v.binary.tensor_maps for v in variants), c


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_leading_dimensions_not_multiples_of_8_run_on_padded_copies_on_the_gpu(ta: bool, tb: bool) -> None:
    # every leading dimension odd against 8 (1001, 300 and 4100 half elements): a product large
    # enough is computed from copies in rows of 64, so its kernel is specialized for 16-byte rows
    # (A's and B's codes divisible by 16); without padding the same configuration's kernel is
    # specialized for rows of no known alignment; both results are right
    from tc_runtime.signature import DIV16, NONE

    torch.manual_seed(0)
    dtype = torch.float16
    m, n, k = 300, 4100, 1001
    assert mm.pads(m, n, k, (k, n), itemsize=2) == (True, True)  # (300 too, transposed)
    a = torch.randn(1, k, m, dtype=dtype, device="cuda").transpose(1, 2) if ta else \
        torch.randn(1, m, k, dtype=dtype, device="cuda")
    b = torch.randn(1, n, k, dtype=dtype, device="cuda").transpose(1, 2) if tb else \
        torch.randn(1, k, n, dtype=dtype, device="cuda")
    ref = a.float() @ b.float()
    c = mm._cfg(128, 128, 64, 4, 4)
    kern = mm.kernel_for(dtype, ta, tb, a.device, [c])
    for pad, code in (("auto", DIV16), ("off", NONE)):
        got = torch.full((1, m, n), float("nan"), device="cuda", dtype=dtype)
        mm.matmul_out(got, a, b, configs=[c], pad=pad)
        assert float((got.float() - ref).abs().max()) <= 0.5 + 2e-2 * float(ref.abs().max()), pad
        specs = [spec for (_, spec) in kern._compiled]
        assert any(spec[6] == spec[7] == code for spec in specs), (pad, specs)  # (lda, ldb)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_the_fast_path_pads_rows_not_multiples_of_8_on_the_gpu(ta: bool, tb: bool, monkeypatch: Any) -> None:
    # once a kernel is chosen, tc_torch.matmul of operands whose rows need padding copies them
    # and launches without matmul_out's checks (they cost the host as much as the kernel of a
    # 2100^3 product)
    torch.manual_seed(0)
    dtype = torch.float16
    m, n, k = 300, 4100, 1001
    a = torch.randn(k, m, dtype=dtype, device="cuda").t() if ta else torch.randn(m, k, dtype=dtype, device="cuda")
    b = torch.randn(n, k, dtype=dtype, device="cuda").t() if tb else torch.randn(k, n, dtype=dtype, device="cuda")
    # (5 stages: a configuration of this test's own, so that its kernel holds only its variants)
    kern = mm.kernel_for(dtype, ta, tb, a.device, [mm._cfg(128, 128, 64, 4, 5)])
    monkeypatch.setitem(mm._KERNELS, (dtype, ta, tb, a.device.index, "ieee"), kern)
    for width in pad_rows.PIECES:  # (the general path makes the copy kernels it needs)
        pad_rows.kernel(width, a.device)
    monkeypatch.setattr(mm, "matmul_out", None)  # (the general path would fail)
    before = set(kern._compiled)
    got = mm._fast_mm(a, b, "ieee")
    assert got is not None
    ref = a.float() @ b.float()
    assert float((got.float() - ref).abs().max()) <= 0.5 + 2e-2 * float(ref.abs().max())
    assert a.stride() == ((1, m) if ta else (k, 1))  # (the operands themselves are left as they are)
    from tc_runtime.signature import DIV16

    new = [spec for (_, spec) in set(kern._compiled) - before]
    assert new and all(spec[6] == spec[7] == DIV16 for spec in new), new  # (lda, ldb: rows of 64)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["both", "b 2-D", "a 2-D", "a batch of 1", "a expanded"])
def test_batched_products_on_the_fast_path_on_the_gpu(kind: str) -> None:
    # the second call of each kind takes the fast path (no general checks): the same results
    torch.manual_seed(0)
    dtype = torch.float16
    b3 = torch.randn(3, 70, 40, dtype=dtype, device="cuda").transpose(1, 2)
    a, b = {"both": (torch.randn(3, 24, 40, dtype=dtype, device="cuda"), b3),
            "b 2-D": (torch.randn(3, 24, 40, dtype=dtype, device="cuda"), b3[0]),
            "a 2-D": (torch.randn(24, 40, dtype=dtype, device="cuda"), b3),
            "a batch of 1": (torch.randn(1, 24, 40, dtype=dtype, device="cuda"), b3),
            "a expanded": (torch.randn(24, 40, dtype=dtype, device="cuda").expand(3, 24, 40), b3)}[kind]
    ref = a.float() @ b.float()
    first = tc_torch.matmul(a, b)
    assert mm._fast_mm(a, b, "ieee") is not None  # (the kernel is chosen: the fast path runs)
    second = tc_torch.matmul(a, b)
    for got in (first, second):
        assert got.shape == ref.shape and got.is_contiguous()
        assert float((got.float() - ref).abs().max()) <= 1e-2 * float(ref.abs().max())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["both", "b 2-D", "a batch of 1", "a expanded"])
def test_batched_padded_products_on_the_fast_path_on_the_gpu(kind: str, monkeypatch: Any) -> None:
    # operands whose rows are not 16-byte aligned (41 halves, 42 or 43 apart), padded whatever
    # the product's size: the second call copies them by pad_rows.fast_padded; the same results
    monkeypatch.setattr(mm, "PAD_MIN_FLOPS", 0.0)
    monkeypatch.setattr(mm, "_PLANS", {})  # (layouts planned before under the usual threshold)
    torch.manual_seed(0)
    dtype = torch.float16
    a2 = torch.randn(24, 42, dtype=dtype, device="cuda")[:, :41]
    b3 = torch.randn(3, 70, 43, dtype=dtype, device="cuda")[..., :41].transpose(1, 2)  # column-major
    a, b = {"both": (torch.randn(3, 24, 42, dtype=dtype, device="cuda")[..., :41], b3),
            "b 2-D": (torch.randn(3, 24, 42, dtype=dtype, device="cuda")[..., :41], b3[1]),
            "a batch of 1": (a2.unsqueeze(0), b3),
            "a expanded": (a2.expand(3, 24, 41), b3)}[kind]
    assert mm.pads(24, 70, 41, (42, 43), itemsize=2) == (True, True)
    ref = a.float() @ b.float()
    first = tc_torch.matmul(a, b)
    assert mm._fast_mm(a, b, "ieee") is not None  # (kernels chosen and copy kernels made)
    second = tc_torch.matmul(a, b)
    for got in (first, second):
        assert got.shape == ref.shape and got.is_contiguous()
        assert float((got.float() - ref).abs().max()) <= 1e-2 * float(ref.abs().max())


#: Tiles 176 and 160 columns wide: B's rows (N-contiguous) in 128-byte swizzle panels of 64, 64
#: and 48 (or 32) columns, stored and copied whole (tc_opt.dot_layouts.PARTIAL_PANEL_PADDING),
#: and C's bulk stores in panels of 16 (32) columns (tc_opt.tma_store.store_swizzle); plain TMA,
#: cp.async copies into the same panels, persistent kernels with and without multicast; tf32
#: tiles of 80 columns (bulk stores of 64-byte panels written without stmatrix).
PARTIAL_PANEL_CONFIGS = [mm._cfg(128, 176, 64, 8, 3), tc_runtime.config(defines={"MB": 128, "NB": 176, "KB": 64},
                                                                         num_warps=8, num_stages=3, options={"tma": False}),
                         mm._cfg(192, 176, 64, 12, 3, 1, **mm.PERSISTENT, cluster_multicast=True),
                         mm._cfg(128, 176, 64, 8, 4, **mm.PERSISTENT, overlap_epilogue=True, cluster_multicast=True),
                         mm._cfg(128, 160, 64, 8, 4, **mm.PERSISTENT, overlap_epilogue=True)]
PARTIAL_PANEL_TF32 = [mm._cfg(128, 80, 32, 8, 3, **mm.PERSISTENT), mm._cfg(256, 80, 32, 8, 3, **mm.PERSISTENT)]


def test_partial_swizzle_panels_in_the_gpu_code() -> None:
    # the 192x176 kernel (fp16 A B): the barrier expects whole boxes of B (64 x 192 columns),
    # wgmma reads 176 columns of them
    import tc_nvptx
    from tc_opt import CompileOptions

    from tc_torch.library import source

    c = PARTIAL_PANEL_CONFIGS[2]
    defines = {"TYPE": "half", "ACC": "float", **mm.A_VARIANTS[False], **mm.B_VARIANTS[False], **c.defines}
    ck = tc_nvptx.compile(source("matmul"), defines=defines, options=CompileOptions(
        arch="sm_90a", num_warps=12, num_stages=3, specialization=("divisible_by_16",) * 12, persistent=True,
        tma_store=True, cluster_multicast=True, warp_specialize=True))
    assert "m64n176k16" in ck.ptx and ck.cluster == 2
    expected = set(re.findall(r"expect_tx\.shared::cta\.b64 _, \[%r\d+\], (\d+);", ck.ptx))
    assert expected == {str(2 * (192 * 64 + 64 * 192))}, expected


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_partial_swizzle_panels_on_the_gpu(ta: bool, tb: bool, dtype: torch.dtype) -> None:
    # shapes that cut the tiles in M, N and K, with rows 16 but not 32 bytes apart (4104), more
    # programs than SMs, a batch, K of one k-step
    from tc_opt.resources import ResourceLimitError

    torch.manual_seed(0)
    configs = PARTIAL_PANEL_CONFIGS if dtype == torch.float16 else PARTIAL_PANEL_TF32
    precision = "tf32" if dtype == torch.float32 else "ieee"
    checked = 0
    for z, m, n, k in ((1, 300, 4104, 1001), (1, 2056, 2056, 2056), (2, 200, 500, 64)):
        a = torch.randn(z, k, m, dtype=dtype, device="cuda").transpose(1, 2) if ta else \
            torch.randn(z, m, k, dtype=dtype, device="cuda")
        b = torch.randn(z, n, k, dtype=dtype, device="cuda").transpose(1, 2) if tb else \
            torch.randn(z, k, n, dtype=dtype, device="cuda")
        ref = a.double() @ b.double()
        for c in configs:
            got = torch.full((z, m, n), float("nan"), device="cuda", dtype=dtype)
            try:
                mm.matmul_out(got, a, b, configs=[c], pad="off", precision=precision, transpose_first="none")
            except ResourceLimitError:  # (tf32: B restaged K-major does not fit beside every tile)
                continue
            err = float((got.double() - ref).abs().max())
            assert err <= 0.5 + 1e-2 * float(ref.abs().max()), (z, m, n, k, c.defines, c.options)
            checked += 1
    assert checked >= 3 * len(configs) // 2


#: Persistent configurations in clusters of 2 that multicast the tiles two programs share
#: (CompileOptions.cluster_multicast), with and without the bulk store, the overlapped epilogue
#: and a producer warpgroup.
MULTICAST_CONFIGS = {
    torch.float16: [mm._cfg(128, 256, 64, 8, 3, **mm.PERSISTENT, cluster_multicast=True),
                    mm._cfg(192, 192, 64, 12, 3, 1, **mm.PERSISTENT, cluster_multicast=True),
                    mm._cfg(128, 256, 64, 8, 4, **mm.PERSISTENT, overlap_epilogue=True, cluster_multicast=True),
                    mm._cfg(128, 128, 64, 4, 4, persistent=True, cluster_multicast=True),
                    # clusters of 4 over 2 x 2 tiles (GROUP_SIZE 2), both operands shared
                    mm._cfg(192, 192, 64, 12, 3, 2, **mm.PERSISTENT, cluster_multicast=True, cluster_2x2=True),
                    mm._cfg(128, 256, 64, 8, 4, 2, **mm.PERSISTENT, overlap_epilogue=True, cluster_multicast=True,
                            cluster_2x2=True),
                    mm._cfg(128, 128, 64, 4, 4, 2, persistent=True, cluster_multicast=True, cluster_2x2=True)],
    torch.float32: [mm._cfg(128, 256, 32, 8, 3, **mm.PERSISTENT, cluster_multicast=True),
                    mm._cfg(256, 128, 32, 8, 4, persistent=True, producer_warpgroup=True, cluster_multicast=True),
                    mm._cfg(256, 128, 32, 8, 4, 2, persistent=True, producer_warpgroup=True, cluster_multicast=True,
                            cluster_2x2=True)],
}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_cluster_multicast_on_the_gpu(ta: bool, tb: bool, dtype: torch.dtype) -> None:
    # grids of an even number of programs (the clusters' CTAs share B), of an odd number (the
    # last program alone: its CTA runs a program more; 2056 x 2056 is 153 tiles of 128x256 and
    # 121 of 192x192, more than the CTAs), with a last group of 3 rows of tiles (pairs of
    # programs in different columns: B not shared), batches whose pairs straddle two matrices
    # (B shared only where broadcast), K of one k-step and K = 0
    from tc_opt.resources import ResourceLimitError

    torch.manual_seed(0)
    precision = "tf32" if dtype == torch.float32 else "ieee"

    def batch(z: int, rows: int, cols: int, transposed: bool, broadcast: bool = False) -> torch.Tensor:
        shape = (1 if broadcast else z, cols, rows) if transposed else (1 if broadcast else z, rows, cols)
        x = torch.randn(*shape, dtype=dtype, device="cuda")
        x = x.transpose(1, 2) if transposed else x
        return x.expand(z, rows, cols) if broadcast else x

    cases = [(2, 1000, 777, 3000, False), (1, 129, 4100, 520, False), (1, 384, 256, 64, False),
             (1, 1400, 1024, 256, False), (2, 384, 256, 64, False), (2, 384, 256, 64, True),
             (1, 96, 160, 0, False), (1, 2056, 2056, 192, False)]
    checked = 0
    for z, m, n, k, broadcast in cases:
        a, b = batch(z, m, k, ta), batch(z, k, n, tb, broadcast)
        ref = a.double() @ b.double()
        for c in MULTICAST_CONFIGS[dtype]:
            got = torch.full((z, m, n), float("nan"), device="cuda", dtype=dtype)
            try:
                mm.matmul_out(got, a, b, configs=[c], precision=precision)
            except ResourceLimitError:  # (B restaged K-major does not fit beside every tile)
                continue
            err = float((got.double() - ref).abs().max())
            assert err <= 0.5 + 1e-2 * float(ref.abs().max()), (z, m, n, k, broadcast, c.defines, c.options)
            checked += 1
    assert checked >= len(cases)


#: tf32 persistent configurations with a producer warpgroup (CompileOptions.producer_warpgroup),
#: not among the tuner's tiles yet: A B reads B^T into registers, which a one-warp producer
#: could not host (ptxas C7512).
PRODUCER_WARPGROUP_TF32 = [mm._cfg(256, 128, 32, 8, 4, persistent=True, producer_warpgroup=True),
                           mm._cfg(128, 256, 32, 8, 3, persistent=True, producer_warpgroup=True)]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_tf32_with_a_producer_warpgroup_on_the_gpu(ta: bool, tb: bool) -> None:
    # each configuration alone in each layout, at shapes that cut its tiles in M, N and K, with
    # more programs than SMs, K of one k-step and K = 0 (the accumulator's zeros)
    from tc_opt.resources import ResourceLimitError

    torch.manual_seed(0)
    shapes = [(1000, 777, 3000), (129, 4100, 520), (1536, 2048, 32), (96, 160, 0)]
    checked = 0
    for m, n, k in shapes:
        a, b = _operand(m, k, ta, torch.float32).cuda(), _operand(k, n, tb, torch.float32).cuda()
        ref = a.double() @ b.double()
        for c in PRODUCER_WARPGROUP_TF32:
            got = torch.full((1, m, n), float("nan"), device="cuda")
            try:
                mm.matmul_out(got, a.unsqueeze(0), b.unsqueeze(0), configs=[c], precision="tf32")
            except ResourceLimitError:  # (B restaged K-major does not fit beside every tile)
                continue
            err = float((got[0].double() - ref).abs().max())
            assert err <= 1e-2 * max(float(ref.abs().max()), 1.0), (m, n, k, c.defines, ta, tb)
            checked += 1
    assert checked >= len(shapes)  # (every shape, at least one configuration)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("which", ["both", "a", "b"])
@pytest.mark.parametrize("batch_a,batch_b", [((), ()), ((3,), ()), ((3,), (3,))],
                         ids=["matrices", "batch-times-matrix", "batches"])
def test_planned_backward_passes_on_the_gpu(which: str, batch_a: tuple[int, ...],
                                            batch_b: tuple[int, ...], monkeypatch: Any) -> None:
    # from the third backward pass of a layout on, it launches from its plan (_BACKWARD_PLANS:
    # checked by taking away the unplanned path); every pass's gradients must be torch's (fp16,
    # 200 x 136 x 72: not multiples of the tiles; a batch times a matrix: dB over A and dC seen
    # as 600 rows)
    torch.manual_seed(0)
    a = torch.randn(*batch_a, 200, 72, device="cuda", dtype=torch.float16).requires_grad_(which != "b")
    b = torch.randn(*batch_b, 72, 136, device="cuda", dtype=torch.float16).requires_grad_(which != "a")
    ar, br = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    for step in range(4):
        if step == 2:
            assert any(k[:2] == (a.shape, b.shape) for k in mm._BACKWARD_PLANS)
            monkeypatch.setattr(mm, "_gradients", None)
        dc = torch.randn(*batch_a, 200, 136, device="cuda", dtype=torch.float16)
        a.grad = b.grad = ar.grad = br.grad = None
        c: Any = tc_torch.matmul(a, b)
        c.backward(dc)
        cr: Any = ar @ br
        cr.backward(dc.double())
        for got, ref, wanted in ((a.grad, ar.grad, which != "b"), (b.grad, br.grad, which != "a")):
            if not wanted:
                assert got is None
                continue
            assert got is not None and ref is not None
            scale = float(ref.abs().max())
            assert float((got.double() - ref).abs().max()) <= 1e-2 * scale, (which, step)
