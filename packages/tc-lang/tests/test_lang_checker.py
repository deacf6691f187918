"""The checker: types and shapes of every construct, and one negative test per diagnostic
(code, message, line and column of the offending text)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest

import tc_lang
from tc_lang import ast
from tc_lang.diagnostics import Diagnostic, TcCompileError
from tc_lang.types import (
    BOOL, FP16, FP32, FP64, INT32, INT64, UINT32, PointerType, ScalarType, TileType, Type,
)

HEAD = "__global__ void k(int n, float* p, half* h, int* q, bool flag) {\n"


def unit_of(body: str, defines: Mapping[str, str | int] | None = None,
            extra: str = "") -> ast.TranslationUnit:
    return tc_lang.frontend(extra + HEAD + body + "\n}\n", defines, filename="k.tc")


def decl_types(body: str, defines: Mapping[str, str | int] | None = None,
               extra: str = "") -> dict[str, Type | None]:
    unit = unit_of(body, defines, extra)
    out: dict[str, Type | None] = {}
    for f in unit.functions:
        if f.kind != "global":
            continue
        for s in f.body.items:
            if isinstance(s, ast.DeclStmt):
                for d in s.decls:
                    out[d.name] = d.ty
    return out


def init_of(body: str, name: str, defines: Mapping[str, str | int] | None = None,
            extra: str = "") -> ast.Expr:
    unit = unit_of(body, defines, extra)
    for s in unit.kernels()[0].body.items:
        if isinstance(s, ast.DeclStmt):
            for d in s.decls:
                if d.name == name and d.init is not None:
                    return d.init
    raise AssertionError(name)


def T(shape: tuple[int, ...], el: ScalarType | PointerType) -> TileType:
    return TileType(shape, el)


# ------------------------------------------------------------------------------ positive


def test_promotion_and_broadcasting() -> None:
    t = decl_types(
        "int r[16] = 0 ... 16;\n"
        "float x[16, 8] = 3.14f;\n"
        "float u[16] = x[:, +];\n"
        "float v[16, 32] = u[:, newaxis];\n"
        "int a = n + 1;\n"
        "long b = n + 1l;\n"
        "half hh = *h;\n"
        "float c = hh * 1.0f;\n"
        "double d = c * 0.5;\n"
        "unsigned e = 1u + n;\n"
        "bool m[16] = r < n;\n"
        "float w[16, 16] = u[:, newaxis] + u[newaxis, :];\n"
    )
    assert t == {
        "r": T((16,), INT32), "x": T((16, 8), FP32), "u": T((16,), FP32),
        "v": T((16, 32), FP32), "a": INT32, "b": INT64, "hh": FP16, "c": FP32, "d": FP64,
        "e": UINT32, "m": T((16,), BOOL), "w": T((16, 16), FP32),
    }


def test_expression_types() -> None:
    body = (
        "int r[16] = 0 ... 16;\n"
        "float t[16, 8] = 0;\n"
        "float s = t[+, :][max];\n"
        "int mix = n + (0 ... 4)[+];\n"
        "half g[8, 16] = ^(half[16, 8]) t;\n"
        "float pe[8, 16] = t[^1, ^0];\n"
        "float* ptrs[16] = p + r;\n"
        "int* qq[4, 16] = q + r[newaxis, :];\n"
        "float loaded[16] = *?(r < n) ptrs;\n"
        "float sel[16] = r < n ? loaded : 0;\n"
        "float e[16] = exp(loaded) + sqrtf(2.0f) + fma(loaded, loaded, 1.0f);\n"
        "half hm = max(*h, *h);\n"
        "int old = atomic_add(q, 1);\n"
        "int olds[16] = atomic_max(q + r, r, r < n);\n"
        "int cas = atomic_cas(q, 0, 1);\n"
        "long sz = sizeof(float[4]);\n"
        "float bits = bitcast<float>(0x3F800000);\n"
        "int pid = get_program_id(1) + get_num_programs(2);\n"
    )
    t = decl_types(body)
    assert t["s"] == FP32 and t["mix"] == INT32
    assert t["g"] == T((8, 16), FP16) and t["pe"] == T((8, 16), FP32)
    assert t["ptrs"] == T((16,), PointerType(FP32))
    assert t["qq"] == T((4, 16), PointerType(INT32))
    assert t["olds"] == T((16,), INT32)
    assert init_of(body, "sz").const == 16
    assert init_of(body, "bits").const == 1.0
    assert init_of(body, "e").ty == T((16,), FP32)
    assert init_of(body, "sel").ty == T((16,), FP32)
    assert init_of(body, "hm").ty == FP16
    assert init_of(body, "cas").ty == INT32


def test_matmul_and_reduction_types() -> None:
    body = (
        "half a[64, 32] = 0;\nhalf b[32, 16] = 0;\nfloat c[64, 16] = a @ b;\n"
        "char i8[16, 16] = 0;\nint ci[16, 16] = i8 @ i8;\n"
        "bool m[16] = flag;\nint cnt = m[+];\n"
    )
    assert init_of(body, "c").ty == T((64, 16), FP32)
    assert init_of(body, "ci").ty == T((16, 16), INT32)
    assert init_of(body, "cnt").ty == INT32


def test_constant_folding() -> None:
    body = (
        "int a = (TM * 2 + 1) / 2;\nint b = -7 / 2;\nint c = -7 % 2;\n"
        "unsigned d = 0u - 1u;\nint e = 1 << 4 | 3;\nbool f = 3 > 2 && 0;\n"
        "int g = flag ? 1 : 2;\nint h5 = 1 ? 5 : 6;\nfloat i = (float) 1 / 3;\n"
        "int j = (int) 2.9;\nint x[TM / 16] = 0;\nfloat inf = F32_INFINITY;\n"
        "float nan = F32_NAN;\nhalf hinf = -F16_INFINITY;\nconst int K = 4;\nint dims[K, K] = 0;\n"
        "int mm = max(3, 9) + min(2, 1);\n"
    )
    defines = {"TM": 64}
    consts = {n: init_of(body, n, defines).const for n in
              ["a", "b", "c", "d", "e", "f", "g", "h5", "i", "j"]}
    assert consts == {"a": 64, "b": -3, "c": -1, "d": 4294967295, "e": 19, "f": False,
                      "g": None, "h5": 5, "i": pytest.approx(1 / 3), "j": 2}
    t = decl_types(body, defines)
    assert t["x"] == T((4,), INT32) and t["dims"] == T((4, 4), INT32)
    assert init_of(body, "inf", defines).const == math.inf
    nan = init_of(body, "nan", defines).const
    assert isinstance(nan, float) and math.isnan(nan)
    assert init_of(body, "hinf", defines).const == -math.inf
    assert init_of(body, "hinf", defines).ty == FP16
    assert init_of(body, "mm", defines).const == 10


def test_statements_check() -> None:
    unit = unit_of(
        "for (int i = 0; i < n; i++) { if (i == 3) break; if (i == 4) continue; }\n"
        "while (n > 0) n--;\n"
        "do { n -= 1; } while (n > 0);\n"
        "if (flag) { float x = 1; } else { float x = 2; }\n"
        "{ int n2 = n; { int n2 = 3; } }\n"
        "__debug_barrier();\n"
        "return;"
    )
    assert unit.kernels()[0].return_ty == ScalarType("void")


def test_device_helpers() -> None:
    extra = (
        "__device__ float[BLOCK] twice(float x[BLOCK]) { return x * 2.0f; }\n"
        "__device__ float sq(float v) { if (v > 0) return v * v; else return 0; }\n"
    )
    body = ("float t[BLOCK] = twice(*(p + (0 ... BLOCK)));\n"
            "float s = sq(1.5f) + sq(n);\n"
            "float u[BLOCK] = twice(1.0f);\n")
    unit = unit_of(body, {"BLOCK": 64}, extra)
    helper = unit.function("twice")
    assert helper is not None and helper.return_ty == T((64,), FP32)
    assert helper.params[0].ty == T((64,), FP32)
    assert init_of(body, "t", {"BLOCK": 64}, extra).ty == T((64,), FP32)
    assert init_of(body, "s", {"BLOCK": 64}, extra).ty == FP32


def test_pointer_offsets_stay_32_bit() -> None:
    body = "int r[16] = 0 ... 16;\nfloat* x[16] = p + (r * n + 1);\n"
    init = init_of(body, "x")
    assert isinstance(init, ast.Binary) and init.right.ty == T((16,), INT32)
    assert init.ty == T((16,), PointerType(FP32))


def test_typed_tree_keeps_the_declared_and_value_types() -> None:
    unit = unit_of("half y[16] = 1.0f;")
    d = unit.kernels()[0].body.items[0]
    assert isinstance(d, ast.DeclStmt)
    assert d.decls[0].ty == T((16,), FP16)
    assert d.decls[0].init is not None and d.decls[0].init.ty == FP32


# ------------------------------------------------------------------------------ negative


def diags(body: str, defines: Mapping[str, str | int] | None = None,
          extra: str = "") -> tuple[type[TcCompileError], list[Diagnostic]]:
    with pytest.raises(TcCompileError) as info:
        unit_of(body, defines, extra)
    return type(info.value), list(info.value.diagnostics)


NEGATIVE = [
    # (body line, code, message part, the text the caret points at, exception class)
    ("int x = y + 1;", "E0301", "use of undeclared identifier 'y'", "y", "TcNameError"),
    ("int n = 1;", "E0302", "redefinition of 'n'", "n = 1", "TcNameError"),
    ("int x = foo(1);", "E0303", "call of unknown function 'foo'", "foo(1)", "TcNameError"),
    ("int x = 1 + p * 2;", "E0401", "operator '*' cannot combine", "p * 2", "TcTypeError"),
    ("int x = get_program_id();", "E0402", "'get_program_id' takes 1 argument, not 0",
     "get_program_id()", "TcTypeError"),
    ("int x = get_program_id(n);", "E0403", "must be an integer constant", "n)", "TcTypeError"),
    ("int* x = p;", "E0404", "cannot convert 'float*' to 'int*'", "p;", "TcTypeError"),
    ("long x = 99999999999999999999;", "E0405", "too large", "9999", "TcTypeError"),
    ("(n + 1) = 3;", "E0406", "not assignable", "n + 1", "TcTypeError"),
    ("return 1;", "E0407", "void function cannot return a value", "1;", "TcTypeError"),
    ("float x = *n;", "E0408", "cannot dereference 'int'", "n;", "TcTypeError"),
    ("int r[16] = 0 ... 16;\n  float x[16] = *?(r) (p + r);", "E0409", "mask must be bool",
     "r) (", "TcTypeError"),
    ("int x = 1 / 0;", "E0410", "division by zero", "1 / 0", "TcTypeError"),
    ("half x = bitcast<half>(n);", "E0411", "equal width", "bitcast", "TcTypeError"),
    ("const int c = 1;\n  c = 2;", "E0412", "cannot assign to 'c': it is const", "c = 2",
     "TcTypeError"),
    ("void v;", "E0413", "'v' cannot have type 'void'", "void", "TcTypeError"),
    ("int* a = &n;", "E0414", "cannot take the address", "&n", "TcTypeError"),
    ("float* x __aligned(3) = p;", "E0415", "'aligned' must be a power of two", "__aligned",
     "TcTypeError"),
    ("int x = get_program_id(3);", "E0417", "must be 0, 1 or 2, not 3", "3)", "TcTypeError"),
    ("int a[16] = 0 ... 16;\n  int b[8] = 0 ... 8;\n  int c[16] = a + b;", "E0501",
     "cannot broadcast shapes [16] and [8]", "a + b", "TcShapeError"),
    ("float x[24] = 0;", "E0502", "tile 'x' has 24 elements", "float x[24]", "TcShapeError"),
    ("float x[0] = 0;", "E0503", "must be positive", "0]", "TcShapeError"),
    ("float t[4, 4] = 0;\n  float u[4] = t[+];", "E0504", "uses 1 axes of a tile of rank 2",
     "t[+]", "TcShapeError"),
    ("float t[4, 4] = 0;\n  float u[4, 4] = t[^0, ^0];", "E0505", "not a permutation",
     "t[^0, ^0]", "TcShapeError"),
    ("float a[4, 8] = 0;\n  float c[4, 4] = a @ a;", "E0506", "inner dimensions differ",
     "a @ a", "TcShapeError"),
    ("int r[16] = 0 ... 16;\n  if (r < n) n = 1;", "E0507", "must be a scalar", "r < n",
     "TcShapeError"),
    ("float x = n[+];", "E0508", "subscript of a scalar", "n[+]", "TcShapeError"),
    ("float x[16] = 0;\n  float y[16] = ^x;", "E0509", "rank 2 or more", "^x", "TcShapeError"),
    ("int r[16] = 4 ... 4;", "E0510", "empty range 4 ... 4", "4 ... 4", "TcShapeError"),
    ("float x[16] = 0;\n  float y = x;", "E0511", "cannot convert a tile of shape [16]", "x;",
     "TcShapeError"),
    ("break;", "E0210", "'break' outside a loop", "break", "TcSyntaxError"),
    ("int r[TM] = 0 ... n;", "E0403", "bounds of a range must be integer constants", "n;",
     "TcTypeError"),
]


@pytest.mark.parametrize(("body", "code", "message", "at", "cls"),
                         NEGATIVE)
def test_diagnostic(body: str, code: str, message: str, at: str, cls: str) -> None:
    exc, ds = diags(body, {"TM": 16})
    d = ds[0]
    assert exc.__name__ == cls
    assert (d.code, message in d.message) == (code, True), d.render()
    lines = (HEAD + body).splitlines()
    line = max(i for i, text in enumerate(lines, 1) if at in text)
    assert (d.location.file, d.location.line) == ("k.tc", line)
    assert d.location.col == lines[line - 1].index(at) + 1, d.render()
    assert d.source_line == lines[line - 1]


def test_unknown_attribute() -> None:
    exc, ds = diags("float* x __attribute__((frob)) = p;")
    assert exc.__name__ == "TcNameError"
    assert ds[0].code == "E0307" and "unknown attribute 'frob'" in ds[0].message


UNIT_NEGATIVE = [
    # (whole source, code, message part, the text the caret points at)
    ("__device__ float f(float x) { return g(x); }\n"
     "__device__ float g(float x) { return f(x); }\n", "E0305",
     "recursive call (f -> g -> f)", "f(x); }"),
    ("__global__ void k(int n) {}\n__global__ void t() { k(1); }\n", "E0306",
     "'k' is a __global__ kernel and cannot be called", "k(1)"),
    ("__global__ void k(int n) {}\n__global__ void k(int m) {}\n", "E0304",
     "redefinition of function 'k' (first defined at line 1)", "__global__ void k(int m)"),
    ("__device__ float f(float x) {\n  if (x > 0) return x;\n}\n", "E0407",
     "does not return a value on every path", "__device__"),
    ("__global__ void t(float x[16]) {}\n", "E0416", "kernel parameter 'x' cannot be a tile",
     "float x[16]"),
    ("__device__ float f(float x) { return x; }\n__global__ void t() { float y = f(1, 2); }\n",
     "E0402", "'f' takes 1 argument, not 2", "f(1, 2)"),
    ("__device__ float f(float x[8]) { return 0; }\n__global__ void t(float* p) { f(p); }\n",
     "E0404", "cannot convert pointer 'float*' to 'float' for argument 1 of 'f'", "p); }"),
    ("__global__ int t() { }\n", "E0407", "kernel 't' must return void, not 'int'", "int t"),
    ("__device__ float f() { return; }\n", "E0407", "'return' without a value", "return;"),
    ("__global__ void t(float* p) { int x = exp; }\n", "E0301",
     "use of undeclared identifier 'exp'", "exp;"),
]


@pytest.mark.parametrize(("src", "code", "message", "at"), UNIT_NEGATIVE)
def test_unit_diagnostic(src: str, code: str, message: str, at: str) -> None:
    with pytest.raises(TcCompileError) as info:
        tc_lang.frontend(src, filename="k.tc")
    d = info.value.first
    assert d.code == code and message in d.message, d.render()
    lines = src.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if at in text)
    assert (d.location.line, d.location.col) == (line, lines[line - 1].index(at) + 1), d.render()


def test_exp_used_as_a_value_hints_a_call() -> None:
    with pytest.raises(TcCompileError) as info:
        tc_lang.frontend("__global__ void t(float* p) { int x = exp; }\n")
    assert info.value.first.hint == "'exp' is a function; call it with ( )"


def test_all_independent_errors_are_reported_together() -> None:
    exc, ds = diags("int a = y;\n  float x[24] = 0;\n  int* z = p;")
    assert [d.code for d in ds] == ["E0301", "E0502", "E0404"]
    assert exc.__name__ == "TcNameError"  # the class of the first


def test_no_cascade_after_a_failed_operand() -> None:
    # one report per undeclared name per function; operations on failed operands stay quiet
    _, ds = diags("int a = y + 1;\n  int b = a * 2 + (y - 1) + z;")
    assert [(d.code, d.location.line) for d in ds] == [("E0301", 2), ("E0301", 3)]
    assert "'z'" in ds[1].message


def test_missing_define_hints() -> None:
    _, ds = diags("int r[TM] = 0 ... TM;")
    assert len(ds) == 1 and ds[0].hint == "is 'TM' a macro that needs a define (-D TM=...)?"
    with pytest.raises(tc_lang.TcSyntaxError) as info:
        tc_lang.frontend("__global__ void k(TYPE* p) {}", filename="k.tc")
    assert info.value.first.message == "unknown type name 'TYPE'"
    assert info.value.first.hint is not None and "-D TYPE=" in info.value.first.hint


def test_hint_for_power_of_two() -> None:
    _, ds = diags("float x[24] = 0;")
    assert ds[0].hint == "tile 'x' has 24 elements; tile sizes must be powers of two"


def test_undeclared_suggests_a_close_name() -> None:
    _, ds = diags("int value = 1;\n  int x = valeu;")
    assert ds[0].hint == "did you mean 'value'?"


def test_internal_errors_become_compile_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from tc_lang import checker

    def boom(self: object, e: ast.Expr) -> ast.Expr:
        raise KeyError("oops")

    monkeypatch.setattr(checker.Checker, "x_Name", boom)
    with pytest.raises(TcCompileError) as info:
        unit_of("int x = n;")
    assert "internal compiler error" in info.value.first.message
    monkeypatch.setenv("TC_FRONTEND_DEBUG", "1")
    with pytest.raises(KeyError):
        unit_of("int x = n;")


def test_wrong_python_argument_types_raise_type_error() -> None:
    with pytest.raises(TypeError, match="must be str or bytes"):
        tc_lang.frontend(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tc_lang.parse(42)  # type: ignore[arg-type]
