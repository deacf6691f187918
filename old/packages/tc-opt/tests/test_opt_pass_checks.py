"""The pass manager's verification after each pass and TC_DUMP_IR=all; convert_layout insertion
(reduction -> store) and removal (identities, chains); barriers of a pipelined loop; shared memory
reused across disjoint lifetimes; the register limit as a typed error."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import tc_lang
from tc_ir import parse_module, print_module
from tc_ir.lower import lower
from tc_ir.ops import ConvertLayoutOp, MakeRangeOp, Module, ReduceOp
from tc_ir.testing import filecheck
from tc_ir.verifier import verify
from tc_lang.diagnostics import TcResourceError
from tc_opt import (
    Canonicalize,
    CompileOptions,
    DeadCodeElimination,
    Pass,
    PassManager,
    PassVerificationError,
    RemoveTrivialConverts,
    ResourceLimitError,
    allocate,
    gpu_pipeline,
)
from tc_opt.pass_manager import module_text
from tc_opt.resources import check_registers
from tc_opt.shared_alloc import scratch_bytes

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"

ADD = """
__global__ void add(float* z, float* x, int n) {
  int off[128] = get_program_id(0) * 128 + (0 ... 128);
  bool m[128] = off < n;
  *?(m)(z + off) = *?(m)(x + off) * 2.0f;
}
"""


def _lower(src: str, **defines: object) -> Module:
    return lower(tc_lang.frontend(src, dict(defines)))  # type: ignore[arg-type]


class DropRange(Pass):
    """A broken pass: deletes the make_range whose result is still used."""

    name = "drop-range"

    def run(self, module: Module) -> None:
        op = next(o for o in module.walk() if isinstance(o, MakeRangeOp))
        assert op.parent is not None
        op.parent.remove(op)


def test_the_ir_is_verified_after_every_pass() -> None:
    m = _lower(ADD)
    with pytest.raises(PassVerificationError) as info:
        PassManager([Canonicalize(), DropRange(), DeadCodeElimination()]).run(m)
    assert info.value.pass_name == "drop-range" and "drop-range" in str(info.value)
    assert "tc.load" in info.value.ir  # the IR after the broken pass, for the bug report
    # without verification the broken module goes through unnoticed
    PassManager([DropRange()], verify=False).run(_lower(ADD))


def test_tc_dump_ir_all_prints_after_every_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_DUMP_IR", "all")
    out = io.StringIO()
    pm = gpu_pipeline(CompileOptions())
    pm.stream = out
    pm.run(_lower(ADD))
    text = out.getvalue()
    for name in pm.names:
        assert f"// ----- IR after {name} -----" in text
    assert text.count("// ----- IR after") == len(pm.names)


REDUCE = """
__global__ void k(float* rows, float* x) {
  int rm[32] = 0 ... 32;
  int rn[64] = 0 ... 64;
  float t[32, 64] = *(x + rm[:, newaxis] * 64 + rn[newaxis, :]);
  *(rows + rm) = t[:, +];
}
"""


def test_convert_layout_is_inserted_between_a_reduction_and_a_store() -> None:
    m = _lower(REDUCE)
    gpu_pipeline(CompileOptions()).run(m)
    verify(m)
    # the row sums come out of the reduction sliced from the 2-D layout; the store of 32 floats
    # uses the 1-D blocked layout of rows + rm: one convert between them
    filecheck(module_text(m), """
CHECK: tc.load {{.*}} : tile<32x64xf32, #blocked<
CHECK: %[[S:[0-9]+]] = tc.reduce {{.*}} {kind = "fadd", axis = 1} : tile<32xf32, #slice<dim=1
CHECK-NEXT: %[[C:[0-9]+]] = tc.convert_layout %[[S]] : tile<32xf32, #blocked<
CHECK-NEXT: tc.store {{.*}}, %[[C]]
""")
    (cvt,) = [op for op in m.walk() if isinstance(op, ConvertLayoutOp)]
    assert scratch_bytes(cvt) == 32 * 4  # it goes through shared memory


B1 = "#blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>"
B4 = "#blocked<spt=[4], tpw=[32], wpc=[1], order=[0]>"
CONVERTS = f"""module {{
  tc.func global @k(%o: ptr<i32>) {{
    %r = tc.make_range {{start = 0, end = 128}} : tile<128xi32, {B1}>
    %a = tc.convert_layout %r : tile<128xi32, {B1}>
    %b = tc.convert_layout %a : tile<128xi32, {B4}>
    %c = tc.convert_layout %b : tile<128xi32, {B1}>
    %p = tc.splat %o : tile<128xptr<i32>, {B4}>
    %q = tc.addptr %p, %b : tile<128xptr<i32>, {B4}>
    tc.store %q, %b
    %p1 = tc.splat %o : tile<128xptr<i32>, {B1}>
    %q1 = tc.addptr %p1, %c : tile<128xptr<i32>, {B1}>
    tc.store %q1, %c
    tc.return
  }}
}}
"""


def test_identity_converts_and_round_trips_are_removed() -> None:
    m = parse_module(CONVERTS)
    verify(m)
    RemoveTrivialConverts().run(m)
    DeadCodeElimination().run(m)
    verify(m)
    text = print_module(m)
    # %a (to its own layout) goes; %c (back to %r's layout through %b) becomes %r itself;
    # the one real change of layout, %b, stays
    filecheck(text, """
CHECK: %r = tc.make_range
CHECK-NEXT: %b = tc.convert_layout %r : tile<128xi32, #blocked<spt=[4]
CHECK: tc.store %q, %b
CHECK: %q1 = tc.addptr %p1, %r
CHECK-NEXT: tc.store %q1, %r
""")
    assert text.count("tc.convert_layout") == 1


NARROW = f"""module {{
  tc.func global @k(%o: ptr<f16>, %w: ptr<f64>) {{
    %r = tc.make_range {{start = 0, end = 128}} : tile<128xi32, {B1}>
    %r4 = tc.make_range {{start = 0, end = 128}} : tile<128xi32, {B4}>
    %f = tc.cast %r {{kind = "sitofp"}} : tile<128xf32, {B1}>
    %a = tc.convert_layout %f : tile<128xf32, {B4}>
    %h = tc.cast %a {{kind = "fptrunc"}} : tile<128xf16, {B4}>
    %p = tc.splat %o : tile<128xptr<f16>, {B4}>
    %q = tc.addptr %p, %r4 : tile<128xptr<f16>, {B4}>
    tc.store %q, %h
    %b = tc.convert_layout %f : tile<128xf32, {B4}>
    %x = tc.cast %b {{kind = "fpext"}} : tile<128xf64, {B4}>
    %y = tc.cast %b {{kind = "fptrunc"}} : tile<128xf16, {B4}>
    %pw = tc.splat %w : tile<128xptr<f64>, {B4}>
    %qw = tc.addptr %pw, %r4 : tile<128xptr<f64>, {B4}>
    tc.store %qw, %x
    tc.store %q, %y
    tc.return
  }}
}}
"""


def test_a_narrowing_cast_moves_before_its_convert() -> None:
    from tc_opt.narrow_converts import narrow_before_convert

    m = parse_module(NARROW)
    verify(m)
    assert narrow_before_convert(m.functions[0].body) == 1
    verify(m)
    # %a's one reader narrows it: the f16 tile changes layout instead (half the bytes); %b is
    # also widened, so it stays as it is
    filecheck(print_module(m), """
CHECK: %[[F:.*]] = tc.cast %r {kind = "sitofp"}
CHECK-NEXT: %[[N:.*]] = tc.cast %[[F]] {kind = "fptrunc"} : tile<128xf16, #blocked<spt=[1]
CHECK-NEXT: %[[A:.*]] = tc.convert_layout %[[N]] : tile<128xf16, #blocked<spt=[4]
CHECK: tc.store %q, %[[A]]
CHECK: %b = tc.convert_layout %[[F]] : tile<128xf32
CHECK: tc.cast %b {kind = "fpext"}
CHECK: tc.cast %b {kind = "fptrunc"}
""")


SPEC9 = tuple(None if i in (3, 4, 5) else "divisible_by_16" for i in range(9))


def test_pipelined_loop_waits_then_synchronizes_before_reusing_a_slot() -> None:
    from tc_nvptx.compiler import frontend_module

    src = (KERNELS / "matmul_tutorial.tc").read_text()
    m = frontend_module(src, {"TYPE": "half", "MB": 64, "NB": 64, "KB": 32}, None, "mt.tc")
    gpu_pipeline(CompileOptions(arch="sm_80", num_stages=3, specialization=SPEC9)).run(m)  # type: ignore[arg-type]
    # in the loop: wait for the oldest stage, a barrier (its data is visible to every thread and
    # every thread is done reading the slot about to be overwritten), then the next copies, then
    # the reads of the ready slot for the dot; after the loop, a wait for every copy
    filecheck(module_text(m), """
CHECK: tc.for
CHECK: tc.async_wait {pending = 1}
CHECK-NEXT: tc.barrier
CHECK: tc.async_copy
CHECK: tc.async_commit_group
CHECK: tc.local_load
CHECK: tc.dot
CHECK: tc.yield
CHECK-NEXT: })
CHECK-NEXT: tc.async_wait{{$}}
""")


@pytest.mark.parametrize("num_warps", [4, 8])
def test_pipelined_wgmma_loop_keeps_one_dot_in_flight(num_warps: int) -> None:
    from tc_nvptx.compiler import frontend_module

    src = (KERNELS / "matmul_tutorial.tc").read_text()
    m = frontend_module(src, {"TYPE": "half", "MB": 128, "NB": 128, "KB": 64}, None, "mt.tc")
    opts = CompileOptions(arch="sm_90", num_warps=num_warps, num_stages=3 if num_warps > 4 else 4,
                          specialization=SPEC9, tma=False)  # (the cp.async schedule)
    gpu_pipeline(opts).run(m)  # type: ignore[arg-type]
    # the dot is issued asynchronously; the copies into the slot the previous dot read come only
    # after the wait that leaves this dot alone in flight (and, with two warpgroups, after a
    # barrier: the other warpgroup's previous dot read that slot too); after the loop the
    # accumulator is waited for before anything reads it, and narrowed to fp16 before it changes
    # layout through shared memory (half the bytes)
    barrier = "CHECK-NEXT: tc.barrier" if num_warps > 4 else "CHECK-NOT: tc.barrier"
    filecheck(module_text(m), """
CHECK: tc.for
CHECK: tc.async_wait {pending = {{[12]}}}
CHECK-NEXT: tc.barrier
CHECK-NOT: tc.async_copy
CHECK: %[[D:.*]] = tc.dot {{.*}}asynchronous = true
CHECK-NEXT: %[[W:.*]] = tc.dot_wait %[[D]] {pending = 1}
BARRIER
CHECK: tc.async_copy
CHECK: tc.async_commit_group
CHECK: tc.yield %[[W]],
CHECK: tc.async_wait{{$}}
CHECK-NEXT: %[[RAN:.*]] = tc.cmp %{{.*}}, %K {predicate = "slt"}
CHECK-NEXT: %[[ACC:.*]] = tc.dot_wait %{{[0-9]+}}, %[[RAN]] :
CHECK: %[[H:.*]] = tc.cast %[[ACC]] {kind = "fptrunc"} : tile<128x128xf16, #mma
CHECK-NEXT: tc.convert_layout %[[H]] : tile<128x128xf16, #blocked
CHECK: tc.store
""".replace("BARRIER", barrier))


@pytest.mark.parametrize("persistent", [False, True])
def test_zero_started_accumulator_is_not_written_before_the_first_dot(persistent: bool) -> None:
    """tc_opt.accumulator_init: the in-flight dot's first iteration does not read the accumulator
    (iv != lb), which starts undefined, and the final wait gives zeros when the loop ran no
    iteration (lb < ub false). In a persistent kernel, inside the loop over the programs, it stays
    zero, and the wait takes no such flag (the loop's result is those zeros then)."""
    from tc_nvptx.compiler import frontend_module

    src = (KERNELS / "matmul_tutorial.tc").read_text()
    m = frontend_module(src, {"TYPE": "half", "MB": 128, "NB": 256, "KB": 64}, None, "mt.tc")
    opts = CompileOptions(arch="sm_90", num_warps=8, num_stages=3, specialization=SPEC9,
                          warp_specialize=persistent, persistent=persistent)
    gpu_pipeline(opts).run(m)  # type: ignore[arg-type]
    start = ("CHECK: %[[Z:.*]] = tc.constant {value = 0.0} : tile<128x256xf32, #mma" if persistent else
             "CHECK: %[[Z:.*]] = tc.undef : tile<128x256xf32, #mma")
    filecheck(module_text(m), start + """
CHECK: tc.for %[[LB:[0-9]+]], %K, %{{[0-9]+}}, %[[Z]],
CHECK-NEXT: ^(%[[IV:[0-9]+]]: i32, %[[ACC:[a-z_0-9]+]]:
CHECK: %[[LATER:.*]] = tc.cmp %[[IV]], %[[LB]] {predicate = "ne"} : i1
CHECK-NEXT: tc.dot %{{[0-9]+}}, %{{[0-9]+}}, %[[ACC]], %[[LATER]] {precision = "ieee", asynchronous = true}
""" + ("""CHECK: }) loc(
CHECK-NEXT: tc.dot_wait %{{[0-9]+}} :
""" if persistent else """CHECK: %[[RAN:.*]] = tc.cmp %[[LB]], %K {predicate = "slt"} : i1
CHECK-NEXT: tc.dot_wait %{{[0-9]+}}, %[[RAN]] :
"""))
    assert ("tc.undef" in module_text(m)) != persistent


def test_one_warpgroup_with_three_stages_waits_for_each_dot() -> None:
    from tc_nvptx.compiler import frontend_module

    src = (KERNELS / "matmul_tutorial.tc").read_text()
    m = frontend_module(src, {"TYPE": "half", "MB": 128, "NB": 128, "KB": 64}, None, "mt.tc")
    opts = CompileOptions(arch="sm_90", num_stages=3, specialization=SPEC9, tma=False)  # (cp.async)
    gpu_pipeline(opts).run(m)  # type: ignore[arg-type]
    text = module_text(m)
    # two such programs share an SM and overlap each other: the copies stay before the dot
    assert "asynchronous" not in text and "tc.dot_wait" not in text
    filecheck(text, """
CHECK: tc.barrier
CHECK: tc.async_copy
CHECK: tc.dot
CHECK: tc.yield
""")


def test_scratch_of_disjoint_lifetimes_shares_memory() -> None:
    src = REDUCE.replace("*(rows + rm) = t[:, +];", "*(rows + rm) = t[:, +];\n  *(rows + 32 + rm) = t[:, max];")
    m = _lower(src)
    gpu_pipeline(CompileOptions()).run(m)
    f = m.functions[0]
    users = [op for op in f.walk() if isinstance(op, (ConvertLayoutOp, ReduceOp)) and scratch_bytes(op)]
    assert len(users) >= 2
    alloc = allocate(f)
    assert all(alloc.offsets[op] == 0 for op in users)  # each lives for its own op only
    assert alloc.size == max(scratch_bytes(op) for op in users) < sum(scratch_bytes(op) for op in users)
    assert m.attributes["shared_bytes"] == alloc.size


def test_too_many_registers_is_a_typed_error() -> None:
    check_registers(255, 8, "sm_90")  # 255 x 256 threads fits the 64 K register file
    check_registers(128, 16, "sm_80")
    with pytest.raises(TcResourceError) as info:
        check_registers(255, 16, "sm_80")
    e = info.value
    assert isinstance(e, ResourceLimitError)
    assert (e.resource, e.needed, e.limit, e.unit) == ("registers", 255 * 512, 65536, "32-bit registers")
    assert "num_warps" in e.hint and "E0702" in str(e)


def _banks_per_store(strides: tuple[int, ...], element_bytes: int, rows: range, cols: list[int]) -> int:
    """The most lanes of one warp store that fall in one shared-memory bank (1: no conflict):
    lanes hold rows `rows[lane // 4]`, columns `cols[lane % 4]` (4-byte words)."""
    banks: dict[int, set[int]] = {}
    for lane in range(32):
        r, c = rows[lane // 4], cols[lane % 4]
        word = (r * strides[0] + c * strides[1]) * element_bytes // 4
        banks.setdefault(word % 32, set()).add(word)
    return max(len(words) for words in banks.values())


@pytest.mark.parametrize("shape, element_bytes", [((128, 256), 2), ((128, 128), 4), ((64, 64), 2)])
def test_exchanged_rows_are_padded_against_bank_conflicts(shape: tuple[int, int], element_bytes: int) -> None:
    from tc_opt.shared_alloc import exchange_bytes, exchange_strides

    # a tensor-core accumulator's store to the exchange buffer: lanes cover 8 rows x 4 column
    # pairs (one 32-bit word of fp16 pairs each, two of fp32); row-major rows of a multiple of
    # 128 bytes put all 8 rows in the same 4 banks (an 8-way conflict)
    pair = 4 // element_bytes if element_bytes < 4 else 1
    cols = [pair * i for i in range(4)]
    rows = range(8)
    plain = (shape[1], 1)
    padded = exchange_strides(shape, element_bytes)
    assert _banks_per_store(plain, element_bytes, rows, cols) == 8
    assert _banks_per_store(padded, element_bytes, rows, cols) == 1
    # the buffer holds the padded tile, at most an eighth more than the tile itself
    last = ((shape[0] - 1) * padded[0] + shape[1] - 1) * element_bytes
    assert last < exchange_bytes(shape, element_bytes) <= shape[0] * shape[1] * element_bytes * 9 // 8
    # rows that are not whole bank cycles, or a single row, are not padded
    assert exchange_strides((32, 24), 4) == (24, 1) and exchange_strides((1, 64), 4) == (64, 1)
