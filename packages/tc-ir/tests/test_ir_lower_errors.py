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


def test_lower_takes_a_translation_unit_and_a_kernel_name() -> None:
    # (before: AttributeError "'str' object has no attribute 'kernels'")
    with pytest.raises(TypeError, match=r"lower\(\) needs a TranslationUnit \(from tc_lang.frontend\), not str"):
        lower(TWO)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the name of a __global__ function .*, not int"):
        lower(tc_lang.frontend(TWO), 1)  # type: ignore[arg-type]


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


def test_load_under_a_transposition_in_a_tile_conditional_is_refused() -> None:
    # the lanes of *q are permuted before the select: c cannot mask them lane by lane
    e = _error("""__global__ void k(float* p, float* q) {
  int r[16] = 0 ... 16;
  bool c[16, 16] = r[:, newaxis] < r[newaxis, :];
  float t[16, 16] = c ? ^(*(q + r[:, newaxis] * 16 + r[newaxis, :])) : 0.0f;
  *(p + r[:, newaxis] * 16 + r[newaxis, :]) = t;
}""")
    assert isinstance(e, TcLoweringError)
    text = str(e)
    assert e.first.location.line == 4 and "transposition" in text and "cannot mask" in text
    assert e.first.hint is not None and "*?(" in e.first.hint


@pytest.mark.parametrize(
    ("inner", "word"),
    [
        ("(*(q + r[:, newaxis] * 16 + r[newaxis, :]))[+, :]", "subscript"),
        ("sum16(*(q + r))", "helper 'sum16'"),
    ],
)
def test_loads_under_reductions_and_helpers_in_a_tile_conditional_are_refused(inner: str, word: str) -> None:
    e = _error(f"""__device__ float[16] sum16(float x[16]) {{ return x + 1.0f; }}
__global__ void k(float* p, float* q) {{
  int r[16] = 0 ... 16;
  bool c[16] = r < 5;
  float t[16] = c ? {inner} : 0.0f;
  *(p + r) = t;
}}""")
    assert e.first.location.line == 5 and word in str(e)


def test_smaller_store_in_a_tile_conditional_is_refused() -> None:
    e = _error("""__global__ void k(float* p) {
  int r[16] = 0 ... 16;
  bool c[16, 16] = r[:, newaxis] < r[newaxis, :];
  float t[16, 16] = c ? (*(p + r) = 1.0f) : 0.0f;
  *(p + r[:, newaxis] * 16 + r[newaxis, :]) = t;
}""")
    assert e.first.location.line == 4 and "ambiguous" in str(e) and e.first.hint is not None


def test_atomic_cas_in_a_tile_conditional_is_refused() -> None:
    e = _error("""__global__ void k(int* p) {
  int r[16] = 0 ... 16;
  int t[16] = r < 4 ? atomic_cas(p + r, 0, 1) : 0;
  *(p + r) = t;
}""")
    assert e.first.location.line == 3 and "atomic_cas" in str(e)


def test_pointer_attributes_on_locals_are_refused() -> None:
    e = _error("__global__ void k(float* p) {\n  float* q __noalias = p;\n  *q = 1.0f;\n}")
    assert e.first.location.line == 2 and "kernel parameters only" in str(e)


def test_value_attributes_need_integers_or_pointers_and_powers_of_two() -> None:
    e = _error("__global__ void k(float* p) {\n  float x __multipleof(4) = 1.0f;\n  *p = x;\n}")
    assert e.first.location.line == 2 and "integer" in str(e)  # the checker or the lowering
    e = _error("__global__ void k(float* p) {\n  float* q __aligned(12) = p;\n  *q = 1.0f;\n}")
    assert "power of two" in str(e)


def test_lowering_errors_quote_the_source_line_with_a_caret() -> None:
    # (the lowering knows locations only: `lower` looks the text up in the unit's source map)
    e = _error("__global__ void k(float* p) {\n float x[16] = *(p + 0 ... 16);\n *p = x[-];\n}")
    assert isinstance(e, TcLoweringError) and e.first.source_line == " *p = x[-];"
    lines = str(e).splitlines()
    assert lines[0].startswith("<source>:3:") and "error[E06" in lines[0]
    assert lines[1] == "     *p = x[-];" and lines[2].strip().startswith("^")


def test_void_pointer_parameters_are_byte_pointers_cast_before_use() -> None:
    import numpy as np

    from tc_ir.interpreter import interpret

    m = lower(tc_lang.frontend("""__global__ void k(void* x, int* a, int* b, long* d) {
  int* y = (int*) x;
  int r[16] = 0 ... 16;
  *(y + r) = r * 2;
  *d = b - a;
}"""))
    assert str(m.functions[0].args[0].type) == "ptr<i8>"
    x, a, d = np.zeros(16, np.int32), np.zeros(8, np.int32), np.zeros(1, np.int64)
    interpret(m, [x, a, a[5:], d], (1,))
    assert x.tolist() == list(range(0, 32, 2)) and d.tolist() == [5]
