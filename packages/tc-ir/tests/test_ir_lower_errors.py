"""What the lowering refuses: located diagnostics (TcCompileError subclasses), never a traceback."""

from __future__ import annotations

import pytest
import tc_lang
from tc_lang.diagnostics import TcCompileError, TcLoweringError, TcNameError

from tc_ir.lower import lower

TWO = """
__global__ void first(int* p) { *p = 1; }
__global__ void second(int* p) { *p = 2; }
"""


def test_unknown_kernel_name_lists_the_kernels() -> None:
    unit = tc_lang.frontend(TWO)
    with pytest.raises(TcNameError) as err:
        lower(unit, "third")
    text = str(err.value)
    assert "third" in text and "'first'" in text and "'second'" in text


def test_default_is_the_first_kernel() -> None:
    assert lower(tc_lang.frontend(TWO)).functions[0].name == "first"


def _error(src: str) -> TcCompileError:
    with pytest.raises(TcCompileError) as err:
        lower(tc_lang.frontend(src))
    e = err.value
    assert e.first.location.line > 0, str(e)
    return e


def test_recursive_helpers_are_refused() -> None:
    e = _error("""
__device__ int f(int n) { if (n <= 0) return 0; return f(n - 1) + 1; }
__global__ void k(int* p) { *p = f(3); }
""")
    assert "recursive" in str(e)


def test_minus_reduction_has_a_hint() -> None:
    e = _error("__global__ void k(float* p) {\n float x[16] = *(p + 0 ... 16);\n *p = x[-];\n}")
    assert isinstance(e, TcLoweringError)
    assert e.first.location.line == 3 and e.first.hint is not None


def test_address_of_is_refused() -> None:
    e = _error("__global__ void k(int* p) {\n int x = 1;\n int* q = &x;\n *q = 2;\n}")
    assert e.first.location.line == 3


def test_tile_condition_in_if_is_refused() -> None:
    e = _error("__global__ void k(int* p) {\n int r[16] = 0 ... 16;\n if (r < 4) *p = 1;\n}")
    assert e.first.location.line == 3
