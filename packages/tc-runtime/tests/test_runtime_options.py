"""Defines, the opt object of grid callables, grid validation, configs and helpers."""

from __future__ import annotations

import pytest

import tc_runtime as tc
from tc_runtime.kernel import _expand_configs, parse_device
from tc_runtime.options import Options, normalize_defines, normalize_grid

OPT = Options({"BLOCK": "1024", "TYPE": "float", "SCALE": "0.5"}, 4, 3)


def test_helpers() -> None:
    assert [tc.cdiv(n, 4) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]
    assert [tc.next_power_of_2(n) for n in (0, 1, 2, 3, 781, 1024, 1025)] == [1, 1, 2, 4, 1024,
                                                                                1024, 2048]
    with pytest.raises(ValueError, match="divisor must be positive"):
        tc.cdiv(3, 0)


def test_defines_to_text() -> None:
    fixed, axes = normalize_defines({"BLOCK": 1024, "TYPE": "float", "ON": True, "S": 0.5,
                                     "T": "torch.float16", "TM": [32, 64]})
    assert fixed == {"BLOCK": "1024", "TYPE": "float", "ON": "1", "S": "0.5", "T": "half"}
    assert axes == {"TM": ["32", "64"]}
    with pytest.raises(TypeError, match="not a C identifier"):
        normalize_defines({"1X": 1})
    with pytest.raises(TypeError, match="define 'X': value None"):
        normalize_defines({"X": None})
    with pytest.raises(ValueError, match="must not be empty"):
        normalize_defines({"X": []})


def test_numpy_scalars_are_defines_as_their_python_values() -> None:
    import numpy as np

    fixed, axes = normalize_defines({"BLOCK": np.int64(8), "S": np.float32(0.5), "B": np.bool_(True),
                                     "INF": np.float32("inf"), "TM": [np.int32(32), 64]})
    assert fixed == {"BLOCK": "8", "S": "0.5", "B": "1", "INF": "F32_INFINITY"}
    assert axes == {"TM": ["32", "64"]}
    assert normalize_defines({"T": np.dtype("float16")})[0] == {"T": "half"}


def test_opt_attributes() -> None:
    assert OPT.BLOCK == 1024 and isinstance(OPT.BLOCK, int)
    assert OPT.TYPE == "float"
    assert OPT.SCALE == 0.5
    assert OPT.num_warps == 4 and OPT.num_stages == 3
    assert OPT.d("BLOCK") == 1024
    with pytest.raises(AttributeError, match="opt has no attribute 'TM': the kernel's defines are "
                                             "BLOCK, SCALE, TYPE"):
        _ = OPT.TM


def test_grid_forms_and_limits() -> None:
    assert normalize_grid((5,), OPT) == (5, 1, 1)
    assert normalize_grid(7, OPT) == (7, 1, 1)
    assert normalize_grid([2, 3], OPT) == (2, 3, 1)
    assert normalize_grid(lambda o: (tc.cdiv(4096, o.BLOCK),), OPT) == (4, 1, 1)
    assert normalize_grid((0, 4), OPT) == (0, 4, 1)
    with pytest.raises(ValueError, match="1 to 3 dimensions, got 4"):
        normalize_grid((1, 1, 1, 1), OPT)
    with pytest.raises(ValueError, match="1 to 3 dimensions, got 0"):
        normalize_grid((), OPT)
    with pytest.raises(ValueError, match="grid dimension x of 'add' is negative: -1"):
        normalize_grid((-1,), OPT, kernel="add")
    with pytest.raises(ValueError, match="grid dimension y .* above the CUDA limit of 65535"):
        normalize_grid((1, 65536), OPT)
    with pytest.raises(TypeError, match="must be an int, got 2.5"):
        normalize_grid((2.5,), OPT)
    with pytest.raises(TypeError, match="needs a grid"):
        normalize_grid(None, OPT)
    with pytest.raises(TypeError, match="must be a tuple of 1 to 3 ints"):
        normalize_grid(lambda o: "abc" if False else object(), OPT)


def test_configs_and_autotune_axes() -> None:
    configs = _expand_configs({"TYPE": "float"}, {"TM": ["32", "64"]}, 4, 3, None)
    assert [c.defines for c in configs] == [{"TYPE": "float", "TM": "32"},
                                            {"TYPE": "float", "TM": "64"}]
    c = tc.config(defines={"TM": 128}, num_warps=8)
    configs = _expand_configs({"TYPE": "float", "TM": "32"}, {}, 4, 3, [c])
    assert configs[0].defines == {"TYPE": "float", "TM": "128"} and configs[0].num_warps == 8
    with pytest.raises(ValueError, match="num_warps must be one of"):
        tc.config(num_warps=3)
    assert tc.config(num_warps=12).num_warps == 12  # (three warpgroups)
    with pytest.raises(TypeError, match="single values"):
        tc.config(defines={"TM": [1, 2]})


def test_cpu_kernel_picks_first_value_of_a_tuning_axis() -> None:
    k = tc.kernel("__global__ void f(int n) {}", device="cpu", defines={"BLOCK": [128, 256]})
    assert k.opt.BLOCK == 128
    assert len(k.configs) == 2
    with pytest.raises(ValueError, match="num_warps"):
        tc.kernel("__global__ void f(int n) {}", device="cpu", num_warps=5)
    with pytest.raises(TypeError, match="autotune_key must be a list"):
        tc.kernel("__global__ void f(int n) {}", device="cpu", autotune_key="n")


def test_parse_device() -> None:
    class FakeTorchDevice:
        type = "cuda"
        index = 1

    assert parse_device("cpu") == ("cpu", None)
    assert parse_device("cuda:3") == ("cuda", 3)
    assert parse_device("cuda") == ("cuda", 0)
    assert parse_device(2) == ("cuda", 2)
    assert parse_device(FakeTorchDevice()) == ("cuda", 1)
    with pytest.raises(ValueError, match="device must be"):
        parse_device(None)
