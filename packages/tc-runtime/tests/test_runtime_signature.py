"""Argument checking, specialization keys and packing against a kernel signature."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from tc_runtime.signature import DIV8, DIV16, NONE, ONE, Signature, c_spelling

ADD = Signature("add", ["ptr<f32>", "ptr<f32>", "ptr<f32>", "i32"], ["z", "x", "y", "N"])


def test_describe_and_count() -> None:
    assert c_spelling("ptr<f16>") == "half*"
    assert ADD.describe() == "add(z: float*, x: float*, y: float*, N: int)"
    with pytest.raises(TypeError, match=r"^add\(z: float\*, x: float\*, y: float\*, N: int\) "
                                        r"takes 4 arguments, got 3$"):
        ADD.normalize([1, 2, 3])
    with pytest.raises(TypeError, match="takes 4 arguments, got 5"):
        ADD.check_count(5)


def test_type_errors_name_the_argument() -> None:
    with pytest.raises(TypeError, match=r"argument 2 \('x'\) of add\(.*\) must be a pointer.*float"):
        ADD.normalize([16, 2.5, 32, 4])
    with pytest.raises(TypeError, match=r"argument 4 \('N'\) .* must be an integer \(int\), got float"):
        ADD.normalize([16, 16, 16, 4.0])
    with pytest.raises(TypeError, match="does not fit in int"):
        ADD.normalize([16, 16, 16, 2**40])
    with pytest.raises(TypeError, match="not a valid 64-bit address"):
        ADD.normalize([-16, 16, 16, 1])


def test_normalize_converts_data_ptr_and_numpy_ints() -> None:
    class FakeTensor:
        def data_ptr(self) -> int:
            return 4096

    out = ADD.normalize([FakeTensor(), np.int64(32), 48, np.int32(7)])
    assert out == [4096, 32, 48, 7]
    assert all(type(v) is int for v in out)
    # an unsigned 32-bit value keeps its bits
    assert ADD.normalize([0, 0, 0, 2**32 - 1])[3] == -1


def test_specialization_keys() -> None:
    assert ADD.specialize([4096, 4096, 4096, 1024]) == (DIV16, DIV16, DIV16, DIV16)
    assert ADD.specialize([4100, 4096, 4104, 1]) == (NONE, DIV16, NONE, ONE)
    # an integer divisible by 8 but not 16 has a code of its own; a pointer is 16-aligned or not
    assert ADD.specialize([4096, 4097, 4096, 1000]) == (DIV16, NONE, DIV16, DIV8)
    assert ADD.specialize([4104, 4096, 4096, 4100]) == (NONE, DIV16, DIV16, NONE)
    with pytest.raises(TypeError):
        ADD.specialize([4096, 4096, 4096, 1.0])
    spec = ADD.options_specialization((NONE, DIV16, NONE, ONE))
    assert spec == (None, "divisible_by_16", None, "equal_to_1")
    assert ADD.options_specialization((DIV16, DIV16, DIV16, DIV8))[3] == "divisible_by_8"
    # float arguments are not specialized
    sig = Signature("f", ["f32", "ptr<f16>", "i64"], ["a", "p", "n"])
    assert sig.specialize([1.5, 32, 1]) == (DIV16, ONE)
    assert sig.options_specialization((DIV16, ONE)) == (None, "divisible_by_16", "equal_to_1")


def test_generated_key_function_agrees_with_specialize() -> None:
    """The launch key's generated code gives the codes `specialize` gives, DIV8 included, for
    every residue of the integers mod 16 and for 1."""
    key = ADD.key_function([3])
    for n in [1, *range(2, 35)]:
        for pointer in (4096, 4104):
            args = [pointer, 4096, 4096, n]
            assert key(*args) == (*ADD.specialize(args), n), (pointer, n)


def test_packing_native_layout() -> None:
    sig = Signature("f", ["i32", "ptr<f32>", "f16", "f64", "i1"], ["a", "p", "h", "d", "b"])
    packer = sig.packer()
    addr = packer.pack([-3, 0x1234, 1.5, 2.25, True])
    pointers = ctypes.cast(addr, ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.c_int32.from_address(pointers[0]).value == -3
    assert ctypes.c_uint64.from_address(pointers[1]).value == 0x1234
    assert pointers[1] % 8 == 0  # the pointer is aligned after the 4-byte int
    h = struct.unpack("e", ctypes.string_at(pointers[2], 2))[0]
    assert h == 1.5
    assert ctypes.c_double.from_address(pointers[3]).value == 2.25
    assert ctypes.c_bool.from_address(pointers[4]).value is True
    # the slow path (unsigned values, objects with data_ptr) packs the same bits
    packer.pack([2**32 - 3, 0x1234, 1.5, 2.25, False])
    assert ctypes.c_int32.from_address(pointers[0]).value == -3
    with pytest.raises(TypeError, match=r"argument 1 \('a'\)"):
        packer.pack(["x", 0, 1.0, 1.0, True])


def test_bf16_scalars_are_packed_as_bits() -> None:
    sig = Signature("f", ["bf16"], ["s"])
    packer = sig.packer()
    addr = packer.pack([1.0])
    pointers = ctypes.cast(addr, ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.c_uint16.from_address(pointers[0]).value == 0x3F80
    packer.pack([3])  # an int is a value, not a bit pattern
    assert ctypes.c_uint16.from_address(pointers[0]).value == 0x4040


def test_declared_multiples_are_checked_before_a_launch() -> None:
    from tc_runtime.signature import declared_multiples

    attrs: list[dict[str, object]] = [{"aligned": 64}, {}, {"multiple_of": 8}, {"multiple_of": 2, "aligned": 3},
                                      {"noalias": True}]
    assert declared_multiples(attrs) == {0: 64, 2: 8, 3: 6}
    sig = Signature("t", ["ptr<f32>", "ptr<f32>", "i32", "i64", "f32"], ["X", "Y", "ldx", "n", "s"],
                    unsigned=[3], multiples={0: 64, 2: 8, 3: 6, 4: 4})  # (a float is never checked)
    assert sig.multiples == {0: 64, 2: 8, 3: 6}
    assert sig.normalize([128, 4, -24, 12, 1.0])[2] == -24  # -24 is a multiple of 8, as in C
    with pytest.raises(ValueError, match=r"argument 3 \('ldx'\) of t\(.*\): 68 is not a multiple of 8, "
                                         r"which the kernel declares \(__multipleof\(8\)\)"):
        sig.normalize([128, 4, 68, 12, 1.0])
    with pytest.raises(ValueError, match=r"argument 1 \('X'\) .*: address 0x60 is not a multiple of 64, .*"
                                         r"\(__aligned\(64\)\)"):
        sig.normalize([96, 4, 8, 12, 1.0])
    # an unsigned value beyond the signed range is checked as the value it is (2**64 - 6 = 6 k)
    assert sig.normalize([128, 4, 8, 2**64 - 4, 1.0])[3] == -4
    with pytest.raises(ValueError, match=r"18446744073709551614 is not a multiple of 6"):
        sig.normalize([128, 4, 8, 2**64 - 2, 1.0])
    # the generated key leaves a broken promise to the general path (which says what is wrong)
    key = sig.key_function()
    assert key(128, 4, 8, 12, 1.0) == key(128, 4, 8, 12, 1.0)
    with pytest.raises(TypeError):
        key(128, 4, 68, 12, 1.0)
