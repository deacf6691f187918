"""The preprocessor: defines from Python, directives, includes, errors at the user's lines, and
the map from expanded text back to the user's source and macro."""

from __future__ import annotations

from pathlib import Path

import pytest

import tc_lang
from tc_lang import TcPreprocessorError


def text(src: str, defines: dict[str, str | int | float | bool] | None = None) -> str:
    return " ".join(tc_lang.preprocess(src, defines).text.split())


def test_defines_of_every_python_type() -> None:
    out = text("A B C D E", {"A": 3, "B": 0.5, "C": True, "D": False, "E": "newaxis,:"})
    assert out == "3 0.5 1 0 newaxis,:"


def test_infinite_and_nan_float_defines_are_the_builtin_constants() -> None:
    """C has no literal for them (Python's repr gave `nan`, an undeclared identifier)."""
    assert text("A B C", {"A": float("inf"), "B": float("-inf"), "C": float("nan")}) == \
        "F32_INFINITY (-F32_INFINITY) F32_NAN"
    unit = tc_lang.frontend("__global__ void k(float* o) { *o = LO; *(o + 1) = X; }",
                            {"LO": float("-inf"), "X": float("nan")})
    assert not unit.warnings


def test_bool_define_works_under_if() -> None:
    src = "#if USE\nyes\n#else\nno\n#endif\n"
    assert text(src, {"USE": True}) == "yes"
    assert text(src, {"USE": False}) == "no"


def test_object_and_function_like_macros_with_stringize_and_paste() -> None:
    src = (
        "#define SQ(x) ((x) * (x))\n"
        "#define CAT(a, b) a ## b\n"
        "#define STR(a) #a\n"
        "SQ(n + 1) CAT(foo, 42) STR(hi)\n"
    )
    assert text(src) == '((n + 1) * (n + 1)) foo42 "hi"'


def test_undef_and_conditionals() -> None:
    src = (
        "#define X 1\n#undef X\n"
        "#ifdef X\nbad\n#endif\n"
        "#ifndef X\ngood\n#endif\n"
        "#if LEVEL == 1\none\n#elif LEVEL == 2\ntwo\n#else\nother\n#endif\n"
    )
    assert text(src, {"LEVEL": 2}) == "good two"
    assert text(src, {"LEVEL": 7}) == "good other"


def test_include_beside_the_source_and_from_include_dirs(tmp_path: Path) -> None:
    (tmp_path / "local.h").write_text("#define LOCAL 11\n")
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "lib.h").write_text("#define LIB 22\n")
    main = tmp_path / "k.tc"
    src = '#include "local.h"\n#include "lib.h"\nLOCAL LIB\n'
    main.write_text(src)
    pre = tc_lang.preprocess(src, filename=str(main), include_dirs=[str(inc)])
    assert pre.text.split() == ["11", "22"]


def test_missing_include_is_an_error_at_its_line() -> None:
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess('int x;\n  #include "nope.h"\n', filename="k.tc")
    d = info.value.first
    assert d.code == "E0104"
    assert d.message == "cannot find include file 'nope.h'"
    assert (d.location.file, d.location.line, d.location.col) == ("k.tc", 2, 3)


def test_error_directive_reports_user_line_and_column() -> None:
    src = "__global__ void f() {}\n  #error need BLOCK\n"
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess(src, filename="k.tc")
    d = info.value.first
    assert d.code == "E0103"
    assert d.message == "#error need BLOCK"
    assert (d.location.line, d.location.col) == (2, 3)
    assert str(info.value).startswith("k.tc:2:3: error[E0103]: #error need BLOCK")
    assert "    #error need BLOCK" in str(info.value)


def test_unterminated_conditional() -> None:
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess("x\n  #if 1\nx\n", filename="k.tc")
    d = info.value.first
    assert (d.code, d.message) == ("E0107", "unterminated #if 1")
    assert (d.location.line, d.location.col) == (2, 3)


def test_unknown_directive() -> None:
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess("x\n #frobnicate\n", filename="k.tc")
    d = info.value.first
    assert (d.code, d.message) == ("E0105", "unknown directive '#frobnicate'")
    assert (d.location.line, d.location.col) == (2, 3)  # the directive's name


def test_macro_argument_count() -> None:
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess("#define F(a, b) a\nint y = F(1);\n", filename="k.tc")
    d = info.value.first
    assert (d.code, d.message) == ("E0106", "macro F requires 2 arguments but was passed 1")
    assert (d.location.line, d.location.col) == (2, 9)


def test_bad_define_name() -> None:
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess("x", {"not a name": 1})
    assert info.value.first.code == "E0108"
    assert info.value.first.message == "invalid define name 'not a name'"


def test_bytes_input_and_invalid_utf8() -> None:
    assert tc_lang.preprocess(b"abc").text.strip() == "abc"
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess(b"int x;\nint \xff y;\n", filename="k.tc")
    d = info.value.first
    assert d.code == "E0102"
    assert (d.location.line, d.location.col) == (2, 5)


def test_a_utf8_byte_order_mark_is_skipped() -> None:
    """An editor's BOM before the first line was E0201 "unexpected character '\\ufeff'"; C
    compilers skip it, and so does tc (the lines and columns after it are those of the text)."""
    unit = tc_lang.frontend("\ufeff__global__ void k(float* x) { *x = 1.0f; }".encode())
    assert [f.name for f in unit.functions] == ["k"]
    with pytest.raises(tc_lang.TcNameError) as info:
        tc_lang.frontend("\ufeff__global__ void k(float* x) {\n  *x = y;\n}\n", filename="k.tc")
    assert (info.value.first.location.line, info.value.first.location.col) == (2, 8)


@pytest.mark.parametrize("kwargs, message", [
    ({"filename": 3}, "filename must be a str (the name diagnostics show), not int 3"),
    ({"filename": None}, "filename must be a str (the name diagnostics show), not NoneType None"),
    ({"defines": "BLOCK=128"}, "defines must be a mapping of macro names to values, not str 'BLOCK=128'"),
])
def test_arguments_of_the_wrong_type_are_the_callers_error(kwargs: dict[str, object], message: str) -> None:
    """A filename that is no str was an internal compiler error (E0499: 'int' object has no
    attribute 'startswith'); defines given as a str failed inside dict()."""
    with pytest.raises(TypeError) as info:
        tc_lang.frontend("__global__ void k() {}", **kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_locations_map_back_through_macros() -> None:
    src = "#define TILE 3\n__global__ void f() {\n  float x[TILE] = 0;\n}\n"
    with pytest.raises(tc_lang.TcShapeError) as info:
        tc_lang.frontend(src, filename="k.tc")
    d = info.value.first
    assert d.code == "E0502"
    assert (d.location.file, d.location.line) == ("k.tc", 3)
    assert "tile dimensions must be powers of two or multiples of 16" in (d.hint or "")
    rendered = str(info.value)
    assert rendered.splitlines()[1] == "      float x[TILE] = 0;"


def test_error_inside_define_names_the_macro() -> None:
    src = "__global__ void f(int n) {\n  int x = n + OFFSET;\n}\n"
    with pytest.raises(tc_lang.TcNameError) as info:
        tc_lang.frontend(src, {"OFFSET": "m * 2"}, filename="k.tc")
    d = info.value.first
    assert d.message == "use of undeclared identifier 'm'"
    assert (d.location.line, d.location.col) == (2, 15)
    assert d.location.macro == "OFFSET"
    assert "(in expansion of macro 'OFFSET')" in str(info.value)


def test_error_inside_function_like_macro_names_the_macro_and_spans_the_call() -> None:
    src = (
        "#define LOAD(p) *(p + offx)\n"
        "__global__ void f(float* x) {\n"
        "  float v[128] = LOAD(x + 1) + 0 ... 128;\n"
        "}\n"
    )
    with pytest.raises(tc_lang.TcNameError) as info:
        tc_lang.frontend(src, filename="k.tc")
    d = info.value.first
    assert d.message == "use of undeclared identifier 'offx'"
    assert d.location.macro == "LOAD"
    # The whole invocation `LOAD(x + 1)`, arguments included, is underlined.
    assert (d.location.line, d.location.col, d.location.end_col) == (3, 18, 28)
    assert str(info.value).splitlines()[2] == "                     ^~~~~~~~~~~"


def test_columns_after_a_macro_are_the_users() -> None:
    src = "__global__ void f(int n) {\n  int x = SIZE + q;\n}\n"
    with pytest.raises(tc_lang.TcNameError) as info:
        tc_lang.frontend(src, {"SIZE": 1024}, filename="k.tc")
    d = info.value.first
    assert (d.location.line, d.location.col) == (2, 18)
    assert d.location.macro is None


def test_dtype_names_as_defines() -> None:
    class FakeDtype:
        name = "float16"

    src = "__global__ void k(TYPE* p, T2* q) { *p = *q; }"
    unit = tc_lang.frontend(src, {"TYPE": FakeDtype(), "T2": "bfloat16"})
    params = unit.kernels()[0].params
    assert [str(p.ty) for p in params] == ["half*", "bf16*"]
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess("x", {"X": [1, 2]})
    assert info.value.first.code == "E0108"


def test_parse_without_preprocessing_explains_directives() -> None:
    with pytest.raises(tc_lang.TcSyntaxError) as info:
        tc_lang.parse("#define A 1\n__global__ void k() {}\n")
    assert "tc_lang.preprocess" in info.value.first.message


def test_recursive_include(tmp_path: Path) -> None:
    main = tmp_path / "self.tc"
    src = 'int a;\n #include "self.tc"\n__global__ void k() {}\n'
    main.write_text(src)
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess(src, filename=str(main))
    d = info.value.first
    assert d.code == "E0109"
    assert "include itself" in d.message
    assert (d.location.file, d.location.line, d.location.col) == (str(main), 2, 2)


def test_misplaced_endif() -> None:
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess("x\n  #endif\n", filename="k.tc")
    d = info.value.first
    assert d.code == "E0101" and d.message == "misplaced #endif"
    assert (d.location.line, d.location.col) == (2, 3)


def test_malformed_if_expression_and_misplaced_else() -> None:
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess("int a;\n#if 1 +\n#endif\n#else\n", filename="k.tc")
    first, second = info.value.diagnostics[:2]
    assert first.code == "E0101" and "could not evaluate expression" in first.message
    assert (first.location.line, first.location.col) == (2, 1)
    assert (second.code, second.message, second.location.line) == ("E0101", "misplaced #else", 4)


def test_if_expressions_use_c_operators_and_defined() -> None:
    src = ("#if defined(A) && !defined(B) && (A << 2) == 12 && A % 2 ? 1 : 0\nyes\n#else\nno\n"
           "#endif\n#if defined A || B > 1\nboth\n#endif\n")
    assert text(src, {"A": 3}) == "yes both"
    assert text(src, {"A": 3, "B": 1}) == "no both"
    assert text(src, {"B": 2}) == "no both"


def test_undefined_function_like_macro_in_if_is_an_error() -> None:
    """pcpp read `FOO(1)` as 0 and took the #else branch silently; C gives it no value."""
    src = "int a;\n#if FOO(1) && 1\nyes\n#else\nno\n#endif\n"
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess(src, filename="k.tc")
    assert str(info.value).splitlines()[0] == (
        "k.tc:2:5: error[E0101]: function-like macro 'FOO' is not defined (in an #if expression)")
    assert text("#define FOO(x) (x)\n" + src) == "int a; yes"
    assert text("#if UNDEFINED\nyes\n#else\nno\n#endif\n") == "no"  # (a plain name is 0, as in C)


def test_error_directive_through_frontend_has_no_traceback() -> None:
    src = "#ifndef BLOCK\n#error BLOCK must be defined\n#endif\n__global__ void k() {}\n"
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.frontend(src, filename="k.tc")
    assert str(info.value).splitlines()[0] == (
        "k.tc:2:1: error[E0103]: #error BLOCK must be defined")
    assert "Traceback" not in str(info.value)
    assert tc_lang.frontend(src, {"BLOCK": 4}, filename="k.tc").kernels()[0].name == "k"


def test_error_inside_an_included_file_points_at_that_file(tmp_path: Path) -> None:
    (tmp_path / "lib.h").write_text("__device__ float f(float x) {\n  return x + zz;\n}\n")
    main = tmp_path / "k.tc"
    src = '#include "lib.h"\n__global__ void k(float* p) { *p = f(*p); }\n'
    main.write_text(src)
    with pytest.raises(tc_lang.TcNameError) as info:
        tc_lang.frontend(src, filename=str(main))
    d = info.value.first
    assert (d.location.file, d.location.line, d.location.col) == (str(tmp_path / "lib.h"), 2, 14)
    assert str(info.value).splitlines()[1:] == ["      return x + zz;", "                 ^~"]


def test_line_directive_renames_the_lines_after_it() -> None:
    # a generator of kernel source points diagnostics at its own input with #line
    src = ("__global__ void f(int n) {\n"
           '#line 40 "model.py"\n'
           "  int x = n;\n"
           "  int y = x + zz;\n"
           "#line 7\n"
           "  int w = qq;\n"
           "}\n")
    with pytest.raises(tc_lang.TcNameError) as info:
        tc_lang.frontend(src, filename="k.tc")
    first, second = info.value.diagnostics
    assert (first.location.file, first.location.line, first.location.col) == ("model.py", 41, 15)
    assert str(info.value).splitlines()[:3] == [
        "model.py:41:15: error[E0301]: use of undeclared identifier 'zz'",
        "      int y = x + zz;", "                  ^~"]
    # a #line without a file name keeps the name the last one gave
    assert (second.location.file, second.location.line) == ("model.py", 7)
    assert second.source_line == "  int w = qq;"


def test_line_directive_applies_to_preprocessor_errors_and_only_when_taken() -> None:
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.frontend('#line 90 "gen.tc"\n#error stop\n', filename="k.tc")
    assert str(info.value).splitlines()[:2] == ["gen.tc:90:1: error[E0103]: #error stop",
                                                "    #error stop"]
    # inside a group that is not taken, #line (even a malformed one) does nothing
    unit = tc_lang.frontend("#if 0\n#line 5 x\n#endif\n__global__ void k() {}\n")
    assert unit.kernels()[0].name == "k"


@pytest.mark.parametrize("directive", ["#line", "#line x", "#line 0", "#line 2147483648",
                                       '#line 5 "a" b', "#line 5 a"])
def test_malformed_line_directive(directive: str) -> None:
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.frontend(f"__global__ void k() {{}}\n{directive}\n", filename="k.tc")
    assert str(info.value).splitlines()[:2] == [
        'k.tc:2:1: error[E0101]: malformed #line directive: expected #line <number> ["file"] '
        "with a number from 1 to 2147483647", f"    {directive}"]
