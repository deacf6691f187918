"""Warnings for undefined integer arithmetic, as C compilers give them: W0301 a signed overflow
while folding a constant (-Woverflow), W0302 a constant shift count out of range for a value that
is not constant (-Wshift-count-overflow / -Wshift-count-negative). Both compile unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

import tc_lang
from tc_lang import ast
from tc_lang.diagnostics import Severity
from tc_lang.lint import main as lint

INT_MIN = -(2**31)


def _warnings(body: str, params: str = "int* o, int N, long L, char c") -> list[tuple[str, int, int]]:
    unit = tc_lang.frontend(f"__global__ void k({params}) {{\n{body}\n}}\n", filename="w.tc")
    assert all(w.severity is Severity.WARNING for w in unit.warnings)
    return [(w.code, w.location.line, w.location.col) for w in unit.warnings]


def _folded(unit: ast.TranslationUnit, name: str) -> object:
    """The constant the checker folded the initializer of local `name` to."""
    for item in unit.functions[0].body.items:
        if isinstance(item, ast.DeclStmt):
            for d in item.decls:
                if d.name == name:
                    assert d.init is not None
                    return d.init.const
    raise AssertionError(name)


def test_signed_overflow_in_a_constant_warns_and_keeps_the_wrapped_value() -> None:
    src = "__global__ void k(int* o) {\n  int x = 2147483647 + 1;\n  *o = x;\n}\n"
    unit = tc_lang.frontend(src, filename="w.tc")
    [w] = unit.warnings
    assert (w.code, w.location.line, w.location.col) == ("W0301", 2, 11)
    assert "integer overflow" in w.message and "'int'" in w.message
    assert "warning[W0301]" in w.render() and "2147483647 + 1" in w.render()
    assert _folded(unit, "x") == INT_MIN  # two's complement, as the GPU computes it


@pytest.mark.parametrize("expr,value", [
    ("2147483647 + 1", INT_MIN),
    ("-2147483647 - 2", 2**31 - 1),
    ("65536 * 65536", 0),
    ("(-2147483647 - 1) / -1", INT_MIN),
    ("-(-2147483647 - 1)", INT_MIN),
    ("4 << 30", 0),
    ("(-2147483647 - 1) << 1", 0),
    ("9223372036854775807L + 1", -(2**63)),
])
def test_each_signed_overflow_warns(expr: str, value: int) -> None:
    ty = "long" if "L" in expr else "int"
    unit = tc_lang.frontend(f"__global__ void k({ty}* o) {{\n  {ty} x = {expr};\n  *o = x;\n}}\n")
    assert [w.code for w in unit.warnings] == ["W0301"], expr
    assert _folded(unit, "x") == value


@pytest.mark.parametrize("expr", [
    "2147483647 + 0",
    "-2147483647 - 1",  # INT_MIN itself fits
    "4294967295u + 1u",  # unsigned arithmetic wraps by definition
    "0u - 1u",
    "1 << 31",  # a shift into the sign bit: accepted, as GCC and Clang do
    "-1 << 31",
    "2147483647L + 1",  # computed in long
    "(char) 127 + (char) 1",  # promoted to int: 128 fits
])
def test_no_warning_where_c_defines_the_result(expr: str) -> None:
    assert _warnings(f"  long x = {expr};\n  *o = (int) x;") == []


def test_an_overflow_in_a_macro_is_located_at_its_use() -> None:
    src = "#define BIG 2147483647\n__global__ void k(int* o) {\n  *o = BIG + 1;\n}\n"
    [w] = tc_lang.frontend(src, filename="m.tc").warnings
    assert (w.code, w.location.file, w.location.line) == ("W0301", "m.tc", 3)


def test_shift_count_out_of_range_warns() -> None:
    body = "\n".join([
        "  int a = N << 40;",  # line 2
        "  int b = N >> -1;",
        "  int d = c << 32;",  # char promotes to int: 32 bits
        "  N <<= 32;",
        "  long e = L << 40;",  # fine: long is 64 bits
        "  int f = N << 31;",
        "  int g = c << 31;",
        "  *o = a + b + d + (int) e + f + g + N;",
    ])
    assert _warnings(body) == [("W0302", 2, 11), ("W0302", 3, 11), ("W0302", 4, 11), ("W0302", 5, 3)]
    unit = tc_lang.frontend("__global__ void k(int* o, int N) {\n  *o = N << 40;\n}\n")
    [w] = unit.warnings
    assert "shift count 40 >= width of type 'int' (32 bits)" in w.message


def test_shift_of_a_tile_by_a_constant_out_of_range_warns() -> None:
    body = "  int x[16] = 0 ... 16;\n  int y[16] = x << 33;\n  *(o + (0 ... 16)) = y;"
    assert _warnings(body) == [("W0302", 3, 15)]


def test_a_constant_shifted_out_of_range_stays_an_error() -> None:
    with pytest.raises(tc_lang.TcCompileError) as info:
        tc_lang.frontend("__global__ void k(int* o) {\n  *o = 1 << 40;\n}\n")
    assert info.value.first.code == "E0410"


def test_warnings_are_reported_once_with_the_parsers() -> None:
    # a dimension is checked more than once (its type, then the typed tree): one warning; the
    # parser's inserted ';' comes first. (1 << 30) * 8 wraps to 0 in int: the dimension is 16.
    src = ("__global__ void k(int* o, int N) {\n  int n[16] = 0 ... 16\n"
           "  int m[(1 << 30) * 8 / 1073741824 + 16] = N << 32;\n  *(o + n) = m;\n}\n")
    unit = tc_lang.frontend(src)
    assert [(w.code, w.location.line) for w in unit.warnings] == [
        ("W0201", 2), ("W0301", 3), ("W0302", 3)]


def test_lint_prints_the_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "o.tc"
    f.write_text("__global__ void k(int* o, int N) {\n  *o = (2147483647 + 1) + (N << 33);\n}\n")
    assert lint([str(f)]) == 0
    err = capsys.readouterr().err
    assert f"{f}:2:9: warning[W0301]" in err
    assert f"{f}:2:28: warning[W0302]" in err
