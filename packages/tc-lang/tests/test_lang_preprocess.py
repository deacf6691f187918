"""The preprocessor: defines from Python, directives, includes, errors at the user's lines, and
the map from expanded text back to the user's source and macro."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import tc_lang
from tc_lang import TcPreprocessorError


def text(src: str, defines: dict[str, str | int | float | bool] | None = None) -> str:
    return " ".join(tc_lang.preprocess(src, defines).text.split())


def text_of(pre: tc_lang.Preprocessed) -> str:
    return " ".join(pre.text.split())


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


def run_bounded(code: str) -> subprocess.CompletedProcess[str]:
    """Python `code` in a process of at most 2 GiB and 60 s: a test of a limit that is missing
    fails, rather than hanging or exhausting the machine's memory."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, preexec_fn=limit)


def test_a_macro_that_doubles_itself_is_an_error_at_its_use_before_it_exhausts_memory() -> None:
    """Each A{i} is (A{i-1}+A{i-1}): A20 took 118 s and 3 GB, A30 never ended. The expansion is
    refused at the macro's use once it passes MAX_EXPANSION_TOKENS, within a second or so."""
    code = (
        "import sys, tc_lang\n"
        "n = 30\n"
        "src = '#define A0 1\\n' + ''.join(\n"
        "    f'#define A{i} (A{i-1}+A{i-1})\\n' for i in range(1, n + 1))\n"
        "src += '__global__ void k(float* X) {\\n  int a = A30; *X = a;\\n}\\n'\n"
        "try:\n"
        "    tc_lang.frontend(src, {}, filename='k.tc')\n"
        "except tc_lang.TcPreprocessorError as e:\n"
        "    print(e)\n"
    )
    done = run_bounded(code)
    assert done.stdout.splitlines() == [
        "k.tc:33:11: error[E0111]: the expansion of macro 'A30' is too large (more than "
        "1000000 tokens)",
        "      int a = A30; *X = a;",
        "              ^"], done.stderr


def test_a_function_like_macro_that_multiplies_its_argument_is_an_error_too() -> None:
    """The argument is substituted into the body before the result is rescanned: it counts once
    for every place the body uses it, before the copies are made."""
    body = " ".join(["x"] * 5000)
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess(f"#define F(x) {body}\nint a = F(F(F(1)));\n", filename="k.tc")
    d = info.value.first
    assert (d.code, d.location.line, d.location.col) == ("E0111", 2, 9)
    assert "macro 'F' is too large" in d.message
    # a macro used many times within the limit is fine
    assert text("#define F(x) ((x) * (x))\nF(F(F(F(2))))\n").count("2") == 16


def test_an_include_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    """`#include "/dev/zero"` read until memory ran out; a folder was "cannot find"."""
    done = run_bounded(
        "import tc_lang\n"
        "try:\n"
        "    tc_lang.preprocess('int a;\\n  #include \"/dev/zero\"\\n', filename='k.tc')\n"
        "except tc_lang.TcPreprocessorError as e:\n"
        "    print(e)\n")
    assert done.stdout.splitlines() == [
        "k.tc:2:3: error[E0110]: cannot read include file '/dev/zero': not a regular file",
        '      #include "/dev/zero"', "      ^"], done.stderr
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess(f'#include "{tmp_path}"\n', filename="k.tc")
    d = info.value.first
    assert (d.code, d.location.line, d.location.col) == ("E0110", 1, 1)
    assert d.message == f"cannot read include file '{tmp_path}': not a regular file (a directory)"


def test_an_include_larger_than_the_limit_is_refused(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tc_lang.preprocessor, "MAX_INCLUDE_BYTES", 64)
    (tmp_path / "big.h").write_text("// filler\n" * 10)
    (tmp_path / "small.h").write_text("#define S 1\n")
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess('#include "small.h"\n#include "big.h"\n', include_dirs=[tmp_path])
    d = info.value.first
    assert (d.code, d.location.line) == ("E0110", 2)
    assert d.message == (f"cannot read include file '{tmp_path / 'big.h'}': 100 bytes, more than "
                         "the 64 a source file may have")


def test_include_dirs_must_be_a_list_of_folders(tmp_path: Path) -> None:
    """A str was read character by character, as the folders "/", "t", "m", "p" ..."""
    (tmp_path / "h.h").write_text("#define H 7\n")
    src = '#include "h.h"\n__global__ void k(int* p) { *p = H; }\n'
    for entry in (tc_lang.frontend, tc_lang.preprocess):
        with pytest.raises(TypeError) as info:
            entry(src, {}, include_dirs=str(tmp_path))  # type: ignore[arg-type]
        assert str(info.value) == (f"include_dirs must be a list or tuple of folders, not str "
                                   f"{str(tmp_path)!r}")
        with pytest.raises(TypeError, match="include_dirs must hold folders .* not int 3"):
            entry(src, {}, include_dirs=[str(tmp_path), 3])  # type: ignore[list-item]
    # str and os.PathLike folders, in a list or a tuple
    assert text_of(tc_lang.preprocess(src, include_dirs=(tmp_path,))) == \
        text_of(tc_lang.preprocess(src, include_dirs=[str(tmp_path)]))
    assert tc_lang.frontend(src, include_dirs=[tmp_path]).kernels()[0].name == "k"


@pytest.mark.parametrize("src, line, message", [
    ("#define\n", 1, "#define needs a macro name"),
    ("#undef\n", 1, "#undef needs a macro name"),
    ("#ifdef\n#endif\n", 1, "#ifdef needs a macro name"),
    ("#ifndef\n#endif\n", 1, "#ifndef needs a macro name"),
    ("#if\n#endif\n", 1, "#if needs an expression"),
    ("int a;\n#if\n#endif\n", 2, "#if needs an expression"),
    ("#if 0\n#elif\n#endif\n", 2, "#elif needs an expression"),
    ("#include\n", 1, "#include needs a file name (\"file\" or <file>)"),
    ("#if 1 +\n#endif\n", 1, "could not evaluate expression '1 +' of #if: it ends too early"),
    ("#if 1 2\n#endif\n", 1, "could not evaluate expression '1 2' of #if: unexpected '2'"),
    ("#if 1 % 0\n#endif\n", 1, "could not evaluate expression '1 % 0' of #if: division by zero"),
    ("#if 1 << -1\n#endif\n", 1,
     "could not evaluate expression '1 << -1' of #if: negative shift count"),
])
def test_malformed_directives_say_what_is_wrong(src: str, line: int, message: str) -> None:
    """`#define` alone was "malformed preprocessor directive (IndexError)", a bad #if "could not
    evaluate expression due to SyntaxError('at EOF')": no Python exception names in messages."""
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess(src, filename="k.tc")
    d = info.value.first
    assert d.message == message
    assert (d.location.file, d.location.line, d.location.col) == ("k.tc", line, 1)
    assert not re.search(r"[A-Z][a-z]+Error", str(info.value))
    # an empty #pragma does nothing (as in C; it was an IndexError), and in a group that is not
    # taken a directive without its operand is not looked at
    assert text("#pragma\nx\n#if 0\n#define\n#endif\n") == "x"


def test_an_include_that_is_not_utf8_names_the_file_and_the_byte(tmp_path: Path) -> None:
    """It was E0101 "malformed preprocessor directive (UnicodeDecodeError)"."""
    (tmp_path / "latin1.h").write_bytes(b"#define X 1\n// caf\xe9\n")
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess('int a;\n#include "latin1.h"\n', filename="k.tc",
                           include_dirs=[str(tmp_path)])
    d = info.value.first
    assert (d.code, d.location.line) == ("E0110", 2)
    assert d.message == (f"include file '{tmp_path / 'latin1.h'}' is not valid UTF-8 "
                         "(byte 0xe9 at offset 18)")


@pytest.mark.parametrize("expr,taken", [("1 << 99999999999", False), ("(1 << 64) == 0", True),
                                         ("(1U << 63) != 0", True), ("(3 << 62) != 0", True),
                                         ("(1 << 63) < 0", True), ("(1 << 3) == 8", True)])
def test_if_shifts_wrap_to_64_bits_without_building_huge_numbers(expr: str, taken: bool) -> None:
    # (before: `#if 1 << 99999999999` built a number of gigabytes and ran out of memory)
    out = tc_lang.preprocess(f"#if {expr}\nint taken;\n#else\nint not_taken;\n#endif\n")
    assert ("int taken;" in out.text) is taken and ("int not_taken;" in out.text) is not taken


@pytest.mark.parametrize("second", ["#elif 1", "#else"])
def test_elif_or_else_after_else_is_an_error(second: str) -> None:
    """pcpp accepted both silently (C refuses them), taking no branch or the wrong one."""
    src = f"#if 0\na\n#else\nb\n  {second}\nc\n#endif\n"
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess(src, filename="k.tc")
    d = info.value.first
    name = second.split()[0]
    assert (d.code, d.location.line, d.location.col) == ("E0101", 5, 3)
    assert d.message == f"{name} after #else (the #else of this #if group is at line 3)"
    # each group has its own #else, nested ones included, and skipped groups are followed too
    ok = "#if 0\n#if 1\n#else\n#endif\n#else\n#if 0\n#elif 1\nyes\n#else\n#endif\n#endif\n"
    assert text(ok) == "yes"


def test_recursive_include_shows_the_include_line(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """E0109 had no source line: included files below the working directory were known by a
    relative name but kept under their absolute one (an error in such a header had no line
    and column 1)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rec.h").write_text('int r;\n   #include "rec.h"\n')
    with pytest.raises(TcPreprocessorError) as info:
        tc_lang.preprocess('#include "rec.h"\n', filename="k.tc", include_dirs=[str(tmp_path)])
    d = info.value.first
    assert d.code == "E0109"
    assert (d.location.file, d.location.line, d.location.col) == (str(tmp_path / "rec.h"), 2, 4)
    assert str(info.value).splitlines()[1:] == ['       #include "rec.h"', "       ^"]
    (tmp_path / "lib.h").write_text("__device__ float f(float x) {\n  return x + zz;\n}\n")
    with pytest.raises(tc_lang.TcNameError) as name_error:
        tc_lang.frontend('#include "lib.h"\n__global__ void k(float* p) { *p = f(*p); }\n',
                         filename=str(tmp_path / "k.tc"))
    d = name_error.value.first
    assert (d.location.line, d.location.col, d.source_line) == (2, 14, "  return x + zz;")


@pytest.mark.parametrize("preprocessed", [True, False])
def test_unterminated_comment_is_reported_at_its_start(preprocessed: bool) -> None:
    """It was E0201 "unexpected '/'" (the lexers read `/` and `*`)."""
    src = '__global__ void k(float* p) {\n  *p = 1.0f; /* "*/" ok */\n}\n  /* never ends\n'
    with pytest.raises(tc_lang.TcSyntaxError) as info:
        if preprocessed:
            tc_lang.frontend(src, filename="k.tc")
        else:
            tc_lang.parse(src, filename="k.tc")
    d = info.value.first
    assert (d.code, d.message) == ("E0201", "unterminated comment")
    assert (d.location.line, d.location.col) == (4, 3)
    assert str(info.value).splitlines()[1:3] == ["      /* never ends", "      ^~"]
    ok = "__global__ void k(float* p) { /* a */ *p = 1.0f; // b /*\n}\n"
    assert tc_lang.parse(ok).kernels()[0].name == "k"


def test_unterminated_comment_in_an_include(tmp_path: Path) -> None:
    (tmp_path / "c.h").write_text("#define A 1\n  /* oops\n#define B 2\n")
    with pytest.raises(tc_lang.TcSyntaxError) as info:
        tc_lang.preprocess('#include "c.h"\n', include_dirs=[str(tmp_path)])
    assert [(d.location.file, d.location.line, d.location.col, d.message)
            for d in info.value.diagnostics] == [
        (str(tmp_path / "c.h"), 2, 3, "unterminated comment")]


def test_every_token_of_a_long_line_of_expansions_maps_to_its_own_invocation() -> None:
    # (locate finds a token's segment by binary search: a line has a segment per expansion)
    terms = [f"A + {k}" for k in range(300)]
    line = "float y = " + " + ".join(terms) + ";"
    pre = tc_lang.preprocess("#define A (x)\n" + line + "\n")
    out_line = next(i for i, t in enumerate(pre.text.splitlines(), 1) if t.startswith("float"))
    out = pre.text.splitlines()[out_line - 1]
    xs = [i + 1 for i, ch in enumerate(out) if ch == "x"]
    invocations = [i + 1 for i, ch in enumerate(line) if ch == "A"]
    assert [pre.locate(out_line, c).col for c in xs] == invocations
    assert {pre.locate(out_line, c).line for c in xs} == {2}
    literal = out.index(" 299;") + 2  # the last literal: a segment copied one to one
    assert pre.locate(out_line, literal, 3).col == line.index(" 299;") + 2
