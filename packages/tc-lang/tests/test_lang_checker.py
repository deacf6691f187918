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
    src = extra + HEAD + body + "\n}\n"
    unit = tc_lang.frontend(src, defines, filename="k.tc")
    # every test kernel also round-trips through the printer
    parsed = tc_lang.parse(tc_lang.preprocess(src, defines))
    assert tc_lang.parse(tc_lang.to_source(parsed)) == parsed
    return unit


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


def test_half_and_bf16_rank_between_long_and_float() -> None:
    t = decl_types(
        "long l = n;\nhalf x = *h;\nbf16 y = 0;\n"
        "half r1 = l * x;\nbf16 r2 = y + l;\nfloat r3 = x + y;\nfloat r4 = x * 1.0f;\n"
        "double r5 = y * 1.0;\n"
    )
    inits = {k: init_of("long l = n;\nhalf x = *h;\nbf16 y = 0;\nhalf r1 = l * x;\n"
                        "bf16 r2 = y + l;\nfloat r3 = x + y;\n", k).ty for k in ("r1", "r2", "r3")}
    assert inits == {"r1": FP16, "r2": ScalarType("bf16"), "r3": FP32}
    assert t["r4"] == FP32 and t["r5"] == FP64


def test_signed_and_unsigned_semantics() -> None:
    body = (
        "int a = -7 / 2;\nunsigned b2 = 4294967289u / 2u;\nint c = -7 % 3;\n"
        "unsigned d = 4294967289u % 10u;\nbool lt = -1 < 1u;\nbool slt = -1 < 1;\n"
        "int sr = -8 >> 1;\nunsigned ur = 0x80000000u >> 4;\nunsigned cu = (unsigned) -1;\n"
        "uint8 c8 = (uint8) 300;\nchar sc = (char) 200;\nlong zx = (long) (unsigned) -1;\n"
        "long sx = (long) -1;\nint sh = (short) 40000;\n"
        "unsigned uu = n;\nunsigned q1 = uu / n;\nbool q2 = uu < n;\nunsigned q3 = uu >> 1;\n"
        "int q4 = n >> 1;\nlong q5 = uu + (long) n;\nunsigned long q6 = uu + 1ul;\n"
    )
    want = {"a": -3, "b2": 2147483644, "c": -1, "d": 9, "lt": False, "slt": True, "sr": -4,
            "ur": 0x08000000, "cu": 0xFFFFFFFF, "c8": 44, "sc": -56, "zx": 0xFFFFFFFF, "sx": -1,
            "sh": -25536}
    unit = unit_of(body)
    inits = {d.name: d.init for s in unit.kernels()[0].body.items
             if isinstance(s, ast.DeclStmt) for d in s.decls if d.init is not None}
    assert {k: inits[k].const for k in want} == want
    # the types the lowering reads to pick udiv/sdiv, icmp ult/slt, lshr/ashr, zext/sext
    assert inits["q1"].ty == UINT32
    q2 = inits["q2"]
    assert isinstance(q2, ast.Binary) and q2.ty == BOOL
    assert q2.left.ty is not None and q2.right.ty is not None
    assert tc_lang.rules.binary_types("<", q2.left.ty, q2.right.ty)[0] == UINT32
    assert inits["q3"].ty == UINT32 and inits["q4"].ty == INT32
    assert inits["q5"].ty == INT64 and inits["q6"].ty == ScalarType("uint64")


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos", "exp2",
                                  "log2", "floor", "ceil"])
def test_unary_math_builtins(name: str) -> None:
    body = (f"float x[16] = 1;\nfloat t[16] = {name}(x);\nhalf hs = {name}(*h);\n"
            f"double ds = {name}(1.0);\nfloat fs = {name}(2.0f);\n")
    inits = {k: init_of(body, k).ty for k in ("t", "hs", "ds", "fs")}
    assert inits == {"t": T((16,), FP32), "hs": FP16, "ds": FP64, "fs": FP32}
    expected_int = INT32 if name == "abs" else FP32
    assert init_of(f"int i = {name}(n);", "i").ty == expected_int


def test_sqrtf_fma_select_min_max() -> None:
    body = (
        "int r[16] = 0 ... 16;\nfloat x[16] = 1;\nfloat s = sqrtf(n);\n"
        "float f3[16] = fma(x, 2.0f, x);\nhalf fh = fma(*h, *h, *h);\n"
        "float sel[16] = select(r < n, x, 0.0f);\nint ss = select(flag, 1, n);\n"
        "float mx[16] = max(x, 1.0f);\nint mn[16] = min(r, r);\nfloat m2 = max(n, 2.5f);\n"
        "float m3[16, 16] = min(x[:, newaxis], x[newaxis, :]);\n"
    )
    got = {k: init_of(body, k).ty for k in ("s", "f3", "fh", "sel", "ss", "mx", "mn", "m2",
                                             "m3")}
    assert got == {"s": FP32, "f3": T((16,), FP32), "fh": FP16, "sel": T((16,), FP32),
                   "ss": INT32, "mx": T((16,), FP32), "mn": T((16,), INT32), "m2": FP32,
                   "m3": T((16, 16), FP32)}


def test_atomics_return_the_old_values() -> None:
    body = (
        "int r[16] = 0 ... 16;\nint* qs[16] = q + r;\n"
        "int a1 = atomic_add(q, 1);\nint a2[16] = atomic_add(qs, r, r < n);\n"
        "int x1 = atomic_max(q, n, flag);\nint x2[16] = atomic_max(qs, 3);\n"
        "int n1 = atomic_min(q, n);\nint n2[16] = atomic_min(qs, r, r > 2);\n"
        "int w1 = atomic_xchg(q, 7);\nint w2[16] = atomic_xchg(qs, r, r < 8);\n"
        "int c1 = atomic_cas(q, 0, 1);\nint c2[16] = atomic_cas(qs, r, 0);\n"
        "float f1 = atomic_add(p, 1.0f);\nhalf f2[16] = atomic_add(h + r, 1.0f);\n"
    )
    got = {k: init_of(body, k).ty for k in
           ("a1", "a2", "x1", "x2", "n1", "n2", "w1", "w2", "c1", "c2", "f1", "f2")}
    scalar, tile = INT32, T((16,), INT32)
    assert got == {"a1": scalar, "a2": tile, "x1": scalar, "x2": tile, "n1": scalar,
                   "n2": tile, "w1": scalar, "w2": tile, "c1": scalar, "c2": tile, "f1": FP32,
                   "f2": T((16,), FP16)}


def test_bf16_and_half_dot_give_float() -> None:
    body = ("bf16 a[16, 32] = 0;\nbf16 b2[32, 8] = 0;\nfloat c[16, 8] = a @ b2;\n"
            "half ha[16, 32] = 0;\nhalf hb[32, 8] = 0;\nfloat hc[16, 8] = ha @ hb;\n"
            "double da[16, 16] = 0;\ndouble dc[16, 16] = da @ da;\n")
    assert init_of(body, "c").ty == T((16, 8), FP32)
    assert init_of(body, "hc").ty == T((16, 8), FP32)
    assert init_of(body, "dc").ty == T((16, 16), FP64)


def test_reductions_and_permutations_along_any_axis() -> None:
    body = (
        "float t[4, 8, 16] = 0;\nfloat a[4, 16] = t[:, +, :];\nfloat b2[8, 16] = t[max, :, :];\n"
        "float c[4, 8] = t[:, :, min];\nfloat d[16, 4, 8] = t[^2, ^0, ^1];\n"
        "float e[4, 8] = t[:, :, -];\nfloat f[4] = t[:, +, max];\n"
        "float g[4, 1, 8] = t[:, newaxis, :, +];\nfloat s = t[+, +, +];\n"
    )
    got = {k: init_of(body, k).ty for k in ("a", "b2", "c", "d", "e", "f", "g", "s")}
    assert got == {"a": T((4, 16), FP32), "b2": T((8, 16), FP32), "c": T((4, 8), FP32),
                   "d": T((16, 4, 8), FP32), "e": T((4, 8), FP32), "f": T((4,), FP32),
                   "g": T((4, 1, 8), FP32), "s": FP32}


def test_masked_loads_stores_and_tile_ternary() -> None:
    body = (
        "int r[16] = 0 ... 16;\nbool m[16] = r < n;\nfloat* px[16] = p + r;\n"
        "float v[16] = *?(m) px;\nfloat w[16] = m ? *px : -F32_INFINITY;\n"
        "float b2[4, 16] = *?(m[newaxis, :]) (p + r[newaxis, :] + (0 ... 4)[:, newaxis]);\n"
        "*?(m) px = v;\n*?(flag) p = 1.0f;\n"
    )
    unit = unit_of(body)
    items = unit.kernels()[0].body.items
    assert init_of(body, "v").ty == T((16,), FP32)
    w = init_of(body, "w")
    assert isinstance(w, ast.Conditional) and w.ty == T((16,), FP32)
    assert isinstance(w.then, ast.Deref) and w.then.ty == T((16,), FP32)
    assert init_of(body, "b2").ty == T((4, 16), FP32)
    stores = [s.expr for s in items if isinstance(s, ast.ExprStmt)]
    assert [type(x).__name__ for x in stores] == ["Assign", "Assign"]
    for x in stores:
        assert isinstance(x, ast.Assign) and isinstance(x.target, ast.Deref)
        assert x.target.mask is not None and x.target.mask.ty is not None
    assert stores[1] is not None and stores[1].ty == FP32


def test_tile_casts_and_bitcasts() -> None:
    body = (
        "int r[16] = 0 ... 16;\nfloat a[16] = (float) r;\nfloat b2[4, 4] = (float[4, 4]) r;\n"
        "half c[16, 16] = (half[16, 16]) r;\nfloat d[8] = (float[8]) 1;\n"
        "int e[16] = bitcast<int>(a);\nhalf f = bitcast<half>((short) 0x3C00);\n"
        "volatile int v = 1;\nconst volatile float cv = 2;\n"
    )
    got = {k: init_of(body, k).ty for k in ("a", "b2", "c", "d", "e", "f")}
    assert got == {"a": T((16,), FP32), "b2": T((4, 4), FP32), "c": T((16, 16), FP16),
                   "d": T((8,), FP32), "e": T((16,), INT32), "f": FP16}
    assert init_of(body, "f").const == 1.0
    assert init_of(body, "v").const == 1


def test_several_kernels_and_helpers_taking_and_returning_tiles() -> None:
    src = (
        "__device__ float[N] scale(float x[N], float s) { return x * s; }\n"
        "__device__ float total(float x[N]) { return x[+]; }\n"
        "__global__ void first(float* p) {\n"
        "  float v[N] = scale(*(p + (0 ... N)), 2.0f);\n  *p = total(v);\n}\n"
        "__global__ void second(float* p, float* q) {\n  *q = total(*(p + (0 ... N)));\n}\n"
    )
    unit = tc_lang.frontend(src, {"N": 32}, filename="k.tc")
    assert [k.name for k in unit.kernels()] == ["first", "second"]
    scale, total = unit.function("scale"), unit.function("total")
    assert scale is not None and scale.return_ty == T((32,), FP32)
    assert total is not None and total.return_ty == FP32
    assert total.params[0].ty == T((32,), FP32)


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
    ("int x = n % 0;", "E0410", "integer division by zero: the divisor of '%' is 0", "n % 0", "TcTypeError"),
    ("int r[16] = 0 ... 16;\n  int x[16] = r / (1 - 1);", "E0410", "integer division by zero", "r / (1 - 1)",
     "TcTypeError"),
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
    ("int x = get_num_programs(3);", "E0417", "must be 0, 1 or 2, not 3", "3)", "TcTypeError"),
    ("int x = get_num_programs(n);", "E0403", "the axis of 'get_num_programs' must be an integer"
     " constant", "n)", "TcTypeError"),
    ("int o = atomic_cas(q, 1);", "E0402", "'atomic_cas' takes 3 arguments, not 2",
     "atomic_cas", "TcTypeError"),
    ("int r[16] = 0 ... 16;\n  int o[16] = atomic_add(q + r, r, r);", "E0409",
     "a mask must be bool, not 'int[16]'", "r);", "TcTypeError"),
    ("int r[16] = 0 ... 16;\n  int s[8] = 0 ... 8;\n  *?(r < n) (p + s) = 1.0f;", "E0501",
     "mask and pointer: cannot broadcast shapes [8] and [16]", "*?(r < n)", "TcShapeError"),
    ("int r[16] = 0 ... 16;\n  int s[8] = 0 ... 8;\n  float y[16] = max(r, s);", "E0501",
     "arguments of 'max': cannot broadcast shapes [16] and [8]", "max(r, s)", "TcShapeError"),
    ("float y = fma(1.0f, 2.0f);", "E0402", "'fma' takes 3 arguments, not 2", "fma",
     "TcTypeError"),
    ("__debug_barrier(1);", "E0402", "'__debug_barrier' takes 0 arguments, not 1",
     "__debug_barrier", "TcTypeError"),
    ("int x = 1 << 40;", "E0410", "shift by 40 is out of range for 'int'", "1 << 40",
     "TcTypeError"),
    ("int r[16] = 0 ... 16;\n  float t[8] = (float[8]) r;", "E0511",
     "cannot cast a tile of shape [16] to shape [8]", "(float[8]) r", "TcShapeError"),
    ("float x = exp(p);", "E0401", "'exp' needs a number, not 'float*'", "p)", "TcTypeError"),
    ("bool* b = (bool*) q;\n  bool o = atomic_xchg(b, flag);", "E0401",
     "'atomic_xchg' cannot operate on 'bool' memory", "b, flag", "TcTypeError"),
    ("void* v = (void*) p;\n  float* w = (float*)(v + 4);", "E0401",
     "operator '+' cannot offset a 'void*'", "v + 4", "TcTypeError"),
    ("long d = q - p;", "E0401", "cannot subtract 'float*' from 'int*'", "q - p", "TcTypeError"),
    # (a pointer to pointers was "must be a pointer, not 'float**'")
    ("float** pp = (float**) p;\n  float* o = atomic_xchg(pp, p);", "E0408",
     "the first argument of 'atomic_xchg' must be a pointer to numbers, not 'float**'", "pp, p",
     "TcTypeError"),
    ("int o = atomic_add(n, 1);", "E0408", "the first argument of 'atomic_add' must be a pointer, "
     "not 'int'", "n, 1", "TcTypeError"),
    ("long r[4] = 4294967296 ... 4294967300;", "E0403",
     "the elements of the range 4294967296 ... 4294967300 do not fit in 'int'", "4294967296 ...",
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
    assert (ds[0].location.line, ds[0].location.col) == (2, 25), ds[0].render()


def test_caret_underlines_the_whole_range() -> None:
    _, ds = diags("int a[16] = 0 ... 16;\n  int b[8] = 0 ... 8;\n  int c[16] = a + b;")
    assert ds[0].render().splitlines()[1:3] == [
        "      int c[16] = a + b;",
        "                  ^~~~~",
    ]
    assert ds[0].render().splitlines()[0] == (
        "k.tc:4:15: error[E0501]: cannot broadcast shapes [16] and [8] for '+'")


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
    ("__global__ void t(float* p __readonly __writeonly) {}\n", "E0415",
     "'readonly' and 'writeonly' exclude each other", "__writeonly"),
    ("__global__ void t(int n __noalias) {}\n", "E0415", "'noalias' applies to pointers, not 'int'",
     "__noalias"),
    ("__global__ void t(float* p __multipleof(8)) {}\n", "E0415",
     "'multipleof' applies to integers, not 'float*'", "__multipleof"),
    ("__global__ void t(float* p __aligned) {}\n", "E0415",
     "attribute 'aligned' needs a value, e.g. __aligned(16)", "__aligned"),
    ("__global__ void t(int n __multipleof(n)) {}\n", "E0301", "use of undeclared identifier 'n'",
     "n)"),
    ("__device__ float f() { return; }\n", "E0407", "'return' without a value", "return;"),
    ("__global__ void t(float* p) { int x = exp; }\n", "E0301",
     "use of undeclared identifier 'exp'", "exp;"),
    # (before: accepted; the attribute was ignored)
    ("__global__ void t(float* p __readonly) { *(p + 1) = 2.0; }\n", "E0412",
     "cannot store through 'p': it is declared __readonly", "*(p + 1)"),
    ("__global__ void t(float* p __writeonly, float* q) { *q = *(p + 1); }\n", "E0412",
     "cannot load through 'p': it is declared __writeonly", "*(p + 1)"),
    ("__global__ void t(float* p __writeonly) { *p += 1.0; }\n", "E0412",
     "cannot load through 'p': it is declared __writeonly", "*p"),
    ("__global__ void t(float* p) { int a[65536 * 65536]; }\n", "E0503",
     "tile dimension must be positive, not 0", "65536 * 65536"),
]


def test_loads_through_readonly_stores_through_writeonly_pointers_and_wrapped_dimensions() -> None:
    tc_lang.frontend("__global__ void t(float* p __readonly, float* q) { *q = *(p + 1); }\n")
    tc_lang.frontend("__global__ void t(float* p __writeonly, float* q) {\n  int r[4] = 0 ... 4;\n"
                     "  *?(r < 2)(p + r) = *(q + r);\n  *p = 1.0;\n}\n")  # (stores only)
    with pytest.raises(TcCompileError) as info:
        tc_lang.frontend("__global__ void t(float* p) { int a[65536 * 65536]; }\n")
    assert "wraps around" in (info.value.first.hint or "")
    with pytest.raises(TcCompileError) as info:
        tc_lang.frontend("__global__ void t(float* p) { int a[0]; }\n")
    assert info.value.first.hint is None


@pytest.mark.parametrize(("src", "code", "message", "at"), UNIT_NEGATIVE)
def test_unit_diagnostic(src: str, code: str, message: str, at: str) -> None:
    with pytest.raises(TcCompileError) as info:
        tc_lang.frontend(src, filename="k.tc")
    d = info.value.first
    assert d.code == code and message in d.message, d.render()
    lines = src.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if at in text)
    assert (d.location.line, d.location.col) == (line, lines[line - 1].index(at) + 1), d.render()


def test_parameter_attributes_are_kept_with_their_values() -> None:
    unit = tc_lang.frontend(
        "__global__ void t(float* p __aligned(16) __noalias __readonly __retune,\n"
        "                  float* q __writeonly, int n __multipleof(N) __retune) {}\n", {"N": 8})
    p, q, n = unit.kernels()[0].params
    assert [(a.name, a.value.const if a.value else None) for a in p.attributes] == [
        ("aligned", 16), ("noalias", None), ("readonly", None), ("retune", None)]
    assert [a.name for a in q.attributes] == ["writeonly"]
    assert [(a.name, a.value.const if a.value else None) for a in n.attributes] == [
        ("multipleof", 8), ("retune", None)]


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
    assert ds[0].message == ("tile 'x' has 24 elements: a dimension of 24 is neither a power of two "
                             "nor a multiple of 16")
    assert ds[0].hint == "tile dimensions must be powers of two or multiples of 16"
    _, ds = diags("float y[64, 40] = 0;")
    assert [d.code for d in ds] == ["E0502"] and "a dimension of 40 " in ds[0].message
    _, ds = diags("int r[NB] = 0 ... 40;")
    assert "range 0 ... 40 has 40 elements" in [d.message for d in ds if d.code == "E0502"][0]


def test_tile_dimensions_may_be_multiples_of_16() -> None:
    # (a 128x192 matmul tile, an attention head of 96): no diagnostics, the shapes as written
    unit = tc_lang.frontend("__global__ void k(float* p) {\n  float acc[128, 192] = 0;\n"
                            "  int r[96] = 0 ... 96;\n  half h[48] = 0;\n}\n")
    decls = [d for stmt in unit.functions[0].body.items if isinstance(stmt, ast.DeclStmt) for d in stmt.decls]
    assert [d.ty.shape if isinstance(d.ty, TileType) else None for d in decls] == [(128, 192), (96,), (48,)]


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



def test_store_through_a_pointer_to_const_is_an_error() -> None:
    # `const T*`: nothing may be stored through it, directly or after pointer arithmetic; a
    # `T* const` may be written through but not reassigned; a cast drops the const (as in C)
    extra = "__device__ void f(const float* X) {\n  *X = 1.0;\n}\n"
    _, ds = diags("const float* c = p;\n  int i[16] = 0 ... 16;\n  *?(i < n) (c + i - 1) = 0.0;", extra=extra)
    assert [(d.code, d.location.line) for d in ds] == [("E0412", 2), ("E0412", 7)]
    assert all("it points to const" in d.message for d in ds) and "'X'" in ds[0].message and "'c'" in ds[1].message
    types = decl_types("float* const w = p;\n  *w = *p;\n  const float* r = p;\n  *((float*)r) = 2.0;")
    assert types["w"] == types["r"] == PointerType(FP32)
    _, ds = diags("float* const w = p;\n  w = p + 1;")
    assert [(d.code, d.message) for d in ds] == [("E0412", "cannot assign to 'w': it is const")]
    # the printer keeps each const where it was written
    text = tc_lang.to_source(tc_lang.parse(HEAD + "const float* const r = p;\n}\n"))
    assert "const float *const r = p;" in text


def test_the_message_of_many_errors_shows_the_first_fifty_and_keeps_them_all() -> None:
    """2,000 errors made a 248 KB message; the exception still holds every diagnostic."""
    body = "".join(f"  x{i} = 1;\n" for i in range(2000))
    with pytest.raises(tc_lang.TcNameError) as info:
        tc_lang.frontend(f"__global__ void k() {{\n{body}}}\n", filename="k.tc")
    err = info.value
    assert len(err.diagnostics) == 2000
    lines = str(err).splitlines()
    assert lines[0] == "k.tc:2:3: error[E0301]: use of undeclared identifier 'x0'"
    assert lines[-1] == "... and 1950 more errors"
    assert sum(line.startswith("k.tc:") for line in lines) == 50
    assert str(err) == err.render() == err.args[0]
    assert len(str(err)) < 10_000
    one_more = TcCompileError(list(err.diagnostics[:51]))
    assert one_more.render().splitlines()[-1] == "... and 1 more error"
    assert "more error" not in TcCompileError(list(err.diagnostics[:50])).render()
