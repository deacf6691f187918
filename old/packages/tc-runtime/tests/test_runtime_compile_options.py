"""Compiler options through the runtime: fp32_dot="tf32" and precise_math reach the compiler
(seen in the PTX of an ahead-of-time build, no GPU needed), are part of the cache key, and bad
values are clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import tc_runtime as tc
from tc_runtime.build import base_key, kernel_key
from tc_runtime.options import compile_options

DOT = """
__global__ void mm(float* C, float* A, float* B) {
    int m[32] = 0 ... 32;
    int n[32] = 0 ... 32;
    int k[16] = 0 ... 16;
    float a[32, 16] = *(A + m[:, newaxis] * 16 + k[newaxis, :]);
    float b[16, 32] = *(B + k[:, newaxis] * 32 + n[newaxis, :]);
    *(C + m[:, newaxis] * 32 + n[newaxis, :]) = a @ b;
}
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path / "cache"))


def test_tf32_reaches_the_compiler() -> None:
    ieee = tc.build(DOT, arch="sm_90").ptx
    tf32 = tc.build(DOT, arch="sm_90", fp32_dot="tf32").ptx
    assert "tf32" not in ieee and "fma.rn.f32" in ieee  # exact float32 products by default
    assert "mma.sync.aligned" in tf32 and ".tf32" in tf32


def test_options_are_part_of_the_cache_key() -> None:
    keys = {kernel_key(base_key("src", "f", None, {}, compile_options(**o)), "sm_90",
                       4, 3, []) for o in ({}, {"fp32_dot": "tf32"}, {"precise_math": True}, {"tma_store": True})}
    assert len(keys) == 4
    # the defaults add nothing: kernels without options keep their earlier cache entries
    assert base_key("src", "f", None, {}, compile_options()) == base_key("src", "f",
                                                                                    None, {})


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="fp32_dot must be 'ieee' or 'tf32', got 'tf16'"):
        tc.kernel(DOT, device="cpu", fp32_dot="tf16")
    with pytest.raises(TypeError, match="precise_math must be True or False"):
        tc.kernel(DOT, device="cpu", precise_math=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tma_store must be True or False"):
        tc.kernel(DOT, device="cpu", tma_store="yes")  # type: ignore[arg-type]


def test_interpreter_accepts_the_options() -> None:
    import numpy as np

    a = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32)
    c = np.zeros((32, 32), np.float32)
    tc.kernel(DOT, device="cpu", fp32_dot="tf32")(c, a, b, grid=(1,))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)  # the reference stays exact


EXP = """
__global__ void e(float* Y, float* X) {
    int n[128] = 0 ... 128;
    *(Y + n) = exp(*(X + n));
}
"""


def test_precise_math_reaches_the_compiler() -> None:
    fast = tc.build(EXP, arch="sm_90").ptx
    precise = tc.build(EXP, arch="sm_90", precise_math=True).ptx
    assert "ex2.approx" in fast  # the language's exp is the fast one by default
    assert ".approx" not in precise


TUTORIAL = (Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels" / "matmul_tutorial.tc").read_text()


def test_tma_store_reaches_the_compiler() -> None:
    """With tma_store=True the matmul's epilogue is bulk tensor stores and the binary lists the
    destination's tensor map (which the launch encodes like the operands' maps)."""
    spec = ["divisible_by_16"] * 3 + [None] * 3 + ["divisible_by_16"] * 3
    defines = {"TYPE": "half", "MB": 128, "NB": 128, "KB": 64}
    plain = tc.build(TUTORIAL, arch="sm_90", defines=defines, specialization=spec)
    bulk = tc.build(TUTORIAL, arch="sm_90", defines=defines, specialization=spec, tma_store=True)
    assert "bulk_group" not in plain.ptx and "st.global" in plain.ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in bulk.ptx and "st.global" not in bulk.ptx
    assert len(bulk.tensor_maps) == len(plain.tensor_maps) + 1 and bulk.tensor_maps[-1]["base"] == 2
