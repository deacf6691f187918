"""Bad inputs to the public API on the CPU interpreter: each is a clear TypeError/ValueError (or a
tc error) naming the argument, never silently wrong results or an error from deep inside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import tc_runtime as tc

ADD_SRC = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""


def _add(type_name: str = "float", **kwargs: object) -> tc.Kernel:
    return tc.kernel(ADD_SRC, device="cpu", defines={"TYPE": type_name, "BLOCK": 16},
                     **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16, object])
def test_numpy_array_of_another_dtype_is_refused(dtype: type) -> None:
    # (before: the interpreter read the array's bytes as floats and computed garbage silently)
    k = _add()
    z = np.zeros(40, np.float32)
    x: np.ndarray[Any, Any] = np.arange(40).astype(dtype)
    with pytest.raises(TypeError, match=rf"argument 2 \('x'\) of add\(.*\) holds {np.dtype(dtype)}"
                                        r" elements, but the kernel reads it as float\*"):
        k(z, x, np.ones(40, np.float32), 40, grid=(3,))
    np.testing.assert_array_equal(z, 0)


def test_tensor_of_another_dtype_is_refused() -> None:
    k = _add("half")
    with pytest.raises(TypeError, match=r"argument 1 \('z'\) .* holds bfloat16 elements, but the "
                                        r"kernel reads it as half\*; convert it to float16"):
        t = torch.zeros(20, dtype=torch.bfloat16)
        k(t, torch.zeros(20, dtype=torch.float16), torch.zeros(20, dtype=torch.float16), 20,
          grid=(2,))


@pytest.mark.parametrize("type_name,arrays", [
    ("float", [np.zeros(20, np.float32), torch.zeros(20)]),
    ("int", [np.zeros(20, np.int32), np.zeros(20, np.uint32), torch.zeros(20, dtype=torch.int32)]),
    ("bf16", [torch.zeros(20, dtype=torch.bfloat16), np.zeros(20, np.uint16)]),
    ("bool", [np.zeros(20, np.bool_), np.zeros(20, np.uint8), torch.zeros(20, dtype=torch.bool)]),
    ("char", [np.zeros(20, np.int8), np.zeros(20, np.float32)]),  # (char* views any memory)
])
def test_matching_element_types_are_accepted(type_name: str, arrays: list[object]) -> None:
    k = _add(type_name)
    for a in arrays:
        k(a, a, a, 20, grid=(2,))


def test_read_only_output_names_the_argument() -> None:
    k = _add()
    z = np.zeros(40, np.float32)
    z.flags.writeable = False
    x = np.ones(40, np.float32)
    with pytest.raises(ValueError, match=r"stores to read-only memory: argument 1 \('z'\) of "
                                         r"add\(.*\) is a read-only array"):
        k(z, x, x, 40, grid=(3,))
    k(x, z, z, 40, grid=(3,))  # reading one is fine
    np.testing.assert_array_equal(x, 0)


def test_autotune_key_is_checked_with_one_configuration() -> None:
    # (before: ignored on the CPU when there was nothing to tune; the GPU path refused it)
    k = _add(autotune_key=["M"])
    z = np.zeros(40, np.float32)
    with pytest.raises(ValueError, match=r"autotune_key: 'M' is not a valid argument name of add"):
        k(z, z, z, 40, grid=(3,))


def test_cpu_tuner_skips_configurations_that_change_the_arguments() -> None:
    # (before: the double configuration read float32 arrays as float64, out of bounds)
    k = tc.kernel(ADD_SRC, device="cpu", defines={"TYPE": ["float", "double"], "BLOCK": 16})
    x = np.arange(40, dtype=np.float32)
    z = np.zeros(40, np.float32)
    k(z, x, x, 40, grid=(3,))
    np.testing.assert_array_equal(z, 2 * x)
    assert k.opt.TYPE == "float"


@pytest.mark.parametrize("grid", [{3: 1}, {3}, frozenset({3})])
def test_grid_that_is_not_ordered_is_refused(grid: object) -> None:
    k = _add()
    z = np.zeros(40, np.float32)
    with pytest.raises(TypeError, match="grid of 'add' must be a tuple of 1 to 3 ints"):
        k(z, z, z, 40, grid=grid)
    with pytest.raises(TypeError, match="grid of 'add' must be a tuple of 1 to 3 ints"):
        k(z, z, z, 40, grid=lambda opt: grid)


def test_bad_stream_is_refused_on_cpu_too() -> None:
    k = _add()
    z = np.zeros(40, np.float32)
    with pytest.raises(TypeError, match="stream must be a raw handle"):
        k(z, z, z, 40, grid=(3,), stream="default")
    k(z, z, z, 40, grid=(3,), stream=0)  # (the interpreter has no streams: any handle will do)


def test_negative_device_index() -> None:
    with pytest.raises(ValueError, match="the index after ':' must be a non-negative number"):
        tc.kernel(ADD_SRC, device="cuda:-1", defines={"TYPE": "float", "BLOCK": 16})


def test_save_and_load_refuse_wrong_objects(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="save writes a KernelBinary"):
        tc.save("not a kernel", tmp_path / "k.json")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="load takes a path"):
        tc.load(None)  # type: ignore[arg-type]
    bad = tmp_path / "k.json"
    bad.write_text(json.dumps({"name": "add", "arch": "sm_90", "signature": [], "num_warps": 4,
                               "cubin": 5}))
    with pytest.raises(ValueError, match="not a valid tc kernel file: 'cubin' is not a base64 text"):
        tc.load(bad)
