"""The ops' GPU fast paths, checked without a GPU: CPU tensors are made to look like tensors of
cuda:0 to the device probes, and the kernels are recorders. The first call of an op takes the
general path (checks, kernel choice), a second call with the same kind of tensors the fast path:
both must launch the same kernels with the same arguments and grids and return tensors of the same
shape, dtype and strides; the fast path must not run the general checks; and wrong arguments must
still get the general path's errors after the fast path is warm. (On the interpreter, the other
tests, the fast paths are never taken: they are for CUDA tensors.)"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import tc_runtime
import tc_torch
from tc_torch import devices
from tc_torch.ops import add as add_op
from tc_torch.ops import cross_entropy as ce
from tc_torch.ops import layer_norm as ln
from tc_torch.ops import matmul as mm
from tc_torch.ops import pad_rows
from tc_torch.ops import softmax as sm
from tc_torch.ops import transpose as tr

CUDA0 = torch.device("cuda", 0)
OPS = (add_op, ce, ln, mm, pad_rows, sm, tr)
#: The options a grid callable gets (transpose's TM/TN, matmul's MB/NB, pad_rows' TR/TC).
OPT = types.SimpleNamespace(TM=32, TN=64, MB=64, NB=32, TR=16, TC=32)
Call = tuple[object, tuple[object, ...], tuple[int, ...]]


class FakeGpu:
    """Records the kernels made and launched, and the general path's device checks."""

    def __init__(self) -> None:
        self.launches: list[Call] = []
        self.made = 0
        self.device_checks = 0

    def kernel(self, key: object) -> Callable[..., None]:
        self.made += 1

        def launch(*args: object, grid: Any, stream: object = None) -> None:
            assert stream is None
            if callable(grid):
                grid = grid(OPT)
            assert all(type(a) in (int, float) for a in args), "a GPU launch takes plain numbers"
            self.launches.append((key, args, tuple(grid)))
        return launch


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGpu]:
    fake = FakeGpu()
    real_device_of = devices.device_of

    def device_of(tensors: Any, op: str) -> torch.device:
        fake.device_checks += 1
        dev = real_device_of(tensors, op)
        return CUDA0 if dev.type == "cpu" else dev

    def cuda_index(t: torch.Tensor) -> int:  # (as devices.cuda_index: strided tensors only)
        return 0 if t.device.type == "cpu" and t.layout is devices.STRIDED else -1

    def get_kernel(file: str, name: str, device: torch.device, defines: dict[str, object],
                   num_warps: int = 4, num_stages: int = 3, configs: Any = None, key: Any = None,
                   fp32_dot: str = "ieee") -> Callable[..., None]:
        assert device == CUDA0
        return fake.kernel((file, name, tuple(sorted(defines.items())), num_warps, num_stages,
                            tuple(c.key() for c in configs or ()), tuple(key or ()), fp32_dot))

    def kernel(source: str, device: str, defines: dict[str, object], **kw: object) -> object:
        assert device == "cuda:0"
        return fake.kernel(("add", tuple(sorted(defines.items()))))

    for mod in OPS:
        if hasattr(mod, "device_of"):
            monkeypatch.setattr(mod, "device_of", device_of)
        if hasattr(mod, "cuda_index"):
            monkeypatch.setattr(mod, "cuda_index", cuda_index)
        if hasattr(mod, "get_kernel"):
            monkeypatch.setattr(mod, "get_kernel", get_kernel)
    monkeypatch.setattr(tc_runtime, "kernel", kernel)  # what add.kernel_for calls
    monkeypatch.setattr(mm, "_sm90", {0: True})  # (matmul asks torch.cuda for the arch once)
    monkeypatch.setattr(mm, "TRANSPOSE_FIRST_MIN_FLOPS", 0.0)  # (small tensors copy operands too)
    for mod, names in ((sm, ("_FORWARD", "_BACKWARD")), (ln, ("_FORWARD", "_PLANS")),
                       (ce, ("_FORWARD", "_BACKWARD")), (tr, ("_KERNELS",)), (mm, ("_KERNELS", "_PLANS", "_BACKWARD_PLANS")),
                       (pad_rows, ("_KERNELS",)),
                       (add_op, ("_kernels", "_by_index"))):
        for name in names:
            monkeypatch.setattr(mod, name, {})
    ln._backward_plan.cache_clear()  # (its plans hold the fake kernels: not kept past the test)
    yield fake
    ln._backward_plan.cache_clear()


def _tensors(result: object) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _tensors(r)]
    return []


def _normalized(launches: list[Call], inputs: list[torch.Tensor], result: object) -> list[Call]:
    """The launches with pointers to the inputs and to the result's tensors named by position,
    and other pointers (scratch allocations, which differ between calls) as "new"."""
    names = {t.data_ptr(): f"result {i}" for i, t in enumerate(_tensors(result))}
    names.update({t.data_ptr(): f"input {i}" for i, t in enumerate(inputs)})
    out: list[Call] = []
    for key, args, grid in launches:
        norm = tuple(names.get(a, "new" if a >= 2**32 else a) if type(a) is int else a
                     for a in args)
        out.append((key, norm, grid))
    return out


def _layout(result: object) -> object:
    if isinstance(result, torch.Tensor):
        return result.shape, result.dtype, result.stride(), result.device
    if isinstance(result, (tuple, list)):
        return [_layout(r) for r in result]
    return result


def _r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def _cases() -> list[tuple[str, Callable[[], tuple[Callable[[], object], list[torch.Tensor]]]]]:
    """(name, make): make() gives the call and its input tensors (fresh tensors per test)."""

    def add() -> Any:
        x, y = _r(33, 70, dtype=torch.float16), _r(33, 70, dtype=torch.float16)
        return lambda: tc_torch.add(x, y), [x, y]

    def softmax_3d() -> Any:
        x = _r(3, 5, 130)
        return lambda: tc_torch.softmax(x), [x]

    def softmax_one_row() -> Any:
        x = _r(1, 77, dtype=torch.bfloat16)
        return lambda: tc_torch.softmax(x, dim=-1), [x]

    def softmax_backward() -> Any:
        dy, y = _r(6, 40), _r(6, 40)
        return lambda: sm.softmax_backward(dy, y), [dy, y]

    def layer_norm_wb() -> Any:
        x, w, b = _r(2, 7, 48), _r(48), _r(48)
        return lambda: tc_torch.layer_norm(x, 48, w, b), [x, w, b]

    def layer_norm_parameters_no_grad() -> Any:
        x = _r(9, 32, dtype=torch.float16)
        norm = torch.nn.LayerNorm(32, dtype=torch.float16)

        def call() -> torch.Tensor:
            with torch.no_grad():
                return tc_torch.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias,
                                           norm.eps)
        return call, [x, norm.weight, norm.bias]

    def layer_norm_plain() -> Any:
        x = _r(5, 64, dtype=torch.float64)
        return lambda: tc_torch.layer_norm(x, (64,), eps=1e-3), [x]

    def layer_norm_forward() -> Any:
        x, w = _r(11, 24), _r(24)
        return lambda: ln.layer_norm_forward(x, 24, w, None, 1e-5), [x, w]

    def layer_norm_backward() -> Any:
        dy, x, w, mean, rstd = _r(10, 24), _r(10, 24), _r(24), _r(10), _r(10)
        return (lambda: ln.layer_norm_backward(dy, x, 24, w, True, mean, rstd, True, True, True),
                [dy, x, w, mean, rstd])

    def layer_norm_backward_db_only() -> Any:
        dy, x, mean, rstd = _r(10, 24), _r(10, 24), _r(10), _r(10)
        return (lambda: ln.layer_norm_backward(dy, x, 24, None, True, mean, rstd, False, True,
                                               True), [dy, x, mean, rstd])

    def cross_entropy(reduction: str) -> Any:
        def make() -> Any:
            x, t = _r(8, 30, dtype=torch.float16), torch.randint(0, 30, (8,))
            t[3] = -100
            return lambda: tc_torch.cross_entropy(x, t, reduction=reduction), [x, t]
        return make

    def cross_entropy_backward() -> Any:
        x, t, lse = _r(8, 30), torch.randint(0, 30, (8,)), _r(8)
        dloss = torch.ones(()).expand(8)  # the mean's gradient: a stride-0 vector
        return lambda: ce.cross_entropy_backward(dloss, x, t, lse, 5), [x, t, lse, dloss]

    def transpose() -> Any:
        x = _r(37, 45, dtype=torch.float16)
        return lambda: tc_torch.transpose(x), [x]

    def matmul(ta: bool, tb: bool) -> Any:
        def make() -> Any:
            a = _r(40, 24).t() if ta else _r(24, 40)
            b = _r(50, 40).t() if tb else _r(40, 50)
            return lambda: tc_torch.matmul(a, b, precision="tf32"), [a, b]
        return make

    def matmul_copied_first(transposed: str) -> Any:
        def make() -> Any:  # tf32 A^T B: one operand copied K-contiguous by the transpose kernel
            if transposed == "a":  # (A the smaller operand, N >= TRANSPOSE_FIRST_MIN)
                a, b = _r(16, 8).t(), _r(16, mm.TRANSPOSE_FIRST_MIN + 6)
            else:  # B the smaller, M >= TRANSPOSE_FIRST_MIN
                a, b = _r(16, mm.TRANSPOSE_FIRST_MIN + 6).t(), _r(16, 8)
            assert mm.pick_transpose_first(a.shape[0], b.shape[1], 16, True, False) == transposed
            return lambda: tc_torch.matmul(a, b, precision="tf32"), [a, b]
        return make

    def matmul_row_slice() -> Any:
        a, b = _r(30, 20)[3:4], _r(20, 9)[:, :7]  # one row; a row stride of 9
        return lambda: tc_torch.matmul(a, b), [a, b]

    def matmul_batched(kind: str) -> Any:
        def make() -> Any:  # 3-D batches: each of the broadcasts _mm allows, strided matrices
            b3 = _r(3, 50, 40).transpose(1, 2)  # (3, 40, 50), each matrix column-major
            a, b = {"both": (_r(3, 24, 40), b3), "b 2-D": (_r(3, 24, 40), _r(40, 50)),
                    "a 2-D": (_r(24, 40), b3), "a batch of 1": (_r(1, 24, 40), b3),
                    "a expanded": (_r(24, 40).expand(3, 24, 40), b3),
                    "half": (_r(3, 24, 40, dtype=torch.float16), b3.half())}[kind]
            return lambda: tc_torch.matmul(a, b), [a, b]
        return make

    def matmul_padded(transposed: bool) -> Any:
        def make() -> Any:  # rows of 740 halves (not 16-byte aligned), a product of 8.1e8 FLOPs:
            # both operands copied into rows of 768 (new pointers) in both paths, by the copy
            # kernel (rows 8 bytes apart: as longs)
            a = _r(740, 740, dtype=torch.float16)
            b = _r(740, 740, dtype=torch.float16)
            if transposed:
                a = a.t()
            assert mm.pads(740, 740, 740, (740, 740), itemsize=2) == (True, True)
            return lambda: tc_torch.matmul(a, b), [a, b]
        return make

    def matmul_padded_batched(kind: str) -> Any:
        def make() -> Any:  # 3-D products of 740 x 740 x 741 that pad (rows of 741 or 740
            # halves, 742 or 741 apart: copied 2 bytes a piece): batches, a batch of one, a 2-D
            # operand, an expanded one (copied per matrix)
            a2 = _r(740, 742, dtype=torch.float16)[:, :741]
            b3 = _r(2, 740, 742, dtype=torch.float16)[..., :741].transpose(1, 2)  # column-major
            a, b = {"both": (_r(2, 740, 742, dtype=torch.float16)[..., :741], b3),
                    "a batch of 1": (a2.unsqueeze(0), b3),
                    "b 2-D": (_r(2, 740, 742, dtype=torch.float16)[..., :741],
                              _r(741, 741, dtype=torch.float16)[:, :740]),
                    "a expanded": (a2.expand(2, 740, 741), b3)}[kind]
            ldb = b.stride(-1) if kind != "b 2-D" else b.stride(-2)
            assert mm.pads(740, 740, 741, (742, ldb), itemsize=2) == (True, True)
            return lambda: tc_torch.matmul(a, b), [a, b]
        return make

    return [("add", add), ("softmax 3-D", softmax_3d), ("softmax one row", softmax_one_row),
            ("softmax_backward", softmax_backward), ("layer_norm w b", layer_norm_wb),
            ("layer_norm parameters no_grad", layer_norm_parameters_no_grad),
            ("layer_norm plain", layer_norm_plain), ("layer_norm_forward", layer_norm_forward),
            ("layer_norm_backward", layer_norm_backward),
            ("layer_norm_backward db only", layer_norm_backward_db_only),
            ("cross_entropy mean", cross_entropy("mean")),
            ("cross_entropy sum", cross_entropy("sum")),
            ("cross_entropy none", cross_entropy("none")),
            ("cross_entropy_backward", cross_entropy_backward), ("transpose", transpose),
            ("matmul", matmul(False, False)), ("matmul a^T", matmul(True, False)),
            ("matmul b^T", matmul(False, True)), ("matmul a^T b^T", matmul(True, True)),
            ("matmul a^T, a copied first", matmul_copied_first("a")),
            ("matmul a^T, b copied first", matmul_copied_first("b")),
            ("matmul row slice", matmul_row_slice),
            *((f"matmul batched, {kind}", matmul_batched(kind))
              for kind in ("both", "b 2-D", "a 2-D", "a batch of 1", "a expanded", "half")),
            ("matmul padded", matmul_padded(False)), ("matmul padded a^T", matmul_padded(True)),
            *((f"matmul padded batched, {kind}", matmul_padded_batched(kind))
              for kind in ("both", "a batch of 1", "b 2-D", "a expanded"))]


CASES = _cases()


@pytest.mark.parametrize("make", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_fast_path_launches_what_the_general_path_launches(
        gpu: FakeGpu, make: Callable[[], tuple[Callable[[], object], list[torch.Tensor]]]) -> None:
    call, inputs = make()
    general = call()
    first = _normalized(gpu.launches, inputs, general)
    assert first and gpu.device_checks and gpu.made
    gpu.launches.clear()
    checks, made = gpu.device_checks, gpu.made
    fast = call()
    assert gpu.device_checks == checks and gpu.made == made  # the fast path was taken
    assert _normalized(gpu.launches, inputs, fast) == first
    assert _layout(fast) == _layout(general)
    gpu.launches.clear()  # (a third call: matmul's fast path launches from its plan now)
    again = call()
    assert _normalized(gpu.launches, inputs, again) == first and _layout(again) == _layout(general)


def test_batches_of_one_copied_first_take_the_general_path(gpu: FakeGpu) -> None:
    # tf32 A^T B of 3-D batches of one: matmul_out copies A K-contiguous (a transpose launch);
    # the fast path leaves such products to it, every call alike
    a, b = _r(1, 16, 8).transpose(1, 2), _r(1, 16, mm.TRANSPOSE_FIRST_MIN + 6)
    assert mm._fast_mm(a, b, "tf32") is None
    results = [tc_torch.matmul(a, b, precision="tf32") for _ in range(2)]
    kernels = [key[1] for key, _, _ in gpu.launches]  # type: ignore[index]
    assert kernels == ["transpose", "matmul"] * 2 and gpu.device_checks >= 2
    assert _layout(results[0]) == _layout(results[1])


def test_layer_norm_backward_fast_path_partial_sums(gpu: FakeGpu) -> None:
    # dw's and db's partial sums: one allocation of [2, G, N] in both paths (scratch pointers,
    # which the comparison above only sees as "new")
    dy, x, w, mean, rstd = _r(60, 24), _r(60, 24), _r(24), _r(60), _r(60)
    for _ in range(2):
        ln.layer_norm_backward(dy, x, 24, w, True, mean, rstd, True, True, True)
    (key, general, grid), _, (_, fast, _), _ = gpu.launches
    g = grid[0]
    for args in (general, fast):
        dwp, dbp = args[6], args[7]
        assert type(dwp) is int and type(dbp) is int and dbp - dwp == g * 24 * 4


def test_fast_paths_keep_the_general_errors(gpu: FakeGpu) -> None:
    x, w, t = _r(4, 16), _r(16), torch.randint(0, 16, (4,))
    tc_torch.softmax(x), tc_torch.add(x, x), tc_torch.layer_norm(x, 16, w, w)
    tc_torch.cross_entropy(x, t), tc_torch.transpose(x), tc_torch.matmul(x, x.t())
    x3 = x.reshape(2, 2, 16)
    tc_torch.matmul(x3, x3.transpose(1, 2))  # (a batched product's fast path warm too)
    launches = len(gpu.launches)
    with pytest.raises(ValueError, match="last dimension only"):
        tc_torch.softmax(x, dim=0)
    with pytest.raises(TypeError, match="dim must be an int"):
        tc_torch.softmax(x, dim=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype int32 is not supported"):
        tc_torch.softmax(x.int())
    with pytest.raises(ValueError, match="different shapes"):
        tc_torch.add(x, x[:, :8].contiguous())
    with pytest.raises(TypeError, match="different dtypes"):
        tc_torch.add(x, x.double())
    with pytest.raises(ValueError, match="weight must have shape"):
        tc_torch.layer_norm(x, 16, w[:8].contiguous())
    with pytest.raises(TypeError, match="bias has dtype"):
        tc_torch.layer_norm(x, 16, w, w.double())
    with pytest.raises(ValueError, match="eps must be a non-negative number"):
        tc_torch.layer_norm(x, 16, w, w, -1.0)
    with pytest.raises(TypeError, match="weight must be a torch.Tensor"):
        tc_torch.layer_norm(x, 16, [1.0] * 16)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="trailing dimensions"):
        tc_torch.layer_norm(x, 8)
    with pytest.raises(TypeError, match="int64 class indices"):
        tc_torch.cross_entropy(x, t.int())
    with pytest.raises(ValueError, match="target must have shape"):
        tc_torch.cross_entropy(x, t[:3].contiguous())
    with pytest.raises(ValueError, match="reduction must be"):
        tc_torch.cross_entropy(x, t, reduction="max")
    with pytest.raises(TypeError, match="ignore_index must be an int"):
        tc_torch.cross_entropy(x, t, ignore_index=True)
    with pytest.raises(ValueError, match="2-D matrix"):
        tc_torch.transpose(x[None])
    with pytest.raises(ValueError, match="incompatible dimensions"):
        tc_torch.matmul(x, x[:8].contiguous())
    with pytest.raises(ValueError, match="batch sizes 2 and 3 do not broadcast"):
        tc_torch.matmul(x3, torch.randn(3, 16, 2))
    with pytest.raises(ValueError, match="incompatible dimensions"):
        tc_torch.matmul(x3, x3)
    with pytest.raises(ValueError, match="2-D matrices or 3-D batches"):
        tc_torch.matmul(x3[None], x3.transpose(1, 2)[None])
    with pytest.raises(ValueError, match="precision must be"):
        tc_torch.matmul(x, x, precision="fast")
    with pytest.raises(ValueError, match="precision='tf32' applies to float32"):
        tc_torch.matmul(x.half(), x.half(), precision="tf32")
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        tc_torch.softmax([1.0])  # type: ignore[arg-type]
    assert len(gpu.launches) == launches


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_fast_paths_refuse_sparse_tensors_by_name(gpu: FakeGpu) -> None:
    """A sparse tensor (no strides, no is_contiguous) in any argument of a warm fast path gets the
    general path's error naming its layout, not torch's RuntimeError from inside the fast path."""
    x, w, t = _r(4, 16), _r(16), torch.randint(0, 16, (4,))
    y, mean, rstd, dloss, lse = _r(4, 16), _r(4), _r(4), _r(4), _r(4)
    s = x.to_sparse_csr()
    calls: list[Callable[[torch.Tensor], object]] = [
        lambda v: tc_torch.softmax(v), lambda v: sm.softmax_backward(v, y),
        lambda v: sm.softmax_backward(y, v), lambda v: tc_torch.add(v, x),
        lambda v: tc_torch.add(x, v), lambda v: tc_torch.layer_norm(v, 16, w, w),
        lambda v: ln.layer_norm_backward(v, x, 16, w, True, mean, rstd, True, True, True),
        lambda v: ln.layer_norm_backward(y, v, 16, w, True, mean, rstd, True, True, True),
        lambda v: tc_torch.cross_entropy(v, t), lambda v: ce.cross_entropy_backward(dloss, v, t, lse, -100),
        lambda v: tc_torch.transpose(v), lambda v: tc_torch.matmul(v, x.t()),
        lambda v: tc_torch.matmul(x.t().contiguous(), v)]
    for call in calls:
        call(x)  # (warm: the fast path is taken by the next call of the same kind)
        call(x)
    launches = len(gpu.launches)
    for call in calls:
        with pytest.raises(TypeError, match="layout torch.sparse_csr"):
            call(s)
    # a sparse (COO) weight or bias of layer_norm is refused the same way
    for weight, bias in ((w.to_sparse(), w), (w, w.to_sparse())):
        with pytest.raises(TypeError, match="layout torch.sparse_coo"):
            tc_torch.layer_norm(x, 16, weight, bias)
    assert len(gpu.launches) == launches


def test_fast_paths_leave_tensors_that_need_gradients_to_autograd(gpu: FakeGpu) -> None:
    x = _r(4, 16).requires_grad_()
    tc_torch.softmax(x.detach())  # warm
    y = tc_torch.softmax(x)
    assert y.grad_fn is not None
    w = torch.nn.Parameter(_r(16))
    tc_torch.layer_norm(x.detach(), 16, w.detach())
    assert tc_torch.layer_norm(x.detach(), 16, w).grad_fn is not None
    with torch.no_grad():
        assert tc_torch.layer_norm(x, 16, w).grad_fn is None


def test_layer_norm_without_grad_mode_matches_with_it() -> None:
    # on the interpreter: parameters that require gradients, used under torch.no_grad()
    torch.manual_seed(3)
    norm = torch.nn.LayerNorm(20, dtype=torch.float64)
    torch.nn.init.normal_(norm.weight)
    torch.nn.init.normal_(norm.bias)
    x = torch.randn(6, 20, dtype=torch.float64)
    with torch.no_grad():
        got = tc_torch.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
    assert got.grad_fn is None
    ref = tc_torch.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
    assert ref.grad_fn is not None and torch.equal(got, ref.detach())
    torch.testing.assert_close(got, F.layer_norm(x, (20,), norm.weight, norm.bias, norm.eps))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_cross_entropy_mean_divides_by_the_rows_not_ignored(dtype: torch.dtype) -> None:
    torch.manual_seed(4)
    x = torch.randn(7, 12).to(dtype)
    t = torch.randint(0, 12, (7,))
    t[[1, 5]] = 3
    loss = ce.cross_entropy_forward(x, t, 3)[0]
    expected = (loss.sum() / (t != 3).sum().to(loss.dtype)).to(dtype)
    got = tc_torch.cross_entropy(x, t, ignore_index=3)
    assert got.dtype == dtype and torch.equal(got, expected)


def test_matmul_fast_path_copies_the_operand_the_general_path_copies(gpu: FakeGpu) -> None:
    # tf32 A^T B on sm_90 (faked): both paths launch the transpose kernel, then the matmul kernel
    # of the layout the copy makes (A row-major: neither operand transposed)
    a, b = _r(16, 8).t(), _r(16, mm.TRANSPOSE_FIRST_MIN)
    for _ in range(2):
        tc_torch.matmul(a, b, precision="tf32")
    kernels = [key[:2] + (dict(key[2]).get("USE_A"),) for key, _, _ in gpu.launches]  # type: ignore[index]
    assert kernels == [("transpose", "transpose", None), ("matmul", "matmul", "a")] * 2


def test_matmul_fast_path_plans_each_layout_it_reads_in_place(gpu: FakeGpu,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path keeps the launch it derived for a layout (shapes, strides, dtypes, device,
    precision) whose operands it reads in place, and a later call of that layout launches from
    the plan alone; any other layout (here: A column-major, B of another dtype, another
    precision) is derived for itself, and a plan whose kernel is no longer chosen is not used."""
    a, b = _r(24, 40), _r(40, 50)
    for _ in range(2):  # (the general path, then the fast path's first derivation)
        tc_torch.matmul(a, b)
    assert len(mm._PLANS) == 1
    expected = gpu.launches[-1]
    derived: list[object] = []
    first = mm._fast_mm_first

    def counting(*args: Any) -> Any:
        derived.append(args[4][:4])
        return first(*args)

    monkeypatch.setattr(mm, "_fast_mm_first", counting)
    gpu.launches.clear()
    c = tc_torch.matmul(a, b)
    assert derived == [] and c.shape == (24, 50)
    assert gpu.launches == [(expected[0], (a.data_ptr(), b.data_ptr(), c.data_ptr()) + expected[1][3:],
                             expected[2])]
    # other layouts (A column-major of the same shape, B in float64, tf32) are derived for
    # themselves
    at = _r(40, 24).t()
    for x, y, precision in ((at, b, "ieee"), (a, b.double(), "ieee"), (a, b, "tf32")):
        derived.clear()
        got = mm._fast_mm(x, y, precision)
        assert derived == [(x.shape, y.shape, x.stride(), y.stride())]
        assert got is None  # (no kernel chosen for these yet: the general path's to do)
    tc_torch.matmul(at, b)  # (the general path chooses its kernel: A transposed)
    tc_torch.matmul(at, b)
    launch = gpu.launches[-1]
    assert launch[1][6] == 24  # lda: A column-major, 24 apart
    # a plan whose kernel is no longer chosen: derived again, and the general path decides
    monkeypatch.setattr(mm, "_KERNELS", {})
    derived.clear()
    assert mm._fast_mm(a, b, "ieee") is None and len(derived) == 1


def test_matmul_fast_path_plans_no_copies(gpu: FakeGpu) -> None:
    """Layouts the fast path copies first (rows padded, a tf32 operand made K-contiguous) get no
    plan: their copies are new tensors each call."""
    padded = _r(740, 740, dtype=torch.float16), _r(740, 740, dtype=torch.float16)
    copied = _r(16, 8).t(), _r(16, mm.TRANSPOSE_FIRST_MIN)
    for _ in range(3):
        tc_torch.matmul(*padded)
        tc_torch.matmul(*copied, precision="tf32")
    assert mm._PLANS == {}


def test_matmul_backward_launches_from_its_plan(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2-D product's backward pass, once both of its gradients were launched from _PLANS, keeps
    them as one plan (`_BACKWARD_PLANS`) and launches dA = dC B^T and dB = A^T dC from it alone:
    the same launches as before; a backward asking for one gradient has a plan of its own; a
    plan whose kernels are no longer chosen is not used."""
    a, b, dc = _r(24, 40).requires_grad_(), _r(40, 50).requires_grad_(), _r(24, 50)

    def step(x: torch.Tensor, y: torch.Tensor) -> list[Call]:
        return _training_step(gpu, x, y, dc)

    step(a, b)  # (the general path chooses the kernels)
    derived = step(a, b)  # (the fast path derives the launches: _PLANS, then the backward's plan)
    assert len(derived) == 3 and len(mm._BACKWARD_PLANS) == 1
    gradients = mm._gradients
    monkeypatch.setattr(mm, "_gradients", None)  # (a planned backward does not get here)
    assert step(a, b) == derived
    monkeypatch.setattr(mm, "_gradients", gradients)
    # only dB wanted: another layout of the backward, planned for itself
    a_fixed = a.detach()
    for _ in range(3):
        only_b = step(a_fixed, b)
    assert len(mm._BACKWARD_PLANS) == 2 and len(only_b) == 2
    (key, args, grid), (key2, args2, grid2) = only_b[1], derived[2]  # (dB's launch, as in the full
    assert (key, args[:2], args[3:], grid) == (key2, args2[:2], args2[3:], grid2)  # backward's)
    # kernels no longer chosen: the backward derives its gradients again (the general path)
    monkeypatch.setattr(mm, "_KERNELS", {})
    gpu.launches.clear()
    a.grad = b.grad = None
    c = tc_torch.matmul(a, b)
    c.backward(dc)  # type: ignore[no-untyped-call]
    assert a.grad is not None and b.grad is not None and len(gpu.launches) == 3


def _training_step(gpu: FakeGpu, a: torch.Tensor, b: torch.Tensor, dc: torch.Tensor) -> list[Call]:
    """The launches of `c = matmul(a, b); c.backward(dc)`, pointers named as _normalized does."""
    a.grad = b.grad = None
    gpu.launches.clear()
    c = tc_torch.matmul(a, b)
    c.backward(dc)  # type: ignore[no-untyped-call]
    grads = [g for g in (a.grad, b.grad) if g is not None]
    return _normalized(gpu.launches, [a, b, dc], [c, *grads])


@pytest.mark.parametrize("shapes", [((3, 24, 40), (40, 50)), ((3, 24, 40), (3, 40, 50)),
                                    ((1, 24, 40), (1, 40, 50))],
                         ids=["batch-times-matrix", "batches", "batches-of-one"])
def test_matmul_batched_backward_launches_from_its_plan(
        gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch,
        shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    """Batched backward passes whose gradients are one product each, read in place, are planned
    too: a batch times a matrix (nn.Linear's weight under a 3-D input: dB over A and dC seen as
    Z*M rows), batches of one size, a batch of one: the same launches as the unplanned pass."""
    sa, sb = shapes
    a, b = _r(*sa).requires_grad_(), _r(*sb).requires_grad_()
    dc = _r(max(sa[0], sb[0] if len(sb) == 3 else 1), 24, 50)
    _training_step(gpu, a, b, dc)  # (the general path chooses the kernels)
    derived = _training_step(gpu, a, b, dc)
    assert len(derived) == 3 and len(mm._BACKWARD_PLANS) == 1
    monkeypatch.setattr(mm, "_gradients", None)  # (a planned backward does not get here)
    assert _training_step(gpu, a, b, dc) == derived
    assert a.grad is not None and a.grad.shape == a.shape and b.grad is not None \
        and b.grad.shape == b.shape


@pytest.mark.parametrize("shapes", [((1, 24, 40), (3, 40, 50)), ((24, 40), (3, 40, 50)),
                                    ((3, 24, 40), (1, 40, 50))],
                         ids=["a-batch-of-one", "a-matrix", "b-batch-of-one"])
def test_matmul_backward_not_planned_where_gradients_are_reshaped(
        gpu: FakeGpu, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    """A gradient summed over the other operand's batch, made from reshaped copies, or of another
    shape than its operand (a batch of one's dB made as a matrix) gets no backward plan: each
    pass computes it again, in the operands' shapes."""
    a, b = _r(*shapes[0]).requires_grad_(), _r(*shapes[1]).requires_grad_()
    dc = _r(3, 24, 50)
    for _ in range(3):
        _training_step(gpu, a, b, dc)
    assert mm._BACKWARD_PLANS == {}
    assert a.grad is not None and a.grad.shape == a.shape and b.grad is not None \
        and b.grad.shape == b.shape


def test_matmul_forward_with_a_plan_skips_the_checks(gpu: FakeGpu,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With gradients wanted, a layout launched before from a plan goes straight to autograd's
    Function (the general path's checks passed for it then): the same launches; anything else is
    still checked (a bad precision, mixed dtypes)."""
    a, b, dc = _r(24, 40).requires_grad_(), _r(40, 50).requires_grad_(), _r(24, 50)
    _training_step(gpu, a, b, dc)
    derived = _training_step(gpu, a, b, dc)
    check = mm._check
    monkeypatch.setattr(mm, "_check", None)  # (a planned forward does not get here)
    assert _training_step(gpu, a, b, dc) == derived
    with pytest.raises(TypeError):  # (no plan: _check, taken away here, would be called)
        tc_torch.matmul(a, b.double())
    monkeypatch.setattr(mm, "_check", check)
    with pytest.raises(ValueError, match="precision must be"):
        tc_torch.matmul(a, b, precision="fp8")
    with pytest.raises(TypeError, match="different dtypes"):
        tc_torch.matmul(a, b.double())
    monkeypatch.setattr(mm, "_KERNELS", {})  # (its kernel no longer chosen: checked again)
    checks = gpu.device_checks
    tc_torch.matmul(a, b)
    assert gpu.device_checks > checks
