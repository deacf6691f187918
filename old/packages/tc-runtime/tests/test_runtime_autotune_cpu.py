"""Auto-tuning on the CPU interpreter: configurations are run from the same inputs and must agree."""

from __future__ import annotations

import numpy as np
import pytest

import tc_runtime as tc

ACC_SRC = """
__global__ void acc(float* z, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(z + off) + 1;
}
"""

WRONG_SRC = """
__global__ void fill(float* z, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = BLOCK;
}
"""


def test_configs_agree_and_the_call_runs_once(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    z = np.zeros(40, dtype=np.float32)
    k = tc.kernel(ACC_SRC, device="cpu", defines={"BLOCK": [8, 16, 3]},
                  autotune_configs=[tc.config(num_warps=2), tc.config(num_warps=4)])
    assert len(k.configs) == 6
    k(z, 40, grid=lambda opt: (tc.cdiv(40, opt.BLOCK),))
    np.testing.assert_array_equal(z, 1)  # five configurations ran, the buffer saw one
    err = capsys.readouterr().err
    assert "same results" in err and "skipped config(defines={'BLOCK': '3'}" in err
    assert k.opt.BLOCK == 8 and k.num_warps == 2
    k(z, 40, grid=lambda opt: (tc.cdiv(40, opt.BLOCK),))  # same key: no new check
    np.testing.assert_array_equal(z, 2)
    assert "same results" not in capsys.readouterr().err
    k(z, 20, grid=lambda opt: (tc.cdiv(20, opt.BLOCK),))  # a new value of N: checked again
    assert "same results" in capsys.readouterr().err
    np.testing.assert_array_equal(z[:20], 3)
    np.testing.assert_array_equal(z[20:], 2)


def test_configs_that_disagree_are_reported() -> None:
    z = np.zeros(32, dtype=np.float32)
    k = tc.kernel(WRONG_SRC, device="cpu", defines={"BLOCK": [8, 16]})
    with pytest.raises(tc.TcRuntimeError, match=r"compute different results.*BLOCK': '16'.*"
                                                r"differs from .*BLOCK': '8'.* in 'z'"):
        k(z, 32, grid=lambda opt: (tc.cdiv(32, opt.BLOCK),))
    np.testing.assert_array_equal(z, 8)  # the first configuration's result is kept


def test_skip_autotuning_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_SKIP_AUTOTUNING", "1")
    z = np.zeros(32, dtype=np.float32)
    k = tc.kernel(WRONG_SRC, device="cpu", defines={"BLOCK": [16, 8]})
    k(z, 32, grid=lambda opt: (tc.cdiv(32, opt.BLOCK),))
    np.testing.assert_array_equal(z, 16)


def test_autotune_key_must_name_an_argument() -> None:
    k = tc.kernel(ACC_SRC, device="cpu", defines={"BLOCK": [8, 16]}, autotune_key=["M"])
    with pytest.raises(ValueError, match=r"autotune_key: 'M' is not a valid argument name of "
                                         r"acc\(z: float\*, N: int\)"):
        k(np.zeros(8, np.float32), 8, grid=(1,))


def test_autotune_vals_spelling_and_opt() -> None:
    k = tc.kernel(ACC_SRC, device="cpu", autotune_vals=[tc.config({"BLOCK": 16}, num_warps=8)])
    assert k.opt.BLOCK == 16 and k.num_warps == 8
    with pytest.raises(TypeError, match="not both"):
        tc.kernel(ACC_SRC, device="cpu", autotune_vals=[], autotune_configs=[])


TWO_SRC = """
__global__ void first(float* z, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    *?(off < N)(z + off) = 1;
}

__global__ void second(float* z, float* x, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    *?(off < N)(z + off) = *?(off < N)(x + off) * 2;
}
"""


def test_name_picks_the_kernel_on_cpu() -> None:
    x = np.arange(20, dtype=np.float32)
    z = np.zeros(20, dtype=np.float32)
    k = tc.kernel(TWO_SRC, device="cpu", defines={"BLOCK": 8}, name="second")
    k(z, x, 20, grid=lambda opt: (tc.cdiv(20, opt.BLOCK),))
    np.testing.assert_array_equal(z, 2 * x)
    assert k.info["name"] == "second" and "second" in k.asm("ir")
    k1 = tc.kernel(TWO_SRC, device="cpu", defines={"BLOCK": 8})
    k1(z, 20, grid=(3,))
    np.testing.assert_array_equal(z, 1)
    with pytest.raises(ValueError, match="only 'ir'"):
        k1.asm("ptx")


def test_errors_on_cpu() -> None:
    z = np.zeros(16, dtype=np.float32)
    k = tc.kernel(ACC_SRC, device="cpu", defines={"BLOCK": 8})
    with pytest.raises(TypeError, match=r"acc\(z: float\*, N: int\) takes 2 arguments, got 1"):
        k(z, grid=(1,))
    with pytest.raises(TypeError, match=r"argument 1 \('z'\) .* must be a pointer"):
        k(1.5, 16, grid=(1,))
    with pytest.raises(TypeError, match=r"argument 2 \('N'\) .* must be an integer"):
        k(z, "16", grid=(1,))
    with pytest.raises(ValueError, match="grid dimension x of 'acc' is negative"):
        k(z, 16, grid=(-2,))
    with pytest.raises(ValueError, match="above the CUDA limit"):
        k(z, 16, grid=(1, 1 << 20))
    with pytest.raises(AttributeError, match="opt has no attribute 'TILE'"):
        k(z, 16, grid=lambda opt: (opt.TILE,))
    np.testing.assert_array_equal(z, 0)
