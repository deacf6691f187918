"""The grammar: every construct parses to the expected tree, precedence follows the original
(cast > range > @ > * > + ...), and syntax errors point at the user's line and column."""

from __future__ import annotations

import pathlib

import pytest

import tc_lang
from tc_lang import TcSyntaxError, ast
from tc_lang.types import FP16, FP32, INT32, UINT32, UINT64, ScalarType


def body(src: str) -> tuple[ast.Stmt, ...]:
    unit = tc_lang.parse("__global__ void k(int n, float* p) {\n" + src + "\n}\n")
    return unit.functions[0].body.items


def expr(src: str) -> ast.Expr:
    (s,) = body(src + ";")
    assert isinstance(s, ast.ExprStmt) and s.expr is not None
    return s.expr


def shape(e: ast.Expr) -> str:
    """A compact rendering of the tree structure (operators fully parenthesised)."""
    if isinstance(e, ast.Binary):
        return f"({shape(e.left)} {e.op} {shape(e.right)})"
    if isinstance(e, ast.Range):
        return f"({shape(e.start)} ... {shape(e.end)})"
    if isinstance(e, ast.Unary):
        return f"({e.op} {shape(e.operand)})"
    if isinstance(e, ast.Deref):
        m = f"?{shape(e.mask)} " if e.mask is not None else ""
        return f"(* {m}{shape(e.pointer)})"
    if isinstance(e, ast.Cast):
        return f"(cast {shape(e.operand)})"
    if isinstance(e, ast.Conditional):
        return f"({shape(e.cond)} ? {shape(e.then)} : {shape(e.otherwise)})"
    if isinstance(e, ast.Assign):
        return f"({shape(e.target)} {e.op} {shape(e.value)})"
    if isinstance(e, ast.Comma):
        return "(" + ", ".join(shape(x) for x in e.exprs) + ")"
    if isinstance(e, ast.SizeOf) and isinstance(e.operand, ast.Expr):
        return f"(sizeof {shape(e.operand)})"
    return tc_lang.to_source(e)


def syntax_error(src: str) -> tc_lang.Diagnostic:
    with pytest.raises(TcSyntaxError) as info:
        tc_lang.parse(src, filename="k.tc")
    return info.value.first


@pytest.mark.parametrize(
    ("src", "tree"),
    [
        ("pid * BM + 0 ... BM", "((pid * BM) + (0 ... BM))"),
        ("0 ... N * 2", "((0 ... N) * 2)"),
        ("a @ b * c", "((a @ b) * c)"),
        ("c + a @ b", "(c + (a @ b))"),
        ("^a @ b", "((^ a) @ b)"),
        ("-x ... y", "((- x) ... y)"),
        ("a ^ b", "(a ^ b)"),
        ("a & b | c ^ d", "((a & b) | (c ^ d))"),
        ("a < b && c == d || e", "(((a < b) && (c == d)) || e)"),
        ("a << 2 + b", "(a << (2 + b))"),
        ("*p + 1", "((* p) + 1)"),
        ("*?(m) p + 1", "((* ?m p) + 1)"),
        ("* ? ( check ) py", "(* ?check py)"),
        ("(float) x + y", "((cast x) + y)"),
        ("!a == ~b", "((! a) == (~ b))"),
        ("x++ + ++y", "((post++ x) + (pre++ y))"),
        ("a - -b", "(a - (- b))"),
        ("a = b ? c : d, e", "((a = (b ? c : d)), e)"),
        ("a || b ? c : d ? e : f", "((a || b) ? c : (d ? e : f))"),
        ("a += b = c", "(a += (b = c))"),
        ("c ? a = 1 : b", "(c ? (a = 1) : b)"),
        ("(int) -x * y", "((cast (- x)) * y)"),
        ("-(int) x", "(- (cast x))"),
        ("sizeof x + 1", "((sizeof x) + 1)"),
        ("a == b < c", "(a == (b < c))"),
        ("a % b * c / d", "(((a % b) * c) / d)"),
        ("a - b - c", "((a - b) - c)"),
        ("x--  - --y", "((post-- x) - (pre-- y))"),
    ],
)
def test_precedence(src: str, tree: str) -> None:
    assert shape(expr(src)) == tree


def test_assignment_forms_and_masked_store() -> None:
    for op in ["=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="]:
        e = expr(f"x {op} 1")
        assert isinstance(e, ast.Assign) and e.op == op
    store = expr("*?(check) py = y")
    assert isinstance(store, ast.Assign)
    assert isinstance(store.target, ast.Deref) and store.target.mask is not None
    chained = expr("a = b = c")
    assert isinstance(chained, ast.Assign) and isinstance(chained.value, ast.Assign)


def test_ternary_comma_and_calls() -> None:
    e = expr("c ? *pa : 0")
    assert isinstance(e, ast.Conditional) and isinstance(e.then, ast.Deref)
    comma = expr("a, b, c")
    assert isinstance(comma, ast.Comma) and len(comma.exprs) == 3
    call = expr("max(a, min(b, c))")
    assert isinstance(call, ast.Call) and call.func == "max"
    assert isinstance(call.args[1], ast.Call) and call.args[1].func == "min"
    assert expr("get_program_id(0)") == ast.Call(func="get_program_id",
                                                 args=(ast.IntLiteral(value=0),))
    assert expr("__debug_barrier()") == ast.Call(func="__debug_barrier", args=())


def test_subscripts() -> None:
    e = expr("x[:, newaxis, +, -, max, min, ^1]")
    assert isinstance(e, ast.Subscript)
    assert [i.kind for i in e.items] == [":", "newaxis", "+", "-", "max", "min", "^"]
    assert e.items[-1].value == ast.IntLiteral(value=1)
    spaced = expr("x [ max ]")
    assert isinstance(spaced, ast.Subscript) and spaced.items[0].kind == "max"
    chained = expr("x[+, :][+]")
    assert isinstance(chained, ast.Subscript) and isinstance(chained.base, ast.Subscript)


def test_casts_bitcast_sizeof() -> None:
    c = expr("(float[TM, TN]) x")
    assert isinstance(c, ast.Cast) and c.type.base == FP32
    assert c.type.dims == (ast.Name(name="TM"), ast.Name(name="TN"))
    p = expr("(const half*) q")
    assert isinstance(p, ast.Cast) and p.type.pointers == 1 and p.type.qualifiers == ("const",)
    b = expr("bitcast<float>(0x7F800000)")
    assert isinstance(b, ast.Bitcast) and b.type.base == FP32
    assert isinstance(b.operand, ast.IntLiteral) and b.operand.value == 0x7F800000
    s = expr("sizeof(int)")
    assert isinstance(s, ast.SizeOf) and isinstance(s.operand, ast.TypeName)
    s2 = expr("sizeof x")
    assert isinstance(s2, ast.SizeOf) and s2.operand == ast.Name(name="x")


@pytest.mark.parametrize(
    ("spelling", "name"),
    [("bool", "bool"), ("char", "int8"), ("short", "int16"), ("int", "int32"),
     ("long", "int64"), ("unsigned", "uint32"), ("unsigned char", "uint8"),
     ("unsigned short", "uint16"), ("unsigned int", "uint32"), ("unsigned long", "uint64"),
     ("long long", "int64"), ("long int", "int64"), ("signed char", "int8"),
     ("int8", "int8"), ("int16", "int16"), ("int32", "int32"), ("int64", "int64"),
     ("uint8", "uint8"), ("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64"),
     ("half", "fp16"), ("bf16", "bf16"), ("float", "fp32"), ("double", "fp64")],
)
def test_type_names(spelling: str, name: str) -> None:
    (s,) = body(f"{spelling} v;")
    assert isinstance(s, ast.DeclStmt)
    assert s.decls[0].type.base == ScalarType(name)


def test_declarations() -> None:
    (s,) = body("const float* restrict a[4, 8] = p, b = 0, *c;")
    assert isinstance(s, ast.DeclStmt)
    a, b, c = s.decls
    assert a.type.pointers == 1 and a.type.qualifiers == ("const",) and a.type.pointer_qualifiers == ("restrict",)
    assert a.type.dims == (ast.IntLiteral(value=4), ast.IntLiteral(value=8))
    assert a.init == ast.Name(name="p")
    assert b.type.pointers == 0 and b.init == ast.IntLiteral(value=0)
    assert c.type.pointers == 1 and c.init is None
    (m,) = body("int x __multipleof(8) = n;")
    assert isinstance(m, ast.DeclStmt) and m.decls[0].attributes[0].name == "multipleof"


def test_statements() -> None:
    items = body(
        "if (n > 0) n = 1; else { n = 2; }\n"
        "for (int i = 0; i < n; i++) { if (i) break; else continue; }\n"
        "for (;;) {}\n"
        "while (n) n--;\n"
        "do { n -= 1; } while (n > 0);\n"
        ";\n"
        "return;"
    )
    kinds = [type(s).__name__ for s in items]
    assert kinds == ["If", "For", "For", "While", "DoWhile", "ExprStmt", "Return"]
    f = items[1]
    assert isinstance(f, ast.For) and isinstance(f.init, ast.DeclStmt)
    empty = items[2]
    assert isinstance(empty, ast.For) and empty.init is None and empty.cond is None
    dangling = body("if (a) if (b) x = 1; else x = 2;")[0]
    assert isinstance(dangling, ast.If) and dangling.otherwise is None
    assert isinstance(dangling.then, ast.If) and dangling.then.otherwise is not None


def test_functions_attributes_and_helpers() -> None:
    unit = tc_lang.parse(
        "__device__ float[BLOCK] twice(float x[BLOCK]) { return x * 2; }\n"
        "__device__ inline float sq(float v) { return v * v; }\n"
        "__global__ void k(float* X __noalias __readonly __aligned(16), int ld __multipleof(8),\n"
        "                  float* Y __writeonly __retune, int m __attribute__((multipleof(4))))"
        " {}\n"
        "__global__ void k2(void) {}\n"
    )
    helper, sq, k, k2 = unit.functions
    assert helper.kind == "device" and helper.return_type.dims == (ast.Name(name="BLOCK"),)
    assert helper.params[0].type.dims == (ast.Name(name="BLOCK"),)
    assert sq.kind == "device"
    assert k.kind == "global" and k2.params == ()
    assert [a.name for a in k.params[0].attributes] == ["noalias", "readonly", "aligned"]
    assert [a.name for a in k.params[2].attributes] == ["writeonly", "retune"]
    assert k.params[3].attributes[0].name == "multipleof"
    assert unit.kernels() == (k, k2)
    assert unit.function("sq") is sq


def test_literals() -> None:
    i = expr("0x7Fu")
    assert isinstance(i, ast.IntLiteral) and (i.value, i.suffix) == (127, "u")
    assert expr("017") == ast.IntLiteral(value=15)
    assert expr("8l") == ast.IntLiteral(value=8, suffix="l")
    f = expr("0.5f")
    assert isinstance(f, ast.FloatLiteral) and (f.value, f.suffix) == (0.5, "f")
    assert expr("1e3") == ast.FloatLiteral(value=1000.0)
    assert expr("'a'") == ast.IntLiteral(value=97)
    assert expr("true") == ast.BoolLiteral(value=True)
    r = expr("0...32")
    assert isinstance(r, ast.Range)


def test_locations_on_nodes() -> None:
    unit = tc_lang.parse("__global__ void k(int n) {\n  int x = n + 12;\n}\n", filename="k.tc")
    decl = unit.functions[0].body.items[0]
    assert isinstance(decl, ast.DeclStmt)
    init = decl.decls[0].init
    assert init is not None
    loc = init.loc
    assert (loc.file, loc.line, loc.col, loc.end_line, loc.end_col) == ("k.tc", 2, 11, 2, 16)


def test_missing_semicolon_inserted_with_warning() -> None:
    unit = tc_lang.parse("__global__ void k(int n) {\n  int x = n\n  n = x\n}\n", filename="k.tc")
    assert [(w.code, w.location.line, w.location.col) for w in unit.warnings] == [
        ("W0201", 2, 12), ("W0201", 3, 8)]
    assert "warning[W0201]" in unit.warnings[0].render()


@pytest.mark.parametrize(
    ("src", "line", "col", "message"),
    [
        ("__global__ void k() {\n  int x = ;\n}\n", 2, 11, "unexpected ';'"),
        ("__global__ void k() {\n  x = (1 + 2;\n}\n", 2, 13, "expected ',' or ')' before ';'"),
        ("__global__ void k() {\n  int x = 1\n", 2, 12, "unexpected end of input"),
        ("__global__ void k() {\n  x = a[i];\n}\n", 2, 9, "unexpected identifier 'i'"),
        ("__global__ void k() {\n  x = 1 $ 2;\n}\n", 2, 9, "unexpected character '$'"),
        ("__global__ void k() {\n  x = \"s\";\n}\n", 2, 7, "string literals are not supported"),
        ("__global__ void k() {\n  unsigned float y;\n}\n", 2, 3, "invalid type 'unsigned float'"),
        ("__global__ __device__ void k() {}\n", 1, 1, "both __global__ and __device__"),
        ("__global__ void k() {\n  x = (a + b)(c);\n}\n", 2, 8, "only named functions"),
        ("__global__ void k() {\n  int x = 09;\n}\n", 2, 11, "invalid integer literal '09'"),
        ("", 1, 1, "no kernel in the source"),
        ("__global__ void k(int, float* p) {}\n", 1, 19, "parameter needs a name"),
        ("__global__ void k(void, int n) {}\n", 1, 19, "'void' must be the only parameter"),
    ],
)
def test_syntax_errors(src: str, line: int, col: int, message: str) -> None:
    d = syntax_error(src)
    assert message in d.message
    assert (d.location.line, d.location.col) == (line, col)
    assert d.code.startswith("E02")


@pytest.mark.parametrize(
    ("src", "code", "line", "col", "message"),
    [
        ("__global__ void k() {\n  int x = ;\n}\n", "E0201", 2, 11, "unexpected ';'"),
        ("// nothing here\n", "E0202", 1, 1, "no kernel in the source"),
        ("__global__ __device__ void k() {}\n", "E0204", 1, 1,
         "a function cannot be both __global__ and __device__"),
        ("__global__ void k(int, float* p) {}\n", "E0205", 1, 19, "parameter needs a name"),
        ("__global__ void k() {\n  const x = 1;\n}\n", "E0206", 2, 3, "missing type name"),
        ("__global__ void k() {\n  x = (a + b)(c);\n}\n", "E0207", 2, 8,
         "only named functions can be called"),
        ("__global__ void k() {\n  x = \"s\";\n}\n", "E0208", 2, 7,
         "string literals are not supported in kernels"),
        ("__global__ void k() {\n  int x = 1uu;\n}\n", "E0209", 2, 11,
         "invalid integer suffix 'uu'"),
        ("__global__ void k() {\n  int x = '\\q';\n}\n", "E0209", 2, 11,
         "unknown escape sequence '\\q'"),
        ("__global__ void k() {\n  int x = " + "(" * 300 + "1" + ")" * 300 + ";\n}\n",
         "E0211", 2, 210, "nesting deeper than 200 levels"),
    ],
)
def test_syntax_error_codes(src: str, code: str, line: int, col: int, message: str) -> None:
    d = syntax_error(src)
    assert (d.code, d.message, d.location.line, d.location.col) == (code, message, line, col)


def test_volatile_and_qualifier_order() -> None:
    (s,) = body("volatile int* restrict x;")
    assert isinstance(s, ast.DeclStmt)
    assert s.decls[0].type.qualifiers == ("volatile",) and s.decls[0].type.pointer_qualifiers == ("restrict",)
    (c,) = body("const volatile float y = 1;")
    assert isinstance(c, ast.DeclStmt) and c.decls[0].type.qualifiers == ("const", "volatile")


def test_several_kernels_and_tile_return_type() -> None:
    unit = tc_lang.parse(
        "__device__ float[8, 8] t(float x[8, 8]) { return ^x; }\n"
        "__global__ void a(float* p) {}\n__global__ void b(float* p) {}\n"
        "void c(float* p) {}\n"
    )
    assert [f.name for f in unit.kernels()] == ["a", "b", "c"]
    helper = unit.function("t")
    assert helper is not None and helper.kind == "device"
    assert helper.return_type.dims == (ast.IntLiteral(value=8), ast.IntLiteral(value=8))


def test_syntax_error_rendering() -> None:
    with pytest.raises(TcSyntaxError) as info:
        tc_lang.parse("__global__ void k() {\n  int x = ;\n}\n", filename="k.tc")
    assert str(info.value) == (
        "k.tc:2:11: error[E0201]: unexpected ';'\n"
        "      int x = ;\n"
        "              ^"
    )


def test_c_indexing_hint() -> None:
    d = syntax_error("__global__ void k() {\n  x = a[i];\n}\n")
    assert d.hint is not None and "*(p + i)" in d.hint


def test_tables_are_cached_outside_the_source_tree() -> None:
    from tc_lang import parser

    p1, _ = parser.get_parser()
    p2, _ = parser.get_parser()
    assert p1 is p2
    cached = list(parser.cache_dir().glob("tc_lang_parser_*.pickle"))
    assert cached
    src = __import__("pathlib").Path(tc_lang.__file__).parent
    assert not list(src.glob("*tab*.py"))


def test_types_of_literals_after_check() -> None:
    unit = tc_lang.check(tc_lang.parse(
        "__global__ void k() { int a = 1; long b = 0xFFFFFFFF; long c = 1u; double d = 1.0;"
        " float e = 1.0f; half h = 0; long u = 0xFFFFFFFFFFFFFFFF; }"))
    inits = [s.decls[0].init for s in unit.functions[0].body.items
             if isinstance(s, ast.DeclStmt)]
    assert [i.ty for i in inits if i is not None] == [
        INT32, UINT32, UINT32, ScalarType("fp64"), FP32, INT32, UINT64]
    assert FP16 == ScalarType("fp16")


def test_a_new_process_loads_the_cached_tables(tmp_path: pathlib.Path) -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, TC_CACHE_DIR=str(tmp_path))
    build = "from tc_lang import parser; parser.get_parser()"
    load = (
        "import tc_lang\n"
        "from tc_lang import parser\n"
        "def boom(*a, **k):\n"
        "    raise SystemExit('tables were rebuilt')\n"
        "parser.yacc.LRGeneratedTable = boom\n"
        "parser.get_parser()\n"
        "print(tc_lang.parse('__global__ void k() {}').functions[0].name)\n"
    )
    subprocess.run([sys.executable, "-c", build], env=env, check=True)
    assert list((tmp_path / "parser").glob("tc_lang_parser_*.pickle"))
    out = subprocess.run([sys.executable, "-c", load], env=env, check=True,
                         capture_output=True, text=True)
    assert out.stdout.strip() == "k"


@pytest.mark.parametrize("first", ["ply.lex", "pcpp"])
def test_no_table_files_whichever_ply_is_imported_first(tmp_path: pathlib.Path,
                                                        first: str) -> None:
    # pcpp ships its own PLY and puts it first on sys.path while importing; both copies must
    # leave the source tree (and pcpp's folder) alone.
    import os
    import subprocess
    import sys

    src_dir = pathlib.Path(tc_lang.__file__).parent
    code = (f"import {first}\nimport tc_lang\n"
            "tc_lang.frontend('__global__ void k(float* p) { *p = 1; }')\n")
    env = dict(os.environ, TC_CACHE_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path)
    assert not list(src_dir.glob("*tab*.py"))
    assert not [p for p in tmp_path.iterdir() if p.name != "parser"]
