"""Every source kernel of the interpreter test suite (tc-ir's test_ir_interpreter_sources.py)
compiles for sm_80 and sm_90 and ptxas accepts it; and the PTX of the features those kernels use
that the catalogue does not: integer and float atomics (a scalar atomic's old value reaches every
thread), 16 warps, `__aligned` parameters, precise and fast math."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tc_nvptx import compile
from tc_nvptx.ptxas import find_ptxas
from tc_opt import CompileOptions

TESTS = Path(__file__).resolve().parents[2]
SUITE = TESTS / "tc-ir" / "tests" / "test_ir_interpreter_sources.py"
KERNELS = TESTS / "tc-lang" / "tests" / "kernels"

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not on the PATH")


def _suite() -> ModuleType:
    name = "_tc_ir_interpreter_sources_kernels"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SUITE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


#: The defines a suite kernel is run with there (every variant of its tests); a kernel not listed
#: needs none (a new one that does fails below with an undeclared-identifier error: add it here).
SUITE_DEFINES: dict[str, list[dict[str, object]]] = {
    "MASKED_ADD": [{"TYPE": "float", "BLOCK": 1024}, {"TYPE": "half", "BLOCK": 1024}],
    "INTEGERS": [{"BLOCK": 512}],
    "MATH": [{"TYPE": "float", "BLOCK": 256}, {"TYPE": "half", "BLOCK": 256}],
    "TILES_3D": [{"TYPE": t, "A": 2, "B": 4, "C": 8} for t in ("float", "int", "half")],
}


def _suite_kernels() -> dict[str, str]:
    return {k: v for k, v in vars(_suite()).items() if isinstance(v, str) and "__global__" in v}


SUITE_CASES = [(name, d) for name in sorted(_suite_kernels()) for d in SUITE_DEFINES.get(name, [{}])]
SUITE_IDS = [f"{name}-{i}" for name in sorted(_suite_kernels()) for i in range(len(SUITE_DEFINES.get(name, [{}])))]


def test_the_suite_is_found() -> None:
    assert {"ATOMICS", "LOOPS", "INTEGERS", "MATH", "TILES_3D", "GUARDED"} <= set(_suite_kernels())
    assert set(SUITE_DEFINES) <= set(_suite_kernels())


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name,defines", SUITE_CASES, ids=SUITE_IDS)
def test_suite_kernel_compiles_and_ptxas_accepts(name: str, defines: dict[str, object], arch: str) -> None:
    k = compile(_suite_kernels()[name], defines=defines, options=CompileOptions(arch=arch), filename=name)
    assert f".target {arch}" in k.ptx and ".entry " in k.ptx
    assert k.cubin is not None and k.cubin[:4] == b"\x7fELF"
    assert k.spills == 0


# ------------------------------------------------------------------------------- atomics

ATOMICS = """
__global__ void k(float* facc, float* fmax_out, int* iacc, int* cnt, int* lock, int* olds, float* x, int n) {
  int pid = get_program_id(0);
  int off[128] = pid * 128 + (0 ... 128);
  bool in[128] = off < n;
  float v[128] = *?(in)(x + off);
  atomic_add(facc + off % 8, v, in);
  atomic_max(fmax_out + off % 8, v, in);
  atomic_add(iacc + off % 8, 1, in);
  int old = atomic_add(cnt, 1);             // a scalar atomic whose old value is used
  *(olds + pid) = old;
  while (atomic_cas(lock, 0, 1) == 1) {}
  atomic_xchg(lock, 0);
}
"""


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_integer_and_float_atomics(arch: str) -> None:
    k = compile(ATOMICS, options=CompileOptions(arch=arch))
    ptx = k.ptx
    assert re.search(r"atom\.global\.add\.f32", ptx)  # float add: one instruction
    assert re.search(r"atom\.global\.add\.u32", ptx)  # integer add
    assert re.search(r"atom(\.\w+)*\.global\.cas\.b32", ptx)  # atomic_cas, and the float max loop
    assert re.search(r"max\.f32", ptx)  # fmax is a compare-and-swap loop of max.f32
    assert re.search(r"atom\.global\.exch\.b32", ptx)
    # acquire-release among the GPU's threads: fences and compare-and-swap of scope .gpu, none of
    # the system's (a fence.acq_rel.sys waits until the host could see every earlier store)
    assert re.search(r"fence\.acq_rel\.gpu;", ptx) and re.search(r"atom\.acq_rel\.gpu\.global\.cas\.b32", ptx)
    assert ".sys" not in ptx
    # thread 0 does a scalar atomic, and its old value reaches every thread through shared memory
    # between two barriers
    assert re.search(r"st\.shared\.b32.*\n(.*\n)*?\s*bar\.sync\s+0;\n(.*\n)*?\s*ld\.shared\.b32", ptx)
    # ... in the kernel's one shared buffer, counted in what a launch asks for (no static extra)
    assert ".shared .align" in ptx and len(re.findall(r"\.shared \.align", ptx)) == 1
    assert k.shared_bytes >= 8
    assert k.cubin is not None


TICKET = """
__global__ void k(int* count, int* taken) {
  int old = atomic_add(count, 1);
  atomic_add(taken + old, 1);
}
"""


def test_barriers_stay_out_of_thread_0_branches() -> None:
    # bar.sync is .aligned: a warp whose threads reach it from different instructions hangs the
    # block (seen on an H100 when LLVM copied the barrier into both sides of thread 0's branch).
    # Each scalar atomic has one barrier before it (it releases every thread's earlier stores) and
    # the first, whose old value is used, two more around its broadcast: 4, each reached by every
    # thread once (a copy into a branch would make more).
    ptx = compile(TICKET, options=CompileOptions(arch="sm_90")).ptx
    assert len(re.findall(r"\bbar\.sync\b", ptx)) == 4


STORES = """
__global__ void k(int* counter, float* small, float* big) {
  *counter = *counter + 1;                          // a scalar: every thread loads it
  *(small + 0 ... 32) = *(small + 0 ... 32) + 1.0;  // 32 elements on 128 threads: replicas
  *(big + 0 ... 1024) = *(big + 0 ... 1024) + 1.0;  // 8 elements per thread: no replicas
}
"""


def test_one_thread_stores_each_element() -> None:
    # `*c = *c + 1` reads before it writes in the language; were every warp to store, a warp that
    # loads late reads another warp's store and adds again (an H200 counted a spin-locked counter
    # too high). The scalar store is predicated (thread 0), so is the replicated tile's (the
    # owning replica); the tile every thread holds a distinct part of stores unpredicated.
    ptx = compile(STORES, options=CompileOptions(arch="sm_90")).ptx
    stores = re.findall(r"^\s*(@%p\d+ )?st\.global(\.v\d)?\.(b32|f32)", ptx, re.M)
    assert len(stores) == 4, stores  # the counter, one 32-bit store of `small`, big's 2 x v4
    predicated = [st for st in stores if st[0]]
    assert len(predicated) == 2 and all(not st[1] for st in predicated)
    assert sum(1 for st in stores if st[1] == ".v4" and not st[0]) == 2


# ------------------------------------------------------------------------ warps, alignment


@needs_ptxas
@pytest.mark.parametrize(
    "name,defines",
    [
        ("softmax.tc", {"BLOCK": 4096}),
        ("transpose_masked.tc", {"TYPE": "float", "TM": 64, "TN": 64}),
        ("matmul_tutorial.tc", {"TYPE": "half", "MB": 128, "NB": 128, "KB": 32}),
        ("matmul_tutorial.tc", {"TYPE": "float", "MB": 128, "NB": 128, "KB": 16}),
    ],
)
@pytest.mark.parametrize("warps", [1, 16])
def test_one_and_sixteen_warps(name: str, defines: dict[str, object], warps: int) -> None:
    k = compile((KERNELS / name).read_text(), defines=defines,
                options=CompileOptions(arch="sm_80", num_warps=warps), filename=name)
    assert re.search(rf"\.maxntid {32 * warps}\b", k.ptx)
    assert k.cubin is not None and k.num_warps == warps
    if name == "softmax.tc" and warps == 16:
        assert "bar.sync" in k.ptx and "shfl.sync.bfly" in k.ptx  # across the 16 warps


ALIGNED_ADD = """
__global__ void add(float* z __aligned(16), float* x __aligned(16), float* y __aligned(16), int N) {
  int off[1024] = get_program_id(0) * 1024 + (0 ... 1024);
  bool check[1024] = off < N;
  *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""


def test_aligned_parameters_allow_128_bit_access_without_specialization() -> None:
    none = CompileOptions(specialization=(None, None, None, None))  # no facts from the runtime
    plain = compile(ALIGNED_ADD.replace(" __aligned(16)", ""), options=none, assemble_cubin=False)
    assert "ld.global.v4" not in plain.ptx
    k = compile(ALIGNED_ADD, options=none, assemble_cubin=False)
    assert "ld.global.v4.b32" in k.ptx and "st.global.v4.b32" in k.ptx


LOCAL_MULTIPLEOF = """
__global__ void k(float* x, float* y, int ld) {
  int r[512] = 0 ... 512;
  int base __multipleof(4) = get_program_id(0) * ld;
  *(y + base + r) = *(x + base + r);
}
"""


def test_multipleof_on_a_local_declaration_allows_128_bit_access() -> None:
    plain = compile(LOCAL_MULTIPLEOF.replace(" __multipleof(4)", ""), options=CompileOptions(num_warps=1),
                    assemble_cubin=False)
    assert "ld.global.v4" not in plain.ptx
    k = compile(LOCAL_MULTIPLEOF, options=CompileOptions(num_warps=1), assemble_cubin=False)
    assert "ld.global.v4.b32" in k.ptx and "st.global.v4.b32" in k.ptx


HALF_ROW_TO_FLOAT = """
__global__ void k(TYPE* y, TYPE* x, int N) {
  int n[1024] = 0 ... 1024;
  bool check[1024] = n < N;
  float v[1024] = check ? *(x + get_program_id(0) * N + n) : -F32_INFINITY;
  *?(check)(y + get_program_id(0) * N + n) = exp(v);
}
"""


@pytest.mark.parametrize("type_, packed", [("half", 0xFC00FC00), ("bf16", 0xFF80FF80)])
def test_a_converted_masked_load_reads_its_fallback_packed(type_: str, packed: int) -> None:
    # `check ? *px : -inf` of a 16-bit row read into float: -inf goes into the 128-bit load's registers
    # as two 16-bit -infs a word (as Triton's `other`), not one compare and select per element
    # after the conversion (which cost the fp16/bf16 cross_entropy backward ~7% on an H100)
    spec = ("divisible_by_16", "divisible_by_16", "divisible_by_16")
    k = compile(HALF_ROW_TO_FLOAT, defines={"TYPE": type_},
                options=CompileOptions(num_warps=4, specialization=spec), assemble_cubin=False)
    signed = packed - (1 << 32)
    assert re.search(rf"mov\.b32\s+%r\d+, {signed};", k.ptx)
    assert "@%p" in k.ptx and k.ptx.count("ld.global.v4.b32") == 1
    assert "0fFF800000" not in k.ptx  # no float -inf selected after the load
    assert k.ptx.count("setp.lt.s32") == 1  # the one mask of the 8 contiguous elements


# ------------------------------------------------------------------------------------ math

MATH = """
__global__ void k(float* o, float* x) {
  int r[128] = 0 ... 128;
  float v[128] = *(x + r);
  *(o + r) = exp(v);
  *(o + r + 128) = log(v);
  *(o + r + 256) = sqrt(v);
  *(o + r + 384) = rsqrt(v);
}
"""


def test_exp_and_log_are_fast_sqrt_is_ieee() -> None:
    ptx = compile(MATH, assemble_cubin=False).ptx
    assert "ex2.approx.f32" in ptx and "lg2.approx.f32" in ptx
    assert "cvt.rni.f32.f32" not in ptx  # the fast exp has no range reduction
    assert "sqrt.rn.f32" in ptx and "sqrt.approx" not in ptx


def test_precise_exp_is_available_in_the_ir() -> None:
    from tc_nvptx.compiler import compile_module, frontend_module

    module = frontend_module(MATH, {}, None, "<math>")
    exps = [op for op in module.walk() if op.NAME == "tc.unary" and op.kind == "exp"]  # type: ignore[attr-defined]
    assert len(exps) == 1 and exps[0].approx  # type: ignore[attr-defined]
    exps[0].approx = False  # type: ignore[attr-defined]
    ptx = compile_module(module, CompileOptions(), assemble_cubin=False).ptx
    # exp(x) = 2^n exp(r): n = rint(x log2 e), r reduced with ln 2 split in two FMAs, exp(r) a
    # polynomial (tc_nvptx.precise_math), no ex2.approx
    assert "cvt.rni.f32.f32" in ptx and ptx.count("fma.rn.f32") >= 8 and "ex2.approx.f32" not in ptx

