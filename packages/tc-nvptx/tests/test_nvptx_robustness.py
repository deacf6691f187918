"""Code generation details that must match the interpreter or the target: shifts by any amount,
shared memory limits refused at compile time, and `tcc --time-passes` / `--print-after-all`."""

from __future__ import annotations

import pytest
from tc_lang.diagnostics import TcCompileError, TcResourceError
from tc_nvptx import compile
from tc_nvptx.cli import main
from tc_opt import CompileOptions, ResourceLimitError

SHIFT = """
__global__ void k(int* o, int* a, int* s) {
  int r[128] = 0 ... 128;
  int x[128] = *(a + r);
  int y[128] = *(s + r);
  unsigned ux[128] = x;
  *(o + r) = x << y;
  *(o + r + 128) = x >> y;
  *(o + r + 256) = (int)(ux >> y);
}
"""


def test_shifts_by_the_width_or_more_are_defined() -> None:
    k = compile(SHIFT, assemble_cubin=False)
    llvm = k.asm["llvm"]
    # every shift amount is compared with the width: shl/lshr give 0, ashr the sign fill
    assert llvm.count("icmp ult i32") >= 3
    assert "i32 31" in llvm and "select" in llvm  # ashr clamps the amount to 31
    assert "shl.b32" in k.ptx and "shr.s32" in k.ptx and "shr.u32" in k.ptx


TRANSPOSE = """
__global__ void t(float* X, float* Y) {
  int rm[TM] = 0 ... TM;
  int rn[TN] = 0 ... TN;
  float* px[TM, TN] = X + rm[:, newaxis] + rn[newaxis, :] * TM;
  float* py[TN, TM] = Y + rm[newaxis, :] * TN + rn[:, newaxis];
  *py = ^(*px);
}
"""


MATMUL = """
__global__ void mm(float* A, float* B, float* C, int K) {
  int rm[TM] = 0 ... TM;
  int rn[TN] = 0 ... TN;
  int rk[TK] = 0 ... TK;
  float acc[TM, TN] = 0;
  float* pa[TM, TK] = A + rm[:, newaxis] * K + rk[newaxis, :];
  float* pb[TK, TN] = B + rk[:, newaxis] * TN + rn[newaxis, :];
  for (int k = 0; k < K; k += TK) {
    acc += (*pa) @ (*pb);
    pa += TK;
    pb += TK * TN;
  }
  *(C + rm[:, newaxis] * TN + rn[newaxis, :]) = acc;
}
"""


def test_too_much_shared_memory_is_refused_with_the_numbers() -> None:
    # num_stages=4 buffers of a 256x64 and a 64x256 float tile: 512 KiB of staging
    with pytest.raises(TcResourceError) as info:
        compile(MATMUL, defines={"TM": 256, "TN": 256, "TK": 64},
                options=CompileOptions(arch="sm_90", num_stages=4), assemble_cubin=False)
    e = info.value
    assert isinstance(e, ResourceLimitError)
    assert e.resource == "shared memory" and e.needed >= 4 * 2 * 256 * 64 * 4 and e.limit == 227 * 1024
    assert "smaller tiles" in e.hint and "num_stages" in e.hint


COPY = """__global__ void copy(float* z, float* x) {
  int off[BLOCK] = get_program_id(0) * BLOCK + 0 ... BLOCK;
  *(z + off) = *(x + off);
}"""


def test_a_tile_too_large_for_the_programs_threads_is_refused_at_once() -> None:
    """A 1M-element tile over 4 warps (8192 elements a thread, 255 registers) took LLVM and
    ptxas three minutes, a hang to the user; it is E0702 at the range, with more warps as the
    way out. 1024 elements a thread still compile."""
    with pytest.raises(TcResourceError) as info:
        compile(COPY, defines={"BLOCK": 1 << 20}, filename="copy.tc", assemble_cubin=False)
    d = info.value.first
    assert d.code == "E0702" and (d.location.file, d.location.line) == ("copy.tc", 2)
    assert "a tile of 1048576 elements gives each of the program's 128 threads 8192 of them" in d.message
    assert "num_warps" in (d.hint or "")
    with pytest.raises(TcResourceError, match="program.s 512 threads 2048 of them"):
        compile(COPY, defines={"BLOCK": 1 << 20}, options=CompileOptions(num_warps=16), assemble_cubin=False)
    k = compile(COPY, defines={"BLOCK": 1 << 17}, assemble_cubin=False)  # 1024 a thread
    assert "st.global" in k.ptx


def test_too_many_parameters_are_refused_at_the_kernel() -> None:
    """560 pointers (4480 bytes) overflow sm_90a's parameter space: E0703 at the kernel's header
    with the numbers, not ptxas's text about a temporary file; 540 pointers compile (ptxas says
    which, as for every cubin the tests make)."""
    from tc_opt.resources import check_parameter_space

    with pytest.raises(ResourceLimitError, match=r"E0703.*needs 4480 bytes of parameter space but "
                                                  r"sm_90a has at most 4352 bytes"):
        check_parameter_space("ptxas fatal: Entry function 'k' uses too much parameter space (0x1180 bytes, "
                              "0x1100 max).", "sm_90a")
    check_parameter_space("ptxas fatal: some other refusal", "sm_90a")  # (left to ptxas's own error)
    many = "__global__ void k(" + ", ".join(f"float* p{i}" for i in range(560)) + ") {\n  *p0 = 1.0;\n}\n"
    with pytest.raises(ResourceLimitError) as info:
        compile(many, options=CompileOptions(arch="sm_90a"), filename="many.tc")
    d = info.value.first
    assert d.code == "E0703" and (d.location.file, d.location.line) == ("many.tc", 1)
    assert info.value.resource == "parameter space" and info.value.needed == 4480
    fewer = "__global__ void k(" + ", ".join(f"float* p{i}" for i in range(540)) + ") {\n  *p0 = 1.0;\n}\n"
    assert compile(fewer, options=CompileOptions(arch="sm_90a")).cubin


def test_tcc_reports_resource_errors_without_a_traceback(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "t.tc"
    path.write_text(MATMUL)
    assert main([str(path), "-D", "TM=256", "-D", "TN=256", "-D", "TK=64", "--arch", "sm_80"]) == 1
    err = capsys.readouterr().err
    assert "error[E0701]" in err and "163 KB" not in err and "166912 bytes" in err
    assert "Traceback" not in err


def test_tcc_time_passes_and_print_after_all(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "t.tc"
    path.write_text(TRANSPOSE)
    out = pathlib.Path(str(tmp_path)) / "t.ptx"
    assert main([str(path), "-D", "TM=32", "-D", "TN=32", "--time-passes", "--print-after-all", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    for name in ("licm", "rematerialize", "combine-dot", "allocate-shared", "check-resources"):
        assert f"IR after {name}" in err
        assert f"pass {name}" in err
    assert "LLVM O3 + PTX emission" in err and "total" in err
    assert ".entry t" in out.read_text()


DIVIDE = """
__global__ void k(float* o, float* a, float* b) {
  int r[128] = 0 ... 128;
  *(o + r) = *(a + r) / *(b + r);
}
"""


def test_float_division_is_tritons_by_default_and_ieee_on_request() -> None:
    fast = compile(DIVIDE, assemble_cubin=False).ptx
    assert "div.full.f32" in fast and "div.rn.f32" not in fast
    precise = compile(DIVIDE, options=CompileOptions(precise_div=True), assemble_cubin=False).ptx
    assert "div.rn.f32" in precise and "div.full.f32" not in precise


@pytest.mark.parametrize(("ty", "bits"), [("float", 32), ("half", 16), ("double", 64), ("bf16", 16)])
def test_atomic_cas_of_floats_compares_their_bits(ty: str, bits: int) -> None:
    # LLVM's cmpxchg takes integers only; the interpreter compares the bits too
    src = f"""__global__ void k({ty}* x) {{
  int r[32] = 0 ... 32;
  {ty} o = atomic_cas(x, ({ty}) 0, ({ty}) 1);
  {ty} t[32] = atomic_cas(x + r, ({ty}) 0, ({ty}) 1);
  *(x + r + 32) = t + o;
}}"""
    k = compile(src, options=CompileOptions(arch="sm_80"), assemble_cubin=False)
    assert f'cmpxchg ptr addrspace(1) %"x", i{bits}' in k.asm["llvm"]
    assert f"global.cas.b{max(bits, 32)}" in k.ptx  # (16 bits: a loop of 32-bit ones)


def test_loads_of_pointers_are_refused_at_the_line() -> None:
    src = "__global__ void k(int** x, int* o) {\n  int* y = *x;\n  *o = *y + 1;\n}\n"
    with pytest.raises(TcCompileError) as info:
        compile(src, filename="pp.tc", assemble_cubin=False)
    e = info.value
    assert e.first.code == "E0690" and "cannot load a pointer from memory" in e.first.message
    assert (e.first.location.file, e.first.location.line) == ("pp.tc", 2)
    assert str(e).splitlines()[1] == "      int* y = *x;"  # the back end's errors quote the line too


@pytest.mark.parametrize(("m", "n", "reduce"), [(1, 128, "a[:, max]"), (128, 1, "a[+, :]"), (1, 1, "a[+, :]")])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_reduction_to_one_element_changes_layout_without_shared_memory(m: int, n: int, reduce: str, arch: str) -> None:
    # tc_opt.shared_alloc gives a one-element convert_layout no buffer: the code generator
    # reported "internal error: no shared memory allocated for tc.convert_layout"
    src = f"""__global__ void k(float* x, float* y) {{
  int rm[{m}] = 0 ... {m};
  int rn[{n}] = 0 ... {n};
  float a[{m}, {n}] = *(x + rm[:, newaxis] * {n} + rn[newaxis, :]);
  *(y + rm) = {reduce};
}}"""
    k = compile(src, options=CompileOptions(arch=arch), assemble_cubin=False)
    assert "st.global" in k.ptx


ADD_LINES = """__global__ void add(float* z, float* x, int n) {
  int off[128] = get_program_id(0) * 128 + 0 ... 128;
  bool in[128] = off < n;
  *?(in)(z + off) = *?(in)(x + off) + 1.0f;
}
"""


def test_a_bug_in_the_code_generator_is_an_internal_error_at_the_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected exception while lowering an op reaches the user as a located E0699 naming
    the op, not as a traceback from inside the compiler; TC_COMPILER_DEBUG=1 lets it through."""
    from tc_nvptx.lowerings import LOWERINGS

    def broken(ctx: object, op: object) -> None:
        raise KeyError("no such register")

    monkeypatch.setitem(LOWERINGS, "tc.store", broken)
    monkeypatch.delenv("TC_COMPILER_DEBUG", raising=False)
    with pytest.raises(TcCompileError) as info:
        compile(ADD_LINES, filename="add.tc", assemble_cubin=False)
    d = info.value.first
    assert d.code == "E0699" and "internal compiler error in code generation of tc.store" in d.message
    assert "KeyError" in d.message and "TC_COMPILER_DEBUG=1" in (d.hint or "")
    assert (d.location.file, d.location.line) == ("add.tc", 4)
    assert str(info.value).splitlines()[1].strip() == "*?(in)(z + off) = *?(in)(x + off) + 1.0f;"
    monkeypatch.setenv("TC_COMPILER_DEBUG", "1")
    with pytest.raises(KeyError):
        compile(ADD_LINES, filename="add.tc", assemble_cubin=False)


def test_a_bug_in_a_pass_is_an_internal_error_naming_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    import tc_nvptx.compiler as compiler
    from tc_opt.pass_manager import Pass, PassManager

    class Broken(Pass):
        name = "broken-pass"

        def run(self, module: object) -> None:
            raise IndexError("list index out of range")

    monkeypatch.setattr(compiler, "gpu_pipeline", lambda options: PassManager([Broken(options)]))
    monkeypatch.delenv("TC_COMPILER_DEBUG", raising=False)
    with pytest.raises(TcCompileError) as info:
        compile(ADD_LINES, filename="add.tc", assemble_cubin=False)
    d = info.value.first
    assert d.code == "E0699" and "in pass 'broken-pass': IndexError" in d.message
    assert (d.location.file, d.location.line) == ("add.tc", 1)  # the kernel's own line


def test_options_of_the_wrong_kind_or_length_are_the_callers_error_not_an_internal_one() -> None:
    """A specialization with one entry too few or too many (or a dict for `options`) was an
    "internal compiler error" (E0699) from the specialize pass; it names the kernel, the counts
    and the arguments, before any compiling."""
    with pytest.raises(ValueError) as info:
        compile(COPY, defines={"BLOCK": 128}, options=CompileOptions(specialization=("16",)), assemble_cubin=False)
    assert str(info.value) == ("CompileOptions.specialization has 1 entries but kernel 'copy' has 2 arguments "
                               "(z, x): give one entry per argument")
    with pytest.raises(ValueError, match="has 3 entries but kernel 'copy' has 2 arguments"):
        compile(COPY, defines={"BLOCK": 128}, options=CompileOptions(specialization=("16",) * 3),
                assemble_cubin=False)
    with pytest.raises(TypeError, match="options must be a tc_opt.CompileOptions, not dict"):
        compile(COPY, defines={"BLOCK": 128}, options={"num_warps": 4}, assemble_cubin=False)  # type: ignore[arg-type]
    k = compile(COPY, defines={"BLOCK": 128}, options=CompileOptions(specialization=("16", "16")),
                assemble_cubin=False)
    assert k.name == "copy"


def test_a_kernel_of_thousands_of_statements_compiles_in_seconds() -> None:
    """6000 statements (an unrolled kernel, a generated one) took about a minute: canonicalize
    and CSE walked the whole function for every value they replaced, and the IR printer tried
    the names a, a_1, ... afresh for every value named `a`. Each is one walk now."""
    import time

    body = "int a = 0;\n" + "a += 1;\n" * 6000
    source = f"__global__ void k(int* o) {{\n{body}*o = a;\n}}\n"
    start = time.perf_counter()
    k = compile(source, assemble_cubin=False)
    assert time.perf_counter() - start < 20
    assert "6000" in k.asm["ir-gpu"] and "st.global.b32" in k.ptx  # folded to the constant
