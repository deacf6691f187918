"""The spec's kernels, from source through tc_lang and the lowering, run by the interpreter and
checked against numpy; their IR verifies and its text round-trips."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tc_ir.interpreter import Interpreter, OutOfBoundsError, interpret
from tc_ir.ops import Module
from tc_ir.testing import lower_source

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"


def compile_kernel(name: str, defines: dict[str, Any]) -> tuple[Module, str]:
    src = (KERNELS / name).read_text()
    return lower_source(src, defines, filename=name), src


@pytest.mark.parametrize(("ty", "dtype"), [("float", np.float32), ("half", np.float16)])
def test_vector_add(ty: str, dtype: Any) -> None:
    module, src = compile_kernel("vector_add.tc", {"TYPE": ty, "SIZE": 128})
    n = 128 * 9
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    c = np.zeros(n, dtype)
    interpret(module, [n, a, b, c], (n // 128,), source=src)
    np.testing.assert_array_equal(c, a + b)


def test_vector_add_out_of_bounds_names_the_source_line() -> None:
    module, src = compile_kernel("vector_add.tc", {"TYPE": "float", "SIZE": 128})
    n = 1000  # not a multiple of SIZE: the unmasked kernel reads past the end
    a, b, c = (np.zeros(n, np.float32) for _ in range(3))
    with pytest.raises(OutOfBoundsError) as info:
        interpret(module, [n, a, b, c], ((n + 127) // 128,), source=src)
    err = info.value
    text = str(err)
    assert "vector_add.tc:5:" in text and "*(c + off) = *(a + off) + *(b + off)" in text
    assert err.program_id == (7,) and err.index == (104,)
    assert "program (7,)" in text and "element [104] of the [128] tile" in text


@pytest.mark.parametrize("name", ["softmax.tc", "softmax_spaced.tc"])
def test_softmax_1823x781(name: str) -> None:
    module, src = compile_kernel(name, {"BLOCK": 1024})
    M, N = 1823, 781
    x = np.random.default_rng(2).standard_normal((M, N)).astype(np.float32) * 4
    y = np.zeros_like(x)
    run = Interpreter(module, source=src)
    t0 = time.perf_counter()
    run([y, x, N, N, M, N], (M,))
    elapsed = time.perf_counter() - t0
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert elapsed < 10.0


def test_matmul_512x768x896_f16() -> None:
    M, N, K = 512, 768, 896
    MB, NB, KB = 32, 64, 32  # 16 block rows: two groups of MAX_GROUP_SIZE (8) in the pid re-ordering
    module, src = compile_kernel("matmul_tutorial.tc", {"TYPE": "half", "MB": MB, "NB": NB, "KB": KB})
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    t0 = time.perf_counter()
    interpret(module, [a, b, c, M, N, K, K, N, N], ((M // MB) * (N // NB),), source=src)
    elapsed = time.perf_counter() - t0
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-3, atol=5e-2)
    assert elapsed < 10.0


def _grouped_tile(pid: int, grid_m: int, grid_n: int, group: int = 8) -> tuple[int, int]:
    """The (pid_m, pid_n) tile of program `pid` under the spec matmul's grouped ordering (C semantics:
    division and remainder truncate, all operands are non-negative here)."""
    width = group * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * group, group)
    return group_id * group + pid % group_size, (pid % width) // group_size


def test_matmul_tutorial_grouped_ordering_with_a_partial_group_f16() -> None:
    M, N, K = 200, 40, 48  # 13 block rows: a group of 8 then a partial group of 5; M, N ragged
    MB, NB, KB = 16, 16, 16
    module, src = compile_kernel("matmul_tutorial.tc", {"TYPE": "half", "MB": MB, "NB": NB, "KB": KB})
    run = Interpreter(module, source=src)
    grid_m, grid_n = -(-M // MB), -(-N // NB)
    rng = np.random.default_rng(8)
    # the operand loads are unmasked: A and B are padded to whole tiles, with the true strides
    a = rng.standard_normal((grid_m * MB, K)).astype(np.float16)
    b = rng.standard_normal((K, grid_n * NB)).astype(np.float16)

    def args(c: Any) -> list[Any]:
        return [a, b, c, M, N, K, K, grid_n * NB, N]

    # Program p, run after programs 0..p-1, writes exactly the tile the grouped ordering gives it,
    # clipped to the M x N output by the store mask.
    written = np.zeros((M, N), bool)
    for p in range(grid_m * grid_n):
        c = np.full((M, N), np.nan, np.float16)
        run(args(c), (p + 1,))
        now = ~np.isnan(c)
        tm, tn = _grouped_tile(p, grid_m, grid_n)
        want = np.zeros((M, N), bool)
        want[tm * MB : (tm + 1) * MB, tn * NB : (tn + 1) * NB] = True
        np.testing.assert_array_equal(now & ~written, want, err_msg=f"program {p}")
        assert not (written & want).any(), f"program {p} rewrites an earlier tile"
        written = now
    assert written.all()
    ref = a.astype(np.float32)[:M] @ b.astype(np.float32)[:, :N]
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-3, atol=2e-2)


def test_matmul_tutorial_ragged_edges_are_masked_on_store() -> None:
    M, N, K = 100, 72, 64  # M, N not multiples of the blocks; K is
    MB, NB, KB = 32, 32, 16
    module, src = compile_kernel("matmul_tutorial.tc", {"TYPE": "float", "MB": MB, "NB": NB, "KB": KB})
    rng = np.random.default_rng(4)
    # A and B padded so that the unmasked operand loads stay inside their buffers
    a = rng.standard_normal((128, K)).astype(np.float32)
    b = rng.standard_normal((K, 96)).astype(np.float32)
    c = np.full((M, N), -1.0, np.float32)
    grid = (-(-M // MB) * -(-N // NB),)
    interpret(module, [a, b, c, M, N, K, K, 96, N], grid, source=src)
    np.testing.assert_allclose(c, (a @ b)[:M, :N], rtol=1e-5, atol=1e-4)


def test_transpose_masked_odd_sizes() -> None:
    M, N = 37, 50
    TM, TN = 16, 32
    module, src = compile_kernel("transpose_masked.tc", {"TYPE": "float", "TM": TM, "TN": TN})
    x = np.random.default_rng(5).standard_normal((N, M)).astype(np.float32)  # (m, n) at m + n*ldx
    y = np.zeros((M, N), np.float32)
    interpret(module, [x, y, M, N, M, N], (-(-M // TM), -(-N // TN)), source=src)
    np.testing.assert_array_equal(y, x.T)


def test_matmul_prefetch_2d_grid() -> None:
    M, N, K = 64, 64, 96
    TM, TN, TK = 32, 32, 32
    module, src = compile_kernel("matmul_prefetch.tc", {"TYPE": "float", "TM": TM, "TN": TN, "TK": TK})
    rng = np.random.default_rng(6)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    interpret(module, [a, b, c, M, N, K, K, N, N], (M // TM, N // TN), source=src)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-4)


def _fused_defines(trans_a: bool, trans_b: bool) -> dict[str, Any]:
    d: dict[str, Any] = {"TYPE": "float", "TM": 32, "TN": 32, "TK": 16}
    if trans_a:
        d.update(USE_A="^a", STRIDE_AK="lda", STRIDE_AM=1, BROADCAST_AK=":, newaxis",
                 BROADCAST_AM="newaxis, :", SHAPE_A="TK, TM")
    else:
        d.update(USE_A="a", STRIDE_AK=1, STRIDE_AM="lda", BROADCAST_AK="newaxis, :",
                 BROADCAST_AM=":, newaxis", SHAPE_A="TM, TK")
    if trans_b:
        d.update(USE_B="^b", STRIDE_BK=1, STRIDE_BN="ldb", BROADCAST_BK="newaxis, :",
                 BROADCAST_BN=":, newaxis", SHAPE_B="TN, TK")
    else:
        d.update(USE_B="b", STRIDE_BK="ldb", STRIDE_BN=1, BROADCAST_BK=":, newaxis",
                 BROADCAST_BN="newaxis, :", SHAPE_B="TK, TN")
    return d


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("trans_a", [False, True])
def test_matmul_fused_transpositions(trans_a: bool, trans_b: bool) -> None:
    M, N, K, TK = 64, 96, 48, 16
    module, src = compile_kernel("matmul_fused_trans.tc", _fused_defines(trans_a, trans_b))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(np.float32)
    lda, ldb = (M if trans_a else K), (K if trans_b else N)
    c = np.zeros((M, N), np.float32)
    grid = (M // 32, N // 32)
    # The spec kernel pre-fetches: each iteration loads the *next* tiles of A and B, so after the
    # last iteration it reads one tile past K. On buffers of exactly K the interpreter reports
    # that read at its source line ...
    with pytest.raises(OutOfBoundsError, match=r"matmul_fused_trans.tc:2[23]:5 \(`[ab] = \*p[ab];`\)"):
        interpret(module, [a, b, c, M, N, K, lda, ldb, N], grid, source=src)
    # ... so the operands are padded with one tile (TK) of zeros along K, the strides following
    # the padded shapes; the extra tile is read but never used.
    pa = np.zeros((K + TK, M) if trans_a else (M, K + TK), np.float32)
    pb = np.zeros((N, K + TK) if trans_b else (K + TK, N), np.float32)
    if trans_a:
        pa[:K] = a
    else:
        pa[:, :K] = a
    if trans_b:
        pb[:, :K] = b
    else:
        pb[:K] = b
    plda, pldb = (M if trans_a else K + TK), (K + TK if trans_b else N)
    interpret(module, [pa, pb, c, M, N, K, plda, pldb, N], grid, source=src)
    ref = (a.T if trans_a else a) @ (b.T if trans_b else b)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)


def _within_f32_accumulation(c: Any, a: Any, b: Any) -> Any:
    """Where the f16 matrix `c` is the exact product a @ b, summed in fp32 (any order) and rounded
    once to f16: |c - exact| <= half an f16 ulp of c + K * 2^-24 * (|a| @ |b|)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 @ b64
    c64 = c.astype(np.float64)
    bound = np.spacing(np.abs(c).astype(np.float16)).astype(np.float64) / 2
    bound += a.shape[1] * 2.0**-24 * (np.abs(a64) @ np.abs(b64))
    return np.abs(c64 - exact) <= bound


@pytest.mark.parametrize("name", ["matmul.tc", "matmul_remat.tc"])
def test_spec_matmul_f16_accumulates_in_f32_and_rounds_once(name: str) -> None:
    M, N, K, TM, TN, TK = 128, 64, 256, 64, 32, 32
    module, src = compile_kernel(name, {"TYPE": "half", "TM": TM, "TN": TN, "TK": TK})
    rng = np.random.default_rng(20)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    interpret(module, [a, b, c, M, N, K, K, N, N], (M // TM, N // TN), source=src)
    # fp32 accumulation, one rounding to f16 at the store
    assert _within_f32_accumulation(c, a, b).all()
    # an f16 accumulator (rounded after every TK-step) would be visibly worse: the check above
    # tells the two apart
    acc = np.zeros((M, N), np.float16)
    for k in range(0, K, TK):
        acc = (acc.astype(np.float32) + a[:, k : k + TK].astype(np.float32) @ b[k : k + TK].astype(np.float32)
               ).astype(np.float16)
    assert not _within_f32_accumulation(acc, a, b).all()


@pytest.mark.parametrize("name", ["matmul.tc", "matmul_remat.tc"])
def test_spec_matmul_f32(name: str) -> None:
    M, N, K, TM, TN, TK = 64, 128, 192, 32, 64, 64
    module, src = compile_kernel(name, {"TYPE": "float", "TM": TM, "TN": TN, "TK": TK})
    rng = np.random.default_rng(21)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    interpret(module, [a, b, c, M, N, K, K, N, N], (M // TM, N // TN), source=src)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)


SPEC_DEFINES = json.loads((KERNELS / "defines.json").read_text())


@pytest.mark.parametrize("variant", ["NN", "NT", "TN", "TT"])
def test_matmul_fused_transpositions_f16_with_the_spec_defines(variant: str) -> None:
    d = SPEC_DEFINES["matmul_fused_trans.tc"][variant]
    trans_a, trans_b = variant[0] == "T", variant[1] == "T"
    TM, TN, TK = d["TM"], d["TN"], d["TK"]
    M, N, K = 2 * TM, 2 * TN, 3 * TK
    module, src = compile_kernel("matmul_fused_trans.tc", d)
    rng = np.random.default_rng(22)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    # stored transposed where the variant says so, padded by one tile (TK) along K for the
    # kernel's pre-fetch past the end (see test_matmul_fused_transpositions)
    pa = np.zeros((K + TK, M) if trans_a else (M, K + TK), np.float16)
    pb = np.zeros((N, K + TK) if trans_b else (K + TK, N), np.float16)
    if trans_a:
        pa[:K] = a.T
    else:
        pa[:, :K] = a
    if trans_b:
        pb[:, :K] = b.T
    else:
        pb[:K] = b
    c = np.zeros((M, N), np.float16)
    interpret(module, [pa, pb, c, M, N, K, pa.shape[1], pb.shape[1], N], (M // TM, N // TN), source=src)
    assert _within_f32_accumulation(c, a, b).all()


KERNEL_DEFINES: list[tuple[str, dict[str, Any]]] = [
    ("vector_add_basic.tc", {}),
    ("vector_add.tc", {"TYPE": "half", "SIZE": 256}),
    ("transpose.tc", {"TYPE": "half", "TM": 32, "TN": 64}),
    ("transpose_multipleof.tc", {"TYPE": "float", "TM": 32, "TN": 32}),
    ("matmul.tc", {"TYPE": "half", "TM": 64, "TN": 64, "TK": 32}),
    ("matmul_remat.tc", {"TYPE": "half", "TM": 64, "TN": 64, "TK": 32}),
    ("matmul_autotuned.tc", {"TYPE": "half", "MB": 128, "NB": 64, "KB": 32}),
    ("matmul_fused_trans.tc", _fused_defines(True, False)),
]


@pytest.mark.parametrize(("name", "defines"), KERNEL_DEFINES, ids=[k for k, _ in KERNEL_DEFINES])
def test_every_spec_kernel_verifies_and_round_trips(name: str, defines: dict[str, Any]) -> None:
    module, _ = compile_kernel(name, defines)
    Interpreter(module)  # and the interpreter accepts every op in it
