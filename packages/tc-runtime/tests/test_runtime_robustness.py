"""Bad inputs to the public API on the CPU interpreter: each is a clear TypeError/ValueError (or a
tc error) naming the argument, never silently wrong results or an error from deep inside."""

from __future__ import annotations

import json
import os
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


SIGNS = """__global__ void k(int* o, int n, unsigned u, long l) {
  *o = n; *(o + 1) = u; *(o + 2) = l;
}"""


def test_integer_parameters_take_the_range_of_their_c_type() -> None:
    """A signed `int N` refuses 2**31 (it reached the kernel as -2**31 before: the IR's integers
    have no sign); an unsigned parameter takes 0..2**32-1 and, as C converts them, negatives."""
    k = tc.kernel(SIGNS, device="cpu")
    o = np.zeros(3, np.int32)
    k(o, -(2**31), 2**32 - 1, 2**40 + 7, grid=(1,))
    np.testing.assert_array_equal(o, [-(2**31), -1, 7])
    k(o, 2**31 - 1, -1, -(2**63), grid=(1,))
    np.testing.assert_array_equal(o, [2**31 - 1, -1, 0])
    describe = r"k\(o: int\*, n: int, u: unsigned int, l: long\)"
    for args, message in (((2**31, 0, 0), rf"argument 2 \('n'\) of {describe}: 2147483648 does not fit "
                                          r"in int \(32 bits\) \(declare it long\)"),
                          ((0, 2**32, 0), r"argument 3 \('u'\) .* 4294967296 does not fit in unsigned int"),
                          ((0, 0, 2**63), r"argument 4 \('l'\) .* does not fit in long \(64 bits\)$")):
        with pytest.raises(TypeError, match=message):
            k(o, *args, grid=(1,))


def test_unsigned_parameters_travel_in_the_kernel_metadata() -> None:
    from tc_nvptx import compile as compile_kernel

    from tc_runtime.binary import KernelBinary
    from tc_runtime.signature import Signature

    ck = compile_kernel(SIGNS, assemble_cubin=False)
    assert ck.unsigned_args == [2]
    binary = KernelBinary.from_compiled(ck)
    meta = binary.metadata()
    assert meta["unsigned_args"] == [2]
    assert KernelBinary.from_parts(meta, ck.ptx, None, {}).unsigned_args == (2,)
    # metadata written before the field: either range, as before
    old = {k: v for k, v in meta.items() if k != "unsigned_args"}
    assert KernelBinary.from_parts(old, ck.ptx, None, {}).unsigned_args is None
    assert Signature("k", ["i32"], ["n"], None).normalize([2**32 - 1]) == [-1]
    with pytest.raises(ValueError, match="unsigned_args"):
        KernelBinary.from_parts({**meta, "unsigned_args": "2"}, ck.ptx, None, {})


def test_infinite_and_nan_float_defines() -> None:
    """Python's repr of them (`inf`, `nan`) is no C literal: they become tc's built-in constants,
    and `opt` gives the floats back."""
    k = tc.kernel("__global__ void k(float* o) { *o = LO; *(o + 1) = X; *(o + 2) = HI; }", device="cpu",
                  defines={"LO": float("-inf"), "X": float("nan"), "HI": float("inf")})
    o = np.zeros(3, np.float32)
    k(o, grid=(1,))
    assert o[0] == -np.inf and np.isnan(o[1]) and o[2] == np.inf
    assert k.opt.LO == -np.inf and np.isnan(k.opt.X) and k.opt.HI == np.inf


@pytest.mark.parametrize("null_at", [0, 1])
def test_null_pointer_is_an_out_of_bounds_error_on_the_interpreter(null_at: int) -> None:
    """A raw pointer of 0 (before: ctypes read it as a fresh zeroed buffer, and stores to it
    vanished) is an error at the access, for loads and stores alike."""
    from tc_ir import OutOfBoundsError

    k = tc.kernel("__global__ void k(float* z, float* x) {\n  int r[16] = 0 ... 16;\n"
                  "  *(z + r) = *(x + r) + 1;\n}", device="cpu")
    z = np.zeros(16, np.float32)
    args: list[object] = [z, z]
    args[null_at] = 0
    with pytest.raises(OutOfBoundsError, match=r":3:.*address 0x0 is a null pointer"):
        k(*args, grid=(1,))


def test_raw_pointers_that_point_nowhere_are_errors_on_the_interpreter() -> None:
    """A made-up raw address (or a device pointer given to a CPU kernel) ended the process with a
    segmentation fault; a store into read-only memory (code) too. Both are reported at the access
    now; raw pointers into the process's own memory still work. (Where the process's mappings
    cannot be read, raw pointers are taken on trust, as documented: nothing to run there.)"""
    import ctypes

    from tc_ir import OutOfBoundsError
    from tc_ir.interpreter.host_maps import HostMaps

    if not os.path.exists("/proc/self/maps"):
        assert not HostMaps().available
        return

    k = tc.kernel("__global__ void k(float* z, float* x) {\n  int r[16] = 0 ... 16;\n"
                  "  *(z + r) = *(x + r) + 1;\n}", device="cpu")
    z, x = np.zeros(16, np.float32), np.arange(16, dtype=np.float32)
    nowhere = 0x7000_0000_0000
    with pytest.raises(OutOfBoundsError, match=r"out-of-bounds load .* address 0x700000000000 is in "
                                                r"no buffer and not readable memory"):
        k(z.ctypes.data, nowhere, grid=(1,))
    with pytest.raises(OutOfBoundsError, match=r"out-of-bounds store .* not writable memory"):
        k(nowhere, x.ctypes.data, grid=(1,))
    code = ctypes.cast(ctypes.CDLL(None).printf, ctypes.c_void_p).value
    assert code is not None
    code -= code % 64
    with pytest.raises(OutOfBoundsError, match=r"store .* not writable memory of this process"):
        k(code, x.ctypes.data, grid=(1,))
    k(z.ctypes.data, x.ctypes.data, grid=(1,))  # raw pointers to live arrays
    np.testing.assert_array_equal(z, x + 1)
    fresh = np.full(16, 5, np.float32)  # memory mapped after the first reading of the maps
    k(fresh.ctypes.data, x.ctypes.data, grid=(1,))
    np.testing.assert_array_equal(fresh, x + 1)


def test_tensor_without_a_data_pointer_names_the_argument() -> None:
    # (before: torch's RuntimeError "Cannot access data pointer ..." from inside the runtime)
    k = _add()
    z, x = torch.zeros(40), torch.ones(40)
    with pytest.raises(TypeError, match=r"argument 1 \('z'\) of add\(.*\) has no data pointer to give "
                                        r"the kernel \(RuntimeError: .*data pointer"):
        k(z.to_sparse(), x, x, 40, grid=(3,))
    tuned = tc.kernel(ADD_SRC, device="cpu", defines={"TYPE": "float", "BLOCK": [16, 32]})
    with pytest.raises(TypeError, match=r"argument 2 \('x'\) .* has no data pointer"):
        tuned(z, x.to_sparse(), x, 40, grid=(3,))  # (the CPU tuner saves the buffers first)
    k(z, x, x, 40, grid=(3,))
    assert torch.equal(z, 2 * x)


def test_a_tensor_view_is_bounded_by_its_own_elements() -> None:
    """A store past the end of `base[:50]` (before: the whole storage was registered, and it
    overwrote base[50:] without a word) is out of bounds, as for a numpy view; a strided view
    spans its elements, the tuner's saved buffers too."""
    from tc_ir import OutOfBoundsError

    base, x = torch.zeros(200), torch.rand(100)
    with pytest.raises(OutOfBoundsError, match=r"out-of-bounds store .* buffer 'z' \(50 elements"):
        _add()(base[:50], x, x, 100, grid=(7,))
    assert torch.all(base[50:] == 0)
    tuned = tc.kernel(ADD_SRC, device="cpu", defines={"TYPE": "float", "BLOCK": [16, 32]})
    with pytest.raises(OutOfBoundsError, match=r"out-of-bounds load .* buffer 'y' \(60 elements"):
        tuned(torch.zeros(100), x, torch.rand(100)[:60], 100, grid=lambda o: (tc.cdiv(100, o.BLOCK),))
    rows = torch.zeros(10, 16)
    _add()(rows[2:5].reshape(-1), x, x, 48, grid=(3,))  # (a view in the middle of its storage)
    assert torch.equal(rows[2:5].reshape(-1), 2 * x[:48]) and torch.all(rows[:2] == 0) and torch.all(rows[5:] == 0)
    column = torch.zeros(16, 4)[:, 1]  # strided: it spans 15 x 4 + 1 elements from its first
    _add()(column, x, x, 61, grid=(4,))  # (the kernel reads its pointer as contiguous elements)
    with pytest.raises(OutOfBoundsError, match=r"element \[13\] .* buffer 'z' \(61 elements"):
        _add()(column, x, x, 62, grid=(4,))


def test_a_kernel_cannot_be_pickled_or_copied() -> None:
    # (before: RecursionError from inside functools.partial's reduction)
    import copy
    import pickle

    k = _add()
    for attempt in (pickle.dumps, copy.deepcopy, copy.copy):
        with pytest.raises(TypeError, match="a tc Kernel cannot be pickled or copied"):
            attempt(k)


@pytest.mark.parametrize("grid", [b"\x03", bytearray(b"\x03"), "3"])
def test_grid_of_bytes_or_text_is_refused(grid: object) -> None:
    # (before: b"\x03" launched 3 programs, iterated as small ints)
    k = _add()
    z = np.zeros(40, np.float32)
    with pytest.raises(TypeError, match="grid of 'add' must be a tuple of 1 to 3 ints"):
        k(z, z, z, 40, grid=grid)


def test_float_stream_is_refused() -> None:
    # (before: int(1.5) made it the handle 1)
    k = _add()
    z = np.zeros(40, np.float32)
    with pytest.raises(TypeError, match="stream must be a raw handle .* got float 1.5"):
        k(z, z, z, 40, grid=(3,), stream=1.5)


@pytest.mark.parametrize("filename", [None, 5, Path("add.tc")])
def test_filename_must_be_text(filename: object) -> None:
    # (before: an internal compiler error, AttributeError: 'int' object has no attribute ...)
    with pytest.raises(TypeError, match="filename must be a str"):
        _add(filename=filename)
    with pytest.raises(TypeError, match="filename must be a str"):
        tc.build(ADD_SRC, defines={"TYPE": "float", "BLOCK": 16},
                 filename=filename)  # type: ignore[arg-type]


def test_autotune_key_that_is_no_list() -> None:
    with pytest.raises(TypeError, match="autotune_key must be a list of argument names, got int 5"):
        _add(autotune_key=5)


def test_build_checks_the_specialization(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (before: an internal compiler error "please report this" for a wrong length, and
    # "'int' object is not iterable" for no sequence)
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path))
    defines = {"TYPE": "float", "BLOCK": 16}
    with pytest.raises(ValueError, match="specialization has 1 entries but kernel 'add' has 4 "
                                         "arguments"):
        tc.build(ADD_SRC, defines=defines, specialization=(None,))
    for bad in (5, "divisible_by_16"):
        with pytest.raises(TypeError, match="specialization must be a sequence with one entry per"):
            tc.build(ADD_SRC, defines=defines, specialization=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name must be the identifier"):
        tc.build(ADD_SRC, defines=defines, name=5)  # type: ignore[arg-type]
    binary = tc.build(ADD_SRC, defines=defines,
                      specialization=("divisible_by_16", "divisible_by_16", None, None))
    assert binary.name == "add" and list(binary.signature)[3] == "i32"


def test_wrong_objects_for_binaries_caches_and_benchmarks(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="Kernel.from_binary takes a KernelBinary"):
        tc.Kernel.from_binary("add.json")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="KernelCache root must be a directory path"):
        tc.KernelCache(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="do_bench: grad_to_none must be a list of tensors"):
        tc.testing.do_bench(lambda: None, warmup=0, rep=1, device="cpu",
                            grad_to_none=5)  # type: ignore[arg-type]


def test_save_into_a_missing_directory_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (before: FileNotFoundError naming the temporary file)
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path / "cache"))
    binary = tc.build(ADD_SRC, defines={"TYPE": "float", "BLOCK": 16})
    missing = tmp_path / "no" / "dir"
    with pytest.raises(FileNotFoundError, match=f"cannot write {missing / 'k.json'}: the directory "
                                                f"{missing} does not exist"):
        tc.save(binary, missing / "k.json")
    with pytest.raises(TypeError, match="save writes to a path"):
        tc.save(binary, 5)  # type: ignore[arg-type]
    assert tc.save(binary, tmp_path / "k.json").is_file()


def test_the_interpreter_refuses_a_value_that_breaks_a_declared_multiple() -> None:
    # the spec's transposition with `int ldx __multipleof(8)`: the GPU code loads vectors
    # through it, so the interpreter refuses a broken promise as the GPU launch does
    src = """
__global__ void copy(float* X, float* Y, int n, int ldx __multipleof(8)) {
    int off[16] = 0 ... 16;
    *(Y + off) = *(X + off + ldx - ldx);
}
"""
    k = tc.kernel(src, device="cpu")
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, dtype=np.float32)
    k(x, y, 16, 64, grid=(1,))
    np.testing.assert_array_equal(y, x)
    with pytest.raises(ValueError, match=r"argument 4 \('ldx'\) of copy\(.*\): 68 is not a multiple of 8"):
        k(x, y, 16, 68, grid=(1,))
